/* The "nvml" backend against the fake libnvidia-ml.so.1 (tests/fake_nvml), which runs the
 * simulated-GPU engine: every reading and setting goes through NVML's C ABI and dlopen.
 * Each test sets the ZEUS_SIM_* / FAKE_NVML_* environment before opening the devices; the fake
 * reads it at its first nvmlInit. Tests reach the fake's helpers (fakeNvml*, zeusSimClockNow)
 * and NVML functions with dlopen of the same path, which returns the instance the backend uses. */
#include "test_util.h"

#include <dlfcn.h>
#include <math.h>

#include <zeus.h>

#include "device/nvml_types.h"


#define UUID(i) "GPU-5a1a0000-0000-4000-8000-00000000000" #i

/* ---- the fake, reached directly ---- */

typedef struct fake {
  void *lib;
  int (*RunWork)(unsigned, double);
  int (*Idle)(double);
  double (*TrueEnergy)(unsigned);
  unsigned long (*Calls)(unsigned);
  double (*ClockNow)(void);
  nvmlReturn_t (*Init)(void);
  nvmlReturn_t (*Shutdown)(void);
  nvmlReturn_t (*GetCount)(unsigned *);
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t *);
  nvmlReturn_t (*GetHandleByUUID)(const char *, nvmlDevice_t *);
  nvmlReturn_t (*GetName)(nvmlDevice_t, char *, unsigned);
  nvmlReturn_t (*GetClockInfo)(nvmlDevice_t, nvmlClockType_t, unsigned *);
  nvmlReturn_t (*GetPowerManagementLimit)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*SetPowerManagementLimit)(nvmlDevice_t, unsigned);
  nvmlReturn_t (*GetPersistenceMode)(nvmlDevice_t, nvmlEnableState_t *);
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*SetGpuLockedClocks)(nvmlDevice_t, unsigned, unsigned);
  nvmlReturn_t (*GetSupportedGraphicsClocks)(nvmlDevice_t, unsigned, unsigned *, unsigned *);
} fake;

static void *need_sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) fail_msg("the fake NVML lacks %s", name);
  return p;
}

static void fake_load(fake *f) {
  memset(f, 0, sizeof *f);
  f->lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!f->lib) fail_msg("dlopen %s: %s", FAKE_NVML_PATH, dlerror());
#define S(field, name) *(void **)&f->field = need_sym(f->lib, name)
  S(RunWork, "fakeNvmlRunWork");
  S(Idle, "fakeNvmlIdle");
  S(TrueEnergy, "fakeNvmlTrueEnergy");
  S(Calls, "fakeNvmlCalls");
  S(ClockNow, "zeusSimClockNow");
  S(Init, "nvmlInit_v2");
  S(Shutdown, "nvmlShutdown");
  S(GetCount, "nvmlDeviceGetCount_v2");
  S(GetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
  S(GetHandleByUUID, "nvmlDeviceGetHandleByUUID");
  S(GetName, "nvmlDeviceGetName");
  S(GetClockInfo, "nvmlDeviceGetClockInfo");
  S(GetPowerManagementLimit, "nvmlDeviceGetPowerManagementLimit");
  S(SetPowerManagementLimit, "nvmlDeviceSetPowerManagementLimit");
  S(GetPersistenceMode, "nvmlDeviceGetPersistenceMode");
  S(GetPowerUsage, "nvmlDeviceGetPowerUsage");
  S(SetGpuLockedClocks, "nvmlDeviceSetGpuLockedClocks");
  S(GetSupportedGraphicsClocks, "nvmlDeviceGetSupportedGraphicsClocks");
#undef S
}

static void fake_unload(fake *f) {
  if (f->lib) dlclose(f->lib);
  f->lib = NULL;
}

static nvmlDevice_t fake_dev(fake *f, unsigned i) {
  nvmlDevice_t h = NULL;
  assert_int_equal(f->GetHandleByIndex(i, &h), NVML_SUCCESS);
  return h;
}

static unsigned fake_sm_clock(fake *f, unsigned i) {
  unsigned mhz = 0;
  assert_int_equal(f->GetClockInfo(fake_dev(f, i), NVML_CLOCK_SM, &mhz), NVML_SUCCESS);
  return mhz;
}

static unsigned fake_power_limit(fake *f, unsigned i) {
  unsigned mw = 0;
  assert_int_equal(f->GetPowerManagementLimit(fake_dev(f, i), &mw), NVML_SUCCESS);
  return mw;
}

/* ---- environment, files ---- */

