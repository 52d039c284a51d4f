/* The energy counter's follower and the per-class power fit (fit.h).
 *
 * Why: on an H100 the energy counter moves on a ~100 ms tick and one read costs ~3.3 ms of the
 * calling thread, while pipeline instructions last 30-150 ms. Reading the counter around each
 * instruction (the original's way) costs ~6.6 ms per instruction on the training thread and reads
 * mostly 0 or one tick. Instead the hooks record only timestamps; this thread follows the ticks;
 * and after the round each (instruction kind, clock) class gets the constant power that best
 * explains every tick-to-tick increment of the counter given how long each class ran inside it.
 * Instructions of one class repeat many times per round at different phases of the tick, so the
 * fit is unbiased where a single instruction's window is not. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "monitor/sampler.h"
#include "pfo_client/fit.h"
#include "zeus/sim.h"

#define RING 65536 /* samples kept */

struct zeus__pfo_follower {
  zeus_devices *d;
  unsigned gpu;
  pthread_t th;
  atomic_int stop;
  pthread_mutex_t mu; /* guards the ring */
  double rt[RING], re[RING];
  unsigned long n;
  atomic_ulong reads;
  /* observation requests on a virtual clock (zeus__pfo_follower_observe) */
  pthread_cond_t cv;  /* with mu */
  unsigned long req, served;
  bool virt; /* a simulated GPU on the virtual clock */
};

static void push(zeus__pfo_follower *f, double t, double e) {
  pthread_mutex_lock(&f->mu);
  f->rt[f->n % RING] = t;
  f->re[f->n % RING] = e;
  f->n++;
  pthread_mutex_unlock(&f->mu);
}

