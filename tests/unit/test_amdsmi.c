/* The "amdsmi" backend against the fake libamd_smi.so (tests/fake_amdsmi), which runs the
 * simulated-GPU engine behind amdsmi's C ABI. Each test sets the ZEUS_SIM_* / FAKE_AMDSMI_*
 * environment before opening the devices (the fake reads it at its first amdsmi_init) and reaches
 * the fake's helpers and amdsmi functions with dlopen of the same path, which returns the
 * instance the backend uses. */
#include "test_util.h"

#include <dlfcn.h>
#include <math.h>

#include <zeus.h>
#include <zeus/config.h>

#include "device/amdsmi_types.h"

typedef struct fake {
  void *lib;
  int (*RunWork)(unsigned, double);
  int (*Idle)(double);
  double (*TrueEnergy)(unsigned);
  amdsmi_status_t (*get_temp_metric)(amdsmi_processor_handle, amdsmi_temperature_type_t, amdsmi_temperature_metric_t,
                                     int64_t *);
  amdsmi_status_t (*get_energy_count)(amdsmi_processor_handle, uint64_t *, float *, uint64_t *);
  amdsmi_status_t (*get_socket_handles)(uint32_t *, amdsmi_socket_handle *);
  unsigned long (*Calls)(unsigned); /* device calls so far */
} fake;

static void *need_sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) fail_msg("the fake amdsmi lacks %s", name);
  return p;
}

/* Loads the fake after the backend has initialised it (the same instance). */
static void fake_load(fake *f) {
  memset(f, 0, sizeof *f);
  f->lib = dlopen(FAKE_AMDSMI_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!f->lib) fail_msg("dlopen %s: %s", FAKE_AMDSMI_PATH, dlerror());
  *(void **)&f->RunWork = need_sym(f->lib, "fakeAmdsmiRunWork");
  *(void **)&f->Idle = need_sym(f->lib, "fakeAmdsmiIdle");
  *(void **)&f->TrueEnergy = need_sym(f->lib, "fakeAmdsmiTrueEnergy");
  *(void **)&f->get_temp_metric = need_sym(f->lib, "amdsmi_get_temp_metric");
  *(void **)&f->get_energy_count = need_sym(f->lib, "amdsmi_get_energy_count");
  *(void **)&f->get_socket_handles = need_sym(f->lib, "amdsmi_get_socket_handles");
  *(void **)&f->Calls = need_sym(f->lib, "fakeAmdsmiCalls");
}

static void fake_unload(fake *f) {
  if (f->lib) dlclose(f->lib);
  f->lib = NULL;
}

/* The fake's processor handle of GPU i (one per socket). */
static amdsmi_processor_handle fake_handle(fake *f, unsigned i) {
  amdsmi_socket_handle s[8];
  uint32_t n = 8;
  assert_int_equal(f->get_socket_handles(&n, s), AMDSMI_STATUS_SUCCESS);
  assert_true(i < n);
  return s[i];
}

static void reset_env(void) {
  static const char *const vars[] = {
      "ZEUS_SIM_GPUS",       "ZEUS_SIM_MODEL_FILE",    "ZEUS_SIM_CLOCK",        "ZEUS_SIM_ENERGY_COUNTER",
      "ZEUS_SIM_HARDWARE",   "ZEUS_SIM_VARIATION",     "FAKE_AMDSMI_LOG",       "FAKE_AMDSMI_INJECT",
      "FAKE_AMDSMI_INIT_ERROR", "FAKE_AMDSMI_POWER_NA", "FAKE_AMDSMI_RESOLUTION_UJ", "FAKE_AMDSMI_STATE", "FAKE_AMDSMI_KFD_NODES",
      "FAKE_AMDSMI_BDFS",    "FAKE_AMDSMI_HIP_IDS",   "FAKE_AMDSMI_ENUMERATION", "FAKE_AMDSMI_LIE",
      "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZEUS_GPU_BACKEND",      "ZEUS_NVML_LIBRARY",     "ZEUS_AMDSMI_LIBRARY",
      "ZEUSD_SOCK_PATH",     "ZEUSD_HOST_PORT",       "ZEUS_PLO_PROFILING",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  setenv("ZEUS_AMDSMI_LIBRARY", FAKE_AMDSMI_PATH, 1);
}

static zeus_devices *open_amdsmi(void) {
  zeus_devices_opts o = {0};
  o.backend = "amdsmi";
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "amdsmi");
  return d;
}

typedef struct scratch {
  char dir[512];
  char log[600];
} scratch;

static void scratch_init(scratch *s) {
  zeus_test_tmpdir(s->dir, sizeof s->dir);
  snprintf(s->log, sizeof s->log, "%s/amdsmi.log", s->dir);
  setenv("FAKE_AMDSMI_LOG", s->log, 1);
}

static void scratch_free(scratch *s) {
  unlink(s->log);
  rmdir(s->dir);
}