/* Clears every setting a test may use, so that tests also run in one process. */
static void reset_env(void) {
  static const char *const vars[] = {
      "ZEUS_SIM_GPUS",       "ZEUS_SIM_MODEL_FILE",   "ZEUS_SIM_UNITS_PER_ROW", "ZEUS_SIM_CLOCK",
      "ZEUS_SIM_ENERGY_COUNTER", "ZEUS_SIM_COUNTER_PERIOD_MS", "ZEUS_SIM_HARDWARE", "ZEUS_SIM_VARIATION", "FAKE_NVML_LOG",
      "FAKE_NVML_INJECT",    "FAKE_NVML_INIT_ERROR",  "CUDA_VISIBLE_DEVICES",   "CUDA_DEVICE_ORDER",
      "ZEUS_GPU_BACKEND",    "ZEUS_NVML_LIBRARY",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static void set_gpus(unsigned n) {
  char v[16];
  snprintf(v, sizeof v, "%u", n);
  setenv("ZEUS_SIM_GPUS", v, 1);
}

static zeus_devices *open_nvml(void) {
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = FAKE_NVML_PATH;
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "nvml");
  return d;
}

/* A temporary folder with a setter log in it, named in FAKE_NVML_LOG. */
typedef struct scratch {
  char dir[512];
  char log[600];
  char model[600];
} scratch;

static void scratch_init(scratch *s) {
  zeus_test_tmpdir(s->dir, sizeof s->dir);
  snprintf(s->log, sizeof s->log, "%s/nvml.log", s->dir);
  snprintf(s->model, sizeof s->model, "%s/model.json", s->dir);
  setenv("FAKE_NVML_LOG", s->log, 1);
}

static void scratch_free(scratch *s) {
  unlink(s->log);
  unlink(s->model);
  rmdir(s->dir);
}

/* The whole log ("" when nothing was logged); the caller frees it. */
static char *read_log(const scratch *s) {
  FILE *f = fopen(s->log, "r");
  if (!f) return strdup("");
  char *buf = calloc(1, 65536);
  size_t n = fread(buf, 1, 65535, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void assert_log(const scratch *s, const char *expected) {
  char *got = read_log(s);
  if (strcmp(got, expected) != 0) {
    print_error("setter log:\n%s---- expected:\n%s----\n", got, expected);
    free(got);
    fail();
  }
  free(got);
}

/* ---- identity and static properties ---- */

static void nvml_reports_count_names_and_uuids_of_the_simulated_gpus(void **state) {
  (void)state;
  reset_env();
  set_gpus(3);
  zeus_devices *d = open_nvml();
  assert_int_equal(zeus_gpu_count(d), 3);
  for (unsigned i = 0; i < 3; i++) {
    char name[ZEUS_NAME_LEN], uuid[ZEUS_NAME_LEN], want[64];
    assert_zeus_ok(zeus_gpu_name(d, i, name, sizeof name));
    assert_string_equal(name, "Zeus Simulated GPU (DVFS)");
    assert_zeus_ok(zeus_gpu_uuid(d, i, uuid, sizeof uuid));
    snprintf(want, sizeof want, "GPU-5a1a0000-0000-4000-8000-%012x", i);
    assert_string_equal(uuid, want);
  }
  assert_zeus_err(zeus_gpu_name(d, 3, (char[8]){0}, 8), ZEUS_ENOENT, "GPU 3");
  zeus_devices_close(d);
}

static void nvml_names_and_power_limits_come_from_the_model_file(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  zeus_test_write_file(s.model,
                       "{\"gpus\": [{\"name\": \"Alpha 40GB\", \"min_power_limit_w\": 120, \"max_power_limit_w\": 280,"
                       " \"default_power_limit_w\": 250}, {\"name\": \"Beta\"}]}");
  setenv("ZEUS_SIM_MODEL_FILE", s.model, 1);
  zeus_devices *d = open_nvml();
  assert_int_equal(zeus_gpu_count(d), 2);
  char name[ZEUS_NAME_LEN];
  assert_zeus_ok(zeus_gpu_name(d, 0, name, sizeof name));
  assert_string_equal(name, "Alpha 40GB");
  assert_zeus_ok(zeus_gpu_name(d, 1, name, sizeof name));
  assert_string_equal(name, "Beta");
  unsigned lo, hi, def, cur;
  assert_zeus_ok(zeus_gpu_power_limit_constraints(d, 0, &lo, &hi, &def));
  assert_int_equal(lo, 120000);
  assert_int_equal(hi, 280000);
  assert_int_equal(def, 250000);
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &cur));
  assert_int_equal(cur, 250000);
  assert_zeus_ok(zeus_gpu_power_limit_constraints(d, 1, &lo, &hi, &def));
  assert_int_equal(lo, 100000);
  assert_int_equal(hi, 300000);
  assert_int_equal(def, 300000);
  zeus_devices_close(d);
  scratch_free(&s);
}

static void nvml_energy_counter_is_supported_by_default(void **state) {
  (void)state;
  reset_env();
  zeus_devices *d = open_nvml();
  bool ok = false;
  assert_zeus_ok(zeus_gpu_energy_counter_supported(d, 0, &ok));
  assert_true(ok);
  uint64_t mj = 1;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_int_equal(mj, 0); /* nothing has run and no virtual time has passed */
  zeus_devices_close(d);
}

static void nvml_supported_clocks_follow_the_count_protocol(void **state) {
  (void)state;
  reset_env();
  zeus_devices *d = open_nvml();
  unsigned mem[4] = {0};
  size_t n = 0;
  assert_zeus_err(zeus_gpu_supported_memory_clocks(d, 0, mem, &n), ZEUS_ERANGE, "");
  assert_int_equal(n, 1);
  n = 4;
  assert_zeus_ok(zeus_gpu_supported_memory_clocks(d, 0, mem, &n));
  assert_int_equal(n, 1);
  assert_int_equal(mem[0], 7251);

  unsigned small[4];
  n = 4;
  assert_zeus_err(zeus_gpu_supported_graphics_clocks(d, 0, 7251, small, &n), ZEUS_ERANGE, "103");
  assert_int_equal(n, 103); /* (1740 - 210) / 15 + 1 */
  unsigned all[200];
  n = 200;
  assert_zeus_ok(zeus_gpu_supported_graphics_clocks(d, 0, 7251, all, &n));
  assert_int_equal(n, 103);
  assert_int_equal(all[0], 1740);
  assert_int_equal(all[102], 210);
  for (size_t k = 1; k < n; k++) assert_true(all[k] < all[k - 1]);
  n = 200;
  assert_zeus_err(zeus_gpu_supported_graphics_clocks(d, 0, 5000, all, &n), ZEUS_ENOENT, "5000");
  zeus_devices_close(d);
}

/* ---- readings against the engine ---- */

static void nvml_energy_and_power_equal_the_engine_after_work(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  zeus_test_write_file(s.model, "{\"gpus\": [{\"idle_power_w\": 42}, {\"idle_power_w\": 42}]}");
  setenv("ZEUS_SIM_MODEL_FILE", s.model, 1);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  assert_int_equal(f.RunWork(0, 10), NVML_SUCCESS); /* 10 units x 0.05 s at 290 W */
  double j0 = f.TrueEnergy(0), j1 = f.TrueEnergy(1);
  assert_near(j0, 145.0, 1e-9);
  assert_near(j1, 0.5 * 42, 1e-9); /* GPU 1 idled meanwhile */
  uint64_t mj;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_int_equal(mj, (uint64_t)floor(j0 * 1000.0));
  assert_zeus_ok(zeus_gpu_total_energy(d, 1, &mj));
  assert_int_equal(mj, (uint64_t)floor(j1 * 1000.0));
  unsigned mw;
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
  assert_int_equal(mw, 42000); /* the work has finished: idle power */
  assert_int_equal(f.Idle(2.0), NVML_SUCCESS);
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_int_equal(mj, (uint64_t)floor(f.TrueEnergy(0) * 1000.0));
  assert_near(f.TrueEnergy(0), 145.0 + 2 * 42, 1e-9);
  zeus_devices_close(d);
  fake_unload(&f);
  scratch_free(&s);
}

/* Instant and 1-second average power through GetFieldValues, the memory domain unsupported,
 * temperature rising with power, current clocks following locks, architecture and versions. */
/* ZEUS_SIM_HARDWARE=h100 reaches the fake library, built from the same engine: a counter read
 * costs 3.3 ms of the node's clock, the counter moves only at ~100 ms ticks (so a 50 ms window of
 * the raw counter is far from the truth), and the SM clock read-back lags a lock. */
static void nvml_h100_profile_ticks_costs_and_lags_through_the_fake(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_HARDWARE", "h100", 1);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  assert_int_equal(f.Idle(1.0), NVML_SUCCESS);
  double t0 = f.ClockNow();
  uint64_t mj0, mj1;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj0));
  assert_near(f.ClockNow() - t0, 3.3e-3, 1e-9);
  unsigned worst_zero = 0;
  for (int k = 0; k < 10; k++) { /* 50 ms windows: the counter often does not move */
    double e0 = f.TrueEnergy(0);
    assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj0));
    assert_int_equal(f.Idle(0.05), NVML_SUCCESS);
    double e1 = f.TrueEnergy(0);
    assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj1));
    assert_near(e1 - e0, 30 * 0.0533, 1e-6); /* idle power over the window and one read */
    if (mj1 == mj0) worst_zero++;
  }
  assert_true(worst_zero >= 2);
  unsigned sm = 0;
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 870, 870));
  assert_int_equal(f.GetClockInfo(fake_dev(&f, 0), NVML_CLOCK_SM, &sm), NVML_SUCCESS);
  assert_int_equal(sm, 1740); /* the read-back waits for the next tick */
  assert_int_equal(f.Idle(0.11), NVML_SUCCESS);
  assert_int_equal(f.GetClockInfo(fake_dev(&f, 0), NVML_CLOCK_SM, &sm), NVML_SUCCESS);
  assert_int_equal(sm, 870);
  zeus_devices_close(d);
  fake_unload(&f);
  reset_env();
}

