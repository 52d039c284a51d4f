/* zeus exporter: GPU and CPU-package readings in the Prometheus text format (zeus/exporter.h).
 *
 * State that must survive between scrapes (the energy totals) lives here under one mutex; a
 * scrape takes it, brings every total up to date, reads the gauges and writes the text, so
 * concurrent scrapes are served one after the other and never see a total go back. A sampling
 * thread brings the totals up to date between scrapes, which is what integrating power (GPUs
 * without an energy counter) and catching RAPL wrap-arounds need. */
#include <netdb.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <microhttpd.h>

#include "core/core.h"
#include "http/mhd_guard.h"
#include "metrics/metrics.h"
#include "zeus/exporter.h"
#include "zeus/format.h"
#include "zeus/monitor.h"
#include "zeus/soc.h"
#include "zeus/config.h"
#if ZEUS_HAVE_GRID
#include "zeus/grid.h"
#endif

#define EXPORTER_DEFAULT_PORT 9401

typedef struct gpu_state {
  char index[16], uuid[ZEUS_NAME_LEN], name[ZEUS_NAME_LEN];
  bool has_counter;
  /* Power and energy are the superchip module's (Grace Hopper: NVML refuses GPU-scope power):
   * they go out as zeus_module_* series, never as zeus_gpu_* ones. */
  bool module;
  zeus__metrics_counter energy_mj; /* the counter's readings, or the integral of power */
  bool have_power;
  unsigned last_mw;
  double last_t;
  unsigned long read_errors;
} gpu_state;

typedef struct cpu_state {
  char index[16], name[32];
  bool has_dram;
  uint64_t pkg_wrap_mj, dram_wrap_mj;
  zeus__metrics_counter pkg_mj, dram_mj;
  unsigned long read_errors;
} cpu_state;

/* A Jetson rail (zeus/soc.h): power only, integrated like a GPU without a counter. */
typedef struct soc_rail_state {
  char label[64];
  zeus__metrics_counter energy_mj;
  bool have_power;
  double last_mw, last_t;
  unsigned long read_errors;
} soc_rail_state;

struct zeus_exporter {
  zeus_devices *d;
  zeus_soc *soc; /* a Jetson's rails, or NULL */
  soc_rail_state rail[ZEUS_SOC_NUM_RAILS];
  unsigned ngpu, ncpu;
  gpu_state *g;
  cpu_state c[ZEUS_MAX_CPUS];
  pthread_mutex_t mu; /* the totals and the counters below */
  pthread_cond_t cv;
  bool stopping, sampler_started;
  pthread_t sampler;
  double interval_s;
  unsigned long scrapes;
  double last_scrape_s;
  struct MHD_Daemon *mhd;
  int port;
  char *token;
  /* GPUs whose counter is slow and coarse (an H100's): followed by a monitor's sampler, so a
   * scrape reads no counter and the total moves between ticks; NULL when no GPU needs it */
  zeus_monitor *mon;
  /* Connections (see "connections" below). */
  zeus__http_guard *guard;
  zeus__http_mhd_listener on; /* the guard, for libmicrohttpd's notices */
  unsigned max_conns;
  double request_timeout_s;
  struct zeus_grid **grids; /* borrowed providers whose factors are served (zeus/grid.h) */
  size_t ngrids;
};

/* ---- bringing the totals up to date (mu held) ---- */

static void update_gpu(zeus_exporter *e, gpu_state *g, unsigned i) {
  if (g->has_counter && e->mon && zeus_monitor_gpu_energy_source(e->mon, i) == ZEUS_ENERGY_SAMPLED) {
    double j;
    if (zeus_monitor_gpu_energy_now(e->mon, i, &j) != ZEUS_OK) {
      g->read_errors++;
      return;
    }
    uint64_t mj = j > 0 ? (uint64_t)(j * 1000.0) : 0;
    if (g->energy_mj.have_last && mj < g->energy_mj.last) mj = g->energy_mj.last; /* an estimate never goes back */
    zeus__metrics_counter_update(&g->energy_mj, mj, 0);
    return;
  }
  if (g->has_counter) {
    uint64_t mj;
    if (zeus_gpu_total_energy(e->d, i, &mj) == ZEUS_OK) zeus__metrics_counter_update(&g->energy_mj, mj, 0);
    else g->read_errors++;
    return;
  }
  /* No counter: the trapezoid rule over the samples; the total starts at zero. */
  unsigned mw;
  double t = zeus_devices_now(e->d);
  if (zeus_gpu_instant_power(e->d, i, &mw) != ZEUS_OK) {
    g->read_errors++;
    g->have_power = false;
    return;
  }
  g->energy_mj.have_last = 1;
  if (g->have_power && t > g->last_t) g->energy_mj.total += (g->last_mw + (double)mw) / 2.0 * (t - g->last_t);
  g->have_power = true;
  g->last_mw = mw;
  g->last_t = t;
}

