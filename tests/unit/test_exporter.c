/* zeus exporter and the Prometheus text writer (src/metrics): the energy counters agree with the
 * simulated GPU's ground truth, never decrease (wrap-around, reset, failed reads, concurrent
 * scrapes), GPUs without a counter are integrated from power, RAPL wraps are counted, and the
 * HTTP endpoint answers with the right codes. The format itself is checked against Prometheus's
 * own promtool in tests/e2e/prometheus.sh. */
#include "test_util.h"

#include <arpa/inet.h>
#include <math.h>
#include <pthread.h>
#include <sys/socket.h>

#include <zeus.h>

#include "metrics/metrics.h"

/* ---- helpers ---- */

typedef struct fixture {
  zeus_sim_gpu_config gpus[8];
  zeus_sim_config cfg;
  zeus_devices *dev;
  zeus_sim_node *node;
} fixture;

static void fx_open(fixture *f, unsigned n, zeus_sim_clock_kind clock, bool counter) {
  memset(f, 0, sizeof *f);
  for (unsigned i = 0; i < n; i++) {
    f->gpus[i].model = ZEUS_SIM_DVFS;
    f->gpus[i].no_energy_counter = !counter;
  }
  f->cfg.num_gpus = n;
  f->cfg.gpus = f->gpus;
  f->cfg.clock = clock;
  zeus_devices_opts o = {.backend = "sim", .sim = &f->cfg, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&f->dev, &o));
  f->node = zeus_devices_sim_node(f->dev);
  assert_non_null(f->node);
}

static zeus_exporter *exp_open(zeus_devices *d, double interval_s) {
  zeus_exporter_opts o;
  zeus_exporter_opts_init(&o);
  o.devices = d;
  o.no_http = true;
  o.no_cpus = true;
  o.sample_interval_s = interval_s;
  zeus_exporter *e;
  assert_zeus_ok(zeus_exporter_open(&e, &o));
  return e;
}

/* The value of the first sample whose line starts with `prefix` (name and the start of its
 * labels), or NAN when there is none. */
static double sample_value(const char *text, const char *prefix) {
  size_t n = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, prefix, n) != 0) continue;
    const char *eol = strchr(p, '\n');
    const char *sp = eol ? eol : p + strlen(p);
    while (sp > p && sp[-1] != ' ') sp--;
    return strtod(sp, NULL);
  }
  return NAN;
}

static double scrape(zeus_exporter *e, const char *prefix) {
  char *text;
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  double v = sample_value(text, prefix);
  zeus_free(text);
  return v;
}

static double truth(fixture *f, unsigned g) {
  double j;
  assert_zeus_ok(zeus_sim_true_energy(f->node, g, &j));
  return j;
}

/* ---- the text writer ---- */

static void metrics_writer_escapes_labels_and_formats_values(void **state) {
  (void)state;
  zeus__metrics_writer w;
  zeus__metrics_writer_init(&w);
  zeus__metrics_family(&w, "zeus_x_total", "counter", "Help with a \\ and a\nnewline.");
  zeus__metrics_label l[] = {{"name", "A \"quoted\" \\ name\nnext"}, {"gpu", "0"}};
  zeus__metrics_sample(&w, "zeus_x_total", NULL, l, 2, 12);
  zeus__metrics_sample(&w, "zeus_x_total", NULL, NULL, 0, 0.1);
  zeus__metrics_sample(&w, "zeus_y", NULL, NULL, 0, NAN);
  zeus__metrics_sample(&w, "zeus_y", NULL, NULL, 0, -INFINITY);
  zeus__metrics_sample(&w, "zeus_y", "_sum", NULL, 0, 1.0 / 3.0);
  assert_int_equal(w.rc, 0);
  assert_string_equal(w.buf.data,
                      "# HELP zeus_x_total Help with a \\\\ and a\\nnewline.\n"
                      "# TYPE zeus_x_total counter\n"
                      "zeus_x_total{name=\"A \\\"quoted\\\" \\\\ name\\nnext\",gpu=\"0\"} 12\n"
                      "zeus_x_total 0.1\n"
                      "zeus_y NaN\n"
                      "zeus_y -Inf\n"
                      "zeus_y_sum 0.3333333333333333\n");
  assert_true(strtod("0.3333333333333333", NULL) == 1.0 / 3.0);
  zeus__metrics_writer_free(&w);
}

