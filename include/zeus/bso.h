/* zeus/bso.h: the batch-size optimizer and the training side of recurring jobs.
 *
 * A recurring training job is launched again and again (`zeus run`, zeus/run.h). Before each
 * launch the batch-size optimizer (zeus_bso) picks a batch size; after it, it learns the cost
 * of that try. It explores by pruning (from the default batch size downwards, then upwards,
 * a direction ending at its first batch size that does not reach the target metric, the
 * default moving to the best batch size, twice), then exploits with Gaussian Thompson sampling
 * (zeus_gts) over the batch sizes that survived.
 *
 * The training program talks back through the ZEUS_* environment protocol, handled by
 * zeus_job: it stops training when the target metric was reached, at the maximum number of
 * epochs, or when the next epoch would push the cost over the driver's threshold; it profiles
 * the GPU power limits during the first epoch and applies the best; and it writes the result
 * file the driver reads.
 *
 * Cost (the Zeus cost of the original): eta * energy_j + (1 - eta) * max_power_w * time_s, where
 * max_power_w is the GPUs' maximum power limit times the number of GPUs of the job.
 *
 * Random numbers are the project's own, so that the same seed gives the same run on every
 * machine (see zeus_rng below). Thread safety: each object is used from one thread at a time.
 */
#ifndef ZEUS_BSO_H
#define ZEUS_BSO_H

#include "zeus/collective.h"
#include "zeus/common.h"
#include "zeus/monitor.h"

ZEUS_BEGIN_DECLS

/* ---- random numbers -------------------------------------------------------------------------
 *
 * xoshiro256** (Blackman and Vigna, 2018) seeded through splitmix64: s[i] = splitmix64 output i
 * for the 64-bit seed. Uniform doubles are the top 53 bits of a draw times 2^-53, in [0, 1).
 * Integers below n are drawn by rejection (no modulo bias). Normal deviates use Marsaglia's polar
 * method (pairs of uniforms in (-1, 1) until 0 < s < 1, then u * sqrt(-2 ln(s) / s); the second
 * deviate of the pair is discarded) with a logarithm computed by this library from IEEE
 * additions, multiplications and divisions only, so the stream does not depend on the C
 * library's libm: the same seed gives bit-identical numbers on every machine. */
typedef struct zeus_rng {
  uint64_t s[4];
} zeus_rng;

ZEUS_EXTERN void zeus_rng_seed(zeus_rng *r /* out */, uint64_t seed);
/* The next 64 random bits. */
ZEUS_EXTERN uint64_t zeus_rng_next(zeus_rng *r);
/* Uniform in [0, 1). */
ZEUS_EXTERN double zeus_rng_uniform(zeus_rng *r);
/* Uniform integer in [0, n); n == 0 gives 0 without drawing. */
ZEUS_EXTERN uint64_t zeus_rng_below(zeus_rng *r, uint64_t n);
/* Standard normal deviate (mean 0, standard deviation 1). */
ZEUS_EXTERN double zeus_rng_normal(zeus_rng *r);

/* ---- Gaussian Thompson sampling --------------------------------------------------------------
 *
 * Each arm's reward is Normal(mu, 1 / reward_precision) with a known precision; the belief about
 * mu is Normal(mean, 1 / precision), starting at the prior. Fitting n rewards x_i (conjugate
 * update):  precision' = precision + n * reward_precision,
 *           mean'      = (precision * mean + reward_precision * sum x_i) / precision'.
 * An infinite reward precision (one observation, or observations without spread) makes the
 * belief exact: mean' = the rewards' mean, precision' = infinity, and sampling returns the mean.
 *
 * predict(): the arms are visited in a random order (a Fisher-Yates shuffle); the first arm
 * with fewer than num_exploration observations is returned. Otherwise one mu is sampled per arm
 * (in arm order) and the arm with the largest sample wins (ties: the earlier arm). */
typedef struct zeus_gts zeus_gts;

