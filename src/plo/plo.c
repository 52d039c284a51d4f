/* The power-limit optimizer (GlobalPowerLimitOptimizer of the original): a state machine driven by
 * the training loop's hooks that profiles every power limit just in time and then applies the
 * optimum a selector chooses.
 *
 * Step accounting (per the original): an attempt at limit L starts at the step begin that sets L
 * (entering WARMUP); warmup_steps steps later the window begins (PROFILING), and profile_steps
 * steps after that it ends, at the step begin that also starts the next limit's attempt. An epoch
 * ending in WARMUP or PROFILING cancels the attempt: the maximum limit goes back on and the same
 * limit is tried again from the next step begin.
 *
 * Every power-limit change goes through apply_limit(), which calls the device only for GPUs whose
 * limit differs from the target, so the device sees exactly the changes. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/core.h"
#include "device/restore_signals.h"
#include "plo/plo_internal.h"

/* How many scaled MADs from the median a step time must be to be left out of a window. */
#define OUTLIER_MADS ZEUS__ROBUST_OUTLIER_MADS
/* Candidates within this many standard errors of a difference of two windows are re-measured. */
#define NOISE_Z ZEUS__ROBUST_NOISE_Z
/* Profiling takes at most this times the steps of the original on the same settings. */
#define STEP_BUDGET ZEUS__ROBUST_STEP_BUDGET
/* At most this many per-step times are kept per window. */
#define MAX_STEP_TIMES 1000000L
/* Windows shorter than this get more steps (within the budget) when steps are noisy. */
#define MIN_WINDOW_S 1.0
/* Step times spread less than this (relative) are noiseless: the original's profiling. */
#define NOISELESS_CV ZEUS__ROBUST_NOISELESS_CV

struct zeus_plo {
  zeus_monitor *mon;
  zeus_devices *dev;
  unsigned ngpu;
  unsigned gpu[ZEUS_MAX_GPUS];     /* visible indices, in the monitor's order */
  unsigned cur_mw[ZEUS_MAX_GPUS];  /* each GPU's limit as last read or set */
  unsigned orig_mw[ZEUS_MAX_GPUS]; /* each GPU's limit before the optimizer */
  bool pm_changed[ZEUS_MAX_GPUS];  /* we turned persistence mode on */
  unsigned min_mw, max_mw;

  unsigned *limits_mw; /* the grid, largest first */
  unsigned *limits_w;  /* the same in W (what zeus_plo_power_limits returns) */
  size_t nlimits;
  zeus_plo_measurement *meas; /* capacity nlimits, or the loaded profile */
  size_t nmeas;

  zeus_plo_state state;
  long steps_left; /* READY/WARMUP/PROFILING: step begins until the next transition */
  size_t idx;      /* grid index of the limit being (or to be) profiled; nlimits: all done */
  unsigned current_mw;
  unsigned optimal_w;

  zeus_selector sel;
  long wait_steps, warmup_steps, profile_steps;
  char *profile_path;
  const zeus_collective *coll;
  bool loaded; /* measurements came from the profile file */
  bool force_apply; /* the next change calls every GPU, even one already at the target */
  bool signals;
  char window[64];

  /* Robust profiling (the default; ZEUS_PLO_PROFILING=original turns it off, see refine_plan). */
  bool original;           /* the original's profiling exactly */
  zeus_plo_window_info *info; /* per grid limit: what its measurement is (capacity nlimits) */
  double *step_s;          /* per-step times of the open window (capacity profile_steps) */
  long nstep;
  long step_cap;           /* capacity of step_s */
  long win_steps;          /* steps of the next window: profile_steps, more where windows are short */
  long epoch_steps;        /* steps of an epoch as the caller said (zeus_plo_set_epoch_steps); 0: unknown */
  double last_step_t;      /* backend clock at the last step begin in the window */
  double win_t0;           /* backend clock when the window began */
  long epochs_ended;
  bool refining;           /* the sweep is done; re-measuring refine_seq */
  bool noisy;              /* step times spread (robust profiling acted on them) */
  size_t *refine_seq;      /* grid indices to re-measure, in order (capacity 2 * nlimits + 2) */
  size_t nrefine, ri;
  double *r_sum_t, *r_sum_e, *r_sum_d, *r_sum_cv2; /* refine sums per grid index */
  long *r_n, *r_out, *r_steps;
  zeus_plo_measurement *choose; /* after re-measuring: the re-measured limits the choice is among */
  size_t nchoose;
  long steps_seen; /* step begins since open, until DONE */
  double *tick_rel;        /* per grid limit: relative standard error of its energy from the counter's ticks */
  double *r_sum_eb2;       /* refine: sum of the squared error bounds (J) of the new windows */
  double *eb_sweep;        /* per grid limit: the sweep window's energy error bound (J) */
  /* The report of the choice (issue 37): the limits it could not tell apart, the confidence. */
  unsigned *contenders_w;
  size_t ncontenders;
  double confidence;       /* NAN: unknown (original profiling, a file without a decision) */
  /* The confidence mode (issue 37): rounds of windows over the limits that could still be best. */
  double conf_target;      /* 0: off */
  long max_profile_steps;  /* the mode's cap in steps since open (0: the end of the sweep's epoch) */
  bool adaptive;           /* after the sweep: measuring in rounds (refine_seq is the round) */
  bool short_plan;         /* few limits: the two that decide measured once more each (refine_plan) */
  bool settled;            /* the choice reached conf_target */
  long round;              /* rounds planned */
  long looks;              /* looks at the choice so far (adaptive_next) */
  long next_look;          /* steps since open at which the next look comes */
  size_t last_at;          /* grid index of the window that just ended (SIZE_MAX: none, or an epoch end since) */
  unsigned forced_w;       /* the cap's safer choice (0: the selector's) */
  unsigned file_w;         /* a loaded profile's decided optimum (0: none) and its confidence */
  double file_confidence;
};

/* The original's profiling steps on these settings (one attempt per limit). */
static double original_steps(const zeus_plo *p) {
  return (double)p->wait_steps + 1 + (double)p->nlimits * ((double)p->warmup_steps + (double)p->profile_steps);
}

/* Room for the per-step times of the longest window robust profiling may use. */
static long step_capacity(const zeus_plo *p) {
  double c = STEP_BUDGET * original_steps(p) + (double)p->profile_steps;
  return c < (double)MAX_STEP_TIMES ? (long)c : MAX_STEP_TIMES;
}

/* ---- options ---- */

void zeus_plo_opts_init(zeus_plo_opts *o) {
  if (!o) return;
  memset(o, 0, sizeof *o);
  o->wait_steps = 1;
  o->warmup_steps = 10;
  o->profile_steps = 40;
  o->pl_step_w = 25;
}

static int check_opts(const zeus_plo_opts *o) {
  if (o->wait_steps < 0)
    return zeus__error(ZEUS_EINVAL, "power-limit optimizer: wait_steps %ld is outside the allowed range [0, %ld]",
                       o->wait_steps, (long)LONG_MAX);
  if (o->warmup_steps < 0)
    return zeus__error(ZEUS_EINVAL, "power-limit optimizer: warmup_steps %ld is outside the allowed range [0, %ld]",
                       o->warmup_steps, (long)LONG_MAX);
  if (o->profile_steps <= 0)
    return zeus__error(ZEUS_EINVAL,
                       "power-limit optimizer: profile_steps %ld is outside the allowed range [1, %ld] (start from "
                       "zeus_plo_opts_init() for the defaults)",
                       o->profile_steps, (long)LONG_MAX);
  if (o->pl_step_w == 0)
    return zeus__error(ZEUS_EINVAL, "power-limit optimizer: pl_step_w 0 is outside the allowed range [1, %u] W",
                       (unsigned)UINT_MAX / 1000);
  if (o->pl_step_w > UINT_MAX / 1000)
    return zeus__error(ZEUS_EINVAL, "power-limit optimizer: pl_step_w %u is outside the allowed range [1, %u] W",
                       o->pl_step_w, (unsigned)UINT_MAX / 1000);
  if (!(o->confidence == 0 || (o->confidence > 0 && o->confidence < 1)))
    return zeus__error(ZEUS_EINVAL,
                       "power-limit optimizer: confidence %g is outside the allowed range (0, 1) (0: the confidence mode "
                       "off)",
                       o->confidence);
  if (o->max_profile_steps < 0)
    return zeus__error(ZEUS_EINVAL,
                       "power-limit optimizer: max_profile_steps %ld is outside the allowed range [0, %ld] (0: the end "
                       "of the first epoch)",
                       o->max_profile_steps, (long)LONG_MAX);
  if (o->profile_path && !o->profile_path[0])
    return zeus__error(ZEUS_EINVAL, "power-limit optimizer: profile_path is empty (use NULL for no profile file)");
  if (o->selector) {
    int rc = zeus__selector_check(o->selector);
    if (rc) return zeus__error_ctx(rc, "power-limit optimizer");
  }
  return zeus_collective_check(o->collective);
}