static void metrics_counter_survives_wrap_and_reset(void **state) {
  (void)state;
  zeus__metrics_counter c = {0};
  zeus__metrics_counter_update(&c, 990, 1000);
  assert_near(c.total, 990, 0);
  zeus__metrics_counter_update(&c, 995, 1000);
  assert_near(c.total, 995, 0);
  zeus__metrics_counter_update(&c, 5, 1000); /* wrapped at 1000: +10 */
  assert_near(c.total, 1005, 0);
  zeus__metrics_counter_update(&c, 5, 1000); /* unchanged */
  assert_near(c.total, 1005, 0);
  zeus__metrics_counter d = {0};
  zeus__metrics_counter_update(&d, 5000, 0);
  zeus__metrics_counter_update(&d, 7000, 0);
  zeus__metrics_counter_update(&d, 300, 0); /* a reset (driver reload): counted from zero */
  assert_near(d.total, 7300, 0);
  zeus__metrics_counter_update(&d, 400, 0);
  assert_near(d.total, 7400, 0);
}

static void metrics_histogram_buckets_are_cumulative(void **state) {
  (void)state;
  static const double bounds[] = {0.001, 0.01, 0.1};
  zeus__metrics_hist h;
  zeus__metrics_hist_init(&h, bounds, 3);
  zeus__metrics_hist_observe(&h, 0.0005);
  zeus__metrics_hist_observe(&h, 0.001); /* le is inclusive */
  zeus__metrics_hist_observe(&h, 0.05);
  zeus__metrics_hist_observe(&h, 3);
  zeus__metrics_writer w;
  zeus__metrics_writer_init(&w);
  zeus__metrics_label l[] = {{"route", "/x"}};
  zeus__metrics_hist_write(&w, "zeus_lat_seconds", l, 1, &h);
  assert_int_equal(w.rc, 0);
  assert_string_equal(w.buf.data,
                      "zeus_lat_seconds_bucket{route=\"/x\",le=\"0.001\"} 2\n"
                      "zeus_lat_seconds_bucket{route=\"/x\",le=\"0.01\"} 2\n"
                      "zeus_lat_seconds_bucket{route=\"/x\",le=\"0.1\"} 3\n"
                      "zeus_lat_seconds_bucket{route=\"/x\",le=\"+Inf\"} 4\n"
                      "zeus_lat_seconds_sum{route=\"/x\"} 3.0515\n"
                      "zeus_lat_seconds_count{route=\"/x\"} 4\n");
  zeus__metrics_writer_free(&w);
}

/* ---- the exporter ---- */

static void exporter_opts_init_and_bad_options(void **state) {
  (void)state;
  zeus_exporter_opts o;
  memset(&o, 0x5a, sizeof o);
  zeus_exporter_opts_init(&o);
  assert_string_equal(o.host, "127.0.0.1");
  assert_int_equal(o.port, 9401);
  assert_near(o.sample_interval_s, 0.1, 0);
  assert_null(o.devices);
  assert_null(o.token);
  assert_false(o.no_http);
  assert_false(o.no_cpus);
  zeus_exporter *e;
  o.port = 70000;
  assert_zeus_err(zeus_exporter_open(&e, &o), ZEUS_EINVAL, "port 70000");
  o.port = -1;
  o.sample_interval_s = 0.0001;
  assert_zeus_err(zeus_exporter_open(&e, &o), ZEUS_EINVAL, "sample interval");
  o.sample_interval_s = 0.1;
  o.request_timeout_s = 0.01;
  assert_zeus_err(zeus_exporter_open(&e, &o), ZEUS_EINVAL, "request timeout 0.01 s is outside [0.1, 3600] s");
  o.request_timeout_s = 0;
  o.max_connections = 200000;
  assert_zeus_err(zeus_exporter_open(&e, &o), ZEUS_EINVAL, "max_connections 200000");
  zeus_exporter_close(NULL);
}