static void assert_log(const scratch *s, const char *expected) {
  char got[8192] = "";
  FILE *f = fopen(s->log, "r");
  if (f) {
    size_t n = fread(got, 1, sizeof got - 1, f);
    got[n] = '\0';
    fclose(f);
  }
  if (strcmp(got, expected) != 0) {
    print_error("setter log:\n%s---- expected:\n%s----\n", got, expected);
    fail();
  }
}

/* ---- identity ---- */

static void amdsmi_lists_mi300x_gpus_with_names_uuids_and_pci_addresses(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  zeus_devices *d = open_amdsmi();
  assert_int_equal(zeus_gpu_count(d), 2);
  for (unsigned i = 0; i < 2; i++) {
    char name[ZEUS_NAME_LEN], uuid[ZEUS_NAME_LEN], pci[32], want[64];
    assert_zeus_ok(zeus_gpu_name(d, i, name, sizeof name));
    assert_string_equal(name, "AMD Instinct MI300X");
    assert_zeus_ok(zeus_gpu_uuid(d, i, uuid, sizeof uuid));
    snprintf(want, sizeof want, "5a1a0000-0000-4000-8000-%012x", i);
    assert_string_equal(uuid, want);
    assert_zeus_ok(zeus_gpu_pci_address(d, i, pci, sizeof pci));
    snprintf(want, sizeof want, "0000:%02x:00.0", i + 1);
    assert_string_equal(pci, want);
  }
  bool on = true;
  assert_zeus_err(zeus_gpu_get_persistence_mode(d, 0, &on), ZEUS_ENOTSUP, "persistence");
  zeus_devices_close(d);
}

/* HIP_VISIBLE_DEVICES first (HIP's own variable, as the original reads it), else
 * CUDA_VISIBLE_DEVICES; indices then count the visible GPUs only. */
static void amdsmi_visible_devices_follow_hip_then_cuda(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "3", 1);
  setenv("CUDA_VISIBLE_DEVICES", "0,1", 1);
  setenv("HIP_VISIBLE_DEVICES", "2", 1);
  zeus_devices *d = open_amdsmi();
  char uuid[ZEUS_NAME_LEN];
  assert_int_equal(zeus_gpu_count(d), 1);
  assert_zeus_ok(zeus_gpu_uuid(d, 0, uuid, sizeof uuid));
  assert_string_equal(uuid, "5a1a0000-0000-4000-8000-000000000002");
  zeus_devices_close(d);
  unsetenv("HIP_VISIBLE_DEVICES");
  d = open_amdsmi();
  assert_int_equal(zeus_gpu_count(d), 2);
  assert_zeus_ok(zeus_gpu_uuid(d, 1, uuid, sizeof uuid));
  assert_string_equal(uuid, "5a1a0000-0000-4000-8000-000000000001");
  zeus_devices_close(d);
}

/* HIP numbers GPUs in KFD node order, which need not be amd-smi's (by PCI address, as on
 * MI350X nodes): where the library cannot say HIP ids (before ROCm 6.4), the backend's indices
 * follow the node ids (the original's ROCm 6.3 way), so a setting made on index 0 reaches the GPU
 * HIP and PyTorch call 0; HIP_VISIBLE_DEVICES then counts in that order too. A GPU without a node
 * id leaves amd-smi's order. */
static void amdsmi_indices_follow_hip_order_by_kfd_node(void **state) {
  (void)state;
  reset_env();
  scratch sc;
  scratch_init(&sc);
  setenv("FAKE_AMDSMI_ENUMERATION", "0", 1);
  setenv("ZEUS_SIM_GPUS", "3", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  setenv("FAKE_AMDSMI_KFD_NODES", "7,3,5", 1); /* HIP 0 = amd-smi's GPU 1, HIP 1 = 2, HIP 2 = 0 */
  zeus_devices *d = open_amdsmi();
  static const unsigned hip_to_engine[3] = {1, 2, 0};
  char uuid[ZEUS_NAME_LEN], want[64], pci[32];
  for (unsigned i = 0; i < 3; i++) {
    assert_zeus_ok(zeus_gpu_uuid(d, i, uuid, sizeof uuid));
    snprintf(want, sizeof want, "5a1a0000-0000-4000-8000-%012x", hip_to_engine[i]);
    assert_string_equal(uuid, want);
    assert_zeus_ok(zeus_gpu_pci_address(d, i, pci, sizeof pci));
    snprintf(want, sizeof want, "0000:%02x:00.0", hip_to_engine[i] + 1);
    assert_string_equal(pci, want);
  }
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 500000));
  assert_log(&sc, "amdsmi_set_power_cap 1 0 500000000 -> 0\n");
  zeus_devices_close(d); /* gives 750 W back to the same GPU */
  setenv("HIP_VISIBLE_DEVICES", "2", 1);
  d = open_amdsmi();
  assert_int_equal(zeus_gpu_count(d), 1);
  assert_zeus_ok(zeus_gpu_uuid(d, 0, uuid, sizeof uuid));
  assert_string_equal(uuid, "5a1a0000-0000-4000-8000-000000000000");
  zeus_devices_close(d);
  unsetenv("HIP_VISIBLE_DEVICES");
  setenv("FAKE_AMDSMI_KFD_NODES", "7,na,5", 1); /* one GPU without a node id: amd-smi's order */
  d = open_amdsmi();
  for (unsigned i = 0; i < 3; i++) {
    assert_zeus_ok(zeus_gpu_uuid(d, i, uuid, sizeof uuid));
    snprintf(want, sizeof want, "5a1a0000-0000-4000-8000-%012x", i);
    assert_string_equal(uuid, want);
  }
  zeus_devices_close(d);
  scratch_free(&sc);
}