/* ---- device changes ---- */

/* Sets every GPU to `mw`, calling the device only where the limit differs, except for the first
 * change after open, which calls every GPU (as the original, whose notion of the current limit
 * starts unknown: the maximum, or the loaded optimum, is set on every GPU at construction). */
static int apply_limit(zeus_plo *p, unsigned mw) {
  for (unsigned k = 0; k < p->ngpu; k++) {
    if (p->cur_mw[k] == mw && !p->force_apply) continue;
    int rc = zeus_gpu_set_power_limit(p->dev, p->gpu[k], mw);
    if (rc) return zeus__error_ctx(rc, "power-limit optimizer: setting GPU %u to %u mW", p->gpu[k], mw);
    p->cur_mw[k] = mw;
  }
  p->force_apply = false;
  if (p->current_mw != mw) zeus__log(ZEUS_LOG_DEBUG, "plo", "power limit %u mW on %u GPU(s)", mw, p->ngpu);
  p->current_mw = mw;
  return ZEUS_OK;
}

/* Puts back the limit and persistence mode every GPU had before the optimizer changed them. */
static int restore_gpus(zeus_plo *p) {
  int first = ZEUS_OK;
  for (unsigned k = 0; k < p->ngpu; k++) {
    if (p->cur_mw[k] != p->orig_mw[k]) {
      int rc = zeus_gpu_set_power_limit(p->dev, p->gpu[k], p->orig_mw[k]);
      if (rc) {
        zeus__log(ZEUS_LOG_WARN, "plo", "GPU %u: could not restore the power limit to %u mW: %s", p->gpu[k],
                  p->orig_mw[k], zeus_errmsg());
        if (!first) first = rc;
      } else {
        p->cur_mw[k] = p->orig_mw[k];
      }
    }
    if (p->pm_changed[k]) {
      int rc = zeus_gpu_set_persistence_mode(p->dev, p->gpu[k], false);
      if (rc) {
        zeus__log(ZEUS_LOG_WARN, "plo", "GPU %u: could not turn persistence mode back off: %s", p->gpu[k],
                  zeus_errmsg());
        if (!first) first = rc;
      } else {
        p->pm_changed[k] = false;
      }
    }
  }
  return first;
}

/* ---- state machine ---- */

static void set_window_name(zeus_plo *p) {
  snprintf(p->window, sizeof p->window, "__GlobalPowerLimitOptimizer_%u", p->current_mw / 1000);
}

/* The grid index being (or to be) measured: the sweep's, or the re-measurement's. */
static size_t cur_index(const zeus_plo *p) { return p->refining ? p->refine_seq[p->ri] : p->idx; }

static int begin_profiling(zeus_plo *p) {
  set_window_name(p);
  int rc = zeus_monitor_begin_window(p->mon, p->window, false);
  if (rc) return zeus__error_ctx(rc, "power-limit optimizer: beginning the profiling window");
  p->state = ZEUS_PLO_PROFILING;
  p->steps_left = p->win_steps;
  p->nstep = 0;
  p->win_t0 = p->last_step_t = zeus_devices_now(p->dev);
  zeus__log(ZEUS_LOG_DEBUG, "plo", "profiling %u W for %ld steps", p->current_mw / 1000, p->win_steps);
  return ZEUS_OK;
}

/* Sets grid limit idx and warms up (or, with warmup_steps 0, begins profiling at once). On a
 * failure the optimizer is READY to try the same transition at the next step begin. */
static int start_attempt(zeus_plo *p) {
  size_t at = cur_index(p);
  int rc = apply_limit(p, p->limits_mw[at]);
  if (!rc) {
    if (p->refining && p->adaptive)
      zeus__log(ZEUS_LOG_INFO, "plo", "measuring %u W again (round %ld, %zu of %zu)", p->limits_w[at], p->round,
                p->ri + 1, p->nrefine);
    else if (p->refining)
      zeus__log(ZEUS_LOG_INFO, "plo", "warming up at %u W to measure it again (%zu of %zu)", p->limits_w[at],
                p->ri + 1, p->nrefine);
    else
      zeus__log(ZEUS_LOG_INFO, "plo", "warming up at %u W (%zu of %zu)", p->limits_w[at], p->idx + 1, p->nlimits);
    /* Measuring the limit just measured again: it is warm. */
    bool warm = p->refining && (p->adaptive ? p->last_at == at : zeus__robust_warm(p->refine_seq, p->ri, p->nlimits));
    if (p->warmup_steps > 0 && !warm) {
      p->state = ZEUS_PLO_WARMUP;
      p->steps_left = p->warmup_steps;
      return ZEUS_OK;
    }
    rc = begin_profiling(p);
  }
  if (rc) {
    p->state = ZEUS_PLO_READY;
    p->steps_left = 1;
  }
  return rc;
}

/* The limit (mW) to apply for a chosen optimum in W: the grid entry with that wattage, else W. */
static unsigned optimum_mw(const zeus_plo *p, unsigned w) {
  for (size_t i = 0; i < p->nlimits; i++)
    if (p->limits_w[i] == w) return p->limits_mw[i];
  return w * 1000u;
}

static double sel_key(const zeus_plo *p, const zeus_plo_measurement *m);

/* The decision on measurements m (n of them, the live grid's order) whose times have relative
 * standard errors st and energies tick errors sk, for the choice c: the confidence, the
 * contenders in cont[] and each limit's factor of the confidence in pj[] (may be NULL). */
static double decide_on(const zeus_plo *p, const zeus_plo_measurement *m, const double *st, const double *sk, size_t n,
                        size_t c, bool *cont, double *pj) {
  double *key = malloc(3 * n * sizeof *key);
  if (!key) return NAN;
  double *sd = key + n, *energy = key + 2 * n;
  for (size_t i = 0; i < n; i++) {
    energy[i] = m[i].energy_j;
    switch (p->sel.kind) {
      case ZEUS_SELECTOR_ENERGY: key[i] = m[i].energy_j, sd[i] = m[i].energy_j * hypot(st[i], sk[i]); break;
      case ZEUS_SELECTOR_TIME: key[i] = m[i].time_s, sd[i] = m[i].time_s * st[i]; break;
      case ZEUS_SELECTOR_MAX_SLOWDOWN:
        key[i] = m[0].time_s > 0 ? m[i].time_s / m[0].time_s : 0;
        sd[i] = i == 0 ? 0 : key[i] * hypot(st[i], st[0]);
        break;
      default:
        key[i] = sel_key(p, &m[i]);
        sd[i] = hypot(key[i] * st[i], p->sel.eta * m[i].energy_j * sk[i]);
    }
  }
  double conf = p->sel.kind == ZEUS_SELECTOR_MAX_SLOWDOWN
                    ? zeus__robust_decide_slowdown(key, sd, energy, n, c, p->sel.factor, ZEUS__ROBUST_CONTENDER_Z, cont, pj)
                    : zeus__robust_decide_min(key, sd, n, c, ZEUS__ROBUST_TOL, ZEUS__ROBUST_CONTENDER_Z, cont, pj);
  free(key);
  return conf;
}

/* The relative standard errors of the recorded measurements: time from the step spread over the
 * steps of the windows that count, energy from the counter's ticks. */
static void recorded_errors(const zeus_plo *p, double *st, double *sk) {
  for (size_t i = 0; i < p->nmeas; i++) {
    st[i] = p->info[i].steps > 0 ? p->info[i].step_cv / sqrt((double)p->info[i].steps) : 0;
    sk[i] = p->tick_rel ? p->tick_rel[i] : 0;
  }
}