static void exporter_energy_counter_matches_sim_truth(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_exporter *e = exp_open(f.dev, 10);
  double units[2] = {20, 0};
  assert_zeus_ok(zeus_sim_work_all(f.node, units, NULL));
  assert_zeus_ok(zeus_sim_idle(f.node, 2));
  char *text;
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  double e0 = sample_value(text, "zeus_gpu_energy_joules_total{gpu=\"0\",uuid=\"GPU-");
  double e1 = sample_value(text, "zeus_gpu_energy_joules_total{gpu=\"1\",");
  /* The counter is in whole mJ. */
  assert_near(e0, truth(&f, 0), 0.002);
  assert_near(e1, truth(&f, 1), 0.002);
  assert_true(e0 > 250); /* 20 units at 290 W, 0.05 s each */
  assert_near(sample_value(text, "zeus_gpu_power_limit_watts{gpu=\"0\""), 300, 0);
  assert_near(sample_value(text, "zeus_gpu_power_limit_min_watts{gpu=\"1\""), 100, 0);
  assert_near(sample_value(text, "zeus_gpu_sm_clock_hertz{gpu=\"0\""), 1740e6, 0);
  assert_near(sample_value(text, "zeus_gpu_power_watts{gpu=\"0\""), 30, 0); /* idle again */
  assert_non_null(strstr(text, "zeus_gpu_info{gpu=\"1\",uuid=\"GPU-5a1a0000-0000-4000-8000-000000000001\","
                               "name=\"Zeus Simulated GPU (DVFS)\",energy_source=\"counter\",power_scope=\"gpu\"} 1\n"));
  assert_non_null(strstr(text, "# TYPE zeus_gpu_energy_joules_total counter\n"));
  assert_null(strstr(text, "zeus_cpu_energy_joules_total")); /* no_cpus */
  zeus_free(text);
  /* A lower power limit shows at the next scrape. */
  assert_zeus_ok(zeus_gpu_set_power_limit(f.dev, 1, 150000));
  assert_near(scrape(e, "zeus_gpu_power_limit_watts{gpu=\"1\""), 150, 0);
  zeus_exporter_close(e);
  zeus_devices_close(f.dev);
}

typedef struct worker_arg {
  zeus_sim_node *node;
  double seconds_of_work;
} worker_arg;

/* The sample of family `fam` for GPU `gpu` and clock `clock`, or NAN when absent. */
static double lock_sample(const char *text, const char *fam, unsigned gpu, const char *clock) {
  char head[96], tail[64];
  snprintf(head, sizeof head, "%s{gpu=\"%u\",", fam, gpu);
  snprintf(tail, sizeof tail, ",clock=\"%s\"} ", clock);
  for (const char *p = strstr(text, head); p; p = strstr(p + 1, head)) {
    const char *eol = strchr(p, '\n'), *t = strstr(p, tail);
    if (t && (!eol || t < eol)) return strtod(t + strlen(tail), NULL);
  }
  return NAN;
}

/* The simulated GPU knows its locks, whoever made them: the exporter says 0 or 1 for each clock
 * and, while locked, the range in hertz. */