/* The amd-smi GPU at each backend index, told by its PCI address (bus engine index + 1). */
static void assert_hip_order(zeus_devices *d, const unsigned *hip_to_engine, unsigned n) {
  char pci[32], want[32];
  assert_int_equal(zeus_gpu_count(d), n);
  for (unsigned i = 0; i < n; i++) {
    assert_zeus_ok(zeus_gpu_pci_address(d, i, pci, sizeof pci));
    snprintf(want, sizeof want, "0000:%02x:00.0", hip_to_engine[i] + 1);
    if (strcmp(pci, want) != 0) fail_msg("index %u is the GPU at %s, expected %s", i, pci, want);
  }
}

/* ROCm 6.4+ says each GPU's HIP id (amdsmi_get_gpu_enumeration_info): where the library has the
 * call, the backend's indices are those ids, whatever the KFD node ids say; where it lacks the call
 * (libamd_smi-partial.so), the call fails, or the ids are not each of 0..n-1 once, the node ids
 * order them as before. */
static void amdsmi_indices_follow_hip_ids_from_enumeration_info(void **state) {
  (void)state;
  reset_env();
  scratch sc;
  scratch_init(&sc);
  setenv("ZEUS_SIM_GPUS", "3", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  setenv("FAKE_AMDSMI_KFD_NODES", "7,3,5", 1); /* by node: HIP 0 = amd-smi's 1, 1 = 2, 2 = 0 */
  setenv("FAKE_AMDSMI_HIP_IDS", "1,2,0", 1);   /* by HIP id: HIP 0 = amd-smi's 2, 1 = 0, 2 = 1 */
  static const unsigned by_hip_id[3] = {2, 0, 1}, by_node[3] = {1, 2, 0};
  zeus_devices *d = open_amdsmi();
  assert_hip_order(d, by_hip_id, 3);
  /* An index past the HIP ids: refused naming it and how many there are, before any call. */
  assert_zeus_err(zeus_gpu_set_power_limit(d, 3, 500000), ZEUS_ENOENT, "GPU 3 is not visible (3 visible GPUs, backend amdsmi)");
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 500000));
  assert_log(&sc, "amdsmi_set_power_cap 2 0 500000000 -> 0\n");
  zeus_devices_close(d);
  setenv("FAKE_AMDSMI_ENUMERATION", "0", 1); /* the call answers NOT_SUPPORTED */
  d = open_amdsmi();
  assert_hip_order(d, by_node, 3);
  zeus_devices_close(d);
  unsetenv("FAKE_AMDSMI_ENUMERATION");
  setenv("FAKE_AMDSMI_HIP_IDS", "1,1,0", 1); /* not a numbering: the node ids decide */
  d = open_amdsmi();
  assert_hip_order(d, by_node, 3);
  zeus_devices_close(d);
  setenv("FAKE_AMDSMI_HIP_IDS", "1,2,0", 1);
  setenv("ZEUS_AMDSMI_LIBRARY", FAKE_AMDSMI_PARTIAL_PATH, 1); /* no such symbol at all */
  d = open_amdsmi();
  assert_hip_order(d, by_node, 3);
  zeus_devices_close(d);
  scratch_free(&sc);
}

/* ---- power caps: uW in amdsmi, mW here ---- */

static void amdsmi_power_caps_are_microwatts_converted_to_milliwatts_and_restored(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  zeus_devices *d = open_amdsmi();
  unsigned lo = 0, hi = 0, def = 0, mw = 0;
  assert_zeus_ok(zeus_gpu_power_limit_constraints(d, 0, &lo, &hi, &def));
  assert_int_equal(lo, 400000);
  assert_int_equal(hi, 750000);
  assert_int_equal(def, 750000);
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 600000));
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 600000);
  /* Outside the range amdsmi gave: refused before any call. */
  assert_zeus_err(zeus_gpu_set_power_limit(d, 0, 300000), ZEUS_ERANGE, "[400000, 750000] mW");
  zeus_devices_close(d); /* restores 750 W */
  assert_log(&s,
             "amdsmi_set_power_cap 0 0 600000000 -> 0\n"
             "amdsmi_set_power_cap 0 0 750000000 -> 0\n");
  scratch_free(&s);
}

/* As the original's AMDGPU.set_power_management_limit: a cap equal to the current one is not
 * written, so it succeeds even where writes are refused (no root); a different one is written
 * (and refused there). The close puts back only what changed. */