/* The report of choosing w from the live measurements (issue 37): each limit's time has the
 * standard error its step spread gives over its steps, its energy that and the counter's tick
 * error; the contenders are the limits within ZEUS__ROBUST_CONTENDER_Z standard errors of the
 * choice, the confidence that of being within the selector's tolerance. Noiseless measurements:
 * confidence 1, no contenders. A loaded profile keeps the file's report; original profiling none. */
static void decide_report(zeus_plo *p, unsigned w) {
  if (p->loaded) {
    bool same = p->file_w != 0 && p->file_w == w;
    p->confidence = same ? p->file_confidence : NAN;
    if (!same) p->ncontenders = 0;
    return;
  }
  if (p->original || !p->info || !p->contenders_w) return;
  p->ncontenders = 0;
  p->confidence = NAN;
  size_t n = p->nmeas, c = n;
  for (size_t i = 0; i < n; i++)
    if (p->meas[i].power_limit_w == w) c = i;
  if (c == n || p->sel.kind == ZEUS_SELECTOR_CUSTOM) return;
  double *st = malloc(2 * n * sizeof *st);
  bool *cont = calloc(n, sizeof *cont);
  if (st && cont) {
    recorded_errors(p, st, st + n);
    p->confidence = decide_on(p, p->meas, st, st + n, n, c, cont, NULL);
    for (size_t i = 0; i < n; i++)
      if (cont[i]) p->contenders_w[p->ncontenders++] = p->meas[i].power_limit_w;
  }
  free(st);
  free(cont);
}

/* ", could not tell apart from 250, 225 W; confidence 0.93" for the log (empty when unknown). */
static void report_text(const zeus_plo *p, char *buf, size_t cap) {
  buf[0] = 0;
  if (isnan(p->confidence)) return;
  size_t at = 0;
  if (p->ncontenders) {
    at += (size_t)snprintf(buf + at, cap - at, "; could not tell apart from");
    for (size_t i = 0; i < p->ncontenders && at < cap; i++)
      at += (size_t)snprintf(buf + at, cap - at, "%s %u", i ? "," : "", p->contenders_w[i]);
    if (at < cap) at += (size_t)snprintf(buf + at, cap - at, " W");
  } else {
    at += (size_t)snprintf(buf + at, cap - at, "; no contender within the noise");
  }
  if (at < cap) snprintf(buf + at, cap - at, "; confidence %.3f", p->confidence);
}

/* Chooses the optimum (rank 0's choice is broadcast, so every rank applies the same one) and
 * applies it; DONE on success. */
static int apply_optimum(zeus_plo *p) {
  unsigned w = 0;
  int rc = p->forced_w ? ZEUS_OK
           : p->nchoose ? zeus_selector_select(&p->sel, p->choose, p->nchoose, &w)
                        : zeus_selector_select(&p->sel, p->meas, p->nmeas, &w);
  if (p->forced_w) w = p->forced_w;
  if (rc) return zeus__error_ctx(rc, "power-limit optimizer: choosing the optimum");
  double wd = w;
  if ((rc = zeus_collective_broadcast(p->coll, &wd, sizeof wd, 0)))
    return zeus__error_ctx(rc, "power-limit optimizer: agreeing on the optimum");
  w = (unsigned)wd;
  unsigned mw = optimum_mw(p, w);
  if (mw < p->min_mw || mw > p->max_mw)
    return zeus__error(ZEUS_ERANGE,
                       "power-limit optimizer: the optimum %u W is outside the GPUs' power-limit range [%u, %u] mW%s",
                       w, p->min_mw, p->max_mw,
                       p->loaded ? " (was the profile file made on other GPUs?)" : "");
  if ((rc = apply_limit(p, mw))) return rc;
  p->optimal_w = w;
  p->state = ZEUS_PLO_DONE;
  decide_report(p, w);
  char rep[512];
  report_text(p, rep, sizeof rep);
  zeus__log(ZEUS_LOG_INFO, "plo", "optimal power limit %u W (%s selector, %zu limits%s)", w,
            zeus__selector_name(&p->sel), p->nmeas, rep);
  return ZEUS_OK;
}

/* Every limit is measured: apply the optimum and save the profile (rank 0 only). A failure to
 * choose or apply leaves READY with idx == nlimits, so the next step begin tries again. */
static int finish(zeus_plo *p) {
  int rc = apply_optimum(p);
  if (rc) {
    p->state = ZEUS_PLO_READY;
    p->steps_left = 1;
    return rc;
  }
  if (p->profile_path && (!p->coll || p->coll->rank == 0)) {
    /* Noiseless steps: the original's file exactly. */
    /* After re-measuring: the limits the choice was among, so that loading the file with the
     * same selector makes the same choice. */
    zeus__plo_choice ch = {.namong = 0};
    /* The confidence mode's cap chose the safer limit itself: the file says so with that limit
     * alone to choose among, so that loading it with the same selector makes the same choice. */
    size_t nam = p->forced_w ? 1 : p->nchoose;
    unsigned *among = nam ? malloc(nam * sizeof *among) : NULL;
    if (among) {
      snprintf(ch.selector, sizeof ch.selector, "%s", zeus__selector_name(&p->sel));
      ch.eta = p->sel.kind == ZEUS_SELECTOR_ZEUS_COST ? p->sel.eta : 0;
      for (size_t i = 0; i < p->nchoose && !p->forced_w; i++) among[i] = p->choose[i].power_limit_w;
      if (p->forced_w) among[0] = p->forced_w;
      ch.among_w = among;
      ch.namong = nam;
    }
    /* The report (issue 37), only where the steps were noisy: noiseless, the original's file. */
    if (p->noisy && !isnan(p->confidence)) {
      ch.decided = true;
      ch.optimal_w = p->optimal_w;
      ch.confidence = p->confidence;
      ch.contenders_w = p->contenders_w;
      ch.ncontenders = p->ncontenders;
    }
    rc = zeus__plo_profile_save_info(p->profile_path, p->meas, p->noisy ? p->info : NULL, p->nmeas,
                                     among || ch.decided ? &ch : NULL);
    free(among);
    if (rc) zeus__log(ZEUS_LOG_WARN, "plo", "%s", zeus_errmsg());
    else zeus__log(ZEUS_LOG_INFO, "plo", "profile saved to '%s'", p->profile_path);
  }
  return rc;
}

/* ---- robust profiling ----
 *
 * The original measures each limit once, in one window of profile_steps steps, from the highest
 * limit down, and decides on those numbers. On a real GPU a window's time and energy move by a few
 * percent (step jitter, a first window still warming up, drift), enough to move the choice. The
 * default adds, within STEP_BUDGET times the original's steps and never past the epoch in which the
 * sweep ends:
 *   - per-step times in every window, so each measurement has a spread (the step times'
 *     coefficient of variation), and steps more than OUTLIER_MADS scaled MADs from the window's
 *     median are left out (time and energy scaled to the steps kept);
 *   - after the sweep, the limits the sweep cannot tell apart (cost within NOISE_Z standard
 *     errors of the best, the error taken from the measured spread) are measured again, in a
 *     palindromic order (A B B A), so that a linear drift weighs the same on each; for
 *     MaxSlowdownConstraint the reference (highest) limit is measured again first and last, with
 *     the limits nearest the threshold between;
 *   - the choice is then made among the re-measured limits, each limit's time the mean of its
 *     windows: the new ones and the sweep's, but for the profiling's first window (the reference
 *     limit's, which may catch the job still warming up); with few limits (one new window each for
 *     the two that decide), the new windows alone when one of the two is the first window's limit.
 * Noiseless measurements (no spread) re-measure nothing: the limit changes and the choice are the
 * original's. ZEUS_PLO_PROFILING=original gives the original's profiling exactly. */

typedef zeus__step_summary window_stats;

static window_stats window_summary(zeus_plo *p, double window_s) {
  return zeus__robust_window(p->step_s, p->nstep, p->profile_steps, window_s);
}

/* The selector's key for measurement m (lower is better); not for MAX_SLOWDOWN or CUSTOM. */
static double sel_key(const zeus_plo *p, const zeus_plo_measurement *m) {
  switch (p->sel.kind) {
    case ZEUS_SELECTOR_ENERGY: return m->energy_j;
    case ZEUS_SELECTOR_TIME: return m->time_s;
    default: return zeus_cost(m->energy_j, m->time_s, p->sel.eta, (double)p->limits_w[0] * p->sel.world_size);
  }
}

