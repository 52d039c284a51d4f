/* --carbon and --price of 'zeus monitor energy' (cli/grid_util.h). */
#include "grid_util.h"

#include <zeus/config.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

const char *cli_grid_carbon, *cli_grid_price, *cli_grid_price_label, *cli_grid_price_sector,
    *cli_grid_price_currency, *cli_grid_em_url, *cli_grid_openei_url, *cli_grid_emission_factor;
bool cli_grid_estimate;
long cli_grid_price_radius;
double cli_grid_poll_s = 60;

bool cli_grid_wanted(void) { return cli_grid_carbon || cli_grid_price; }

#if ZEUS_HAVE_GRID

enum { CARBON, PRICE, NUM_KINDS };

struct cli_grid {
  zeus_grid *g[NUM_KINDS];
  zeus_grid_monitor *gm[NUM_KINDS];
  bool ended[NUM_KINDS];
  zeus_grid_measurement r[NUM_KINDS];
  char currency[32];
};

static const char *const window_key = "zeus.monitor.energy";

/* "latlon:LAT,LON". */
static bool parse_place(const char *cmd, const char *opt, const char *v, double *lat, double *lon) {
  char *end = NULL;
  if (strncmp(v, "latlon:", 7) == 0) {
    *lat = strtod(v + 7, &end);
    if (end != v + 7 && *end == ',') {
      const char *q = end + 1;
      *lon = strtod(q, &end);
      if (end != q && *end == '\0' && *lat >= -90 && *lat <= 90 && *lon >= -180 && *lon <= 180) return true;
    }
  }
  cli_error(cmd, false, "%s '%s': expected latlon:LAT,LON (degrees, LAT in [-90, 90], LON in [-180, 180])", opt, v);
  return false;
}

void cli_grid_close(cli_grid *g) {
  if (!g) return;
  for (int k = 0; k < NUM_KINDS; k++) {
    zeus_grid_monitor_close(g->gm[k]);
    zeus_grid_close(g->g[k]);
  }
  free(g);
}

/* Opens the provider of kind k from the options; false after an error message. */
static bool open_provider(const char *cmd, int k, zeus_grid **out) {
  const char *opt = k == CARBON ? "--carbon" : "--price";
  zeus_grid_opts o;
  zeus_grid_opts_init(&o);
  if (!parse_place(cmd, opt, k == CARBON ? cli_grid_carbon : cli_grid_price, &o.lat, &o.lon)) return false;
  if (k == CARBON) {
    o.provider = ZEUS_GRID_ELECTRICITYMAPS;
    o.url = cli_grid_em_url;
    o.estimate = cli_grid_estimate;
    if (cli_grid_emission_factor) o.emission_factor_type = cli_grid_emission_factor;
  } else {
    o.provider = ZEUS_GRID_OPENEI;
    o.url = cli_grid_openei_url;
    o.label = cli_grid_price_label;
    if (cli_grid_price_sector) o.sector = cli_grid_price_sector;
    o.radius = (unsigned)cli_grid_price_radius;
    o.currency = cli_grid_price_currency;
  }
  if (zeus_grid_open(out, &o) != ZEUS_OK) {
    cli_error(cmd, true, "%s", opt);
    return false;
  }
  return true;
}

static bool check_price_label(const char *cmd) {
  if (cli_grid_price && !cli_grid_price_label) {
    cli_error(cmd, false, "--price needs --price-label LABEL (the OpenEI rate's label)");
    return false;
  }
  return true;
}

bool cli_grid_begin(const char *cmd, zeus_monitor *m, cli_grid **out) {
  *out = NULL;
  if (!cli_grid_wanted()) return true;
  if (!check_price_label(cmd)) return false;
  cli_grid *g = calloc(1, sizeof *g);
  if (!g) {
    cli_error(cmd, false, "out of memory");
    return false;
  }
  snprintf(g->currency, sizeof g->currency, "%s", cli_grid_price_currency ? cli_grid_price_currency : "USD");
  for (int k = 0; k < NUM_KINDS; k++) {
    const char *opt = k == CARBON ? "--carbon" : "--price";
    if (!(k == CARBON ? cli_grid_carbon : cli_grid_price)) continue;
    if (!open_provider(cmd, k, &g->g[k])) {
      cli_grid_close(g);
      return false;
    }
    zeus_grid_monitor_opts mo;
    zeus_grid_monitor_opts_init(&mo);
    mo.grid = g->g[k];
    mo.monitor = m;
    mo.poll_interval_s = cli_grid_poll_s;
    if (zeus_grid_monitor_open(&g->gm[k], &mo) != ZEUS_OK ||
        zeus_grid_monitor_begin_window(g->gm[k], window_key) != ZEUS_OK) {
      cli_error(cmd, true, "%s: cannot begin measuring", opt);
      cli_grid_close(g);
      return false;
    }
  }
  *out = g;
  return true;
}

