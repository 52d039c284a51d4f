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

#define CRING 128           /* counter ticks kept per GPU: ~12.8 s at 100 ms */
#define PRING 512           /* power steps kept per GPU: ~51 s at one change per 100 ms tick */
#define POLL_FINE_S 0.00025 /* poll gap around an expected tick */
#define POLL_COARSE_S 0.001 /* power poll gap while its tick's phase is unknown or late */
#define COUNTER_GAP_S 0.0005 /* the least time between the starts of two counter reads */
#define GUARD_S 0.006       /* dense power polling starts this long before the expected tick */
#define GUARD_MIN_S 0.003   /* counter reads start at least this long before its expected tick */
#define GUARD_MAX_S 0.02
#define ALPHA 0.125       /* the offset filter's gain once it has settled */
#define LEARN 8             /* ticks averaged before the filter settles */
#define REPLAY_SPAN_S 20.0  /* the most of the past a virtual replay goes back to */

/* A tick of the energy counter: when it most likely was (t), the interval it was seen in, and the
 * counter after it. */
typedef struct ctick {
  double t, lo, hi, c_j;
  double jump_j; /* how far this tick moved the offset when it reset it (0: it did not) */
} ctick;

/* A change of the instant power reading: when (+- unc), the reading from then on, and the integral
 * of the readings (J) up to t. */
typedef struct pstep {
  double t, unc, p_w, pi_j;
} pstep;

typedef struct gpu_follower {
  struct zeus__sampler *s;
  unsigned gpu;
  pthread_t thread[2]; /* the counter's follower and the power's */
  bool running[2];
  ctick c[CRING];
  unsigned chead, cn;
  pstep p[PRING];
  unsigned phead, pn;
  unsigned long ticks;
  double cperiod, pperiod; /* medians of recent intervals; 0 while unknown */
  double civ[9], piv[9];
  unsigned nci, npi;
  /* the counter's reads: the value, the start of the latest read that showed it, when the last
   * read ended, reads since the last change, the read's cost (a running mean) */
  double c_val, c_val_rs, c_end, read_s;
  unsigned c_reads;
  double guard; /* counter reads start this long before the expected tick */
  /* the power's reads */
  unsigned p_mw;
  double p_val_rs, p_end;
  /* the counter minus the integral of the power readings (J): a slowly moving offset that maps a
   * counter value to the instant it belongs to, its mean deviation, and how many ticks made it */
  double a, a_dev;
  unsigned na;
  unsigned together; /* narrow counter ticks in a row with a power tick inside their interval */
  double t_init, c_init, p_init;
  /* virtual mode: each follower's replay time, and the reads' costs */
  double cursor_c, cursor_p, cost_c, cost_p;
  clockid_t cpu_clock[2];
  bool have_cpu_clock[2];
} gpu_follower;

/* What one thread follows: the counter or the power of one GPU. */
typedef struct role {
  gpu_follower *f;
  bool counter;
} role;

struct zeus__sampler {
  zeus_devices *dev;
  role roles[ZEUS_MAX_GPUS][2];
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;
  unsigned n;
  bool virt; /* virtual mode (the backend keeps its ticks' record; no threads) */
  unsigned fork_gen; /* zeus__fork_generation() when the threads started */
  gpu_follower g[ZEUS_MAX_GPUS];
};

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Adds an interval to a ring of 9 and returns their median (0 with fewer than 3), within
 * [5 ms, 2 s]: a missed tick shows as a double interval, which the median of several ignores. */
static double add_interval(double *iv, unsigned *ni, double dt) {
  iv[*ni % 9] = dt;
  (*ni)++;
  unsigned m = *ni < 9 ? *ni : 9;
  if (m < 3) return 0;
  double v[9];
  memcpy(v, iv, m * sizeof *v);
  qsort(v, m, sizeof *v, cmp_d);
  return fmin(fmax(v[m / 2], 0.005), 2.0);
}

static const pstep *pnewest(const gpu_follower *f) { return &f->p[(f->phead + PRING - 1) % PRING]; }
static const pstep *poldest(const gpu_follower *f) { return &f->p[(f->phead + PRING - f->pn) % PRING]; }
static const ctick *cnewest(const gpu_follower *f, unsigned back) {
  return &f->c[(f->chead + CRING - 1 - back) % CRING];
}