/* After the first window: windows shorter than MIN_WINDOW_S get more steps, as far as the step
 * budget allows (what is left then goes to measuring again; docs/plo.md has the reserves tried).
 * Noiseless steps (no spread) keep the original's windows. */
static void size_windows(zeus_plo *p, window_stats ws) {
  double min_s = MIN_WINDOW_S;
  double cv = ws.cv;
  if (zeus_collective_allreduce(p->coll, &cv, 1, ZEUS_REDUCE_MAX)) return;
  double step_s = ws.time_s / (double)p->profile_steps;
  /* Longer windows only where the first epoch is known to hold them: never past it. */
  if (!(cv > NOISELESS_CV) || !(step_s > 0) || ws.time_s >= min_s || p->nlimits < 2 || p->epoch_steps <= 0 ||
      p->epochs_ended > 0)
    return;
  double rest = (double)(p->nlimits - 1);
  double limit = fmin(STEP_BUDGET * original_steps(p), (double)p->epoch_steps);
  double room = limit - (double)p->steps_seen - rest * (double)p->warmup_steps;
  double cap = floor(room / rest), want = ceil(min_s / step_s);
  double steps = fmin(want, cap);
  if (steps > (double)p->step_cap) steps = (double)p->step_cap;
  if (steps > (double)p->profile_steps) {
    /* Every rank agrees: the longest window's steps are taken by all (the budget is the same). */
    double mx = steps;
    if (zeus_collective_allreduce(p->coll, &mx, 1, ZEUS_REDUCE_MAX)) return;
    p->win_steps = (long)mx;
    zeus__log(ZEUS_LOG_INFO, "plo", "windows of %ld steps are %.3f s; %ld steps from now on", p->profile_steps,
              ws.time_s, p->win_steps);
  }
}

/* Which limits to measure again after the sweep (p->refine_seq, p->nrefine; 0: none). */
static void refine_plan(zeus_plo *p) {
  p->nrefine = 0;
  p->short_plan = false;
  bool conf_mode = p->conf_target > 0 && !p->original && p->sel.kind != ZEUS_SELECTOR_CUSTOM && p->nmeas >= 2 &&
                   p->nmeas == p->nlimits && (p->epochs_ended == 0 || p->max_profile_steps > 0);
  if (conf_mode) {
    double s2 = 0;
    for (size_t i = 0; i < p->nmeas; i++) s2 += p->info[i].step_cv * p->info[i].step_cv;
    double cv = sqrt(s2 / (double)p->nmeas);
    if (zeus_collective_allreduce(p->coll, &cv, 1, ZEUS_REDUCE_MAX)) return;
    p->noisy = cv > NOISELESS_CV;
    p->adaptive = p->noisy; /* noiseless: the original's sequence and choice */
    return;
  }
  if (p->original || p->epochs_ended > 0 || p->sel.kind == ZEUS_SELECTOR_CUSTOM || p->nmeas < 2 ||
      p->nmeas != p->nlimits)
    return;
  double s2 = 0;
  for (size_t i = 0; i < p->nmeas; i++) s2 += p->info[i].step_cv * p->info[i].step_cv;
  double cv = sqrt(s2 / (double)p->nmeas);
  if (zeus_collective_allreduce(p->coll, &cv, 1, ZEUS_REDUCE_MAX)) return; /* every rank fails alike */
  if (!(cv > NOISELESS_CV)) return; /* noiseless: the original's sequence and choice */
  p->noisy = true;
  double thr = zeus__robust_threshold(cv, p->profile_steps);
  double limit = STEP_BUDGET * original_steps(p);
  if (p->epoch_steps > 0) limit = fmin(limit, (double)p->epoch_steps);
  double room = limit - (double)p->steps_seen;
  size_t windows =
      zeus__robust_window_count(room, p->warmup_steps, p->win_steps, p->sel.kind != ZEUS_SELECTOR_MAX_SLOWDOWN);
  if (windows > 2 * p->nlimits + 2) windows = 2 * p->nlimits + 2;
  size_t nc = 0;
  if (p->sel.kind == ZEUS_SELECTOR_MAX_SLOWDOWN) {
    /* The limits whose slowdown is within the noise of the factor, re-measured between two
     * windows of the reference, lowest limit first (the limits are in descending order): the
     * choice is the lowest limit within the factor, so the lowest uncertain limits decide. */
    double t0 = p->meas[0].time_s;
    size_t m = windows >= 2 ? windows - 2 : 0, first = p->nrefine;
    p->refine_seq[p->nrefine++] = 0;
    for (size_t i = p->nmeas; i-- > 1 && t0 > 0;) {
      if (fabs(p->meas[i].time_s / t0 / p->sel.factor - 1) > thr) continue;
      if (nc++ < m) p->refine_seq[p->nrefine++] = i;
    }
    if (nc == 0 || m == 0) p->nrefine = first;
    else p->refine_seq[p->nrefine++] = 0;
  } else {
    double *key = malloc(p->nmeas * sizeof *key);
    if (key) {
      for (size_t i = 0; i < p->nmeas; i++) key[i] = sel_key(p, &p->meas[i]);
      p->nrefine = zeus__robust_palindrome(key, p->nmeas, thr, windows, p->refine_seq, &nc);
      if (p->nrefine == 0 && nc >= 2) {
        /* Few limits: no palindrome of two fits; the two that decide, once each, if two windows do
         * (a third window, A B A, did worse: docs/plo.md). */
        size_t w2 = zeus__robust_window_count(room, p->warmup_steps, p->win_steps, false);
        p->nrefine = zeus__robust_short_plan(key, p->nmeas, thr, w2, p->refine_seq, &nc);
        p->short_plan = p->nrefine > 0;
      }
      free(key);
    }
  }
  /* The room whole windows leave lengthens them all alike. */
  p->win_steps = zeus__robust_refine_len(p->refine_seq, p->nrefine, p->nlimits, room, p->warmup_steps, p->win_steps,
                                         p->step_cap);
  if (p->nrefine)
    zeus__log(ZEUS_LOG_INFO, "plo", "step spread %.2f%%: %zu limit(s) within the noise (%.2f%%); %zu more windows",
              100 * cv, nc, 100 * thr, p->nrefine);
}

/* The confidence mode's cap came before a look settled the choice. The cap is the last look, at
 * the target itself: a choice at the target is kept; else the safer (higher) of the choice and its
 * contenders. Either is said in the log. */
static void cap_choice(zeus_plo *p) {
  unsigned w;
  if (zeus_selector_select(&p->sel, p->meas, p->nmeas, &w)) return;
  decide_report(p, w);
  /* The cap is the last look: a choice at the target there is kept (the looks before asked more). */
  if (!isnan(p->confidence) && p->confidence >= p->conf_target) {
    zeus__log(ZEUS_LOG_INFO, "plo", "confidence mode: the cap (%ld steps) came at confidence %.3f, at the target %.3f: %u W",
              p->steps_seen, p->confidence, p->conf_target, w);
    return;
  }
  unsigned safer = w;
  for (size_t i = 0; i < p->ncontenders; i++)
    if (p->contenders_w[i] > safer) safer = p->contenders_w[i];
  zeus__log(ZEUS_LOG_INFO, "plo",
            "confidence mode: the cap (%ld steps) came at confidence %.3f, below %.3f; choosing the safer (higher) of "
            "the contenders: %u W (the selector's choice %u W)",
            p->steps_seen, p->confidence, p->conf_target, safer, w);
  if (safer != w) p->forced_w = safer;
}

/* The confidence mode's cap in steps since open. */
static long conf_cap(const zeus_plo *p) {
  if (p->max_profile_steps > 0) return p->max_profile_steps;
  return p->epoch_steps > 0 && p->epochs_ended == 0 ? p->epoch_steps : LONG_MAX;
}

static int conclude_refine(zeus_plo *p);

/* The confidence mode's next window: within a round the next limit, else a new round over the
 * limits that could still be the best (each limit's current estimate from its windows, as the
 * record will be, and its errors; the choice and every limit whose factor of the confidence is
 * below 1 - (1 - target) / limits; MaxSlowdownConstraint with the reference), in the opposite
 * order to the last round so that a drift weighs alike; done when the choice reaches the target
 * or the next window would pass the cap. */
