/* Measurement windows in grams of CO2 or in money (zeus/grid.h): a thread fetches the grid's
 * factor and splits every open window's energy into segments at each fetch, each segment
 * multiplied by the factor fetched at its end.
 *
 * A segment's energy is taken after the fact. Where the monitor estimates energy between sensor
 * ticks (the tick followers of an H100 or H200), the energy at an instant is known better later,
 * once the tick after it is known: a window's begin is re-evaluated when the window ends, but its
 * end is the estimate of that moment. Segments that were windows ended and begun at each fetch
 * would therefore not add up to the whole window (every cut counted once as an early end and once
 * as a corrected begin: 4 to 23 % of a 1 s window with load steps, on the h100 and h200 models).
 * So each cut t_i begins two windows, a_i and b_i; segment i (from cut i-1 to cut i) is
 * b_(i-1) - a_i, both ended together once the cut is SETTLE_S old (or when the window ends): the
 * reading at that moment cancels, leaving the difference of the two cuts' corrected estimates,
 * and the segments add up to the whole window. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "grid/grid_internal.h"
#include "zeus/clock.h"

#define MOD "grid"
#define MAX_KEY 200
#define J_PER_KWH 3.6e6
#define SETTLE_S 1.0 /* a cut's estimate is final once the counter tick after it is known: ~10 ticks */

/* An ended segment whose energy is taken once its end has settled. */
typedef struct gseg {
  char start_key[96], end_key[96]; /* b_(i-1) and a_i on the monitor */
  double end_s;                    /* its end, on the monotonic clock */
  bool has_factor;                 /* false: the window's error is set already */
  double factor;
  struct gseg *next;
} gseg;

typedef struct gwin {
  char *key;
  char mon_key[64], seg_key[96]; /* the whole window, and b_(i-1) of its current segment's start */
  double gpu[ZEUS_MAX_GPUS], cpu[ZEUS_MAX_CPUS], dram[ZEUS_MAX_CPUS], total;
  unsigned segs;
  unsigned long cuts;    /* cuts so far, to name their windows */
  gseg *pending, **tail; /* ended segments not yet settled, oldest first */
  int err_code; /* the first segment without a factor */
  char err[512];
  struct gwin *next;
} gwin;

struct zeus_grid_monitor {
  zeus_grid *g;
  zeus_monitor *mon;
  bool own_mon;
  double period, max_age;
  pthread_mutex_t mu; /* everything below */
  pthread_cond_t cv;  /* a fetch finished; stop */
  pthread_t thread;
  bool has_thread, stop;
  bool attempted; /* a fetch has finished, well or not */
  int last_rc;
  char last_err[512];
  gwin *wins;
  unsigned long serial;
};

void zeus_grid_monitor_opts_init(zeus_grid_monitor_opts *o) { memset(o, 0, sizeof *o); }

/* The factor for a segment ending now, or why there is none (into code and msg). */
static bool factor_locked(zeus_grid_monitor *gm, double now, double *f, int *code, char *msg, size_t len) {
  if (!gm->attempted) {
    *code = ZEUS_ESTATE;
    snprintf(msg, len, "%s: no answer yet", zeus_grid_url(gm->g));
    return false;
  }
  double fetched = 0;
  if (zeus_grid_rate(gm->g, now, f, &fetched)) {
    *code = gm->last_rc ? gm->last_rc : ZEUS_ESTATE;
    snprintf(msg, len, "%s", gm->last_rc ? gm->last_err : zeus_errmsg());
    return false;
  }
  if (now - fetched > gm->max_age) {
    *code = gm->last_rc ? gm->last_rc : ZEUS_ESTATE;
    snprintf(msg, len, "the last factor from %s was fetched %.1f s ago, more than the %g s it holds for%s%s",
             zeus_grid_url(gm->g), now - fetched, gm->max_age, gm->last_rc ? "; the last request: " : "",
             gm->last_rc ? gm->last_err : "");
    return false;
  }
  return true;
}

/* Adds segment g's energy, its start window minus its end window ended now, times its factor, and
 * frees it; an error leaves it pending (its windows open, for a later try or the cancel). */