typedef struct zeus_gts_opts {
  double prior_mean;        /* default 0 */
  double prior_precision;   /* >= 0, finite; default 0 (no prior information) */
  double reward_precision;  /* every arm's initial reward precision: >= 0 or INFINITY; default 0 */
  long num_exploration;     /* >= 0; default 1 */
  uint64_t seed;            /* default 123456 */
} zeus_gts_opts;

/* One arm's state. */
typedef struct zeus_gts_arm {
  long arm;
  double mean;              /* posterior mean of mu */
  double precision;         /* posterior precision of mu (INFINITY: exact) */
  double reward_precision;
  long num_observations;
} zeus_gts_arm;

ZEUS_EXTERN void zeus_gts_opts_init(zeus_gts_opts *o /* out */);
/* A bandit over n >= 1 distinct arms (copied, order kept). opts NULL: defaults. ZEUS_EINVAL for
 * no arms, a repeated arm or an option out of range (named). */
ZEUS_EXTERN int zeus_gts_open(zeus_gts **out /* out */, const long *arms, size_t n, const zeus_gts_opts *opts);
ZEUS_EXTERN void zeus_gts_close(zeus_gts *g);
/* Sets an arm's reward precision (>= 0 or INFINITY). ZEUS_ENOENT for an unknown arm. */
ZEUS_EXTERN int zeus_gts_set_reward_precision(zeus_gts *g, long arm, double precision);
/* Updates one arm's belief with n rewards (finite); reset first puts the arm back to the prior
 * with no observations. ZEUS_ENOENT for an unknown arm, ZEUS_EINVAL for a non-finite reward. */
ZEUS_EXTERN int zeus_gts_fit_arm(zeus_gts *g, long arm, const double *rewards, size_t n, bool reset);
/* Fits every arm on the rewards of the pulls (arms[i], rewards[i]); reset applies to every arm. */
ZEUS_EXTERN int zeus_gts_fit(zeus_gts *g, const long *arms, const double *rewards, size_t n, bool reset);
/* The arm to pull next (see above). ZEUS_ESTATE when Thompson sampling meets an arm whose belief
 * has precision 0 (no prior and no information: give a prior precision or explore it). */
ZEUS_EXTERN int zeus_gts_predict(zeus_gts *g, long *arm /* out */);
ZEUS_EXTERN size_t zeus_gts_num_arms(const zeus_gts *g);
/* Arm number i (0 <= i < num_arms) or by value. ZEUS_ERANGE / ZEUS_ENOENT otherwise. */
ZEUS_EXTERN int zeus_gts_arm_at(const zeus_gts *g, size_t i, zeus_gts_arm *out /* out */);
ZEUS_EXTERN int zeus_gts_get_arm(const zeus_gts *g, long arm, zeus_gts_arm *out /* out */);

/* ---- the batch-size optimizer ----------------------------------------------------------------
 *
 * Pruning exploration, num_pruning_rounds rounds: from the default batch size downwards (the
 * default first), then upwards from the one above it; a direction ends at its first batch size
 * that did not reach the target; each batch size that reached it survives the round, and the
 * default moves to the survivor of least cost. The next round starts over from the new default
 * among the survivors. Then a zeus_gts over the survivors (num_exploration 2, the optimizer's
 * prior and seed), each arm fitted on its observed rewards (-cost) with reward precision
 * 1 / variance of those rewards (population variance; INFINITY when they do not vary), over the
 * latest window_size observations of the arm when window_size > 0. Every later observation of
 * an arm refits it the same way.
 *
 * While pruning, predict() returns the batch size the explorer waits for, and observe() must be
 * about that batch size; with `concurrency` an observation of another batch size (a concurrent
 * submission) is kept in the history but does not advance the explorer, without it it is
 * ZEUS_ESTATE. Observations of pruned batch sizes during Thompson sampling are kept in the
 * history only. */
typedef struct zeus_bso zeus_bso;