static int adaptive_next(zeus_plo *p) {
  size_t n = p->nmeas;
  if (p->ri >= p->nrefine) {
    zeus_plo_measurement *m = calloc(n, sizeof *m);
    double *st = calloc(3 * n, sizeof *st);
    bool *cont = calloc(n, sizeof *cont);
    if (!m || !st || !cont) {
      free(m);
      free(st);
      free(cont);
      return conclude_refine(p);
    }
    double *sk = st + n, *pj = st + 2 * n;
    for (size_t i = 0; i < n; i++) {
      long k = p->r_n[i];
      bool first = i == 0;
      m[i] = p->meas[i];
      st[i] = p->info[i].steps > 0 ? p->info[i].step_cv / sqrt((double)p->info[i].steps) : 0;
      sk[i] = p->tick_rel[i];
      if (k == 0) continue;
      double t = zeus__robust_remeasured_time(p->meas[i].time_s, first, p->r_sum_t[i], k);
      double e_all = p->meas[i].energy_j + p->r_sum_e[i], t_all = p->meas[i].time_s + p->r_sum_t[i];
      m[i].time_s = t;
      m[i].energy_j = t_all > 0 ? e_all / t_all * t : p->r_sum_e[i] / (double)k;
      double cv2 = p->r_sum_cv2[i] + (first ? 0 : p->info[i].step_cv * p->info[i].step_cv);
      long nw = k + (first ? 0 : 1), steps = p->r_steps[i] + (first ? 0 : p->info[i].steps);
      st[i] = steps > 0 ? sqrt(cv2 / (double)nw) / sqrt((double)steps) : 0;
      sk[i] = e_all > 0 ? sqrt(p->eb_sweep[i] * p->eb_sweep[i] + p->r_sum_eb2[i]) / sqrt(3.0) / e_all : 0;
    }
    unsigned w = 0;
    size_t c = n;
    double conf = NAN;
    if (!zeus_selector_select(&p->sel, m, n, &w))
      for (size_t i = 0; i < n; i++)
        if (m[i].power_limit_w == w) c = i;
    if (c < n) conf = decide_on(p, m, st, sk, n, c, cont, pj);
    p->nrefine = p->ri = 0;
    /* The first window (the highest limit's) may have caught the job still warming up, a bias no
     * spread shows: it never settles a choice alone, so that limit is measured again first. */
    bool first_again = p->r_n[0] == 0;
    /* A look comes once the steps have grown ZEUS__CONF_LOOK_GROWTH-fold since the last, and the
     * r-th may settle at 1 - (1 - target) / (r (r + 1)): a look after every round at half the
     * error settled resnet50's few-limit Time cell wrong in 4 of 20 while claiming 0.95
     * (docs/plo.md). Between looks the rounds go on over the limits that could still be best. */
    bool look = !first_again && p->steps_seen >= p->next_look;
    if (look) {
      p->looks++;
      p->next_look = (long)ceil((double)p->steps_seen * ZEUS__CONF_LOOK_GROWTH);
    }
    double r = p->looks > 0 ? (double)p->looks : 1;
    double settle = 1 - (1 - p->conf_target) / (r * (r + 1));
    if (c < n && !isnan(conf) && (!look || conf < settle)) {
      double keep = 1 - (1 - settle) / (double)n;
      bool *act = cont; /* reused: which limits this round measures */
      for (size_t i = 0; i < n; i++) act[i] = i == c || pj[i] < keep;
      if (p->sel.kind == ZEUS_SELECTOR_MAX_SLOWDOWN || first_again) act[0] = true;
      size_t na = 0;
      for (size_t i = 0; i < n; i++) na += act[i];
      if (na < 2) { /* the choice alone is unsure (MaxSlowdown without its reference cannot be) */
        for (size_t i = 0; i < n; i++) act[i] = act[i] || i == 0 || i == c;
      }
      bool up = p->round % 2 == 1; /* round 0 from the lowest limit up: the sweep ended there */
      for (size_t k = 0; k < n; k++) {
        size_t i = up ? k : n - 1 - k;
        if (act[i]) p->refine_seq[p->nrefine++] = i;
      }
      p->round++;
      zeus__log(ZEUS_LOG_INFO, "plo", "confidence %.3f of %.3f for %u W after %ld steps: round %ld over %zu limits",
                conf, p->conf_target, w, p->steps_seen, p->round, p->nrefine);
    } else if (!isnan(conf)) {
      p->settled = true;
      zeus__log(ZEUS_LOG_INFO, "plo", "confidence %.3f of %.3f for %u W after %ld steps: settled", conf,
                p->conf_target, w, p->steps_seen);
    }
    free(m);
    free(st);
    free(cont);
    if (p->nrefine == 0) return conclude_refine(p);
  }
  size_t at = p->refine_seq[p->ri];
  long need = p->win_steps + (p->last_at == at ? 0 : p->warmup_steps);
  if (p->steps_seen + need > conf_cap(p)) return conclude_refine(p);
  return start_attempt(p);
}

/* Re-measuring is over (or cut by the epoch's end): the re-measured limits get the mean of their
 * windows (the sweep's too, but the first), and the choice is made among them (MaxSlowdownConstraint: over every limit, against
 * the re-measured reference). */
static int conclude_refine(zeus_plo *p) {
  p->refining = false;
  p->nchoose = 0;
  size_t nref = 0;
  for (size_t i = 0; i < p->nmeas; i++) {
    long n = p->r_n[i];
    if (n == 0) continue;
    nref++;
    /* Time as the mean of every window at this limit but the profiling's first (the reference's,
     * maybe still warming up): the new windows are drift-balanced, the sweep's adds its steps;
     * energy as the power over every window at this limit (power does not move with the amount
     * of work, and more time shrinks the counter's tick error) times that time. */
    bool first = i == 0; /* the sweep starts at the highest limit */
    /* Few limits, the first window's limit among the two measured again: its time is its new window
     * alone, so the other's is its new window alone too, both measured one after the other; the
     * other's sweep window, long before, would bring the drift since then into the comparison
     * (resnet50's Time cell on 7 limits: 40 -> 47 of 60 right; docs/plo.md). */
    if (p->short_plan && p->r_n[0] > 0) first = true;
    double t = zeus__robust_remeasured_time(p->meas[i].time_s, first, p->r_sum_t[i], n);
    double e = p->r_sum_e[i] / (double)n;
    double e_all = p->meas[i].energy_j + p->r_sum_e[i];
    if (p->meas[i].time_s + p->r_sum_t[i] > 0) e = e_all / (p->meas[i].time_s + p->r_sum_t[i]) * t;
    if (e_all > 0) p->tick_rel[i] = sqrt(p->eb_sweep[i] * p->eb_sweep[i] + p->r_sum_eb2[i]) / sqrt(3.0) / e_all;
    p->meas[i].time_s = t;
    p->meas[i].energy_j = e;
    zeus_plo_window_info sw = p->info[i];
    double cv2 = p->r_sum_cv2[i] + (first ? 0 : sw.step_cv * sw.step_cv);
    long nw = n + (first ? 0 : 1);
    p->info[i] = (zeus_plo_window_info){.steps = p->r_steps[i] + (first ? 0 : sw.steps),
                                        .duration_s = p->r_sum_d[i] + (first ? 0 : sw.duration_s),
                                        .step_cv = sqrt(cv2 / (double)nw),
                                        .windows = nw,
                                        .outliers = p->r_out[i] + (first ? 0 : sw.outliers)};
    p->choose[p->nchoose++] = p->meas[i];
  }
  if (p->sel.kind == ZEUS_SELECTOR_MAX_SLOWDOWN || nref < 2 || p->adaptive) p->nchoose = 0;
  if (p->adaptive && !p->settled) cap_choice(p);
  return finish(p);
}

int zeus_plo_set_epoch_steps(zeus_plo *p, long steps) {
  if (!p) return zeus__error(ZEUS_EINVAL, "zeus_plo_set_epoch_steps: no optimizer given");
  if (steps < 0)
    return zeus__error(ZEUS_EINVAL, "zeus_plo_set_epoch_steps: steps %ld is outside the allowed range [0, %ld]", steps,
                       LONG_MAX);
  p->epoch_steps = steps;
  return ZEUS_OK;
}

