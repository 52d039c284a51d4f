/* Grace Hopper (GH200) through the fake libnvidia-ml.so.1 with ZEUS_SIM_HARDWARE=gh200: NVML
 * refuses GPU-scope power there and answers the module scope (GPU + CPU + memory), and the nvml
 * backend falls back to it as the original does (zeus/device/gpu/nvidia.py,
 * _resolve_power_field_scope), says so once, and reports the scope. The ground truth is the
 * engine's (fakeNvmlTrueEnergy), which on this profile is the module's. */
#include "test_util.h"

#include <dlfcn.h>
#include <math.h>
#include <time.h>

#include <zeus.h>
#include <zeus/config.h>

#include "device/nvml_types.h"

typedef struct fake {
  void *lib;
  int (*RunWork)(unsigned, double);
  int (*Idle)(double);
  double (*TrueEnergy)(unsigned);
  double (*ClockNow)(void);
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t *);
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*GetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t *);
  nvmlReturn_t (*GetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long *);
} fake;

static void *need_sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) fail_msg("the fake NVML lacks %s", name);
  return p;
}

/* The instance the backend uses (same path: dlopen returns the loaded library). */
static void fake_load(fake *f) {
  memset(f, 0, sizeof *f);
  f->lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!f->lib) fail_msg("dlopen %s: %s", FAKE_NVML_PATH, dlerror());
#define S(field, name) *(void **)&f->field = need_sym(f->lib, name)
  S(RunWork, "fakeNvmlRunWork");
  S(Idle, "fakeNvmlIdle");
  S(TrueEnergy, "fakeNvmlTrueEnergy");
  S(ClockNow, "zeusSimClockNow");
  S(GetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
  S(GetPowerUsage, "nvmlDeviceGetPowerUsage");
  S(GetFieldValues, "nvmlDeviceGetFieldValues");
  S(GetTotalEnergyConsumption, "nvmlDeviceGetTotalEnergyConsumption");
#undef S
}

static void fake_unload(fake *f) {
  if (f->lib) dlclose(f->lib);
  f->lib = NULL;
}