static void exporter_reports_locked_clocks_where_known(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_exporter *e = exp_open(f.dev, 10);
  char *text;
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  assert_non_null(strstr(text, "# TYPE zeus_gpu_clock_locked gauge\n"));
  for (unsigned g = 0; g < 2; g++) {
    assert_near(lock_sample(text, "zeus_gpu_clock_locked", g, "sm"), 0, 0);
    assert_near(lock_sample(text, "zeus_gpu_clock_locked", g, "memory"), 0, 0);
  }
  assert_null(strstr(text, "zeus_gpu_locked_clock_min_hertz")); /* nothing locked: no range */
  zeus_free(text);

  assert_zeus_ok(zeus_gpu_set_locked_clocks(f.dev, 0, 900, 1200));          /* through the handle */
  assert_zeus_ok(zeus_sim_gpu_set_memory_locked_clocks(f.node, 1, 5001, 5001)); /* behind its back */
  zeus_clock_lock l;
  assert_zeus_ok(zeus_gpu_get_locked_clocks(f.dev, 1, true, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_LOCKED);
  assert_int_equal(l.min_mhz, 5001);
  assert_string_equal(l.source, "device");
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  assert_near(lock_sample(text, "zeus_gpu_clock_locked", 0, "sm"), 1, 0);
  assert_near(lock_sample(text, "zeus_gpu_clock_locked", 0, "memory"), 0, 0);
  assert_near(lock_sample(text, "zeus_gpu_clock_locked", 1, "sm"), 0, 0);
  assert_near(lock_sample(text, "zeus_gpu_clock_locked", 1, "memory"), 1, 0);
  assert_near(lock_sample(text, "zeus_gpu_locked_clock_min_hertz", 0, "sm"), 900e6, 0);
  assert_near(lock_sample(text, "zeus_gpu_locked_clock_max_hertz", 0, "sm"), 1200e6, 0);
  assert_near(lock_sample(text, "zeus_gpu_locked_clock_max_hertz", 1, "memory"), 5001e6, 0);
  assert_true(isnan(lock_sample(text, "zeus_gpu_locked_clock_min_hertz", 0, "memory")));
  assert_true(isnan(lock_sample(text, "zeus_gpu_locked_clock_min_hertz", 1, "sm")));
  zeus_free(text);

  assert_zeus_ok(zeus_devices_restore(f.dev)); /* resets the lock this handle made */
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  assert_near(lock_sample(text, "zeus_gpu_clock_locked", 0, "sm"), 0, 0);
  assert_near(lock_sample(text, "zeus_gpu_clock_locked", 1, "memory"), 1, 0); /* not ours to reset */
  zeus_free(text);
  zeus_exporter_close(e);
  zeus_devices_close(f.dev);
}

static void exporter_integrates_power_without_counter(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_WALL, false);
  zeus_exporter *e = exp_open(f.dev, 0.005);
  char *text;
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  assert_non_null(strstr(text, "energy_source=\"power\""));
  double j0 = sample_value(text, "zeus_gpu_energy_joules_total{gpu=\"0\"");
  zeus_free(text);
  double t0 = truth(&f, 0);
  assert_zeus_ok(zeus_sim_work(f.node, 0, 20, NULL)); /* 1 s at 290 W (sleeps) */
  struct timespec ts = {0, 200 * 1000 * 1000};
  nanosleep(&ts, NULL);
  double j1 = scrape(e, "zeus_gpu_energy_joules_total{gpu=\"0\"");
  double want = truth(&f, 0) - t0;
  assert_true(want > 280);
  /* Sampled every 5 ms: each power edge costs at most a late sample's worth (generous for a loaded
   * machine). */
  if (fabs((j1 - j0) - want) > 0.1 * want)
    fail_msg("integrated %.3f J, truth %.3f J", j1 - j0, want);
  zeus_exporter_close(e);
  zeus_devices_close(f.dev);
}

static void exporter_failed_reads_are_counted_and_total_holds(void **state) {
  (void)state;
  /* The first four energy reads of GPU 0 succeed (probe, the monitor timing one to see whether
   * the counter is slow, first reading at open, first scrape), then every one fails. */
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  setenv("FAKE_NVML_INJECT", "nvmlDeviceGetTotalEnergyConsumption:UNKNOWN:0:4", 1);
  zeus_devices_opts o = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  zeus_exporter *e = exp_open(d, 10);
  double a = scrape(e, "zeus_gpu_energy_joules_total{gpu=\"0\"");
  assert_false(isnan(a));
  double err1 = scrape(e, "zeus_gpu_read_errors_total{gpu=\"0\"");
  assert_true(err1 >= 1);
  double b = scrape(e, "zeus_gpu_energy_joules_total{gpu=\"0\"");
  assert_near(b, a, 0); /* held, not dropped to zero */
  assert_near(scrape(e, "zeus_gpu_read_errors_total{gpu=\"0\""), err1 + 2, 0); /* one per scrape */
  assert_near(scrape(e, "zeus_gpu_read_errors_total{gpu=\"1\""), 0, 0);
  zeus_exporter_close(e);
  zeus_devices_close(d);
  unsetenv("FAKE_NVML_INJECT");
}

/* On GPUs that behave like the measured H100 (a 3.3 ms counter read, a 100 ms tick), the
 * exporter follows the counter with the monitor's sampler: a scrape reads no counter, and the
 * total moves between ticks and never goes back. */
