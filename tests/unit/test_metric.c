/* metric: windows as Prometheus metrics (zeus/metric.h): the text a push sends, the push URL,
 * option checks, and the counter and gauge threads on simulated GPUs. Pushes here go to a port
 * where nothing listens (they fail; values must be kept); tests/e2e/pushgateway.sh pushes to a
 * real Pushgateway. */
#include <math.h>
#include <time.h>

#include "test_util.h"

#include <zeus.h>

/* Nothing listens on port 1 of the loopback address: every push fails at once. */
#define DEAD_URL "http://127.0.0.1:1"

typedef struct fixture {
  zeus_devices *dev;
  zeus_sim_node *node;
  zeus_sim_config cfg;
  zeus_monitor *mon;
} fixture;

static void fx_open(fixture *f, unsigned n, zeus_sim_clock_kind clock) {
  memset(f, 0, sizeof *f);
  f->cfg.num_gpus = n;
  f->cfg.clock = clock;
  zeus_devices_opts o = {.backend = "sim", .sim = &f->cfg, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&f->dev, &o));
  f->node = zeus_devices_sim_node(f->dev);
  static const unsigned none[1] = {0};
  zeus_monitor_opts mo = {.devices = f->dev, .cpu_indices = none, .num_cpu_indices = 0};
  assert_zeus_ok(zeus_monitor_open(&f->mon, &mo));
}

static void fx_close(fixture *f) {
  zeus_monitor_close(f->mon);
  zeus_devices_close(f->dev);
}

static zeus_metric *metric_open(fixture *f, zeus_metric_kind kind, zeus_metric_opts *extra) {
  zeus_metric_opts o;
  if (extra)
    o = *extra;
  else
    zeus_metric_opts_init(&o);
  o.url = o.url ? o.url : DEAD_URL;
  o.job = o.job ? o.job : "test";
  o.monitor = f->mon;
  o.timeout_s = 2;
  zeus_metric *m;
  assert_zeus_ok(zeus_metric_open(&m, kind, &o));
  return m;
}

static char *text_of(zeus_metric *m) {
  char *t;
  assert_zeus_ok(zeus_metric_text(m, &t));
  return t;
}

static void assert_has(const char *text, const char *line) {
  if (!strstr(text, line)) fail_msg("metrics text lacks\n  %s\ntext:\n%s", line, text);
}

/* The value of the sample line starting with `prefix` (the series' name and labels). */
static double value_of(const char *text, const char *prefix) {
  const char *p = strstr(text, prefix);
  if (!p) fail_msg("metrics text lacks %s:\n%s", prefix, text);
  return strtod(p + strlen(prefix), NULL);
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  nanosleep(&ts, NULL);
}

