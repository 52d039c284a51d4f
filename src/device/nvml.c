/* The "nvml" backend: NVIDIA GPUs through libnvidia-ml.so.1, loaded at run time.
 *
 * Required symbols (the backend fails cleanly without them): init, shutdown, count, handle by
 * index, UUID, name. Every other function is optional: a missing one reads as "not supported".
 * Every NVML return code maps to a zeus code, and messages carry NVML's own name for the code,
 * the GPU and the operation. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "device/backend.h"
#include "device/nvml_types.h"

typedef struct nvml_state {
  void *lib;
  char path[512];
  nvmlReturn_t (*Init)(void);
  nvmlReturn_t (*Shutdown)(void);
  const char *(*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*GetCount)(unsigned *);
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t *);
  nvmlReturn_t (*GetUUID)(nvmlDevice_t, char *, unsigned);
  nvmlReturn_t (*GetName)(nvmlDevice_t, char *, unsigned);
  nvmlReturn_t (*GetPowerManagementLimitConstraints)(nvmlDevice_t, unsigned *, unsigned *);
  nvmlReturn_t (*GetPowerManagementLimit)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*GetPowerManagementDefaultLimit)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*SetPowerManagementLimit)(nvmlDevice_t, unsigned);
  nvmlReturn_t (*GetPersistenceMode)(nvmlDevice_t, nvmlEnableState_t *);
  nvmlReturn_t (*SetPersistenceMode)(nvmlDevice_t, nvmlEnableState_t);
  nvmlReturn_t (*GetTotalEnergyConsumption)(nvmlDevice_t, unsigned long long *);
  nvmlReturn_t (*GetPowerUsage)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*GetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t *);
  nvmlReturn_t (*GetTemperature)(nvmlDevice_t, int, unsigned *);
  nvmlReturn_t (*GetClockInfo)(nvmlDevice_t, nvmlClockType_t, unsigned *);
  nvmlReturn_t (*GetArchitecture)(nvmlDevice_t, unsigned *);
  nvmlReturn_t (*GetPciInfo)(nvmlDevice_t, nvmlPciInfo_t *);
  nvmlReturn_t (*SystemGetDriverVersion)(char *, unsigned);
  nvmlReturn_t (*SystemGetNVMLVersion)(char *, unsigned);
  nvmlReturn_t (*GetSupportedMemoryClocks)(nvmlDevice_t, unsigned *, unsigned *);
  nvmlReturn_t (*GetSupportedGraphicsClocks)(nvmlDevice_t, unsigned, unsigned *, unsigned *);
  nvmlReturn_t (*SetGpuLockedClocks)(nvmlDevice_t, unsigned, unsigned);
  nvmlReturn_t (*ResetGpuLockedClocks)(nvmlDevice_t);
  nvmlReturn_t (*SetMemoryLockedClocks)(nvmlDevice_t, unsigned, unsigned);
  nvmlReturn_t (*ResetMemoryLockedClocks)(nvmlDevice_t);
  /* Optional clock of a simulated NVML (the test library): seconds. NULL for real NVML. */
  double (*SimClockNow)(void);
  unsigned count;
  nvmlDevice_t dev[ZEUS_MAX_GPUS];
  nvmlReturn_t dev_err[ZEUS_MAX_GPUS]; /* why a handle is missing (NO_PERMISSION...) */
  /* Set once a GPU answers NOT_SUPPORTED for the POWER_INSTANT field, so later instant readings
   * go straight to GetPowerUsage (written and read relaxed: a stale false costs one call). */
  bool no_instant_field[ZEUS_MAX_GPUS];
  /* The scope each power field answers in, found by the first reading as the original does
   * (zeus/device/gpu/nvidia.py, _resolve_power_field_scope): the GPU scope first, and where NVML
   * refuses it (Grace Hopper), the module scope. 0: not found yet, else NVML_POWER_SCOPE_* + 1.
   * Relaxed atomics: two first readings at once both probe, and agree. */
  unsigned char instant_scope[ZEUS_MAX_GPUS], average_scope[ZEUS_MAX_GPUS];
  bool told_module[ZEUS_MAX_GPUS]; /* the fallback was logged (once per GPU) */
} nvml_state;

