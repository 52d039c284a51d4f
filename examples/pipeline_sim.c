/* Example: a pipeline-parallel training job on simulated GPUs, driven by a real Perseus server.
 *
 *   zeus pfo-server --port 7787 --scheduler AllMaxFrequency &
 *   pipeline_sim --server http://127.0.0.1:7787 --pp 4 --microbatches 8 --iterations 40
 *
 * W = dp x pp x tp ranks run as threads of this process. Each rank has its own simulated GPU
 * (the "sim" backend, one GPU per rank, on a virtual clock) and its own Perseus client
 * (zeus_pfo_optimizer): rank 0 registers the job, the job id reaches the other ranks through an
 * in-process collective (zeus_thread_group), and every rank registers its GPU's frequencies and
 * its 1F1B instruction order. The GPUs differ per stage through the DVFS model's parameters: the
 * first stage (embedding; heavier, more memory-bound) and the last stage (LM head and loss; the
 * heaviest, compute-bound) take longer per unit of work than the middle stages, so a good
 * schedule slows the middle stages down. A forward is 1 unit of work, a backward 2.
 *
 * Clocks (see pipeline_sim.h for the details): each rank's GPU has its own virtual clock, which
 * moves only by that GPU's work and idling. A rank that waits for its neighbour's activation or
 * gradient idles its GPU until the neighbour's send time (the time stamped on the message), so
 * waiting costs idle power, as in a real pipeline; at the end of every iteration all ranks idle
 * to the latest clock of all (pipeline flush, optimizer step). So the per-rank clocks never
 * disagree about when a message was available, and every rank's iteration lasts as long.
 *
 * Every --iters-per-round iterations each rank posts its measurements to the server and gets
 * its next schedule. The program prints, per round, the mean iteration time (the same on every
 * rank) and the mean energy of one iteration summed over all GPUs; --json prints a list of
 * rounds instead. Iterations after the last full round are run but not reported. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

#include "opt.h" /* the zeus CLI's option parser (cli/opt.h) */
#include "pipeline_sim.h"


/* The per-stage GPU model. */
static void stage_model(int stage, int pp, zeus_sim_gpu_config *g) {
  memset(g, 0, sizeof *g);
  g->model = ZEUS_SIM_DVFS;
  g->dvfs.time_per_unit_s = 0.010;
  g->dvfs.mem_bound_fraction = 0.25;
  const char *what = "middle stage";
  if (stage == pp - 1) {
    g->dvfs.time_per_unit_s = 0.015, g->dvfs.mem_bound_fraction = 0.15, what = "last stage";
  } else if (stage == 0) {
    g->dvfs.time_per_unit_s = 0.013, g->dvfs.mem_bound_fraction = 0.35, what = "first stage";
  }
  snprintf(g->name, sizeof g->name, "Zeus Simulated GPU (%s)", what);
}

typedef struct shared {
  const char *server, *metadata;
  int dp, pp, tp, world, microbatches;
  long iterations, iters_per_round;
  psim_job *job;
  zeus_thread_group *tg;
  zeus_pfo_round_stats *stats; /* [round][rank] */
  long max_rounds;
} shared;

typedef struct rank_arg {
  shared *sh;
  int rank;
  int rc;
  char err[1024];
} rank_arg;

static int sim_work(void *ctx, double units) { return zeus_sim_work(ctx, 0, units, NULL); }
static int sim_idle(void *ctx, double s) { return zeus_sim_idle(ctx, s); }
static double sim_now(void *ctx) { return zeus_sim_now(ctx); }

