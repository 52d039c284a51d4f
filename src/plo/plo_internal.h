/* src/plo/plo_internal.h: pieces of the power-limit optimizer shared between its files (not API). */
#ifndef ZEUS_PLO_INTERNAL_H
#define ZEUS_PLO_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "zeus/plo.h"

/* Validates a selector's parameters; ZEUS_EINVAL names the parameter, its value and the range. */
int zeus__selector_check(const zeus_selector *s);
/* "Energy", "Time", "ZeusCost", "MaxSlowdownConstraint", "custom". */
const char *zeus__selector_name(const zeus_selector *s);

/* What one measurement of a profile is (robust profiling records it; extra fields of the file). */
typedef struct zeus_plo_window_info {
  long steps;          /* steps measured, summed over its windows (0: unknown, e.g. a loaded file) */
  double duration_s;   /* wall time of those windows on the backend clock */
  double step_cv;      /* spread: coefficient of variation of the per-step times */
  long windows;        /* windows averaged (1 from the sweep, more where re-measured) */
  long outliers;       /* steps left out as outliers (> 5 scaled MADs from the window's median) */
} zeus_plo_window_info;

/* What a live run chose among after re-measuring (the profile file's "choice"): loading the file
 * with the same selector chooses among the same limits, so it makes the live run's choice. */
typedef struct zeus__plo_choice {
  char selector[32]; /* zeus__selector_name of the live run's selector; "" when none is recorded */
  double eta;        /* ZeusCost's eta (0 otherwise) */
  unsigned *among_w; /* the limits chosen among (owned: free it; NULL when none) */
  size_t namong;
  /* The file's "decision" (issue 37): the optimum the live run chose, the limits it could not tell
   * apart from it and the confidence reached; decided false when the file has none. */
  bool decided;
  unsigned optimal_w;
  double confidence;
  unsigned *contenders_w; /* owned: free it; NULL when none */
  size_t ncontenders;
} zeus__plo_choice;

/* zeus_plo_profile_save with, when info is not NULL, each measurement's "steps", "duration_s",
 * "step_time_cv", "windows" and "outlier_steps", and when choice is not NULL a top-level
 * "choice": {"selector", "eta" (ZeusCost), "among_w"} (when it has limits to choose among) and
 * "decision": {"optimal_power_limit_w", "contenders_w", "confidence"} (when decided); readers of
 * the original's format ignore them. */
int zeus__plo_profile_save_info(const char *path, const zeus_plo_measurement *m,
                                const zeus_plo_window_info *info, size_t n, const zeus__plo_choice *choice);
/* zeus_plo_profile_load that also reads the file's "choice" into *choice (zeroed when absent). */
int zeus__plo_profile_load_choice(const char *path, zeus_plo_measurement **out, size_t *n,
                                  zeus__plo_choice *choice);
/* The per-measurement info of an optimizer (NULL for a loaded profile or original profiling). */
const zeus_plo_window_info *zeus__plo_window_info(const zeus_plo *p);
/* Whether the optimizer profiles as the original does (ZEUS_PLO_PROFILING=original at open). */
bool zeus__plo_is_original(const zeus_plo *p);
/* Total steps profiling took (step begins from open until DONE). */
long zeus__plo_profiling_steps(const zeus_plo *p);

/* zeus_plo_open with the profiling mode forced: 0 robust, 1 original, -1 from ZEUS_PLO_PROFILING. */
int zeus__plo_open_mode(zeus_plo **out, zeus_monitor *monitor, const zeus_plo_opts *opts, int mode);

/* ---- robust profiling's measurement rules (robust.c), shared with zeus_job (issue 30) ---- */

/* Step times more than this many scaled MADs from the window's median are left out. */
#define ZEUS__ROBUST_OUTLIER_MADS 5.0
/* Candidates within this many standard errors of a difference of two windows are re-measured. */
#define ZEUS__ROBUST_NOISE_Z 3.0
/* Profiling takes at most this times the steps of the original on the same settings. */
#define ZEUS__ROBUST_STEP_BUDGET 1.5
/* Step times spread less than this (relative) are noiseless: the original's profiling. */
#define ZEUS__ROBUST_NOISELESS_CV 1e-4

typedef struct zeus__step_summary {
  double time_s; /* the window's time for nominal_steps steps, outliers left out */
  double cv;     /* coefficient of variation of the kept step times */
  long outliers; /* steps left out */
} zeus__step_summary;

/* One window of n steps (per-step times v, wall time window_s): its time scaled to nominal_steps
 * steps (the window's own time when no step is an outlier), its spread and its outliers. */