static void nvml_power_domains_temperature_clocks_and_versions(void **state) {
  (void)state;
  reset_env();
  set_gpus(1);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  unsigned idle_w = 30, mw, avg, c_idle, c_busy;
  assert_int_equal(f.Idle(2.0), NVML_SUCCESS);
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_INSTANT, &mw));
  assert_int_equal(mw, idle_w * 1000);
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &avg));
  assert_int_equal(avg, idle_w * 1000);
  assert_zeus_ok(zeus_gpu_temperature(d, 0, &c_idle));
  assert_int_equal(c_idle, 35);
  /* Half a second of work at 290 W right before the reading: the last second's mean is their
   * average with half a second of idle power. */
  assert_int_equal(f.RunWork(0, 10), NVML_SUCCESS);
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &avg));
  assert_int_equal(avg, (290 + 30) * 1000 / 2);
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_INSTANT, &mw));
  assert_int_equal(mw, 30000); /* the work has finished */
  assert_zeus_ok(zeus_gpu_temperature(d, 0, &c_busy));
  assert_true(c_busy > c_idle);
  assert_zeus_err(zeus_gpu_power(d, 0, ZEUS_POWER_MEMORY_AVERAGE, &mw), ZEUS_ENOTSUP, "memory");
  assert_zeus_err(zeus_gpu_power(d, 0, (zeus_power_domain)7, &mw), ZEUS_EINVAL, "unknown power domain");

  unsigned sm, mem;
  assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &sm, &mem));
  assert_int_equal(sm, 1740);
  assert_int_equal(mem, 7251);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1005, 1005));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 5001, 5001));
  assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &sm, &mem));
  assert_int_equal(sm, 1005);
  assert_int_equal(mem, 5001);
  assert_zeus_ok(zeus_devices_restore(d));
  assert_zeus_ok(zeus_gpu_current_clocks(d, 0, NULL, &mem));
  assert_int_equal(mem, 7251);

  unsigned arch;
  assert_zeus_ok(zeus_gpu_architecture(d, 0, &arch));
  assert_int_equal(arch, 7);
  assert_string_equal(zeus_gpu_architecture_name(arch), "Ampere");
  assert_string_equal(zeus_gpu_architecture_name(9), "Hopper");
  assert_string_equal(zeus_gpu_architecture_name(0xffffffffu), "unknown");
  char ver[96];
  assert_zeus_ok(zeus_devices_driver_version(d, ver, sizeof ver));
  assert_string_equal(ver, "555.42.06-zeus-fake");
  assert_zeus_ok(zeus_devices_library_version(d, ver, sizeof ver));
  assert_string_equal(ver, "12.555.42.06-zeus-fake");
  zeus_devices_close(d);
  fake_unload(&f);
}

/* A driver without the POWER_INSTANT field (or GetFieldValues) falls back to GetPowerUsage for
 * instant power, once, and stops asking for the field; the average domain stays unsupported. */
static void nvml_instant_power_falls_back_to_power_usage(void **state) {
  (void)state;
  reset_env();
  set_gpus(1);
  setenv("FAKE_NVML_INJECT", "nvmlDeviceGetFieldValues:NOT_SUPPORTED", 1);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  unsigned mw;
  unsigned long before = f.Calls(0);
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
  assert_int_equal(mw, 30000);
  assert_int_equal(f.Calls(0) - before, 2); /* the field, then GetPowerUsage */
  before = f.Calls(0);
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw));
  assert_int_equal(f.Calls(0) - before, 1); /* straight to GetPowerUsage */
  assert_zeus_err(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &mw), ZEUS_ENOTSUP, "NOT_SUPPORTED");
  zeus_devices_close(d);
  fake_unload(&f);
}

static void nvml_backend_clock_is_the_simulated_clock(void **state) {
  (void)state;
  reset_env();
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  assert_near(zeus_devices_now(d), f.ClockNow(), 0);
  assert_near(zeus_devices_now(d), 0.0, 0);
  assert_int_equal(f.RunWork(0, 10), NVML_SUCCESS);
  assert_near(zeus_devices_now(d), 0.5, 1e-12);
  assert_int_equal(f.Idle(1.25), NVML_SUCCESS);
  assert_near(zeus_devices_now(d), 1.75, 1e-12);
  assert_near(zeus_devices_now(d), f.ClockNow(), 0);
  zeus_devices_close(d);
  fake_unload(&f);
}

/* ---- setters ---- */

