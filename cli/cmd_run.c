/* zeus run: a recurring training job under the batch-size optimizer, its state in SQLite. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define CMD "run"
#define MAX_LIST 256

static void usage(FILE *out) {
  fprintf(out,
          "usage: zeus run [options] -- COMMAND [ARGS...]\n"
          "       zeus run --spec JOB.json [options]\n\n"
          "Runs a recurring training job: each recurrence launches COMMAND with the batch size the\n"
          "batch-size optimizer picks (pruning exploration, then Gaussian Thompson sampling) and the\n"
          "ZEUS_* environment of the training-side protocol (zeus_job in <zeus/bso.h>); the trainee\n"
          "profiles the GPU power limits, stops early when its cost would pass beta x the best cost\n"
          "so far, and writes its result, whose cost the optimizer learns. A try that misses the target\n"
          "is retried (up to --max-tries per recurrence). The trainee's output goes to the terminal and\n"
          "to <job folder>/rec<N>+try<M>.train.log.\n\n"
          "Everything learnt is kept in SQLite (--state; default: state.sqlite in the job folder, the\n"
          "latest folder of the same job and knobs under --log-base being continued), committed after\n"
          "every try: a later 'zeus run' continues where this one stopped, and a crash loses no\n"
          "finished try. Two runs of N and M recurrences give the same history as one of N + M.\n\n"
          "Placeholders in COMMAND's arguments: {bs} {batch_size} {lr} {learning_rate} {seed}\n"
          "{epochs} {slice_number} (the recurrence) {target_metric}; {{ and }} are literal braces.\n\n"
          "Job:\n"
          "  --batch-sizes LIST       feasible batch sizes, e.g. 32,64,128,256\n"
          "  --default-bs B           the batch size the user would use (one of them)\n"
          "  --target-metric T        validation metric at which training stops\n"
          "  --max-epochs E           epochs after which a try gives up\n"
          "  --lr RATE                learning rate at the default batch size\n"
          "  --optimizer NAME         scales --lr: adam, adamw, adadelta (square root), sgd (linear)\n"
          "  --lr-table B=R,...       explicit learning rates per batch size (win over the rule)\n"
          "  --dataset, --network     names used in the job folder's name\n"
          "  --workdir DIR            the trainee's working folder\n"
          "  --spec FILE              the job as JSON (keys as in docs/bso.md); flags override it\n"
          "Knobs:\n"
          "  --eta X                  cost = eta*energy + (1-eta)*max_power*time, X in [0, 1] (0.5)\n"
          "  --beta X                 early stop at beta x best cost, > 0 or 'inf' (2.0)\n"
          "  --seed N                 optimizer seed and first training seed (123456)\n"
          "  --window N               optimizer reward window per batch size (0: all)\n"
          "Driver:\n"
          "  --recurrences R          recurrences to run now (default 1; 0: just print the state)\n"
          "  --log-base DIR           folder of job folders (default ./zeus_logs)\n"
          "  --state FILE             the SQLite state to use or create\n"
          "  --observer-mode          run at the maximum power limit, account as if at the optimum\n"
          "  --profile-warmup-iters N, --profile-measure-iters N   power profiling steps (10, 40)\n"
          "  --max-power-w W          the cost's max power (default: max limit x visible GPUs)\n"
          "  --max-tries N            tries per recurrence (20)\n"
          "  --timeout S              per try; the trainee gets SIGTERM, then SIGKILL after 5 s\n"
          "  --keep-going             a try without a readable result is recorded as failed and the\n"
          "                           next try starts (default: stop; the try is repeated next run)\n"
          "  --json                   print the history and state as JSON at the end (the trainee's\n"
          "                           output then goes to stderr)\n"
          "  --quiet                  do not echo the trainee's output (it is still logged)\n\n"
          "Exit status: 0 done; 1 a try failed or the job cannot converge (what finished is kept);\n"
          "2 usage; 130 interrupted (SIGINT/SIGTERM: the trainee is stopped, its try not recorded).\n\n"
          "Example (the demo trainee on the simulated GPU):\n"
          "  ZEUS_GPU_BACKEND=sim zeus run --batch-sizes 64,128,256,512,1024 --default-bs 256 \\\n"
          "      --target-metric 0.6 --max-epochs 40 --lr 0.1 --optimizer adam --recurrences 5 \\\n"
          "      -- build/trainee_sim --bs {bs} --lr {lr} --seed {seed} --epochs {epochs}\n\n"
          "Environment:\n"
          "  ZEUS_GPU_BACKEND, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*   the GPUs whose maximum power limit\n"
          "                      sets the cost's max power (unless --max-power-w); passed on to the trainee\n"
          "  ZEUS_LOG_LEVEL      info shows the optimizer's decisions\n"
          "  Set for the trainee: ZEUS_LOG_DIR ZEUS_JOB_ID ZEUS_COST_THRESH ZEUS_ETA_KNOB\n"
          "  ZEUS_TARGET_METRIC ZEUS_PROFILE_PARAMS ZEUS_USE_OPTIMAL_PL\n");
}

typedef struct cli_ctx {
  FILE *echo; /* NULL: quiet */
  bool json;
} cli_ctx;