static void update_cpu(cpu_state *c, unsigned i) {
  uint64_t pkg = 0, dram = 0;
  bool has_dram = false;
  if (zeus_cpu_energy(i, &pkg, &has_dram, &dram) != ZEUS_OK) {
    c->read_errors++;
    return;
  }
  zeus__metrics_counter_update(&c->pkg_mj, pkg, c->pkg_wrap_mj);
  if (c->has_dram && has_dram) zeus__metrics_counter_update(&c->dram_mj, dram, c->dram_wrap_mj);
}

/* A Jetson rail: the trapezoid rule over its samples on the monotonic clock; starts at zero. */
static void update_soc_rail(zeus_exporter *e, int k) {
  soc_rail_state *s = &e->rail[k];
  double mw, t = zeus_monotonic_s();
  if (zeus_soc_power(e->soc, (zeus_soc_rail)k, &mw) != ZEUS_OK) {
    s->read_errors++;
    s->have_power = false;
    return;
  }
  s->energy_mj.have_last = 1;
  if (s->have_power && t > s->last_t) s->energy_mj.total += (s->last_mw + mw) / 2.0 * (t - s->last_t);
  s->have_power = true;
  s->last_mw = mw;
  s->last_t = t;
}

static void update_all(zeus_exporter *e) {
  for (unsigned i = 0; i < e->ngpu; i++) update_gpu(e, &e->g[i], i);
  for (unsigned i = 0; i < e->ncpu; i++) update_cpu(&e->c[i], i);
  for (int k = 0; k < ZEUS_SOC_NUM_RAILS; k++)
    if (zeus_soc_has_rail(e->soc, (zeus_soc_rail)k)) update_soc_rail(e, k);
}

