/* zeus/run.h: the recurring-job driver (`zeus run`, the original's ZeusMaster).
 *
 * A job is a training command that recurs. For each recurrence the driver asks the batch-size
 * optimizer (zeus/bso.h) for a batch size, launches the command as a child process with that
 * batch size (and a scaled learning rate) and the ZEUS_* environment of the training-side
 * protocol (zeus_job), reads the result file the child writes, computes the try's cost and feeds
 * it back. A try that does not reach the target metric is retried within the recurrence (up to
 * max_tries); later tries are stopped early by the child once their cost would exceed
 * beta x the least cost of a finished recurrence.
 *
 * Child environment: ZEUS_LOG_DIR (the job folder), ZEUS_JOB_ID ("rec%02d+try%02d"),
 * ZEUS_COST_THRESH ("inf" or beta x best cost), ZEUS_ETA_KNOB, ZEUS_TARGET_METRIC,
 * ZEUS_PROFILE_PARAMS ("warmup,measure"), ZEUS_USE_OPTIMAL_PL ("false" in observer mode); its
 * output (stdout and stderr) goes to the output callback and to <folder>/<job id>.train.log; its
 * result is <folder>/<job id>+bs<b>.train.json ({"energy", "time", "reached", ...}).
 *
 * Command template: each argument may hold {bs} or {batch_size}, {lr} or {learning_rate}, {seed},
 * {epochs} (or {epoch}: max_epochs), {slice_number} (the recurrence number), {target_metric};
 * {{ and }} are literal braces. Numbers are written in their shortest exact form.
 *
 * Folder and state: the job folder is <log_base>/<dataset>+<network>+bs<default>+<optimizer>+
 * lr<default lr>+tm<target>+me<max epochs>+x<recurrences>+eta<eta>+beta<beta>+<YYYYmmddHHMMSS>
 * (the original's build_logdir). Everything learnt lives in SQLite (state_path; default
 * <folder>/state.sqlite, the latest such folder of the same job and knobs under log_base being
 * continued): the history of tries, the optimizer's state, the best cost, where the next try
 * starts. Each try is committed in one transaction with the optimizer's state after it, so a crash
 * loses no finished try and a later run continues exactly where the last stopped: two runs of N
 * and M recurrences leave the same history and state as one run of N + M. A second driver on the
 * same state is refused (lock file <state>.lock), and with the default state a second driver of the
 * same job and knobs (lock <log_base>/.zeus-run-<hash>.lock, taken before the folder is chosen),
 * so that concurrent first runs cannot split a job's state. zeus_runner_open refuses (ZEUS_EPARSE)
 * a damaged state (empty; a table or the version/config rows gone; a history ahead of its driver)
 * unless reset_state, and refuses (ZEUS_EEXIST) while the process group of a trainee an earlier
 * driver recorded as running is still alive (a driver killed with SIGKILL).
 *
 * The trainee runs in its own process group and gets SIGKILL when its driver dies
 * (PR_SET_PDEATHSIG); what is left of its group when it ends is killed. Before each try the state
 * is written (unchanged), so an unwritable state stops the run (ZEUS_EIO) before a try starts.
 *
 * Failures: a child that exits without a readable result file stops the run with ZEUS_EIO
 * (missing) or ZEUS_EPARSE (malformed), naming the file and the child's exit status or signal; the
 * try is not recorded, so the next run repeats it. With keep_going the try is recorded with
 * status "failed" (not shown to the optimizer) and the next try starts; it counts against
 * max_tries. A result file with a non-zero exit status is used (the original's trainee raised an
 * exception after writing it).
 *
 * Thread safety: a runner is used from one thread; zeus_runner_request_stop may be called from a
 * signal handler.
 */
#ifndef ZEUS_RUN_H
#define ZEUS_RUN_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* Start from zeus_run_spec_init(): zero is a value here (eta 0, seed 0, no warm-up steps). */
typedef struct zeus_run_spec {
  /* ---- the job ---- */
  /* argument template, NULL-terminated; command[0] is looked up in PATH */
  const char *const *command;
  const char *workdir;          /* the children's working folder; NULL: the current one */
  const char *dataset;          /* names in the folder name; NULL: "job" and "model" */
  const char *network;
  const char *optimizer;        /* learning-rate rule (zeus_bso_scale_lr); NULL: "none" */
  double default_lr;            /* the rate at default_bs; NAN: none */
  const long *lr_batch_sizes;   /* explicit rates per batch size (win over the rule) */
  const double *lr_values;
  size_t num_lrs;
  const long *batch_sizes;
  size_t num_batch_sizes;
  long default_bs;
  double target_metric;
  long max_epochs;
  double eta;                   /* [0, 1]; default 0.5 */
  double beta;                  /* > 0 or INFINITY; default 2 */
  uint64_t seed;                /* optimizer seed and first training seed; default 123456 */
  long window_size;             /* optimizer reward window, >= 0 (0: all); default 0 */
  /* ---- the driver ---- */
  const char *log_base;         /* folder of job folders (made absolute); NULL: "zeus_logs" */
  const char *state_path;       /* SQLite file; NULL: <job folder>/state.sqlite (see above) */
  long recurrences;             /* recurrences this run will do: names a new job folder (+x<N>) */
  bool observer_mode;
  long profile_warmup_iters;    /* >= 0; default 10 */
  long profile_measure_iters;   /* >= 1; default 40 */
  double max_power_w;           /* cost's max power; 0: the GPUs' maximum limit x visible GPUs */
  long max_tries;               /* per recurrence, >= 1; default 20 */
  double timeout_s;             /* per try; 0: none. SIGTERM to the process group, then SIGKILL
                                   after 5 s; the try counts as failed */
  bool keep_going;              /* see Failures above */
  bool reset_state;             /* start over: an existing state (damaged or not) is renamed to
                                   <state>.reset-<YYYYmmddHHMMSS> (kept) and a new one made */
} zeus_run_spec;

