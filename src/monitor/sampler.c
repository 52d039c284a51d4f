/* The per-GPU tick follower: see sampler.h. */
#include "monitor/sampler.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "device/counter_ticks.h"

#define RING 128            /* ticks kept per GPU: ~12.8 s at 100 ms */
#define POLL_FINE_S 0.00025 /* poll gap around an expected tick */
#define POLL_COARSE_S 0.001 /* poll gap while the tick's phase is unknown or late */
#define GUARD_S 0.006       /* dense polling starts this long before the expected tick */

typedef struct tick {
  double t;   /* estimated time of the tick */
  double unc; /* +- on t */
  double c_j; /* the counter after it */
  double p_w; /* the instant power after it */
} tick;

typedef struct gpu_follower {
  struct zeus__sampler *s;
  unsigned gpu;
  pthread_t thread;
  bool running;
  tick ring[RING];
  unsigned head, n; /* next slot; entries held */
  unsigned long ticks;
  double period; /* median of recent intervals; 0 while unknown */
  double intervals[9];
  unsigned ni;
  /* before the first tick: the counter read at open, extrapolated with the power */
  double t_init, c_init, p_init;
  clockid_t cpu_clock;
  bool have_cpu_clock;
} gpu_follower;

struct zeus__sampler {
  zeus_devices *dev;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  unsigned n;
  bool virt; /* virtual mode (the backend keeps its ticks' record; no threads) */
  gpu_follower g[ZEUS_MAX_GPUS];
};

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Records a tick; called with s->mu held. */
static void push(gpu_follower *f, double t, double unc, double c, double p) {
  if (f->n) {
    const tick *last = &f->ring[(f->head + RING - 1) % RING];
    double dt = t - last->t;
    if (dt > 0) {
      f->intervals[f->ni % 9] = dt;
      f->ni++;
      unsigned m = f->ni < 9 ? f->ni : 9;
      double v[9];
      memcpy(v, f->intervals, m * sizeof *v);
      qsort(v, m, sizeof *v, cmp_d);
      /* a missed tick shows as a double interval: the median of several is robust to it */
      f->period = m >= 3 ? fmin(fmax(v[m / 2], 0.005), 2.0) : 0; /* kept sane whatever was seen */
    }
  }
  f->ring[f->head] = (tick){t, unc, c, p};
  f->head = (f->head + 1) % RING;
  if (f->n < RING) f->n++;
  f->ticks++;
}

/* Waits until backend time `until` (or the stop signal); false when stopping. The backend's clock
 * moves with real time here (checked at open), so a real wait of the difference is enough. */
static bool wait_until(gpu_follower *f, double until) {
  zeus__sampler *s = f->s;
  double d = until - zeus_devices_now(s->dev);
  pthread_mutex_lock(&s->mu);
  if (d > 0 && !s->stop) {
    struct timespec dl = zeus__deadline_in(d);
    while (!s->stop && zeus__cond_wait_until(&s->cv, &s->mu, &dl) != ETIMEDOUT) {
    }
  }
  bool go = !s->stop;
  pthread_mutex_unlock(&s->mu);
  return go;
}

/* Where a tick that happened in (lo, hi] most likely was: the middle of a short interval; in a long
 * one (the thread was late), the time the measured period predicts, brought inside the interval
 * (a tick that came early shows after a late wake-up with the prediction past hi). */
static void place_tick(double lo, double hi, double predicted, double *when, double *unc) {
  *when = 0.5 * (lo + hi);
  *unc = 0.5 * (hi - lo);
  if (hi - lo > 0.004 && predicted > 0) {
    *when = fmin(fmax(predicted, lo), hi);
    *unc = predicted > lo && predicted <= hi ? 0.004 : 0.006; /* about the tick's jitter */
  }
}