const zeus_plo_window_info *zeus__plo_window_info(const zeus_plo *p) {
  return p && !p->original && !p->loaded ? p->info : NULL;
}
bool zeus__plo_is_original(const zeus_plo *p) { return p && p->original; }
long zeus__plo_profiling_steps(const zeus_plo *p) { return p ? p->steps_seen : 0; }

/* The profiling window of limit idx ended: record it (energy summed and time maxed across
 * ranks), then start the next limit or finish. */
static int end_profiling(zeus_plo *p) {
  zeus_measurement r;
  zeus_window_detail det;
  int rc = p->original ? zeus_monitor_end_window(p->mon, p->window, false, &r)
                       : zeus_monitor_end_window_detail(p->mon, p->window, false, &r, &det);
  if (rc) {
    p->state = ZEUS_PLO_READY; /* measure this limit again */
    p->steps_left = 1;
    return zeus__error_ctx(rc, "power-limit optimizer: ending the profiling window");
  }
  /* Robust: the counter's error bound (summed, as the energy is) travels with the energy. */
  double energy_eb[2] = {0, 0};
  for (unsigned k = 0; k < r.num_gpus; k++) energy_eb[0] += r.gpu_energy_j[k];
  for (unsigned k = 0; !p->original && k < det.num_gpus; k++) energy_eb[1] += det.error_bound_j[k];
  double time_s = r.time_s;
  if ((rc = zeus_collective_allreduce(p->coll, energy_eb, p->original ? 1 : 2, ZEUS_REDUCE_SUM)) ||
      (rc = zeus_collective_allreduce(p->coll, &time_s, 1, ZEUS_REDUCE_MAX))) {
    p->state = ZEUS_PLO_READY;
    p->steps_left = 1;
    return zeus__error_ctx(rc, "power-limit optimizer: combining the measurement of %u W across ranks",
                           p->limits_w[p->idx]);
  }
  double energy = energy_eb[0];
  if (p->original) {
    p->meas[p->nmeas++] = (zeus_plo_measurement){
        .power_limit_w = p->limits_w[p->idx], .energy_j = energy, .time_s = time_s};
    zeus__log(ZEUS_LOG_INFO, "plo", "%u W: %.3f J in %.3f s", p->limits_w[p->idx], energy, time_s);
    p->idx++;
    if (p->idx == p->nlimits) return finish(p);
    return start_attempt(p);
  }
  /* Robust: the step times, with outliers left out (their share of the energy too). */
  window_stats ws = window_summary(p, time_s);
  double scale = time_s > 0 ? ws.time_s / time_s : 1.0;
  double e = energy * scale, eb = energy_eb[1] * scale;
  size_t at = cur_index(p);
  if (p->refining) {
    p->r_sum_eb2[at] += eb * eb;
    p->r_sum_t[at] += ws.time_s;
    p->r_sum_e[at] += e;
    p->r_sum_d[at] += time_s;
    p->r_sum_cv2[at] += ws.cv * ws.cv;
    p->r_out[at] += ws.outliers;
    p->r_steps[at] += p->nstep;
    p->r_n[at]++;
    zeus__log(ZEUS_LOG_INFO, "plo", "%u W again: %.3f J in %.3f s (step spread %.2f%%)", p->limits_w[at], e,
              ws.time_s, 100 * ws.cv);
    p->last_at = at;
    p->ri++;
    if (p->adaptive) return adaptive_next(p);
    if (p->ri == p->nrefine) return conclude_refine(p);
    return start_attempt(p);
  }
  p->meas[p->nmeas] = (zeus_plo_measurement){.power_limit_w = p->limits_w[p->idx], .energy_j = e, .time_s = ws.time_s};
  p->info[p->nmeas] = (zeus_plo_window_info){
      .steps = p->nstep, .duration_s = time_s, .step_cv = ws.cv, .windows = 1, .outliers = ws.outliers};
  /* A bound taken as a uniform error: its standard deviation is the bound over sqrt(3). */
  p->eb_sweep[p->nmeas] = eb;
  p->tick_rel[p->nmeas] = e > 0 ? eb / sqrt(3.0) / e : 0;
  p->nmeas++;
  zeus__log(ZEUS_LOG_INFO, "plo", "%u W: %.3f J in %.3f s (step spread %.2f%%%s)", p->limits_w[p->idx], e, ws.time_s,
            100 * ws.cv, ws.outliers ? ", outlier steps left out" : "");
  p->idx++;
  if (p->nmeas == 1) size_windows(p, ws);
  if (p->idx < p->nlimits) return start_attempt(p);
  p->last_at = p->idx - 1;
  refine_plan(p);
  if (p->adaptive) {
    p->refining = true;
    p->ri = p->nrefine = 0;
    return adaptive_next(p);
  }
  if (p->nrefine == 0) return finish(p);
  p->refining = true;
  p->ri = 0;
  return start_attempt(p);
}

/* Everything but the DONE fast path. */
static int step_begin_slow(zeus_plo *p) {
  if (!p) return zeus__error(ZEUS_EINVAL, "zeus_plo_on_step_begin: no optimizer given");
  p->steps_seen++;
  switch (p->state) {
    case ZEUS_PLO_READY:
      if (--p->steps_left > 0) return ZEUS_OK;
      return p->refining || p->idx < p->nlimits ? start_attempt(p) : finish(p);
    case ZEUS_PLO_WARMUP:
      if (--p->steps_left > 0) return ZEUS_OK;
      {
        int rc = begin_profiling(p);
        if (rc) p->steps_left = 1; /* still WARMUP: try again at the next step begin */
        return rc;
      }
    case ZEUS_PLO_PROFILING:
      if (!p->original && p->step_s) {
        double t = zeus_devices_now(p->dev);
        if (p->nstep < p->step_cap) p->step_s[p->nstep++] = t - p->last_step_t;
        p->last_step_t = t;
      }
      if (--p->steps_left > 0) return ZEUS_OK;
      return end_profiling(p);
    case ZEUS_PLO_DONE:
      return ZEUS_OK;
  }
  return ZEUS_OK;
}

int zeus_plo_on_step_begin(zeus_plo *p) {
  if (__builtin_expect(p != NULL && p->state == ZEUS_PLO_DONE, 1)) return ZEUS_OK;
  return step_begin_slow(p);
}

int zeus_plo_on_step_end(zeus_plo *p) {
  return p ? ZEUS_OK : zeus__error(ZEUS_EINVAL, "zeus_plo_on_step_end: no optimizer given");
}

int zeus_plo_on_epoch_begin(zeus_plo *p) {
  return p ? ZEUS_OK : zeus__error(ZEUS_EINVAL, "zeus_plo_on_epoch_begin: no optimizer given");
}

int zeus_plo_on_epoch_end(zeus_plo *p) {
  if (!p) return zeus__error(ZEUS_EINVAL, "zeus_plo_on_epoch_end: no optimizer given");
  p->epochs_ended++;
  p->last_at = SIZE_MAX;
  if (p->refining && p->adaptive && p->state != ZEUS_PLO_DONE && p->max_profile_steps > 0 &&
      p->steps_seen < p->max_profile_steps) {
    /* The confidence mode with a cap of its own goes on across epochs: the window is measured
     * again from the next step begin. */
    if (p->state == ZEUS_PLO_PROFILING && zeus_monitor_is_open(p->mon, p->window))
      zeus_monitor_end_window(p->mon, p->window, true, NULL);
    p->state = ZEUS_PLO_READY;
    p->steps_left = 1;
    return ZEUS_OK;
  }
  if (p->refining && p->state != ZEUS_PLO_DONE) {
    /* Re-measuring never goes past the epoch: decide with what is measured. */
    zeus__log(ZEUS_LOG_INFO, "plo", "epoch ended while measuring limits again; deciding with %zu of %zu windows",
              p->ri, p->nrefine);
    if (p->state == ZEUS_PLO_PROFILING && zeus_monitor_is_open(p->mon, p->window))
      zeus_monitor_end_window(p->mon, p->window, true, NULL);
    return conclude_refine(p);
  }
  p->win_steps = p->profile_steps; /* a later epoch: the original's windows */
  if (p->state != ZEUS_PLO_WARMUP && p->state != ZEUS_PLO_PROFILING) return ZEUS_OK;
  zeus__log(ZEUS_LOG_INFO, "plo", "epoch ended while %s %u W; it will be tried again",
            p->state == ZEUS_PLO_WARMUP ? "warming up at" : "profiling", p->limits_w[p->idx]);
  int rc = ZEUS_OK;
  if (p->state == ZEUS_PLO_PROFILING) {
    rc = zeus_monitor_end_window(p->mon, p->window, true, NULL);
    if (rc) zeus__error_ctx(rc, "power-limit optimizer: cancelling the profiling window");
  }
  /* READY for the same limit whatever happens, so that the attempt is retried. */
  p->state = ZEUS_PLO_READY;
  p->steps_left = 1;
  int rc2 = apply_limit(p, p->max_mw);
  return rc ? rc : rc2;
}