static void on_output(void *ctx, const char *data, size_t len) {
  cli_ctx *c = ctx;
  if (!c->echo) return;
  fwrite(data, 1, len, c->echo);
  fflush(c->echo);
}

static void print_lr(FILE *f, double lr) {
  if (isnan(lr)) fprintf(f, "-");
  else fprintf(f, "%.6g", lr);
}

static void on_started(void *ctx, const zeus_run_try *t, const char *const *argv, const char *log) {
  (void)ctx;
  fprintf(stderr, "[zeus run] recurrence %ld, try %ld: batch size %ld, learning rate ", t->recurrence, t->try_index,
          t->batch_size);
  print_lr(stderr, t->learning_rate);
  fprintf(stderr, ", seed %lld, cost threshold %.6g\n[zeus run] $", t->seed, t->cost_threshold);
  for (size_t i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
  fprintf(stderr, "\n[zeus run] log: %s\n", log);
}

static void on_finished(void *ctx, const zeus_run_try *t) {
  (void)ctx;
  if (strcmp(t->status, "failed") == 0) {
    fprintf(stderr, "[zeus run] recurrence %ld, try %ld: no usable result (exit code %d)\n", t->recurrence,
            t->try_index, t->exit_code);
    return;
  }
  fprintf(stderr, "[zeus run] recurrence %ld, try %ld: batch size %ld: %.6g J, %.6g s, cost %.6g, %s (exit code %d)\n",
          t->recurrence, t->try_index, t->batch_size, t->energy_j, t->time_s, t->cost,
          strcmp(t->status, "no_epoch") == 0 ? "stopped before its first epoch (threshold)"
          : t->reached                       ? "reached the target"
                                             : "did not reach the target",
          t->exit_code);
}

static zeus_runner *g_runner;
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig) {
  (void)sig;
  g_interrupted = 1;
  if (g_runner) zeus_runner_request_stop(g_runner);
}

static bool parse_list(const char *opt, const char *text, long *out, size_t *n) {
  *n = 0;
  if (!text || !*text) {
    cli_error(CMD, false, "%s needs a list such as 32,64,128", opt);
    return false;
  }
  for (const char *p = text; *p;) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || v <= 0 || errno || (*end && *end != ',')) {
      cli_error(CMD, false, "%s: expected comma-separated positive integers, got '%s'", opt, text);
      return false;
    }
    if (*n == MAX_LIST) {
      cli_error(CMD, false, "%s: more than %d entries", opt, MAX_LIST);
      return false;
    }
    out[(*n)++] = v;
    p = *end ? end + 1 : end;
  }
  return true;
}

