/* zeus/plo.h: the power-limit optimizer (GlobalPowerLimitOptimizer of the original).
 *
 * Driven by the training loop, it profiles each power limit just in time (a few warm-up steps,
 * then a measurement window of profile_steps steps), from the GPUs' maximum limit down to their
 * minimum in pl_step strides, then applies the optimum chosen by a selector. A profile file
 * saves the measurements so later runs skip profiling.
 *
 *   zeus_monitor *mon;  zeus_monitor_open(&mon, NULL);
 *   zeus_plo_opts o;    zeus_plo_opts_init(&o);   // defaults; then change what you need
 *   o.profile_path = "plo-profile.json";
 *   zeus_plo *plo;      zeus_plo_open(&plo, mon, &o);
 *   for (epoch ...) {
 *     for (step ...) { zeus_plo_on_step_begin(plo); train_step(); zeus_plo_on_step_end(plo); }
 *     zeus_plo_on_epoch_end(plo);
 *   }
 *   zeus_plo_close(plo);   // GPUs get back the limits they had before
 *   zeus_monitor_close(mon);
 *
 * States (the original's): READY -> WARMUP after wait_steps + 1 step begins; WARMUP ->
 * PROFILING after warmup_steps more (warmup_steps = 0 goes straight to PROFILING); PROFILING
 * ends after profile_steps with one measurement, then WARMUP at the next limit or DONE, where
 * the optimum is applied. An epoch ending during WARMUP or PROFILING cancels the window, puts
 * the maximum limit back and retries the same limit (READY). Starting from an existing profile
 * file, the optimizer is DONE at once with the optimum applied.
 *
 * Robust profiling (the default; ZEUS_PLO_PROFILING=original gives the original's exactly): each
 * window also times every step, leaves out outlier steps (> 5 scaled MADs from the median) and
 * records the spread; when steps are noisy, windows under 1 s get more steps (only with
 * zeus_plo_set_epoch_steps) and, after the sweep, the limits within the measured noise of the best
 * (MaxSlowdownConstraint: of the threshold, with the reference limit) are measured again in a
 * palindromic order, and the choice is made on those windows. Profiling takes at most 1.5x the
 * original's steps on the same settings and never goes past the epoch in which the sweep ends.
 * Noiseless steps (replayed profiles) give the original's limit changes and choice. docs/plo.md.
 *
 * Thread safety: one optimizer is driven from one thread.
 */
#ifndef ZEUS_PLO_H
#define ZEUS_PLO_H

#include "zeus/collective.h"
#include "zeus/common.h"
#include "zeus/monitor.h"

ZEUS_BEGIN_DECLS

/* One profiled power limit: energy summed over every GPU (and rank), time of the window
 * (the largest across ranks). */
typedef struct zeus_plo_measurement {
  unsigned power_limit_w;
  double energy_j;
  double time_s;
} zeus_plo_measurement;

/* ---- selectors ----------------------------------------------------------------------------- */

typedef enum zeus_selector_kind {
  ZEUS_SELECTOR_ENERGY = 0,        /* least energy */
  ZEUS_SELECTOR_TIME,              /* least time */
  ZEUS_SELECTOR_ZEUS_COST,         /* least eta*energy + (1-eta)*max_power*time */
  ZEUS_SELECTOR_MAX_SLOWDOWN,      /* lowest limit with time <= factor * time at the largest */
  ZEUS_SELECTOR_CUSTOM,            /* the caller's callback */
} zeus_selector_kind;

/* A user-supplied selector: writes the chosen limit (one of m[i].power_limit_w) to *out_w.
 * Returns ZEUS_OK or a negative code (message through zeus_set_errmsg()). */
typedef int (*zeus_selector_fn)(void *ctx, const zeus_plo_measurement *m, size_t n,
                                unsigned *out_w);

typedef struct zeus_selector {
  zeus_selector_kind kind;
  double eta;            /* ZEUS_COST: in [0, 1] */
  unsigned world_size;   /* ZEUS_COST: number of GPUs of the job, >= 1 */
  double factor;         /* MAX_SLOWDOWN: >= 1 */
  zeus_selector_fn fn;   /* CUSTOM */
  void *ctx;             /* CUSTOM */
} zeus_selector;