/* ---- queries ---- */

zeus_plo_state zeus_plo_get_state(const zeus_plo *p) { return p ? p->state : ZEUS_PLO_READY; }
long zeus_plo_steps_left(const zeus_plo *p) { return p && p->state != ZEUS_PLO_DONE ? p->steps_left : 0; }
unsigned zeus_plo_next_power_limit_w(const zeus_plo *p) {
  if (!p || p->state == ZEUS_PLO_DONE) return 0;
  if (p->refining) return p->limits_w[cur_index(p)];
  return p->idx < p->nlimits ? p->limits_w[p->idx] : 0;
}
unsigned zeus_plo_current_power_limit_w(const zeus_plo *p) { return p ? p->current_mw / 1000 : 0; }
unsigned zeus_plo_optimal_power_limit_w(const zeus_plo *p) {
  return p && p->state == ZEUS_PLO_DONE ? p->optimal_w : 0;
}

size_t zeus_plo_contenders(const zeus_plo *p, const unsigned **out_w) {
  bool ok = p && p->state == ZEUS_PLO_DONE && !isnan(p->confidence);
  if (out_w) *out_w = ok ? p->contenders_w : NULL;
  return ok ? p->ncontenders : 0;
}

double zeus_plo_confidence(const zeus_plo *p) { return p && p->state == ZEUS_PLO_DONE ? p->confidence : NAN; }

size_t zeus_plo_measurements(const zeus_plo *p, const zeus_plo_measurement **out) {
  if (!p) {
    if (out) *out = NULL;
    return 0;
  }
  if (out) *out = p->meas;
  return p->nmeas;
}

size_t zeus_plo_power_limits(const zeus_plo *p, const unsigned **out_w) {
  if (!p) {
    if (out_w) *out_w = NULL;
    return 0;
  }
  if (out_w) *out_w = p->limits_w;
  return p->nlimits;
}

/* ---- open / close ---- */

static void plo_free(zeus_plo *p) {
  free(p->limits_mw);
  free(p->limits_w);
  free(p->meas);
  free(p->profile_path);
  free(p->info);
  free(p->step_s);
  free(p->refine_seq);
  free(p->r_sum_t);
  free(p->r_sum_e);
  free(p->r_sum_d);
  free(p->r_sum_cv2);
  free(p->r_n);
  free(p->r_out);
  free(p->r_steps);
  free(p->choose);
  free(p->tick_rel);
  free(p->r_sum_eb2);
  free(p->eb_sweep);
  free(p->contenders_w);
  free(p);
}

/* Reads each GPU's range and current limit; the range must be the same on every GPU (and, with a
 * collective, on every rank). */
static int read_gpus(zeus_plo *p) {
  for (unsigned k = 0; k < p->ngpu; k++) {
    unsigned g = p->gpu[k], lo, hi, def;
    int rc = zeus_gpu_power_limit_constraints(p->dev, g, &lo, &hi, &def);
    if (rc) return zeus__error_ctx(rc, "power-limit optimizer: GPU %u", g);
    if (lo > hi || hi == 0)
      return zeus__error(ZEUS_EDEVICE, "power-limit optimizer: GPU %u reports the power-limit range [%u, %u] mW", g, lo,
                         hi);
    if (k == 0) {
      p->min_mw = lo;
      p->max_mw = hi;
    } else if (lo != p->min_mw || hi != p->max_mw) {
      return zeus__error(ZEUS_EINVAL,
                         "power-limit optimizer: power-limit ranges differ across GPUs: GPU %u has [%u, %u] mW but "
                         "GPU %u has [%u, %u] mW; every GPU of the monitor must have the same range",
                         p->gpu[0], p->min_mw, p->max_mw, g, lo, hi);
    }
    if ((rc = zeus_gpu_get_power_limit(p->dev, g, &p->orig_mw[k])))
      return zeus__error_ctx(rc, "power-limit optimizer: GPU %u", g);
    p->cur_mw[k] = p->orig_mw[k];
  }
  return ZEUS_OK;
}

/* Agreement across ranks at open: the number of GPUs (for the default selector's world size),
 * whether the profile file exists, and the power-limit range. */
static int agree_at_open(zeus_plo *p, bool has_file, unsigned *world_gpus) {
  *world_gpus = p->ngpu;
  if (!p->coll || p->coll->world_size == 1) return ZEUS_OK;
  double sum[2] = {p->ngpu, has_file ? 1 : 0};
  double mx[4] = {p->max_mw, -(double)p->max_mw, p->min_mw, -(double)p->min_mw};
  int rc;
  if ((rc = zeus_collective_allreduce(p->coll, sum, 2, ZEUS_REDUCE_SUM)) ||
      (rc = zeus_collective_allreduce(p->coll, mx, 4, ZEUS_REDUCE_MAX)))
    return zeus__error_ctx(rc, "power-limit optimizer: agreeing with the other ranks at start");
  if (mx[0] != -mx[1] || mx[2] != -mx[3])
    return zeus__error(ZEUS_EINVAL,
                       "power-limit optimizer: power-limit ranges differ across ranks (maximum %.0f to %.0f mW, "
                       "minimum %.0f to %.0f mW); every GPU of the job must have the same range",
                       -mx[1], mx[0], -mx[3], mx[2]);
  if (sum[1] != 0 && sum[1] != p->coll->world_size)
    return zeus__error(ZEUS_EINVAL,
                       "power-limit optimizer: the profile file '%s' exists on %.0f of %d ranks; every rank must see "
                       "the same file, or none",
                       p->profile_path, sum[1], p->coll->world_size);
  *world_gpus = (unsigned)sum[0];
  return ZEUS_OK;
}

static int build_grid(zeus_plo *p, unsigned step_w) {
  unsigned step_mw = step_w * 1000u;
  size_t n = (p->max_mw - p->min_mw) / step_mw + 1; /* max - k*step >= min: never below the minimum */
  if (!(p->limits_mw = calloc(n, sizeof *p->limits_mw)) || !(p->limits_w = calloc(n, sizeof *p->limits_w)) ||
      !(p->meas = calloc(n, sizeof *p->meas)))
    return zeus__oom("building the power-limit grid");
  for (size_t i = 0; i < n; i++) {
    p->limits_mw[i] = p->max_mw - (unsigned)i * step_mw;
    p->limits_w[i] = p->limits_mw[i] / 1000;
  }
  p->nlimits = n;
  if (!p->original &&
      (!(p->info = calloc(n, sizeof *p->info)) || !(p->refine_seq = calloc(2 * n + 2, sizeof *p->refine_seq)) ||
       !(p->r_sum_t = calloc(n, sizeof(double))) || !(p->r_sum_e = calloc(n, sizeof(double))) ||
       !(p->r_sum_d = calloc(n, sizeof(double))) || !(p->r_sum_cv2 = calloc(n, sizeof(double))) ||
       !(p->r_n = calloc(n, sizeof(long))) || !(p->r_out = calloc(n, sizeof(long))) || !(p->r_steps = calloc(n, sizeof(long))) ||
       !(p->choose = calloc(n, sizeof *p->choose)) || !(p->tick_rel = calloc(n, sizeof(double))) ||
       !(p->r_sum_eb2 = calloc(n, sizeof(double))) || !(p->eb_sweep = calloc(n, sizeof(double))) ||
       !(p->contenders_w = calloc(n, sizeof *p->contenders_w)) ||
       !(p->step_s = calloc((size_t)step_capacity(p), sizeof(double)))))
    return zeus__oom("building the power-limit grid");
  p->step_cap = step_capacity(p);
  return ZEUS_OK;
}

