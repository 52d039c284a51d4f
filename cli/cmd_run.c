/* zeus run: a recurring training job under the batch-size optimizer, its state in SQLite. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define CMD "run"
#define MAX_LIST 256

typedef struct cli_ctx {
  FILE *echo;   /* where the trainee's output goes; NULL: quiet */
  FILE *report; /* where the text report's lines go: stderr, the -o file, or NULL under --json */
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
  FILE *f = ((cli_ctx *)ctx)->report;
  if (!f) return;
  fprintf(f, "[zeus run] recurrence %ld, try %ld: batch size %ld, learning rate ", t->recurrence,
          t->try_index, t->batch_size);
  print_lr(f, t->learning_rate);
  fprintf(f, ", seed %lld, cost threshold %.6g\n[zeus run] $", t->seed, t->cost_threshold);
  for (size_t i = 0; argv[i]; i++) fprintf(f, " %s", argv[i]);
  fprintf(f, "\n[zeus run] log: %s\n", log);
  fflush(f);
}

static void on_finished(void *ctx, const zeus_run_try *t) {
  FILE *f = ((cli_ctx *)ctx)->report;
  if (!f) return;
  if (strcmp(t->status, "failed") == 0) {
    fprintf(f, "[zeus run] recurrence %ld, try %ld: no usable result (exit code %d)\n",
            t->recurrence, t->try_index, t->exit_code);
    fflush(f);
    return;
  }
  fprintf(f,
          "[zeus run] recurrence %ld, try %ld: batch size %ld: %.6g J, %.6g s, cost %.6g, %s "
          "(exit code %d)\n",
          t->recurrence, t->try_index, t->batch_size, t->energy_j, t->time_s, t->cost,
          strcmp(t->status, "no_epoch") == 0 ? "stopped before its first epoch (threshold)"
          : t->reached                       ? "reached the target"
                                             : "did not reach the target",
          t->exit_code);
  fflush(f);
}

static zeus_runner *g_runner;
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig) {
  (void)sig;
  g_interrupted = 1;
  if (g_runner) zeus_runner_request_stop(g_runner);
}

typedef struct long_list {
  long v[MAX_LIST];
  size_t n;
} long_list;

typedef struct lr_table {
  long bs[MAX_LIST];
  double lr[MAX_LIST];
  size_t n;
} lr_table;

/* --batch-sizes: "32,64,128". */
static bool parse_list(const char *cmd, const char *opt, const char *text, void *dest) {
  long_list *l = dest;
  l->n = 0;
  for (const char *p = text; *p;) {
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || v <= 0 || errno || (*end && *end != ',')) {
      cli_error(cmd, false, "%s: expected comma-separated positive integers, got '%s'", opt, text);
      return false;
    }
    if (l->n == MAX_LIST) {
      cli_error(cmd, false, "%s: more than %d entries", opt, MAX_LIST);
      return false;
    }
    l->v[l->n++] = v;
    p = *end ? end + 1 : end;
  }
  if (l->n == 0) {
    cli_error(cmd, false, "%s needs a list such as 32,64,128", opt);
    return false;
  }
  return true;
}

/* --lr-table: "32=0.05,64=0.1". */
static bool parse_lr_table(const char *cmd, const char *opt, const char *text, void *dest) {
  lr_table *t = dest;
  t->n = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long b = strtol(p, &end, 10);
    if (end == p || b <= 0 || *end != '=') goto bad;
    p = end + 1;
    double r = strtod(p, &end);
    if (end == p || !isfinite(r) || r < 0 || (*end && *end != ',')) goto bad;
    if (t->n == MAX_LIST) goto bad;
    t->bs[t->n] = b;
    t->lr[t->n++] = r;
    p = *end ? end + 1 : end;
  }
  if (t->n > 0) return true;
bad:
  cli_error(cmd, false, "%s: expected BS=RATE pairs such as 32=0.05,64=0.1, got '%s'", opt, text);
  return false;
}

/* --beta: a number > 0, or inf for no early stopping. */
static bool parse_beta(const char *cmd, const char *opt, const char *text, void *dest) {
  if (strcmp(text, "inf") == 0 || strcmp(text, "infinity") == 0) {
    *(double *)dest = INFINITY;
    return true;
  }
  return cli_parse_double(cmd, opt, text, 1e-300, 1e300, dest);
}

/* Every option has its own variable and "given" flag: the spec file is read after the options,
 * and the options given override it. */
