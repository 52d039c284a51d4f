/* zeus pfo-server: the Perseus frequency-schedule server. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static zeus_pfo_server_opts srv_opts;
static int port_opt;
static long max_body, max_job_memory, max_memory;
static bool port_given, max_body_given, token_given, token_file_given;
static bool max_job_memory_given, max_memory_given;

static const cli_opt server_opts[] = {
    {"host", 0, CLI_OPT_STRING, &srv_opts.host, "ADDR", "address to listen on", "127.0.0.1"},
    {"port", 0, CLI_OPT_INT, &port_opt, "N", "port; 0 picks a free one and prints it", "7787", 0,
     65535, .seen = &port_given},
    {"scheduler", 0, CLI_OPT_STRING, &srv_opts.scheduler, "NAME",
     "PointSolution | AllMaxFrequency | InstructionProfiler, or one of them with\n"
     "the suffix 3D; or Perseus (profiles, solves and deploys in the server, and\n"
     "follows stragglers: docs/perseus.md)",
     "PointSolution"},
    {"scheduler-args", 0, CLI_OPT_STRING, &srv_opts.scheduler_args, "JSON",
     "the scheduler's arguments, a JSON object", "{}"},
    {"log-level", 0, CLI_OPT_STRING, &srv_opts.log_level, "LEVEL", "error | warn | info | debug",
     "info"},
    {"dump-data", 0, CLI_OPT_FLAG, &srv_opts.dump_data, NULL,
     "write <dump-dir>/<job_id>/ranks.json, N.sched.json, N.prof.json"},
    {"dump-dir", 0, CLI_OPT_STRING, &srv_opts.dump_dir, "DIR", "where dumps go", "./dump"},
    {"max-job-idle-time", 0, CLI_OPT_INT, &srv_opts.max_job_idle_time_s, "S",
     "remove jobs idle for longer", "604800", 1, 2000000000},
    {"token-file", 0, CLI_OPT_STRING, &srv_opts.token_file, "FILE",
     "require 'Authorization: Bearer TOKEN' (401 otherwise), TOKEN being the first line of FILE\n"
     "(a regular file; a warning when other users may read it)",
     .seen = &token_file_given, .heading = "Access:"},
    {"token", 0, CLI_OPT_STRING, &srv_opts.token, "TOKEN",
     "the same with the token on the command line, where every local user can read it in the\n"
     "process list until the server has started: prefer --token-file or ZEUS_PFO_TOKEN. An empty\n"
     "token is refused",
     .seen = &token_given},
    {"require-rank-tokens", 0, CLI_OPT_FLAG, &srv_opts.require_rank_tokens, NULL,
     "refuse ranks that register without a rank credential (X-Zeus-Rank-Token, sent by the\n"
     "libzeus client); clients of the original Perseus send none and are then refused"},
    {"max-connections", 0, CLI_OPT_INT, &srv_opts.max_connections, "N",
     "connections at once, and at most the descriptor limit (raised to the hard limit) less a\n"
     "reserve; past N less 1/16 of it, new connections get 503 except registration",
     "32768", 16, 1000000, .heading = "Bounds:"},
    {"idle-timeout", 0, CLI_OPT_DOUBLE, &srv_opts.idle_timeout_s, "S",
     "close a connection idle for S seconds between requests (a waiting schedule request is not\n"
     "idle; one whose client went away is dropped within a second)",
     "60", 1, 86400},
    {"request-timeout", 0, CLI_OPT_DOUBLE, &srv_opts.request_timeout_s, "S",
     "close a connection that has not sent a whole request (headers and body) within S seconds\n"
     "of opening, or within --idle-timeout plus S of its previous reply: a request trickling in\n"
     "a byte at a time no longer keeps its connection",
     "10", 0.1, 86400},
    {"max-slow-per-client", 0, CLI_OPT_INT, &srv_opts.max_slow_per_client, "N",
     "connections one client may hold without a whole request after --slow-after although the\n"
     "server has read all they sent; past N the newest are cut and new ones refused (503), before\n"
     "any header is read, so that trickling connections cannot take the slots kept for\n"
     "registration. A client as for --max-jobs-per-client; root is exempt. A rank sends its\n"
     "request as it connects, so even an 8,192-rank job holds none",
     "64", 1, 1000000},
    {"slow-after", 0, CLI_OPT_DOUBLE, &srv_opts.slow_after_s, "S",
     "a connection without a whole request after S seconds counts as slow (see\n"
     "--max-slow-per-client)", "1", 0.1, 3600},
    {"max-jobs", 0, CLI_OPT_INT, &srv_opts.max_jobs, "N", "jobs held at once (more: 503)", "1024",
     1, 1000000},
    {"max-jobs-per-client", 0, CLI_OPT_INT, &srv_opts.max_jobs_per_client, "N",
     "jobs one client holds at once (more: 503 naming it); a client is the uid of a loopback\n"
     "connection (any address of 127.0.0.0/8), else the address", "a quarter of --max-jobs", 1, 1000000},
    {"reserved-jobs", 0, CLI_OPT_INT, &srv_opts.reserved_jobs, "N",
     "the last N slots of --max-jobs only for clients that hold no job", "--max-jobs / 16", 1, 1000000},
    {"max-job-memory", 0, CLI_OPT_LONG, &max_job_memory, "BYTES",
     "estimated memory one job may hold: its ranks, schedules and the round's results (more: 413)",
     "268435456", 1048576, 1099511627776.0, .seen = &max_job_memory_given},
    {"max-memory", 0, CLI_OPT_LONG, &max_memory, "BYTES",
     "the same for all jobs together (more: 413)", "1073741824", 1048576, 1099511627776.0,
     .seen = &max_memory_given},
    {"max-body", 0, CLI_OPT_LONG, &max_body, "BYTES", "largest request body (larger: 413)",
     "16777216", 1024, 1073741824, .seen = &max_body_given},
    {"threads", 0, CLI_OPT_INT, &srv_opts.threads, "N", "HTTP threads", "online CPUs, at most 8", 1,
     64},
    {"solver-threads", 0, CLI_OPT_INT, &srv_opts.solver_threads, "N",
     "threads that solve Perseus frontiers (never an HTTP thread)", "1", 1, 16},
    {0},
};

static const cli_command server_cmd = {
    .name = "pfo-server",
    .usage =
        "zeus pfo-server [--host ADDR] [--port N] [--scheduler NAME] [--scheduler-args JSON]\n"
        "                [--log-level LEVEL] [--dump-data] [--dump-dir DIR]\n"
        "                [--max-job-idle-time S] [--token-file FILE | --token TOKEN]\n"
        "                [--require-rank-tokens] [--max-connections N] [--idle-timeout S]\n"
        "                [--request-timeout S] [--max-slow-per-client N] [--slow-after S]\n"
        "                [--max-jobs N] [--max-jobs-per-client N] [--reserved-jobs N]\n"
        "                [--max-job-memory BYTES] [--max-memory BYTES]\n"
        "                [--max-body BYTES] [--threads N] [--solver-threads N]",
    .about =
        "Serves per-instruction GPU frequency schedules to the ranks of pipeline-parallel\n"
        "training jobs (Perseus) and collects their profiling results each round. Speaks the\n"
        "original Perseus routes: GET /info, POST /register_job, POST /register_rank/{job_id},\n"
        "GET /schedule/{job_id}?rank=N (waits until every rank has asked), POST\n"
        "/result/{job_id}; and GET /metrics, its jobs, ranks, rounds and requests in the\n"
        "Prometheus text format (docs/metrics.md). Runs until SIGINT or SIGTERM. Options override\n"
        "the environment.\n"
        "\n"
        "The default scheduler, PointSolution, serves one plan and needs its file\n"
        "(--scheduler-args '{\"solution_path\": \"plans/freqs_pipeline_00042.py\"}', a plan that\n"
        "'zeus frontier --out plans' wrote). To just try the server, --scheduler AllMaxFrequency\n"
        "needs no arguments (every GPU at its highest clock), and --scheduler\n"
        "InstructionProfiler profiles each stage's clocks round by round.\n"
        "\n"
        "--scheduler Perseus does the whole loop while the job trains: it profiles as\n"
        "InstructionProfiler does, solves the time-energy frontier on a solver thread, deploys\n"
        "the least-energy plan at the fastest iteration time (or under target_time_s, or within\n"
        "max_slowdown), and moves the other data-parallel pipelines to the frontier point at a\n"
        "straggler's time while one is slow. Its profile, frontier, plans and the reasons for\n"
        "them are served under GET /perseus/{job_id} and written to the job's dump folder.\n"
        "\n"
        "Jobs are kept apart: a job id ends in a random part only its ranks learn, and a rank\n"
        "that registers with a credential (the libzeus client always does) must show it on every\n"
        "later request. A rank that leaves (POST /leave/{job_id}) or dies (the GET /presence it\n"
        "holds open closes) is reported at once to every other rank of its job. Everything a\n"
        "client can make the server hold is bounded (see\n"
        "Bounds); dumps go to a folder only this user may write, without following symlinks.",
    .opts = server_opts,
    .more =
        "Environment (each also read as PERSEUS_<NAME>, e.g. PERSEUS_SCHEDULER):\n"
        "  ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS, ZEUS_PFO_LOG_LEVEL, ZEUS_PFO_DUMP_DATA,\n"
        "  ZEUS_PFO_DUMP_DIR, ZEUS_PFO_MAX_JOB_IDLE_TIME, ZEUS_PFO_TOKEN, ZEUS_PFO_TOKEN_FILE,\n"
        "  ZEUS_PFO_REQUIRE_RANK_TOKENS, ZEUS_PFO_MAX_CONNECTIONS, ZEUS_PFO_IDLE_TIMEOUT,\n"
        "  ZEUS_PFO_REQUEST_TIMEOUT, ZEUS_PFO_MAX_SLOW_PER_CLIENT, ZEUS_PFO_SLOW_AFTER,\n"
        "  ZEUS_PFO_MAX_JOBS, ZEUS_PFO_MAX_JOBS_PER_CLIENT, ZEUS_PFO_RESERVED_JOBS,\n"
        "  ZEUS_PFO_MAX_JOB_MEMORY, ZEUS_PFO_MAX_MEMORY: as the options above\n"
        "  (a token variable set but empty is refused).\n"
        "  (ZEUS_GPU_BACKEND does not matter: the server touches no GPU.)\n"
        "\n"
        "Examples:\n"
        "  zeus pfo-server --scheduler AllMaxFrequency       # try it: no plan needed\n"
        "  ZEUS_PFO_SCHEDULER=PointSolution \\\n"
        "  ZEUS_PFO_SCHEDULER_ARGS='{\"solution_path\": \"plans/freqs_pipeline_00042.py\"}' \\\n"
        "  zeus pfo-server --port 7787 --dump-data --dump-dir ~/perseus-dump\n"
        "  zeus pfo-server --host 10.0.0.5 --token-file ~/.config/perseus-token "
        "--require-rank-tokens\n"
        "  zeus pfo-server --scheduler Perseus --scheduler-args '{\"warmup_iters\": 1}' "
        "--dump-data\n"
        "  curl localhost:7787/perseus/<job_id>            # phase, plans and why, stragglers\n",
    .args = CLI_ARGS_NONE,
};

int cmd_pfo_server(int argc, char **argv) {
  const char *cmd = "pfo-server";
  srv_opts = (zeus_pfo_server_opts){.log_level = "info"};
  if (zeus_pfo_server_opts_from_env(&srv_opts)) {
    cli_error(cmd, true, "bad environment");
    return CLI_EXIT_USAGE;
  }
  port_opt = srv_opts.port;
  int rc = cli_parse(&server_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  if (port_given) srv_opts.port = port_opt == 0 ? -1 : port_opt;
  if (max_body_given) srv_opts.max_body_bytes = (size_t)max_body;
  if (max_job_memory_given) srv_opts.max_job_memory_bytes = (size_t)max_job_memory;
  if (max_memory_given) srv_opts.max_memory_bytes = (size_t)max_memory;
  if (token_given && token_file_given) {
    cli_error(cmd, false, "give --token or --token-file, not both");
    return CLI_EXIT_USAGE;
  }
  if (token_given) srv_opts.token_file = NULL; /* a flag wins over the environment */
  if (token_file_given) srv_opts.token = NULL;
  char *token_copy = NULL;
  if (token_given) {
    if (!*srv_opts.token) {
      cli_error(cmd, false, "--token: an empty token would turn authentication off; "
                "leave --token out for none");
      return CLI_EXIT_USAGE;
    }
    /* Keep a copy and blank the argument, so that the process list shows it no longer. */
    if (!(token_copy = strdup(srv_opts.token))) {
      cli_error(cmd, false, "out of memory");
      return CLI_EXIT_FAIL;
    }
    memset((char *)srv_opts.token, 'x', strlen(srv_opts.token));
    srv_opts.token = token_copy;
    fprintf(stderr, "zeus pfo-server: warning: --token shows the token to every local user in the "
            "process list while the server starts; use --token-file or ZEUS_PFO_TOKEN\n");
  }
  zeus_pfo_server_opts o = srv_opts;
  int lvl;
  if (zeus_log_level_parse(o.log_level, &lvl)) {
    cli_error(cmd, true, "--log-level");
    return CLI_EXIT_USAGE;
  }
  zeus_set_log_callback(zeus_log_stderr_sink, NULL);
  zeus_set_log_level(lvl);
  const char *sched = o.scheduler ? o.scheduler : "PointSolution";
  if (zeus_pfo_check_scheduler(sched, o.scheduler_args)) {
    cli_error(cmd, true, "bad scheduler settings");
    if (strncmp(sched, "PointSolution", 13) == 0)
      fprintf(stderr,
              "zeus pfo-server: PointSolution serves a plan that 'zeus frontier --out DIR' wrote:\n"
              "  --scheduler-args '{\"solution_path\": \"DIR/freqs_pipeline_00000.py\"}'.\n"
              "To just try the server, use --scheduler AllMaxFrequency (no arguments needed).\n");
    return CLI_EXIT_USAGE;
  }
  cli_serve_block_signals();
  zeus_pfo_server *srv;
  rc = zeus_pfo_server_open(&srv, &o);
  if (rc) {
    cli_error(cmd, true, "cannot start");
    free(token_copy);
    return CLI_EXIT_FAIL;
  }
  printf("zeus pfo-server: listening on %s port %d\n", o.host ? o.host : "127.0.0.1",
         zeus_pfo_server_port(srv));
  fflush(stdout);
  cli_serve_wait();
  fprintf(stderr, "zeus pfo-server: shutting down\n");
  zeus_pfo_server_close(srv);
  free(token_copy);
  return CLI_EXIT_OK;
}