typedef struct zeus_bso_opts {
  double prior_mean;        /* default 0 */
  double prior_precision;   /* >= 0, finite; default 0 */
  long window_size;         /* >= 0; 0 (default): every observation */
  long num_pruning_rounds;  /* >= 1; default 2 */
  bool concurrency;         /* default false */
  uint64_t seed;            /* default 123456 */
} zeus_bso_opts;

typedef enum zeus_bso_phase { ZEUS_BSO_PRUNING = 0, ZEUS_BSO_THOMPSON = 1 } zeus_bso_phase;

ZEUS_EXTERN void zeus_bso_opts_init(zeus_bso_opts *o /* out */);
/* An optimizer over n >= 1 distinct positive batch sizes (copied and sorted); default_bs must be
 * one of them. opts NULL: defaults. ZEUS_EINVAL naming what is wrong. */
ZEUS_EXTERN int zeus_bso_open(zeus_bso **out /* out */, const long *batch_sizes, size_t n, long default_bs,
                              const zeus_bso_opts *opts);
ZEUS_EXTERN void zeus_bso_close(zeus_bso *b);
/* The batch size to use next. ZEUS_ESTATE when pruning left no batch size (none reached the
 * target), or from zeus_gts_predict. */
ZEUS_EXTERN int zeus_bso_predict(zeus_bso *b, long *batch_size /* out */);
/* Learns the cost (finite, >= 0) of one try with batch_size and whether it reached the target.
 * ZEUS_EINVAL for an unknown batch size or a bad cost, ZEUS_ESTATE for an unexpected batch size
 * while pruning without concurrency (nothing is recorded then). */
ZEUS_EXTERN int zeus_bso_observe(zeus_bso *b, long batch_size, double cost, bool reached);
ZEUS_EXTERN zeus_bso_phase zeus_bso_get_phase(const zeus_bso *b);
/* The batch size the explorer waits for; 0 during Thompson sampling. */
ZEUS_EXTERN long zeus_bso_expecting(const zeus_bso *b);
/* The bandit (borrowed, valid until the next call on b); NULL while pruning. */
ZEUS_EXTERN const zeus_gts *zeus_bso_bandit(const zeus_bso *b);
/* Number of observations so far, and observation i (batch size and reward = -cost). */
ZEUS_EXTERN size_t zeus_bso_num_observations(const zeus_bso *b);
ZEUS_EXTERN int zeus_bso_observation(const zeus_bso *b, size_t i, long *batch_size /* out */,
                                     double *reward /* out */);
/* The whole state (options, history, explorer, bandit with its random generator) as JSON text
 * (free() it); doubles are written with 17 significant digits and non-finite ones as the strings
 * "inf"/"-inf", so loading gives back exactly the same optimizer: the same later predictions. */
ZEUS_EXTERN int zeus_bso_save_state(const zeus_bso *b, char **json /* out */);
/* Rebuilds an optimizer from zeus_bso_save_state's text. ZEUS_EPARSE naming the bad field. */
ZEUS_EXTERN int zeus_bso_load_state(zeus_bso **out /* out */, const char *json);

/* ---- rules ------------------------------------------------------------------------------------ */

/* The learning rate for batch size bs, from the rate default_lr tuned for default_bs: scaled by
 * sqrt(bs / default_bs) for adam, adamw and adadelta, by bs / default_bs for sgd (names in any
 * case). ZEUS_EINVAL for another optimizer (give the rate per batch size instead), a
 * non-positive batch size or a non-finite or negative rate. */
ZEUS_EXTERN int zeus_bso_scale_lr(const char *optimizer, double default_lr, long default_bs, long bs,
                                  double *lr /* out */);