static void amdsmi_power_cap_equal_to_the_current_one_is_not_written(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  setenv("FAKE_AMDSMI_INJECT", "amdsmi_set_power_cap:NO_PERM:1", 1); /* GPU 1: no root */
  zeus_devices *d = open_amdsmi();
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 750000)); /* the current cap */
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 1, 750000));
  assert_log(&s, "");
  assert_zeus_err(zeus_gpu_set_power_limit(d, 1, 600000), ZEUS_EPERM, "amdsmi_set_power_cap");
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 600000));
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 600000)); /* again: now the current one */
  zeus_devices_close(d);
  assert_log(&s,
             "amdsmi_set_power_cap 1 0 600000000 -> 10\n"
             "amdsmi_set_power_cap 0 0 600000000 -> 0\n"
             "amdsmi_set_power_cap 0 0 750000000 -> 0\n");
  scratch_free(&s);
}

/* ---- energy: ticks x resolution ---- */

static void amdsmi_energy_is_counter_ticks_times_resolution_in_millijoules(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "1", 1);
  zeus_devices *d = open_amdsmi();
  fake f;
  fake_load(&f);
  bool supported = false;
  assert_zeus_ok(zeus_gpu_energy_counter_supported(d, 0, &supported));
  assert_true(supported);
  uint64_t e0, e1;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e0));
  double t0 = f.TrueEnergy(0);
  assert_int_equal(f.RunWork(0, 20), 0);
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e1));
  double truth_mj = (f.TrueEnergy(0) - t0) * 1e3;
  assert_true(truth_mj > 1000); /* 20 units of work draw joules, not nothing */
  /* Each reading floors to a tick (15.259 uJ) and then to a mJ: within 1 mJ of the truth. */
  assert_near((double)(e1 - e0), truth_mj, 1.0 + 0.05);
  /* The conversion itself: the backend's mJ is the raw ticks times the resolution over 1000. */
  uint64_t ticks = 0, ts = 0, mj = 0;
  float res = 0;
  assert_int_equal(f.get_energy_count(fake_handle(&f, 0), &ticks, &res, &ts), AMDSMI_STATUS_SUCCESS);
  assert_near(res, 15.259, 1e-4);
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  assert_int_equal(mj, (uint64_t)((double)ticks * (double)res / 1e3));
  fake_unload(&f);
  zeus_devices_close(d);
}

static void amdsmi_energy_follows_a_coarse_counter_resolution(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("FAKE_AMDSMI_RESOLUTION_UJ", "250000", 1); /* a quarter joule a tick */
  zeus_devices *d = open_amdsmi();
  fake f;
  fake_load(&f);
  assert_int_equal(f.RunWork(0, 10), 0);
  uint64_t mj;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &mj));
  double truth_mj = f.TrueEnergy(0) * 1e3;
  assert_int_equal(mj % 250, 0);
  assert_true((double)mj <= truth_mj && (double)mj > truth_mj - 250);
  fake_unload(&f);
  zeus_devices_close(d);
}

/* ---- a GPU that lies (FAKE_AMDSMI_LIE, the fake NVML's lies on amdsmi's readings) ---- */

static void amdsmi_lies_act_on_power_counter_and_clock_in_amdsmi_units(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  /* power_scaled: the idle MI300X's 190 W read half, still in whole watts. */
  setenv("FAKE_AMDSMI_LIE", "power_scaled:0.5", 1);
  zeus_devices *d = open_amdsmi();
  unsigned now = 0, avg = 0;
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_INSTANT, &now));
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &avg));
  assert_int_equal(now % 1000, 0);
  assert_true(now >= 94000 && now <= 96000);
  assert_int_equal(avg, 95000);
  zeus_devices_close(d);

  /* counter_frozen: work draws energy, the counter (ticks x resolution) does not move. */
  setenv("FAKE_AMDSMI_LIE", "counter_frozen", 1);
  d = open_amdsmi();
  fake f;
  fake_load(&f);
  uint64_t e0, e1;
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e0));
  double t0 = f.TrueEnergy(0);
  assert_int_equal(f.RunWork(0, 20), 0);
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e1));
  assert_true(f.TrueEnergy(0) - t0 > 1);
  assert_int_equal(e1, e0);
  fake_unload(&f);
  zeus_devices_close(d);

  /* counter_skips_tick: of 10 changes read, the 5th and the 10th are lost: ~80 % of the truth. */
  setenv("FAKE_AMDSMI_LIE", "counter_skips_tick", 1);
  d = open_amdsmi();
  fake_load(&f);
  assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e0));
  t0 = f.TrueEnergy(0);
  for (int k = 0; k < 10; k++) {
    assert_int_equal(f.RunWork(0, 2), 0);
    assert_zeus_ok(zeus_gpu_total_energy(d, 0, &e1));
  }
  double shown = (double)(e1 - e0) / 1e3, truth = f.TrueEnergy(0) - t0;
  assert_true(shown > 0.7 * truth && shown < 0.9 * truth);
  fake_unload(&f);
  zeus_devices_close(d);

  /* clock_frozen: a 500 MHz GFX lock acts, but the clock read back stays at its first reading. */
  for (int lie = 0; lie <= 1; lie++) {
    if (lie) setenv("FAKE_AMDSMI_LIE", "clock_frozen", 1);
    else unsetenv("FAKE_AMDSMI_LIE");
    d = open_amdsmi();
    fake_load(&f);
    unsigned c0 = 0, c1 = 0;
    assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &c0, NULL));
    assert_int_equal(c0, 2100);
    assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 500, 500));
    assert_int_equal(f.Idle(1.0), 0);
    assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &c1, NULL));
    assert_int_equal(c1, lie ? 2100u : 500u);
    fake_unload(&f);
    zeus_devices_close(d);
  }

  /* A malformed lie fails init, in the fake NVML's words under the fake amdsmi's names. */
  setenv("FAKE_AMDSMI_LIE", "power_scaled:0", 1);
  zeus_devices_opts o = {0};
  o.backend = "amdsmi";
  assert_int_not_equal(zeus_devices_open(&d, &o), ZEUS_OK);
}