zeus__step_summary zeus__robust_window(const double *v, long n, long nominal_steps, double window_s);
/* The relative difference two windows of `steps` steps with spread cv cannot be told apart by. */
double zeus__robust_threshold(double cv, long steps);
/* The re-measuring plan for a selector that takes the least key: the candidates (key within
 * 1 + thr of the least; *ncand of them, may be NULL), best first, then the same in reverse
 * (A B B A), as many as `windows` windows allow; at least two limits or none. seq needs room for
 * 2 * n indices; returns its length. */
size_t zeus__robust_palindrome(const double *key, size_t n, double thr, size_t windows, size_t *seq,
                               size_t *ncand);
/* The re-measuring plan when no palindrome of two limits fits (few limits): one window each for
 * the two best candidates (key within 1 + thr of the least; *ncand of them, may be NULL), the
 * first window's limit (index 0, whose sweep window does not count) in place of the second when it
 * is a candidate, and measured last; otherwise the best last. Returns the plan's length: 2, or 0
 * with fewer than two candidates or windows. */
size_t zeus__robust_short_plan(const double *key, size_t n, double thr, size_t windows, size_t *seq, size_t *ncand);
/* How many windows of len steps, each after warmup steps, fit in room steps; with palindrome
 * (A B ... B A) an even number, the middle pair (one limit twice) warming up once. */
size_t zeus__robust_window_count(double room, long warmup, long len, bool palindrome);
/* Whether window k of the re-measuring plan seq starts warm: at the limit the window before it
 * measured (window 0: the sweep's last, grid index nlimits - 1), so that it needs no warm-up. */
bool zeus__robust_warm(const size_t *seq, size_t k, size_t nlimits);
/* The steps of every window of the plan seq (n windows): len, lengthened alike by what room
 * leaves after the windows and their warm-ups (warm ones none), at most cap. */
long zeus__robust_refine_len(const size_t *seq, size_t n, size_t nlimits, double room, long warmup, long len,
                             long cap);
/* The time of a re-measured limit: the mean of its windows, the sweep's among them unless it was
 * the profiling's first window (which may catch the job still warming up: the reference limit's),
 * new_sum_s the sum of the new windows' times (each per the same number of steps as sweep_s). */
double zeus__robust_remeasured_time(double sweep_s, bool first_window, double new_sum_s, long new_windows);
/* A choice is right within this of the best (ZeusCost, Energy, Time: issue 30's rule). */
#define ZEUS__ROBUST_TOL 0.01
/* MaxSlowdownConstraint: a time within the factor and this much more is right. */
#define ZEUS__ROBUST_SLOWDOWN_TOL 0.005
/* The confidence mode looks at its choice after the first round that ends at or past this many
 * times the steps of the look before (so a few looks up to any cap), and the r-th look settles at
 * a confidence of 1 - (1 - target) / (r (r + 1)): the looks' chances of settling wrong sum to at
 * most 1 - target. */
#define ZEUS__CONF_LOOK_GROWTH 2.0
/* Limits within this many standard errors of a difference of the choice are its contenders. */
#define ZEUS__ROBUST_CONTENDER_Z 2.0

/* The report of a choice c that takes the least key (ZeusCost, Energy, Time), each key with
 * standard error sd (absolute): the confidence that c is within tol of the best (the product over
 * the other limits of P(key_c <= (1 + tol) key_j), the errors taken as independent normals; 1 when
 * no key has an error), and in contender[j] (may be NULL) whether limit j is within z standard
 * errors of the difference above c; in pj[j] (may be NULL) limit j's factor of the product (1 for c). */
double zeus__robust_decide_min(const double *key, const double *sd, size_t n, size_t c, double tol, double z,
                               bool *contender, double *pj);
/* The same for MaxSlowdownConstraint(factor), limit 0 the reference: ratio[i] = time_i / time_0 with
 * standard error sd[i]; the confidence that c is within the factor (+ ZEUS__ROBUST_SLOWDOWN_TOL) and
 * that no lower limit with 1 % less energy is within it; contenders: the limits (not 0, not c)
 * whose ratio is within z standard errors of the factor; pj[j] (may be NULL): the factor of limit j
 * (c's: that it is within the factor; 1 for the limits that do not enter). */
double zeus__robust_decide_slowdown(const double *ratio, const double *sd, const double *energy, size_t n, size_t c,
                                    double factor, double z, bool *contender, double *pj);
/* ZEUS_PLO_PROFILING: "robust" (default) or "original" (*original true); errors name the variable. */
int zeus__robust_mode_from_env(bool *original);

/* ---- noisy replays (noisy_replay.c): robustness of the choice (issue 30) ---- */