/* ---- the training side: zeus_job --------------------------------------------------------------
 *
 * The C counterpart of the original's ZeusDataLoader protocol. Settings come from the
 * environment (`zeus run` sets them; each is validated by zeus_job_open, an error naming the
 * variable, its value and what was expected):
 *   ZEUS_TARGET_METRIC   required: the validation metric at which training stops (a number)
 *   ZEUS_LOG_DIR         folder for the result files (default "zeus_log"; created)
 *   ZEUS_JOB_ID          prefix of the result file (default "zeus"; no '/', at most 200 chars)
 *   ZEUS_COST_THRESH     stop before the epoch that would reach this cost (> 0 or "inf", default)
 *   ZEUS_ETA_KNOB        eta of the cost, in [0, 1] (default 0.5)
 *   ZEUS_PROFILE_PARAMS  "warmup,measure": training steps to warm up at, then to measure, each
 *                        power limit (default "10,40"; warmup >= 0, measure >= 1)
 *   ZEUS_USE_OPTIMAL_PL  false: observer mode, run at the maximum limit but account time and
 *                        energy as if the optimal limit were used (default true)
 *
 * The loop (every rank of a data-parallel job makes the same calls):
 *
 *   zeus_job_opts o = {.batch_size = 128, .max_epochs = 100, .steps_per_epoch = 390};
 *   zeus_job *job;  if (zeus_job_open(&job, &o)) { fprintf(stderr, "%s\n", zeus_errmsg()); ... }
 *   bool more; long epoch;
 *   while (zeus_job_next_epoch(job, &more, &epoch) == ZEUS_OK && more) {
 *     zeus_job_train_begin(job);
 *     for (each batch) { zeus_job_train_step_begin(job); train(batch); zeus_job_train_step_end(job); }
 *     zeus_job_train_end(job);
 *     zeus_job_eval_begin(job);
 *     for (each batch) { zeus_job_eval_step_begin(job); eval(batch); zeus_job_eval_step_end(job); }
 *     zeus_job_eval_end(job);
 *     zeus_job_report_metric(job, accuracy, true);
 *   }
 *   zeus_job_close(job);   // puts back the power limits it changed
 *
 * Power limits: when LOG_DIR/bs<b>.power.json (b = batch_size x ranks) is missing, the first
 * epoch profiles every limit from the GPUs' maximum down to their minimum in pl_step_w strides:
 * for each, `warmup` steps at the limit, then `measure` steps in a measurement window (power =
 * energy of every GPU of every rank / time, throughput = steps / time). When all windows do not
 * fit in one epoch (steps_per_epoch - 1 steps), both counts are scaled down by the same factor;
 * ZEUS_EINVAL from zeus_job_open when measure would become 0. The optimal limit minimises
 * (eta * power + (1 - eta) * max_power) / throughput; it is applied for the rest of the epoch
 * (so the evaluation is measured at it) and the profile is saved to bs<b>.power.json, which
 * later runs of the same batch size load instead of profiling. Later epochs run at the optimal
 * limit (the maximum in observer mode).
 *
 * Stopping (zeus_job_next_epoch sets *more = false): the target was reached (report_metric),
 * max_epochs epochs ran, or the cost so far plus the predicted cost of one more epoch (its steps
 * at the optimal limit's throughput and power, training and evaluation) reaches ZEUS_COST_THRESH;
 * the prediction is made whenever the profile is known (a loaded profile allows stopping before
 * the first epoch) and not while profiling. On stopping, rank 0 writes
 * LOG_DIR/<job_id>+bs<b>.train.json: {"energy": J, "time": s, "cost", "num_epochs", "epochs",
 * "reached": bool, "batch_size", "power_limit_w", "observer_mode", "observed_energy",
 * "observed_time"} (num_epochs and epochs are the same count; observed_* are the measured values,
 * which differ from energy and time only in observer mode).
 *
 * Data parallel: with a collective, energy is summed and time maximised across ranks at every
 * window, decisions are rank 0's (broadcast), files are rank 0's; max_power is the maximum limit
 * times the GPUs of every rank. */
typedef struct zeus_job zeus_job;