static void *rank_main(void *p) {
  rank_arg *a = p;
  shared *sh = a->sh;
  psim_rank r;
  zeus_devices *dev = NULL;
  zeus_pfo_optimizer *opt = NULL;
  zeus_collective coll;
  zeus_sim_gpu_config gpu;
  int rc = psim_rank_init(&r, sh->job, a->rank);
  if (!rc) {
    stage_model(r.pp, sh->pp, &gpu);
    zeus_sim_config cfg = {.num_gpus = 1, .gpus = &gpu, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
    zeus_devices_opts dopts = {.backend = "sim", .sim = &cfg, .all_devices = true};
    rc = zeus_devices_open(&dev, &dopts);
  }
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer_opts_init(&o);
  if (!rc) rc = zeus_pfo_optimizer_opts_from_env(&o);
  if (!rc) rc = zeus_thread_group_collective(sh->tg, a->rank, &coll);
  if (!rc) {
    o.rank = a->rank, o.dp_rank = r.dp, o.pp_rank = r.pp, o.tp_rank = r.tp;
    o.dp_degree = sh->dp, o.pp_degree = sh->pp, o.tp_degree = sh->tp, o.world_size = sh->world;
    o.devices = dev;
    o.device_id = 0;
    if (sh->server) o.server_url = sh->server;
    if (sh->metadata) o.job_metadata = sh->metadata;
    if (sh->iters_per_round > 0) o.iters_per_round = sh->iters_per_round;
    o.collective = &coll;
    o.pipe_schedule = r.names;
    o.n_pipe_schedule = r.n;
    rc = zeus_pfo_optimizer_open(&opt, &o);
  }
  if (rc) psim_job_abort(sh->job); /* open is collective: every rank fails there together */
  if (!rc) {
    zeus_sim_node *node = zeus_devices_sim_node(dev);
    r.gpu = (psim_gpu){node, sim_work, sim_idle, sim_now};
    r.opt = opt;
    long seen = -1;
    for (long i = 0; i < sh->iterations && !rc; i++) {
      rc = psim_iteration(&r);
      zeus_pfo_round_stats st;
      zeus_pfo_last_round(opt, &st);
      if (!rc && st.round > seen && st.round < sh->max_rounds) {
        sh->stats[st.round * sh->world + a->rank] = st;
        seen = st.round;
      }
    }
  }
  if (rc) snprintf(a->err, sizeof a->err, "%s", zeus_errmsg());
  a->rc = rc;
  zeus_pfo_optimizer_close(opt);
  zeus_devices_close(dev);
  psim_rank_free(&r);
  return NULL;
}

static shared job_sh = {.dp = 1, .tp = 1};
static long opt_pp, opt_dp = 1, opt_tp = 1, opt_mb, opt_iters, opt_k;
static bool opt_json;

static const cli_opt opts[] = {
    {"server", 0, CLI_OPT_STRING, &job_sh.server, "URL", "the Perseus server", "ZEUS_PFO_SERVER_URL"},
    {"pp", 0, CLI_OPT_LONG, &opt_pp, "P", "pipeline-parallel degree (stages)", NULL, 1, 64, .required = true},
    {"dp", 0, CLI_OPT_LONG, &opt_dp, "D", "data-parallel degree", "1", 1, 64},
    {"tp", 0, CLI_OPT_LONG, &opt_tp, "T", "tensor-parallel degree", "1", 1, 64},
    {"microbatches", 0, CLI_OPT_LONG, &opt_mb, "M", "microbatches per iteration", NULL, 1, 10000,
     .required = true},
    {"iterations", 0, CLI_OPT_LONG, &opt_iters, "N", "iterations to run", NULL, 1, 1e7, .required = true},
    {"iters-per-round", 0, CLI_OPT_LONG, &opt_k, "K",
     "iterations per profiling round; each round ends with the results posted and the next schedule "
     "fetched",
     "ZEUS_PFO_ITERS_PER_ROUND, else 10", 1, 100000},
    {"job-metadata", 0, CLI_OPT_STRING, &job_sh.metadata, "TEXT", "appended to the job id by the server"},
    {"json", 0, CLI_OPT_FLAG, &opt_json, NULL,
     "print one JSON document: [{\"round\", \"iterations\", \"iter_time_s\", \"iter_energy_j\"}, ...]"},
    {0},
};

static const cli_command cmd = {
    .name = "pipeline_sim",
    .program = "pipeline_sim",
    .usage = "pipeline_sim --server URL --pp P [--dp D] [--tp T] --microbatches M --iterations N\n"
             "             [--iters-per-round K] [--job-metadata TEXT] [--json]",
    .about = "Simulates a pipeline-parallel training job (synchronous 1F1B, M microbatches) whose\n"
             "D x P x T ranks are threads, each with its own simulated GPU on a virtual clock and its\n"
             "own Perseus client, against a running Perseus server (zeus pfo-server). Ranks waiting\n"
             "for a neighbour idle their GPU until the neighbour's send time; all ranks meet at the\n"
             "end of each iteration. The first and last stages' GPUs are slower per unit of work\n"
             "than the middle ones. Prints each round's mean iteration time and the energy of one\n"
             "iteration summed over all GPUs.",
    .opts = opts,
    .more = "Environment: the client's settings ZEUS_PFO_SERVER_URL, ZEUS_PFO_ITERS_PER_ROUND,\n"
            "ZEUS_PFO_CONNECT_TIMEOUT, ZEUS_PFO_REQUEST_TIMEOUT, ZEUS_PFO_SCHEDULE_TIMEOUT,\n"
            "ZEUS_PFO_RETRIES, ZEUS_PFO_RETRY_BACKOFF, ZEUS_PFO_TOKEN, ZEUS_PFO_PROFILE_INSTRUCTIONS\n"
            "(each also as PERSEUS_<NAME>); ZEUS_LOG_LEVEL for log lines on stderr.\n\n"
            "Example:\n"
            "  zeus pfo-server --port 7787 --scheduler InstructionProfiler \\\n"
            "      --scheduler-args '{\"warmup_iters\": 1, \"min_frequency\": 1200}' --dump-data &\n"
            "  pipeline_sim --server http://127.0.0.1:7787 --pp 4 --microbatches 8 \\\n"
            "      --iterations 200 --iters-per-round 5\n"
            "  # then: dump/<job_id>/instruction_profile.csv\n",
    .args = CLI_ARGS_NONE,
};

int main(int argc, char **argv) {
  int rc = cli_parse(&cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  shared sh = job_sh;
  long pp = opt_pp, dp = opt_dp, tp = opt_tp, mb = opt_mb, iters = opt_iters, k = opt_k;
  bool json = opt_json;
  if (dp * pp * tp > 512) {
    fprintf(stderr, "pipeline_sim: %ld ranks is too many for one process (at most 512)\n", dp * pp * tp);
    return 2;
  }
  if (zeus_log_init_stderr(NULL)) {
    fprintf(stderr, "pipeline_sim: %s\n", zeus_errmsg());
    return 2;
  }
  zeus_pfo_optimizer_opts defaults;
  zeus_pfo_optimizer_opts_init(&defaults);
  if (zeus_pfo_optimizer_opts_from_env(&defaults)) {
    fprintf(stderr, "pipeline_sim: %s\n", zeus_errmsg());
    return 2;
  }
  if (!sh.server && !defaults.server_url) {
    fprintf(stderr, "pipeline_sim: give the Perseus server with --server URL or ZEUS_PFO_SERVER_URL\n");
    return 2;
  }
  sh.dp = (int)dp, sh.pp = (int)pp, sh.tp = (int)tp, sh.world = (int)(dp * pp * tp);
  sh.microbatches = (int)mb, sh.iterations = iters, sh.iters_per_round = k;
  long per_round = k > 0 ? k : defaults.iters_per_round;
  sh.max_rounds = iters / per_round;
  sh.stats = calloc((size_t)(sh.max_rounds ? sh.max_rounds : 1) * (size_t)sh.world, sizeof *sh.stats);
  rank_arg *args = calloc((size_t)sh.world, sizeof *args);
  pthread_t *th = calloc((size_t)sh.world, sizeof *th);
  if (!sh.stats || !args || !th || psim_job_open(&sh.job, sh.dp, sh.pp, sh.tp, sh.microbatches) ||
      zeus_thread_group_open(&sh.tg, sh.world)) {
    fprintf(stderr, "pipeline_sim: %s\n", zeus_errmsg());
    return 1;
  }
  int started = 0;
  for (int r = 0; r < sh.world; r++) {
    args[r] = (rank_arg){.sh = &sh, .rank = r};
    if (pthread_create(&th[r], NULL, rank_main, &args[r]) != 0) {
      fprintf(stderr, "pipeline_sim: cannot start the thread of rank %d\n", r);
      return 1; /* the started ranks wait in the collective; exiting ends them */
    }
    started++;
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  int status = 0;
  for (int r = 0; r < sh.world; r++)
    if (args[r].rc) {
      fprintf(stderr, "pipeline_sim: rank %d: %s\n", r, args[r].err);
      status = 1;
    }
  if (!status) {
    json_t *rounds = json ? json_array() : NULL;
    if (!json) printf("%-6s %-11s %-14s %-14s\n", "round", "iterations", "iter_time_s", "iter_energy_j");
    for (long rd = 0; rd < sh.max_rounds; rd++) {
      double t = 0, e = 0;
      long n = 0;
      for (int r = 0; r < sh.world; r++) {
        const zeus_pfo_round_stats *st = &sh.stats[rd * sh.world + r];
        if (st->iter_time_s > t) t = st->iter_time_s;
        e += st->iter_energy_j;
        n = st->iterations;
      }
      if (json)
        json_array_append_new(rounds, json_pack("{s:I,s:I,s:f,s:f}", "round", (json_int_t)rd, "iterations",
                                                (json_int_t)n, "iter_time_s", t, "iter_energy_j", e));
      else printf("%-6ld %-11ld %-14.6f %-14.3f\n", rd, n, t, e);
    }
    if (json) {
      char *text = zeus_json_dumps(rounds, JSON_INDENT(2));
      if (text) printf("%s\n", text);
      else status = 1;
      zeus_free(text);
      json_decref(rounds);
    }
  }
  zeus_thread_group_close(sh.tg);
  psim_job_close(sh.job);
  free(sh.stats);
  free(args);
  free(th);
  return status;
}