/* One try, as recorded. */
typedef struct zeus_run_try {
  long recurrence;
  long try_index;
  long batch_size;
  double learning_rate;         /* NAN when the command takes none */
  long long seed;
  double cost_threshold;        /* INFINITY: none */
  double energy_j;
  double time_s;
  double cost;
  long epochs;                  /* -1 when the result file did not say */
  bool reached;
  const char *status;           /* "reached", "not_reached", "no_epoch" (stopped before the first
                                   epoch by the threshold), "failed" (no readable result) */
  int exit_code;                /* the child's exit status; 128 + signal when killed */
} zeus_run_try;

typedef struct zeus_run_callbacks {
  void *ctx;
  /* The child's output as it comes (may be NULL). */
  void (*output)(void *ctx, const char *data, size_t len);
  /* A try is about to start (argv: the command, NULL-terminated; log: its log file). */
  void (*try_started)(void *ctx, const zeus_run_try *t, const char *const *argv, const char *log);
  /* A try was recorded (or, with status "failed" and keep_going off, is about to stop the run). */
  void (*try_finished)(void *ctx, const zeus_run_try *t);
} zeus_run_callbacks;

/* Fills the defaults (eta 0.5, beta 2, seed 123456, 10/40 profiling steps, 20 tries, default_lr
 * NAN, target NAN: must be set). */
ZEUS_EXTERN void zeus_run_spec_init(zeus_run_spec *s /* out */);

/* Reads a job spec from a JSON file over *s (fields left out keep their values):
 * {"command": ["python", "train.py", "--bs", "{bs}"] or "a shell command", "workdir",
 *  "dataset", "network", "optimizer", "default_lr" (or "learning_rate"), "learning_rates":
 *  {"64": 0.05, ...}, "batch_sizes": [...], "default_batch_size", "target_metric", "max_epochs",
 *  "eta", "beta", "seed", "window_size", "log_base", "state", "observer_mode",
 *  "profile_warmup_iters", "profile_measure_iters", "max_power_w", "max_tries", "timeout_s",
 *  "keep_going", "recurrences"}. A string command runs through /bin/sh -c. On success every string
 * and list of *s (those the file set and those it kept) lives in *storage, one block to release
 * with zeus_free() after the spec's last use.
 * *recurrences (may be NULL) gets "recurrences" when present. Unknown fields and wrong types are
 * ZEUS_EPARSE naming the file and field. */
ZEUS_EXTERN int zeus_run_spec_load(zeus_run_spec *s /* in, out */, const char *path,
                                   void **storage /* out */,
                                   long *recurrences /* out, may be NULL */);

typedef struct zeus_runner zeus_runner;

/* Validates the spec (ZEUS_EINVAL naming the field), finds or creates the job folder and the
 * state, refuses a state made for other knobs (ZEUS_EINVAL naming the field and both values:
 * batch sizes, default batch size, eta, beta, seed, window, target metric, max epochs), locks it
 * (ZEUS_EEXIST when another driver holds it). The spec is copied. cb may be NULL. */
ZEUS_EXTERN int zeus_runner_open(zeus_runner **out /* out */, const zeus_run_spec *spec,
                                 const zeus_run_callbacks *cb);
ZEUS_EXTERN void zeus_runner_close(zeus_runner *r);
/* Runs `recurrences` more recurrences (0: none). Errors: ZEUS_EIO / ZEUS_EPARSE (a try without a
 * readable result, see Failures), ZEUS_ESTATE (the default batch size did not reach the target in
 * the first recurrence; a recurrence failed max_tries times; every batch size was pruned;
 * interrupted by zeus_runner_request_stop), ZEUS_EIO / ZEUS_EPERM from the state file. What
 * finished before the error is kept. */
ZEUS_EXTERN int zeus_runner_run(zeus_runner *r, long recurrences);
/* Asks a running zeus_runner_run to stop: the child gets SIGTERM (its process group), the try is
 * not recorded, zeus_runner_run returns ZEUS_ESTATE. Async-signal-safe. */
ZEUS_EXTERN void zeus_runner_request_stop(zeus_runner *r);
ZEUS_EXTERN const char *zeus_runner_logdir(const zeus_runner *r);
ZEUS_EXTERN const char *zeus_runner_state_path(const zeus_runner *r);
/* The recurrences finished so far (over every run on this state). */
ZEUS_EXTERN long zeus_runner_recurrences_done(const zeus_runner *r);
/* The job's history and the optimizer as one JSON report (docs/output.md: SI units in the keys,
 * null for none): {"logdir", "state", "recurrences_done", "next_try", "min_cost_j" (null: none
 * yet), "max_power_w", "history": [{"recurrence", "try", "batch_size", "learning_rate" (null:
 * none), "seed", "cost_threshold_j" (null: no threshold), "energy_j", "time_s", "cost_j",
 * "epochs", "reached", "status", "exit_code"}...], "optimizer": {"phase" ("pruning" or
 * "thompson"), "expecting_batch_size" (pruning; else null), "observations": [{"batch_size",
 * "cost_j"}] (the costs it learnt, in order), "arms":
 * [{"batch_size", "mean_cost_j", "mean_cost_sd_j", "cost_sd_j", "num_observations"}] (Thompson
 * sampling: each arm's belief about its cost and the cost's spread; null sd: unknown)}}. The
 * optimizer's exact state is zeus_bso_save_state()'s, kept in the SQLite state. Release the text
 * with zeus_free(). */
ZEUS_EXTERN int zeus_runner_history_json(zeus_runner *r, char **json /* out */);

ZEUS_END_DECLS
#endif