static void *sampler_main(void *arg) {
  zeus_exporter *e = arg;
  pthread_mutex_lock(&e->mu);
  while (!e->stopping) {
    struct timespec until = zeus__deadline_in(e->interval_s);
    zeus__cond_wait_until(&e->cv, &e->mu, &until);
    if (e->stopping) break;
    update_all(e);
  }
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

/* ---- one scrape ---- */

typedef struct reading {
  bool energy, power, avg, mem_avg, limits, limit, clocks, temp;
  double energy_j, power_w, avg_w, mem_avg_w, min_w, max_w, def_w, limit_w, sm_hz, mem_hz, temp_c;
  zeus_clock_lock lock[2]; /* [0] SM, [1] memory */
} reading;

static void read_gpu(zeus_exporter *e, unsigned i, reading *r) {
  gpu_state *g = &e->g[i];
  unsigned a, b, c;
  memset(r, 0, sizeof *r);
  r->energy = g->energy_mj.have_last;
  r->energy_j = g->energy_mj.total / 1000.0;
  if (zeus_gpu_power(e->d, i, ZEUS_POWER_INSTANT, &a) == ZEUS_OK) r->power = true, r->power_w = a / 1000.0;
  if (zeus_gpu_power(e->d, i, ZEUS_POWER_AVERAGE, &a) == ZEUS_OK) r->avg = true, r->avg_w = a / 1000.0;
  if (zeus_gpu_power(e->d, i, ZEUS_POWER_MEMORY_AVERAGE, &a) == ZEUS_OK) r->mem_avg = true, r->mem_avg_w = a / 1000.0;
  if (zeus_gpu_power_limit_constraints(e->d, i, &a, &b, &c) == ZEUS_OK)
    r->limits = true, r->min_w = a / 1000.0, r->max_w = b / 1000.0, r->def_w = c / 1000.0;
  if (zeus_gpu_get_power_limit(e->d, i, &a) == ZEUS_OK) r->limit = true, r->limit_w = a / 1000.0;
  if (zeus_gpu_current_clocks(e->d, i, &a, &b) == ZEUS_OK) r->clocks = true, r->sm_hz = a * 1e6, r->mem_hz = b * 1e6;
  if (zeus_gpu_temperature(e->d, i, &a) == ZEUS_OK) r->temp = true, r->temp_c = a;
  for (int m = 0; m < 2; m++)
    if (zeus_gpu_get_locked_clocks(e->d, i, m, &r->lock[m]) != ZEUS_OK) r->lock[m].state = ZEUS_CLOCK_LOCK_UNKNOWN;
}

/* The locks, one sample per GPU and clock where known: `what` 0 locked or not, 1 the range's
 * minimum, 2 its maximum (only where locked). */
static void write_locks(zeus_exporter *e, zeus__metrics_writer *w, const reading *r, const char *fam, int what,
                        const char *help) {
  static const char *const clock[2] = {"sm", "memory"};
  bool any = false;
  for (unsigned i = 0; i < e->ngpu; i++)
    for (int m = 0; m < 2; m++)
      any = any || (what ? r[i].lock[m].state == ZEUS_CLOCK_LOCKED : r[i].lock[m].state != ZEUS_CLOCK_LOCK_UNKNOWN);
  if (!any) return;
  zeus__metrics_family(w, fam, "gauge", help);
  for (unsigned i = 0; i < e->ngpu; i++) {
    for (int m = 0; m < 2; m++) {
      const zeus_clock_lock *l = &r[i].lock[m];
      if (l->state == ZEUS_CLOCK_LOCK_UNKNOWN || (what && l->state != ZEUS_CLOCK_LOCKED)) continue;
      gpu_state *g = &e->g[i];
      zeus__metrics_label lab[] = {{"gpu", g->index}, {"uuid", g->uuid}, {"name", g->name}, {"clock", clock[m]}};
      double v = what == 0 ? (l->state == ZEUS_CLOCK_LOCKED) : (what == 1 ? l->min_mhz : l->max_mhz) * 1e6;
      zeus__metrics_sample(w, fam, NULL, lab, 4, v);
    }
  }
}

#define GPU_LABELS(g) {{"gpu", (g)->index}, {"uuid", (g)->uuid}, {"name", (g)->name}}

/* One family over every GPU that has the reading and whose power scope is `mod` (true: the
 * module's, false: the GPU's): `have` and `val` name fields of reading. */
#define SCOPED_FAMILY(w, e, r, mod, fam, type, help, have, val)          \
  do {                                                                   \
    bool any_ = false;                                                   \
    for (unsigned i_ = 0; i_ < (e)->ngpu; i_++) any_ = any_ || ((r)[i_].have && (e)->g[i_].module == (mod)); \
    if (!any_) break;                                                    \
    zeus__metrics_family((w), (fam), (type), (help));                    \
    for (unsigned i_ = 0; i_ < (e)->ngpu; i_++) {                        \
      if (!(r)[i_].have || (e)->g[i_].module != (mod)) continue;        \
      zeus__metrics_label l_[] = GPU_LABELS(&(e)->g[i_]);                \
      zeus__metrics_sample((w), (fam), NULL, l_, 3, (r)[i_].val);        \
    }                                                                    \
  } while (0)
/* Readings that are the GPU's whatever the power scope (limits, clocks, temperature). */
#define GPU_FAMILY(w, e, r, fam, type, help, have, val)                  \
  do {                                                                   \
    SCOPED_FAMILY(w, e, r, false, fam, type, help, have, val);           \
    SCOPED_FAMILY(w, e, r, true, fam, type, help, have, val);            \
  } while (0)

#if ZEUS_HAVE_GRID
/* The grid's carbon intensity and price as their providers last fetched them (zeus/grid.h). */
static void write_grids(zeus_exporter *e, zeus__metrics_writer *w) {
  static const char *const fam[3] = {"zeus_grid_carbon_intensity_grams_per_kilowatt_hour",
                                     "zeus_grid_price_per_kilowatt_hour", "zeus_grid_fetch_age_seconds"};
  static const char *const help[3] = {
      "The grid's carbon intensity (ElectricityMaps) as last fetched, in grams of CO2eq per kWh.",
      "The electricity price (an OpenEI utility rate) at this hour, per kWh, in the label's currency.",
      "How long ago each provider's factor was fetched, in seconds."};
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
  for (int f = 0; f < 3; f++) {
    bool declared = false;
    for (size_t i = 0; i < e->ngrids; i++) {
      zeus_grid *g = e->grids[i];
      bool price = zeus_grid_kind(g) == ZEUS_GRID_OPENEI;
      if (f < 2 && price != (f == 1)) continue;
      double v, at;
      if (zeus_grid_rate(g, now, &v, &at) != ZEUS_OK) continue;
      if (!declared) zeus__metrics_family(w, fam[f], "gauge", help[f]);
      declared = true;
      zeus__metrics_label l[2] = {{"url", zeus_grid_url(g)}, {"currency", zeus_grid_currency(g)}};
      if (f == 2) l[1] = (zeus__metrics_label){"provider", price ? "OpenEI" : "ElectricityMaps"};
      zeus__metrics_sample(w, fam[f], NULL, l, f == 0 ? 1 : 2, f == 2 ? now - at : v);
    }
  }
}
#endif

static void write_all(zeus_exporter *e, zeus__metrics_writer *w, const reading *r, double took_s) {
  if (e->ngpu) {
    zeus__metrics_family(w, "zeus_gpu_info", "gauge",
                         "A visible GPU (value 1); energy_source says whether its energy is read from its "
                         "counter or integrated from its power.");
    for (unsigned i = 0; i < e->ngpu; i++) {
      gpu_state *g = &e->g[i];
      zeus__metrics_label l[] = {{"gpu", g->index}, {"uuid", g->uuid}, {"name", g->name},
                                 {"energy_source", g->has_counter ? "counter" : "power"},
                                 {"power_scope", g->module ? "module" : "gpu"}};
      zeus__metrics_sample(w, "zeus_gpu_info", NULL, l, 5, 1);
    }
  }
  SCOPED_FAMILY(w, e, r, false, "zeus_gpu_energy_joules_total", "counter",
                "Energy the GPU used, in joules: its energy counter, or its power integrated since the exporter "
                "started; never decreases.", energy, energy_j);
  SCOPED_FAMILY(w, e, r, false, "zeus_gpu_power_watts", "gauge", "The GPU's power draw now, in watts.", power,
                power_w);
  SCOPED_FAMILY(w, e, r, false, "zeus_gpu_power_average_watts", "gauge",
                "The GPU's power draw averaged over its own window (about 1 s), in watts.", avg, avg_w);
  /* Where NVML gives only the module's power (Grace Hopper), the same readings under the module's name. */
  SCOPED_FAMILY(w, e, r, true, "zeus_module_energy_joules_total", "counter",
                "Energy the superchip module of the GPU (CPU + memory + GPU, e.g. a Grace Hopper) used, in "
                "joules; never decreases.", energy, energy_j);
  SCOPED_FAMILY(w, e, r, true, "zeus_module_power_watts", "gauge",
                "The superchip module's power draw now (CPU + memory + GPU), in watts.", power, power_w);
  SCOPED_FAMILY(w, e, r, true, "zeus_module_power_average_watts", "gauge",
                "The superchip module's power draw averaged over its own window (about 1 s), in watts.", avg,
                avg_w);
  GPU_FAMILY(w, e, r, "zeus_gpu_memory_power_average_watts", "gauge",
             "The GPU memory's average power draw, in watts.", mem_avg, mem_avg_w);
  GPU_FAMILY(w, e, r, "zeus_gpu_power_limit_watts", "gauge", "The GPU's power limit now, in watts.", limit,
             limit_w);
  GPU_FAMILY(w, e, r, "zeus_gpu_power_limit_min_watts", "gauge", "The lowest power limit the GPU accepts, in watts.",
             limits, min_w);
  GPU_FAMILY(w, e, r, "zeus_gpu_power_limit_max_watts", "gauge",
             "The highest power limit the GPU accepts, in watts.", limits, max_w);
  GPU_FAMILY(w, e, r, "zeus_gpu_power_limit_default_watts", "gauge", "The GPU's default power limit, in watts.",
             limits, def_w);
  GPU_FAMILY(w, e, r, "zeus_gpu_sm_clock_hertz", "gauge", "The SM (graphics) clock now, in hertz.", clocks, sm_hz);
  GPU_FAMILY(w, e, r, "zeus_gpu_memory_clock_hertz", "gauge", "The memory clock now, in hertz.", clocks, mem_hz);
  GPU_FAMILY(w, e, r, "zeus_gpu_temperature_celsius", "gauge", "The GPU die temperature, in degrees Celsius.",
             temp, temp_c);
  write_locks(e, w, r, "zeus_gpu_clock_locked", 0,
              "1 when the clock (sm or memory) is locked to a range, 0 when not; absent where nobody can say (NVML "
              "cannot read a lock back: only locks made through a zeus daemon or this exporter are known).");
  write_locks(e, w, r, "zeus_gpu_locked_clock_min_hertz", 1, "The lowest clock of the locked range, in hertz.");
  write_locks(e, w, r, "zeus_gpu_locked_clock_max_hertz", 2, "The highest clock of the locked range, in hertz.");
  if (e->ngpu) {
    zeus__metrics_family(w, "zeus_gpu_read_errors_total", "counter",
                         "Energy readings of the GPU that failed (a lost GPU, a driver error).");
    for (unsigned i = 0; i < e->ngpu; i++) {
      zeus__metrics_label l[] = GPU_LABELS(&e->g[i]);
      zeus__metrics_sample(w, "zeus_gpu_read_errors_total", NULL, l, 3, (double)e->g[i].read_errors);
    }
  }
  if (e->ncpu) {
    zeus__metrics_family(w, "zeus_cpu_energy_joules_total", "counter",
                         "Energy the CPU package used, in joules (RAPL; wrap-arounds accounted for).");
    for (unsigned i = 0; i < e->ncpu; i++) {
      zeus__metrics_label l[] = {{"cpu", e->c[i].index}, {"name", e->c[i].name}};
      if (e->c[i].pkg_mj.have_last)
        zeus__metrics_sample(w, "zeus_cpu_energy_joules_total", NULL, l, 2, e->c[i].pkg_mj.total / 1000.0);
    }
    zeus__metrics_family(w, "zeus_cpu_dram_energy_joules_total", "counter",
                         "Energy the CPU package's DRAM used, in joules (RAPL; wrap-arounds accounted for).");
    for (unsigned i = 0; i < e->ncpu; i++) {
      zeus__metrics_label l[] = {{"cpu", e->c[i].index}, {"name", e->c[i].name}};
      if (e->c[i].has_dram && e->c[i].dram_mj.have_last)
        zeus__metrics_sample(w, "zeus_cpu_dram_energy_joules_total", NULL, l, 2, e->c[i].dram_mj.total / 1000.0);
    }
  }
  if (e->soc) { /* a Jetson's rails: energy integrated from their power, and the power last read */
    static const char *const fam[3] = {"zeus_soc_energy_joules_total", "zeus_soc_power_watts",
                                       "zeus_soc_read_errors_total"};
    static const char *const type[3] = {"counter", "gauge", "counter"};
    static const char *const help[3] = {
        "Energy of an SoC power rail (NVIDIA Jetson: cpu, gpu, or total: the board's input), in joules, "
        "integrated from its power since the exporter started; never decreases.",
        "An SoC power rail's power at the last reading, in watts.",
        "Readings of an SoC power rail that failed (a file that is missing or holds no number)."};
    for (int f = 0; f < 3; f++) {
      zeus__metrics_family(w, fam[f], type[f], help[f]);
      for (int k = 0; k < ZEUS_SOC_NUM_RAILS; k++) {
        soc_rail_state *s = &e->rail[k];
        if (!zeus_soc_has_rail(e->soc, (zeus_soc_rail)k) || (f == 1 && !s->have_power)) continue;
        zeus__metrics_label l[] = {{"rail", zeus_soc_rail_name((zeus_soc_rail)k)}, {"label", s->label}};
        double v = f == 0 ? s->energy_mj.total / 1000.0 : f == 1 ? s->last_mw / 1000.0 : (double)s->read_errors;
        zeus__metrics_sample(w, fam[f], NULL, l, 2, v);
      }
    }
  }
#if ZEUS_HAVE_GRID
  write_grids(e, w);
#endif
  zeus__metrics_family(w, "zeus_exporter_gpus", "gauge", "GPUs the exporter reads.");
  zeus__metrics_sample(w, "zeus_exporter_gpus", NULL, NULL, 0, e->ngpu);
  zeus__metrics_family(w, "zeus_exporter_cpus", "gauge", "CPU packages (RAPL) the exporter reads.");
  zeus__metrics_sample(w, "zeus_exporter_cpus", NULL, NULL, 0, e->ncpu);
  zeus__metrics_family(w, "zeus_exporter_scrapes_total", "counter", "Scrapes served, this one included.");
  zeus__metrics_sample(w, "zeus_exporter_scrapes_total", NULL, NULL, 0, (double)e->scrapes);
  zeus__metrics_family(w, "zeus_exporter_last_scrape_duration_seconds", "gauge",
                       "How long the previous scrape took to read the devices and write the text, in seconds.");
  zeus__metrics_sample(w, "zeus_exporter_last_scrape_duration_seconds", NULL, NULL, 0, took_s);
}

int zeus_exporter_render(zeus_exporter *e, char **text, size_t *len) {
  if (!e || !text) return zeus__error(ZEUS_EINVAL, "zeus_exporter_render: exporter and text are required");
  *text = NULL;
  reading stack[8], *r = stack;
  if (e->ngpu > 8 && !(r = malloc(e->ngpu * sizeof *r))) return zeus__oom("scraping the GPUs");
  zeus__metrics_writer w;
  zeus__metrics_writer_init(&w);
  pthread_mutex_lock(&e->mu);
  double t0 = zeus_monotonic_s();
  update_all(e);
  for (unsigned i = 0; i < e->ngpu; i++) read_gpu(e, i, &r[i]);
  e->scrapes++;
  write_all(e, &w, r, e->last_scrape_s);
  e->last_scrape_s = zeus_monotonic_s() - t0;
  pthread_mutex_unlock(&e->mu);
  if (r != stack) free(r);
  if (w.rc) {
    zeus__metrics_writer_free(&w);
    return zeus__oom("writing the metrics");
  }
  if (len) *len = w.buf.len;
  *text = w.buf.data; /* malloc()ed: zeus_free() is free() */
  return ZEUS_OK;
}

/* ---- HTTP ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len, bool owned,
                             const char *type) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, body, owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
  if (!resp) {
    if (owned) free(body);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  if (status == 405) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  enum MHD_Result rc = MHD_queue_response(c, status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result text_reply(struct MHD_Connection *c, unsigned status, const char *msg) {
  return reply(c, status, (char *)msg, strlen(msg), false, "text/plain; charset=utf-8");
}

static bool authorised(const zeus_exporter *e, struct MHD_Connection *c) {
  if (!e->token) return true;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
  h += 7;
  while (*h == ' ') h++;
  size_t n = strlen(e->token);
  if (strlen(h) != n) return false;
  unsigned char diff = 0; /* constant time over equal lengths */
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(h[i] ^ e->token[i]);
  return diff == 0;
}