/* The integral of the power readings up to t (J). */
static double pi_at(const gpu_follower *f, double t) {
  for (unsigned i = 0; i < f->pn; i++) {
    const pstep *e = &f->p[(f->phead + PRING - 1 - i) % PRING];
    if (e->t <= t) return e->pi_j + e->p_w * (t - e->t);
  }
  const pstep *o = poldest(f);
  return o->pi_j - o->p_w * (o->t - t);
}

/* The power reading in effect at t. */
static const pstep *pstep_at(const gpu_follower *f, double t) {
  for (unsigned i = 0; i < f->pn; i++) {
    const pstep *e = &f->p[(f->phead + PRING - 1 - i) % PRING];
    if (e->t <= t) return e;
  }
  return poldest(f);
}

/* When the integral of the power readings reached y. */
static double pi_inverse(const gpu_follower *f, double y) {
  for (unsigned i = 0; i < f->pn; i++) {
    const pstep *e = &f->p[(f->phead + PRING - 1 - i) % PRING];
    if (e->pi_j <= y) return e->p_w > 0 ? e->t + (y - e->pi_j) / e->p_w : e->t;
  }
  const pstep *o = poldest(f);
  return o->p_w > 0 ? o->t - (o->pi_j - y) / o->p_w : o->t;
}

static void push_power(gpu_follower *f, double t, double unc, double p_w) {
  if (f->pn) {
    const pstep *last = pnewest(f);
    if (t < last->t) t = last->t;
    double dt = t - last->t;
    if (dt > 0 && unc <= 0.001 && last->unc <= 0.001) f->pperiod = add_interval(f->piv, &f->npi, dt);
  }
  double pi = f->pn ? pi_at(f, t) : 0;
  f->p[f->phead] = (pstep){t, unc, p_w, pi};
  f->phead = (f->phead + 1) % PRING;
  if (f->pn < PRING) f->pn++;
}

/* A counter tick seen in (lo, hi] with the counter at c after it. The counter is the integral of
 * the power readings plus an offset that moves slowly (the readings' noise and gain); each tick
 * says the offset lies in [c - pi(hi), c - pi(lo)]. A filter of those intervals' middles (weighted
 * by how narrow each is) gives the offset, and the tick is placed where the integral plus the
 * offset reaches c: that is the counter's own tick time to a fraction of a ms even when its reads
 * take milliseconds and the power ticks on another clock, kept within the interval it was seen
 * in. Called with s->mu held. */
static void push_tick(gpu_follower *f, double lo, double hi, double c) {
  double alo = c - pi_at(f, hi), ahi = c - pi_at(f, lo), m = 0.5 * (alo + ahi), jump = 0;
  if (f->na == 0) {
    f->a = m;
    f->a_dev = 0.25 * (ahi - alo);
  } else {
    double good = 2 * f->read_s + 2 * POLL_FINE_S, w = hi - lo;
    double weight = w > good ? (good / w) * (good / w) : 1;
    double alpha = (f->na < LEARN ? 1.0 / (f->na + 1) : ALPHA) * weight;
    if (fabs(m - f->a) > 0.5 * (ahi - alo) && weight >= 0.5) { /* outside what this tick allows: it moved */
      jump = m - f->a;                                           /* (a load changed between power ticks) */
      f->a = m;
      f->na = 0;
    } else {
      f->a_dev += ALPHA * (fabs(m - f->a) - f->a_dev);
      f->a += alpha * (m - f->a);
    }
  }
  f->na++;
  double t = fmin(fmax(pi_inverse(f, c - f->a), lo), hi);
  /* Where the power ticks with the counter (an H100: one clock), every counter tick seen in a
   * narrow interval has a power tick inside it, known to a fraction of a ms: then that is the
   * tick's time (at worst a fixed offset off, the same at every tick). Two clocks whose phase
   * drifts (an H200, ~1.6 ms a tick) line up for a few ticks now and then, never 8 in a row. */
  const pstep *inside = NULL;
  bool narrow = hi - lo <= 2 * f->read_s + 0.002;
  for (unsigned i = 0; narrow && i < f->pn; i++) {
    const pstep *e = &f->p[(f->phead + PRING - 1 - i) % PRING];
    if (e->t <= lo) break;
    if (e->t <= hi && e->unc <= 0.001) inside = e;
  }
  if (narrow) f->together = inside ? f->together + 1 : 0;
  if (inside && f->together >= 8) t = inside->t;
  if (f->cn) {
    const ctick *last = cnewest(f, 0);
    if (t <= last->t) t = fmin(last->t + 1e-6, hi);
    f->cperiod = add_interval(f->civ, &f->nci, t - last->t);
  }
  f->c[f->chead] = (ctick){t, lo, hi, c, jump};
  f->chead = (f->chead + 1) % CRING;
  if (f->cn < CRING) f->cn++;
  f->ticks++;
}

