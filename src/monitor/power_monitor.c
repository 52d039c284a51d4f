/* Power and temperature timelines: a sampling thread over a device set, bounded series in
 * memory, and range queries (timeline, energy, nearest sample).
 *
 * Two locks: `sample_mu` serialises sampling passes (the thread's and zeus_power_monitor_sample's),
 * so that each series receives its samples in time order; `store_mu` guards the series and is
 * held only to append or to copy, never across a device call, so queries do not wait for a slow
 * device. The thread sleeps on a condition variable on CLOCK_MONOTONIC until the next due poll
 * or a stop request. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "zeus/power_monitor.h"

#define NDOMAINS 3
#define PERIOD_MIN 0.001
#define PERIOD_MAX 3600.0

/* One series: a ring of (time, value) points, oldest first, plus (in dedup mode) the last poll
 * of the current run of equal values, not stored yet. */
typedef struct series {
  double *t;
  unsigned *v;
  size_t cap, head, n;
  bool pending;
  double pt;
  unsigned pv;
  bool warned;
} series;

struct zeus_power_monitor {
  zeus_devices *dev;
  unsigned ngpu, gpu[ZEUS_MAX_GPUS];
  unsigned domains; /* mask of sampled domains */
  bool temperature;
  double period, tperiod;
  size_t max;
  bool dedup;
  bool epoch;
  double wall0, dev0; /* epoch time base: wall clock and device clock at open */
  series power[NDOMAINS][ZEUS_MAX_GPUS];
  series temp[ZEUS_MAX_GPUS];
  zeus_power_monitor_stats stats;
  pthread_mutex_t sample_mu, store_mu;
  /* thread */
  pthread_mutex_t thr_mu;
  pthread_cond_t thr_cv;
  pthread_t thread;
  bool running, stop;
};

static const char *domain_name(unsigned d) {
  switch (d) {
    case ZEUS_POWER_INSTANT: return "instant power";
    case ZEUS_POWER_AVERAGE: return "average power";
    case ZEUS_POWER_MEMORY_AVERAGE: return "memory average power";
    default: return "unknown power domain";
  }
}

/* ---- series ---- */

static size_t series_count(const series *s) { return s->n + (s->pending ? 1 : 0); }

/* The logical point i (0 = oldest), counting the pending tail last. */
static void series_get(const series *s, size_t i, double *t, unsigned *v) {
  if (i == s->n) {
    *t = s->pt;
    *v = s->pv;
    return;
  }
  size_t k = (s->head + i) % s->cap;
  *t = s->t[k];
  *v = s->v[k];
}

static double series_time(const series *s, size_t i) {
  double t;
  unsigned v;
  series_get(s, i, &t, &v);
  return t;
}

/* Stores a point at the newest end, growing up to `max` and then dropping the oldest. */
static int series_store(zeus_power_monitor *pm, series *s, double t, unsigned v) {
  if (s->n == s->cap && s->cap < pm->max) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    if (cap > pm->max) cap = pm->max;
    double *nt = malloc(cap * sizeof *nt);
    unsigned *nv = malloc(cap * sizeof *nv);
    if (!nt || !nv) {
      free(nt);
      free(nv);
      return zeus__oom("storing a power sample");
    }
    for (size_t i = 0; i < s->n; i++) {
      size_t k = (s->head + i) % s->cap;
      nt[i] = s->t[k];
      nv[i] = s->v[k];
    }
    free(s->t);
    free(s->v);
    s->t = nt;
    s->v = nv;
    s->cap = cap;
    s->head = 0;
  }
  if (s->n == s->cap) { /* full at the bound: drop the oldest */
    s->head = (s->head + 1) % s->cap;
    s->n--;
    pm->stats.dropped++;
  }
  size_t k = (s->head + s->n) % s->cap;
  s->t[k] = t;
  s->v[k] = v;
  s->n++;
  return ZEUS_OK;
}

/* Adds one poll. Called with store_mu held. */
static int series_poll(zeus_power_monitor *pm, series *s, double t, unsigned v) {
  size_t cnt = series_count(s);
  if (cnt == 0) return series_store(pm, s, t, v);
  if (t <= series_time(s, cnt - 1)) return ZEUS_OK; /* the clock did not move: keep the first reading */
  if (!pm->dedup) return series_store(pm, s, t, v);
  unsigned last_v = s->v[(s->head + s->n - 1) % s->cap];
  if (v == last_v) { /* the run goes on: remember its latest poll */
    s->pending = true;
    s->pt = t;
    s->pv = v;
    return ZEUS_OK;
  }
  int rc = ZEUS_OK;
  if (s->pending) {
    s->pending = false;
    rc = series_store(pm, s, s->pt, s->pv);
  }
  if (!rc) rc = series_store(pm, s, t, v);
  return rc;
}