static void nvml_setters_reach_the_engine_and_are_logged_in_order(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  assert_int_equal(fake_sm_clock(&f, 0), 1740);
  double t0 = f.ClockNow();
  assert_int_equal(f.RunWork(0, 1), NVML_SUCCESS);
  double full_speed = f.ClockNow() - t0;

  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 150000));
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 150000);
  assert_int_equal(fake_power_limit(&f, 0), 150000);
  /* 120 + 170 x^3 <= 150 W caps the clock at 975 MHz, so a unit of work takes longer. */
  assert_int_equal(fake_sm_clock(&f, 0), 975);
  t0 = f.ClockNow();
  assert_int_equal(f.RunWork(0, 1), NVML_SUCCESS);
  assert_true(f.ClockNow() - t0 > full_speed * 1.1);

  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 210, 900));
  assert_int_equal(fake_sm_clock(&f, 0), 900);
  assert_zeus_ok(zeus_gpu_reset_locked_clocks(d, 0));
  assert_int_equal(fake_sm_clock(&f, 0), 975);

  bool on = false;
  assert_zeus_ok(zeus_gpu_set_persistence_mode(d, 0, true));
  assert_zeus_ok(zeus_gpu_get_persistence_mode(d, 0, &on));
  assert_true(on);
  nvmlEnableState_t mode = 0;
  assert_int_equal(f.GetPersistenceMode(fake_dev(&f, 0), &mode), NVML_SUCCESS);
  assert_int_equal(mode, NVML_FEATURE_ENABLED);

  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 7251, 7251));
  assert_zeus_ok(zeus_gpu_reset_memory_locked_clocks(d, 0));
  assert_zeus_err(zeus_gpu_set_locked_clocks(d, 0, 1200, 600), ZEUS_EINVAL, "min <= max");

  assert_log(&s,
             "nvmlDeviceSetPowerManagementLimit 0 150000 -> 0\n"
             "nvmlDeviceSetGpuLockedClocks 0 210 900 -> 0\n"
             "nvmlDeviceResetGpuLockedClocks 0 -> 0\n"
             "nvmlDeviceSetPersistenceMode 0 1 -> 0\n"
             "nvmlDeviceSetMemoryLockedClocks 0 7251 7251 -> 0\n"
             "nvmlDeviceResetMemoryLockedClocks 0 -> 0\n");
  zeus_devices_close(d);
  fake_unload(&f);
  scratch_free(&s);
}

static unsigned fake_mem_clock(fake *f, unsigned i) {
  unsigned mhz = 0;
  assert_int_equal(f->GetClockInfo(fake_dev(f, i), NVML_CLOCK_MEM, &mhz), NVML_SUCCESS);
  return mhz;
}

/* zeus_gpu_reset_all_clocks on NVML is its two resets (NVML has no call for both): both clocks back
 * to their defaults, both locks known unlocked, nothing left for the close to put back. */
static void nvml_reset_all_clocks_resets_sm_and_memory_locks(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  unsigned sm0 = fake_sm_clock(&f, 0), mem0 = fake_mem_clock(&f, 0);
  unsigned mem_lo = mem0 / 2; /* the engine lowers the memory clock to a lock below it */
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 210, 900));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, mem_lo, mem_lo));
  assert_int_equal(fake_sm_clock(&f, 0), 900);
  assert_int_equal(fake_mem_clock(&f, 0), mem_lo);
  unsigned long before = f.Calls(0);
  assert_zeus_ok(zeus_gpu_reset_all_clocks(d, 0));
  assert_int_equal(f.Calls(0) - before, 2);
  assert_int_equal(fake_sm_clock(&f, 0), sm0);
  assert_int_equal(fake_mem_clock(&f, 0), mem0);
  zeus_clock_lock l;
  for (int m = 0; m < 2; m++) {
    assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, m == 1, &l));
    assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
    assert_string_equal(l.source, "handle");
  }
  zeus_devices_close(d);
  char *log = read_log(&s);
  char want[512];
  snprintf(want, sizeof want,
           "nvmlDeviceSetGpuLockedClocks 0 210 900 -> 0\n"
           "nvmlDeviceSetMemoryLockedClocks 0 %u %u -> 0\n"
           "nvmlDeviceResetGpuLockedClocks 0 -> 0\n"
           "nvmlDeviceResetMemoryLockedClocks 0 -> 0\n",
           mem_lo, mem_lo);
  assert_string_equal(log, want);
  free(log);
  fake_unload(&f);
  scratch_free(&s);
}

/* A GPU whose memory clock cannot be locked (NOT_SUPPORTED) has its SM lock reset and no failure,
 * where the one-domain memory reset says ZEUS_ENOTSUP; a real failure of the SM reset is returned
 * with its words, the memory reset still made and that lock alone counted as unlocked. */
static void nvml_reset_all_clocks_skips_unsupported_memory_and_reports_sm_failure(void **state) {
  (void)state;
  reset_env();
  setenv("FAKE_NVML_INJECT", "nvmlDeviceResetMemoryLockedClocks:NOT_SUPPORTED:0", 1);
  set_gpus(2);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  unsigned sm0 = fake_sm_clock(&f, 0);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 210, 900));
  assert_zeus_err(zeus_gpu_reset_memory_locked_clocks(d, 0), ZEUS_ENOTSUP, "NOT_SUPPORTED");
  assert_zeus_ok(zeus_gpu_reset_all_clocks(d, 0));
  assert_int_equal(fake_sm_clock(&f, 0), sm0);
  zeus_devices_close(d);
  fake_unload(&f);

  reset_env();
  setenv("FAKE_NVML_INJECT", "nvmlDeviceResetGpuLockedClocks:NO_PERMISSION:1", 1);
  set_gpus(2);
  d = open_nvml();
  fake_load(&f);
  unsigned mem0 = fake_mem_clock(&f, 1);
  unsigned mem_lo = mem0 / 2;
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 210, 900));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 1, mem_lo, mem_lo));
  assert_zeus_err(zeus_gpu_reset_all_clocks(d, 1), ZEUS_EPERM, "SM clock");
  assert_int_equal(fake_sm_clock(&f, 1), 900);
  assert_int_equal(fake_mem_clock(&f, 1), mem0); /* tried all the same */
  zeus_clock_lock l;
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 1, false, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_LOCKED);
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 1, true, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
  zeus_devices_close(d);
  fake_unload(&f);
}

static void nvml_restore_and_close_put_back_limits_persistence_and_clocks(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  set_gpus(2);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  /* Our own reference keeps the node alive after the backend's nvmlShutdown. */
  assert_int_equal(f.Init(), NVML_SUCCESS);

  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 200000));
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 180000)); /* the saved value stays the first one */
  assert_zeus_ok(zeus_gpu_set_persistence_mode(d, 0, true));
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 500, 1200));
  assert_int_equal(fake_sm_clock(&f, 1), 1200);

  assert_zeus_ok(zeus_devices_restore(d));
  const char *after_restore =
      "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0\n"
      "nvmlDeviceSetPowerManagementLimit 0 180000 -> 0\n"
      "nvmlDeviceSetPersistenceMode 0 1 -> 0\n"
      "nvmlDeviceSetGpuLockedClocks 1 500 1200 -> 0\n"
      "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n"
      "nvmlDeviceSetPersistenceMode 0 0 -> 0\n"
      "nvmlDeviceResetGpuLockedClocks 1 -> 0\n";
  assert_log(&s, after_restore);
  assert_int_equal(fake_power_limit(&f, 0), 300000);
  nvmlEnableState_t mode = 1;
  assert_int_equal(f.GetPersistenceMode(fake_dev(&f, 0), &mode), NVML_SUCCESS);
  assert_int_equal(mode, NVML_FEATURE_DISABLED);
  assert_int_equal(fake_sm_clock(&f, 1), 1740);

  assert_zeus_ok(zeus_devices_restore(d)); /* idempotent: nothing left to put back */
  assert_log(&s, after_restore);

  assert_zeus_ok(zeus_gpu_set_power_limit(d, 1, 250000));
  zeus_devices_close(d);
  char expect[2048];
  snprintf(expect, sizeof expect, "%s%s", after_restore,
           "nvmlDeviceSetPowerManagementLimit 1 250000 -> 0\n"
           "nvmlDeviceSetPowerManagementLimit 1 300000 -> 0\n");
  assert_log(&s, expect);
  assert_int_equal(fake_power_limit(&f, 1), 300000);

  /* Reference counting: our Shutdown is the last one; a further one is UNINITIALIZED. */
  nvmlDevice_t h = fake_dev(&f, 0);
  assert_int_equal(f.Shutdown(), NVML_SUCCESS);
  unsigned mw;
  assert_int_equal(f.GetPowerManagementLimit(h, &mw), NVML_ERROR_UNINITIALIZED);
  assert_int_equal(f.Shutdown(), NVML_ERROR_UNINITIALIZED);
  fake_unload(&f);
  scratch_free(&s);
}