/* ---- power and temperature ---- */

static void amdsmi_power_is_socket_watts_times_1000_and_na_is_unsupported(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  zeus_devices *d = open_amdsmi();
  unsigned now = 0, avg = 0;
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_INSTANT, &now));
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &avg));
  /* The idle MI300X draws 190 W; amdsmi reports whole watts. */
  assert_int_equal(now % 1000, 0);
  assert_true(now >= 188000 && now <= 192000);
  assert_int_equal(avg, 190000);
  assert_zeus_err(zeus_gpu_power(d, 0, ZEUS_POWER_MEMORY_AVERAGE, &avg), ZEUS_ENOTSUP, "memory power");
  zeus_devices_close(d);

  setenv("FAKE_AMDSMI_POWER_NA", "current", 1);
  d = open_amdsmi();
  assert_zeus_err(zeus_gpu_power(d, 0, ZEUS_POWER_INSTANT, &now), ZEUS_ENOTSUP, "current_socket_power");
  assert_zeus_ok(zeus_gpu_power(d, 0, ZEUS_POWER_AVERAGE, &avg));
  assert_int_equal(avg, 190000);
  zeus_devices_close(d);
}

static void amdsmi_temperature_is_the_hotspot_in_degrees(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "1", 1);
  zeus_devices *d = open_amdsmi();
  fake f;
  fake_load(&f);
  int64_t raw = 0;
  assert_int_equal(f.get_temp_metric(fake_handle(&f, 0), AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CURRENT, &raw),
                   AMDSMI_STATUS_SUCCESS);
  unsigned c = 0;
  assert_zeus_ok(zeus_gpu_temperature(d, 0, &c));
  assert_true(raw >= 1000);
  assert_int_equal(c, (unsigned)(raw / 1000));
  fake_unload(&f);
  zeus_devices_close(d);
}

/* ---- clocks ---- */

static void amdsmi_clock_lists_are_the_max_and_min_of_each_domain(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  zeus_devices *d = open_amdsmi();
  unsigned mhz[8];
  size_t n = 8;
  assert_zeus_ok(zeus_gpu_supported_memory_clocks(d, 0, mhz, &n));
  assert_int_equal(n, 1);
  assert_int_equal(mhz[0], 1300);
  n = 8;
  assert_zeus_ok(zeus_gpu_supported_graphics_clocks(d, 0, 1300, mhz, &n));
  assert_int_equal(n, 2);
  assert_int_equal(mhz[0], 2100);
  assert_int_equal(mhz[1], 500);
  n = 1;
  assert_zeus_err(zeus_gpu_supported_graphics_clocks(d, 0, 1300, mhz, &n), ZEUS_ERANGE, "2 entries");
  assert_int_equal(n, 2);
  zeus_devices_close(d);
}

/* AMD resets clocks only all together (performance level auto): resetting the GFX lock puts the
 * memory lock this handle set back, and closing resets both. */
static void amdsmi_clock_locks_set_read_back_and_reset_through_the_perf_level(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  zeus_devices *d = open_amdsmi();
  fake f;
  fake_load(&f);
  unsigned sm = 0, mem = 0;
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 900, 900));
  assert_int_equal(f.RunWork(0, 2), 0); /* the read-back moves at the sensor's ticks */
  assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &sm, &mem));
  assert_true(sm >= 1000 && sm <= 1200);
  assert_int_equal(mem, 900);
  assert_zeus_ok(zeus_gpu_reset_locked_clocks(d, 0));
  assert_int_equal(f.RunWork(0, 2), 0);
  assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &sm, &mem));
  assert_int_equal(sm, 2100);
  assert_int_equal(mem, 900); /* still locked */
  assert_zeus_err(zeus_gpu_set_locked_clocks(d, 0, 1200, 1000), ZEUS_EINVAL, "min <= max");
  zeus_devices_close(d);
  assert_log(&s,
             "amdsmi_set_gpu_clk_range 0 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 0 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 0 0 -> 0\n");
  fake_unload(&f);
  scratch_free(&s);
}