/* ---- connections ----
 * The connection guard (src/http/guard.c) keeps the slot policy: only connections that have not
 * sent a whole request lose their slot: one past the request deadline is shut down, and when every
 * slot is held a new connection takes the slot of the oldest such one (take_oldest_idle); when
 * every slot is answering a scrape the new one gets 503. */

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  zeus_exporter *e = cls;
  if (!*con_cls) { /* first call: headers only */
    *con_cls = (void *)1;
    return MHD_YES;
  }
  if (*upload_size) { /* a body is neither wanted nor kept */
    *upload_size = 0;
    return MHD_YES;
  }
  zeus__http_mhd_busy(e->guard, c, true);
  bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  if (strcmp(url, "/") == 0) {
    if (!get) return text_reply(c, 405, "method not allowed (allowed: GET, HEAD)\n");
    return text_reply(c, 200, "zeus exporter: the metrics are at /metrics\n");
  }
  if (strcmp(url, "/metrics") != 0) return text_reply(c, 404, "no such page (the metrics are at /metrics)\n");
  if (!get) return text_reply(c, 405, "method not allowed (allowed: GET, HEAD)\n");
  if (!authorised(e, c)) return text_reply(c, 401, "missing or wrong bearer token\n");
  char *text;
  size_t len;
  if (zeus_exporter_render(e, &text, &len) != ZEUS_OK) return text_reply(c, 500, "out of memory\n");
  return reply(c, 200, text, len, true, ZEUS__METRICS_CONTENT_TYPE);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)toe;
  if (*con_cls) zeus__http_mhd_busy(((zeus_exporter *)cls)->guard, c, false);
  *con_cls = NULL;
}