/* Constructors that validate their parameters: an out-of-range one is ZEUS_EINVAL naming the
 * parameter, its value and the allowed range. */
ZEUS_EXTERN int zeus_selector_energy(zeus_selector *out /* out */);
ZEUS_EXTERN int zeus_selector_time(zeus_selector *out /* out */);
ZEUS_EXTERN int zeus_selector_zeus_cost(zeus_selector *out /* out */, double eta,
                                        unsigned world_size);
ZEUS_EXTERN int zeus_selector_max_slowdown(zeus_selector *out /* out */, double factor);
ZEUS_EXTERN int zeus_selector_custom(zeus_selector *out /* out */, zeus_selector_fn fn, void *ctx);

/* Chooses a power limit (W) from n >= 1 measurements. Ties go to the measurement that comes
 * first (the original's rule: a profile lists the limits from the highest down, so a tie keeps
 * the higher limit); MAX_SLOWDOWN takes the lowest qualifying limit. */
ZEUS_EXTERN int zeus_selector_select(const zeus_selector *s, const zeus_plo_measurement *m,
                                     size_t n, unsigned *out_w /* out */);

/* The Zeus time-energy cost eta*energy_j + (1-eta)*max_power_w*time_s
 * (zeus.utils.metric.zeus_cost). */
ZEUS_EXTERN double zeus_cost(double energy_j, double time_s, double eta, double max_power_w);

/* ---- profile files --------------------------------------------------------------------------- */

/* Reads {"measurements": [{"power_limit": W, "energy": J, "time": s}, ...]}. A missing file is
 * ZEUS_ENOENT; a malformed, empty or incomplete one is ZEUS_EPARSE naming the file and what is
 * wrong. *out is released with zeus_free(). */
ZEUS_EXTERN int zeus_plo_profile_load(const char *path, zeus_plo_measurement **out /* out */,
                                      size_t *n /* out */);
/* Writes the same shape atomically (temporary file, fsync, rename). */
ZEUS_EXTERN int zeus_plo_profile_save(const char *path, const zeus_plo_measurement *m, size_t n);

/* ---- the optimizer --------------------------------------------------------------------------- */

typedef struct zeus_plo zeus_plo;

typedef enum zeus_plo_state {
  ZEUS_PLO_READY = 0,
  ZEUS_PLO_WARMUP,
  ZEUS_PLO_PROFILING,
  ZEUS_PLO_DONE,
} zeus_plo_state;

/* Start from zeus_plo_opts_init(): zero is a value here (no wait or warm-up steps), and a zeroed
 * struct is refused (profile_steps and pl_step_w 0). */
typedef struct zeus_plo_opts {
  /* NULL: ZeusCost(eta 0.5, world_size = GPUs of the monitor summed over ranks). Copied. */
  const zeus_selector *selector;
  long wait_steps;      /* >= 0, default 1 */
  long warmup_steps;    /* >= 0, default 10 */
  long profile_steps;   /* > 0, default 40 */
  unsigned pl_step_w;   /* > 0, default 25 */
  /* Existing file: load it and start DONE. Missing file: write it when profiling ends.
   * NULL: none. */
  const char *profile_path;
  /* Several processes: energy summed and time maxed across ranks. NULL: one process. Borrowed. */
  const zeus_collective *collective;
  /* Do not install SIGINT/SIGTERM handlers that restore the GPUs (the caller handles signals). */
  bool no_signal_handlers;
  /* The confidence mode (issue 37), opt-in: in (0, 1), e.g. 0.95. After the sweep, the limits that
   * could still be the best are measured again, in interleaved rounds, until the choice is within
   * the selector's tolerance at this confidence (zeus_plo_confidence) or the cap is reached. The
   * choice is looked at a few times (each time the steps have doubled), the error allowed spent
   * over the looks; at the cap a choice at this confidence is kept, else the higher of the
   * remaining contenders is chosen. 0: off, unless ZEUS_PLO_CONFIDENCE is set.
   * Noiseless steps and ZEUS_PLO_PROFILING=original ignore it. */
  double confidence;
  /* The cap of the confidence mode in steps since open (>= 0). 0: the end of the epoch in which
   * the sweep ends (the epoch's length as zeus_plo_set_epoch_steps said, else its end). With a cap,
   * measuring goes on across epoch ends. */
  long max_profile_steps;
} zeus_plo_opts;