static int turn_on_persistence(zeus_plo *p) {
  for (unsigned k = 0; k < p->ngpu; k++) {
    bool on = false;
    int rc = zeus_gpu_get_persistence_mode(p->dev, p->gpu[k], &on);
    if (rc == ZEUS_OK && on) continue;
    rc = zeus_gpu_set_persistence_mode(p->dev, p->gpu[k], true);
    if (rc == ZEUS_ENOTSUP) {
      zeus__log(ZEUS_LOG_DEBUG, "plo", "GPU %u: persistence mode is not supported; continuing without", p->gpu[k]);
      continue;
    }
    if (rc)
      return zeus__error_ctx(rc, "power-limit optimizer: turning persistence mode on for GPU %u (changing power "
                             "limits needs root or CAP_SYS_ADMIN)", p->gpu[k]);
    p->pm_changed[k] = true;
  }
  return ZEUS_OK;
}

int zeus_plo_open(zeus_plo **out, zeus_monitor *monitor, const zeus_plo_opts *opts) {
  return zeus__plo_open_mode(out, monitor, opts, -1);
}

int zeus__plo_open_mode(zeus_plo **out, zeus_monitor *monitor, const zeus_plo_opts *opts, int mode_in) {
  if (!out || !monitor || !opts)
    return zeus__error(ZEUS_EINVAL,
                       "zeus_plo_open: out, monitor and opts are required (fill opts with zeus_plo_opts_init)");
  *out = NULL;
  int rc = check_opts(opts);
  if (rc) return rc;
  unsigned ngpu = zeus_monitor_num_gpus(monitor);
  if (ngpu == 0)
    return zeus__error(ZEUS_EINVAL, "power-limit optimizer: the monitor measures no GPU (backend %s)",
                       zeus_devices_backend(zeus_monitor_devices(monitor)));
  zeus_plo *p = calloc(1, sizeof *p);
  if (!p) return zeus__oom("opening the power-limit optimizer");
  p->mon = monitor;
  p->dev = zeus_monitor_devices(monitor);
  p->confidence = NAN;
  p->ngpu = ngpu;
  for (unsigned k = 0; k < ngpu; k++) p->gpu[k] = zeus_monitor_gpu_index(monitor, k);
  p->wait_steps = opts->wait_steps;
  p->warmup_steps = opts->warmup_steps;
  p->profile_steps = opts->profile_steps;
  p->win_steps = opts->profile_steps;
  p->coll = opts->collective;
  p->conf_target = opts->confidence;
  p->max_profile_steps = opts->max_profile_steps;
  p->last_at = SIZE_MAX;
  if (p->conf_target == 0 && (rc = zeus__env_double("ZEUS_PLO_CONFIDENCE", 0, 0.999999, 0, &p->conf_target))) {
    plo_free(p);
    return zeus__error_ctx(rc, "power-limit optimizer");
  }
  {
    p->original = mode_in == 1;
    if (mode_in < 0 && (rc = zeus__robust_mode_from_env(&p->original))) {
      plo_free(p);
      return zeus__error_ctx(rc, "power-limit optimizer");
    }
  }
  if (opts->profile_path && !(p->profile_path = strdup(opts->profile_path))) {
    plo_free(p);
    return zeus__oom("opening the power-limit optimizer");
  }
  bool has_file = false;
  if (p->profile_path) {
    struct stat st;
    has_file = stat(p->profile_path, &st) == 0;
    if (!has_file && errno != ENOENT) {
      rc = zeus__error(ZEUS_EIO, "power-limit optimizer: cannot check the profile file '%s': %s", p->profile_path,
                       strerror(errno));
      plo_free(p);
      return rc;
    }
  }
  unsigned world_gpus = ngpu;
  if ((rc = read_gpus(p)) || (rc = agree_at_open(p, has_file, &world_gpus)) || (rc = build_grid(p, opts->pl_step_w))) {
    plo_free(p);
    return rc;
  }
  if (opts->selector) p->sel = *opts->selector;
  else zeus_selector_zeus_cost(&p->sel, 0.5, world_gpus);

  if (has_file) {
    zeus_plo_measurement *m;
    size_t n;
    zeus__plo_choice ch;
    if ((rc = zeus__plo_profile_load_choice(p->profile_path, &m, &n, &ch))) {
      plo_free(p);
      return rc;
    }
    free(p->meas);
    p->meas = m;
    p->nmeas = n;
    p->idx = p->nlimits;
    p->loaded = true;
    /* A run that re-measured chose among the limits it re-measured: with the same selector the
     * loaded profile chooses among them too (the live run's choice); otherwise among every limit. */
    /* One limit alone: a confidence mode's choice at its cap (any selector but a custom one). */
    bool same = !p->original && ch.namong >= 1 && strcmp(ch.selector, zeus__selector_name(&p->sel)) == 0 &&
                (p->sel.kind != ZEUS_SELECTOR_ZEUS_COST || ch.eta == p->sel.eta) &&
                (p->sel.kind != ZEUS_SELECTOR_MAX_SLOWDOWN || ch.namong == 1) && p->sel.kind != ZEUS_SELECTOR_CUSTOM;
    free(p->choose);
    p->choose = same ? calloc(n, sizeof *p->choose) : NULL;
    p->nchoose = 0;
    for (size_t i = 0; p->choose && i < n; i++)
      for (size_t k = 0; k < ch.namong; k++)
        if (m[i].power_limit_w == ch.among_w[k]) {
          p->choose[p->nchoose++] = m[i];
          break;
        }
    if (p->nchoose < (ch.namong == 1 ? 1u : 2u)) p->nchoose = 0;
    else if (p->nchoose == 1)
      zeus__log(ZEUS_LOG_INFO, "plo", "loaded profile: its run chose %u W at the confidence mode's cap",
                p->choose[0].power_limit_w);
    else zeus__log(ZEUS_LOG_INFO, "plo", "loaded profile: choosing among the %zu limits its run re-measured", p->nchoose);
    free(ch.among_w);
    /* The file's report of its run's choice, told again when the same optimum is applied. */
    free(p->contenders_w);
    p->contenders_w = ch.contenders_w;
    p->ncontenders = ch.ncontenders;
    p->file_w = ch.decided && !p->original ? ch.optimal_w : 0;
    p->file_confidence = ch.confidence;
  }

  /* From here on GPUs change: handlers first, so that a signal at any point restores them. */
  if (!opts->no_signal_handlers) {
    if ((rc = zeus__restore_signals_acquire())) {
      plo_free(p);
      return rc;
    }
    p->signals = true;
  }
  p->current_mw = p->cur_mw[0];
  p->force_apply = true;
  if (!(rc = turn_on_persistence(p))) {
    if (has_file) {
      if ((rc = apply_optimum(p)))
        zeus__error_ctx(rc, "power-limit profile '%s'", p->profile_path);
    } else {
      rc = apply_limit(p, p->max_mw);
      p->state = ZEUS_PLO_READY;
      p->steps_left = p->wait_steps < LONG_MAX ? p->wait_steps + 1 : LONG_MAX;
    }
  }
  if (rc) {
    restore_gpus(p);
    if (p->signals) zeus__restore_signals_release();
    plo_free(p);
    return rc;
  }
  zeus__log(ZEUS_LOG_INFO, "plo", "%s: %u GPU(s), %zu power limits from %u W down to %u W in %u W steps, %s selector",
            has_file ? "loaded profile" : "profiling", ngpu, p->nlimits, p->limits_w[0], p->limits_w[p->nlimits - 1],
            opts->pl_step_w, zeus__selector_name(&p->sel));
  *out = p;
  return ZEUS_OK;
}

void zeus_plo_close(zeus_plo *p) {
  if (!p) return;
  if (p->state == ZEUS_PLO_PROFILING && zeus_monitor_is_open(p->mon, p->window))
    zeus_monitor_end_window(p->mon, p->window, true, NULL);
  restore_gpus(p);
  if (p->signals) zeus__restore_signals_release();
  plo_free(p);
}