static void exporter_h100_total_moves_between_ticks_without_counter_reads(void **state) {
  (void)state;
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_CLOCK", "wall", 1);
  setenv("ZEUS_SIM_HARDWARE", "h100", 1);
  zeus_devices_opts o = {.backend = "sim", .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  zeus_sim_node *n = zeus_devices_sim_node(d);
  assert_zeus_ok(zeus_sim_gpu_set_load(n, 0, true));
  zeus_exporter *e = exp_open(d, 10);
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  double prev = scrape(e, "zeus_gpu_energy_joules_total{gpu=\"0\"");
  int moved = 0;
  for (int k = 0; k < 10; k++) {
    ts.tv_nsec = 20000000; /* 20 ms: five scrapes per tick */
    nanosleep(&ts, NULL);
    double t0 = zeus_monotonic_s();
    double v = scrape(e, "zeus_gpu_energy_joules_total{gpu=\"0\"");
    assert_true(zeus_monotonic_s() - t0 < 0.05);
    assert_true(v >= prev);
    if (v > prev) moved++;
    prev = v;
  }
  assert_true(moved >= 8); /* a raw counter would move about twice in 200 ms */
  double truth;
  assert_zeus_ok(zeus_sim_true_energy(n, 0, &truth));
  assert_true(fabs(prev - truth) < 290 * 0.01);
  zeus_exporter_close(e);
  zeus_devices_close(d);
  unsetenv("ZEUS_SIM_HARDWARE");
  unsetenv("ZEUS_SIM_CLOCK");
}

static void write_rapl(const char *root, unsigned pkg, const char *sub, const char *name, unsigned long long uj,
                       unsigned long long range) {
  char dir[512], path[600], buf[64];
  snprintf(dir, sizeof dir, "%s/intel-rapl:%u%s", root, pkg, sub);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/energy_uj", dir);
  snprintf(buf, sizeof buf, "%llu\n", uj);
  zeus_test_write_file(path, buf);
  snprintf(path, sizeof path, "%s/max_energy_range_uj", dir);
  snprintf(buf, sizeof buf, "%llu\n", range);
  zeus_test_write_file(path, buf);
  snprintf(path, sizeof path, "%s/name", dir);
  zeus_test_write_file(path, name);
}

static void exporter_rapl_counters_go_on_across_wraparound(void **state) {
  (void)state;
  char root[256];
  zeus_test_tmpdir(root, sizeof root);
  setenv("ZEUS_RAPL_ROOT", root, 1);
  write_rapl(root, 0, "", "package-0\n", 999000000ull, 1000000000ull); /* 1 J before wrapping at 1000 J */
  write_rapl(root, 0, ":0", "dram\n", 5000000ull, 1000000000ull);
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_exporter_opts o;
  zeus_exporter_opts_init(&o);
  o.devices = f.dev;
  o.no_http = true;
  o.sample_interval_s = 10;
  zeus_exporter *e;
  assert_zeus_ok(zeus_exporter_open(&e, &o));
  assert_near(scrape(e, "zeus_cpu_energy_joules_total{cpu=\"0\",name=\"package-0\"}"), 999, 1e-9);
  assert_near(scrape(e, "zeus_cpu_dram_energy_joules_total{cpu=\"0\""), 5, 1e-9);
  write_rapl(root, 0, "", "package-0\n", 4000000ull, 1000000000ull); /* wrapped: +5 J */
  write_rapl(root, 0, ":0", "dram\n", 7500000ull, 1000000000ull);    /* +2.5 J */
  assert_near(scrape(e, "zeus_cpu_energy_joules_total{cpu=\"0\""), 1004, 1e-9);
  assert_near(scrape(e, "zeus_cpu_dram_energy_joules_total{cpu=\"0\""), 7.5, 1e-9);
  assert_near(scrape(e, "zeus_exporter_cpus"), 1, 0);
  zeus_exporter_close(e);
  zeus_devices_close(f.dev);
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1);
}

typedef struct scraper {
  zeus_exporter *e;
  int n, decreases, failures;
} scraper;

static void *scraper_main(void *arg) {
  scraper *s = arg;
  double last = -1;
  for (int i = 0; i < s->n; i++) {
    char *text;
    if (zeus_exporter_render(s->e, &text, NULL) != ZEUS_OK) {
      s->failures++;
      continue;
    }
    double v = sample_value(text, "zeus_gpu_energy_joules_total{gpu=\"0\"");
    if (isnan(v) || v < last) s->decreases++;
    last = v;
    zeus_free(text);
  }
  return NULL;
}

static void *sim_worker_main(void *arg) {
  worker_arg *w = arg;
  zeus_sim_work(w->node, 0, w->seconds_of_work / 0.05, NULL);
  return NULL;
}