static int settle_locked(zeus_grid_monitor *gm, gwin *w, gseg *g) {
  zeus_measurement s, e;
  int rc;
  if (!g->start_key[0]) /* its start was ended by a try whose end failed: the window has its error */
    return zeus_monitor_end_window(gm->mon, g->end_key, false, NULL);
  if ((rc = zeus_monitor_end_window(gm->mon, g->start_key, false, &s))) return rc;
  g->start_key[0] = '\0';
  if ((rc = zeus_monitor_end_window(gm->mon, g->end_key, false, &e))) {
    if (!w->err_code) {
      w->err_code = rc;
      snprintf(w->err, sizeof w->err, "a segment's energy could not be measured: %s", zeus_errmsg());
    }
    return rc;
  }
  if (g->has_factor && !w->err_code) {
    double f = g->factor / J_PER_KWH;
    for (unsigned k = 0; k < s.num_gpus && k < ZEUS_MAX_GPUS; k++)
      w->gpu[k] += (s.gpu_energy_j[k] - e.gpu_energy_j[k]) * f;
    for (unsigned k = 0; k < s.num_cpus && k < ZEUS_MAX_CPUS; k++) {
      w->cpu[k] += (s.cpu_energy_j[k] - e.cpu_energy_j[k]) * f;
      if (s.dram_valid[k]) w->dram[k] += (s.dram_energy_j[k] - e.dram_energy_j[k]) * f;
    }
    w->total += (s.total_energy_j - e.total_energy_j) * f;
  }
  return ZEUS_OK;
}

/* Settles window w's pending segments that ended before `before` (monotonic s), oldest first. */
static int settle_pending_locked(zeus_grid_monitor *gm, gwin *w, double before) {
  while (w->pending && w->pending->end_s <= before) {
    gseg *g = w->pending;
    int rc = settle_locked(gm, w, g);
    if (rc) return rc;
    w->pending = g->next;
    if (!w->pending) w->tail = &w->pending;
    free(g);
  }
  return ZEUS_OK;
}

/* Ends window w's current segment at a cut now: begins the cut's two windows, queues the segment
 * with the factor for it (or records why there is none), and settles the segments old enough. */
static int cut_locked(zeus_grid_monitor *gm, gwin *w) {
  gseg *g = calloc(1, sizeof *g);
  if (!g) return zeus__oom("splitting a grid window");
  unsigned long c = ++w->cuts;
  char next_key[96];
  snprintf(g->end_key, sizeof g->end_key, "%s.%lu.a", w->mon_key, c);
  snprintf(next_key, sizeof next_key, "%s.%lu.b", w->mon_key, c);
  int rc = zeus_monitor_begin_window(gm->mon, g->end_key, false);
  if (!rc && (rc = zeus_monitor_begin_window(gm->mon, next_key, false)))
    zeus_monitor_end_window(gm->mon, g->end_key, true, NULL);
  if (rc) {
    free(g);
    return rc;
  }
  g->end_s = zeus_monotonic_s();
  snprintf(g->start_key, sizeof g->start_key, "%s", w->seg_key);
  snprintf(w->seg_key, sizeof w->seg_key, "%s", next_key);
  w->segs++;
  if (!w->err_code)
    g->has_factor = factor_locked(gm, zeus__grid_unix_now(), &g->factor, &w->err_code, w->err, sizeof w->err);
  *w->tail = g;
  w->tail = &g->next;
  return settle_pending_locked(gm, w, g->end_s - SETTLE_S);
}

/* At the window's end: its last segment (from the last cut to now, the factor of now) and every
 * pending one. */
static int finish_locked(zeus_grid_monitor *gm, gwin *w) {
  int rc = settle_pending_locked(gm, w, INFINITY);
  if (rc) return rc;
  zeus_measurement r;
  if ((rc = zeus_monitor_end_window(gm->mon, w->seg_key, false, &r))) return rc;
  w->seg_key[0] = '\0';
  w->segs++;
  if (w->err_code) return ZEUS_OK;
  double f = 0;
  if (!factor_locked(gm, zeus__grid_unix_now(), &f, &w->err_code, w->err, sizeof w->err)) return ZEUS_OK;
  for (unsigned k = 0; k < r.num_gpus && k < ZEUS_MAX_GPUS; k++) w->gpu[k] += r.gpu_energy_j[k] / J_PER_KWH * f;
  for (unsigned k = 0; k < r.num_cpus && k < ZEUS_MAX_CPUS; k++) {
    w->cpu[k] += r.cpu_energy_j[k] / J_PER_KWH * f;
    if (r.dram_valid[k]) w->dram[k] += r.dram_energy_j[k] / J_PER_KWH * f;
  }
  w->total += r.total_energy_j / J_PER_KWH * f;
  return ZEUS_OK;
}