enum {
  O_BATCH_SIZES,
  O_DEFAULT_BS,
  O_TARGET,
  O_MAX_EPOCHS,
  O_LR,
  O_OPTIMIZER,
  O_LR_TABLE,
  O_DATASET,
  O_NETWORK,
  O_WORKDIR,
  O_ETA,
  O_BETA,
  O_SEED,
  O_WINDOW,
  O_RECURRENCES,
  O_LOG_BASE,
  O_STATE,
  O_OBSERVER,
  O_WARMUP,
  O_MEASURE,
  O_MAX_POWER,
  O_MAX_TRIES,
  O_TIMEOUT,
  O_KEEP_GOING,
  O_RESET_STATE,
  O_COUNT
};
static bool given[O_COUNT];
static long_list batch_sizes;
static lr_table lrs;
static long default_bs, max_epochs, seed, window_size, recurrences, warmup_iters, measure_iters,
    max_tries;
static double target_metric, default_lr, eta, beta, max_power_w, timeout_s;
static double plo_confidence; /* issue 37: exported to the trainee as ZEUS_PLO_CONFIDENCE */
static const char *optimizer, *dataset, *network, *workdir, *log_base, *state_path, *spec_path,
    *out_path;
static bool observer_mode, keep_going, reset_state, json_output, quiet;

static const cli_opt run_opts[] = {
    {"batch-sizes", 0, CLI_OPT_CUSTOM, &batch_sizes, "LIST",
     "feasible batch sizes, e.g. 32,64,128,256", .parse = parse_list, .seen = &given[O_BATCH_SIZES],
     .heading = "Job:"},
    {"default-bs", 0, CLI_OPT_LONG, &default_bs, "B",
     "the batch size the user would use (one of them)", NULL, 1, 1099511627776.0,
     .seen = &given[O_DEFAULT_BS]},
    {"target-metric", 0, CLI_OPT_DOUBLE, &target_metric, "T",
     "validation metric at which training stops", NULL, -1e300, 1e300, .seen = &given[O_TARGET]},
    {"max-epochs", 0, CLI_OPT_LONG, &max_epochs, "E", "epochs after which a try gives up", NULL, 1,
     1e8, .seen = &given[O_MAX_EPOCHS]},
    {"lr", 0, CLI_OPT_DOUBLE, &default_lr, "RATE", "learning rate at the default batch size", NULL,
     0, 1e300, .seen = &given[O_LR]},
    {"optimizer", 0, CLI_OPT_STRING, &optimizer, "NAME",
     "scales --lr: adam, adamw, adadelta (square root), sgd (linear)", .seen = &given[O_OPTIMIZER]},
    {"lr-table", 0, CLI_OPT_CUSTOM, &lrs, "B=R,...",
     "explicit learning rates per batch size (win over the rule)", .parse = parse_lr_table,
     .seen = &given[O_LR_TABLE]},
    {"dataset", 0, CLI_OPT_STRING, &dataset, "NAME",
     "the dataset's name, used in the job folder's name", .seen = &given[O_DATASET]},
    {"network", 0, CLI_OPT_STRING, &network, "NAME",
     "the network's name, used in the job folder's name", .seen = &given[O_NETWORK]},
    {"workdir", 0, CLI_OPT_STRING, &workdir, "DIR", "the trainee's working folder",
     .seen = &given[O_WORKDIR]},
    {"spec", 0, CLI_OPT_STRING, &spec_path, "FILE",
     "the job as JSON (keys as in docs/bso.md); the options given override it"},
    {"eta", 0, CLI_OPT_DOUBLE, &eta, "X", "cost = eta*energy + (1-eta)*max_power*time, X in [0, 1]",
     "0.5", 0, 1, .seen = &given[O_ETA], .heading = "Knobs:"},
    {"beta", 0, CLI_OPT_CUSTOM, &beta, "X", "early stop at beta x best cost, > 0 or 'inf'", "2.0",
     .parse = parse_beta, .seen = &given[O_BETA]},
    {"seed", 0, CLI_OPT_LONG, &seed, "N", "optimizer seed and first training seed", "123456", 0,
     9223372036854775807.0, .seen = &given[O_SEED]},
    {"window", 0, CLI_OPT_LONG, &window_size, "N",
     "optimizer reward window per batch size (0: all)", "0", 0, 1e6, .seen = &given[O_WINDOW]},
    {"recurrences", 0, CLI_OPT_LONG, &recurrences, "R",
     "recurrences to run now (0: just print the state)", "1", 0, 1e6, .seen = &given[O_RECURRENCES],
     .heading = "Driver:"},
    {"log-base", 0, CLI_OPT_STRING, &log_base, "DIR", "folder of job folders", "./zeus_logs",
     .seen = &given[O_LOG_BASE]},
    {"state", 0, CLI_OPT_STRING, &state_path, "FILE|URL",
     "the SQLite state to use or create; or postgresql://... (a libpq URI): the job's state\n"
     "in that database, shared by zeus run on every node (and by zeus bso-server's\n"
     "database; docs/bso-server.md)",
     .seen = &given[O_STATE]},
    {"observer-mode", 0, CLI_OPT_FLAG, &observer_mode, NULL,
     "run at the maximum power limit, account as if at the optimum", .seen = &given[O_OBSERVER]},
    {"profile-warmup-iters", 0, CLI_OPT_LONG, &warmup_iters, "N",
     "power profiling: warm-up steps per limit", "10", 0, 1e6, .seen = &given[O_WARMUP]},
    {"profile-measure-iters", 0, CLI_OPT_LONG, &measure_iters, "N",
     "power profiling: measured steps per limit", "40", 1, 1e6, .seen = &given[O_MEASURE]},
    {"plo-confidence", 0, CLI_OPT_DOUBLE, &plo_confidence, "P",
     "the power-limit optimizer's confidence mode for the trainee: exported as\n"
     "ZEUS_PLO_CONFIDENCE=P, P in (0, 1) (a GlobalPowerLimitOptimizer in the trainee\n"
     "measures until its choice is settled at P; docs/plo.md); 0: not set", "0", 0, 0.999999},
    {"max-power-w", 0, CLI_OPT_DOUBLE, &max_power_w, "W", "the cost's max power",
     "max limit x visible GPUs", 1e-9, 1e9, .seen = &given[O_MAX_POWER]},
    {"max-tries", 0, CLI_OPT_LONG, &max_tries, "N", "tries per recurrence", "20", 1, 100000,
     .seen = &given[O_MAX_TRIES]},
    {"timeout", 0, CLI_OPT_DOUBLE, &timeout_s, "S",
     "per try; the trainee gets SIGTERM, then SIGKILL after 5 s", "none", 0, 1e9,
     .seen = &given[O_TIMEOUT]},
    {"keep-going", 0, CLI_OPT_FLAG, &keep_going, NULL,
     "a try without a readable result is recorded as failed and the next try\n"
     "starts (default: stop; the try is repeated next run)",
     .seen = &given[O_KEEP_GOING]},
    {"reset-state", 0, CLI_OPT_FLAG, &reset_state, NULL,
     "start the job over: an existing state (a damaged one is refused\n"
     "otherwise) is renamed to <state>.reset-<time>, kept, and a new one made",
     .seen = &given[O_RESET_STATE]},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL,
     "print the history and the optimizer as one JSON document at the end; the\n"
     "trainee's output then goes to standard error",
     .heading = "Output:"},
    {"output", 'o', CLI_OPT_STRING, &out_path, "FILE",
     "write the report (the [zeus run] lines, or the JSON with --json) to FILE,\n"
     "replaced whole at the end; the trainee keeps standard output"},
    {"quiet", 0, CLI_OPT_FLAG, &quiet, NULL,
     "do not echo the trainee's output (it is still logged)"},
    {0},
};