static void exporter_concurrent_scrapes_never_see_a_decrease(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 8, ZEUS_SIM_CLOCK_WALL, true);
  zeus_exporter *e = exp_open(f.dev, 0.01);
  worker_arg w = {f.node, 0.3};
  pthread_t wt, t[4];
  scraper s[4];
  assert_int_equal(pthread_create(&wt, NULL, sim_worker_main, &w), 0);
  for (int i = 0; i < 4; i++) {
    s[i] = (scraper){e, 200, 0, 0};
    assert_int_equal(pthread_create(&t[i], NULL, scraper_main, &s[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  pthread_join(wt, NULL);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(s[i].failures, 0);
    assert_int_equal(s[i].decreases, 0);
  }
  /* Every scrape was counted once: 800 before this one. */
  assert_near(scrape(e, "zeus_exporter_scrapes_total"), 801, 0);
  assert_near(scrape(e, "zeus_exporter_gpus"), 8, 0);
  zeus_exporter_close(e);
  zeus_devices_close(f.dev);
}

/* One HTTP/1.0 request to 127.0.0.1:port; returns the status code and the whole reply in buf. */
static int http(int port, const char *request, char *buf, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
  size_t n = strlen(request);
  assert_int_equal(write(fd, request, n), (ssize_t)n);
  size_t got = 0;
  ssize_t r;
  while (got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) > 0) got += (size_t)r;
  buf[got] = '\0';
  close(fd);
  int code = 0;
  sscanf(buf, "HTTP/1.%*d %d", &code);
  return code;
}

static void exporter_serves_metrics_over_http_with_token(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL, true);
  zeus_exporter_opts o;
  zeus_exporter_opts_init(&o);
  o.devices = f.dev;
  o.port = -1;
  o.no_cpus = true;
  o.token = "s3cret";
  zeus_exporter *e;
  assert_zeus_ok(zeus_exporter_open(&e, &o));
  int port = zeus_exporter_port(e);
  assert_true(port > 0);
  static char buf[1 << 16];
  assert_int_equal(http(port, "GET /metrics HTTP/1.0\r\n\r\n", buf, sizeof buf), 401);
  assert_int_equal(http(port, "GET /metrics HTTP/1.0\r\nAuthorization: Bearer wrong!\r\n\r\n", buf, sizeof buf),
                   401);
  assert_int_equal(http(port, "GET /metrics HTTP/1.0\r\nAuthorization: Bearer s3cret\r\n\r\n", buf, sizeof buf),
                   200);
  assert_non_null(strstr(buf, "text/plain; version=0.0.4"));
  assert_non_null(strstr(buf, "\nzeus_gpu_energy_joules_total{gpu=\"1\","));
  assert_int_equal(http(port, "GET /nope HTTP/1.0\r\n\r\n", buf, sizeof buf), 404);
  assert_int_equal(http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi", buf, sizeof buf), 405);
  assert_non_null(strstr(buf, "GET, HEAD"));
  /* Port taken: a clear error. */
  zeus_exporter_opts o2 = o;
  o2.port = port;
  zeus_exporter *e2;
  assert_zeus_err(zeus_exporter_open(&e2, &o2), ZEUS_ENET, "cannot listen on 127.0.0.1");
  zeus_exporter_close(e);
  zeus_devices_close(f.dev);
}

int main(int argc, char **argv) {
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1); /* tests choose their CPUs */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(metrics_writer_escapes_labels_and_formats_values),
      cmocka_unit_test(metrics_counter_survives_wrap_and_reset),
      cmocka_unit_test(metrics_histogram_buckets_are_cumulative),
      cmocka_unit_test(exporter_opts_init_and_bad_options),
      cmocka_unit_test(exporter_energy_counter_matches_sim_truth),
      cmocka_unit_test(exporter_reports_locked_clocks_where_known),
      cmocka_unit_test(exporter_integrates_power_without_counter),
      cmocka_unit_test(exporter_failed_reads_are_counted_and_total_holds),
      cmocka_unit_test(exporter_h100_total_moves_between_ticks_without_counter_reads),
      cmocka_unit_test(exporter_rapl_counters_go_on_across_wraparound),
      cmocka_unit_test(exporter_concurrent_scrapes_never_see_a_decrease),
      cmocka_unit_test(exporter_serves_metrics_over_http_with_token),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