/* ---- the follower's reads: one schedule for the thread and the virtual replay ---- */

/* When to read the counter next: back to back while its period is unknown; else from `guard`
 * before the tick the period predicts until the read that shows it; sparsely when it is late. */
static double next_counter_read(const gpu_follower *f, double now) {
  double gap = fmax(f->read_s, COUNTER_GAP_S), soon = fmax(now, f->c_val_rs + gap);
  if (!(f->cperiod > 0) || !f->cn) return soon;
  double expect = cnewest(f, 0)->t + f->cperiod;
  if (now < expect - f->guard) return expect - f->guard;
  if (now > expect + 0.5 * f->cperiod) return fmax(now, f->c_end + fmax(3 * gap, 0.01)); /* late: sparsely */
  return soon;
}

/* When to read the power next: densely around its expected tick, else every POLL_COARSE_S. */
static double next_power_read(const gpu_follower *f, double now) {
  double soon = fmax(now, f->p_end + POLL_FINE_S);
  if (!(f->pperiod > 0) || f->pn < 2 || pnewest(f)->unc > 0.001) return fmax(now, f->p_end + POLL_COARSE_S);
  double expect = pnewest(f)->t + f->pperiod;
  if (expect + GUARD_S < now) expect += ceil((now - GUARD_S - expect) / f->pperiod) * f->pperiod; /* missed */
  return now < expect - GUARD_S ? expect - GUARD_S : soon;
}

/* A counter read that started at rs and ended at re showed c (J). Called with s->mu held. */
static void on_counter(gpu_follower *f, double rs, double re, double c) {
  double cost = re - rs;
  f->read_s = f->read_s > 0 ? f->read_s + 0.1 * (cost - f->read_s) : cost;
  f->c_end = re;
  f->c_reads++;
  if (c == f->c_val) {
    f->c_val_rs = rs;
    return;
  }
  /* the guard adapts: a tick seen at a window's first read came earlier than expected */
  double gmin = fmax(GUARD_MIN_S, 2 * f->read_s);
  f->guard = f->c_reads <= 1 ? fmin(f->guard * 1.5, GUARD_MAX_S) : fmax(f->guard * 0.97, gmin);
  if (f->guard < gmin) f->guard = gmin;
  double lo = f->c_val_rs, hi = re;
  f->c_val = c;
  f->c_val_rs = rs;
  f->c_reads = 0;
  push_tick(f, lo, hi, c);
}

