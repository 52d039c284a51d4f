/* zeus/job.h: the training side of recurring jobs (zeus_job; src/job/).
 *
 * A recurring training job is launched again and again by `zeus run` (zeus/run.h), which picks
 * its batch size with the batch-size optimizer (zeus/bso.h). The training program talks back
 * through the ZEUS_* environment protocol, handled here: zeus_job stops training when the target
 * metric was reached, at the maximum number of epochs, or when the next epoch would push the cost
 * over the driver's threshold; it profiles the GPU power limits during the first epoch and
 * applies the best; and it writes the result file the driver reads.
 *
 * Cost (the Zeus cost of the original): eta * energy_j + (1 - eta) * max_power_w * time_s, where
 * max_power_w is the GPUs' maximum power limit times the number of GPUs of the job.
 *
 * Thread safety: a job is used from one thread at a time.
 */
#ifndef ZEUS_JOB_H
#define ZEUS_JOB_H

#include "zeus/collective.h"
#include "zeus/common.h"
#include "zeus/monitor.h"

ZEUS_BEGIN_DECLS

/* The C counterpart of the original's ZeusDataLoader protocol. Settings come from the
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
 *   zeus_job_opts o;  zeus_job_opts_init(&o);
 *   o.batch_size = 128; o.max_epochs = 100; o.steps_per_epoch = 390;
 *   zeus_job *job;  if (zeus_job_open(&job, &o)) { fprintf(stderr, "%s\n", zeus_errmsg()); ... }
 *   bool more; long epoch;
 *   while (zeus_job_next_epoch(job, &more, &epoch) == ZEUS_OK && more) {
 *     zeus_job_train_begin(job);
 *     for (each batch) {
 *       zeus_job_train_step_begin(job); train(batch); zeus_job_train_step_end(job);
 *     }
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

/* Zero-initialised means defaults, except for the three required sizes (batch_size, max_epochs,
 * steps_per_epoch), which have none. */
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

/* Fills *o with the defaults (pl_step_w 25, everything else zero); the three sizes must then be
 * set. */
ZEUS_EXTERN void zeus_job_opts_init(zeus_job_opts *o /* out */);

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