static const cli_command run_cmd = {
    .name = "run",
    .usage = "zeus run [OPTIONS] -- COMMAND [ARGS...]\nzeus run --spec JOB.json [OPTIONS]",
    .about =
        "Runs a recurring training job: each recurrence launches COMMAND with the batch size the\n"
        "batch-size optimizer picks (pruning exploration, then Gaussian Thompson sampling) and\n"
        "the ZEUS_* environment of the training-side protocol (zeus_job in <zeus/bso.h>); the\n"
        "trainee profiles the GPU power limits, stops early when its cost would pass beta x the\n"
        "best cost so far, and writes its result, whose cost the optimizer learns. A try that\n"
        "misses the target is retried (up to --max-tries per recurrence). The trainee's output\n"
        "goes to standard output and to <job folder>/rec<N>+try<M>.train.log; the report (one\n"
        "[zeus run] line per try start and end) goes to standard error, or to FILE with -o.\n"
        "\n"
        "Everything learnt is kept in SQLite (--state; default: state.sqlite in the job folder,\n"
        "the latest folder of the same job and knobs under --log-base being continued),\n"
        "committed after every try: a later 'zeus run' continues where this one stopped, and a\n"
        "crash loses no finished try. Two runs of N and M recurrences give the same history as\n"
        "one of N + M.\n"
        "\n"
        "Placeholders in COMMAND's arguments: {bs} {batch_size} {lr} {learning_rate} {seed}\n"
        "{epochs} {slice_number} (the recurrence) {target_metric}; {{ and }} are literal braces.",
    .opts = run_opts,
    .more =
        "JSON: {\"logdir\", \"state\", \"recurrences_done\", \"next_try\", \"min_cost_j\",\n"
        "\"max_power_w\", \"history\": [{\"recurrence\", \"try\", \"batch_size\",\n"
        "\"learning_rate\", \"seed\", \"cost_threshold_j\", \"energy_j\", \"time_s\",\n"
        "\"cost_j\", \"epochs\", \"reached\", \"status\", \"exit_code\"}], \"optimizer\":\n"
        "{\"phase\", \"expecting_batch_size\", \"observations\": [{\"batch_size\", \"cost_j\"}],\n"
        "\"arms\": [{\"batch_size\", \"mean_cost_j\", \"mean_cost_sd_j\", \"cost_sd_j\",\n"
        "\"num_observations\"}]}} (null: none).\n"
        "\n"
        "Safety: the trainee runs in its own process group and dies with zeus run (even\n"
        "kill -9); what is left of its group when it ends is killed; --timeout stops the\n"
        "whole group. One zeus run per job (a lock per job and knobs under --log-base, and\n"
        "per state); a run that finds a trainee of an earlier run still alive refuses to\n"
        "start, naming its process group. A damaged state (empty, tables or meta rows gone,\n"
        "history ahead of the driver) is refused, never silently started over\n"
        "(--reset-state). The state is written before each try starts, so an unwritable\n"
        "state costs no training run.\n"
        "\n"
        "Exit status: 0 done; 1 a try failed or the job cannot converge (what finished is kept);\n"
        "2 usage; 130 interrupted (SIGINT/SIGTERM/SIGHUP: the trainee is stopped, its try not\n"
        "recorded).\n"
        "\n"
        "Example (the demo trainee on the simulated GPU):\n"
        "  ZEUS_GPU_BACKEND=sim zeus run --batch-sizes 64,128,256,512,1024 --default-bs 256 \\\n"
        "      --target-metric 0.6 --max-epochs 40 --lr 0.1 --optimizer adam --recurrences 5 \\\n"
        "      -- build/trainee_sim --bs {bs} --lr {lr} --seed {seed} --epochs {epochs}\n"
        "\n"
        "Environment:\n"
        "  ZEUS_GPU_BACKEND, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*: the GPUs whose maximum power\n"
        "                      limit sets the cost's max power (unless --max-power-w); passed on\n"
        "                      to the trainee\n"
        "  ZEUS_LOG_LEVEL      info shows the optimizer's decisions\n"
        "  Set for the trainee: ZEUS_LOG_DIR ZEUS_JOB_ID ZEUS_COST_THRESH ZEUS_ETA_KNOB\n"
        "  ZEUS_TARGET_METRIC ZEUS_PROFILE_PARAMS ZEUS_USE_OPTIMAL_PL\n",
    .args = CLI_ARGS_COMMAND,
};