/* NVML cannot read a lock back: unknown until this handle sets or resets it, then what it did,
 * without any NVML call to read it; restore makes it unlocked. */
static void nvml_lock_state_is_what_this_handle_did_else_unknown(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  set_gpus(2);
  zeus_devices *d = open_nvml();
  assert_clock_lock(d, 0, false, ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, "");
  assert_clock_lock(d, 0, true, ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, "");
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 500, 1200));
  assert_clock_lock(d, 0, false, ZEUS_CLOCK_LOCKED, 500, 1200, "handle");
  assert_clock_lock(d, 0, true, ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, ""); /* the memory clock is another lock */
  assert_clock_lock(d, 1, false, ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, ""); /* and GPU 1 another GPU */
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 1, 7251, 7251));
  assert_clock_lock(d, 1, true, ZEUS_CLOCK_LOCKED, 7251, 7251, "handle");
  assert_zeus_ok(zeus_gpu_reset_memory_locked_clocks(d, 1));
  assert_clock_lock(d, 1, true, ZEUS_CLOCK_UNLOCKED, 0, 0, "handle");
  zeus_clock_lock l;
  assert_zeus_err(zeus_gpu_get_locked_clocks(d, 9, false, &l), ZEUS_ENOENT, "GPU 9");
  assert_zeus_ok(zeus_devices_restore(d));
  assert_clock_lock(d, 0, false, ZEUS_CLOCK_UNLOCKED, 0, 0, "handle");
  zeus_devices_close(d);
  assert_log(&s,
             "nvmlDeviceSetGpuLockedClocks 0 500 1200 -> 0\n"
             "nvmlDeviceSetMemoryLockedClocks 1 7251 7251 -> 0\n"
             "nvmlDeviceResetMemoryLockedClocks 1 -> 0\n"
             "nvmlDeviceResetGpuLockedClocks 0 -> 0\n");
  scratch_free(&s);
}

static void nvml_out_of_range_power_limit_is_erange_without_calling_nvml(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  zeus_devices *d = open_nvml();
  assert_zeus_err(zeus_gpu_set_power_limit(d, 0, 50000), ZEUS_ERANGE, "[100000, 300000]");
  assert_zeus_err(zeus_gpu_set_power_limit(d, 0, 300001), ZEUS_ERANGE, "300001");
  assert_log(&s, "");
  /* The fake itself refuses what the real library refuses. */
  fake f;
  fake_load(&f);
  assert_int_equal(f.SetPowerManagementLimit(fake_dev(&f, 0), 50000), NVML_ERROR_INVALID_ARGUMENT);
  assert_log(&s, "nvmlDeviceSetPowerManagementLimit 0 50000 -> 2\n");
  assert_int_equal(fake_power_limit(&f, 0), 300000);
  zeus_devices_close(d);
  fake_unload(&f);
  scratch_free(&s);
}

/* ---- errors from the library ---- */

static void nvml_no_permission_is_eperm_naming_the_operation_and_root(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("FAKE_NVML_INJECT", "nvmlDeviceSetPowerManagementLimit:NO_PERMISSION", 1);
  zeus_devices *d = open_nvml();
  assert_zeus_err(zeus_gpu_set_power_limit(d, 0, 200000), ZEUS_EPERM, "setting the power limit");
  assert_non_null(strstr(zeus_errmsg(), "root or CAP_SYS_ADMIN"));
  assert_non_null(strstr(zeus_errmsg(), "NO_PERMISSION"));
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw)); /* reads need no privilege */
  assert_int_equal(mw, 300000);
  zeus_devices_close(d);
  /* The limit never changed, so closing has nothing to put back. */
  assert_log(&s, "nvmlDeviceSetPowerManagementLimit 0 200000 -> 4\n");
  scratch_free(&s);
}

/* Setting the value a GPU already has writes nothing, as the original does, so it needs no
 * privilege; another value still writes and is refused. A failed read falls through to the write. */
static void nvml_setting_the_current_value_writes_nothing(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("FAKE_NVML_INJECT", "nvmlDeviceSetPowerManagementLimit:NO_PERMISSION;nvmlDeviceSetPersistenceMode:NO_PERMISSION",
         1);
  zeus_devices *d = open_nvml();
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 300000)); /* the default, so the current one */
  assert_zeus_ok(zeus_gpu_set_persistence_mode(d, 0, false));
  assert_log(&s, "");
  assert_zeus_err(zeus_gpu_set_power_limit(d, 0, 200000), ZEUS_EPERM, "setting the power limit");
  assert_zeus_err(zeus_gpu_set_persistence_mode(d, 0, true), ZEUS_EPERM, "enabling persistence mode");
  zeus_devices_close(d);
  assert_log(&s,
             "nvmlDeviceSetPowerManagementLimit 0 200000 -> 4\n"
             "nvmlDeviceSetPersistenceMode 0 1 -> 4\n");
  unlink(s.log);

  /* Persistence mode unreadable: the write happens, as before. */
  setenv("FAKE_NVML_INJECT", "nvmlDeviceGetPersistenceMode:UNKNOWN;nvmlDeviceSetPersistenceMode:NO_PERMISSION", 1);
  d = open_nvml();
  assert_zeus_err(zeus_gpu_set_persistence_mode(d, 0, false), ZEUS_EPERM, "disabling persistence mode");
  zeus_devices_close(d);
  assert_log(&s, "nvmlDeviceSetPersistenceMode 0 0 -> 4\n");
  scratch_free(&s);
}

