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

/* zeus_plo_profile_save with, when info is not NULL, each measurement's "steps", "duration_s",
 * "step_time_cv", "windows" and "outlier_steps" (readers of the original's format ignore them). */
int zeus__plo_profile_save_info(const char *path, const zeus_plo_measurement *m,
                                const zeus_plo_window_info *info, size_t n);
/* The per-measurement info of an optimizer (NULL for a loaded profile or original profiling). */
const zeus_plo_window_info *zeus__plo_window_info(const zeus_plo *p);
/* Whether the optimizer profiles as the original does (ZEUS_PLO_PROFILING=original at open). */
bool zeus__plo_is_original(const zeus_plo *p);
/* Total steps profiling took (step begins from open until DONE). */
long zeus__plo_profiling_steps(const zeus_plo *p);

/* zeus_plo_open with the profiling mode forced: 0 robust, 1 original, -1 from ZEUS_PLO_PROFILING. */
int zeus__plo_open_mode(zeus_plo **out, zeus_monitor *monitor, const zeus_plo_opts *opts, int mode);

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
} zeus__plo_noise;

#define ZEUS__PLO_REPLAY_MAX 64
typedef struct zeus__plo_replay_result {
  unsigned chosen_w;
  unsigned ngpu;
  long steps;          /* step begins the profiling took */
  long original_steps; /* the original's on the same settings: wait + 1 + limits * (warmup + profile) */
  zeus_plo_measurement meas[ZEUS__PLO_REPLAY_MAX];
  size_t n;
} zeus__plo_replay_result;

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

#endif