static const char *ret_name(nvmlReturn_t r) {
  switch (r) {
#define ZEUS__NVML_NAME(name, value) \
  case (value):                      \
    return #name;
    ZEUS_NVML_RETURN_MAP(ZEUS__NVML_NAME)
#undef ZEUS__NVML_NAME
  }
  return "UNKNOWN_CODE";
}

static int map_code(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return ZEUS_OK;
    case NVML_ERROR_INVALID_ARGUMENT: return ZEUS_EINVAL;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_DEPRECATED: return ZEUS_ENOTSUP;
    case NVML_ERROR_NO_PERMISSION:
    case NVML_ERROR_OPERATING_SYSTEM: return ZEUS_EPERM;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND: return ZEUS_ENOENT;
    case NVML_ERROR_INSUFFICIENT_SIZE: return ZEUS_ERANGE;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_RESET_REQUIRED: return ZEUS_EGPULOST;
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return ZEUS_ENOLIB;
    case NVML_ERROR_TIMEOUT: return ZEUS_ETIMEDOUT;
    case NVML_ERROR_MEMORY: return ZEUS_ENOMEM;
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_NOT_READY:
    case NVML_ERROR_INVALID_STATE: return ZEUS_ESTATE;
    default: return ZEUS_EDEVICE;
  }
}

/* Turns an NVML failure into a zeus error naming the code, NVML's text, the GPU and the operation. */
static int nv_fail(const nvml_state *s, nvmlReturn_t r, unsigned gpu, const char *what) {
  const char *text = s->ErrorString ? s->ErrorString(r) : NULL;
  const char *hint = "";
  if (r == NVML_ERROR_NO_PERMISSION)
    hint = ": this operation needs root or CAP_SYS_ADMIN (e.g. docker run --cap-add SYS_ADMIN)";
  else if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED)
    hint = ": the GPU has fallen off the bus or needs a reset; it will not be used again";
  else if (r == NVML_ERROR_OPERATING_SYSTEM)
    hint = ": blocked by the operating system (cgroups or a container policy)";
  return zeus__error(map_code(r), "NVML %s (%s, code %d) on GPU %u while %s%s", ret_name(r), text ? text : "no text", r,
                     gpu, what, hint);
}

static void *sym(void *lib, const char *v2, const char *v1) {
  void *p = dlsym(lib, v2);
  if (!p && v1) p = dlsym(lib, v1);
  return p;
}

static void nv_close(void *st) {
  nvml_state *s = st;
  if (!s) return;
  if (s->Shutdown) s->Shutdown();
  if (s->lib) dlclose(s->lib);
  free(s);
}