static void reset_env(void) {
  static const char *const vars[] = {"ZEUS_SIM_GPUS", "ZEUS_SIM_MODEL_FILE", "ZEUS_SIM_CLOCK", "ZEUS_SIM_HARDWARE",
                                     "ZEUS_SIM_ENERGY_COUNTER", "FAKE_NVML_INJECT", "CUDA_VISIBLE_DEVICES",
                                     "ZEUS_GPU_BACKEND", "ZEUS_NVML_LIBRARY"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static zeus_devices *open_nvml(const char *hardware, unsigned gpus) {
  reset_env();
  if (hardware) setenv("ZEUS_SIM_HARDWARE", hardware, 1);
  char n[16];
  snprintf(n, sizeof n, "%u", gpus);
  setenv("ZEUS_SIM_GPUS", n, 1);
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = FAKE_NVML_PATH;
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

/* Counts the log lines that announce the module-scope fallback. */
static int fallback_lines, fallback_lines_gpu1;
static void count_fallback(int level, const char *module, const char *msg, void *ud) {
  (void)module;
  (void)ud;
  if (level <= ZEUS_LOG_WARN && strstr(msg, "refuses GPU-scope power") && strstr(msg, "module")) {
    fallback_lines++;
    if (strstr(msg, "GPU 1:")) fallback_lines_gpu1++;
  }
}

/* The idle module: the simulated GPU's 30 W idle plus the gh200 profile's 100 W for the Grace
 * CPU and its memory (assumed figures: src/device/simconfig.c). */
#define GH200_IDLE_MODULE_W 130.0

/* The fake answers as NVML on GH200 is taken to: the GPU scope of both power fields refused per
 * field (the call SUCCESS, the field NOT_SUPPORTED), GetPowerUsage NOT_SUPPORTED, the module
 * scope answered with the module's power, and the energy counter working. */
static void fake_nvml_gh200_refuses_gpu_scope_and_answers_module_scope(void **state) {
  (void)state;
  zeus_devices *d = open_nvml("gh200", 1);
  fake f;
  fake_load(&f);
  assert_int_equal(f.Idle(1.0), NVML_SUCCESS);
  nvmlDevice_t h;
  assert_int_equal(f.GetHandleByIndex(0, &h), NVML_SUCCESS);
  nvmlFieldValue_t v[4];
  memset(v, 0, sizeof v);
  v[0].fieldId = NVML_FI_DEV_POWER_INSTANT, v[0].scopeId = NVML_POWER_SCOPE_GPU;
  v[1].fieldId = NVML_FI_DEV_POWER_AVERAGE, v[1].scopeId = NVML_POWER_SCOPE_GPU;
  v[2].fieldId = NVML_FI_DEV_POWER_INSTANT, v[2].scopeId = NVML_POWER_SCOPE_MODULE;
  v[3].fieldId = NVML_FI_DEV_POWER_AVERAGE, v[3].scopeId = NVML_POWER_SCOPE_MODULE;
  assert_int_equal(f.GetFieldValues(h, 4, v), NVML_SUCCESS);
  assert_int_equal(v[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  assert_int_equal(v[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
  assert_int_equal(v[2].nvmlReturn, NVML_SUCCESS);
  assert_int_equal(v[3].nvmlReturn, NVML_SUCCESS);
  assert_near(v[2].value.uiVal / 1000.0, GH200_IDLE_MODULE_W, GH200_IDLE_MODULE_W * 0.0021); /* power_noise */
  assert_near(v[3].value.uiVal / 1000.0, GH200_IDLE_MODULE_W, 0.01);
  unsigned mw;
  assert_int_equal(f.GetPowerUsage(h, &mw), NVML_ERROR_NOT_SUPPORTED);
  unsigned long long mj;
  assert_int_equal(f.GetTotalEnergyConsumption(h, &mj), NVML_SUCCESS);
  zeus_devices_close(d);
  fake_unload(&f);
}

/* The backend reads module-scope power where the GPU scope is refused, reports the scope, and
 * logs the fallback once per GPU however many readings follow. */
static void nvml_gh200_falls_back_to_module_power_and_says_so_once_per_gpu(void **state) {
  (void)state;
  fallback_lines = fallback_lines_gpu1 = 0;
  zeus_set_log_callback(count_fallback, NULL);
  zeus_devices *d = open_nvml("gh200", 2);
  fake f;
  fake_load(&f);
  assert_int_equal(f.Idle(1.0), NVML_SUCCESS);
  zeus_power_scope sc = ZEUS_POWER_SCOPE_GPU;
  assert_zeus_ok(zeus_gpu_power_scope(d, 0, &sc));
  assert_int_equal(sc, ZEUS_POWER_SCOPE_MODULE);
  assert_string_equal(zeus_power_scope_name(sc), "module");
  for (int k = 0; k < 5; k++) {
    unsigned mw = 0;
    assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
    assert_near(mw / 1000.0, GH200_IDLE_MODULE_W, GH200_IDLE_MODULE_W * 0.0021);
    assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &mw));
    assert_near(mw / 1000.0, GH200_IDLE_MODULE_W, 0.01);
    assert_zeus_ok(zeus_gpu_instant_power(d, 1, &mw));
  }
  assert_zeus_ok(zeus_gpu_power_scope(d, 1, &sc));
  assert_int_equal(sc, ZEUS_POWER_SCOPE_MODULE);
  assert_int_equal(fallback_lines, 2); /* one for each GPU */
  assert_int_equal(fallback_lines_gpu1, 1);
  zeus_set_log_callback(NULL, NULL);
  zeus_devices_close(d);
  fake_unload(&f);
}

/* A discrete GPU keeps the GPU scope, with no fallback line (the fallback is not taken where the
 * GPU scope answers). */
static void nvml_h100_keeps_gpu_scope_without_a_fallback_line(void **state) {
  (void)state;
  fallback_lines = 0;
  zeus_set_log_callback(count_fallback, NULL);
  zeus_devices *d = open_nvml("h100", 1);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
  assert_near(mw / 1000.0, 30.0, 30.0 * 0.0021);
  zeus_power_scope sc = ZEUS_POWER_SCOPE_MODULE;
  assert_zeus_ok(zeus_gpu_power_scope(d, 0, &sc));
  assert_int_equal(sc, ZEUS_POWER_SCOPE_GPU);
  assert_string_equal(zeus_power_scope_name(sc), "gpu");
  assert_int_equal(fallback_lines, 0);
  zeus_set_log_callback(NULL, NULL);
  zeus_devices_close(d);
}

/* Under load the module's power and energy follow the engine's truth: the work's GPU power plus
 * the rest of the module, the counter (module energy, at its ticks) within one tick of the truth. */
static void nvml_gh200_module_power_and_energy_match_the_engine_truth(void **state) {
  (void)state;
  zeus_devices *d = open_nvml("gh200", 1);
  fake f;
  fake_load(&f);
  assert_int_equal(f.Idle(0.5), NVML_SUCCESS);
  double e0 = f.TrueEnergy(0);
  assert_int_equal(f.RunWork(0, 40), NVML_SUCCESS); /* 40 units x 0.05 s at 290 W on the GPU */
  assert_int_equal(f.Idle(0.25), NVML_SUCCESS);      /* past the counter's next tick */
  double e1 = f.TrueEnergy(0);
  /* the truth is the module's: the GPU's work and idle plus 100 W all the time */
  assert_near(e1 - e0, 40 * 0.05 * 290 + 0.25 * 30 + 100 * 2.25, 0.5);
  uint64_t mj;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  /* the counter moves at ~100 ms ticks: at most one tick of idle module power behind */
  assert_true(mj / 1000.0 <= f.TrueEnergy(0) + 1e-6);
  assert_true(mj / 1000.0 >= f.TrueEnergy(0) - 0.11 * GH200_IDLE_MODULE_W);
  /* while the GPU works, the module draws its 290 W plus the CPU and memory's 100 W */
  assert_int_equal(f.RunWork(0, 4), NVML_SUCCESS);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
  assert_near(mw / 1000.0, 390.0, 390.0 * 0.0021);
  zeus_devices_close(d);
  fake_unload(&f);
}

/* The monitor measures a window on the module: its energy is the module's truth over the window,
 * and its log file names the column as the module's. */
static void monitor_measures_module_energy_on_gh200(void **state) {
  (void)state;
  zeus_devices *d = open_nvml("gh200", 1);
  fake f;
  fake_load(&f);
  assert_int_equal(f.Idle(0.5), NVML_SUCCESS);
  static const unsigned none[1];
  char dir[512], log[600];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(log, sizeof log, "%s/windows.csv", dir);
  zeus_monitor_opts o = {.devices = d, .cpu_indices = none, .num_cpu_indices = 0, .log_file = log};
  zeus_monitor *m = NULL;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  assert_zeus_ok(zeus_monitor_begin_window(m, "step", false));
  double e0 = f.TrueEnergy(0);
  assert_int_equal(f.RunWork(0, 40), NVML_SUCCESS);
  assert_int_equal(f.Idle(1.0), NVML_SUCCESS);
  double e1 = f.TrueEnergy(0);
  zeus_measurement r;
  memset(&r, 0xff, sizeof r); /* every scope entry written by the monitor, none left over */
  assert_zeus_ok(zeus_monitor_window_state(m, "step", &r));
  assert_int_equal(r.gpu_power_scope[0], ZEUS_POWER_SCOPE_MODULE);
  memset(&r, 0xff, sizeof r);
  assert_zeus_ok(zeus_monitor_end_window(m, "step", false, &r));
  assert_int_equal(r.num_gpus, 1);
  assert_int_equal(r.gpu_power_scope[0], ZEUS_POWER_SCOPE_MODULE); /* the measurement says so */
  /* 580 J of GPU work, 30 J of GPU idle, 300 J of the rest of the module */
  assert_near(e1 - e0, 580 + 30 + 300, 2);
  assert_near(r.gpu_energy_j[0], e1 - e0, 0.03 * (e1 - e0));
  zeus_monitor_close(m);
  FILE *fp = fopen(log, "r");
  assert_non_null(fp);
  char header[256] = "";
  assert_non_null(fgets(header, sizeof header, fp));
  fclose(fp);
  assert_string_equal(header, "start_time,window_name,elapsed_time,module0_energy\n");
  unlink(log);
  rmdir(dir);
  zeus_devices_close(d);
  fake_unload(&f);
}

/* On an ordinary GPU (the fake's H100) a measurement's entries say the GPU scope, as before. */
static void monitor_measurement_keeps_gpu_scope_on_h100(void **state) {
  (void)state;
  zeus_devices *d = open_nvml("h100", 2);
  fake f;
  fake_load(&f);
  static const unsigned none[1];
  zeus_monitor_opts o = {.devices = d, .cpu_indices = none, .num_cpu_indices = 0};
  zeus_monitor *m = NULL;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  assert_zeus_ok(zeus_monitor_begin_window(m, "step", false));
  assert_int_equal(f.RunWork(0, 20), NVML_SUCCESS);
  assert_int_equal(f.Idle(0.5), NVML_SUCCESS);
  zeus_measurement r;
  memset(&r, 0xff, sizeof r);
  assert_zeus_ok(zeus_monitor_end_window(m, "step", false, &r));
  assert_int_equal(r.num_gpus, 2);
  assert_int_equal(r.gpu_power_scope[0], ZEUS_POWER_SCOPE_GPU);
  assert_int_equal(r.gpu_power_scope[1], ZEUS_POWER_SCOPE_GPU);
  assert_true(r.gpu_energy_j[0] > 200); /* the work measured on GPU 0 (20 x 0.05 s at ~290 W) */
  zeus_monitor_close(m);
  zeus_devices_close(d);
  fake_unload(&f);
}

#if ZEUS_HAVE_METRICS_PUSH /* an optional component (cmake/components.cmake) */
/* The pushed window metrics name a module's energy and power as the module's: the histogram's
 * energy_monitor_module_energy_joules (with the window's energy) and the gauge's
 * power_monitor_module_power_watts, never the gpu families. Nothing listens at the URL: the
 * push fails after the window was recorded, and the text is what it would have sent. */
static void metric_push_names_module_energy_and_power_on_gh200(void **state) {
  (void)state;
  zeus_devices *d = open_nvml("gh200", 1);
  fake f;
  fake_load(&f);
  static const unsigned none[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = none, .num_cpu_indices = 0};
  zeus_monitor *mon = NULL;
  assert_zeus_ok(zeus_monitor_open(&mon, &mo));
  zeus_metric_opts o;
  zeus_metric_opts_init(&o);
  o.url = "http://127.0.0.1:1";
  o.job = "test";
  o.monitor = mon;
  o.timeout_s = 2;
  zeus_metric *h = NULL;
  assert_zeus_ok(zeus_metric_open(&h, ZEUS_METRIC_ENERGY_HISTOGRAM, &o));
  assert_zeus_ok(zeus_monitor_begin_window(mon, "w", false));
  assert_int_equal(f.RunWork(0, 40), NVML_SUCCESS);
  assert_int_equal(f.Idle(1.0), NVML_SUCCESS);
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(mon, "w", false, &r));
  assert_near(r.gpu_energy_j[0], 910, 0.03 * 910); /* 580 J work, 30 J GPU idle, 300 J the rest */
  assert_int_equal(zeus_metric_record(h, "step", &r), ZEUS_ENET);
  char *t = NULL;
  assert_zeus_ok(zeus_metric_text(h, &t));
  if (!strstr(t, "# TYPE energy_monitor_module_energy_joules histogram\n") ||
      !strstr(t, "energy_monitor_module_energy_joules_count{window=\"step\",index=\"0\"} 1\n") ||
      strstr(t, "energy_monitor_gpu_energy_joules"))
    fail_msg("the histogram's text:\n%s", t);
  const char *sum = strstr(t, "energy_monitor_module_energy_joules_sum{window=\"step\",index=\"0\"} ");
  assert_non_null(sum);
  assert_near(strtod(strchr(sum, '}') + 1, NULL), r.gpu_energy_j[0], 1e-9);
  zeus_free(t);
  zeus_metric_close(h);

  /* The gauge: set at its thread's first tick, soon after begin (the module idles at 130 W). */
  assert_zeus_ok(zeus_metric_open(&h, ZEUS_METRIC_POWER_GAUGE, &o));
  assert_zeus_ok(zeus_metric_begin_window(h, "g"));
  const char *g = NULL;
  for (int i = 0; i < 500 && !g; i++) { /* at most 5 s */
    assert_zeus_ok(zeus_metric_text(h, &t));
    g = strstr(t, "power_monitor_module_power_watts{window=\"g\",index=\"0\"} ");
    if (!g) {
      zeus_free(t);
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  if (!g || strstr(t, "power_monitor_gpu_power_watts")) fail_msg("the gauge's text:\n%s", g ? t : "(no series)");
  assert_near(strtod(strchr(g, '}') + 1, NULL), GH200_IDLE_MODULE_W, 0.3);
  zeus_free(t);
  assert_zeus_ok(zeus_metric_end_window(h, "g"));
  zeus_metric_close(h);
  zeus_monitor_close(mon);
  zeus_devices_close(d);
  fake_unload(&f);
}
#endif

#if ZEUS_HAVE_EXPORTER /* an optional component (cmake/components.cmake) */
/* The value of the sample whose line starts with `prefix`, or NAN. */
static double sample_value(const char *text, const char *prefix) {
  size_t n = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, prefix, n) != 0) continue;
    const char *sp = strchr(p, '}');
    return sp ? strtod(sp + 1, NULL) : NAN;
  }
  return NAN;
}

/* The exporter publishes a module's power and energy as zeus_module_* series, labelled
 * power_scope="module" in zeus_gpu_info, and never as zeus_gpu_energy/power series. */
static void exporter_names_module_power_and_energy_as_the_module_on_gh200(void **state) {
  (void)state;
  zeus_devices *d = open_nvml("gh200", 1);
  fake f;
  fake_load(&f);
  zeus_exporter_opts o;
  zeus_exporter_opts_init(&o);
  o.devices = d;
  o.no_http = true;
  o.no_cpus = true;
  o.sample_interval_s = 10;
  zeus_exporter *e;
  assert_zeus_ok(zeus_exporter_open(&e, &o));
  assert_int_equal(f.RunWork(0, 20), NVML_SUCCESS);
  assert_int_equal(f.Idle(1.0), NVML_SUCCESS);
  char *text;
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  assert_non_null(strstr(text, ",energy_source=\"counter\",power_scope=\"module\"} 1\n"));
  assert_null(strstr(text, "zeus_gpu_energy_joules_total"));
  assert_null(strstr(text, "zeus_gpu_power_watts"));
  assert_null(strstr(text, "zeus_gpu_power_average_watts"));
  double ej = sample_value(text, "zeus_module_energy_joules_total{gpu=\"0\"");
  assert_true(ej <= f.TrueEnergy(0) + 1e-6 && ej >= f.TrueEnergy(0) - 0.11 * 390); /* the counter's ticks */
  assert_near(sample_value(text, "zeus_module_power_watts{gpu=\"0\""), GH200_IDLE_MODULE_W, 0.3);
  assert_near(sample_value(text, "zeus_gpu_power_limit_watts{gpu=\"0\""), 900, 0); /* the GPU's own */
  zeus_free(text);
  zeus_exporter_close(e);
  zeus_devices_close(d);
  fake_unload(&f);
}
#endif

/* The "sim" backend with the gh200 profile says module scope too, and its power is the module's. */
static void sim_gh200_profile_reports_module_scope_and_module_power(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_HARDWARE", "gh200", 1);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  zeus_devices_opts o = {0};
  o.backend = "sim";
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  zeus_power_scope sc = ZEUS_POWER_SCOPE_GPU;
  assert_zeus_ok(zeus_gpu_power_scope(d, 0, &sc));
  assert_int_equal(sc, ZEUS_POWER_SCOPE_MODULE);
  assert_zeus_ok(zeus_sim_idle(zeus_devices_sim_node(d), 1.0));
  unsigned mw;
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
  assert_near(mw / 1000.0, GH200_IDLE_MODULE_W, GH200_IDLE_MODULE_W * 0.0021);
  zeus_devices_close(d);
  reset_env();
  setenv("ZEUS_SIM_GPUS", "1", 1);
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_zeus_ok(zeus_gpu_power_scope(d, 0, &sc));
  assert_int_equal(sc, ZEUS_POWER_SCOPE_GPU);
  zeus_devices_close(d);
  reset_env();
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fake_nvml_gh200_refuses_gpu_scope_and_answers_module_scope),
      cmocka_unit_test(nvml_gh200_falls_back_to_module_power_and_says_so_once_per_gpu),
      cmocka_unit_test(nvml_h100_keeps_gpu_scope_without_a_fallback_line),
      cmocka_unit_test(nvml_gh200_module_power_and_energy_match_the_engine_truth),
      cmocka_unit_test(monitor_measures_module_energy_on_gh200),
      cmocka_unit_test(monitor_measurement_keeps_gpu_scope_on_h100),
#if ZEUS_HAVE_METRICS_PUSH
      cmocka_unit_test(metric_push_names_module_energy_and_power_on_gh200),
#endif
#if ZEUS_HAVE_EXPORTER /* an optional component (cmake/components.cmake) */
      cmocka_unit_test(exporter_names_module_power_and_energy_as_the_module_on_gh200),
#endif
      cmocka_unit_test(sim_gh200_profile_reports_module_scope_and_module_power),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