static void metric_histogram_text_counts_windows_into_buckets(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_metric_opts o;
  zeus_metric_opts_init(&o);
  static const double gb[] = {10, 100};
  static const double tb[] = {1, 2};
  o.gpu_buckets_j = gb;
  o.num_gpu_buckets = 2;
  o.time_buckets_s = tb;
  o.num_time_buckets = 2;
  zeus_metric *m = metric_open(&f, ZEUS_METRIC_ENERGY_HISTOGRAM, &o);
  char *t = text_of(m);
  assert_string_equal(t, ""); /* no window yet: no family */
  zeus_free(t);

  /* Two windows of one name (5 J and 50 J on GPU 0; 500 J on GPU 1), one of another. */
  zeus_measurement r = {.time_s = 1.5, .num_gpus = 2, .gpu_indices = {0, 1}, .gpu_energy_j = {5, 500}};
  assert_zeus_err(zeus_metric_record(m, "step \"a\"\\", &r), ZEUS_ENET, "Pushgateway " DEAD_URL);
  r.gpu_energy_j[0] = 50;
  r.time_s = 0.5;
  assert_zeus_err(zeus_metric_record(m, "step \"a\"\\", &r), ZEUS_ENET, NULL);
  r.gpu_energy_j[0] = 100; /* on the bound: counted in le="100" */
  assert_zeus_err(zeus_metric_record(m, "epoch", &r), ZEUS_ENET, NULL);

  t = text_of(m);
  assert_has(t,
             "# HELP energy_monitor_gpu_energy_joules GPU energy of each measurement window\n"
             "# TYPE energy_monitor_gpu_energy_joules histogram\n");
  const char *w = "window=\"step \\\"a\\\"\\\\\"";
  char line[512];
  snprintf(line, sizeof line, "energy_monitor_gpu_energy_joules_bucket{%s,index=\"0\",le=\"10\"} 1\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_gpu_energy_joules_bucket{%s,index=\"0\",le=\"100\"} 2\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_gpu_energy_joules_bucket{%s,index=\"0\",le=\"+Inf\"} 2\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_gpu_energy_joules_sum{%s,index=\"0\"} 55\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_gpu_energy_joules_count{%s,index=\"0\"} 2\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_gpu_energy_joules_bucket{%s,index=\"1\",le=\"100\"} 0\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_gpu_energy_joules_bucket{%s,index=\"1\",le=\"+Inf\"} 2\n", w);
  assert_has(t, line);
  assert_has(t, "energy_monitor_gpu_energy_joules_bucket{window=\"epoch\",index=\"0\",le=\"10\"} 0\n");
  assert_has(t, "energy_monitor_gpu_energy_joules_bucket{window=\"epoch\",index=\"0\",le=\"100\"} 1\n");
  /* The duration histogram: one label, window. */
  snprintf(line, sizeof line, "energy_monitor_window_duration_seconds_bucket{%s,le=\"1\"} 1\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_window_duration_seconds_bucket{%s,le=\"2\"} 2\n", w);
  assert_has(t, line);
  snprintf(line, sizeof line, "energy_monitor_window_duration_seconds_sum{%s} 2\n", w);
  assert_has(t, line);
  /* No CPU was measured: no CPU or DRAM family. */
  assert_null(strstr(t, "cpu_energy"));
  assert_null(strstr(t, "dram_energy"));
  zeus_free(t);
  zeus_metric_close(m);
  fx_close(&f);
}

static void metric_histogram_window_matches_monitor(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_metric *m = metric_open(&f, ZEUS_METRIC_ENERGY_HISTOGRAM, NULL);
  double e0;
  assert_zeus_ok(zeus_sim_true_energy(f.node, 0, &e0));
  assert_zeus_ok(zeus_metric_begin_window(m, "step"));
  assert_zeus_err(zeus_metric_begin_window(m, "step"), ZEUS_EEXIST, "'step' is already open");
  assert_zeus_ok(zeus_sim_idle(f.node, 2.0));
  double e1;
  assert_zeus_ok(zeus_sim_true_energy(f.node, 0, &e1));
  /* The push fails, the window is recorded and closed all the same. */
  assert_zeus_err(zeus_metric_end_window(m, "step"), ZEUS_ENET, DEAD_URL);
  assert_zeus_err(zeus_metric_end_window(m, "step"), ZEUS_ENOENT, "'step' is not open");
  char *t = text_of(m);
  assert_near(value_of(t, "energy_monitor_gpu_energy_joules_sum{window=\"step\",index=\"0\"} "), e1 - e0, 0.01);
  assert_near(value_of(t, "energy_monitor_window_duration_seconds_sum{window=\"step\"} "), 2.0, 1e-9);
  assert_near(value_of(t, "energy_monitor_gpu_energy_joules_count{window=\"step\",index=\"0\"} "), 1, 0);
  zeus_free(t);
  zeus_metric_close(m);
  fx_close(&f);
}

static void metric_push_url_encodes_job_and_labels(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_metric_opts o;
  zeus_metric_opts_init(&o);
  const char *names[] = {"instance", "path", "empty"};
  const char *values[] = {"node-3.a_b~", "a/b", ""};
  o.url = "http://127.0.0.1:9091//";
  o.job = "train job";
  o.label_names = names;
  o.label_values = values;
  o.num_labels = 3;
  zeus_metric *m = metric_open(&f, ZEUS_METRIC_POWER_GAUGE, &o);
  char *u;
  assert_zeus_ok(zeus_metric_push_url(m, &u));
  /* base64url("train job") = dHJhaW4gam9i, base64url("a/b") = YS9i; "" is "=". */
  assert_string_equal(u,
                      "http://127.0.0.1:9091/metrics/job@base64/dHJhaW4gam9i/instance/node-3.a_b~"
                      "/path@base64/YS9i/empty@base64/=");
  zeus_free(u);
  zeus_metric_close(m);
  fx_close(&f);
}