static void *poll_thread(void *arg) {
  zeus_grid_monitor *gm = arg;
  pthread_mutex_lock(&gm->mu);
  while (!gm->stop) {
    pthread_mutex_unlock(&gm->mu);
    int rc = zeus_grid_fetch(gm->g);
    char err[512] = "";
    if (rc) snprintf(err, sizeof err, "%s", zeus_errmsg());
    pthread_mutex_lock(&gm->mu);
    if (rc && (!gm->last_rc || strcmp(err, gm->last_err)))
      zeus__log(ZEUS_LOG_WARN, MOD, "%s", err); /* once per run of the same failure */
    gm->attempted = true;
    gm->last_rc = rc;
    snprintf(gm->last_err, sizeof gm->last_err, "%s", err);
    for (gwin *w = gm->wins; w; w = w->next)
      if (cut_locked(gm, w))
        zeus__log(ZEUS_LOG_WARN, MOD, "window '%s': cannot split its energy: %s", w->key, zeus_errmsg());
    pthread_cond_broadcast(&gm->cv);
    struct timespec dl = zeus__deadline_in(gm->period);
    while (!gm->stop && zeus__cond_wait_until(&gm->cv, &gm->mu, &dl) != ETIMEDOUT) {
    }
  }
  pthread_mutex_unlock(&gm->mu);
  return NULL;
}

int zeus_grid_monitor_open(zeus_grid_monitor **out, const zeus_grid_monitor_opts *o) {
  if (!out || !o) return zeus__error(ZEUS_EINVAL, "zeus_grid_monitor_open: NULL argument");
  *out = NULL;
  if (!o->grid) return zeus__error(ZEUS_EINVAL, "grid monitor: no provider (opts.grid is NULL)");
  if (!(o->poll_interval_s >= 0 && o->poll_interval_s <= 86400))
    return zeus__error(ZEUS_EINVAL, "grid monitor: poll interval %g s: expected 0 (the default, 60 s) to 86400 s",
                       o->poll_interval_s);
  if (!(o->max_age_s >= 0))
    return zeus__error(ZEUS_EINVAL, "grid monitor: max age %g s: expected 0 (the default) or more", o->max_age_s);
  zeus_grid_monitor *gm = calloc(1, sizeof *gm);
  if (!gm) return zeus__oom("opening a grid monitor");
  gm->g = o->grid;
  gm->period = o->poll_interval_s > 0 ? o->poll_interval_s : 60;
  gm->max_age = o->max_age_s > 0 ? o->max_age_s
                : zeus__grid_provider(o->grid) == ZEUS_GRID_ELECTRICITYMAPS ? 3600 : INFINITY;
  int rc = ZEUS_OK;
  if (o->monitor) {
    gm->mon = o->monitor;
  } else {
    zeus_monitor_opts mo;
    zeus_monitor_opts_init(&mo);
    mo.gpu_indices = o->gpu_indices;
    mo.num_gpu_indices = o->num_gpu_indices;
    mo.cpu_indices = o->cpu_indices;
    mo.num_cpu_indices = o->num_cpu_indices;
    mo.no_short_window_warning = true;
    rc = zeus_monitor_open(&gm->mon, &mo);
    gm->own_mon = !rc;
  }
  if (rc) {
    free(gm);
    return rc;
  }
  pthread_mutex_init(&gm->mu, NULL);
  zeus__cond_init(&gm->cv);
  if (pthread_create(&gm->thread, NULL, poll_thread, gm)) {
    zeus_grid_monitor_close(gm);
    return zeus__error(ZEUS_EINTERNAL, "grid monitor: cannot start its thread");
  }
  gm->has_thread = true;
  *out = gm;
  return ZEUS_OK;
}

static void gwin_free(zeus_grid_monitor *gm, gwin *w, bool cancel) {
  while (w->pending) {
    gseg *g = w->pending;
    w->pending = g->next;
    if (cancel) {
      if (g->start_key[0]) zeus_monitor_end_window(gm->mon, g->start_key, true, NULL);
      zeus_monitor_end_window(gm->mon, g->end_key, true, NULL);
    }
    free(g);
  }
  if (cancel) {
    if (w->seg_key[0]) zeus_monitor_end_window(gm->mon, w->seg_key, true, NULL);
    zeus_monitor_end_window(gm->mon, w->mon_key, true, NULL);
  }
  free(w->key);
  free(w);
}

void zeus_grid_monitor_close(zeus_grid_monitor *gm) {
  if (!gm) return;
  pthread_mutex_lock(&gm->mu);
  gm->stop = true;
  pthread_cond_broadcast(&gm->cv);
  pthread_mutex_unlock(&gm->mu);
  if (gm->has_thread) pthread_join(gm->thread, NULL);
  while (gm->wins) {
    gwin *w = gm->wins;
    gm->wins = w->next;
    gwin_free(gm, w, true);
  }
  if (gm->own_mon) zeus_monitor_close(gm->mon);
  pthread_cond_destroy(&gm->cv);
  pthread_mutex_destroy(&gm->mu);
  free(gm);
}