static void sleep_s(double s) {
  if (!(s > 0)) return;
  if (s > 0.05) s = 0.05; /* look at stop often */
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* A simulated GPU on the virtual clock: time moves only with the work, so polling cannot find the
 * ticks; the simulated GPU's own record of its last tick stands in for what a follower on a real
 * GPU finds by polling (to within a read). Reads are free here (a background thread). */
static void *follow_virtual(zeus__pfo_follower *f, zeus_sim_node *node, unsigned ng) {
  double prev_e = NAN;
  while (!atomic_load(&f->stop)) {
    pthread_mutex_lock(&f->mu);
    unsigned long r = f->req;
    pthread_mutex_unlock(&f->mu);
    uint64_t mj;
    double t0, t1;
    if (zeus_sim_gpu_last_tick(node, ng, &t0) || zeus_sim_gpu_total_energy(node, ng, &mj) ||
        zeus_sim_gpu_last_tick(node, ng, &t1)) {
      sleep_s(0.01);
      continue;
    }
    atomic_fetch_add(&f->reads, 1);
    double e = (double)mj / 1000.0;
    if (t0 == t1 && t0 >= 0 && e != prev_e) {
      push(f, t0, e);
      prev_e = e;
    }
    pthread_mutex_lock(&f->mu);
    if (t0 == t1) f->served = r;
    pthread_cond_broadcast(&f->cv);
    if (f->req == r && !atomic_load(&f->stop)) {
      struct timespec until = zeus__deadline_in(0.0002);
      zeus__cond_wait_until(&f->cv, &f->mu, &until);
    }
    pthread_mutex_unlock(&f->mu);
  }
  pthread_mutex_lock(&f->mu);
  f->served = ULONG_MAX; /* nobody waits for a stopped follower */
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

void zeus__pfo_follower_observe(zeus__pfo_follower *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  if (f->served != ULONG_MAX - 1) { /* a virtual-clock follower */
    unsigned long r = ++f->req;
    pthread_cond_broadcast(&f->cv);
    while (f->served < r) pthread_cond_wait(&f->cv, &f->mu);
  }
  pthread_mutex_unlock(&f->mu);
}

/* A counter slow to read whose GPU reports instant power cheaply (an H100: 3.3 ms against ~3 us;
 * an H200: 2.3 ms against 0.3 us): the monitor's tick followers (monitor/sampler.c) find the
 * counter's own ticks, on its own clock, which on an H200 is not the power's (a sampler of its own
 * that took the counter's value at the power's tick misplaced it by up to a tick: the per-iteration
 * energy was off by up to 80 %). This thread copies each new tick into the ring. */
static bool follow_sampled(zeus__pfo_follower *f) {
  zeus__sampler *s;
  if (zeus__sampler_open(&s, f->d, &f->gpu, 1) != ZEUS_OK) return false;
  double last = -INFINITY, t[64], e[64];
  while (!atomic_load(&f->stop)) {
    size_t n = zeus__sampler_ticks_since(s, 0, last, t, e, 64);
    for (size_t i = 0; i < n; i++) {
      push(f, t[i], e[i]);
      atomic_fetch_add(&f->reads, 1);
    }
    if (n) last = t[n - 1];
    sleep_s(0.02);
  }
  zeus__sampler_close(s);
  return true;
}

static void *follow(void *arg) {
  zeus__pfo_follower *f = arg;
  zeus_sim_thread_background(true);
  unsigned ng;
  if (f->virt && !zeus_devices_sim_index(f->d, f->gpu, &ng)) return follow_virtual(f, zeus_devices_sim_node(f->d), ng);
  { /* slow counter, cheap power: follow the power's ticks */
    uint64_t mj;
    unsigned mw;
    double m0 = zeus_monotonic_s();
    int rc = zeus_gpu_total_energy(f->d, f->gpu, &mj);
    double m1 = zeus_monotonic_s();
    int rp = zeus_gpu_instant_power(f->d, f->gpu, &mw);
    double m2 = zeus_monotonic_s();
    if (!rc && !rp && m1 - m0 >= 200e-6 && m2 - m1 < 50e-6 && follow_sampled(f)) return NULL;
  }
  double prev_t = -1, prev_e = NAN, last_tick = -1, period = 0, cost = 0;
  bool prev_changed = false;
  while (!atomic_load(&f->stop)) {
    uint64_t mj;
    double ta = zeus_devices_now(f->d), ma = zeus_monotonic_s();
    int rc = zeus_gpu_total_energy(f->d, f->gpu, &mj);
    double mb = zeus_monotonic_s();
    atomic_fetch_add(&f->reads, 1);
    if (rc) { /* a lost GPU or a failing read: try again a little later */
      sleep_s(0.01);
      continue;
    }
    double e = (double)mj / 1000.0, c = mb - ma;
    cost = cost > 0 ? 0.8 * cost + 0.2 * c : c;
    if (prev_t >= 0 && e != prev_e) {
      /* The tick came after the previous read took its value and by this one. A counter that
       * changed at the previous read too follows the work continuously: this read's time. After
       * a long sleep the tick's time is too vague: the sample is left out. */
      double tick = prev_changed ? ta : 0.5 * (prev_t + ta);
      if (prev_changed || ta - prev_t < 2 * cost + 0.002) push(f, tick, e);
      if (last_tick >= 0 && !prev_changed) {
        double p = tick - last_tick;
        period = period > 0 ? 0.8 * period + 0.2 * p : p;
      }
      last_tick = tick;
      prev_changed = true;
    } else {
      if (prev_t < 0) push(f, ta, e); /* the first value: its tick time is unknown, but it anchors */
      prev_changed = false;
    }
    prev_t = ta;
    prev_e = e;
    if (cost < 200e-6) {
      sleep_s(0.001);
    } else if (period > 0 && last_tick >= 0) {
      /* Slow reads: sleep until a few reads before the next expected tick. */
      double next = last_tick + period - 3 * cost, now = zeus_devices_now(f->d);
      if (next > now) sleep_s(next - now);
    }
  }
  return NULL;
}

int zeus__pfo_follower_open(zeus__pfo_follower **out, zeus_devices *d, unsigned gpu) {
  zeus__pfo_follower *f = calloc(1, sizeof *f);
  if (!f) return zeus__oom("starting the energy counter's follower");
  f->d = d;
  f->gpu = gpu;
  f->served = ULONG_MAX - 1; /* a real-clock follower: observe() does not wait */
  pthread_mutex_init(&f->mu, NULL);
  if (zeus__cond_init(&f->cv)) {
    pthread_mutex_destroy(&f->mu);
    free(f);
    return zeus__error(ZEUS_EINTERNAL, "Perseus client: cannot start the energy counter's follower");
  }
  zeus_sim_node *node = zeus_devices_sim_node(d);
  unsigned ng;
  zeus_sim_hardware hw;
  f->virt = node && zeus_sim_node_clock(node) == ZEUS_SIM_CLOCK_VIRTUAL && !zeus_devices_sim_index(d, gpu, &ng) &&
            !zeus_sim_gpu_hardware(node, ng, &hw) && hw.tick_s > 0;
  if (f->virt) f->served = 0;
  if (pthread_create(&f->th, NULL, follow, f) != 0) {
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return zeus__error(ZEUS_EINTERNAL, "Perseus client: cannot start the energy counter's follower thread");
  }
  *out = f;
  return ZEUS_OK;
}

void zeus__pfo_follower_close(zeus__pfo_follower *f) {
  if (!f) return;
  pthread_mutex_lock(&f->mu);
  atomic_store(&f->stop, 1);
  pthread_cond_broadcast(&f->cv);
  pthread_mutex_unlock(&f->mu);
  pthread_join(f->th, NULL);
  pthread_cond_destroy(&f->cv);
  pthread_mutex_destroy(&f->mu);
  free(f);
}

unsigned long zeus__pfo_follower_reads(zeus__pfo_follower *f) { return f ? atomic_load(&f->reads) : 0; }

size_t zeus__pfo_follower_samples(zeus__pfo_follower *f, double since, double *t, double *e, size_t cap) {
  if (!f || !cap) return 0;
  pthread_mutex_lock(&f->mu);
  unsigned long n = f->n, first = n > RING ? n - RING : 0, from = first;
  for (unsigned long i = n; i-- > first;)
    if (f->rt[i % RING] <= since) {
      from = i;
      break;
    }
  if (n - from > cap) from = n - cap;
  size_t k = 0;
  for (unsigned long i = from; i < n; i++, k++) {
    t[k] = f->rt[i % RING];
    e[k] = f->re[i % RING];
  }
  pthread_mutex_unlock(&f->mu);
  return k;
}

/* Solves a x = r (dimension k, row-major, destroyed) by Gaussian elimination with partial
 * pivoting. false when singular. */
static bool solve(double *a, double *r, size_t k, double *x) {
  for (size_t c = 0; c < k; c++) {
    size_t p = c;
    for (size_t i = c + 1; i < k; i++)
      if (fabs(a[i * k + c]) > fabs(a[p * k + c])) p = i;
    if (!(fabs(a[p * k + c]) > 1e-300)) return false;
    if (p != c) {
      for (size_t j = 0; j < k; j++) {
        double tmp = a[c * k + j];
        a[c * k + j] = a[p * k + j];
        a[p * k + j] = tmp;
      }
      double tmp = r[c];
      r[c] = r[p];
      r[p] = tmp;
    }
    for (size_t i = c + 1; i < k; i++) {
      double m = a[i * k + c] / a[c * k + c];
      if (m == 0) continue;
      for (size_t j = c; j < k; j++) a[i * k + j] -= m * a[c * k + j];
      r[i] -= m * r[c];
    }
  }
  for (size_t c = k; c-- > 0;) {
    double s = r[c];
    for (size_t j = c + 1; j < k; j++) s -= a[c * k + j] * x[j];
    x[c] = s / a[c * k + c];
  }
  return true;
}

long zeus__pfo_fit_power(double from, const double *b, const double *d, const size_t *cls, size_t n, size_t m,
                         const double *st, const double *se, size_t ns, const double *prior, double *power) {
  size_t k = m + 1;
  for (size_t c = 0; c < k; c++) power[c] = prior[c];
  if (n == 0 || ns < 2) return 0;
  double *a = calloc(k * k, sizeof *a), *r = calloc(k, sizeof *r), *x = calloc(k, sizeof *x),
         *row = calloc(k, sizeof *row);
  if (!a || !r || !x || !row) {
    free(a), free(r), free(x), free(row);
    return -1;
  }
  double lo = b[0], hi = b[n - 1] + d[n - 1];
  size_t j0 = 0; /* first instruction that may overlap the current interval */
  long rows = 0;
  for (size_t s = 1; s < ns; s++) {
    double t0 = st[s - 1], t1 = st[s];
    if (!(t1 > t0) || t1 <= lo || t0 >= hi || t0 < from) continue;
    memset(row, 0, k * sizeof *row);
    double inside = 0;
    while (j0 < n && b[j0] + d[j0] <= t0) j0++;
    for (size_t j = j0; j < n && b[j] < t1; j++) {
      double ov = fmin(t1, b[j] + d[j]) - fmax(t0, b[j]);
      if (ov > 0) {
        row[cls[j]] += ov;
        inside += ov;
      }
    }
    row[m] = fmax(0, (t1 - t0) - inside);
    double y = se[s] - se[s - 1];
    for (size_t i = 0; i < k; i++) {
      if (row[i] == 0) continue;
      r[i] += row[i] * y;
      for (size_t q = 0; q < k; q++) a[i * k + q] += row[i] * row[q];
    }
    rows++;
  }
  if (rows > 0) {
    double tr = 0;
    for (size_t i = 0; i < k; i++) tr += a[i * k + i];
    double lambda = 1e-4 * tr / (double)k + 1e-12;
    for (size_t i = 0; i < k; i++) {
      a[i * k + i] += lambda;
      r[i] += lambda * prior[i];
    }
    if (solve(a, r, k, x))
      for (size_t c = 0; c < k; c++) power[c] = isfinite(x[c]) && x[c] >= 0 ? x[c] : prior[c];
  }
  free(a), free(r), free(x), free(row);
  return rows;
}