static void nvml_not_supported_is_enotsup(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("FAKE_NVML_INJECT", "nvmlDeviceSetGpuLockedClocks:NOT_SUPPORTED", 1);
  zeus_devices *d = open_nvml();
  assert_zeus_err(zeus_gpu_set_locked_clocks(d, 0, 500, 1000), ZEUS_ENOTSUP, "locking the SM clock");
  /* Not a lost GPU: the next call still reaches NVML, and other functions work. */
  assert_zeus_err(zeus_gpu_set_locked_clocks(d, 0, 500, 1000), ZEUS_ENOTSUP, "");
  zeus_clock_lock l; /* a failed lock is not taken for one */
  assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, false, &l));
  assert_int_equal(l.state, ZEUS_CLOCK_LOCK_UNKNOWN);
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 7251, 7251));
  zeus_devices_close(d);
  assert_log(&s,
             "nvmlDeviceSetGpuLockedClocks 0 500 1000 -> 3\n"
             "nvmlDeviceSetGpuLockedClocks 0 500 1000 -> 3\n"
             "nvmlDeviceSetMemoryLockedClocks 0 7251 7251 -> 0\n"
             "nvmlDeviceResetMemoryLockedClocks 0 -> 0\n");
  scratch_free(&s);
}

static void nvml_lost_gpu_is_egpulost_then_skipped_while_others_work(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  set_gpus(2);
  setenv("FAKE_NVML_INJECT", "nvmlDeviceSetPowerManagementLimit:GPU_IS_LOST:1", 1);
  zeus_devices *d = open_nvml();
  fake f;
  fake_load(&f);
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 1, 500, 1200));
  assert_zeus_err(zeus_gpu_set_power_limit(d, 1, 200000), ZEUS_EGPULOST, "GPU 1");
  unsigned long calls = f.Calls(1);
  unsigned mw;
  uint64_t mj;
  assert_zeus_err(zeus_gpu_get_power_limit(d, 1, &mw), ZEUS_EGPULOST, "lost");
  assert_zeus_err(zeus_gpu_total_energy(d, 1, &mj), ZEUS_EGPULOST, "");
  assert_zeus_err(zeus_gpu_set_locked_clocks(d, 1, 500, 1000), ZEUS_EGPULOST, "");
  assert_int_equal(f.Calls(1), calls); /* none of these reached NVML */
  /* GPU 0 keeps working. */
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 200000));
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_zeus_ok(zeus_devices_restore(d));
  assert_int_equal(f.Calls(1), calls); /* restore skipped the lost GPU */
  zeus_devices_close(d);
  assert_log(&s,
             "nvmlDeviceSetGpuLockedClocks 1 500 1200 -> 0\n"
             "nvmlDeviceSetPowerManagementLimit 1 200000 -> 15\n"
             "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0\n"
             "nvmlDeviceSetPowerManagementLimit 0 300000 -> 0\n");
  fake_unload(&f);
  scratch_free(&s);
}

static void nvml_without_energy_counter_reports_unsupported_not_zero(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_ENERGY_COUNTER", "0", 1);
  zeus_devices *d = open_nvml();
  bool ok = true;
  assert_zeus_ok(zeus_gpu_energy_counter_supported(d, 0, &ok));
  assert_false(ok);
  uint64_t mj = 12345;
  assert_zeus_err(zeus_gpu_total_energy(d, 0, &mj), ZEUS_ENOTSUP, "energy");
  assert_int_equal(mj, 12345);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_instant_power(d, 0, &mw)); /* power is still readable */
  assert_int_equal(mw, 30000);
  zeus_devices_close(d);
}

/* ---- loading the library ---- */

static int log_lines, log_debug_lines_naming_path, log_louder_lines;
static void capture_log(int level, const char *module, const char *msg, void *ud) {
  (void)module;
  (void)ud;
  log_lines++;
  if (level < ZEUS_LOG_DEBUG) log_louder_lines++;
  if (level == ZEUS_LOG_DEBUG && strstr(msg, "/nonexistent/libnvidia-ml.so.1")) log_debug_lines_naming_path++;
}

static void auto_backend_without_library_falls_back_to_none_with_one_debug_line(void **state) {
  (void)state;
  reset_env();
  zeus_set_log_callback(capture_log, NULL);
  zeus_set_log_level(ZEUS_LOG_DEBUG);
  log_lines = log_debug_lines_naming_path = log_louder_lines = 0;
  zeus_devices_opts o = {0};
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  zeus_devices *d = NULL;
  int rc = zeus_devices_open(&d, &o);
  zeus_set_log_callback(NULL, NULL);
  zeus_set_log_level(ZEUS_LOG_WARN);
  assert_int_equal(rc, ZEUS_OK);
  assert_string_equal(zeus_devices_backend(d), "none");
  assert_int_equal(zeus_gpu_count(d), 0);
  assert_int_equal(log_debug_lines_naming_path, 1);
  assert_int_equal(log_louder_lines, 0);
  assert_int_equal(log_lines, 1); /* exactly one line, at debug level */
  assert_zeus_err(zeus_gpu_name(d, 0, (char[8]){0}, 8), ZEUS_ENOENT, "");
  zeus_devices_close(d);
}

static void explicit_nvml_without_library_is_enolib_naming_the_path(void **state) {
  (void)state;
  reset_env();
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = "/nonexistent/libnvidia-ml.so.1";
  zeus_devices *d = NULL;
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOLIB, "/nonexistent/libnvidia-ml.so.1");
  assert_null(d);
}

static void library_missing_a_required_symbol_is_enolib_naming_it(void **state) {
  (void)state;
  reset_env();
  void *lib = dlopen(FAKE_NVML_MISSING_PATH, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(lib);
  assert_null(dlsym(lib, "nvmlDeviceGetUUID"));
  assert_non_null(dlsym(lib, "nvmlDeviceGetName"));
  dlclose(lib);
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = FAKE_NVML_MISSING_PATH;
  zeus_devices *d = NULL;
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOLIB, "nvmlDeviceGetUUID");
  assert_null(d);
}

static void nvml_init_error_is_enolib_naming_the_code(void **state) {
  (void)state;
  reset_env();
  setenv("FAKE_NVML_INIT_ERROR", "DRIVER_NOT_LOADED", 1);
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = FAKE_NVML_PATH;
  zeus_devices *d = NULL;
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOLIB, "DRIVER_NOT_LOADED");
  assert_null(d);
  /* Chosen automatically, a driver that is not loaded means no GPUs, not a failure. */
  o.backend = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "none");
  zeus_devices_close(d);
}

/* ---- the fake on its own ---- */