static void metric_open_rejects_bad_options(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1, ZEUS_SIM_CLOCK_VIRTUAL);
  zeus_metric_opts o;
  zeus_metric *m = NULL;
#define BAD(kind, code, needle)                                    \
  do {                                                             \
    o.monitor = f.mon;                                             \
    assert_zeus_err(zeus_metric_open(&m, kind, &o), code, needle); \
    zeus_metric_opts_init(&o);                                     \
    o.url = DEAD_URL;                                              \
    o.job = "j";                                                   \
  } while (0)
  zeus_metric_opts_init(&o);
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "Pushgateway URL: missing");
  o.url = "ftp://127.0.0.1";
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "expected http://HOST:PORT");
  o.url = "http://127.0.0.1:9091/?x=1";
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "without blanks, query or fragment");
  o.job = "";
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "job: expected a non-empty name");
  BAD((zeus_metric_kind)7, ZEUS_EINVAL, "unknown metric kind 7");
  const char *n1[] = {"window"}, *n2[] = {"1abc"}, *n3[] = {"a", "a"}, *v[] = {"x", "y"};
  o.label_names = n1, o.label_values = v, o.num_labels = 1;
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "grouping label 'window': reserved");
  o.label_names = n2, o.label_values = v, o.num_labels = 1;
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "name '1abc' is not");
  o.label_names = n3, o.label_values = v, o.num_labels = 2;
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "grouping label 'a': given twice");
  static const double dec[] = {10, 5}, nan_b[] = {NAN};
  o.gpu_buckets_j = dec, o.num_gpu_buckets = 2;
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL,
      "GPU energy buckets: expected strictly increasing bounds, got 5 after 10");
  o.dram_buckets_j = nan_b, o.num_dram_buckets = 1;
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "DRAM energy buckets: bound 0 is not a finite number");
  o.time_buckets_s = dec, o.num_time_buckets = 0;
  BAD(ZEUS_METRIC_ENERGY_HISTOGRAM, ZEUS_EINVAL, "duration buckets: expected at least one upper bound");
  o.update_period_s = 0.001;
  BAD(ZEUS_METRIC_ENERGY_COUNTER, ZEUS_EINVAL, "update period 0.001 s");
#undef BAD
  assert_null(m);
  /* A gauge records no energy; an empty or long window name is refused. */
  m = metric_open(&f, ZEUS_METRIC_POWER_GAUGE, NULL);
  zeus_measurement r = {0};
  assert_zeus_err(zeus_metric_record(m, "w", &r), ZEUS_EINVAL, "a power gauge records no energy");
  assert_zeus_err(zeus_metric_begin_window(m, ""), ZEUS_EINVAL, "window name");
  char longname[300];
  memset(longname, 'x', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  assert_zeus_err(zeus_metric_begin_window(m, longname), ZEUS_EINVAL, "got 299");
  assert_zeus_err(zeus_metric_end_window(m, "never"), ZEUS_ENOENT, "'never' is not open");
  zeus_metric_close(m);
  fx_close(&f);
}

/* The counter adds each period's energy (its pushes fail; nothing is lost) and the last partial
 * period at end_window: the total is the simulated GPUs' true energy over the window. */