static gwin **find(zeus_grid_monitor *gm, const char *key) {
  gwin **p = &gm->wins;
  while (*p && strcmp((*p)->key, key)) p = &(*p)->next;
  return p;
}

int zeus_grid_monitor_begin_window(zeus_grid_monitor *gm, const char *key) {
  if (!gm || !key) return zeus__error(ZEUS_EINVAL, "zeus_grid_monitor_begin_window: NULL argument");
  size_t kl = strlen(key);
  if (!kl || kl > MAX_KEY)
    return zeus__error(ZEUS_EINVAL, "grid monitor: window key of %zu bytes: expected 1 to %d", kl, MAX_KEY);
  pthread_mutex_lock(&gm->mu);
  int rc = ZEUS_OK;
  gwin *w = NULL;
  if (*find(gm, key)) {
    rc = zeus__error(ZEUS_EEXIST, "Measurement window '%s' already exists", key);
  } else if (!(w = calloc(1, sizeof *w)) || !(w->key = zeus__strdup(key))) {
    rc = zeus__oom("beginning a grid window");
  } else {
    unsigned long s = ++gm->serial;
    snprintf(w->mon_key, sizeof w->mon_key, "zeus.grid.%p.%lu", (void *)gm, s);
    snprintf(w->seg_key, sizeof w->seg_key, "%s.0.b", w->mon_key);
    w->tail = &w->pending;
    rc = zeus_monitor_begin_window(gm->mon, w->mon_key, false);
    if (!rc) {
      rc = zeus_monitor_begin_window(gm->mon, w->seg_key, false);
      if (rc) zeus_monitor_end_window(gm->mon, w->mon_key, true, NULL);
    }
  }
  if (!rc) {
    w->next = gm->wins;
    gm->wins = w;
  } else if (w) {
    free(w->key);
    free(w);
  }
  pthread_mutex_unlock(&gm->mu);
  return rc;
}

int zeus_grid_monitor_end_window(zeus_grid_monitor *gm, const char *key, zeus_grid_measurement *out) {
  if (!gm || !key) return zeus__error(ZEUS_EINVAL, "zeus_grid_monitor_end_window: NULL argument");
  pthread_mutex_lock(&gm->mu);
  gwin **p = find(gm, key), *w = *p;
  if (!w) {
    pthread_mutex_unlock(&gm->mu);
    return zeus__error(ZEUS_ENOENT, "Measurement window '%s' does not exist", key);
  }
  *p = w->next;
  /* A window that ends before the first answer waits for it (or for its timeout). */
  struct timespec dl = zeus__deadline_in(zeus__grid_timeout(gm->g) + 1);
  while (!gm->attempted && !gm->stop && zeus__cond_wait_until(&gm->cv, &gm->mu, &dl) != ETIMEDOUT) {
  }
  int rc = finish_locked(gm, w);
  zeus_measurement r;
  if (!rc) rc = zeus_monitor_end_window(gm->mon, w->mon_key, false, &r);
  if (rc) {
    zeus__saved_error e;
    zeus__error_save(&e);
    gwin_free(gm, w, true);
    pthread_mutex_unlock(&gm->mu);
    return zeus__error_restore(&e);
  }
  if (out) {
    memset(out, 0, sizeof *out);
    out->energy = r;
    out->num_segments = w->segs;
    out->valid = w->err_code == ZEUS_OK;
    out->error_code = w->err_code;
    if (out->valid) {
      memcpy(out->gpu, w->gpu, sizeof out->gpu);
      memcpy(out->cpu, w->cpu, sizeof out->cpu);
      memcpy(out->dram, w->dram, sizeof out->dram);
      out->total = w->total;
    } else {
      for (unsigned k = 0; k < ZEUS_MAX_GPUS; k++) out->gpu[k] = NAN;
      for (unsigned k = 0; k < ZEUS_MAX_CPUS; k++) out->cpu[k] = out->dram[k] = NAN;
      out->total = NAN;
      snprintf(out->error, sizeof out->error, "%s", w->err);
    }
  }
  gwin_free(gm, w, false);
  pthread_mutex_unlock(&gm->mu);
  return ZEUS_OK;
}

int zeus_grid_monitor_rate(zeus_grid_monitor *gm, double *per_kwh) {
  if (!gm || !per_kwh) return zeus__error(ZEUS_EINVAL, "zeus_grid_monitor_rate: NULL argument");
  pthread_mutex_lock(&gm->mu);
  int code = 0;
  char msg[512];
  bool ok = factor_locked(gm, zeus__grid_unix_now(), per_kwh, &code, msg, sizeof msg);
  pthread_mutex_unlock(&gm->mu);
  return ok ? ZEUS_OK : zeus__error(code, "%s", msg);
}
