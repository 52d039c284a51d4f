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
};

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

static int begin_profiling(zeus_plo *p) {
  set_window_name(p);
  int rc = zeus_monitor_begin_window(p->mon, p->window, false);
  if (rc) return zeus__error_ctx(rc, "power-limit optimizer: beginning the profiling window");
  p->state = ZEUS_PLO_PROFILING;
  p->steps_left = p->profile_steps;
  zeus__log(ZEUS_LOG_DEBUG, "plo", "profiling %u W for %ld steps", p->current_mw / 1000, p->profile_steps);
  return ZEUS_OK;
}

/* Sets grid limit idx and warms up (or, with warmup_steps 0, begins profiling at once). On a
 * failure the optimizer is READY to try the same transition at the next step begin. */
static int start_attempt(zeus_plo *p) {
  int rc = apply_limit(p, p->limits_mw[p->idx]);
  if (!rc) {
    zeus__log(ZEUS_LOG_INFO, "plo", "warming up at %u W (%zu of %zu)", p->limits_w[p->idx], p->idx + 1, p->nlimits);
    if (p->warmup_steps > 0) {
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

/* Chooses the optimum (rank 0's choice is broadcast, so every rank applies the same one) and
 * applies it; DONE on success. */
static int apply_optimum(zeus_plo *p) {
  unsigned w = 0;
  int rc = zeus_selector_select(&p->sel, p->meas, p->nmeas, &w);
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
  zeus__log(ZEUS_LOG_INFO, "plo", "optimal power limit %u W (%s selector, %zu limits)", w, zeus__selector_name(&p->sel),
            p->nmeas);
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
    rc = zeus_plo_profile_save(p->profile_path, p->meas, p->nmeas);
    if (rc) zeus__log(ZEUS_LOG_WARN, "plo", "%s", zeus_errmsg());
    else zeus__log(ZEUS_LOG_INFO, "plo", "profile saved to '%s'", p->profile_path);
  }
  return rc;
}

/* The profiling window of limit idx ended: record it (energy summed and time maxed across
 * ranks), then start the next limit or finish. */
static int end_profiling(zeus_plo *p) {
  zeus_measurement r;
  int rc = zeus_monitor_end_window(p->mon, p->window, false, &r);
  if (rc) {
    p->state = ZEUS_PLO_READY; /* measure this limit again */
    p->steps_left = 1;
    return zeus__error_ctx(rc, "power-limit optimizer: ending the profiling window");
  }
  double energy = 0;
  for (unsigned k = 0; k < r.num_gpus; k++) energy += r.gpu_energy_j[k];
  double time_s = r.time_s;
  if ((rc = zeus_collective_allreduce(p->coll, &energy, 1, ZEUS_REDUCE_SUM)) ||
      (rc = zeus_collective_allreduce(p->coll, &time_s, 1, ZEUS_REDUCE_MAX))) {
    p->state = ZEUS_PLO_READY;
    p->steps_left = 1;
    return zeus__error_ctx(rc, "power-limit optimizer: combining the measurement of %u W across ranks",
                           p->limits_w[p->idx]);
  }
  p->meas[p->nmeas++] = (zeus_plo_measurement){
      .power_limit_w = p->limits_w[p->idx], .energy_j = energy, .time_s = time_s};
  zeus__log(ZEUS_LOG_INFO, "plo", "%u W: %.3f J in %.3f s", p->limits_w[p->idx], energy, time_s);
  p->idx++;
  if (p->idx == p->nlimits) return finish(p);
  return start_attempt(p);
}

/* Everything but the DONE fast path. */
static int step_begin_slow(zeus_plo *p) {
  if (!p) return zeus__error(ZEUS_EINVAL, "zeus_plo_on_step_begin: no optimizer given");
  switch (p->state) {
    case ZEUS_PLO_READY:
      if (--p->steps_left > 0) return ZEUS_OK;
      return p->idx == p->nlimits ? finish(p) : start_attempt(p);
    case ZEUS_PLO_WARMUP:
      if (--p->steps_left > 0) return ZEUS_OK;
      {
        int rc = begin_profiling(p);
        if (rc) p->steps_left = 1; /* still WARMUP: try again at the next step begin */
        return rc;
      }
    case ZEUS_PLO_PROFILING:
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
  return p && p->state != ZEUS_PLO_DONE && p->idx < p->nlimits ? p->limits_w[p->idx] : 0;
}
unsigned zeus_plo_current_power_limit_w(const zeus_plo *p) { return p ? p->current_mw / 1000 : 0; }
unsigned zeus_plo_optimal_power_limit_w(const zeus_plo *p) {
  return p && p->state == ZEUS_PLO_DONE ? p->optimal_w : 0;
}

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
  p->ngpu = ngpu;
  for (unsigned k = 0; k < ngpu; k++) p->gpu[k] = zeus_monitor_gpu_index(monitor, k);
  p->wait_steps = opts->wait_steps;
  p->warmup_steps = opts->warmup_steps;
  p->profile_steps = opts->profile_steps;
  p->coll = opts->collective;
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
    if ((rc = zeus_plo_profile_load(p->profile_path, &m, &n))) {
      plo_free(p);
      return rc;
    }
    free(p->meas);
    p->meas = m;
    p->nmeas = n;
    p->idx = p->nlimits;
    p->loaded = true;
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