/* Fills *o with the defaults. A zeroed struct is rejected (profile_steps 0), so start from this. */
ZEUS_EXTERN void zeus_plo_opts_init(zeus_plo_opts *o /* out */);

/* Creates an optimizer over the monitor's GPUs (borrowed; it must outlive the optimizer).
 * Turns persistence mode on, then sets every GPU to the maximum limit (or, from a profile file,
 * the optimum), calling the device for every GPU even where the limit is already there, as the
 * original does; later changes call only GPUs whose limit differs. Errors: ZEUS_EINVAL for an option out of range or GPUs whose
 * power-limit ranges differ (named), ZEUS_EPARSE for a bad profile file, device errors. */
ZEUS_EXTERN int zeus_plo_open(zeus_plo **out /* out */, zeus_monitor *monitor,
                              const zeus_plo_opts *opts);
/* Gives every GPU the optimizer touched the limit it had before, and frees it. */
ZEUS_EXTERN void zeus_plo_close(zeus_plo *p);

/* Training-loop hooks. on_step_end and on_epoch_begin do nothing (so a loop can call all four). */
ZEUS_EXTERN int zeus_plo_on_step_begin(zeus_plo *p);
ZEUS_EXTERN int zeus_plo_on_step_end(zeus_plo *p);
ZEUS_EXTERN int zeus_plo_on_epoch_begin(zeus_plo *p);
ZEUS_EXTERN int zeus_plo_on_epoch_end(zeus_plo *p);

/* Tells the optimizer how many steps an epoch has (0: unknown, the default). Robust profiling (the
 * default, see below) lengthens windows shorter than 1 s only when it knows the first epoch holds
 * the longer sweep; without this call it keeps the original's windows. Call before the first
 * step. ZEUS_EINVAL for a negative count. */
ZEUS_EXTERN int zeus_plo_set_epoch_steps(zeus_plo *p, long steps);

ZEUS_EXTERN zeus_plo_state zeus_plo_get_state(const zeus_plo *p);
/* READY, WARMUP, PROFILING: step begins left until the next transition (the original's
 * `steps` of Ready, Warmup and Profiling); 0 when DONE. */
ZEUS_EXTERN long zeus_plo_steps_left(const zeus_plo *p);
/* The grid limit (W) being profiled, or to be profiled next when READY; 0 when DONE or when every
 * limit is measured. */
ZEUS_EXTERN unsigned zeus_plo_next_power_limit_w(const zeus_plo *p);
/* The limit (W) being profiled or applied now. */
ZEUS_EXTERN unsigned zeus_plo_current_power_limit_w(const zeus_plo *p);
/* The chosen limit (W); 0 until DONE. */
ZEUS_EXTERN unsigned zeus_plo_optimal_power_limit_w(const zeus_plo *p);
/* What the choice could not tell apart (issue 37), once DONE: the limits (W) within the measured
 * noise of the optimum (two standard errors of a difference, from each limit's step spread over
 * its steps and the energy counter's tick error), in profiling order; *out_w borrowed, valid until
 * close; 0 with none, before DONE, or when unknown. */
ZEUS_EXTERN size_t zeus_plo_contenders(const zeus_plo *p, const unsigned **out_w /* out */);
/* The confidence the optimum reached, once DONE: the probability, from the same errors taken as
 * independent normals, that it is within the selector's tolerance of the best (1 % of the cost,
 * energy or time; MaxSlowdownConstraint: within the factor + 0.5 % and no lower limit with 1 %
 * less energy within the factor). 1 for noiseless measurements; NaN before DONE, with
 * ZEUS_PLO_PROFILING=original, or for a loaded profile without a recorded decision. */
ZEUS_EXTERN double zeus_plo_confidence(const zeus_plo *p);
/* The measurements so far (borrowed, valid until the next hook call). */
ZEUS_EXTERN size_t zeus_plo_measurements(const zeus_plo *p,
                                         const zeus_plo_measurement **out /* out */);
/* The power limits to explore, largest first (borrowed). */
ZEUS_EXTERN size_t zeus_plo_power_limits(const zeus_plo *p, const unsigned **out_w /* out */);

ZEUS_END_DECLS
#endif