static int listen_on(zeus_exporter *e, const char *host, int port) {
  struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port < 0 ? 0 : port);
  int gai = getaddrinfo(host, ps, &hints, &ai);
  if (gai) return zeus__error(ZEUS_EINVAL, "cannot resolve host '%s': %s", host, gai_strerror(gai));
  zeus__http_guard_opts go = {.server = "exporter", .max_connections = e->max_conns,
                              .max_per_client = e->max_conns, .no_reserve = true,
                              .request_timeout_s = e->request_timeout_s, .take_oldest_idle = true,
                              .plain_errors = true};
  int rc = zeus__http_guard_open(&e->guard, &go);
  if (rc) {
    freeaddrinfo(ai);
    return rc;
  }
  e->on = (zeus__http_mhd_listener){e->guard, 0};
  unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  /* Scrapes are short: two threads, few connections (max_conns, see "connections"), little memory
   * each; a request must arrive within request_timeout_s and a client that stalls is dropped after
   * 10 s. */
  e->mhd = MHD_start_daemon(flags, 0, NULL, NULL, handle, e, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, e, MHD_OPTION_NOTIFY_CONNECTION,
                            zeus__http_mhd_notify, &e->on,
                            MHD_OPTION_CONNECTION_LIMIT, e->max_conns + 16, /* room to take a slot over */
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)(16 * 1024), MHD_OPTION_THREAD_POOL_SIZE, (unsigned)2, MHD_OPTION_END);
  freeaddrinfo(ai);
  if (!e->mhd)
    return zeus__error(ZEUS_ENET, "cannot listen on %s port %d (in use, or not an address of this machine?)", host,
                       port);
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(e->mhd, MHD_DAEMON_INFO_BIND_PORT);
  e->port = di ? di->port : port;
  return ZEUS_OK;
}

