/* Measurement windows over GPUs (energy counters or integrated power) and CPU packages (RAPL).
 *
 * Every GPU exposes one "energy reading" in J: its counter, or for polled GPUs the running
 * trapezoidal integral of sampled power. A window stores the readings at its start; its energy
 * is the difference at its end. Polled GPUs are sampled by a thread and at every window bound.
 * GPUs whose counter is slow and coarse may instead be followed by the tick follower
 * (monitor/sampler.h): their reading is its estimate, and no device is read at a bound. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "core/csv.h"
#include "device/rapl.h"
#include "monitor/sampler.h"
#include "zeus/format.h"
#include "zeus/monitor.h"
#include "zeus/soc.h"

typedef struct polled {
  bool have;      /* a sample was taken */
  double t, p_w;  /* last sample */
  double e_j;     /* integral up to t */
} polled;

/* The readings at one instant, as the sources count them: counters in integers (GPU energy
 * counters in mJ, RAPL zones in uJ), so that a window's energy is a difference of integers
 * converted once (zeus/format.h); polled GPUs as their integral in J. */
typedef struct readings {
  uint64_t gpu_mj[ZEUS_MAX_GPUS];
  double gpu_j[ZEUS_MAX_GPUS]; /* polled GPUs: their integral; sampled GPUs: the estimate (gpu_mj: the
                                  counter at the last tick, gpu_bound: the estimate's error bound) */
  double gpu_bound[ZEUS_MAX_GPUS];
  uint64_t cpu_uj[ZEUS_MAX_CPUS], dram_uj[ZEUS_MAX_CPUS];
  double soc_j[ZEUS_SOC_NUM_RAILS]; /* the SoC rails' integrals */
} readings;

typedef struct window {
  char *key;
  uint64_t hash;
  double t0;
  readings at0;
} window;

struct zeus_monitor {
  zeus_devices *dev;
  pthread_mutex_t mu;
  unsigned ngpu, gpu[ZEUS_MAX_GPUS];
  bool is_polled[ZEUS_MAX_GPUS];
  bool is_sampled[ZEUS_MAX_GPUS];
  unsigned sampled_k[ZEUS_MAX_GPUS]; /* entry k's index in the sampler */
  zeus__sampler *sampler;
  polled poll[ZEUS_MAX_GPUS];
  unsigned npolled;
  zeus__rapl *rapl; /* the RAPL zones, scanned once at open; NULL when no CPU is measured */
  unsigned ncpu, cpu[ZEUS_MAX_CPUS];
  bool has_dram[ZEUS_MAX_CPUS];
  uint64_t cpu_range_uj[ZEUS_MAX_CPUS], dram_range_uj[ZEUS_MAX_CPUS];
  zeus_soc *soc;                        /* a Jetson's rails, or NULL */
  polled soc_poll[ZEUS_SOC_NUM_RAILS];  /* their integrals, on the monotonic clock */
  bool approx;
  bool quiet_short;
  int (*end_hook)(void *ctx, const char *key, zeus_measurement *m);
  void *end_hook_ctx;
  window *win;
  size_t nwin, capwin;
  FILE *log;
  /* polling thread */
  pthread_t thread;
  bool thread_running, stop;
  unsigned fork_gen; /* zeus__fork_generation() when the threads started */
  pthread_cond_t cv;
  double interval;
};