static void fake_nvml_exports_nvml_but_not_the_engine(void **state) {
  (void)state;
  static const char *const names[] = {
      "nvmlInit_v2", "nvmlInitWithFlags", "nvmlShutdown", "nvmlErrorString", "nvmlSystemGetDriverVersion",
      "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByUUID", "nvmlDeviceGetUUID",
      "nvmlDeviceGetName", "nvmlDeviceGetIndex", "nvmlDeviceGetArchitecture",
      "nvmlDeviceGetPowerManagementLimitConstraints", "nvmlDeviceGetPowerManagementLimit",
      "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetEnforcedPowerLimit",
      "nvmlDeviceSetPowerManagementLimit", "nvmlDeviceGetPersistenceMode", "nvmlDeviceSetPersistenceMode",
      "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetSupportedMemoryClocks",
      "nvmlDeviceGetSupportedGraphicsClocks", "nvmlDeviceGetClockInfo", "nvmlDeviceGetClock",
      "nvmlDeviceSetGpuLockedClocks", "nvmlDeviceResetGpuLockedClocks", "nvmlDeviceSetMemoryLockedClocks",
      "nvmlDeviceResetMemoryLockedClocks", "nvmlDeviceGetFieldValues", "nvmlDeviceGetTemperature",
      "nvmlSystemGetNVMLVersion", "fakeNvmlRunWork", "fakeNvmlRunWorkAll", "fakeNvmlIdle",
      "fakeNvmlTrueEnergy", "zeusSimClockNow",
  };
  void *lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(lib);
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!dlsym(lib, names[i])) fail_msg("%s is not exported", names[i]);
  assert_null(dlsym(lib, "zeus_sim_node_open"));
  assert_null(dlsym(lib, "zeus_errmsg"));
  assert_null(dlsym(lib, "nvmlInit")); /* only the _v2 name, as the backend asks for it first */
  dlclose(lib);
}

static void fake_nvml_checks_arguments_and_init_like_nvml(void **state) {
  (void)state;
  reset_env();
  set_gpus(2);
  fake f;
  fake_load(&f);
  unsigned n = 0;
  assert_int_equal(f.GetCount(&n), NVML_ERROR_UNINITIALIZED);
  nvmlDevice_t h = NULL;
  assert_int_equal(f.GetHandleByIndex(0, &h), NVML_ERROR_UNINITIALIZED);
  assert_true(f.ClockNow() == 0.0);
  assert_int_equal(f.Init(), NVML_SUCCESS);
  assert_int_equal(f.Init(), NVML_SUCCESS);
  assert_int_equal(f.GetCount(&n), NVML_SUCCESS);
  assert_int_equal(n, 2);
  assert_int_equal(f.GetCount(NULL), NVML_ERROR_INVALID_ARGUMENT);
  assert_int_equal(f.GetHandleByIndex(2, &h), NVML_ERROR_INVALID_ARGUMENT);
  assert_int_equal(f.GetHandleByIndex(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
  h = fake_dev(&f, 1);
  nvmlDevice_t by_uuid = NULL;
  assert_int_equal(f.GetHandleByUUID(UUID(1), &by_uuid), NVML_SUCCESS);
  assert_ptr_equal(by_uuid, h);
  assert_int_equal(f.GetHandleByUUID("GPU-5a1a", &by_uuid), NVML_ERROR_NOT_FOUND); /* no prefixes */
  char name[8];
  assert_int_equal(f.GetName(h, name, sizeof name), NVML_ERROR_INSUFFICIENT_SIZE);
  assert_int_equal(f.GetName(h, NULL, 96), NVML_ERROR_INVALID_ARGUMENT);
  int junk = 0;
  assert_int_equal(f.GetName((nvmlDevice_t)(void *)&junk, (char[96]){0}, 96), NVML_ERROR_INVALID_ARGUMENT);
  assert_int_equal(f.GetName(NULL, (char[96]){0}, 96), NVML_ERROR_INVALID_ARGUMENT);
  assert_int_equal(f.SetGpuLockedClocks(h, 1200, 600), NVML_ERROR_INVALID_ARGUMENT);
  assert_int_equal(f.SetGpuLockedClocks(h, 600, 1200), NVML_SUCCESS);
  assert_int_equal(fake_sm_clock(&f, 1), 1200);
  assert_int_equal(f.SetGpuLockedClocks(h, 0xffffff02u, 0xffffff02u), NVML_SUCCESS); /* unlimited: reset */
  assert_int_equal(fake_sm_clock(&f, 1), 1740);
  unsigned cnt = 2, clocks[2];
  assert_int_equal(f.GetSupportedGraphicsClocks(h, 7251, &cnt, clocks), NVML_ERROR_INSUFFICIENT_SIZE);
  assert_int_equal(cnt, 103);
  assert_int_equal(f.Shutdown(), NVML_SUCCESS);
  assert_int_equal(f.GetCount(&n), NVML_SUCCESS); /* one reference left */
  assert_int_equal(f.Shutdown(), NVML_SUCCESS);
  assert_int_equal(f.GetCount(&n), NVML_ERROR_UNINITIALIZED);
  fake_unload(&f);
}

static void fake_nvml_injection_fires_after_n_calls_on_one_gpu_and_stays(void **state) {
  (void)state;
  reset_env();
  set_gpus(2);
  setenv("FAKE_NVML_INJECT", "nvmlDeviceGetPowerUsage:ERROR_UNKNOWN:1:2;nvmlDeviceGetName:14", 1);
  fake f;
  fake_load(&f);
  assert_int_equal(f.Init(), NVML_SUCCESS);
  unsigned mw;
  nvmlDevice_t g0 = fake_dev(&f, 0), g1 = fake_dev(&f, 1);
  assert_int_equal(f.GetPowerUsage(g1, &mw), NVML_SUCCESS);
  assert_int_equal(f.GetPowerUsage(g1, &mw), NVML_SUCCESS);
  assert_int_equal(f.GetPowerUsage(g1, &mw), NVML_ERROR_UNKNOWN);
  assert_int_equal(f.GetPowerUsage(g1, &mw), NVML_ERROR_UNKNOWN);
  for (int k = 0; k < 4; k++) assert_int_equal(f.GetPowerUsage(g0, &mw), NVML_SUCCESS);
  char name[96];
  assert_int_equal(f.GetName(g0, name, sizeof name), NVML_ERROR_CORRUPTED_INFOROM);
  assert_int_equal(f.GetName(g1, name, sizeof name), NVML_ERROR_CORRUPTED_INFOROM);
  assert_int_equal(f.Shutdown(), NVML_SUCCESS);
  fake_unload(&f);
}

/* ---- CUDA_VISIBLE_DEVICES through NVML ---- */

static zeus_devices *open_visible(const char *value) {
  reset_env();
  set_gpus(4);
  setenv("CUDA_VISIBLE_DEVICES", value, 1);
  return open_nvml();
}

static void assert_uuid(zeus_devices *d, unsigned gpu, const char *want) {
  char uuid[ZEUS_NAME_LEN];
  assert_zeus_ok(zeus_gpu_uuid(d, gpu, uuid, sizeof uuid));
  assert_string_equal(uuid, want);
}

static void visible_devices_integers_pick_and_order_gpus(void **state) {
  (void)state;
  zeus_devices *d = open_visible("2,0");
  assert_int_equal(zeus_gpu_count(d), 2);
  assert_uuid(d, 0, UUID(2));
  assert_uuid(d, 1, UUID(0));
  /* A setter on visible GPU 0 reaches physical GPU 2. */
  fake f;
  fake_load(&f);
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 200000));
  assert_int_equal(fake_power_limit(&f, 2), 200000);
  assert_int_equal(fake_power_limit(&f, 0), 300000);
  zeus_devices_close(d);
  fake_unload(&f);
}