typedef struct zeus__plo_noise {
  double jitter;           /* standard deviation of each step's work, relative (0.05: 5 %) */
  double slow_first;       /* the first profiling window's steps take this much more (0.05) */
  double drift;            /* the work grows linearly by this much over the original's steps (0.02) */
  double counter_period_s; /* the simulated energy counter ticks this often (0: continuous) */
  const char *hardware;    /* a simulated hardware profile for every GPU ("h100"), NULL: ideal */
  uint64_t seed;
  long wait_steps, warmup_steps, profile_steps;
  long steps_per_epoch;    /* 0: three times the original's profiling steps */
  const char *profile_path; /* the optimizer's profile file (loaded when it exists), NULL: none */
  double confidence;        /* the optimizer's confidence mode (0: off) */
  long max_profile_steps;   /* its cap (0: the end of the first epoch) */
} zeus__plo_noise;

#define ZEUS__PLO_REPLAY_MAX 64
typedef struct zeus__plo_replay_result {
  unsigned chosen_w;
  unsigned ngpu;
  long steps;          /* step begins the profiling took */
  long original_steps; /* the original's on the same settings: wait + 1 + limits * (warmup + profile) */
  zeus_plo_measurement meas[ZEUS__PLO_REPLAY_MAX];
  size_t n;
  double confidence;   /* zeus_plo_confidence (NaN: unknown) */
  unsigned contenders_w[ZEUS__PLO_REPLAY_MAX];
  size_t ncontenders;
} zeus__plo_replay_result;

/* A standard normal deviate (Box-Muller) from the splitmix64 state *s. */
double zeus__plo_gauss(uint64_t *s);
/* No noise; wait 1, warm-up 3, profile 10 steps. */
void zeus__plo_noise_init(zeus__plo_noise *n);
/* Issue 30's setting: 5 % jitter, first window 5 % slow, 2 % drift, 100 ms counter ticks. */
void zeus__plo_noise_issue30(zeus__plo_noise *n);
/* Runs the optimizer (mode as zeus__plo_open_mode) on simulated GPUs modelled by the profile CSV
 * (virtual clock), with each step's work scaled by the noise, until it is done. */
int zeus__plo_noisy_replay(const char *profile, const zeus_selector *sel, const zeus__plo_noise *nz, int mode,
                           zeus__plo_replay_result *res /* out */);
/* Whether chosen_w is right on the noiseless measurements `truth`: its cost under the selector at
 * most 1 % above the best; for MaxSlowdownConstraint its time within the factor + 0.5 % and its
 * energy within 1 % of the least energy within the factor. *excess: its cost over the best. */
int zeus__plo_judge(const zeus_selector *sel, const zeus_plo_measurement *truth, size_t n, unsigned chosen_w,
                    bool *right /* out */, double *excess /* out, may be NULL */);
/* Runs `runs` noisy replays (seeds nz->seed, +1, ...) and counts the right choices; the largest
 * ratio of profiling steps to the original's goes to *max_steps_ratio (may be NULL). */
int zeus__plo_robustness(const char *profile, const zeus_selector *sel, const zeus__plo_noise *nz, int mode, int runs,
                         int *right /* out */, double *max_steps_ratio /* out */);
/* How far the best limit on the noiseless measurements `truth` leads the next (relative): the
 * least key over the best's, minus one, over the other limits; for MaxSlowdownConstraint a limit
 * within the factor by its energy, one outside by how far its time is past the bound. */
int zeus__plo_lead(const zeus_selector *sel, const zeus_plo_measurement *truth, size_t n, double *lead /* out */);
/* What no profiling can beat by much on the optimizer's 1.5x step budget: the share of `trials`
 * right choices by an oracle that knows which limits contend (cost within a width w of the best;
 * MaxSlowdown: time within w of the bound, and the reference), knows the others exactly, spends
 * the budget's steps on the contenders equally and without warm-up, and measures time with the
 * noise's step jitter (energy follows time at each limit's exact power); the best over w = 6 %,
 * 4 %, 2.5 % and 1.5 % where the contenders still include a wrong limit. With `swept`, the oracle
 * must first sweep every limit as the original does (a warm-up and a window of profile_steps at
 * each), and only the rest of the budget goes to the contenders, on top of their sweep windows:
 * the bound of any profiling that measures every limit before it re-measures. -1 on an error. */
double zeus__plo_oracle_bound(const char *profile, const zeus_selector *sel, const zeus__plo_noise *nz, int trials,
                              bool swept);
/* Writes to dst the profile CSV src with only its limits in [min_w, max_w] (a GPU with fewer limits:
 * the simulated GPU's range is its table's); *kept: rows kept (may be NULL). */
int zeus__plo_cut_profile(const char *src, const char *dst, unsigned max_w, unsigned min_w, size_t *kept);

#endif