static uint64_t hash_key(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static window *find(zeus_monitor *m, const char *key, uint64_t h) {
  for (size_t i = 0; i < m->nwin; i++)
    if (m->win[i].hash == h && strcmp(m->win[i].key, key) == 0) return &m->win[i];
  return NULL;
}

/* Extends an integral of power with a sample of w watts at time t (trapezoids). */
static void integrate(polled *p, double t, double w) {
  if (p->have && t > p->t) p->e_j += 0.5 * (p->p_w + w) * (t - p->t);
  if (!p->have || t >= p->t) {
    p->t = t;
    p->have = true;
  }
  p->p_w = w;
}

/* Samples power of polled GPU k and extends its integral. Called with m->mu held. */
static int sample(zeus_monitor *m, unsigned k, double t) {
  unsigned mw;
  int rc = zeus_gpu_instant_power(m->dev, m->gpu[k], &mw);
  if (rc) return rc;
  integrate(&m->poll[k], t, mw / 1000.0);
  return ZEUS_OK;
}

/* Samples every SoC rail at the monotonic time now and extends their integrals. Rails have no
 * energy counter: like a GPU without one, their energy is the integral of sampled power. All
 * rails are read before any integral moves, so that a failed read leaves them all as they were.
 * Called with m->mu held. */
static int sample_soc(zeus_monitor *m) {
  double t = zeus_monotonic_s(), mw[ZEUS_SOC_NUM_RAILS] = {0};
  for (int r = 0; r < ZEUS_SOC_NUM_RAILS; r++) {
    if (!zeus_soc_has_rail(m->soc, (zeus_soc_rail)r)) continue;
    int rc = zeus_soc_power(m->soc, (zeus_soc_rail)r, &mw[r]);
    if (rc) return rc;
  }
  for (int r = 0; r < ZEUS_SOC_NUM_RAILS; r++)
    if (zeus_soc_has_rail(m->soc, (zeus_soc_rail)r)) integrate(&m->soc_poll[r], t, mw[r] / 1000.0);
  return ZEUS_OK;
}

/* The energy reading of every GPU and CPU now. Called with m->mu held. */
static int read_all(zeus_monitor *m, double t, readings *out) {
  int rc;
  for (unsigned k = 0; k < m->ngpu; k++) {
    if (m->is_sampled[k]) {
      zeus__sampler_energy e;
      if ((rc = zeus__sampler_energy_at(m->sampler, m->sampled_k[k], t, &e))) return rc;
      out->gpu_j[k] = e.energy_j;
      out->gpu_mj[k] = e.raw_j > 0 ? (uint64_t)llround(e.raw_j * 1000.0) : 0;
      out->gpu_bound[k] = e.bound_j;
    } else if (m->is_polled[k]) {
      if ((rc = sample(m, k, t))) return rc;
      out->gpu_j[k] = m->poll[k].e_j;
    } else if ((rc = zeus_gpu_total_energy(m->dev, m->gpu[k], &out->gpu_mj[k]))) {
      return rc;
    }
  }
  for (unsigned c = 0; c < m->ncpu; c++) {
    uint64_t dr = 0;
    if ((rc = zeus__rapl_read(m->rapl, m->cpu[c], &out->cpu_uj[c], &dr))) return rc;
    out->dram_uj[c] = dr;
  }
  if (m->soc) {
    if ((rc = sample_soc(m))) return rc;
    for (int r = 0; r < ZEUS_SOC_NUM_RAILS; r++) out->soc_j[r] = m->soc_poll[r].e_j;
  }
  return ZEUS_OK;
}

static void *poll_main(void *arg) {
  zeus_monitor *m = arg;
  pthread_mutex_lock(&m->mu);
  while (!m->stop) {
    double t = zeus_devices_now(m->dev);
    for (unsigned k = 0; k < m->ngpu; k++) {
      if (m->is_polled[k] && sample(m, k, t) != ZEUS_OK)
        zeus__log(ZEUS_LOG_WARN, "monitor", "power sample of GPU %u failed: %s", m->gpu[k], zeus_errmsg());
    }
    if (m->soc && sample_soc(m) != ZEUS_OK)
      zeus__log(ZEUS_LOG_WARN, "monitor", "power sample of the Jetson rails failed: %s", zeus_errmsg());
    struct timespec until = zeus__deadline_in(m->interval);
    while (!m->stop && zeus__cond_wait_until(&m->cv, &m->mu, &until) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&m->mu);
  return NULL;
}

/* Locks the monitor. In a process forked since the monitor opened, its threads stayed in the parent
 * (and may hold its lock or wait on its condition there): it first starts again with a new lock,
 * condition and polling thread; the sampler restarts itself at its next query. */
static void monitor_lock(zeus_monitor *m) {
  unsigned gen = zeus__fork_generation();
  if (gen != m->fork_gen) {
    m->fork_gen = gen;
    pthread_mutex_init(&m->mu, NULL);
    if (zeus__cond_init(&m->cv) != ZEUS_OK) m->thread_running = false;
    m->stop = false;
    if (m->thread_running && pthread_create(&m->thread, NULL, poll_main, m) != 0) {
      m->thread_running = false;
      zeus__log(ZEUS_LOG_WARN, "monitor", "cannot restart the power-polling thread in a forked process");
    }
  }
  pthread_mutex_lock(&m->mu);
}

static int write_header(zeus_monitor *m) {
  zeus__buf b = {0};
  int rc = zeus__buf_puts(&b, "start_time,window_name,elapsed_time");
  for (unsigned k = 0; !rc && k < m->ngpu; k++) {
    /* A superchip module's energy (Grace Hopper: CPU + memory + GPU) is named as the module's. */
    zeus_power_scope sc = ZEUS_POWER_SCOPE_GPU;
    bool module = zeus_gpu_power_scope(m->dev, m->gpu[k], &sc) == ZEUS_OK && sc == ZEUS_POWER_SCOPE_MODULE;
    rc = zeus__buf_printf(&b, module ? ",module%u_energy" : ",gpu%u_energy", m->gpu[k]);
  }
  for (unsigned c = 0; !rc && c < m->ncpu; c++) rc = zeus__buf_printf(&b, ",cpu%u_energy", m->cpu[c]);
  if (!rc) rc = zeus__buf_puts(&b, "\n");
  if (!rc) {
    fputs(b.data, m->log);
    fflush(m->log);
  }
  zeus__buf_free(&b);
  return rc;
}

/* Copies the indices the caller asked for into out[] after checking them: at most `max`, each
 * below `avail`, none twice. GPU indices come with their device set `dev` (named in errors);
 * CPU package indices with dev NULL. */
static int pick_indices(const unsigned *want, size_t n, unsigned avail, unsigned max, const zeus_devices *dev,
                        unsigned *out, unsigned *nout) {
  bool gpu = dev != NULL;
  const char *kind = gpu ? "GPU" : "CPU package";
  if (n > max)
    return zeus__error(ZEUS_EINVAL, "monitor: %zu %s indices given, at most %u", n, gpu ? "GPU" : "CPU", max);
  for (size_t i = 0; i < n; i++) {
    unsigned x = want[i];
    if (x >= avail && gpu)
      return zeus__error(ZEUS_ENOENT, "monitor: GPU %u does not exist (%u visible GPU%s on backend %s)", x, avail,
                         avail == 1 ? "" : "s", zeus_devices_backend(dev));
    if (x >= avail)
      return zeus__error(ZEUS_ENOENT,
                         "monitor: CPU package %u was asked for, but only %u package%s a readable RAPL energy "
                         "counter", x, avail, avail == 1 ? " has" : "s have");
    for (size_t j = 0; j < i; j++)
      if (want[j] == x) return zeus__error(ZEUS_EINVAL, "monitor: %s %u is listed twice", kind, x);
    out[(*nout)++] = x;
  }
  return ZEUS_OK;
}

void zeus_monitor_opts_init(zeus_monitor_opts *o) {
  memset(o, 0, sizeof *o);
  o->poll_interval_s = 0.05;
}

/* Whether reading GPU `gpu`'s counter costs 100 us or more of real time (the H100's 3.3 ms): the
 * quickest of up to three reads, so that a read that was preempted on a busy machine does not
 * make a fast counter look slow. */
static bool counter_is_slow(zeus_devices *dev, unsigned gpu) {
  for (int k = 0; k < 3; k++) {
    uint64_t mj;
    double r0 = zeus_monotonic_s();
    if (zeus_gpu_total_energy(dev, gpu, &mj) != ZEUS_OK) return false;
    if (zeus_monotonic_s() - r0 < 100e-6) return false;
  }
  return true;
}

/* Picks RAW or SAMPLED for each counter GPU and starts the sampler where needed. */
static int choose_sources(zeus_monitor *m, const zeus_monitor_opts *o) {
  int src = (int)o->energy_source;
  if (src < ZEUS_ENERGY_AUTO || src > ZEUS_ENERGY_SAMPLED)
    return zeus__error(ZEUS_EINVAL, "monitor: energy_source %d is not auto (0), raw (1) or sampled (2)", src);
  if (src == ZEUS_ENERGY_AUTO) {
    static const char *const names[] = {"auto", "raw", "sampled", NULL};
    int rc = zeus__env_choice("ZEUS_MONITOR_ENERGY", names, 0, &src);
    if (rc) return rc;
  }
  if (src == ZEUS_ENERGY_RAW) return ZEUS_OK;
  unsigned gpus[ZEUS_MAX_GPUS], n = 0;
  bool want[ZEUS_MAX_GPUS] = {false};
  for (unsigned k = 0; k < m->ngpu; k++) {
    if (m->is_polled[k]) continue;
    if (src == ZEUS_ENERGY_AUTO && !counter_is_slow(m->dev, m->gpu[k])) continue;
    want[k] = true;
    m->sampled_k[k] = n;
    gpus[n++] = m->gpu[k];
  }
  if (!n) return ZEUS_OK;
  int rc = zeus__sampler_open(&m->sampler, m->dev, gpus, n);
  if (rc && src == ZEUS_ENERGY_AUTO) { /* e.g. a virtual clock: the raw counter it is */
    zeus__log(ZEUS_LOG_DEBUG, "monitor", "no energy sampler: %s", zeus_errmsg());
    return ZEUS_OK;
  }
  if (rc) return rc;
  for (unsigned k = 0; k < m->ngpu; k++) m->is_sampled[k] = want[k];
  return ZEUS_OK;
}

int zeus_monitor_open(zeus_monitor **out, const zeus_monitor_opts *opts) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_monitor_open: out is required");
  zeus_monitor_opts o = opts ? *opts : (zeus_monitor_opts){0};
  zeus_devices *dev = o.devices;
  int rc;
  if (!dev && (rc = zeus_devices_default(&dev))) return rc;
  if (o.poll_interval_s < 0 || o.poll_interval_s > 60)
    return zeus__error(ZEUS_EINVAL, "monitor: poll_interval_s %g is outside [0, 60]", o.poll_interval_s);
  zeus_monitor *m = calloc(1, sizeof *m);
  if (m) m->fork_gen = zeus__fork_generation();
  if (!m) return zeus__oom("opening a monitor");
  m->dev = dev;
  m->approx = o.approx_instant_energy;
  m->quiet_short = o.no_short_window_warning;
  m->end_hook = o.end_hook;
  m->end_hook_ctx = o.end_hook_ctx;
  m->interval = o.poll_interval_s > 0 ? o.poll_interval_s : 0.05;
  pthread_mutex_init(&m->mu, NULL);
  if ((rc = zeus__cond_init(&m->cv))) {
    pthread_mutex_destroy(&m->mu);
    free(m);
    return rc;
  }
  unsigned visible = zeus_gpu_count(dev);
  if (o.gpu_indices) {
    if ((rc = pick_indices(o.gpu_indices, o.num_gpu_indices, visible, ZEUS_MAX_GPUS, dev, m->gpu, &m->ngpu)))
      goto fail;
  } else {
    for (unsigned g = 0; g < visible && g < ZEUS_MAX_GPUS; g++) m->gpu[m->ngpu++] = g;
  }
  for (unsigned k = 0; k < m->ngpu; k++) {
    bool counter = false;
    if ((rc = zeus_gpu_energy_counter_supported(dev, m->gpu[k], &counter))) goto fail;
    m->is_polled[k] = !counter || o.force_power_polling;
    if (m->is_polled[k]) m->npolled++;
  }
  bool want_cpus = !o.cpu_indices || o.num_cpu_indices > 0;
  if (want_cpus && (rc = zeus__rapl_open(&m->rapl))) goto fail;
  unsigned ncpu_avail = zeus__rapl_count(m->rapl);
  if (o.cpu_indices) {
    if (o.num_cpu_indices > 0 && ncpu_avail == 0) {
      rc = zeus__error(ZEUS_ENOENT, "monitor: CPU package %u was asked for, but %s", o.cpu_indices[0],
                       zeus__rapl_why(m->rapl));
      goto fail;
    }
    if ((rc = pick_indices(o.cpu_indices, o.num_cpu_indices, ncpu_avail, ZEUS_MAX_CPUS, NULL, m->cpu, &m->ncpu)))
      goto fail;
  } else {
    for (unsigned c = 0; c < ncpu_avail; c++) m->cpu[m->ncpu++] = c;
  }
  for (unsigned c = 0; c < m->ncpu; c++) {
    m->has_dram[c] = zeus__rapl_has_dram(m->rapl, m->cpu[c]);
    zeus__rapl_range(m->rapl, m->cpu[c], &m->cpu_range_uj[c], &m->dram_range_uj[c]);
  }
  if (o.log_file) {
    m->log = fopen(o.log_file, "a");
    if (!m->log) {
      rc = zeus__error(ZEUS_EIO, "monitor: cannot open the log file '%s': %s", o.log_file, strerror(errno));
      goto fail;
    }
    if (ftell(m->log) == 0 && (rc = write_header(m))) goto fail;
  }
  if ((rc = choose_sources(m, &o))) goto fail;
  /* A Jetson's rails, measured by themselves there and never elsewhere. A board whose rails
   * cannot be read is measured without them (a warning says why). */
  if (!o.no_soc && zeus_soc_jetson_available()) {
    if (zeus_soc_open(&m->soc) != ZEUS_OK) {
      zeus__log(ZEUS_LOG_WARN, "monitor", "this is a Jetson, but its power rails are not measured: %s",
                zeus_errmsg());
      m->soc = NULL;
    }
  }
  if (m->npolled || m->soc) {
    monitor_lock(m);
    double t = zeus_devices_now(dev);
    for (unsigned k = 0; k < m->ngpu; k++)
      if (m->is_polled[k] && (rc = sample(m, k, t))) break;
    if (!rc && m->soc) rc = sample_soc(m);
    pthread_mutex_unlock(&m->mu);
    if (rc) goto fail;
    if (pthread_create(&m->thread, NULL, poll_main, m) != 0) {
      rc = zeus__error(ZEUS_EINTERNAL, "monitor: cannot start the power-polling thread");
      goto fail;
    }
    m->thread_running = true;
  }
  if (want_cpus && m->ncpu == 0) zeus__log(ZEUS_LOG_DEBUG, "monitor", "no CPU package: %s", zeus__rapl_why(m->rapl));
  zeus__log(ZEUS_LOG_DEBUG, "monitor",
            "monitoring %u GPU(s) (%u by power polling every %g s), %u CPU package(s)%s", m->ngpu, m->npolled,
            m->interval, m->ncpu, m->soc ? " and the Jetson's power rails" : "");
  *out = m;
  return ZEUS_OK;
fail:
  zeus_monitor_close(m);
  return rc;
}

void zeus_monitor_close(zeus_monitor *m) {
  if (!m) return;
  monitor_lock(m); /* in a forked child: its own lock, condition and thread first */
  pthread_mutex_unlock(&m->mu);
  if (m->thread_running) {
    monitor_lock(m);
    m->stop = true;
    pthread_cond_signal(&m->cv);
    pthread_mutex_unlock(&m->mu);
    pthread_join(m->thread, NULL);
  }
  zeus__sampler_close(m->sampler);
  for (size_t i = 0; i < m->nwin; i++) free(m->win[i].key);
  free(m->win);
  zeus__rapl_close(m->rapl);
  zeus_soc_close(m->soc);
  if (m->log) fclose(m->log);
  pthread_cond_destroy(&m->cv);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

int zeus_monitor_begin_window(zeus_monitor *m, const char *key, bool restart) {
  if (!m || !key || !*key)
    return zeus__error(ZEUS_EINVAL, "begin_window: a monitor and a non-empty window name are required");
  uint64_t h = hash_key(key);
  int rc = ZEUS_OK;
  monitor_lock(m);
  window *w = find(m, key, h);
  if (w && !restart) {
    rc = zeus__error(ZEUS_EEXIST, "window '%s' is already open: end it first, or begin it with restart", key);
    goto out;
  }
  window fresh = {0};
  double t = zeus_devices_now(m->dev);
  fresh.t0 = t;
  if ((rc = read_all(m, t, &fresh.at0))) {
    zeus__error_ctx(rc, "begin_window '%s'", key);
    goto out;
  }
  if (w) { /* restart: keep the key, take new readings */
    fresh.key = w->key;
    fresh.hash = h;
    *w = fresh;
    goto out;
  }
  if ((rc = zeus__grow(&m->win, &m->capwin, m->nwin + 1, sizeof *m->win, "opening a window"))) goto out;
  if (!(fresh.key = strdup(key))) { rc = zeus__oom("opening a window"); goto out; }
  fresh.hash = h;
  m->win[m->nwin++] = fresh;
out:
  pthread_mutex_unlock(&m->mu);
  return rc;
}

/* Closes window w, keeping the others in the order they were begun. Called with m->mu held. */
static void remove_window(zeus_monitor *m, window *w) {
  size_t i = (size_t)(w - m->win);
  free(w->key);
  memmove(&m->win[i], &m->win[i + 1], (m->nwin - i - 1) * sizeof *m->win);
  m->nwin--;
}

/* The energy in J between two readings of a RAPL counter in uJ that wraps at range_uj. */
static double counter_delta(uint64_t end, uint64_t begin, uint64_t range_uj) {
  if (end >= begin) return zeus_joules_from_uj((int64_t)(end - begin));
  return zeus_joules_from_uj((int64_t)(end + range_uj - begin)); /* the counter wrapped around */
}

static void log_row(zeus_monitor *m, const window *w, const zeus_measurement *r) {
  zeus__buf b = {0};
  zeus__buf_printf(&b, "%.6f,", w->t0);
  zeus__csv_put_field(&b, w->key);
  /* The figures as measured (ns, mJ, uJ), in their shortest form (zeus/format.h). */
  char num[ZEUS_FORMAT_DOUBLE_MAX];
  zeus_format_double(r->time_s, num, sizeof num);
  zeus__buf_printf(&b, ",%s", num);
  for (unsigned k = 0; k < r->num_gpus; k++) {
    zeus_format_double(r->gpu_energy_j[k], num, sizeof num);
    zeus__buf_printf(&b, ",%s", num);
  }
  for (unsigned c = 0; c < r->num_cpus; c++) {
    zeus_format_double(r->cpu_energy_j[c], num, sizeof num);
    zeus__buf_printf(&b, ",%s", num);
  }
  zeus__buf_puts(&b, "\n");
  if (b.data && (fputs(b.data, m->log) < 0 || fflush(m->log) != 0))
    zeus__log(ZEUS_LOG_WARN, "monitor", "cannot append window '%s' to the log file: %s", w->key, strerror(errno));
  zeus__buf_free(&b);
}

int zeus_monitor_end_window(zeus_monitor *m, const char *key, bool cancel, zeus_measurement *out) {
  return zeus_monitor_end_window_detail(m, key, cancel, out, NULL);
}

int zeus_monitor_end_window_detail(zeus_monitor *m, const char *key, bool cancel, zeus_measurement *out,
                                   zeus_window_detail *detail) {
  if (!m || !key) return zeus__error(ZEUS_EINVAL, "end_window: a monitor and a window name are required");
  uint64_t h = hash_key(key);
  int rc = ZEUS_OK;
  monitor_lock(m);
  window *w = find(m, key, h);
  if (!w) {
    zeus__buf names = {0};
    for (size_t i = 0; i < m->nwin && i < 8; i++) zeus__buf_printf(&names, "%s'%s'", i ? ", " : "", m->win[i].key);
    rc = zeus__error(ZEUS_ENOENT, "no open window named '%s' (open: %s)", key, names.data ? names.data : "none");
    zeus__buf_free(&names);
    goto out;
  }
  if (!cancel) {
    double t = zeus_devices_now(m->dev);
    readings now;
    if ((rc = read_all(m, t, &now))) {
      zeus__error_ctx(rc, "end_window '%s'", key);
      goto out; /* the window stays open: the caller may retry or cancel */
    }
    zeus_measurement r;
    /* The clocks count ns: the time is a difference at that resolution. */
    r.time_s = zeus_round_decimals(t - w->t0, 9);
    r.start_time_s = w->t0;
    r.num_gpus = m->ngpu;
    r.num_cpus = m->ncpu;
    /* The total in mJ (GPU counters) plus uJ (RAPL), converted once; a polled GPU's integral is
     * rounded to the mJ first. */
    int64_t total_uj = 0;
    zeus_window_detail d;
    memset(&d, 0, sizeof d);
    d.num_gpus = m->ngpu;
    for (unsigned k = 0; k < m->ngpu; k++) {
      double e;
      if (m->is_sampled[k]) {
        /* the begin again, now that the tick after it may be known (after the fact) */
        double b0 = w->at0.gpu_j[k], bb0 = w->at0.gpu_bound[k];
        zeus__sampler_energy e0;
        if (zeus__sampler_energy_at(m->sampler, m->sampled_k[k], w->t0, &e0) == ZEUS_OK) {
          b0 = e0.energy_j;
          bb0 = e0.bound_j;
        }
        e = zeus_round_decimals(fmax(now.gpu_j[k] - b0, 0), 3);
        d.source[k] = ZEUS_ENERGY_SAMPLED;
        d.error_bound_j[k] = zeus_round_decimals(bb0 + now.gpu_bound[k], 3);
        d.raw_energy_j[k] = now.gpu_mj[k] >= w->at0.gpu_mj[k]
                                ? zeus_joules_from_mj((int64_t)(now.gpu_mj[k] - w->at0.gpu_mj[k])) : 0;
      } else if (m->is_polled[k]) {
        e = zeus_round_decimals(now.gpu_j[k] - w->at0.gpu_j[k], 3);
        d.source[k] = ZEUS_ENERGY_POLLED;
        d.raw_energy_j[k] = e;
      } else {
        e = zeus_joules_from_mj((int64_t)(now.gpu_mj[k] - w->at0.gpu_mj[k]));
        d.source[k] = ZEUS_ENERGY_RAW;
        d.raw_energy_j[k] = e;
      }
      if (!m->is_polled[k] && !m->is_sampled[k] && e == 0 && r.time_s > 0) {
        unsigned mw;
        if (m->approx && zeus_gpu_instant_power(m->dev, m->gpu[k], &mw) == ZEUS_OK) {
          e = zeus_round_decimals(mw / 1000.0 * r.time_s, 3);
        } else if (!m->quiet_short) {
          zeus__log(ZEUS_LOG_WARN, "monitor",
                    "window '%s' (%.3g s) was too short for GPU %u's energy counter to move; reporting 0 J "
                    "(enable approx_instant_energy to estimate it from power)",
                    key, r.time_s, m->gpu[k]);
        }
      }
      r.gpu_indices[k] = m->gpu[k];
      r.gpu_energy_j[k] = e;
      d.corrected_energy_j[k] = e;
      total_uj += llround(e * 1e3) * 1000;
    }
    for (unsigned c = 0; c < m->ncpu; c++) {
      r.cpu_indices[c] = m->cpu[c];
      r.cpu_energy_j[c] = counter_delta(now.cpu_uj[c], w->at0.cpu_uj[c], m->cpu_range_uj[c]);
      r.dram_valid[c] = m->has_dram[c];
      r.dram_energy_j[c] =
          m->has_dram[c] ? counter_delta(now.dram_uj[c], w->at0.dram_uj[c], m->dram_range_uj[c]) : 0;
      total_uj += llround(r.cpu_energy_j[c] * 1e6);
    }
    r.total_energy_j = zeus_joules_from_uj(total_uj);
    /* SoC rails: integrals of sampled power like a polled GPU's, rounded to the mJ. Not in the
     * total: the total rail already holds the CPU and GPU rails. */
    r.soc_valid = m->soc != NULL;
    for (int x = 0; x < ZEUS_SOC_NUM_RAILS; x++) {
      r.soc_rail_valid[x] = zeus_soc_has_rail(m->soc, (zeus_soc_rail)x);
      r.soc_energy_j[x] = r.soc_rail_valid[x] ? zeus_round_decimals(now.soc_j[x] - w->at0.soc_j[x], 3) : 0;
    }
    if (m->end_hook) {
      int hrc = m->end_hook(m->end_hook_ctx, key, &r);
      if (hrc < 0) {
        rc = zeus_errcode() == hrc ? hrc : zeus__error(hrc, "end_window '%s': the end hook failed", key);
        remove_window(m, w);
        goto out;
      }
    }
    if (m->log) log_row(m, w, &r);
    if (out) *out = r;
    if (detail) *detail = d;
  }
  remove_window(m, w);
out:
  pthread_mutex_unlock(&m->mu);
  return rc;
}

bool zeus_monitor_is_open(zeus_monitor *m, const char *key) {
  if (!m || !key) return false;
  monitor_lock(m);
  bool open = find(m, key, hash_key(key)) != NULL;
  pthread_mutex_unlock(&m->mu);
  return open;
}

unsigned zeus_monitor_num_gpus(const zeus_monitor *m) { return m ? m->ngpu : 0; }
unsigned zeus_monitor_gpu_index(const zeus_monitor *m, unsigned k) { return m && k < m->ngpu ? m->gpu[k] : 0; }
unsigned zeus_monitor_num_cpus(const zeus_monitor *m) { return m ? m->ncpu : 0; }
bool zeus_monitor_gpu_polled(const zeus_monitor *m, unsigned k) { return m && k < m->ngpu && m->is_polled[k]; }

zeus_energy_source zeus_monitor_gpu_energy_source(const zeus_monitor *m, unsigned k) {
  if (!m || k >= m->ngpu) return ZEUS_ENERGY_RAW;
  return m->is_sampled[k] ? ZEUS_ENERGY_SAMPLED : m->is_polled[k] ? ZEUS_ENERGY_POLLED : ZEUS_ENERGY_RAW;
}

int zeus_monitor_gpu_energy_now(zeus_monitor *m, unsigned k, double *joules) {
  if (!m || !joules || k >= m->ngpu)
    return zeus__error(ZEUS_EINVAL, "zeus_monitor_gpu_energy_now: a monitor, an entry below %u and out are required",
                       m ? m->ngpu : 0);
  int rc = ZEUS_OK;
  monitor_lock(m);
  double t = zeus_devices_now(m->dev);
  if (m->is_sampled[k]) {
    zeus__sampler_energy e;
    if (!(rc = zeus__sampler_energy_at(m->sampler, m->sampled_k[k], t, &e))) *joules = e.energy_j;
  } else if (m->is_polled[k]) {
    if (!(rc = sample(m, k, t))) *joules = m->poll[k].e_j;
  } else {
    uint64_t mj;
    if (!(rc = zeus_gpu_total_energy(m->dev, m->gpu[k], &mj))) *joules = mj / 1000.0;
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

double zeus_monitor_sampler_cpu_s(const zeus_monitor *m) { return m && m->sampler ? zeus__sampler_cpu_s(m->sampler) : 0; }
zeus_devices *zeus_monitor_devices(const zeus_monitor *m) { return m ? m->dev : NULL; }
zeus_soc *zeus_monitor_soc(const zeus_monitor *m) { return m ? m->soc : NULL; }

int zeus_monitor_soc_energy_now(zeus_monitor *m, zeus_soc_rail rail, double *joules) {
  if (!m || !joules || (unsigned)rail >= ZEUS_SOC_NUM_RAILS)
    return zeus__error(ZEUS_EINVAL, "zeus_monitor_soc_energy_now: a monitor, a rail 0..%d and out are required",
                       ZEUS_SOC_NUM_RAILS - 1);
  if (!zeus_soc_has_rail(m->soc, rail))
    return zeus__error(ZEUS_ENOTSUP, "the monitor measures no %s rail of an SoC%s", zeus_soc_rail_name(rail),
                       m->soc ? "" : " (no Jetson here)");
  monitor_lock(m);
  int rc = sample_soc(m);
  if (!rc) *joules = m->soc_poll[rail].e_j;
  pthread_mutex_unlock(&m->mu);
  return rc;
}

int zeus_monitor_window_state(zeus_monitor *m, const char *key, zeus_measurement *out) {
  if (!m || !key || !out) return zeus__error(ZEUS_EINVAL, "zeus_monitor_window_state: m, key and out are required");
  monitor_lock(m);
  window *w = find(m, key, hash_key(key));
  if (!w) {
    pthread_mutex_unlock(&m->mu);
    return zeus__error(ZEUS_ENOENT, "no open window named '%s'", key);
  }
  zeus_measurement r;
  memset(&r, 0, sizeof r);
  r.start_time_s = w->t0;
  r.time_s = zeus_round_decimals(zeus_devices_now(m->dev) - w->t0, 9);
  r.num_gpus = m->ngpu;
  r.num_cpus = m->ncpu;
  for (unsigned k = 0; k < m->ngpu; k++) {
    r.gpu_indices[k] = m->gpu[k];
    r.gpu_energy_j[k] = m->is_polled[k] || m->is_sampled[k] ? w->at0.gpu_j[k]
                                                             : zeus_joules_from_mj((int64_t)w->at0.gpu_mj[k]);
  }
  for (unsigned c = 0; c < m->ncpu; c++) {
    r.cpu_indices[c] = m->cpu[c];
    r.cpu_energy_j[c] = zeus_joules_from_uj((int64_t)w->at0.cpu_uj[c]);
    r.dram_valid[c] = m->has_dram[c];
    r.dram_energy_j[c] = m->has_dram[c] ? zeus_joules_from_uj((int64_t)w->at0.dram_uj[c]) : 0;
  }
  r.soc_valid = m->soc != NULL;
  for (int x = 0; x < ZEUS_SOC_NUM_RAILS; x++) {
    r.soc_rail_valid[x] = zeus_soc_has_rail(m->soc, (zeus_soc_rail)x);
    r.soc_energy_j[x] = r.soc_rail_valid[x] ? w->at0.soc_j[x] : 0;
  }
  pthread_mutex_unlock(&m->mu);
  *out = r;
  return ZEUS_OK;
}

size_t zeus_monitor_num_windows(zeus_monitor *m) {
  if (!m) return 0;
  monitor_lock(m);
  size_t n = m->nwin;
  pthread_mutex_unlock(&m->mu);
  return n;
}

int zeus_monitor_window_key(zeus_monitor *m, size_t i, char *buf, size_t len) {
  if (!m || !buf || len == 0) return zeus__error(ZEUS_EINVAL, "zeus_monitor_window_key: m and a buffer are required");
  monitor_lock(m);
  int rc = ZEUS_OK;
  if (i >= m->nwin) {
    rc = zeus__error(ZEUS_ENOENT, "window #%zu is not open (%zu open)", i, m->nwin);
  } else {
    size_t n = strlen(m->win[i].key);
    if (n >= len) rc = zeus__error(ZEUS_ERANGE, "window key of %zu bytes does not fit a buffer of %zu", n, len);
    else memcpy(buf, m->win[i].key, n + 1);
  }
  pthread_mutex_unlock(&m->mu);
  return rc;
}

void zeus_monitor_reset_windows(zeus_monitor *m) {
  if (!m) return;
  monitor_lock(m);
  for (size_t i = 0; i < m->nwin; i++) free(m->win[i].key);
  m->nwin = 0;
  pthread_mutex_unlock(&m->mu);
}