/* zeus_gpu_reset_all_clocks frees both domains with the one performance-level reset (where the two
 * one-domain resets take an auto each and put the memory lock back between them): one amdsmi call,
 * both clocks back to their highest, both locks forgotten (the close puts nothing back). The same
 * single call when zeus_devices_restore finds both locked. */
static void amdsmi_reset_all_clocks_is_one_perf_level_call_and_frees_both_locks(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  zeus_devices *d = open_amdsmi();
  fake f;
  fake_load(&f);
  unsigned sm = 0, mem = 0;
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 900, 900));
  assert_int_equal(f.RunWork(0, 2), 0);
  assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &sm, &mem));
  assert_int_equal(mem, 900);
  unsigned long before = f.Calls(0);
  assert_zeus_ok(zeus_gpu_reset_all_clocks(d, 0));
  assert_int_equal(f.Calls(0) - before, 1); /* the two one-domain resets make three here */
  zeus_clock_lock l;
  for (int m = 0; m < 2; m++) {
    assert_zeus_ok(zeus_gpu_get_locked_clocks(d, 0, m == 1, &l));
    assert_int_equal(l.state, ZEUS_CLOCK_UNLOCKED);
  }
  assert_int_equal(f.RunWork(0, 2), 0);
  assert_zeus_ok(zeus_gpu_current_clocks(d, 0, &sm, &mem));
  assert_int_equal(sm, 2100);
  assert_int_equal(mem, 1300);
  /* Locked again, the restore frees both with one call too. */
  assert_zeus_ok(zeus_gpu_set_locked_clocks(d, 0, 1000, 1200));
  assert_zeus_ok(zeus_gpu_set_memory_locked_clocks(d, 0, 900, 900));
  before = f.Calls(0);
  assert_zeus_ok(zeus_devices_restore(d));
  assert_int_equal(f.Calls(0) - before, 1);
  assert_zeus_err(zeus_gpu_reset_all_clocks(d, 3), ZEUS_ENOENT, "not visible");
  zeus_devices_close(d);
  assert_log(&s,
             "amdsmi_set_gpu_clk_range 0 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 0 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 1000 1200 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 900 900 4 -> 0\n"
             "amdsmi_set_gpu_perf_level 0 0 -> 0\n");
  fake_unload(&f);
  scratch_free(&s);
}

/* ---- errors ---- */

static void amdsmi_missing_required_function_fails_the_backend_by_name(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_AMDSMI_LIBRARY", FAKE_AMDSMI_MISSING_PATH, 1);
  zeus_devices_opts o = {0};
  o.backend = "amdsmi";
  zeus_devices *d = NULL;
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOLIB, "amdsmi_get_gpu_device_uuid");
  setenv("ZEUS_AMDSMI_LIBRARY", "/nonexistent/libamd_smi.so", 1);
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOLIB, "cannot load the amdsmi library");
}

static void amdsmi_missing_optional_functions_are_unsupported_naming_the_call(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_AMDSMI_LIBRARY", FAKE_AMDSMI_PARTIAL_PATH, 1);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  zeus_devices *d = open_amdsmi();
  bool supported = true;
  assert_zeus_ok(zeus_gpu_energy_counter_supported(d, 0, &supported));
  assert_false(supported);
  uint64_t mj;
  assert_zeus_err(zeus_gpu_total_energy(d, 0, &mj), ZEUS_ENOTSUP, "amdsmi_get_energy_count");
  assert_zeus_err(zeus_gpu_set_power_limit(d, 0, 200000), ZEUS_ENOTSUP, "amdsmi_set_power_cap");
  assert_zeus_err(zeus_gpu_set_locked_clocks(d, 0, 500, 900), ZEUS_ENOTSUP, "amdsmi_set_gpu_clk_range");
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw)); /* the readings it has still work */
  zeus_devices_close(d);
}

static void amdsmi_failed_calls_name_the_status_and_the_call(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("FAKE_AMDSMI_INJECT", "amdsmi_set_power_cap:NO_PERM:1;amdsmi_get_power_info:NOT_SUPPORTED", 1);
  zeus_devices *d = open_amdsmi();
  unsigned lo, hi, mw;
  assert_zeus_ok(zeus_gpu_power_limit_constraints(d, 1, &lo, &hi, NULL));
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, lo));
  assert_zeus_err(zeus_gpu_set_power_limit(d, 1, lo), ZEUS_EPERM, "AMDSMI_STATUS_NO_PERM");
  assert_zeus_err(zeus_gpu_set_power_limit(d, 1, lo), ZEUS_EPERM, "(amdsmi_set_power_cap): this operation needs root");
  assert_zeus_err(zeus_gpu_power(d, 0, ZEUS_POWER_INSTANT, &mw), ZEUS_ENOTSUP, "amdsmi_get_power_info");
  zeus_devices_close(d);

  unsetenv("FAKE_AMDSMI_INJECT");
  setenv("FAKE_AMDSMI_INIT_ERROR", "DRIVER_NOT_LOADED", 1);
  zeus_devices_opts o = {0};
  o.backend = "amdsmi";
  assert_zeus_err(zeus_devices_open(&d, &o), ZEUS_ENOLIB, "AMDSMI_STATUS_DRIVER_NOT_LOADED");
}