static void *follow(void *arg) {
  gpu_follower *f = arg;
  zeus__sampler *s = f->s;
  unsigned last_mw = 0;
  bool have_mw = false;
  double t_prev = 0, last_counter_check = zeus_devices_now(s->dev);
  double last_c;
  pthread_mutex_lock(&s->mu);
  last_c = f->c_init;
  pthread_mutex_unlock(&s->mu);
  for (;;) {
    /* when to poll next: densely around the expected tick, sparsely while it is far */
    pthread_mutex_lock(&s->mu);
    double period = f->period, t_last = f->n ? f->ring[(f->head + RING - 1) % RING].t : -1;
    pthread_mutex_unlock(&s->mu);
    double now = zeus_devices_now(s->dev);
    double next = now + POLL_COARSE_S, expect = -1;
    if (period > 0 && t_last >= 0) {
      expect = t_last + period;
      if (expect + GUARD_S < now) expect += ceil((now - GUARD_S - expect) / period) * period; /* missed: the next */
      next = now < expect - GUARD_S ? expect - GUARD_S : now + POLL_FINE_S;
    }
    if (!wait_until(f, next)) break;
    double t = zeus_devices_now(s->dev);
    unsigned mw;
    if (zeus_gpu_instant_power(s->dev, f->gpu, &mw) != ZEUS_OK) {
      if (!wait_until(f, t + 0.1)) break;
      continue;
    }
    double t_after = zeus_devices_now(s->dev); /* the value was taken in [t, t_after] */
    bool changed = have_mw && mw != last_mw;
    bool overdue = t - last_counter_check > (period > 0 ? 2.5 * period : 0.25);
    if (changed || overdue) {
      uint64_t mj;
      double lo = changed ? t_prev : last_counter_check;
      last_counter_check = t;
      if (zeus_gpu_total_energy(s->dev, f->gpu, &mj) == ZEUS_OK && mj / 1000.0 != last_c) {
        double t_c = zeus_devices_now(s->dev); /* the value was taken before this */
        last_c = mj / 1000.0;
        double when, unc;
        place_tick(lo, t_after, expect, &when, &unc);
        pthread_mutex_lock(&s->mu);
        if (unc > 0.001 && f->n) {
          /* Seen late: under a steady load the counter itself says when, to a fraction of a ms:
           * the energy since the last well-placed tick over the power then (this also finds a
           * later tick than the one expected, when the counter already shows it). */
          const tick *pv = &f->ring[(f->head + RING - 1) % RING];
          double p = pv->p_w;
          if (p > 0 && fabs(mw / 1000.0 - p) <= 0.02 * p && pv->unc < 0.002) {
            double est = pv->t + (last_c - pv->c_j) / p;
            if (est > lo - 0.001 && est <= t_c) {
              when = est;
              unc = pv->unc + 0.0005;
            }
          }
        }
        /* read so late that the counter may show a tick after `when` (a thread starved of CPU):
         * the value is kept to compare with, the tick is not */
        double last_t = f->n ? f->ring[(f->head + RING - 1) % RING].t : -INFINITY;
        if (t_c - when <= (period > 0 ? period - GUARD_S : 0.05) && when > last_t) push(f, when, unc, last_c, mw / 1000.0);
        pthread_mutex_unlock(&s->mu);
      }
    }
    last_mw = mw;
    have_mw = true;
    t_prev = t;
  }
  return NULL;
}

/* Whether the backend's clock moves with real time (not the virtual simulated clock). */
static bool clock_is_real(zeus_devices *dev) {
  double b0 = zeus_devices_now(dev), r0 = zeus_monotonic_s();
  struct timespec ts = {0, 2000000};
  nanosleep(&ts, NULL);
  double db = zeus_devices_now(dev) - b0, dr = zeus_monotonic_s() - r0;
  return db > 0.5 * dr;
}

/* Whether the backend keeps a record of every GPU's ticks (the virtual simulated clock). */
static bool ticks_recorded(zeus_devices *dev, const unsigned *gpus, unsigned n) {
  for (unsigned k = 0; k < n; k++) {
    size_t got;
    if (zeus__gpu_counter_ticks_since(dev, gpus[k], 0, NULL, 0, &got) != ZEUS_OK) return false;
  }
  return n > 0;
}

int zeus__sampler_open(zeus__sampler **out, zeus_devices *dev, const unsigned *gpus, unsigned n) {
  bool virt = false;
  if (!clock_is_real(dev) && !(virt = ticks_recorded(dev, gpus, n < ZEUS_MAX_GPUS ? n : ZEUS_MAX_GPUS)))
    return zeus__error(ZEUS_EINVAL, "monitor: the sampled energy source needs a clock that moves with real time, "
                       "or a simulated GPU whose counter ticks; backend %s has neither (use ZEUS_SIM_CLOCK=wall, or "
                       "the raw source)", zeus_devices_backend(dev));
  zeus__sampler *s = calloc(1, sizeof *s);
  if (!s) return zeus__oom("starting the energy sampler");
  s->dev = dev;
  s->virt = virt;
  pthread_mutex_init(&s->mu, NULL);
  int rc = zeus__cond_init(&s->cv);
  if (rc) {
    pthread_mutex_destroy(&s->mu);
    free(s);
    return rc;
  }
  for (unsigned k = 0; k < n; k++) {
    gpu_follower *f = &s->g[k];
    f->s = s;
    f->gpu = gpus[k];
    uint64_t mj;
    unsigned mw;
    double t = zeus_devices_now(dev);
    if ((rc = zeus_gpu_total_energy(dev, gpus[k], &mj)) || (rc = zeus_gpu_instant_power(dev, gpus[k], &mw))) {
      zeus__error_ctx(rc, "monitor: starting the energy sampler of GPU %u", gpus[k]);
      break;
    }
    f->t_init = t;
    f->c_init = mj / 1000.0;
    f->p_init = mw / 1000.0;
    if (virt) {
      s->n = k + 1;
      continue;
    }
    if (pthread_create(&f->thread, NULL, follow, f) != 0) {
      rc = zeus__error(ZEUS_EINTERNAL, "monitor: cannot start the energy sampler of GPU %u", gpus[k]);
      break;
    }
    f->running = true;
    f->have_cpu_clock = pthread_getcpuclockid(f->thread, &f->cpu_clock) == 0;
    s->n = k + 1;
  }
  if (rc) {
    zeus__sampler_close(s);
    return rc;
  }
  *out = s;
  return ZEUS_OK;
}