void cli_grid_end(cli_grid *g) {
  if (!g) return;
  for (int k = 0; k < NUM_KINDS; k++) {
    if (!g->gm[k]) continue;
    if (zeus_grid_monitor_end_window(g->gm[k], window_key, &g->r[k]) == ZEUS_OK) {
      g->ended[k] = true;
    } else {
      memset(&g->r[k], 0, sizeof g->r[k]);
      g->r[k].error_code = ZEUS_EINTERNAL;
      snprintf(g->r[k].error, sizeof g->r[k].error, "%s", zeus_errmsg());
    }
  }
}

bool cli_grid_ok(const cli_grid *g) {
  if (!g) return true;
  for (int k = 0; k < NUM_KINDS; k++)
    if (g->gm[k] && !(g->ended[k] && g->r[k].valid)) return false;
  return true;
}

static json_t *per_index(unsigned n, const unsigned *idx, const double *v, const bool *valid) {
  json_t *o = json_object();
  char key[16];
  for (unsigned k = 0; o && k < n; k++) {
    if (valid && !valid[k]) continue;
    snprintf(key, sizeof key, "%u", idx[k]);
    json_object_set_new(o, key, json_real(v[k]));
  }
  return o;
}

void cli_grid_json(const cli_grid *g, json_t *doc) {
  if (!g || !doc) return;
  static const char *const names[NUM_KINDS][6] = {
      {"carbon_emission_g", "gpu_carbon_emission_g", "cpu_carbon_emission_g", "dram_carbon_emission_g",
       "carbon_emission_error", "carbon_intensity_url"},
      {"energy_cost", "gpu_energy_cost", "cpu_energy_cost", "dram_energy_cost", "energy_cost_error",
       "energy_price_url"}};
  for (int k = 0; k < NUM_KINDS; k++) {
    if (!g->gm[k]) continue;
    const zeus_grid_measurement *r = &g->r[k];
    const zeus_measurement *e = &r->energy;
    if (g->ended[k] && r->valid) {
      json_object_set_new(doc, names[k][0], json_real(r->total));
      json_object_set_new(doc, names[k][1], per_index(e->num_gpus, e->gpu_indices, r->gpu, NULL));
      json_object_set_new(doc, names[k][2], per_index(e->num_cpus, e->cpu_indices, r->cpu, NULL));
      json_object_set_new(doc, names[k][3], per_index(e->num_cpus, e->cpu_indices, r->dram, e->dram_valid));
    } else {
      json_object_set_new(doc, names[k][0], json_null());
      json_object_set_new(doc, names[k][4], json_string(r->error));
    }
    json_object_set_new(doc, names[k][5], json_string(zeus_grid_url(g->g[k])));
    if (k == PRICE) json_object_set_new(doc, "energy_cost_currency", json_string(g->currency));
  }
}

void cli_grid_text(const cli_grid *g, FILE *out) {
  if (!g) return;
  for (int k = 0; k < NUM_KINDS; k++) {
    if (!g->gm[k]) continue;
    const zeus_grid_measurement *r = &g->r[k];
    const zeus_measurement *e = &r->energy;
    const char *what = k == CARBON ? "carbon" : "cost";
    const char *unit = k == CARBON ? "g CO2eq" : g->currency;
    if (!(g->ended[k] && r->valid)) {
      fprintf(out, "  %s:  not measured: %s\n", what, r->error);
      continue;
    }
    fprintf(out, "  %s:  %.6g %s (", what, r->total, unit);
    for (unsigned i = 0; i < e->num_gpus; i++) fprintf(out, "%sGPU %u %.6g", i ? ", " : "", e->gpu_indices[i], r->gpu[i]);
    for (unsigned i = 0; i < e->num_cpus; i++)
      fprintf(out, "%sCPU %u %.6g", i || e->num_gpus ? ", " : "", e->cpu_indices[i], r->cpu[i]);
    fprintf(out, "; %u parts, from %s)\n", r->num_segments, zeus_grid_url(g->g[k]));
  }
}

