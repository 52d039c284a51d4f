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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

#include "pipeline_sim.h"

static void usage(FILE *out) {
  fprintf(out,
          "usage: pipeline_sim --server URL --pp P [--dp D] [--tp T] --microbatches M --iterations N\n"
          "                    [--iters-per-round K] [--job-metadata TEXT] [--json]\n\n"
          "Simulates a pipeline-parallel training job (synchronous 1F1B, M microbatches) whose\n"
          "D x P x T ranks are threads, each with its own simulated GPU on a virtual clock and its\n"
          "own Perseus client, against a running Perseus server (zeus pfo-server). Ranks waiting for\n"
          "a neighbour idle their GPU until the neighbour's send time; all ranks meet at the end of\n"
          "each iteration. The first and last stages' GPUs are slower per unit of work than the\n"
          "middle ones. Prints each round's mean iteration time and the energy of one iteration\n"
          "summed over all GPUs.\n\n"
          "Options:\n"
          "  --server URL           the Perseus server (default: ZEUS_PFO_SERVER_URL)\n"
          "  --pp P, --dp D, --tp T pipeline, data and tensor parallel degrees (D, T default 1)\n"
          "  --microbatches M       microbatches per iteration\n"
          "  --iterations N         iterations to run\n"
          "  --iters-per-round K    iterations per profiling round (default: ZEUS_PFO_ITERS_PER_ROUND\n"
          "                         or 10); each round ends with results posted, next schedule fetched\n"
          "  --job-metadata TEXT    appended to the job id by the server\n"
          "  --json                 print [{\"round\": r, \"iter_time_s\": t, \"iter_energy_j\": e}, ...]\n\n"
          "Environment: the client's settings ZEUS_PFO_SERVER_URL, ZEUS_PFO_ITERS_PER_ROUND,\n"
          "ZEUS_PFO_CONNECT_TIMEOUT, ZEUS_PFO_REQUEST_TIMEOUT, ZEUS_PFO_SCHEDULE_TIMEOUT,\n"
          "ZEUS_PFO_RETRIES, ZEUS_PFO_RETRY_BACKOFF, ZEUS_PFO_TOKEN, ZEUS_PFO_PROFILE_INSTRUCTIONS\n"
          "(each also as PERSEUS_<NAME>); ZEUS_LOG_LEVEL for log lines on stderr.\n\n"
          "Example:\n"
          "  zeus pfo-server --port 7787 --scheduler InstructionProfiler \\\n"
          "      --scheduler-args '{\"warmup_iters\": 1, \"min_frequency\": 1200}' --dump-data &\n"
          "  pipeline_sim --server http://127.0.0.1:7787 --pp 4 --microbatches 8 --iterations 200 \\\n"
          "      --iters-per-round 5\n"
          "  # then: dump/<job_id>/instruction_profile.csv\n");
}

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

static bool parse_long(const char *opt, const char *v, long min, long max, long *out) {
  char *end;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || end == v || *end || x < min || x > max) {
    fprintf(stderr, "pipeline_sim: %s expects an integer in %ld..%ld, got '%s'\n", opt, min, max, v ? v : "");
    return false;
  }
  *out = x;
  return true;
}

int main(int argc, char **argv) {
  shared sh = {.dp = 1, .tp = 1};
  long pp = 0, dp = 1, tp = 1, mb = 0, iters = 0, k = 0;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--json")) json = true;
    else if (!strcmp(a, "--server") && v) sh.server = v, i++;
    else if (!strcmp(a, "--job-metadata") && v) sh.metadata = v, i++;
    else if (!strcmp(a, "--pp")) { if (!parse_long(a, v, 1, 64, &pp)) return 2; i++; }
    else if (!strcmp(a, "--dp")) { if (!parse_long(a, v, 1, 64, &dp)) return 2; i++; }
    else if (!strcmp(a, "--tp")) { if (!parse_long(a, v, 1, 64, &tp)) return 2; i++; }
    else if (!strcmp(a, "--microbatches")) { if (!parse_long(a, v, 1, 10000, &mb)) return 2; i++; }
    else if (!strcmp(a, "--iterations")) { if (!parse_long(a, v, 1, 10000000, &iters)) return 2; i++; }
    else if (!strcmp(a, "--iters-per-round")) { if (!parse_long(a, v, 1, 100000, &k)) return 2; i++; }
    else {
      fprintf(stderr, "pipeline_sim: unknown option or missing value: '%s' (see --help)\n", a);
      return 2;
    }
  }
  if (!pp || !mb || !iters) {
    fprintf(stderr, "pipeline_sim: --pp, --microbatches and --iterations are required (see --help)\n");
    return 2;
  }
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
    if (json) printf("[");
    else printf("%-6s %-11s %-14s %-14s\n", "round", "iterations", "iter_time_s", "iter_energy_j");
    for (long rd = 0; rd < sh.max_rounds; rd++) {
      double t = 0, e = 0;
      long n = 0;
      for (int r = 0; r < sh.world; r++) {
        const zeus_pfo_round_stats *st = &sh.stats[rd * sh.world + r];
        if (st->iter_time_s > t) t = st->iter_time_s;
        e += st->iter_energy_j;
        n = st->iterations;
      }
      if (json) printf("%s{\"round\": %ld, \"iter_time_s\": %.9g, \"iter_energy_j\": %.9g}", rd ? ", " : "", rd, t, e);
      else printf("%-6ld %-11ld %-14.6f %-14.3f\n", rd, n, t, e);
    }
    if (json) printf("]\n");
  }
  zeus_thread_group_close(sh.tg);
  psim_job_close(sh.job);
  free(sh.stats);
  free(args);
  free(th);
  return status;
}