/* A power read in [rs, re] showed mw. Called with s->mu held. */
static void on_power(gpu_follower *f, double rs, double re, unsigned mw) {
  f->p_end = re;
  if (mw != f->p_mw) {
    double lo = f->p_val_rs, when = 0.5 * (lo + re), unc = 0.5 * (re - lo);
    if (unc > 0.001 && f->pperiod > 0 && f->pn > 1) { /* seen late: where the period says, if inside */
      const pstep *last = pnewest(f);
      double k = ceil((lo - last->t) / f->pperiod), pred = last->t + fmax(k, 1) * f->pperiod;
      if (pred > lo && pred <= re) when = pred, unc = fmin(unc, 0.004);
    }
    push_power(f, when, unc, mw / 1000.0);
  }
  f->p_mw = mw;
  f->p_val_rs = rs;
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

static void *follow(void *arg) {
  role *r = arg;
  gpu_follower *f = r->f;
  zeus__sampler *s = f->s;
  for (;;) {
    double now = zeus_devices_now(s->dev);
    pthread_mutex_lock(&s->mu);
    double next = r->counter ? next_counter_read(f, now) : next_power_read(f, now);
    pthread_mutex_unlock(&s->mu);
    if (!wait_until(f, next)) break;
    double rs = zeus_devices_now(s->dev);
    int rc;
    uint64_t mj = 0;
    unsigned mw = 0;
    if (r->counter) rc = zeus_gpu_total_energy(s->dev, f->gpu, &mj);
    else rc = zeus_gpu_instant_power(s->dev, f->gpu, &mw);
    double re = zeus_devices_now(s->dev);
    if (rc != ZEUS_OK) {
      if (!wait_until(f, re + 0.1)) break;
      continue;
    }
    pthread_mutex_lock(&s->mu);
    if (r->counter) on_counter(f, rs, re, mj / 1000.0);
    else on_power(f, rs, re, mw);
    pthread_mutex_unlock(&s->mu);
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

/* The follower's state at a counter value c and power p read at time t. */
static void follower_start(gpu_follower *f, double t, double c, unsigned mw) {
  f->t_init = t;
  f->c_init = c;
  f->p_init = mw / 1000.0;
  f->c_val = c;
  f->c_val_rs = t;
  f->c_end = t;
  f->c_reads = 0;
  f->p_mw = mw;
  f->p_val_rs = f->p_end = t;
  f->guard = GUARD_MIN_S;
  f->pn = f->phead = f->cn = f->chead = 0;
  f->nci = f->npi = 0;
  f->cperiod = f->pperiod = 0;
  f->na = 0;
  push_power(f, t, 0, f->p_init);
}

/* Reads entry k's counter and power once and starts its followers (none in virtual mode). */
static int start_entry(zeus__sampler *s, unsigned k) {
  gpu_follower *f = &s->g[k];
  uint64_t mj;
  unsigned mw;
  double t = zeus_devices_now(s->dev);
  int rc;
  if ((rc = zeus_gpu_total_energy(s->dev, f->gpu, &mj)) || (rc = zeus_gpu_instant_power(s->dev, f->gpu, &mw)))
    return zeus__error_ctx(rc, "monitor: starting the energy sampler of GPU %u", f->gpu);
  follower_start(f, t, mj / 1000.0, mw);
  if (s->virt) {
    f->cursor_c = f->cursor_p = t;
    return zeus__gpu_sensor_read_costs(s->dev, f->gpu, &f->cost_c, &f->cost_p);
  }
  for (int j = 0; j < 2; j++) {
    s->roles[k][j] = (role){f, j == 0};
    if (pthread_create(&f->thread[j], NULL, follow, &s->roles[k][j]) != 0)
      return zeus__error(ZEUS_EINTERNAL, "monitor: cannot start the energy sampler of GPU %u", f->gpu);
    f->running[j] = true;
    f->have_cpu_clock[j] = pthread_getcpuclockid(f->thread[j], &f->cpu_clock[j]) == 0;
  }
  return ZEUS_OK;
}

/* In a process forked since the sampler started, its threads stayed in the parent (and may hold its
 * lock or wait on its condition there): a new lock and condition, and new followers that start
 * from a fresh read, as at open. */
static int restart_if_forked(zeus__sampler *s) {
  unsigned gen = zeus__fork_generation();
  if (gen == s->fork_gen) return ZEUS_OK;
  s->fork_gen = gen;
  pthread_mutex_init(&s->mu, NULL);
  int rc = zeus__cond_init(&s->cv);
  s->stop = false;
  for (unsigned k = 0; k < s->n; k++) s->g[k].running[0] = s->g[k].running[1] = false;
  for (unsigned k = 0; k < s->n && !rc; k++) rc = start_entry(s, k);
  if (rc) s->n = 0; /* every later query says so */
  return rc ? zeus__error_ctx(rc, "monitor: restarting the energy sampler in a forked process") : ZEUS_OK;
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
  s->fork_gen = zeus__fork_generation();
  for (unsigned k = 0; k < n && !rc; k++) {
    s->g[k].s = s;
    s->g[k].gpu = gpus[k];
    s->n = k + 1;
    rc = start_entry(s, k);
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
  if (zeus__fork_generation() != s->fork_gen) { /* a forked child that never queried: nothing of its own */
    s->fork_gen = zeus__fork_generation();
    pthread_mutex_init(&s->mu, NULL);
    zeus__cond_init(&s->cv);
    for (unsigned k = 0; k < ZEUS_MAX_GPUS; k++) s->g[k].running[0] = s->g[k].running[1] = false;
  }
  pthread_mutex_lock(&s->mu);
  s->stop = true;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  for (unsigned k = 0; k < ZEUS_MAX_GPUS; k++)
    for (int j = 0; j < 2; j++)
      if (s->g[k].running[j]) pthread_join(s->g[k].thread[j], NULL);
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* The value a record of ticks shows at t (the newest tick at or before t), or `before`. */
static const zeus__counter_tick *record_at(const zeus__counter_tick *r, size_t n, double t) {
  size_t lo = 0, hi = n; /* the first entry after t */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (r[mid].t_s <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo ? &r[lo - 1] : NULL;
}

/* Virtual mode: time moves only with the simulated work, so no thread can poll. At each query the
 * follower's reads up to now are replayed against the backend's record of the GPU's recent ticks,
 * on the same schedule and at the same costs as the thread's on a real GPU, each showing what it
 * would have shown: the same code finds the ticks, with the same blind spots. Reading the record
 * costs the work's clock nothing, as a follower's reads on its own thread would. */
static void replay(zeus__sampler *s, gpu_follower *f, double now) {
  static _Thread_local zeus__counter_tick rc[ZEUS__SENSOR_TICKS_MAX], rp[ZEUS__SENSOR_TICKS_MAX];
  if (now - fmin(f->cursor_c, f->cursor_p) > REPLAY_SPAN_S) { /* asleep for longer than the record reaches: start again */
    double t0 = now - REPLAY_SPAN_S;
    size_t nc = 0, np = 0;
    if (zeus__gpu_counter_ticks_since(s->dev, f->gpu, t0 - 1, rc, ZEUS__SENSOR_TICKS_MAX, &nc) != ZEUS_OK ||
        zeus__gpu_power_ticks_since(s->dev, f->gpu, t0 - 1, rp, ZEUS__SENSOR_TICKS_MAX, &np) != ZEUS_OK)
      return;
    const zeus__counter_tick *c = record_at(rc, nc, t0), *p = record_at(rp, np, t0);
    if (!c || !p) return;
    follower_start(f, t0, floor(c->counter_j * 1000.0) / 1000.0, (unsigned)lround(p->power_w * 1000));
    f->cursor_c = f->cursor_p = t0;
  }
  size_t nc = 0, np = 0;
  double from = fmin(f->cursor_c, f->cursor_p) - 1.0;
  if (zeus__gpu_counter_ticks_since(s->dev, f->gpu, from, rc, ZEUS__SENSOR_TICKS_MAX, &nc) != ZEUS_OK ||
      zeus__gpu_power_ticks_since(s->dev, f->gpu, from, rp, ZEUS__SENSOR_TICKS_MAX, &np) != ZEUS_OK)
    return;
  for (;;) { /* the two followers' reads in the order they end */
    double tc = next_counter_read(f, f->cursor_c), tp = next_power_read(f, f->cursor_p);
    double ec = tc + f->cost_c, ep = tp + f->cost_p;
    bool counter = ec <= ep;
    double rs = counter ? tc : tp, re = counter ? ec : ep;
    if (re > now) break;
    if (counter) {
      const zeus__counter_tick *e = record_at(rc, nc, rs);
      on_counter(f, rs, re, e ? floor(e->counter_j * 1000.0) / 1000.0 : f->c_val);
    } else {
      const zeus__counter_tick *e = record_at(rp, np, rs);
      on_power(f, rs, re, e ? (unsigned)lround(e->power_w * 1000) : f->p_mw);
    }
    *(counter ? &f->cursor_c : &f->cursor_p) = re;
  }
}

/* The energy at t from what the follower knows, with an estimate of the error bound. */
static void estimate(const gpu_follower *f, double t, zeus__sampler_energy *out) {
  const pstep *ps = pstep_at(f, t), *newest = pnewest(f);
  if (!f->cn) { /* no tick yet: the counter at open, and the power readings since */
    out->raw_j = f->c_init;
    out->energy_j = f->c_init + pi_at(f, t) - pi_at(f, f->t_init);
    out->bound_j = ps->p_w * 0.1; /* the counter's value may be up to a tick old */
    return;
  }
  /* the newest tick at or before t, walking back */
  const ctick *after = NULL, *at = NULL;
  for (unsigned i = 0; i < f->cn; i++) {
    const ctick *e = cnewest(f, i);
    if (e->t <= t) {
      at = e;
      break;
    }
    after = e;
  }
  /* the tick times' own uncertainty: the offset's deviation, over the filter's reach */
  double u_j = 4 * f->a_dev * sqrt(ALPHA) + ps->p_w * 0.0003;
  if (!at) { /* older than the ring: back from the oldest tick along the readings */
    const ctick *o = after;
    out->raw_j = o->c_j;
    out->energy_j = o->c_j - (pi_at(f, o->t) - pi_at(f, t));
    out->bound_j = u_j + ps->p_w * 0.01 * (o->t - t);
  } else if (after) { /* between two known ticks, after the fact: the step spread as the readings were */
    double d_pi = pi_at(f, after->t) - pi_at(f, at->t), dc = after->c_j - at->c_j;
    double frac = d_pi > 0 ? (pi_at(f, t) - pi_at(f, at->t)) / d_pi : (t - at->t) / (after->t - at->t);
    frac = fmin(fmax(frac, 0), 1);
    out->raw_j = at->c_j;
    out->energy_j = at->c_j + dc * frac;
    double span = after->t - at->t, pa = pstep_at(f, at->t)->p_w, pb = pstep_at(f, after->t)->p_w;
    const pstep *nx = pstep_at(f, after->t + fmax(f->pperiod, 0.01)); /* a reading that came after */
    if (nx->t > after->t && fabs(nx->p_w - pa) > fabs(pb - pa)) pb = nx->p_w;
    out->bound_j = u_j + fabs(pb - pa) * 0.1 * span / fmax(f->pperiod, 0.01);
    if (span > 0 && fabs(pb - pa) > 0.02 * fmax(pa, pb)) {
      /* the load moved: one step at s with pa before and pb after draws the counter's dc */
      double s_at = at->t + (dc - pb * span) / (pa - pb);
      if (s_at > at->t && s_at < after->t)
        out->energy_j = at->c_j + (t <= s_at ? pa * (t - at->t) : pa * (s_at - at->t) + pb * (t - s_at));
    }
  } else { /* after the last known tick: the readings since */
    out->raw_j = at->c_j;
    out->energy_j = at->c_j + pi_at(f, t) - pi_at(f, at->t);
    /* the load changed before this tick and the power readings had not shown it yet (the tick
     * moved the offset): the first reading after the tick that moved the same way is the load's
     * since the tick */
    const pstep *nx = pstep_at(f, fmin(t, at->t + fmax(f->pperiod, 0.01)));
    if (at->jump_j != 0 && nx->t > at->t && nx->t <= t) {
      double before = pstep_at(f, at->t)->p_w, extra = (nx->p_w - before) * (nx->t - at->t);
      if ((extra > 0) == (at->jump_j > 0)) out->energy_j += extra;
    }
    const pstep *prev = f->pn > 1 ? &f->p[(f->phead + PRING - 2) % PRING] : newest;
    double since = fmax(t - at->t, 0);
    out->bound_j = u_j + fmin(fabs(newest->p_w - prev->p_w), 0.2 * newest->p_w) * fmin(since, 0.1);
  }
}

int zeus__sampler_energy_at(zeus__sampler *s, unsigned k, double t, zeus__sampler_energy *out) {
  int rc = restart_if_forked(s);
  if (rc) return rc;
  if (k >= s->n) return zeus__error(ZEUS_EINVAL, "energy sampler: no entry %u", k);
  gpu_follower *f = &s->g[k];
  pthread_mutex_lock(&s->mu);
  if (s->virt) replay(s, f, zeus_devices_now(s->dev));
  estimate(f, t, out);
  pthread_mutex_unlock(&s->mu);
  return ZEUS_OK;
}

size_t zeus__sampler_ticks_since(zeus__sampler *s, unsigned k, double after_s, double *t, double *c_j, size_t max) {
  if (restart_if_forked(s) || k >= s->n) return 0;
  gpu_follower *f = &s->g[k];
  pthread_mutex_lock(&s->mu);
  if (s->virt) replay(s, f, zeus_devices_now(s->dev));
  unsigned newer = 0; /* ticks after after_s, counted back from the newest */
  while (newer < f->cn && cnewest(f, newer)->t > after_s) newer++;
  size_t n = 0;
  for (unsigned i = newer; i-- > 0 && n < max; n++) {
    t[n] = cnewest(f, i)->t;
    c_j[n] = cnewest(f, i)->c_j;
  }
  pthread_mutex_unlock(&s->mu);
  return n;
}

double zeus__sampler_cpu_s(zeus__sampler *s) {
  double sum = 0;
  for (unsigned k = 0; k < s->n; k++) {
    struct timespec ts;
    for (int j = 0; j < 2; j++)
      if (s->g[k].have_cpu_clock[j] && clock_gettime(s->g[k].cpu_clock[j], &ts) == 0)
        sum += ts.tv_sec + ts.tv_nsec / 1e9;
  }
  return sum;
}

void zeus__sampler_stats(zeus__sampler *s, unsigned k, unsigned long *ticks, double *period_s) {
  if (k >= s->n) return;
  pthread_mutex_lock(&s->mu);
  if (ticks) *ticks = s->g[k].ticks;
  if (period_s) *period_s = s->g[k].cperiod;
  pthread_mutex_unlock(&s->mu);
}