/* The options given, over the spec file's values (over the defaults). */
static void apply_options(zeus_run_spec *s, long *recs) {
  if (given[O_BATCH_SIZES]) s->batch_sizes = batch_sizes.v, s->num_batch_sizes = batch_sizes.n;
  if (given[O_DEFAULT_BS]) s->default_bs = default_bs;
  if (given[O_TARGET]) s->target_metric = target_metric;
  if (given[O_MAX_EPOCHS]) s->max_epochs = max_epochs;
  if (given[O_LR]) s->default_lr = default_lr;
  if (given[O_OPTIMIZER]) s->optimizer = optimizer;
  if (given[O_LR_TABLE]) s->lr_batch_sizes = lrs.bs, s->lr_values = lrs.lr, s->num_lrs = lrs.n;
  if (given[O_DATASET]) s->dataset = dataset;
  if (given[O_NETWORK]) s->network = network;
  if (given[O_WORKDIR]) s->workdir = workdir;
  if (given[O_ETA]) s->eta = eta;
  if (given[O_BETA]) s->beta = beta;
  if (given[O_SEED]) s->seed = (uint64_t)seed;
  if (given[O_WINDOW]) s->window_size = window_size;
  if (given[O_RECURRENCES]) *recs = recurrences;
  if (given[O_LOG_BASE]) s->log_base = log_base;
  if (given[O_STATE]) s->state_path = state_path;
  if (given[O_OBSERVER]) s->observer_mode = true;
  if (given[O_WARMUP]) s->profile_warmup_iters = warmup_iters;
  if (given[O_MEASURE]) s->profile_measure_iters = measure_iters;
  if (given[O_MAX_POWER]) s->max_power_w = max_power_w;
  if (given[O_MAX_TRIES]) s->max_tries = max_tries;
  if (given[O_TIMEOUT]) s->timeout_s = timeout_s;
  if (given[O_KEEP_GOING]) s->keep_going = true;
  if (given[O_RESET_STATE]) s->reset_state = true;
}

