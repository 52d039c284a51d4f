/* zeus pfo-server: the Perseus frequency-schedule server. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void help(FILE *out) {
  fprintf(out,
          "usage: zeus pfo-server [--host ADDR] [--port N] [--scheduler NAME] [--scheduler-args JSON]\n"
          "                       [--log-level LEVEL] [--dump-data] [--dump-dir DIR]\n"
          "                       [--max-job-idle-time S] [--token TOKEN] [--max-body BYTES] [--threads N]\n\n"
          "Serves per-instruction GPU frequency schedules to the ranks of pipeline-parallel training\n"
          "jobs (Perseus) and collects their profiling results each round. Speaks the original\n"
          "Perseus routes: GET /info, POST /register_job, POST /register_rank/{job_id},\n"
          "GET /schedule/{job_id}?rank=N (waits until every rank has asked), POST /result/{job_id}.\n"
          "Runs until SIGINT or SIGTERM.\n\n"
          "Options (override the environment):\n"
          "  --host ADDR            address to listen on (default 127.0.0.1)\n"
          "  --port N               port (default 7787; 0 picks a free one and prints it)\n"
          "  --scheduler NAME       PointSolution | AllMaxFrequency | InstructionProfiler, or one of\n"
          "                         them with the suffix 3D (default PointSolution)\n"
          "  --scheduler-args JSON  the scheduler's arguments, a JSON object\n"
          "  --log-level LEVEL      error | warn | info | debug (default info)\n"
          "  --dump-data            write <dump-dir>/<job_id>/ranks.json, N.sched.json, N.prof.json\n"
          "  --dump-dir DIR         where dumps go (default ./dump)\n"
          "  --max-job-idle-time S  remove jobs idle for longer (default 604800 s)\n"
          "  --token TOKEN          require 'Authorization: Bearer TOKEN' (401 otherwise)\n"
          "  --max-body BYTES       largest request body (default 16777216; larger: 413)\n"
          "  --threads N            HTTP threads (default: online CPUs, at most 8)\n\n"
          "Environment (each also read as PERSEUS_<NAME>, e.g. PERSEUS_SCHEDULER):\n"
          "  ZEUS_PFO_SCHEDULER, ZEUS_PFO_SCHEDULER_ARGS, ZEUS_PFO_LOG_LEVEL, ZEUS_PFO_DUMP_DATA,\n"
          "  ZEUS_PFO_DUMP_DIR, ZEUS_PFO_MAX_JOB_IDLE_TIME, ZEUS_PFO_TOKEN: as the options above.\n\n"
          "Example:\n"
          "  ZEUS_PFO_SCHEDULER=PointSolution \\\n"
          "  ZEUS_PFO_SCHEDULER_ARGS='{\"solution_path\": \"freqs_pipeline_00042.py\"}' \\\n"
          "  zeus pfo-server --port 7787 --dump-data --dump-dir /tmp/perseus-dump\n");
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { (void)sig; g_stop = 1; }

int cmd_pfo_server(int argc, char **argv) {
  const char *cmd = "pfo-server";
  if (cli_wants_help(argc, argv)) { help(stdout); return CLI_EXIT_OK; }
  zeus_pfo_server_opts o = {0};
  o.log_level = "info";
  if (zeus_pfo_server_opts_from_env(&o)) { cli_error(cmd, true, "bad environment"); return CLI_EXIT_USAGE; }
  long v;
  bool port_given = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL() do { if (!val) { cli_error(cmd, false, "%s needs a value", a); return CLI_EXIT_USAGE; } i++; } while (0)
    if (!strcmp(a, "--host")) { NEED_VAL(); o.host = val; }
    else if (!strcmp(a, "--port")) {
      NEED_VAL();
      if (!cli_parse_long(cmd, a, val, 0, 65535, &v)) return CLI_EXIT_USAGE;
      o.port = v == 0 ? -1 : (int)v;
      port_given = true;
    }
    else if (!strcmp(a, "--scheduler")) { NEED_VAL(); o.scheduler = val; }
    else if (!strcmp(a, "--scheduler-args")) { NEED_VAL(); o.scheduler_args = val; }
    else if (!strcmp(a, "--log-level")) { NEED_VAL(); o.log_level = val; }
    else if (!strcmp(a, "--dump-data")) o.dump_data = true;
    else if (!strcmp(a, "--dump-dir")) { NEED_VAL(); o.dump_dir = val; }
    else if (!strcmp(a, "--max-job-idle-time")) {
      NEED_VAL();
      if (!cli_parse_long(cmd, a, val, 1, 2000000000L, &v)) return CLI_EXIT_USAGE;
      o.max_job_idle_time_s = (int)v;
    }
    else if (!strcmp(a, "--token")) { NEED_VAL(); o.token = val; }
    else if (!strcmp(a, "--max-body")) {
      NEED_VAL();
      if (!cli_parse_long(cmd, a, val, 1024, 1L << 30, &v)) return CLI_EXIT_USAGE;
      o.max_body_bytes = (size_t)v;
    }
    else if (!strcmp(a, "--threads")) {
      NEED_VAL();
      if (!cli_parse_long(cmd, a, val, 1, 64, &v)) return CLI_EXIT_USAGE;
      o.threads = (int)v;
    }
    else { cli_error(cmd, false, "unknown option '%s' (see --help)", a); return CLI_EXIT_USAGE; }
#undef NEED_VAL
  }
  (void)port_given;
  int lvl;
  if (zeus_log_level_parse(o.log_level, &lvl)) { cli_error(cmd, true, "--log-level"); return CLI_EXIT_USAGE; }
  zeus_set_log_callback(zeus_log_stderr_sink, NULL);
  zeus_set_log_level(lvl);
  if (zeus_pfo_check_scheduler(o.scheduler ? o.scheduler : "PointSolution", o.scheduler_args)) {
    cli_error(cmd, true, "bad scheduler settings");
    return CLI_EXIT_USAGE;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* Only this thread takes the signals: block them while the server's threads start. */
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, &old);
  zeus_pfo_server *srv;
  int rc = zeus_pfo_server_open(&srv, &o);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) { cli_error(cmd, true, "cannot start"); return CLI_EXIT_FAIL; }
  printf("zeus pfo-server: listening on %s port %d\n", o.host ? o.host : "127.0.0.1", zeus_pfo_server_port(srv));
  fflush(stdout);
  while (!g_stop) pause();
  fprintf(stderr, "zeus pfo-server: shutting down\n");
  zeus_pfo_server_close(srv);
  return CLI_EXIT_OK;
}