static int nv_open(void **state, const zeus_devices_opts *opts) {
  const char *path = opts && opts->nvml_library ? opts->nvml_library : zeus__env_str("ZEUS_NVML_LIBRARY");
  if (!path) path = "libnvidia-ml.so.1";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return zeus__error(ZEUS_ENOLIB, "cannot load the NVML library '%s': %s", path, dlerror());
  nvml_state *s = calloc(1, sizeof *s);
  if (!s) {
    dlclose(lib);
    return zeus__oom("loading NVML");
  }
  s->lib = lib;
  snprintf(s->path, sizeof s->path, "%s", path);
#define REQ(field, v2, v1)                                                                             \
  do {                                                                                                 \
    *(void **)&s->field = sym(lib, v2, v1);                                                            \
    if (!s->field) {                                                                                   \
      int rc_ = zeus__error(ZEUS_ENOLIB, "the NVML library '%s' lacks the required function %s", path, v2); \
      s->Shutdown = NULL;                                                                              \
      nv_close(s);                                                                                     \
      return rc_;                                                                                      \
    }                                                                                                  \
  } while (0)
#define OPT(field, name) *(void **)&s->field = dlsym(lib, name)
  REQ(Init, "nvmlInit_v2", "nvmlInit");
  REQ(Shutdown, "nvmlShutdown", NULL);
  REQ(GetCount, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
  REQ(GetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
  REQ(GetUUID, "nvmlDeviceGetUUID", NULL);
  REQ(GetName, "nvmlDeviceGetName", NULL);
  OPT(ErrorString, "nvmlErrorString");
  OPT(GetPowerManagementLimitConstraints, "nvmlDeviceGetPowerManagementLimitConstraints");
  OPT(GetPowerManagementLimit, "nvmlDeviceGetPowerManagementLimit");
  OPT(GetPowerManagementDefaultLimit, "nvmlDeviceGetPowerManagementDefaultLimit");
  OPT(SetPowerManagementLimit, "nvmlDeviceSetPowerManagementLimit");
  OPT(GetPersistenceMode, "nvmlDeviceGetPersistenceMode");
  OPT(SetPersistenceMode, "nvmlDeviceSetPersistenceMode");
  OPT(GetTotalEnergyConsumption, "nvmlDeviceGetTotalEnergyConsumption");
  OPT(GetPowerUsage, "nvmlDeviceGetPowerUsage");
  OPT(GetFieldValues, "nvmlDeviceGetFieldValues");
  OPT(GetTemperature, "nvmlDeviceGetTemperature");
  OPT(GetClockInfo, "nvmlDeviceGetClockInfo");
  OPT(GetArchitecture, "nvmlDeviceGetArchitecture");
  *(void **)&s->GetPciInfo = sym(lib, "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2");
  OPT(SystemGetDriverVersion, "nvmlSystemGetDriverVersion");
  OPT(SystemGetNVMLVersion, "nvmlSystemGetNVMLVersion");
  OPT(GetSupportedMemoryClocks, "nvmlDeviceGetSupportedMemoryClocks");
  OPT(GetSupportedGraphicsClocks, "nvmlDeviceGetSupportedGraphicsClocks");
  OPT(SetGpuLockedClocks, "nvmlDeviceSetGpuLockedClocks");
  OPT(ResetGpuLockedClocks, "nvmlDeviceResetGpuLockedClocks");
  OPT(SetMemoryLockedClocks, "nvmlDeviceSetMemoryLockedClocks");
  OPT(ResetMemoryLockedClocks, "nvmlDeviceResetMemoryLockedClocks");
  OPT(SimClockNow, "zeusSimClockNow");
#undef REQ
#undef OPT
  nvmlReturn_t r = s->Init();
  if (r != NVML_SUCCESS) {
    const char *text = s->ErrorString ? s->ErrorString(r) : NULL;
    int rc = zeus__error(ZEUS_ENOLIB, "NVML initialisation failed: %s (%s, code %d)", ret_name(r), text ? text : "no text", r);
    s->Shutdown = NULL;
    nv_close(s);
    return rc;
  }
  unsigned count = 0;
  if ((r = s->GetCount(&count)) != NVML_SUCCESS) {
    int rc = nv_fail(s, r, 0, "counting GPUs");
    nv_close(s);
    return rc;
  }
  if (count > ZEUS_MAX_GPUS) {
    zeus__log(ZEUS_LOG_WARN, "device", "NVML reports %u GPUs; using the first %d", count, ZEUS_MAX_GPUS);
    count = ZEUS_MAX_GPUS;
  }
  s->count = count;
  for (unsigned i = 0; i < count; i++) {
    r = s->GetHandleByIndex(i, &s->dev[i]);
    if (r != NVML_SUCCESS) {
      /* A GPU this user may not open still counts toward the indices. */
      s->dev[i] = NULL;
      s->dev_err[i] = r;
      zeus__log(ZEUS_LOG_WARN, "device", "NVML GPU %u cannot be opened: %s", i, ret_name(r));
    }
  }
  *state = s;
  return ZEUS_OK;
}

static unsigned nv_count(void *st) { return ((nvml_state *)st)->count; }

static double nv_now(void *st) {
  nvml_state *s = st;
  return s->SimClockNow ? s->SimClockNow() : zeus_monotonic_s();
}

/* Checks that GPU i has a handle and that the function exists. */
#define NV_DEV(s, i, fn, what)                                                                        \
  nvml_state *s = st;                                                                                 \
  if (!s->dev[i]) return nv_fail(s, s->dev_err[i], i, what);                                          \
  if (!s->fn)                                                                                         \
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: %s is not supported by the NVML library '%s' (no %s)", i, what, \
                       s->path, #fn);                                                                 \
  nvmlDevice_t dev = s->dev[i]

static int nv_name(void *st, unsigned i, char *buf, size_t len) {
  NV_DEV(s, i, GetName, "reading the name");
  char tmp[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  nvmlReturn_t r = s->GetName(dev, tmp, sizeof tmp);
  if (r) return nv_fail(s, r, i, "reading the name");
  snprintf(buf, len, "%s", tmp);
  return ZEUS_OK;
}

static int nv_uuid(void *st, unsigned i, char *buf, size_t len) {
  NV_DEV(s, i, GetUUID, "reading the UUID");
  char tmp[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  nvmlReturn_t r = s->GetUUID(dev, tmp, sizeof tmp);
  if (r) return nv_fail(s, r, i, "reading the UUID");
  snprintf(buf, len, "%s", tmp);
  return ZEUS_OK;
}

static int nv_counter_supported(void *st, unsigned i, bool *out) {
  nvml_state *s = st;
  if (!s->dev[i]) return nv_fail(s, s->dev_err[i], i, "querying the energy counter");
  if (!s->GetTotalEnergyConsumption) { *out = false; return ZEUS_OK; }
  unsigned long long mj;
  nvmlReturn_t r = s->GetTotalEnergyConsumption(s->dev[i], &mj);
  if (r == NVML_SUCCESS) { *out = true; return ZEUS_OK; }
  if (r == NVML_ERROR_NOT_SUPPORTED) { *out = false; return ZEUS_OK; }
  return nv_fail(s, r, i, "querying the energy counter");
}

static int nv_constraints(void *st, unsigned i, unsigned *lo, unsigned *hi, unsigned *def) {
  NV_DEV(s, i, GetPowerManagementLimitConstraints, "reading the power-limit range");
  unsigned a, b, c = 0;
  nvmlReturn_t r = s->GetPowerManagementLimitConstraints(dev, &a, &b);
  if (r) return nv_fail(s, r, i, "reading the power-limit range");
  if (def) {
    if (!s->GetPowerManagementDefaultLimit) return zeus__error(ZEUS_ENOTSUP, "GPU %u: no default power limit in '%s'", i, s->path);
    if ((r = s->GetPowerManagementDefaultLimit(dev, &c))) return nv_fail(s, r, i, "reading the default power limit");
  }
  if (lo) *lo = a;
  if (hi) *hi = b;
  if (def) *def = c;
  return ZEUS_OK;
}

static int nv_get_pl(void *st, unsigned i, unsigned *mw) {
  NV_DEV(s, i, GetPowerManagementLimit, "reading the power limit");
  nvmlReturn_t r = s->GetPowerManagementLimit(dev, mw);
  return r ? nv_fail(s, r, i, "reading the power limit") : ZEUS_OK;
}

/* Setting what is already set writes nothing, as the original does: no privilege is needed for it
 * and NVML sees no needless write. A failed read falls through to the write, which reports. */
static int nv_set_pl(void *st, unsigned i, unsigned mw) {
  NV_DEV(s, i, SetPowerManagementLimit, "setting the power limit");
  unsigned cur;
  if (s->GetPowerManagementLimit && s->GetPowerManagementLimit(dev, &cur) == NVML_SUCCESS && cur == mw) return ZEUS_OK;
  nvmlReturn_t r = s->SetPowerManagementLimit(dev, mw);
  if (!r) return ZEUS_OK;
  char what[64];
  snprintf(what, sizeof what, "setting the power limit to %u mW", mw);
  return nv_fail(s, r, i, what);
}

static int nv_get_pm(void *st, unsigned i, bool *enabled) {
  NV_DEV(s, i, GetPersistenceMode, "reading persistence mode");
  nvmlEnableState_t e;
  nvmlReturn_t r = s->GetPersistenceMode(dev, &e);
  if (r) return nv_fail(s, r, i, "reading persistence mode");
  *enabled = e == NVML_FEATURE_ENABLED;
  return ZEUS_OK;
}

static int nv_set_pm(void *st, unsigned i, bool enabled) {
  NV_DEV(s, i, SetPersistenceMode, "setting persistence mode");
  nvmlEnableState_t cur;
  if (s->GetPersistenceMode && s->GetPersistenceMode(dev, &cur) == NVML_SUCCESS &&
      (cur == NVML_FEATURE_ENABLED) == enabled)
    return ZEUS_OK;
  nvmlReturn_t r = s->SetPersistenceMode(dev, enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED);
  return r ? nv_fail(s, r, i, enabled ? "enabling persistence mode" : "disabling persistence mode") : ZEUS_OK;
}

static int nv_energy(void *st, unsigned i, uint64_t *mj) {
  NV_DEV(s, i, GetTotalEnergyConsumption, "reading the total-energy counter");
  unsigned long long v;
  nvmlReturn_t r = s->GetTotalEnergyConsumption(dev, &v);
  if (r) return nv_fail(s, r, i, "reading the total-energy counter");
  *mj = v;
  return ZEUS_OK;
}

static int nv_power_usage(void *st, unsigned i, unsigned *mw) {
  NV_DEV(s, i, GetPowerUsage, "reading the power draw");
  nvmlReturn_t r = s->GetPowerUsage(dev, mw);
  return r ? nv_fail(s, r, i, "reading the power draw") : ZEUS_OK;
}

/* One power field through GetFieldValues. NOT_SUPPORTED, from the call or for the field, is
 * ZEUS_ENOTSUP; *field_unsupported then tells the caller it may fall back. *refused (may be NULL)
 * says that the call answered but refused this field in this scope (its own nvmlReturn). */
static int nv_power_field_ex(nvml_state *s, unsigned i, unsigned field, unsigned scope, unsigned *mw,
                             bool *field_unsupported, bool *refused, const char *what) {
  *field_unsupported = false;
  if (refused) *refused = false;
  if (!s->dev[i]) return nv_fail(s, s->dev_err[i], i, what);
  if (!s->GetFieldValues) {
    *field_unsupported = true;
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: %s needs nvmlDeviceGetFieldValues, which '%s' lacks", i, what, s->path);
  }
  nvmlFieldValue_t v;
  memset(&v, 0, sizeof v);
  v.fieldId = field;
  v.scopeId = scope;
  nvmlReturn_t r = s->GetFieldValues(s->dev[i], 1, &v);
  if (r == NVML_SUCCESS) {
    r = v.nvmlReturn;
    if (refused) *refused = r != NVML_SUCCESS;
  }
  if (r == NVML_ERROR_NOT_SUPPORTED) *field_unsupported = true;
  if (r) return nv_fail(s, r, i, what);
  switch (v.valueType) {
    case NVML_VALUE_TYPE_UNSIGNED_INT: *mw = v.value.uiVal; break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG: *mw = (unsigned)v.value.ulVal; break;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: *mw = (unsigned)v.value.ullVal; break;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG: *mw = v.value.sllVal < 0 ? 0 : (unsigned)v.value.sllVal; break;
    case NVML_VALUE_TYPE_SIGNED_INT: *mw = v.value.siVal < 0 ? 0 : (unsigned)v.value.siVal; break;
    case NVML_VALUE_TYPE_DOUBLE: *mw = v.value.dVal < 0 ? 0 : (unsigned)(v.value.dVal + 0.5); break;
    default: return zeus__error(ZEUS_EDEVICE, "GPU %u: %s: NVML returned value type %d", i, what, v.valueType);
  }
  return ZEUS_OK;
}

static int nv_power_field(nvml_state *s, unsigned i, unsigned field, unsigned scope, unsigned *mw,
                          bool *field_unsupported, const char *what) {
  return nv_power_field_ex(s, i, field, scope, mw, field_unsupported, NULL, what);
}

/* A power field in the scope it answers in (*slot, found on the first call): the GPU scope, or,
 * where NVML refuses it, the module scope (GPU + CPU + memory of a Grace Hopper superchip), saying
 * so once in the log. When the module scope fails too, the GPU scope's error stands (and
 * *field_unsupported says whether the field is missing, for the GetPowerUsage fallback). */
static int nv_power_scoped(nvml_state *s, unsigned i, unsigned field, unsigned char *slot, unsigned *mw,
                           bool *field_unsupported, const char *what) {
  unsigned char sc = __atomic_load_n(slot, __ATOMIC_RELAXED);
  if (sc) return nv_power_field(s, i, field, sc - 1u, mw, field_unsupported, what);
  bool refused;
  int rc = nv_power_field_ex(s, i, field, NVML_POWER_SCOPE_GPU, mw, field_unsupported, &refused, what);
  if (rc == ZEUS_OK) {
    __atomic_store_n(slot, (unsigned char)(NVML_POWER_SCOPE_GPU + 1), __ATOMIC_RELAXED);
    return ZEUS_OK;
  }
  /* As the original: only a field the call answered and refused in the GPU scope (its own
   * nvmlReturn, whatever the code) sends us to the module scope; a failed call is an error. */
  if (!refused || rc == ZEUS_EGPULOST) return rc;
  zeus__saved_error saved;
  zeus__error_save(&saved);
  bool gpu_unsupported = *field_unsupported, module_unsupported;
  char mwhat[96];
  snprintf(mwhat, sizeof mwhat, "%s (module scope)", what);
  if (nv_power_field(s, i, field, NVML_POWER_SCOPE_MODULE, mw, &module_unsupported, mwhat) != ZEUS_OK) {
    *field_unsupported = gpu_unsupported;
    return zeus__error_restore(&saved);
  }
  __atomic_store_n(slot, (unsigned char)(NVML_POWER_SCOPE_MODULE + 1), __ATOMIC_RELAXED);
  if (!__atomic_exchange_n(&s->told_module[i], true, __ATOMIC_RELAXED))
    zeus__log(ZEUS_LOG_WARN, "device",
              "GPU %u: NVML refuses GPU-scope power (field %u); reporting module-scope power and energy instead: "
              "the whole superchip module (CPU + memory + GPU), as on Grace Hopper",
              i, field);
  *field_unsupported = false;
  return ZEUS_OK;
}

/* Instant power is field POWER_INSTANT where the driver has it (GetPowerUsage averages over a
 * second on Ampere other than GA100 and later), else GetPowerUsage (instantaneous on GA100 and
 * older, which is where the field is missing). */
static int nv_power(void *st, unsigned i, zeus_power_domain domain, unsigned *mw) {
  nvml_state *s = st;
  bool unsupported;
  int rc;
  switch (domain) {
    case ZEUS_POWER_INSTANT:
      if (__atomic_load_n(&s->no_instant_field[i], __ATOMIC_RELAXED)) return nv_power_usage(st, i, mw);
      rc = nv_power_scoped(s, i, NVML_FI_DEV_POWER_INSTANT, &s->instant_scope[i], mw, &unsupported,
                           "reading the instant power");
      if (rc && unsupported) {
        __atomic_store_n(&s->no_instant_field[i], true, __ATOMIC_RELAXED);
        return nv_power_usage(st, i, mw);
      }
      return rc;
    case ZEUS_POWER_AVERAGE:
      return nv_power_scoped(s, i, NVML_FI_DEV_POWER_AVERAGE, &s->average_scope[i], mw, &unsupported,
                             "reading the average power");
    case ZEUS_POWER_MEMORY_AVERAGE:
      return nv_power_field(s, i, NVML_FI_DEV_POWER_AVERAGE, NVML_POWER_SCOPE_MEMORY, mw, &unsupported,
                            "reading the memory's average power");
  }
  return zeus__error(ZEUS_EINVAL, "GPU %u: unknown power domain %d", i, (int)domain);
}

/* The scope of the GPU's power (and of its energy counter, which on Grace Hopper counts the
 * module too: the original's PR #172). Found by one instant reading when none was made yet; a GPU
 * whose power cannot be read at all is reported as GPU scope, unless it is lost. */
static int nv_power_scope(void *st, unsigned i, zeus_power_scope *out) {
  nvml_state *s = st;
  *out = ZEUS_POWER_SCOPE_GPU;
  if (!__atomic_load_n(&s->instant_scope[i], __ATOMIC_RELAXED) &&
      !__atomic_load_n(&s->no_instant_field[i], __ATOMIC_RELAXED)) {
    unsigned mw;
    int rc = nv_power(st, i, ZEUS_POWER_INSTANT, &mw);
    if (rc == ZEUS_EGPULOST) return rc;
  }
  if (__atomic_load_n(&s->instant_scope[i], __ATOMIC_RELAXED) == NVML_POWER_SCOPE_MODULE + 1)
    *out = ZEUS_POWER_SCOPE_MODULE;
  return ZEUS_OK;
}

static int nv_temperature(void *st, unsigned i, unsigned *celsius) {
  NV_DEV(s, i, GetTemperature, "reading the temperature");
  nvmlReturn_t r = s->GetTemperature(dev, NVML_TEMPERATURE_GPU, celsius);
  return r ? nv_fail(s, r, i, "reading the temperature") : ZEUS_OK;
}

static int nv_current_clocks(void *st, unsigned i, unsigned *sm_mhz, unsigned *mem_mhz) {
  NV_DEV(s, i, GetClockInfo, "reading the current clocks");
  unsigned sm = 0, mem = 0;
  nvmlReturn_t r = s->GetClockInfo(dev, NVML_CLOCK_SM, &sm);
  if (r) return nv_fail(s, r, i, "reading the current SM clock");
  if ((r = s->GetClockInfo(dev, NVML_CLOCK_MEM, &mem))) return nv_fail(s, r, i, "reading the current memory clock");
  if (sm_mhz) *sm_mhz = sm;
  if (mem_mhz) *mem_mhz = mem;
  return ZEUS_OK;
}

static int nv_architecture(void *st, unsigned i, unsigned *arch) {
  NV_DEV(s, i, GetArchitecture, "reading the architecture");
  nvmlReturn_t r = s->GetArchitecture(dev, arch);
  return r ? nv_fail(s, r, i, "reading the architecture") : ZEUS_OK;
}

static int nv_pci(void *st, unsigned i, char *buf, size_t len) {
  NV_DEV(s, i, GetPciInfo, "reading the PCI address");
  nvmlPciInfo_t pi;
  memset(&pi, 0, sizeof pi);
  nvmlReturn_t r = s->GetPciInfo(dev, &pi);
  if (r) return nv_fail(s, r, i, "reading the PCI address");
  /* lspci -D: a 4-digit domain (NVML's busId has 8). */
  snprintf(buf, len, "%04x:%02x:%02x.0", pi.domain, pi.bus, pi.device);
  return ZEUS_OK;
}

static int nv_version(nvml_state *s, nvmlReturn_t (*fn)(char *, unsigned), const char *fn_name, char *buf,
                      size_t len) {
  if (!fn) return zeus__error(ZEUS_ENOTSUP, "the NVML library '%s' lacks %s", s->path, fn_name);
  char tmp[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
  nvmlReturn_t r = fn(tmp, sizeof tmp);
  if (r) {
    const char *text = s->ErrorString ? s->ErrorString(r) : NULL;
    return zeus__error(map_code(r), "NVML %s (%s, code %d) in %s", ret_name(r), text ? text : "no text", r, fn_name);
  }
  snprintf(buf, len, "%s", tmp);
  return ZEUS_OK;
}
static int nv_driver_version(void *st, char *buf, size_t len) {
  nvml_state *s = st;
  return nv_version(s, s->SystemGetDriverVersion, "nvmlSystemGetDriverVersion", buf, len);
}
static int nv_library_version(void *st, char *buf, size_t len) {
  nvml_state *s = st;
  return nv_version(s, s->SystemGetNVMLVersion, "nvmlSystemGetNVMLVersion", buf, len);
}

/* NVML's count protocol: *n in = capacity, out = entries (or the number needed on
 * INSUFFICIENT_SIZE). Sorts highest first, as the API promises. */
static int sort_desc_cmp(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return (x < y) - (x > y);
}

static int finish_clocks(nvml_state *s, nvmlReturn_t r, unsigned n, unsigned *mhz, size_t *count, unsigned i,
                         const char *what) {
  if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
    size_t given = *count;
    *count = n;
    return zeus__error(ZEUS_ERANGE, "GPU %u: %u entries needed while %s, more than the %zu given", i, n, what,
                       given);
  }
  if (r) return nv_fail(s, r, i, what);
  qsort(mhz, n, sizeof *mhz, sort_desc_cmp);
  *count = n;
  return ZEUS_OK;
}

static int nv_mem_clocks(void *st, unsigned i, unsigned *mhz, size_t *count) {
  NV_DEV(s, i, GetSupportedMemoryClocks, "listing memory clocks");
  unsigned n = *count > 4096 ? 4096 : (unsigned)*count;
  nvmlReturn_t r = s->GetSupportedMemoryClocks(dev, &n, mhz);
  return finish_clocks(s, r, n, mhz, count, i, "listing memory clocks");
}

static int nv_gr_clocks(void *st, unsigned i, unsigned mem, unsigned *mhz, size_t *count) {
  NV_DEV(s, i, GetSupportedGraphicsClocks, "listing SM clocks");
  unsigned n = *count > 4096 ? 4096 : (unsigned)*count;
  nvmlReturn_t r = s->GetSupportedGraphicsClocks(dev, mem, &n, mhz);
  char what[64];
  snprintf(what, sizeof what, "listing SM clocks for memory clock %u MHz", mem);
  return finish_clocks(s, r, n, mhz, count, i, what);
}

static int nv_lock(void *st, unsigned i, unsigned lo, unsigned hi) {
  NV_DEV(s, i, SetGpuLockedClocks, "locking the SM clock");
  nvmlReturn_t r = s->SetGpuLockedClocks(dev, lo, hi);
  if (!r) return ZEUS_OK;
  char what[80];
  snprintf(what, sizeof what, "locking the SM clock to [%u, %u] MHz", lo, hi);
  return nv_fail(s, r, i, what);
}

static int nv_unlock(void *st, unsigned i) {
  NV_DEV(s, i, ResetGpuLockedClocks, "resetting the SM clock");
  nvmlReturn_t r = s->ResetGpuLockedClocks(dev);
  return r ? nv_fail(s, r, i, "resetting the locked SM clock") : ZEUS_OK;
}

static int nv_mem_lock(void *st, unsigned i, unsigned lo, unsigned hi) {
  NV_DEV(s, i, SetMemoryLockedClocks, "locking the memory clock");
  nvmlReturn_t r = s->SetMemoryLockedClocks(dev, lo, hi);
  if (!r) return ZEUS_OK;
  char what[80];
  snprintf(what, sizeof what, "locking the memory clock to [%u, %u] MHz", lo, hi);
  return nv_fail(s, r, i, what);
}

static int nv_mem_unlock(void *st, unsigned i) {
  NV_DEV(s, i, ResetMemoryLockedClocks, "resetting the memory clock");
  nvmlReturn_t r = s->ResetMemoryLockedClocks(dev);
  return r ? nv_fail(s, r, i, "resetting the locked memory clock") : ZEUS_OK;
}

const zeus__gpu_backend zeus__backend_nvml = {
    .name = "nvml",
    .open = nv_open,
    .close = nv_close,
    .count = nv_count,
    .now = nv_now,
    .name_of = nv_name,
    .uuid = nv_uuid,
    .energy_counter_supported = nv_counter_supported,
    .power_limit_constraints = nv_constraints,
    .get_power_limit = nv_get_pl,
    .set_power_limit = nv_set_pl,
    .get_persistence_mode = nv_get_pm,
    .set_persistence_mode = nv_set_pm,
    .total_energy = nv_energy,
    .power = nv_power,
    .power_scope = nv_power_scope,
    .temperature = nv_temperature,
    .current_clocks = nv_current_clocks,
    .architecture = nv_architecture,
    .pci_address = nv_pci,
    .driver_version = nv_driver_version,
    .library_version = nv_library_version,
    .memory_clocks = nv_mem_clocks,
    .graphics_clocks = nv_gr_clocks,
    .set_locked_clocks = nv_lock,
    .reset_locked_clocks = nv_unlock,
    .set_memory_locked_clocks = nv_mem_lock,
    .reset_memory_locked_clocks = nv_mem_unlock,
};