typedef struct zeus_job_opts {
  long batch_size;             /* this process's batch size, > 0 */
  long max_epochs;             /* > 0 */
  long steps_per_epoch;        /* training steps of one epoch, > 0 */
  long eval_steps_per_epoch;   /* evaluation steps of one epoch, >= 0 (predicts the first epoch) */
  /* The GPUs of this process. NULL: a monitor over every visible GPU, opened and closed by the
   * job. Borrowed. */
  zeus_monitor *monitor;
  /* Data-parallel ranks; NULL: one process. Borrowed. */
  const zeus_collective *collective;
  unsigned pl_step_w;          /* power-limit stride; 0: 25 */
  /* Do not install SIGINT/SIGTERM handlers that put the GPUs back. The handlers (shared with the
   * power-limit optimizer and the frequency controller) restore every GPU, then run the handler
   * that was there before (the default one ends the process); an ignored signal stays ignored. */
  bool no_signal_handlers;
} zeus_job_opts;

/* What a job knows (strings borrowed from the job). */
typedef struct zeus_job_info {
  double target_metric;
  double cost_threshold;       /* INFINITY when unset */
  double eta;
  long warmup_steps;           /* after any scaling */
  long measure_steps;
  bool use_optimal_pl;
  const char *log_dir;
  const char *job_id;
  const char *train_json;      /* path of the result file */
  const char *power_json;      /* path of the power profile */
  long batch_size;             /* batch_size x ranks */
  unsigned num_gpus;           /* GPUs of every rank */
  double max_power_w;          /* maximum limit x num_gpus */
  bool profiling;              /* limits are (still) being profiled in this run */
  unsigned optimal_power_limit_w; /* 0 until known */
  long epochs;                 /* epochs begun */
  double energy_j;             /* accounted so far (as if optimal in observer mode) */
  double time_s;
  double cost;
  bool reached;
  bool finished;               /* the result file was written */
  /* The cost after one more epoch as zeus_job_next_epoch last predicted it; NAN when it made no
   * prediction (no threshold, profiling, or the job stopped for another reason first). */
  double predicted_cost;
  bool stopped_by_cost;        /* the job stopped because predicted_cost reached the threshold */
} zeus_job_info;

/* Reads and validates the settings, prepares the power profile (loads bs<b>.power.json or
 * plans the profiling windows) and creates LOG_DIR. Errors: ZEUS_EINVAL / ZEUS_ERANGE naming the
 * variable or option; ZEUS_EPARSE for a malformed power profile (named: delete it to profile
 * again); ZEUS_EIO for the folder; device and monitor errors. */
ZEUS_EXTERN int zeus_job_open(zeus_job **out /* out */, const zeus_job_opts *opts);
/* Puts back the power limits the job changed, removes its signal handlers, frees it. */
ZEUS_EXTERN void zeus_job_close(zeus_job *j);
/* Decides whether to run another epoch (see Stopping above). *epoch is the 0-based index of the
 * epoch to run. On stopping, writes the result file (once). */
ZEUS_EXTERN int zeus_job_next_epoch(zeus_job *j, bool *more /* out */, long *epoch /* out */);
/* Phase and step hooks. Each train step needs its begin and end (ZEUS_ESTATE otherwise); the
 * evaluation step hooks only count steps. */
ZEUS_EXTERN int zeus_job_train_begin(zeus_job *j);
ZEUS_EXTERN int zeus_job_train_step_begin(zeus_job *j);
ZEUS_EXTERN int zeus_job_train_step_end(zeus_job *j);
ZEUS_EXTERN int zeus_job_train_end(zeus_job *j);
ZEUS_EXTERN int zeus_job_eval_begin(zeus_job *j);
ZEUS_EXTERN int zeus_job_eval_step_begin(zeus_job *j);
ZEUS_EXTERN int zeus_job_eval_step_end(zeus_job *j);
ZEUS_EXTERN int zeus_job_eval_end(zeus_job *j);
/* Reports the epoch's validation metric (all-reduce it across ranks first): the target is
 * reached when value >= target (higher_is_better) or value <= target. ZEUS_EINVAL for NaN. */
ZEUS_EXTERN int zeus_job_report_metric(zeus_job *j, double value, bool higher_is_better);
ZEUS_EXTERN void zeus_job_get_info(const zeus_job *j, zeus_job_info *out /* out */);

ZEUS_END_DECLS
#endif