/* ---- the monitor and the power-limit optimizer on the fake amdsmi ---- */

static zeus_monitor *open_monitor(zeus_devices *d) {
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = no_cpu, .num_cpu_indices = 0};
  zeus_monitor *m = NULL;
  assert_zeus_ok(zeus_monitor_open(&m, &mo));
  return m;
}

/* A window around work on two MI300X measures the engine's ground truth: the counter's 10 ms
 * ticks over windows of seconds leave well under 1 % of error. */
static void amdsmi_monitor_windows_measure_the_true_energy_on_mi300x(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  zeus_devices *d = open_amdsmi();
  fake f;
  fake_load(&f);
  zeus_monitor *m = open_monitor(d);
  double t0[2] = {f.TrueEnergy(0), f.TrueEnergy(1)};
  assert_zeus_ok(zeus_monitor_begin_window(m, "train", false));
  assert_int_equal(f.RunWork(0, 40), 0);
  assert_int_equal(f.Idle(1.0), 0);
  zeus_measurement out;
  assert_zeus_ok(zeus_monitor_end_window(m, "train", false, &out));
  assert_int_equal(out.num_gpus, 2);
  for (unsigned g = 0; g < 2; g++) {
    double truth = f.TrueEnergy(g) - t0[g];
    assert_true(truth > 100);
    assert_near(out.gpu_energy_j[g], truth, truth * 0.01);
  }
  /* GPU 0 worked, GPU 1 idled at 190 W the whole window. */
  assert_true(out.gpu_energy_j[0] > out.gpu_energy_j[1] * 1.2);
  assert_near(out.gpu_energy_j[1] / out.time_s, 190.0, 190.0 * 0.02);
  zeus_monitor_close(m);
  fake_unload(&f);
  zeus_devices_close(d);
}

/* The optimizer sweeps the MI300X's caps from 750 W down to 400 W in 25 W strides through
 * amdsmi_set_power_cap (microwatts), applies its choice, and the GPU gets 750 W back at close. */
static void amdsmi_power_limit_optimizer_sweeps_the_caps_and_applies_its_choice(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  setenv("ZEUS_PLO_PROFILING", "original", 1);
  zeus_devices *d = open_amdsmi();
  fake f;
  fake_load(&f);
  zeus_monitor *m = open_monitor(d);
  zeus_selector sel;
  assert_zeus_ok(zeus_selector_energy(&sel));
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.selector = &sel;
  o.warmup_steps = 2;
  o.profile_steps = 5;
  o.no_signal_handlers = true;
  zeus_plo *p = NULL;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  for (int epoch = 0; epoch < 5 && zeus_plo_get_state(p) != ZEUS_PLO_DONE; epoch++) {
    assert_zeus_ok(zeus_plo_on_epoch_begin(p));
    for (int step = 0; step < 200; step++) {
      assert_zeus_ok(zeus_plo_on_step_begin(p));
      assert_int_equal(f.RunWork(0, 1), 0);
      assert_zeus_ok(zeus_plo_on_step_end(p));
    }
    assert_zeus_ok(zeus_plo_on_epoch_end(p));
  }
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
  const unsigned *limits = NULL;
  size_t n = zeus_plo_power_limits(p, &limits);
  assert_int_equal(n, 15);
  assert_int_equal(limits[0], 750);
  assert_int_equal(limits[14], 400);
  unsigned best = zeus_plo_optimal_power_limit_w(p);
  assert_true(best >= 400 && best < 750);
  unsigned mw = 0;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, best * 1000);
  /* Every cap in the sweep went through amdsmi in microwatts. */
  FILE *fp = fopen(s.log, "r");
  assert_non_null(fp);
  char line[256];
  bool seen[15] = {0};
  unsigned long long last = 0;
  while (fgets(line, sizeof line, fp)) {
    unsigned long long uw;
    unsigned gpu, sensor, code;
    if (sscanf(line, "amdsmi_set_power_cap %u %u %llu -> %u", &gpu, &sensor, &uw, &code) != 4) continue;
    assert_int_equal(code, 0);
    assert_int_equal(uw % 25000000ull, 0);
    if (uw >= 400000000ull && uw <= 750000000ull) seen[(uw - 400000000ull) / 25000000ull] = true;
    last = uw;
  }
  fclose(fp);
  for (unsigned k = 0; k < 14; k++) assert_true(seen[k]); /* 400..725 W; 750 W is where it starts */
  assert_int_equal(last, (unsigned long long)best * 1000000ull);
  zeus_plo_close(p);
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 750000);
  zeus_monitor_close(m);
  fake_unload(&f);
  zeus_devices_close(d);
  unsetenv("ZEUS_PLO_PROFILING");
  scratch_free(&s);
}