void zeus__sampler_close(zeus__sampler *s) {
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  for (unsigned k = 0; k < ZEUS_MAX_GPUS; k++)
    if (s->g[k].running) pthread_join(s->g[k].thread, NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Virtual mode: time moves only with the simulated work, so no thread can poll for the ticks.
 * At each query the backend's record of the GPU's recent ticks (time, counter, power) stands in
 * for what a follower finds by polling on a real GPU (there to a fraction of a ms); reading it
 * costs the work's clock nothing, as a follower's reads on its own thread would. */
static void observe_virtual(zeus__sampler *s, gpu_follower *f) {
  double after = f->n ? f->ring[(f->head + RING - 1) % RING].t : f->t_init;
  zeus__counter_tick tk[RING];
  size_t nt = 0;
  if (zeus__gpu_counter_ticks_since(s->dev, f->gpu, after, tk, RING, &nt) != ZEUS_OK) return;
  for (size_t i = 0; i < nt; i++) push(f, tk[i].t_s, 0, tk[i].counter_j, tk[i].power_w);
}

int zeus__sampler_energy_at(zeus__sampler *s, unsigned k, double t, zeus__sampler_energy *out) {
  if (k >= s->n) return zeus__error(ZEUS_EINVAL, "energy sampler: no entry %u", k);
  gpu_follower *f = &s->g[k];
  pthread_mutex_lock(&s->mu);
  if (s->virt) observe_virtual(s, f);
  if (!f->n) { /* no tick yet: the counter at open, and power since */
    double d = t - f->t_init;
    out->raw_j = f->c_init;
    out->energy_j = f->c_init + f->p_init * d;
    out->bound_j = f->p_init * 0.1; /* the counter's value may be up to a tick old */
    pthread_mutex_unlock(&s->mu);
    return ZEUS_OK;
  }
  /* the newest tick at or before t, walking back */
  const tick *after = NULL, *at = NULL;
  for (unsigned i = 0; i < f->n; i++) {
    const tick *e = &f->ring[(f->head + RING - 1 - i) % RING];
    if (e->t <= t) {
      at = e;
      break;
    }
    after = e;
  }
  if (!at) { /* older than the ring: back from the oldest tick at its power */
    const tick *o = after;
    out->raw_j = o->c_j;
    out->energy_j = o->c_j - o->p_w * (o->t - t);
    out->bound_j = o->p_w * (o->unc + 0.01 * (o->t - t));
  } else if (after) { /* between two known ticks, after the fact */
    double span = after->t - at->t, dc = after->c_j - at->c_j;
    double frac = span > 0 ? (t - at->t) / span : 0;
    out->raw_j = at->c_j;
    out->energy_j = at->c_j + dc * frac; /* a steady load: the counter's step spread evenly */
    double p = span > 0 ? dc / span : at->p_w;
    out->bound_j = p * (at->unc + after->unc);
    double pa = at->p_w, pb = after->p_w;
    if (span > 0 && fabs(pb - pa) > 0.02 * fmax(pa, pb)) {
      /* the power moved: one step at s with pa before and pb after draws the counter's dc */
      double s_at = at->t + (dc - pb * span) / (pa - pb);
      if (s_at > at->t && s_at < after->t) {
        out->energy_j = at->c_j + (t <= s_at ? pa * (t - at->t) : pa * (s_at - at->t) + pb * (t - s_at));
        out->bound_j += fabs(pb - pa) * 0.1 * span; /* the load may not have been one step */
      }
    }
  } else { /* after the last known tick: its power since */
    const tick *prev = f->n > 1 ? &f->ring[(f->head + RING - 2) % RING] : at;
    double d = t - at->t;
    out->raw_j = at->c_j;
    out->energy_j = at->c_j + at->p_w * d;
    out->bound_j = at->p_w * at->unc + fabs(at->p_w - prev->p_w) * d;
  }
  pthread_mutex_unlock(&s->mu);
  return ZEUS_OK;
}

double zeus__sampler_cpu_s(zeus__sampler *s) {
  double sum = 0;
  for (unsigned k = 0; k < s->n; k++) {
    struct timespec ts;
    if (s->g[k].have_cpu_clock && clock_gettime(s->g[k].cpu_clock, &ts) == 0) sum += ts.tv_sec + ts.tv_nsec / 1e9;
  }
  return sum;
}

void zeus__sampler_stats(zeus__sampler *s, unsigned k, unsigned long *ticks, double *period_s) {
  if (k >= s->n) return;
  pthread_mutex_lock(&s->mu);
  if (ticks) *ticks = s->g[k].ticks;
  if (period_s) *period_s = s->g[k].period;
  pthread_mutex_unlock(&s->mu);
}