struct cli_grid_fetcher {
  zeus_grid *g[NUM_KINDS];
  pthread_t thread;
  bool started, stop;
  pthread_mutex_t mu;
  pthread_cond_t cv;
};

/* Fetches every provider, then waits --grid-poll seconds (or for stop). zeus_grid_fetch logs
 * nothing itself; a failure is logged here, without the key (the library's message has none). */
static void fetch_all(cli_grid_fetcher *f) {
  for (int k = 0; k < NUM_KINDS; k++)
    if (f->g[k] && zeus_grid_fetch(f->g[k]) != ZEUS_OK) cli_error("exporter", true, "cannot fetch");
}

static void *fetch_main(void *arg) {
  cli_grid_fetcher *f = arg;
  pthread_mutex_lock(&f->mu);
  while (!f->stop) {
    pthread_mutex_unlock(&f->mu);
    fetch_all(f);
    pthread_mutex_lock(&f->mu);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    double until = (double)dl.tv_sec + dl.tv_nsec / 1e9 + cli_grid_poll_s;
    dl.tv_sec = (time_t)until;
    dl.tv_nsec = (long)((until - (double)dl.tv_sec) * 1e9);
    while (!f->stop && pthread_cond_timedwait(&f->cv, &f->mu, &dl) == 0) {
    }
  }
  pthread_mutex_unlock(&f->mu);
  return NULL;
}

bool cli_grid_fetch_start(const char *cmd, bool once, zeus_grid **out, size_t *out_n, cli_grid_fetcher **fp) {
  *fp = NULL;
  *out_n = 0;
  if (!cli_grid_wanted()) return true;
  if (!check_price_label(cmd)) return false;
  cli_grid_fetcher *f = calloc(1, sizeof *f);
  if (!f) {
    cli_error(cmd, false, "out of memory");
    return false;
  }
  pthread_mutex_init(&f->mu, NULL);
  pthread_cond_init(&f->cv, NULL);
  for (int k = 0; k < NUM_KINDS; k++) {
    if (!(k == CARBON ? cli_grid_carbon : cli_grid_price)) continue;
    if (!open_provider(cmd, k, &f->g[k])) {
      cli_grid_fetch_stop(f);
      return false;
    }
    out[(*out_n)++] = f->g[k];
  }
  if (once)
    fetch_all(f);
  else
    f->started = pthread_create(&f->thread, NULL, fetch_main, f) == 0;
  *fp = f;
  return true;
}

void cli_grid_fetch_stop(cli_grid_fetcher *f) {
  if (!f) return;
  if (f->started) {
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
  }
  for (int k = 0; k < NUM_KINDS; k++) zeus_grid_close(f->g[k]);
  pthread_mutex_destroy(&f->mu);
  pthread_cond_destroy(&f->cv);
  free(f);
}

#else /* !ZEUS_HAVE_GRID */

struct cli_grid {
  int unused;
};

bool cli_grid_begin(const char *cmd, zeus_monitor *m, cli_grid **out) {
  (void)m;
  *out = NULL;
  if (!cli_grid_wanted()) return true;
  cli_error(cmd, false, "%s: this zeus was built without ZEUS_WITH_GRID (libcurl)",
            cli_grid_carbon ? "--carbon" : "--price");
  return false;
}
void cli_grid_end(cli_grid *g) { (void)g; }
void cli_grid_json(const cli_grid *g, json_t *doc) {
  (void)g;
  (void)doc;
}
void cli_grid_text(const cli_grid *g, FILE *out) {
  (void)g;
  (void)out;
}
bool cli_grid_ok(const cli_grid *g) {
  (void)g;
  return true;
}
void cli_grid_close(cli_grid *g) { (void)g; }

struct cli_grid_fetcher {
  int unused;
};
bool cli_grid_fetch_start(const char *cmd, bool once, struct zeus_grid **out, size_t *out_n, cli_grid_fetcher **f) {
  (void)once;
  (void)out;
  *out_n = 0;
  *f = NULL;
  if (!cli_grid_wanted()) return true;
  cli_error(cmd, false, "%s: this zeus was built without ZEUS_WITH_GRID (libcurl)",
            cli_grid_carbon ? "--carbon" : "--price");
  return false;
}
void cli_grid_fetch_stop(cli_grid_fetcher *f) { (void)f; }

#endif