static void metric_counter_adds_energy_over_time(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_WALL);
  zeus_metric_opts o;
  zeus_metric_opts_init(&o);
  o.update_period_s = 0.05;
  zeus_metric *m = metric_open(&f, ZEUS_METRIC_ENERGY_COUNTER, &o);
  double a0, b0, a1, b1;
  assert_zeus_ok(zeus_sim_true_energy(f.node, 0, &a0));
  assert_zeus_ok(zeus_sim_true_energy(f.node, 1, &b0));
  assert_zeus_ok(zeus_metric_begin_window(m, "train"));
  sleep_s(0.3);
  /* While the window is open, the counter already holds the ticks so far. */
  char *t = text_of(m);
  assert_has(t, "# TYPE energy_monitor_gpu_energy_joules_total counter\n");
  double mid = value_of(t, "energy_monitor_gpu_energy_joules_total{window=\"train\",index=\"0\"} ");
  assert_true(mid > 0);
  zeus_free(t);
  sleep_s(0.2);
  assert_zeus_err(zeus_metric_end_window(m, "train"), ZEUS_ENET, NULL);
  assert_zeus_ok(zeus_sim_true_energy(f.node, 0, &a1));
  assert_zeus_ok(zeus_sim_true_energy(f.node, 1, &b1));
  t = text_of(m);
  double g0 = value_of(t, "energy_monitor_gpu_energy_joules_total{window=\"train\",index=\"0\"} ");
  double g1 = value_of(t, "energy_monitor_gpu_energy_joules_total{window=\"train\",index=\"1\"} ");
  zeus_free(t);
  assert_true(g0 >= mid);
  /* Within 2 % of the truth (the counter misses only the instants between a window's end and
   * the next one's begin) and never more than it. */
  assert_true(g0 <= (a1 - a0) + 0.01 && g0 >= 0.98 * (a1 - a0));
  assert_true(g1 <= (b1 - b0) + 0.01 && g1 >= 0.98 * (b1 - b0));
  /* A second window of the same name adds to the same counter. */
  assert_zeus_ok(zeus_metric_begin_window(m, "train"));
  sleep_s(0.06);
  assert_zeus_err(zeus_metric_end_window(m, "train"), ZEUS_ENET, NULL);
  t = text_of(m);
  assert_true(value_of(t, "energy_monitor_gpu_energy_joules_total{window=\"train\",index=\"0\"} ") > g0);
  zeus_free(t);
  zeus_metric_close(m);
  fx_close(&f);
}

/* The gauge's thread sets each GPU's instant power in watts; close stops a window left open. */
static void metric_gauge_sets_power_in_watts(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2, ZEUS_SIM_CLOCK_WALL);
  zeus_metric_opts o;
  zeus_metric_opts_init(&o);
  o.update_period_s = 0.02;
  zeus_metric *m = metric_open(&f, ZEUS_METRIC_POWER_GAUGE, &o);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_instant_power(f.dev, 1, &mw));
  assert_zeus_ok(zeus_metric_begin_window(m, "serve"));
  assert_zeus_ok(zeus_metric_begin_window(m, "left-open"));
  char *t = NULL;
  for (int i = 0; i < 500; i++) { /* at most 5 s */
    t = text_of(m);
    if (strstr(t, "window=\"serve\",index=\"1\"") && strstr(t, "window=\"left-open\"")) break;
    zeus_free(t);
    t = NULL;
    sleep_s(0.01);
  }
  assert_non_null(t);
  assert_has(t, "# TYPE power_monitor_gpu_power_watts gauge\n");
  assert_near(value_of(t, "power_monitor_gpu_power_watts{window=\"serve\",index=\"1\"} "), mw / 1000.0, 1e-9);
  assert_true(mw > 0);
  zeus_free(t);
  assert_zeus_ok(zeus_metric_end_window(m, "serve"));
  zeus_metric_close(m); /* "left-open" still runs: close stops it */
  fx_close(&f);
}

int main(int argc, char **argv) {
  setenv("ZEUS_RAPL_ROOT", "/nonexistent-rapl-root", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(metric_histogram_text_counts_windows_into_buckets),
      cmocka_unit_test(metric_histogram_window_matches_monitor),
      cmocka_unit_test(metric_push_url_encodes_job_and_labels),
      cmocka_unit_test(metric_open_rejects_bad_options),
      cmocka_unit_test(metric_counter_adds_energy_over_time),
      cmocka_unit_test(metric_gauge_sets_power_in_watts),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