static void visible_devices_gpu_uuids_select_by_uuid(void **state) {
  (void)state;
  zeus_devices *d = open_visible(UUID(3) "," UUID(1));
  assert_int_equal(zeus_gpu_count(d), 2);
  assert_uuid(d, 0, UUID(3));
  assert_uuid(d, 1, UUID(1));
  zeus_devices_close(d);
  /* A shorter prefix works when it matches exactly one GPU. */
  reset_env();
  set_gpus(1);
  setenv("CUDA_VISIBLE_DEVICES", "GPU-5a1a", 1);
  d = open_nvml();
  assert_int_equal(zeus_gpu_count(d), 1);
  assert_uuid(d, 0, UUID(0));
  zeus_devices_close(d);
}

static void visible_devices_stop_at_the_first_invalid_entry(void **state) {
  (void)state;
  zeus_devices *d = open_visible("0,2,-1,1");
  assert_int_equal(zeus_gpu_count(d), 2);
  assert_uuid(d, 0, UUID(0));
  assert_uuid(d, 1, UUID(2));
  zeus_devices_close(d);
  d = open_visible("1,7,0"); /* out of range stops too */
  assert_int_equal(zeus_gpu_count(d), 1);
  assert_uuid(d, 0, UUID(1));
  zeus_devices_close(d);
}

static void visible_devices_ambiguous_or_unknown_uuid_prefix_stops(void **state) {
  (void)state;
  zeus_devices *d = open_visible(UUID(3) ",GPU-5a1a," UUID(0));
  assert_int_equal(zeus_gpu_count(d), 1);
  assert_uuid(d, 0, UUID(3));
  zeus_devices_close(d);
  d = open_visible("GPU-deadbeef," UUID(0));
  assert_int_equal(zeus_gpu_count(d), 0);
  zeus_devices_close(d);
}

static void visible_devices_mig_is_enotsup_with_a_message(void **state) {
  (void)state;
  reset_env();
  set_gpus(4);
  setenv("CUDA_VISIBLE_DEVICES", "MIG-5a1a0000-0000-4000-8000-000000000000", 1);
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = FAKE_NVML_PATH;
  zeus_devices *d = NULL;
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOTSUP, "MIG");
  assert_null(d);
}

static void visible_devices_empty_means_no_gpu(void **state) {
  (void)state;
  zeus_devices *d = open_visible("");
  assert_int_equal(zeus_gpu_count(d), 0);
  assert_zeus_err(zeus_gpu_name(d, 0, (char[8]){0}, 8), ZEUS_ENOENT, "");
  zeus_devices_close(d);
}

static void visible_devices_duplicates_mean_no_gpu(void **state) {
  (void)state;
  zeus_devices *d = open_visible("0,0");
  assert_int_equal(zeus_gpu_count(d), 0);
  zeus_devices_close(d);
  d = open_visible("1,2,1");
  assert_int_equal(zeus_gpu_count(d), 0);
  zeus_devices_close(d);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nvml_reports_count_names_and_uuids_of_the_simulated_gpus),
      cmocka_unit_test(nvml_names_and_power_limits_come_from_the_model_file),
      cmocka_unit_test(nvml_energy_counter_is_supported_by_default),
      cmocka_unit_test(nvml_supported_clocks_follow_the_count_protocol),
      cmocka_unit_test(nvml_energy_and_power_equal_the_engine_after_work),
      cmocka_unit_test(nvml_h100_profile_ticks_costs_and_lags_through_the_fake),
      cmocka_unit_test(nvml_power_domains_temperature_clocks_and_versions),
      cmocka_unit_test(nvml_instant_power_falls_back_to_power_usage),
      cmocka_unit_test(nvml_backend_clock_is_the_simulated_clock),
      cmocka_unit_test(nvml_setters_reach_the_engine_and_are_logged_in_order),
      cmocka_unit_test(nvml_reset_all_clocks_resets_sm_and_memory_locks),
      cmocka_unit_test(nvml_reset_all_clocks_skips_unsupported_memory_and_reports_sm_failure),
      cmocka_unit_test(nvml_restore_and_close_put_back_limits_persistence_and_clocks),
      cmocka_unit_test(nvml_lock_state_is_what_this_handle_did_else_unknown),
      cmocka_unit_test(nvml_out_of_range_power_limit_is_erange_without_calling_nvml),
      cmocka_unit_test(nvml_no_permission_is_eperm_naming_the_operation_and_root),
      cmocka_unit_test(nvml_setting_the_current_value_writes_nothing),
      cmocka_unit_test(nvml_not_supported_is_enotsup),
      cmocka_unit_test(nvml_lost_gpu_is_egpulost_then_skipped_while_others_work),
      cmocka_unit_test(nvml_without_energy_counter_reports_unsupported_not_zero),
      cmocka_unit_test(auto_backend_without_library_falls_back_to_none_with_one_debug_line),
      cmocka_unit_test(explicit_nvml_without_library_is_enolib_naming_the_path),
      cmocka_unit_test(library_missing_a_required_symbol_is_enolib_naming_it),
      cmocka_unit_test(nvml_init_error_is_enolib_naming_the_code),
      cmocka_unit_test(fake_nvml_exports_nvml_but_not_the_engine),
      cmocka_unit_test(fake_nvml_checks_arguments_and_init_like_nvml),
      cmocka_unit_test(fake_nvml_injection_fires_after_n_calls_on_one_gpu_and_stays),
      cmocka_unit_test(visible_devices_integers_pick_and_order_gpus),
      cmocka_unit_test(visible_devices_gpu_uuids_select_by_uuid),
      cmocka_unit_test(visible_devices_stop_at_the_first_invalid_entry),
      cmocka_unit_test(visible_devices_ambiguous_or_unknown_uuid_prefix_stops),
      cmocka_unit_test(visible_devices_mig_is_enotsup_with_a_message),
      cmocka_unit_test(visible_devices_empty_means_no_gpu),
      cmocka_unit_test(visible_devices_duplicates_mean_no_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