/* ---- open and close ---- */

void zeus_exporter_opts_init(zeus_exporter_opts *o) {
  memset(o, 0, sizeof *o);
  o->host = "127.0.0.1";
  o->port = EXPORTER_DEFAULT_PORT;
  o->sample_interval_s = 0.1;
}

int zeus_exporter_open(zeus_exporter **out, const zeus_exporter_opts *opts) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_exporter_open: out is required");
  *out = NULL;
  zeus_exporter_opts o;
  zeus_exporter_opts_init(&o);
  if (opts) {
    o = *opts;
    if (!o.host || !*o.host) o.host = "127.0.0.1";
    if (o.port == 0) o.port = EXPORTER_DEFAULT_PORT;
    if (o.sample_interval_s == 0) o.sample_interval_s = 0.1;
  }
  if (!o.max_connections) o.max_connections = 64;
  if (o.request_timeout_s == 0) o.request_timeout_s = 5;
  if (o.max_connections > 100000) return zeus__error(ZEUS_EINVAL, "max_connections %u is above 100000", o.max_connections);
  if (!(o.request_timeout_s >= 0.1 && o.request_timeout_s <= 3600))
    return zeus__error(ZEUS_EINVAL, "request timeout %g s is outside [0.1, 3600] s", o.request_timeout_s);
  if (o.port < -1 || o.port > 65535) return zeus__error(ZEUS_EINVAL, "port %d is outside 1..65535", o.port);
  if (!(o.sample_interval_s >= 0.001 && o.sample_interval_s <= 10))
    return zeus__error(ZEUS_EINVAL, "sample interval %g s is outside [0.001, 10] s", o.sample_interval_s);
  if (o.num_grids && !ZEUS_HAVE_GRID)
    return zeus__error(ZEUS_EINVAL, "grid providers given, but this libzeus was built without ZEUS_WITH_GRID");
  for (size_t i = 0; i < o.num_grids; i++)
    if (!o.grids || !o.grids[i]) return zeus__error(ZEUS_EINVAL, "grid provider %zu is NULL", i);
  int rc;
  zeus_devices *d = o.devices;
  if (!d && (rc = zeus_devices_default(&d))) return rc;

  zeus_exporter *e = calloc(1, sizeof *e);
  if (!e) return zeus__oom("opening the exporter");
  e->d = d;
  e->port = -1;
  e->interval_s = o.sample_interval_s;
  e->max_conns = o.max_connections;
  e->request_timeout_s = o.request_timeout_s;
  if (o.num_grids) {
    if (!(e->grids = calloc(o.num_grids, sizeof *e->grids))) {
      free(e);
      return zeus__oom("opening the exporter");
    }
    memcpy(e->grids, o.grids, o.num_grids * sizeof *e->grids);
    e->ngrids = o.num_grids;
  }
  pthread_mutex_init(&e->mu, NULL);
  if (zeus__cond_init(&e->cv)) {
    pthread_mutex_destroy(&e->mu);
    free(e->grids);
    free(e);
    return zeus_errcode();
  }
  e->ngpu = zeus_gpu_count(d);
  if (e->ngpu && !(e->g = calloc(e->ngpu, sizeof *e->g))) {
    zeus_exporter_close(e);
    return zeus__oom("opening the exporter");
  }
  for (unsigned i = 0; i < e->ngpu; i++) {
    gpu_state *g = &e->g[i];
    snprintf(g->index, sizeof g->index, "%u", i);
    if (zeus_gpu_uuid(d, i, g->uuid, sizeof g->uuid)) g->uuid[0] = '\0';
    if (zeus_gpu_name(d, i, g->name, sizeof g->name)) g->name[0] = '\0';
    bool has = false;
    g->has_counter = zeus_gpu_energy_counter_supported(d, i, &has) == ZEUS_OK && has;
    zeus_power_scope scope = ZEUS_POWER_SCOPE_GPU;
    g->module = zeus_gpu_power_scope(d, i, &scope) == ZEUS_OK && scope == ZEUS_POWER_SCOPE_MODULE;
  }
  if (!o.no_cpus) {
    unsigned n = zeus_cpu_count();
    if (n > ZEUS_MAX_CPUS) n = ZEUS_MAX_CPUS;
    for (unsigned i = 0; i < n; i++) {
      cpu_state *c = &e->c[e->ncpu];
      zeus_cpu_zone z;
      if (zeus_cpu_zone_info(i, &z) != ZEUS_OK) break;
      snprintf(c->index, sizeof c->index, "%u", i);
      snprintf(c->name, sizeof c->name, "%s", z.name[0] ? z.name : "package");
      c->has_dram = z.has_dram;
      if (zeus_cpu_energy_range(i, &c->pkg_wrap_mj, &c->dram_wrap_mj)) c->pkg_wrap_mj = c->dram_wrap_mj = 0;
      e->ncpu++;
    }
  }
  if (e->ngpu) { /* the tick follower where a counter is slow (monitor's auto choice) */
    static const unsigned none[1];
    zeus_monitor_opts mo;
    zeus_monitor_opts_init(&mo);
    mo.devices = d;
    mo.cpu_indices = none;
    mo.num_cpu_indices = 0;
    mo.no_short_window_warning = true;
    bool any = false;
    if (zeus_monitor_open(&e->mon, &mo) == ZEUS_OK) {
      for (unsigned i = 0; i < e->ngpu; i++) any |= zeus_monitor_gpu_energy_source(e->mon, i) == ZEUS_ENERGY_SAMPLED;
      if (!any) {
        zeus_monitor_close(e->mon);
        e->mon = NULL;
      }
    }
  }
  /* A Jetson's rails, by themselves there and never elsewhere; unreadable rails are left out with
   * a warning that says why. */
  if (zeus_soc_jetson_available()) {
    if (zeus_soc_open(&e->soc) != ZEUS_OK) {
      zeus__log(ZEUS_LOG_WARN, "exporter", "this is a Jetson, but its power rails are not exported: %s",
                zeus_errmsg());
      e->soc = NULL;
    }
    for (int k = 0; e->soc && k < ZEUS_SOC_NUM_RAILS; k++) {
      zeus_soc_rail_desc rd;
      if (zeus_soc_rail_info(e->soc, (zeus_soc_rail)k, &rd) == ZEUS_OK)
        snprintf(e->rail[k].label, sizeof e->rail[k].label, "%s", rd.label);
    }
  }
  if (o.token && *o.token && !(e->token = zeus__strdup(o.token))) {
    zeus_exporter_close(e);
    return zeus__oom("opening the exporter");
  }
  pthread_mutex_lock(&e->mu);
  update_all(e);
  pthread_mutex_unlock(&e->mu);
  if (pthread_create(&e->sampler, NULL, sampler_main, e) != 0) {
    zeus_exporter_close(e);
    return zeus__error(ZEUS_ENOMEM, "cannot start the exporter's sampling thread");
  }
  e->sampler_started = true;
  if (!o.no_http && (rc = listen_on(e, o.host, o.port))) {
    zeus_exporter_close(e);
    return rc;
  }
  if (e->mhd)
    zeus__log(ZEUS_LOG_INFO, "exporter", "serving /metrics on %s port %d (%u GPUs, %u CPU packages)", o.host,
              e->port, e->ngpu, e->ncpu);
  *out = e;
  return ZEUS_OK;
}

int zeus_exporter_port(const zeus_exporter *e) { return e ? e->port : -1; }

void zeus_exporter_close(zeus_exporter *e) {
  if (!e) return;
  if (e->mhd) MHD_stop_daemon(e->mhd);
  zeus__http_guard_close(e->guard);
  if (e->sampler_started) {
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    pthread_join(e->sampler, NULL);
  }
  zeus_monitor_close(e->mon);
  zeus_soc_close(e->soc);
  free(e->g);
  free(e->token);
  free(e->grids);
  pthread_mutex_destroy(&e->mu);
  pthread_cond_destroy(&e->cv);
  free(e);
}