#if ZEUS_HAVE_PFO_CLIENT
/* The Perseus client's frequency controller on the fake amdsmi: it locks the GFX and memory
 * clocks at their highest (memory first), moves the GFX lock to a wish among the clocks amdsmi lists (its range's
 * ends, as the original lists them), and puts both back with one performance-level reset at close. */
static void amdsmi_perseus_controller_locks_gfx_clocks_and_puts_them_back(void **state) {
  (void)state;
  reset_env();
  scratch s;
  scratch_init(&s);
  setenv("ZEUS_SIM_GPUS", "1", 1);
  setenv("ZEUS_SIM_HARDWARE", "mi300x", 1);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  zeus_devices *d = open_amdsmi();
  zeus_pfo_controller *c;
  zeus_pfo_controller_opts co = {.no_signal_handlers = true};
  assert_zeus_ok(zeus_pfo_controller_open(&c, d, 0, &co));
  const unsigned *f;
  assert_int_equal(zeus_pfo_controller_frequencies(c, &f), 2);
  assert_int_equal(f[0], 2100);
  assert_int_equal(f[1], 500);
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 500));
  assert_zeus_ok(zeus_pfo_controller_wait(c, 10));
  assert_int_equal(zeus_pfo_controller_current_mhz(c), 500);
  assert_zeus_err(zeus_pfo_controller_set_frequency(c, 1200), ZEUS_EINVAL, "1200 MHz is not a supported SM clock");
  zeus_pfo_controller_close(c);
  zeus_devices_close(d);
  assert_log(&s,
             "amdsmi_set_gpu_clk_range 0 1300 1300 4 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 2100 2100 0 -> 0\n"
             "amdsmi_set_gpu_clk_range 0 500 500 0 -> 0\n"
             "amdsmi_set_gpu_perf_level 0 0 -> 0\n"); /* both locks freed at once (zeus_gpu_reset_all_clocks) */
  scratch_free(&s);
}
#endif

/* ---- selection ---- */

static void amdsmi_is_chosen_by_itself_after_nvml_when_it_lists_gpus(void **state) {
  (void)state;
  reset_env();
  setenv("ZEUS_SIM_GPUS", "3", 1);
  setenv("ZEUS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  zeus_devices_opts o = {0};
  o.daemon = "";
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "amdsmi");
  assert_int_equal(zeus_gpu_count(d), 3);
  zeus_devices_close(d);
  /* NVML first: where it loads, it is used. */
  setenv("ZEUS_NVML_LIBRARY", FAKE_NVML_PATH, 1);
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "nvml");
  zeus_devices_close(d);
  /* Neither: none. */
  setenv("ZEUS_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  setenv("ZEUS_AMDSMI_LIBRARY", "/nonexistent/libamd_smi.so", 1);
  assert_zeus_ok(zeus_devices_open(&d, &o));
  assert_string_equal(zeus_devices_backend(d), "none");
  zeus_devices_close(d);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(amdsmi_lists_mi300x_gpus_with_names_uuids_and_pci_addresses),
      cmocka_unit_test(amdsmi_visible_devices_follow_hip_then_cuda),
      cmocka_unit_test(amdsmi_indices_follow_hip_order_by_kfd_node),
      cmocka_unit_test(amdsmi_indices_follow_hip_ids_from_enumeration_info),
      cmocka_unit_test(amdsmi_power_caps_are_microwatts_converted_to_milliwatts_and_restored),
      cmocka_unit_test(amdsmi_power_cap_equal_to_the_current_one_is_not_written),
      cmocka_unit_test(amdsmi_energy_is_counter_ticks_times_resolution_in_millijoules),
      cmocka_unit_test(amdsmi_energy_follows_a_coarse_counter_resolution),
      cmocka_unit_test(amdsmi_power_is_socket_watts_times_1000_and_na_is_unsupported),
      cmocka_unit_test(amdsmi_temperature_is_the_hotspot_in_degrees),
      cmocka_unit_test(amdsmi_lies_act_on_power_counter_and_clock_in_amdsmi_units),
      cmocka_unit_test(amdsmi_clock_lists_are_the_max_and_min_of_each_domain),
      cmocka_unit_test(amdsmi_clock_locks_set_read_back_and_reset_through_the_perf_level),
      cmocka_unit_test(amdsmi_reset_all_clocks_is_one_perf_level_call_and_frees_both_locks),
      cmocka_unit_test(amdsmi_missing_required_function_fails_the_backend_by_name),
      cmocka_unit_test(amdsmi_missing_optional_functions_are_unsupported_naming_the_call),
      cmocka_unit_test(amdsmi_failed_calls_name_the_status_and_the_call),
      cmocka_unit_test(amdsmi_monitor_windows_measure_the_true_energy_on_mi300x),
      cmocka_unit_test(amdsmi_power_limit_optimizer_sweeps_the_caps_and_applies_its_choice),
#if ZEUS_HAVE_PFO_CLIENT
      cmocka_unit_test(amdsmi_perseus_controller_locks_gfx_clocks_and_puts_them_back),
#endif
      cmocka_unit_test(amdsmi_is_chosen_by_itself_after_nvml_when_it_lists_gpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