static void series_free(series *s) {
  free(s->t);
  free(s->v);
  memset(s, 0, sizeof *s);
}

/* First logical index whose time is >= t (count when none). */
static size_t lower_bound(const series *s, double t) {
  size_t lo = 0, hi = series_count(s);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (series_time(s, mid) < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* First logical index whose time is > t. */
static size_t upper_bound(const series *s, double t) {
  size_t lo = 0, hi = series_count(s);
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (series_time(s, mid) <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* ---- time ---- */

double zeus_power_monitor_now(const zeus_power_monitor *pm) {
  if (!pm) return NAN;
  double t = zeus_devices_now(pm->dev);
  return pm->epoch ? pm->wall0 + (t - pm->dev0) : t;
}

/* ---- sampling ---- */

/* One pass over the power series (and the temperature series when `temp`). Returns the first
 * reading error; every reading is attempted. */
static int sample_pass(zeus_power_monitor *pm, bool power, bool temp) {
  unsigned pv[NDOMAINS][ZEUS_MAX_GPUS], tv[ZEUS_MAX_GPUS];
  int prc[NDOMAINS][ZEUS_MAX_GPUS], trc[ZEUS_MAX_GPUS];
  char perr[NDOMAINS][ZEUS_MAX_GPUS] = {{0}}, terr[ZEUS_MAX_GPUS] = {0};
  int first = ZEUS_OK;
  pthread_mutex_lock(&pm->sample_mu);
  double t = zeus_power_monitor_now(pm);
  for (unsigned d = 0; power && d < NDOMAINS; d++) {
    if (!(pm->domains & ZEUS_POWER_MONITOR_DOMAIN(d))) continue;
    for (unsigned k = 0; k < pm->ngpu; k++) {
      prc[d][k] = zeus_gpu_power(pm->dev, pm->gpu[k], (zeus_power_domain)d, &pv[d][k]);
      if (prc[d][k]) {
        perr[d][k] = 1;
        if (!first) first = prc[d][k];
        if (!pm->power[d][k].warned)
          zeus__log(ZEUS_LOG_WARN, "power_monitor", "GPU %u: reading the %s failed: %s (further failures of this "
                    "series are counted, not logged)", pm->gpu[k], domain_name(d), zeus_errmsg());
      }
    }
  }
  for (unsigned k = 0; temp && k < pm->ngpu; k++) {
    trc[k] = zeus_gpu_temperature(pm->dev, pm->gpu[k], &tv[k]);
    if (trc[k]) {
      terr[k] = 1;
      if (!first) first = trc[k];
      if (!pm->temp[k].warned)
        zeus__log(ZEUS_LOG_WARN, "power_monitor", "GPU %u: reading the temperature failed: %s (further failures "
                  "of this series are counted, not logged)", pm->gpu[k], zeus_errmsg());
    }
  }
  int store_rc = ZEUS_OK;
  pthread_mutex_lock(&pm->store_mu);
  pm->stats.polls++;
  for (unsigned d = 0; power && d < NDOMAINS; d++) {
    if (!(pm->domains & ZEUS_POWER_MONITOR_DOMAIN(d))) continue;
    for (unsigned k = 0; k < pm->ngpu; k++) {
      series *s = &pm->power[d][k];
      if (perr[d][k]) {
        pm->stats.errors++;
        s->warned = true;
      } else if (pv[d][k] == 0) {
        pm->stats.zero_readings++;
      } else if (!store_rc) {
        store_rc = series_poll(pm, s, t, pv[d][k]);
      }
    }
  }
  for (unsigned k = 0; temp && k < pm->ngpu; k++) {
    if (terr[k]) {
      pm->stats.errors++;
      pm->temp[k].warned = true;
    } else if (!store_rc) {
      store_rc = series_poll(pm, &pm->temp[k], t, tv[k]);
    }
  }
  pthread_mutex_unlock(&pm->store_mu);
  pthread_mutex_unlock(&pm->sample_mu);
  return first ? first : store_rc;
}

int zeus_power_monitor_sample(zeus_power_monitor *pm) {
  if (!pm) return zeus__error(ZEUS_EINVAL, "zeus_power_monitor_sample: the monitor is NULL");
  return sample_pass(pm, pm->domains != 0, pm->temperature);
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct timespec abs_time(double t) {
  struct timespec ts;
  ts.tv_sec = (time_t)floor(t);
  ts.tv_nsec = (long)((t - floor(t)) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

/* Advances a deadline past `now` by whole periods (polls that a slow pass missed are skipped,
 * not made up for in a burst). */
static double next_deadline(double deadline, double period, double now) {
  deadline += period;
  if (deadline <= now) deadline += period * ceil((now - deadline) / period + 1e-9);
  return deadline;
}

static void *sampler_main(void *arg) {
  zeus_power_monitor *pm = arg;
  double now = mono_now();
  double next_p = pm->domains ? now + pm->period : INFINITY;
  double next_t = pm->temperature ? now + pm->tperiod : INFINITY;
  pthread_mutex_lock(&pm->thr_mu);
  while (!pm->stop) {
    double due = next_p < next_t ? next_p : next_t;
    struct timespec ts = abs_time(due);
    while (!pm->stop && mono_now() < due) {
      int rc = pthread_cond_timedwait(&pm->thr_cv, &pm->thr_mu, &ts);
      if (rc == ETIMEDOUT) break;
    }
    if (pm->stop) break;
    pthread_mutex_unlock(&pm->thr_mu);
    now = mono_now();
    bool do_p = now >= next_p, do_t = now >= next_t;
    if (do_p || do_t) sample_pass(pm, do_p, do_t);
    now = mono_now();
    if (do_p) next_p = next_deadline(next_p, pm->period, now);
    if (do_t) next_t = next_deadline(next_t, pm->tperiod, now);
    pthread_mutex_lock(&pm->thr_mu);
  }
  pthread_mutex_unlock(&pm->thr_mu);
  return NULL;
}

/* ---- open / close ---- */

static int check_period(const char *name, double v, double *out, double def) {
  if (v == 0) {
    *out = def;
    return ZEUS_OK;
  }
  if (!(v >= PERIOD_MIN && v <= PERIOD_MAX))
    return zeus__error(ZEUS_EINVAL, "power monitor: %s %g s is outside [%g, %g] s", name, v, PERIOD_MIN, PERIOD_MAX);
  *out = v;
  return ZEUS_OK;
}

/* Decides the sampled domains: the requested ones (each readable on every GPU) or, for 0, every
 * domain all GPUs can read. */
static int choose_domains(zeus_power_monitor *pm, unsigned requested) {
  if (requested & ZEUS_POWER_MONITOR_NO_POWER) {
    if (requested & ~ZEUS_POWER_MONITOR_NO_POWER)
      return zeus__error(ZEUS_EINVAL, "power monitor: domains 0x%x combines NO_POWER with power domains", requested);
    pm->domains = 0;
    return ZEUS_OK;
  }
  if (requested & ~ZEUS_POWER_MONITOR_ALL_DOMAINS)
    return zeus__error(ZEUS_EINVAL, "power monitor: domains 0x%x has unknown bits (known: 0x%x)", requested,
                       ZEUS_POWER_MONITOR_ALL_DOMAINS);
  bool autodetect = requested == 0;
  unsigned want = autodetect ? ZEUS_POWER_MONITOR_ALL_DOMAINS : requested;
  pm->domains = 0;
  for (unsigned d = 0; d < NDOMAINS; d++) {
    if (!(want & ZEUS_POWER_MONITOR_DOMAIN(d))) continue;
    bool ok = true;
    for (unsigned k = 0; k < pm->ngpu && ok; k++) {
      unsigned mw;
      int rc = zeus_gpu_power(pm->dev, pm->gpu[k], (zeus_power_domain)d, &mw);
      if (rc == ZEUS_ENOTSUP && autodetect) {
        ok = false;
      } else if (rc == ZEUS_ENOTSUP) {
        return zeus__error(ZEUS_ENOTSUP, "power monitor: GPU %u cannot read its %s (backend %s)", pm->gpu[k],
                           domain_name(d), zeus_devices_backend(pm->dev));
      } else if (rc) {
        return zeus__error_ctx(rc, "power monitor: GPU %u, %s", pm->gpu[k], domain_name(d));
      }
    }
    if (ok) pm->domains |= ZEUS_POWER_MONITOR_DOMAIN(d);
  }
  if (!pm->domains)
    return zeus__error(ZEUS_ENOTSUP, "power monitor: the GPUs (backend %s) share no readable power domain",
                       zeus_devices_backend(pm->dev));
  return ZEUS_OK;
}

int zeus_power_monitor_open(zeus_power_monitor **out, const zeus_power_monitor_opts *opts) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_power_monitor_open: out is required");
  zeus_power_monitor_opts o = opts ? *opts : (zeus_power_monitor_opts){0};
  zeus_devices *dev = o.devices;
  int rc;
  if (!dev && (rc = zeus_devices_default(&dev))) return rc;
  double period = 0.1, tperiod = 0;
  if ((rc = check_period("period_s", o.period_s, &period, 0.1))) return rc;
  if (o.temperature_period_s < 0 || isnan(o.temperature_period_s))
    return zeus__error(ZEUS_EINVAL, "power monitor: temperature_period_s %g is negative (0: no temperature)",
                       o.temperature_period_s);
  if (o.temperature_period_s > 0 && (rc = check_period("temperature_period_s", o.temperature_period_s, &tperiod, 1)))
    return rc;
  if (o.max_samples == 1)
    return zeus__error(ZEUS_EINVAL, "power monitor: max_samples 1 is too small (at least 2, or 0 for the default)");
  zeus_power_monitor *pm = calloc(1, sizeof *pm);
  if (!pm) return zeus__oom("opening a power monitor");
  pm->dev = dev;
  pm->period = period;
  pm->tperiod = tperiod;
  pm->temperature = tperiod > 0;
  pm->max = o.max_samples ? o.max_samples : ZEUS_POWER_MONITOR_DEFAULT_MAX_SAMPLES;
  pm->dedup = o.dedup;
  pm->epoch = o.epoch_time;
  pthread_mutex_init(&pm->sample_mu, NULL);
  pthread_mutex_init(&pm->store_mu, NULL);
  pthread_mutex_init(&pm->thr_mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&pm->thr_cv, &ca);
  pthread_condattr_destroy(&ca);
  pm->dev0 = zeus_devices_now(dev);
  pm->wall0 = zeus_wall_s();

  unsigned visible = zeus_gpu_count(dev);
  if (o.gpu_indices) {
    if (o.num_gpu_indices > ZEUS_MAX_GPUS) {
      rc = zeus__error(ZEUS_EINVAL, "power monitor: %zu GPU indices given, at most %d", o.num_gpu_indices,
                       ZEUS_MAX_GPUS);
      goto fail;
    }
    for (size_t i = 0; i < o.num_gpu_indices; i++) {
      unsigned g = o.gpu_indices[i];
      if (g >= visible) {
        rc = zeus__error(ZEUS_ENOENT, "power monitor: GPU %u does not exist (%u visible GPU%s on backend %s)", g,
                         visible, visible == 1 ? "" : "s", zeus_devices_backend(dev));
        goto fail;
      }
      for (size_t j = 0; j < i; j++)
        if (o.gpu_indices[j] == g) {
          rc = zeus__error(ZEUS_EINVAL, "power monitor: GPU %u is listed twice", g);
          goto fail;
        }
      pm->gpu[pm->ngpu++] = g;
    }
  } else {
    for (unsigned g = 0; g < visible && g < ZEUS_MAX_GPUS; g++) pm->gpu[pm->ngpu++] = g;
  }
  if (pm->ngpu == 0) {
    rc = zeus__error(ZEUS_EINVAL, "power monitor: no GPU to sample (%u visible on backend %s)", visible,
                     zeus_devices_backend(dev));
    goto fail;
  }
  if ((rc = choose_domains(pm, o.domains))) goto fail;
  if (!pm->domains && !pm->temperature) {
    rc = zeus__error(ZEUS_EINVAL, "power monitor: nothing to sample (NO_POWER without temperature_period_s)");
    goto fail;
  }
  if (pm->temperature) {
    for (unsigned k = 0; k < pm->ngpu; k++) {
      unsigned c;
      rc = zeus_gpu_temperature(dev, pm->gpu[k], &c);
      if (rc == ZEUS_ENOTSUP) {
        rc = zeus__error(ZEUS_ENOTSUP, "power monitor: GPU %u cannot read its temperature (backend %s)", pm->gpu[k],
                         zeus_devices_backend(dev));
      }
      if (rc) goto fail;
    }
  }
  if ((rc = zeus_power_monitor_sample(pm))) {
    zeus__error_ctx(rc, "power monitor: the first sample");
    goto fail;
  }
  if (!o.no_thread) {
    if (pthread_create(&pm->thread, NULL, sampler_main, pm) != 0) {
      rc = zeus__error(ZEUS_EINTERNAL, "power monitor: cannot start the sampling thread");
      goto fail;
    }
    pm->running = true;
  }
  zeus__log(ZEUS_LOG_DEBUG, "power_monitor", "sampling %u GPU(s), domains 0x%x every %g s%s", pm->ngpu, pm->domains,
            pm->period, pm->temperature ? ", temperature too" : "");
  *out = pm;
  return ZEUS_OK;
fail:
  zeus_power_monitor_close(pm);
  return rc;
}

void zeus_power_monitor_stop(zeus_power_monitor *pm) {
  if (!pm) return;
  pthread_mutex_lock(&pm->thr_mu);
  bool join = pm->running;
  pm->stop = true;
  pm->running = false;
  pthread_cond_broadcast(&pm->thr_cv);
  pthread_mutex_unlock(&pm->thr_mu);
  if (join) pthread_join(pm->thread, NULL);
}

bool zeus_power_monitor_running(const zeus_power_monitor *pm) {
  if (!pm) return false;
  pthread_mutex_lock((pthread_mutex_t *)&pm->thr_mu);
  bool r = pm->running;
  pthread_mutex_unlock((pthread_mutex_t *)&pm->thr_mu);
  return r;
}

void zeus_power_monitor_close(zeus_power_monitor *pm) {
  if (!pm) return;
  zeus_power_monitor_stop(pm);
  for (unsigned d = 0; d < NDOMAINS; d++)
    for (unsigned k = 0; k < ZEUS_MAX_GPUS; k++) series_free(&pm->power[d][k]);
  for (unsigned k = 0; k < ZEUS_MAX_GPUS; k++) series_free(&pm->temp[k]);
  pthread_cond_destroy(&pm->thr_cv);
  pthread_mutex_destroy(&pm->thr_mu);
  pthread_mutex_destroy(&pm->store_mu);
  pthread_mutex_destroy(&pm->sample_mu);
  free(pm);
}

/* ---- what it samples ---- */

unsigned zeus_power_monitor_num_gpus(const zeus_power_monitor *pm) { return pm ? pm->ngpu : 0; }
unsigned zeus_power_monitor_gpu_index(const zeus_power_monitor *pm, unsigned k) {
  return pm && k < pm->ngpu ? pm->gpu[k] : 0;
}
unsigned zeus_power_monitor_domains(const zeus_power_monitor *pm) { return pm ? pm->domains : 0; }
bool zeus_power_monitor_has_temperature(const zeus_power_monitor *pm) { return pm && pm->temperature; }
double zeus_power_monitor_period(const zeus_power_monitor *pm) { return pm ? pm->period : 0; }
double zeus_power_monitor_temperature_period(const zeus_power_monitor *pm) { return pm ? pm->tperiod : 0; }

void zeus_power_monitor_get_stats(zeus_power_monitor *pm, zeus_power_monitor_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!pm) return;
  pthread_mutex_lock(&pm->store_mu);
  *out = pm->stats;
  pthread_mutex_unlock(&pm->store_mu);
}

/* ---- queries ---- */

/* The series of (domain, visible GPU), or an error naming what is not sampled. */
static int find_series(zeus_power_monitor *pm, int domain, unsigned gpu, series **out) {
  if (!pm) return zeus__error(ZEUS_EINVAL, "power monitor: the monitor is NULL");
  unsigned k = 0;
  while (k < pm->ngpu && pm->gpu[k] != gpu) k++;
  if (k == pm->ngpu) {
    zeus__buf b = {0};
    for (unsigned i = 0; i < pm->ngpu; i++) zeus__buf_printf(&b, "%s%u", i ? ", " : "", pm->gpu[i]);
    int rc = zeus__error(ZEUS_ENOENT, "power monitor: GPU %u is not sampled (sampled: %s)", gpu, b.data ? b.data : "none");
    zeus__buf_free(&b);
    return rc;
  }
  if (domain < 0) {
    if (!pm->temperature) return zeus__error(ZEUS_ENOTSUP, "power monitor: temperature is not sampled");
    *out = &pm->temp[k];
    return ZEUS_OK;
  }
  if (domain >= NDOMAINS) return zeus__error(ZEUS_EINVAL, "power monitor: unknown power domain %d", domain);
  if (!(pm->domains & ZEUS_POWER_MONITOR_DOMAIN(domain)))
    return zeus__error(ZEUS_ENOTSUP, "power monitor: the %s is not sampled (domains 0x%x)", domain_name((unsigned)domain),
                       pm->domains);
  *out = &pm->power[domain][k];
  return ZEUS_OK;
}

static int check_range(double start, double end) {
  if (isnan(start) || isnan(end) || start > end)
    return zeus__error(ZEUS_EINVAL, "power monitor: time range [%g, %g] is empty or not a number", start, end);
  return ZEUS_OK;
}

/* Copies the points of a series within [start, end] into parallel arrays (malloc'd). */
static int copy_range(zeus_power_monitor *pm, int domain, unsigned gpu, double start, double end, double **ts,
                      unsigned **vs, size_t *n) {
  *ts = NULL;
  *vs = NULL;
  *n = 0;
  series *s;
  int rc = check_range(start, end);
  if (!rc) rc = find_series(pm, domain, gpu, &s);
  if (rc) return rc;
  pthread_mutex_lock(&pm->store_mu);
  size_t i0 = lower_bound(s, start), i1 = upper_bound(s, end);
  size_t cnt = i1 > i0 ? i1 - i0 : 0;
  if (cnt) {
    *ts = malloc(cnt * sizeof **ts);
    *vs = malloc(cnt * sizeof **vs);
    if (!*ts || !*vs) {
      pthread_mutex_unlock(&pm->store_mu);
      free(*ts);
      free(*vs);
      *ts = NULL;
      *vs = NULL;
      return zeus__oom("copying a power timeline");
    }
    for (size_t i = 0; i < cnt; i++) series_get(s, i0 + i, &(*ts)[i], &(*vs)[i]);
  }
  pthread_mutex_unlock(&pm->store_mu);
  *n = cnt;
  return ZEUS_OK;
}

int zeus_power_monitor_timeline(zeus_power_monitor *pm, zeus_power_domain domain, unsigned gpu, double start_s,
                                double end_s, zeus_power_sample **out, size_t *n) {
  if (!out || !n) return zeus__error(ZEUS_EINVAL, "zeus_power_monitor_timeline: out and n are required");
  double *ts;
  unsigned *vs;
  size_t cnt;
  int rc = copy_range(pm, (int)domain, gpu, start_s, end_s, &ts, &vs, &cnt);
  if (rc) return rc;
  zeus_power_sample *r = NULL;
  if (cnt && !(r = malloc(cnt * sizeof *r))) rc = zeus__oom("copying a power timeline");
  for (size_t i = 0; r && i < cnt; i++) r[i] = (zeus_power_sample){ts[i], vs[i]};
  free(ts);
  free(vs);
  if (rc) return rc;
  *out = r;
  *n = cnt;
  return ZEUS_OK;
}

int zeus_power_monitor_temperature_timeline(zeus_power_monitor *pm, unsigned gpu, double start_s, double end_s,
                                            zeus_temperature_sample **out, size_t *n) {
  if (!out || !n) return zeus__error(ZEUS_EINVAL, "zeus_power_monitor_temperature_timeline: out and n are required");
  double *ts;
  unsigned *vs;
  size_t cnt;
  int rc = copy_range(pm, -1, gpu, start_s, end_s, &ts, &vs, &cnt);
  if (rc) return rc;
  zeus_temperature_sample *r = NULL;
  if (cnt && !(r = malloc(cnt * sizeof *r))) rc = zeus__oom("copying a temperature timeline");
  for (size_t i = 0; r && i < cnt; i++) r[i] = (zeus_temperature_sample){ts[i], vs[i]};
  free(ts);
  free(vs);
  if (rc) return rc;
  *out = r;
  *n = cnt;
  return ZEUS_OK;
}

static double lerp(double t0, double v0, double t1, double v1, double t) {
  return t1 > t0 ? v0 + (v1 - v0) * (t - t0) / (t1 - t0) : v0;
}

int zeus_power_monitor_energy(zeus_power_monitor *pm, zeus_power_domain domain, unsigned gpu, double start_s,
                              double end_s, zeus_power_energy *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_power_monitor_energy: out is required");
  series *s;
  int rc = check_range(start_s, end_s);
  if (!rc) rc = find_series(pm, (int)domain, gpu, &s);
  if (rc) return rc;
  pthread_mutex_lock(&pm->store_mu);
  size_t cnt = series_count(s);
  size_t i0 = lower_bound(s, start_s), i1 = upper_bound(s, end_s); /* inside: [i0, i1) */
  zeus_power_energy r = {0};
  r.samples = i1 > i0 ? i1 - i0 : 0;
  double pt = 0, pv = 0; /* previous point of the integrand */
  size_t npts = 0;
  double t, ta, tb;
  unsigned v, va, vb;
#define ADD_POINT(tt, vv)                                              \
  do {                                                                 \
    double t_ = (tt), v_ = (vv);                                       \
    if (npts == 0) r.start_s = t_;                                     \
    else r.energy_j += 0.5 * (pv + v_) * (t_ - pt) / 1000.0;           \
    pt = t_;                                                           \
    pv = v_;                                                           \
    npts++;                                                            \
  } while (0)
  if (i0 > 0 && i0 < cnt && isfinite(start_s)) { /* a point on each side of start: interpolate */
    series_get(s, i0 - 1, &ta, &va);
    series_get(s, i0, &tb, &vb);
    if (tb > start_s) ADD_POINT(start_s, lerp(ta, va, tb, vb, start_s));
  }
  for (size_t i = i0; i < i1; i++) {
    series_get(s, i, &t, &v);
    ADD_POINT(t, v);
  }
  if (i1 > 0 && i1 < cnt && isfinite(end_s)) { /* a point on each side of end */
    series_get(s, i1 - 1, &ta, &va);
    series_get(s, i1, &tb, &vb);
    if (end_s > ta && (npts == 0 || end_s > pt)) ADD_POINT(end_s, lerp(ta, va, tb, vb, end_s));
  }
#undef ADD_POINT
  pthread_mutex_unlock(&pm->store_mu);
  if (npts == 0)
    return zeus__error(ZEUS_ENOENT, "power monitor: no %s sample of GPU %u in or around [%.9g, %.9g]",
                       domain_name(domain), gpu, start_s, end_s);
  r.end_s = pt;
  r.covered_s = r.end_s - r.start_s;
  r.mean_power_w = r.covered_s > 0 ? r.energy_j / r.covered_s : pv / 1000.0;
  *out = r;
  return ZEUS_OK;
}

/* The logical index of the point nearest to t (earlier on a tie; NaN: the latest). */
static int nearest(zeus_power_monitor *pm, series *s, double time_s, double *t, unsigned *v, const char *what,
                   unsigned gpu) {
  pthread_mutex_lock(&pm->store_mu);
  size_t cnt = series_count(s);
  if (cnt == 0) {
    pthread_mutex_unlock(&pm->store_mu);
    return zeus__error(ZEUS_ENOENT, "power monitor: no %s sample of GPU %u yet", what, gpu);
  }
  size_t i;
  if (isnan(time_s)) {
    i = cnt - 1;
  } else {
    size_t pos = lower_bound(s, time_s);
    if (pos == 0) i = 0;
    else if (pos == cnt) i = cnt - 1;
    else i = time_s - series_time(s, pos - 1) <= series_time(s, pos) - time_s ? pos - 1 : pos;
  }
  series_get(s, i, t, v);
  pthread_mutex_unlock(&pm->store_mu);
  return ZEUS_OK;
}

int zeus_power_monitor_power_at(zeus_power_monitor *pm, zeus_power_domain domain, unsigned gpu, double time_s,
                                zeus_power_sample *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_power_monitor_power_at: out is required");
  series *s;
  int rc = find_series(pm, (int)domain, gpu, &s);
  if (!rc) rc = nearest(pm, s, time_s, &out->time_s, &out->power_mw, domain_name(domain), gpu);
  return rc;
}

int zeus_power_monitor_temperature_at(zeus_power_monitor *pm, unsigned gpu, double time_s,
                                      zeus_temperature_sample *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_power_monitor_temperature_at: out is required");
  series *s;
  int rc = find_series(pm, -1, gpu, &s);
  if (!rc) rc = nearest(pm, s, time_s, &out->time_s, &out->celsius, "temperature", gpu);
  return rc;
}