int cmd_run(int argc, char **argv) {
  char **command = NULL;
  int ncommand = 0;
  int status = cli_parse(&run_cmd, argc, argv, &command, &ncommand);
  if (status != CLI_CONTINUE) return status;
  if (plo_confidence > 0) {
    char v[32];
    snprintf(v, sizeof v, "%.6g", plo_confidence);
    setenv("ZEUS_PLO_CONFIDENCE", v, 1); /* the trainee inherits the environment */
  }
  zeus_run_spec s;
  zeus_run_spec_init(&s);
  void *storage = NULL;
  long recs = 1, spec_recurrences = -1;
  if (spec_path && zeus_run_spec_load(&s, spec_path, &storage, &spec_recurrences) != ZEUS_OK) {
    cli_error(CMD, true, "cannot read the job spec");
    return CLI_EXIT_USAGE;
  }
  if (spec_recurrences >= 0) recs = spec_recurrences;
  apply_options(&s, &recs);
  status = CLI_EXIT_USAGE;
  if (ncommand > 0) s.command = (const char *const *)command;
  if (!s.command) {
    cli_error(CMD, false, "no training command: give it after -- (or as \"command\" in --spec)");
    goto out;
  }
  s.recurrences = recs;

  cli_report rf = {0};
  if (out_path && !cli_report_open(CMD, &rf, out_path)) {
    status = CLI_EXIT_FAIL;
    goto out;
  }
  /* Standard output is the trainee's, except under --json without -o, where it is the JSON's. */
  cli_ctx ctx = {.echo = quiet ? NULL : (json_output && !out_path ? stderr : stdout),
                 .report = json_output ? NULL
                           : rf.f      ? rf.f
                                       : stderr};
  FILE *log = ctx.report ? ctx.report : stderr; /* where the job folder and the final line go */
  zeus_run_callbacks cb = {
      .ctx = &ctx, .output = on_output, .try_started = on_started, .try_finished = on_finished};
  zeus_runner *r;
  int rc = zeus_runner_open(&r, &s, &cb);
  if (rc != ZEUS_OK) {
    cli_error(CMD, true, "cannot start the job");
    /* A bad option is a usage error; a damaged or foreign state (ZEUS_EPARSE) is not. */
    status = rc == ZEUS_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    cli_report_discard(&rf);
    goto out;
  }
  fprintf(log, "[zeus run] job folder %s\n[zeus run] state %s (%ld recurrences done)\n",
          zeus_runner_logdir(r), zeus_runner_state_path(r), zeus_runner_recurrences_done(r));
  fflush(log);
  g_runner = r;
  struct sigaction sa, old_int, old_term, old_hup;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGHUP, &sa, &old_hup); /* a dropped SSH session stops the trainee the same way */
  rc = zeus_runner_run(r, recs);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGHUP, &old_hup, NULL);
  g_runner = NULL;
  if (rc != ZEUS_OK) {
    cli_error(CMD, true, g_interrupted ? "interrupted" : "stopped");
    status = g_interrupted ? 130 : CLI_EXIT_FAIL;
  } else {
    status = CLI_EXIT_OK;
  }
  fprintf(log, "[zeus run] %ld recurrences done in all; history and state in %s\n",
          zeus_runner_recurrences_done(r), zeus_runner_state_path(r));
  fflush(log);
  if (json_output) {
    char *text;
    if (zeus_runner_history_json(r, &text) == ZEUS_OK) {
      fprintf(rf.f ? rf.f : stdout, "%s\n", text);
      zeus_free(text);
    } else {
      cli_error(CMD, true, "cannot write the JSON report");
      status = CLI_EXIT_FAIL;
    }
  }
  if (rf.f && !cli_report_commit(CMD, &rf, out_path) && status == CLI_EXIT_OK)
    status = CLI_EXIT_FAIL;
  zeus_runner_close(r);
out:
  zeus_free(storage);
  return status;
}