static bool parse_lr_table(const char *text, long *bs, double *lr, size_t *n) {
  *n = 0;
  const char *p = text;
  while (p && *p) {
    char *end;
    long b = strtol(p, &end, 10);
    if (end == p || b <= 0 || *end != '=') goto bad;
    p = end + 1;
    double r = strtod(p, &end);
    if (end == p || !isfinite(r) || r < 0 || (*end && *end != ',')) goto bad;
    if (*n == MAX_LIST) goto bad;
    bs[*n] = b;
    lr[(*n)++] = r;
    p = *end ? end + 1 : end;
  }
  if (*n > 0) return true;
bad:
  cli_error(CMD, false, "--lr-table: expected BS=RATE pairs such as 32=0.05,64=0.1, got '%s'", text ? text : "");
  return false;
}

int cmd_run(int argc, char **argv) {
  if (cli_wants_help(argc, argv)) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  void *storage = NULL;
  long recurrences = 1, spec_recurrences = -1;
  bool json = false, quiet = false;
  static long bs[MAX_LIST], lr_bs[MAX_LIST];
  static double lr_v[MAX_LIST];
  size_t nbs = 0, nlr = 0;
  /* The spec file first, so that flags override it. */
  for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
    if (strcmp(argv[i], "--spec") == 0) {
      if (i + 1 >= argc) {
        cli_error(CMD, false, "--spec needs a file");
        return CLI_EXIT_USAGE;
      }
      if (zeus_run_spec_load(&s, argv[i + 1], &storage, &spec_recurrences) != ZEUS_OK) {
        cli_error(CMD, true, "cannot read the job spec");
        return CLI_EXIT_USAGE;
      }
      break;
    }
  }
  if (spec_recurrences >= 0) recurrences = spec_recurrences;
  int i = 1, status = CLI_EXIT_USAGE;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(a, "--json") == 0) { json = true; continue; }
    if (strcmp(a, "--quiet") == 0) { quiet = true; continue; }
    if (strcmp(a, "--observer-mode") == 0) { s.observer_mode = true; continue; }
    if (strcmp(a, "--keep-going") == 0) { s.keep_going = true; continue; }
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strncmp(a, "--", 2) != 0) {
      cli_error(CMD, false, "unexpected argument '%s': put the training command after --", a);
      goto out;
    }
    if (!v) {
      cli_error(CMD, false, "%s needs a value", a);
      goto out;
    }
    i++;
    long l;
    if (strcmp(a, "--spec") == 0) continue;
    else if (strcmp(a, "--batch-sizes") == 0) {
      if (!parse_list(a, v, bs, &nbs)) goto out;
      s.batch_sizes = bs;
      s.num_batch_sizes = nbs;
    } else if (strcmp(a, "--default-bs") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 1L << 40, &s.default_bs)) goto out;
    } else if (strcmp(a, "--target-metric") == 0) {
      if (!cli_parse_double(CMD, a, v, -1e300, 1e300, &s.target_metric)) goto out;
    } else if (strcmp(a, "--max-epochs") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 100000000, &s.max_epochs)) goto out;
    } else if (strcmp(a, "--lr") == 0) {
      if (!cli_parse_double(CMD, a, v, 0, 1e300, &s.default_lr)) goto out;
    } else if (strcmp(a, "--optimizer") == 0) s.optimizer = v;
    else if (strcmp(a, "--lr-table") == 0) {
      if (!parse_lr_table(v, lr_bs, lr_v, &nlr)) goto out;
      s.lr_batch_sizes = lr_bs;
      s.lr_values = lr_v;
      s.num_lrs = nlr;
    } else if (strcmp(a, "--dataset") == 0) s.dataset = v;
    else if (strcmp(a, "--network") == 0) s.network = v;
    else if (strcmp(a, "--workdir") == 0) s.workdir = v;
    else if (strcmp(a, "--eta") == 0) {
      if (!cli_parse_double(CMD, a, v, 0, 1, &s.eta)) goto out;
    } else if (strcmp(a, "--beta") == 0) {
      if (strcmp(v, "inf") == 0) s.beta = INFINITY;
      else if (!cli_parse_double(CMD, a, v, 1e-300, INFINITY, &s.beta)) goto out;
    } else if (strcmp(a, "--seed") == 0) {
      if (!cli_parse_long(CMD, a, v, 0, 0x7fffffffffffffffL, &l)) goto out;
      s.seed = (uint64_t)l;
    } else if (strcmp(a, "--window") == 0) {
      if (!cli_parse_long(CMD, a, v, 0, 1000000, &s.window_size)) goto out;
    } else if (strcmp(a, "--recurrences") == 0) {
      if (!cli_parse_long(CMD, a, v, 0, 1000000, &recurrences)) goto out;
    } else if (strcmp(a, "--log-base") == 0) s.log_base = v;
    else if (strcmp(a, "--state") == 0) s.state_path = v;
    else if (strcmp(a, "--profile-warmup-iters") == 0) {
      if (!cli_parse_long(CMD, a, v, 0, 1000000, &s.profile_warmup_iters)) goto out;
    } else if (strcmp(a, "--profile-measure-iters") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 1000000, &s.profile_measure_iters)) goto out;
    } else if (strcmp(a, "--max-power-w") == 0) {
      if (!cli_parse_double(CMD, a, v, 1e-9, 1e9, &s.max_power_w)) goto out;
    } else if (strcmp(a, "--max-tries") == 0) {
      if (!cli_parse_long(CMD, a, v, 1, 100000, &s.max_tries)) goto out;
    } else if (strcmp(a, "--timeout") == 0) {
      if (!cli_parse_double(CMD, a, v, 0, 1e9, &s.timeout_s)) goto out;
    } else {
      cli_error(CMD, false, "unknown option '%s' (see zeus run --help)", a);
      goto out;
    }
  }
  if (i < argc) s.command = (const char *const *)(argv + i);
  if (!s.command) {
    cli_error(CMD, false, "no training command: give it after -- (or as \"command\" in --spec)");
    goto out;
  }
  s.recurrences = recurrences;

  cli_ctx ctx = {.echo = quiet ? NULL : (json ? stderr : stdout), .json = json};
  zeus_run_callbacks cb = {.ctx = &ctx, .output = on_output, .try_started = on_started, .try_finished = on_finished};
  zeus_runner *r;
  int rc = zeus_runner_open(&r, &s, &cb);
  if (rc != ZEUS_OK) {
    cli_error(CMD, true, "cannot start the job");
    status = rc == ZEUS_EINVAL || rc == ZEUS_EPARSE ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    goto out;
  }
  fprintf(stderr, "[zeus run] job folder %s\n[zeus run] state %s (%ld recurrences done)\n", zeus_runner_logdir(r),
          zeus_runner_state_path(r), zeus_runner_recurrences_done(r));
  g_runner = r;
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  rc = zeus_runner_run(r, recurrences);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  g_runner = NULL;
  if (rc != ZEUS_OK) {
    cli_error(CMD, true, g_interrupted ? "interrupted" : "stopped");
    status = g_interrupted ? 130 : CLI_EXIT_FAIL;
  } else {
    status = CLI_EXIT_OK;
  }
  fprintf(stderr, "[zeus run] %ld recurrences done in all; history and state in %s\n", zeus_runner_recurrences_done(r),
          zeus_runner_state_path(r));
  if (json) {
    char *text;
    if (zeus_runner_history_json(r, &text) == ZEUS_OK) {
      puts(text);
      free(text);
    } else {
      cli_error(CMD, true, "cannot print the history");
      status = CLI_EXIT_FAIL;
    }
  }
  zeus_runner_close(r);
out:
  zeus_free(storage);
  return status;
}
