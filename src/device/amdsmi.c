/* The "amdsmi" backend: AMD GPUs through ROCm's libamd_smi.so, loaded at run time.
 *
 * Readings and conversions follow the original (zeus/device/gpu/amd.py): the name is the ASIC's
 * market name; power caps are in microwatts (divided by 1000 to mW, multiplied back to set them);
 * socket powers are in watts (times 1000); the energy counter is ticks times a resolution in
 * microjoules (divided by 1000 to mJ); the temperature is the hotspot's in millidegrees. Clock
 * "lists" are the [max, min] of the GFX and memory clocks, as the original's. AMD GPUs have no
 * per-domain clock reset: a reset sets the performance level back to auto, which frees both
 * domains, so this backend puts back the other domain's lock it set itself.
 *
 * Required symbols: amdsmi_init, amdsmi_shut_down, amdsmi_get_socket_handles,
 * amdsmi_get_processor_handles, amdsmi_get_gpu_device_uuid, amdsmi_get_gpu_asic_info. Every other
 * one is optional, and a missing one fails that operation with ZEUS_ENOTSUP naming the call. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "device/amdsmi_types.h"
#include "device/backend.h"

typedef struct amdsmi_state {
  void *lib;
  char path[512];
  amdsmi_status_t (*init)(uint64_t);
  amdsmi_status_t (*shut_down)(void);
  amdsmi_status_t (*status_code_to_string)(amdsmi_status_t, const char **);
  amdsmi_status_t (*get_socket_handles)(uint32_t *, amdsmi_socket_handle *);
  amdsmi_status_t (*get_processor_handles)(amdsmi_socket_handle, uint32_t *, amdsmi_processor_handle *);
  amdsmi_status_t (*get_gpu_device_uuid)(amdsmi_processor_handle, unsigned int *, char *);
  amdsmi_status_t (*get_gpu_asic_info)(amdsmi_processor_handle, amdsmi_asic_info_t *);
  amdsmi_status_t (*get_gpu_kfd_info)(amdsmi_processor_handle, amdsmi_kfd_info_t *);
  amdsmi_status_t (*get_gpu_enumeration_info)(amdsmi_processor_handle, amdsmi_enumeration_info_t *);
  amdsmi_status_t (*get_gpu_device_bdf)(amdsmi_processor_handle, amdsmi_bdf_t *);
  amdsmi_status_t (*get_gpu_driver_info)(amdsmi_processor_handle, amdsmi_driver_info_t *);
  amdsmi_status_t (*get_lib_version)(amdsmi_version_t *);
  amdsmi_status_t (*get_power_cap_info)(amdsmi_processor_handle, uint32_t, amdsmi_power_cap_info_t *);
  amdsmi_status_t (*set_power_cap)(amdsmi_processor_handle, uint32_t, uint64_t);
  amdsmi_status_t (*get_power_info)(amdsmi_processor_handle, amdsmi_power_info_t *);
  amdsmi_status_t (*get_energy_count)(amdsmi_processor_handle, uint64_t *, float *, uint64_t *);
  amdsmi_status_t (*get_temp_metric)(amdsmi_processor_handle, amdsmi_temperature_type_t,
                                     amdsmi_temperature_metric_t, int64_t *);
  amdsmi_status_t (*get_clock_info)(amdsmi_processor_handle, amdsmi_clk_type_t, amdsmi_clk_info_t *);
  amdsmi_status_t (*set_gpu_clk_range)(amdsmi_processor_handle, uint64_t, uint64_t, amdsmi_clk_type_t);
  amdsmi_status_t (*set_gpu_perf_level)(amdsmi_processor_handle, amdsmi_dev_perf_level_t);
  /* Optional clock of a simulated library (the test double): seconds. NULL for the real one. */
  double (*SimClockNow)(void);
  unsigned count;
  amdsmi_processor_handle dev[ZEUS_MAX_GPUS];
  /* The locks this backend set (0 0: none), put back after a reset of the other domain. */
  pthread_mutex_t mu;
  unsigned gfx_lock[ZEUS_MAX_GPUS][2], mem_lock[ZEUS_MAX_GPUS][2];
} amdsmi_state;

static const char *status_name(amdsmi_status_t r) {
  switch (r) {
#define ZEUS__AMDSMI_NAME(name, value) \
  case (value):                        \
    return #name;
    ZEUS_AMDSMI_STATUS_MAP(ZEUS__AMDSMI_NAME)
#undef ZEUS__AMDSMI_NAME
  }
  return "AMDSMI_STATUS_UNKNOWN_CODE";
}

/* The original's exception map (AMDGPU._exception_map), in zeus codes. */
static int map_status(amdsmi_status_t r) {
  switch (r) {
    case AMDSMI_STATUS_SUCCESS: return ZEUS_OK;
    case AMDSMI_STATUS_INVAL:
    case AMDSMI_STATUS_ARG_PTR_NULL:
    case AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS: return ZEUS_EINVAL;
    case AMDSMI_STATUS_NOT_SUPPORTED:
    case AMDSMI_STATUS_NOT_YET_IMPLEMENTED:
    case AMDSMI_STATUS_NO_HSMP_SUP:
    case AMDSMI_STATUS_NO_HSMP_MSG_SUP:
    case AMDSMI_STATUS_SETTING_UNAVAILABLE: return ZEUS_ENOTSUP;
    case AMDSMI_STATUS_TIMEOUT:
    case AMDSMI_STATUS_HSMP_TIMEOUT: return ZEUS_ETIMEDOUT;
    case AMDSMI_STATUS_NO_PERM: return ZEUS_EPERM;
    case AMDSMI_STATUS_OUT_OF_RESOURCES: return ZEUS_ENOMEM;
    case AMDSMI_STATUS_NOT_FOUND: return ZEUS_ENOENT;
    case AMDSMI_STATUS_INSUFFICIENT_SIZE: return ZEUS_ERANGE;
    case AMDSMI_STATUS_BUSY:
    case AMDSMI_STATUS_RETRY: return ZEUS_ESTATE;
    case AMDSMI_STATUS_INIT_ERROR:
    case AMDSMI_STATUS_NOT_INIT:
    case AMDSMI_STATUS_DRIVER_NOT_LOADED:
    case AMDSMI_STATUS_NO_ENERGY_DRV:
    case AMDSMI_STATUS_NO_MSR_DRV:
    case AMDSMI_STATUS_NO_HSMP_DRV:
    case AMDSMI_STATUS_NO_DRV:
    case AMDSMI_STATUS_FAIL_LOAD_MODULE:
    case AMDSMI_STATUS_FAIL_LOAD_SYMBOL:
    case AMDSMI_STATUS_FILE_NOT_FOUND: return ZEUS_ENOLIB;
    default: return ZEUS_EDEVICE;
  }
}

/* An amdsmi failure as a zeus error naming the status, its text, the GPU, the operation and the
 * amdsmi call. */
static int am_fail(const amdsmi_state *s, amdsmi_status_t r, unsigned gpu, const char *what, const char *call) {
  const char *text = NULL;
  if (s->status_code_to_string && s->status_code_to_string(r, &text) != AMDSMI_STATUS_SUCCESS) text = NULL;
  const char *hint = r == AMDSMI_STATUS_NO_PERM ? ": this operation needs root (amdsmi writes the GPU's sysfs files)" : "";
  return zeus__error(map_status(r), "amdsmi %s (%s, code %u) on GPU %u while %s (%s)%s", status_name(r),
                     text ? text : "no text", (unsigned)r, gpu, what, call, hint);
}

static void am_close(void *st) {
  amdsmi_state *s = st;
  if (!s) return;
  if (s->shut_down) s->shut_down();
  if (s->lib) dlclose(s->lib);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

/* Orders the GPUs by ROCm 6.3's rule (the original's fallback): HIP numbers them in KFD node id
 * order. Returns false, leaving the order alone, where a GPU has no node id. */
static bool order_by_kfd_node(amdsmi_state *s) {
  if (!s->get_gpu_kfd_info) return false;
  uint32_t node[ZEUS_MAX_GPUS];
  for (unsigned i = 0; i < s->count; i++) {
    amdsmi_kfd_info_t k;
    memset(&k, 0, sizeof k);
    if (s->get_gpu_kfd_info(s->dev[i], &k) != AMDSMI_STATUS_SUCCESS || k.node_id == 0xFFFFFFFFu) return false;
    node[i] = k.node_id;
  }
  for (unsigned i = 1; i < s->count; i++) /* insertion sort: a few GPUs */
    for (unsigned j = i; j > 0 && node[j - 1] > node[j]; j--) {
      uint32_t t = node[j];
      node[j] = node[j - 1];
      node[j - 1] = t;
      amdsmi_processor_handle h = s->dev[j];
      s->dev[j] = s->dev[j - 1];
      s->dev[j - 1] = h;
    }
  return true;
}

/* Places each GPU at the HIP index amdsmi_get_gpu_enumeration_info gives it (ROCm 6.4+, the
 * original's first choice). Returns false, leaving the order alone, where the library lacks the
 * call, a call fails, or the ids are not 0..count-1 each once (a partitioned GPU, say). */
static bool order_by_enumeration(amdsmi_state *s) {
  if (!s->get_gpu_enumeration_info) return false;
  amdsmi_processor_handle sorted[ZEUS_MAX_GPUS] = {0};
  for (unsigned i = 0; i < s->count; i++) {
    amdsmi_enumeration_info_t e;
    memset(&e, 0, sizeof e);
    amdsmi_status_t r = s->get_gpu_enumeration_info(s->dev[i], &e);
    if (r != AMDSMI_STATUS_SUCCESS || e.hip_id >= s->count || sorted[e.hip_id]) {
      zeus__log(ZEUS_LOG_DEBUG, "device",
                "amdsmi_get_gpu_enumeration_info on amd-smi's GPU %u: %s, hip_id %u of %u GPUs%s; ordering by "
                "KFD node instead",
                i, status_name(r), (unsigned)e.hip_id, s->count,
                r == AMDSMI_STATUS_SUCCESS && e.hip_id < s->count ? " (given twice)" : "");
      return false;
    }
    sorted[e.hip_id] = s->dev[i];
  }
  memcpy(s->dev, sorted, s->count * sizeof sorted[0]);
  return true;
}

/* Orders the GPUs as HIP numbers them, where amdsmi can tell; else amd-smi's own order (by PCI
 * address). */
static void order_as_hip(amdsmi_state *s) {
  if (s->count < 2) return;
  if (!order_by_enumeration(s)) order_by_kfd_node(s);
}

static int am_open(void **state, const zeus_devices_opts *opts) {
  (void)opts;
  const char *path = zeus__env_str("ZEUS_AMDSMI_LIBRARY");
  if (!path) path = "libamd_smi.so";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return zeus__error(ZEUS_ENOLIB, "cannot load the amdsmi library '%s': %s", path, dlerror());
  amdsmi_state *s = calloc(1, sizeof *s);
  if (!s) {
    dlclose(lib);
    return zeus__oom("loading amdsmi");
  }
  pthread_mutex_init(&s->mu, NULL);
  s->lib = lib;
  snprintf(s->path, sizeof s->path, "%s", path);
#define REQ(field)                                                                                       \
  do {                                                                                                   \
    *(void **)&s->field = dlsym(lib, "amdsmi_" #field);                                                  \
    if (!s->field) {                                                                                     \
      int rc_ = zeus__error(ZEUS_ENOLIB, "the amdsmi library '%s' lacks the required function amdsmi_%s", \
                            path, #field);                                                               \
      s->shut_down = NULL;                                                                               \
      am_close(s);                                                                                       \
      return rc_;                                                                                        \
    }                                                                                                    \
  } while (0)
#define OPT(field) *(void **)&s->field = dlsym(lib, "amdsmi_" #field)
  REQ(init);
  REQ(shut_down);
  REQ(get_socket_handles);
  REQ(get_processor_handles);
  REQ(get_gpu_device_uuid);
  REQ(get_gpu_asic_info);
  OPT(status_code_to_string);
  OPT(get_gpu_kfd_info);
  OPT(get_gpu_enumeration_info);
  OPT(get_gpu_device_bdf);
  OPT(get_gpu_driver_info);
  OPT(get_lib_version);
  OPT(get_power_cap_info);
  OPT(set_power_cap);
  OPT(get_power_info);
  OPT(get_energy_count);
  OPT(get_temp_metric);
  OPT(get_clock_info);
  OPT(set_gpu_clk_range);
  OPT(set_gpu_perf_level);
  *(void **)&s->SimClockNow = dlsym(lib, "zeusSimClockNow");
#undef REQ
#undef OPT
  amdsmi_status_t r = s->init(AMDSMI_INIT_AMD_GPUS);
  if (r != AMDSMI_STATUS_SUCCESS) {
    int rc = zeus__error(ZEUS_ENOLIB, "amdsmi initialisation failed: %s (code %u) from amdsmi_init(AMDSMI_INIT_AMD_GPUS)",
                         status_name(r), (unsigned)r);
    s->shut_down = NULL;
    am_close(s);
    return rc;
  }
  amdsmi_socket_handle sockets[ZEUS_MAX_GPUS];
  uint32_t nsock = 0;
  if ((r = s->get_socket_handles(&nsock, NULL)) == AMDSMI_STATUS_SUCCESS) {
    if (nsock > ZEUS_MAX_GPUS) nsock = ZEUS_MAX_GPUS;
    r = s->get_socket_handles(&nsock, sockets);
  }
  if (r != AMDSMI_STATUS_SUCCESS) {
    int rc = am_fail(s, r, 0, "listing the sockets", "amdsmi_get_socket_handles");
    am_close(s);
    return rc;
  }
  for (uint32_t k = 0; k < nsock && s->count < ZEUS_MAX_GPUS; k++) {
    uint32_t n = 0;
    if ((r = s->get_processor_handles(sockets[k], &n, NULL)) == AMDSMI_STATUS_SUCCESS) {
      if (n > ZEUS_MAX_GPUS - s->count) {
        zeus__log(ZEUS_LOG_WARN, "device", "amdsmi reports more than %d GPUs; using the first %d", ZEUS_MAX_GPUS,
                  ZEUS_MAX_GPUS);
        n = ZEUS_MAX_GPUS - s->count;
      }
      r = s->get_processor_handles(sockets[k], &n, &s->dev[s->count]);
    }
    if (r != AMDSMI_STATUS_SUCCESS) {
      int rc = am_fail(s, r, s->count, "listing the GPUs of a socket", "amdsmi_get_processor_handles");
      am_close(s);
      return rc;
    }
    s->count += n;
  }
  order_as_hip(s);
  *state = s;
  return ZEUS_OK;
}

static unsigned am_count(void *st) { return ((amdsmi_state *)st)->count; }

static double am_now(void *st) {
  amdsmi_state *s = st;
  return s->SimClockNow ? s->SimClockNow() : zeus_monotonic_s();
}

/* Declares s and dev; fails with ZEUS_ENOTSUP naming the call when the library lacks it. */
#define AM_DEV(fn, what)                                                                                    \
  amdsmi_state *s = st;                                                                                     \
  if (!s->fn)                                                                                               \
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: %s is not supported by the amdsmi library '%s' (no amdsmi_%s)", i, \
                       what, s->path, #fn);                                                                 \
  amdsmi_processor_handle dev = s->dev[i]

static int am_name(void *st, unsigned i, char *buf, size_t len) {
  AM_DEV(get_gpu_asic_info, "reading the name");
  amdsmi_asic_info_t a;
  memset(&a, 0, sizeof a);
  amdsmi_status_t r = s->get_gpu_asic_info(dev, &a);
  if (r) return am_fail(s, r, i, "reading the name", "amdsmi_get_gpu_asic_info");
  a.market_name[sizeof a.market_name - 1] = '\0';
  snprintf(buf, len, "%s", a.market_name);
  return ZEUS_OK;
}

static int am_uuid(void *st, unsigned i, char *buf, size_t len) {
  AM_DEV(get_gpu_device_uuid, "reading the UUID");
  char tmp[ZEUS_NAME_LEN];
  unsigned int n = sizeof tmp;
  memset(tmp, 0, sizeof tmp);
  amdsmi_status_t r = s->get_gpu_device_uuid(dev, &n, tmp);
  if (r) return am_fail(s, r, i, "reading the UUID", "amdsmi_get_gpu_device_uuid");
  tmp[sizeof tmp - 1] = '\0';
  snprintf(buf, len, "%s", tmp);
  return ZEUS_OK;
}

/* The counter in mJ: ticks times the resolution (uJ), as the original. */
static int read_energy(amdsmi_state *s, unsigned i, uint64_t *mj, amdsmi_status_t *status) {
  uint64_t ticks = 0, ts = 0;
  float res = 0;
  *status = s->get_energy_count(s->dev[i], &ticks, &res, &ts);
  if (*status) return am_fail(s, *status, i, "reading the energy counter", "amdsmi_get_energy_count");
  if (!(res > 0))
    return zeus__error(ZEUS_EDEVICE, "GPU %u: amdsmi_get_energy_count gave a counter resolution of %g uJ, expected > 0",
                       i, (double)res);
  *mj = (uint64_t)((double)ticks * (double)res / 1e3);
  return ZEUS_OK;
}

static int am_counter_supported(void *st, unsigned i, bool *out) {
  amdsmi_state *s = st;
  *out = false;
  if (!s->get_energy_count) return ZEUS_OK;
  uint64_t mj;
  amdsmi_status_t r;
  int rc = read_energy(s, i, &mj, &r);
  if (rc == ZEUS_OK) *out = true;
  else if (r == AMDSMI_STATUS_NOT_SUPPORTED) rc = ZEUS_OK;
  return rc;
}

static int am_energy(void *st, unsigned i, uint64_t *mj) {
  AM_DEV(get_energy_count, "reading the energy counter");
  (void)dev;
  amdsmi_status_t r;
  return read_energy(s, i, mj, &r);
}

static int cap_info(amdsmi_state *s, unsigned i, amdsmi_power_cap_info_t *c, const char *what) {
  memset(c, 0, sizeof *c);
  amdsmi_status_t r = s->get_power_cap_info(s->dev[i], 0, c);
  return r ? am_fail(s, r, i, what, "amdsmi_get_power_cap_info") : ZEUS_OK;
}

/* uW to mW, flooring as the original does (divmod; it warns on a remainder, which no GPU has
 * shown: caps come in whole watts). */
static unsigned uw_to_mw(uint64_t uw) {
  uint64_t mw = uw / 1000u;
  return mw > 0xFFFFFFFFu ? 0xFFFFFFFFu : (unsigned)mw;
}

static int am_constraints(void *st, unsigned i, unsigned *lo, unsigned *hi, unsigned *def) {
  AM_DEV(get_power_cap_info, "reading the power-cap range");
  (void)dev;
  amdsmi_power_cap_info_t c;
  int rc = cap_info(s, i, &c, "reading the power-cap range");
  if (rc) return rc;
  if (lo) *lo = uw_to_mw(c.min_power_cap);
  if (hi) *hi = uw_to_mw(c.max_power_cap);
  if (def) *def = uw_to_mw(c.default_power_cap);
  return ZEUS_OK;
}

static int am_get_pl(void *st, unsigned i, unsigned *mw) {
  AM_DEV(get_power_cap_info, "reading the power cap");
  (void)dev;
  amdsmi_power_cap_info_t c;
  int rc = cap_info(s, i, &c, "reading the power cap");
  if (!rc) *mw = uw_to_mw(c.power_cap);
  return rc;
}

/* A cap equal to the current one (in mW, as am_get_pl reads it) is not written, as the original
 * skips it: no write, so no privilege needed to "set" what is already set. */
static int am_set_pl(void *st, unsigned i, unsigned mw) {
  AM_DEV(set_power_cap, "setting the power cap");
  if (s->get_power_cap_info) {
    amdsmi_power_cap_info_t c;
    int rc = cap_info(s, i, &c, "reading the power cap before setting it");
    if (rc) return rc;
    if (uw_to_mw(c.power_cap) == mw) return ZEUS_OK;
  }
  amdsmi_status_t r = s->set_power_cap(dev, 0, (uint64_t)mw * 1000u);
  if (!r) return ZEUS_OK;
  char what[64];
  snprintf(what, sizeof what, "setting the power cap to %u mW", mw);
  return am_fail(s, r, i, what, "amdsmi_set_power_cap");
}

/* Socket power in W, to mW. A field amdsmi cannot fill reads 0xFFFF or all ones. */
static int am_power(void *st, unsigned i, zeus_power_domain domain, unsigned *mw) {
  if (domain == ZEUS_POWER_MEMORY_AVERAGE)
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: amdsmi has no memory power (amdsmi_get_power_info reports the socket)", i);
  if (domain != ZEUS_POWER_INSTANT && domain != ZEUS_POWER_AVERAGE)
    return zeus__error(ZEUS_EINVAL, "GPU %u: unknown power domain %d", i, (int)domain);
  const char *what = domain == ZEUS_POWER_INSTANT ? "reading the current socket power" : "reading the average socket power";
  AM_DEV(get_power_info, what);
  amdsmi_power_info_t p;
  memset(&p, 0, sizeof p);
  amdsmi_status_t r = s->get_power_info(dev, &p);
  if (r) return am_fail(s, r, i, what, "amdsmi_get_power_info");
  uint32_t w = domain == ZEUS_POWER_INSTANT ? p.current_socket_power : p.average_socket_power;
  if (w == 0xFFFFu || w == 0xFFFFFFFFu)
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: amdsmi_get_power_info has no %s on this GPU (N/A)", i,
                       domain == ZEUS_POWER_INSTANT ? "current_socket_power" : "average_socket_power");
  *mw = w > 4000000u ? 4000000000u : w * 1000u;
  return ZEUS_OK;
}

/* The hotspot (junction) temperature, as the original: millidegrees to degrees. */
static int am_temperature(void *st, unsigned i, unsigned *celsius) {
  AM_DEV(get_temp_metric, "reading the temperature");
  int64_t mc = 0;
  amdsmi_status_t r = s->get_temp_metric(dev, AMDSMI_TEMPERATURE_TYPE_HOTSPOT, AMDSMI_TEMP_CURRENT, &mc);
  if (r) return am_fail(s, r, i, "reading the hotspot temperature", "amdsmi_get_temp_metric");
  *celsius = mc < 0 ? 0 : (unsigned)(mc / 1000);
  return ZEUS_OK;
}

static int clock_info(amdsmi_state *s, unsigned i, amdsmi_clk_type_t type, amdsmi_clk_info_t *c, const char *what) {
  memset(c, 0, sizeof *c);
  amdsmi_status_t r = s->get_clock_info(s->dev[i], type, c);
  return r ? am_fail(s, r, i, what, "amdsmi_get_clock_info") : ZEUS_OK;
}

static int am_current_clocks(void *st, unsigned i, unsigned *sm_mhz, unsigned *mem_mhz) {
  AM_DEV(get_clock_info, "reading the current clocks");
  (void)dev;
  amdsmi_clk_info_t g, m;
  int rc = clock_info(s, i, AMDSMI_CLK_TYPE_GFX, &g, "reading the current GFX clock");
  if (!rc) rc = clock_info(s, i, AMDSMI_CLK_TYPE_MEM, &m, "reading the current memory clock");
  if (rc) return rc;
  if (sm_mhz) *sm_mhz = g.clk;
  if (mem_mhz) *mem_mhz = m.clk;
  return ZEUS_OK;
}

/* [max, min] of one clock domain (one entry when they are equal), as the original lists them. */
static int clock_range(amdsmi_state *s, unsigned i, amdsmi_clk_type_t type, unsigned *mhz, size_t *count,
                       const char *what) {
  amdsmi_clk_info_t c;
  int rc = clock_info(s, i, type, &c, what);
  if (rc) return rc;
  size_t n = c.max_clk == c.min_clk ? 1 : 2;
  if (*count < n) {
    size_t given = *count;
    *count = n;
    return zeus__error(ZEUS_ERANGE, "GPU %u: %zu entries needed while %s, more than the %zu given", i, n, what, given);
  }
  mhz[0] = c.max_clk;
  if (n == 2) mhz[1] = c.min_clk;
  *count = n;
  return ZEUS_OK;
}

static int am_mem_clocks(void *st, unsigned i, unsigned *mhz, size_t *count) {
  AM_DEV(get_clock_info, "listing memory clocks");
  (void)dev;
  return clock_range(s, i, AMDSMI_CLK_TYPE_MEM, mhz, count, "listing memory clocks");
}

/* AMD's GFX clock range does not depend on the memory clock. */
static int am_gr_clocks(void *st, unsigned i, unsigned mem, unsigned *mhz, size_t *count) {
  (void)mem;
  AM_DEV(get_clock_info, "listing GFX clocks");
  (void)dev;
  return clock_range(s, i, AMDSMI_CLK_TYPE_GFX, mhz, count, "listing GFX clocks");
}

static int set_range(amdsmi_state *s, unsigned i, amdsmi_clk_type_t type, unsigned lo, unsigned hi) {
  bool mem = type == AMDSMI_CLK_TYPE_MEM;
  if (!s->set_gpu_clk_range)
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: locking the %s clock is not supported by the amdsmi library '%s' (no amdsmi_set_gpu_clk_range)",
                       i, mem ? "memory" : "GFX", s->path);
  amdsmi_status_t r = s->set_gpu_clk_range(s->dev[i], lo, hi, type);
  if (r) {
    char what[80];
    snprintf(what, sizeof what, "locking the %s clock to [%u, %u] MHz", mem ? "memory" : "GFX", lo, hi);
    return am_fail(s, r, i, what, "amdsmi_set_gpu_clk_range");
  }
  pthread_mutex_lock(&s->mu);
  unsigned *slot = mem ? s->mem_lock[i] : s->gfx_lock[i];
  slot[0] = lo;
  slot[1] = hi;
  pthread_mutex_unlock(&s->mu);
  return ZEUS_OK;
}

static int am_lock(void *st, unsigned i, unsigned lo, unsigned hi) {
  return set_range(st, i, AMDSMI_CLK_TYPE_GFX, lo, hi);
}

static int am_mem_lock(void *st, unsigned i, unsigned lo, unsigned hi) {
  return set_range(st, i, AMDSMI_CLK_TYPE_MEM, lo, hi);
}

/* Resets one domain: performance level auto (which frees both), then the other domain's lock
 * again where this backend had set one. */
static int reset_domain(amdsmi_state *s, unsigned i, bool mem) {
  if (!s->set_gpu_perf_level)
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: resetting the %s clock is not supported by the amdsmi library '%s' (no amdsmi_set_gpu_perf_level)",
                       i, mem ? "memory" : "GFX", s->path);
  amdsmi_status_t r = s->set_gpu_perf_level(s->dev[i], AMDSMI_DEV_PERF_LEVEL_AUTO);
  if (r)
    return am_fail(s, r, i, mem ? "resetting the memory clock" : "resetting the GFX clock",
                   "amdsmi_set_gpu_perf_level(AMDSMI_DEV_PERF_LEVEL_AUTO)");
  pthread_mutex_lock(&s->mu);
  unsigned *mine = mem ? s->mem_lock[i] : s->gfx_lock[i];
  unsigned *other = mem ? s->gfx_lock[i] : s->mem_lock[i];
  mine[0] = mine[1] = 0;
  unsigned lo = other[0], hi = other[1];
  pthread_mutex_unlock(&s->mu);
  if (!hi) return ZEUS_OK;
  return set_range(s, i, mem ? AMDSMI_CLK_TYPE_GFX : AMDSMI_CLK_TYPE_MEM, lo, hi);
}

static int am_unlock(void *st, unsigned i) { return reset_domain(st, i, false); }
static int am_mem_unlock(void *st, unsigned i) { return reset_domain(st, i, true); }

/* Resets both domains: the one performance-level reset that frees them both, and no lock put back
 * (one amdsmi call where the two one-domain resets take two to four). */
static int am_unlock_all(void *st, unsigned i) {
  amdsmi_state *s = st;
  if (!s->set_gpu_perf_level)
    return zeus__error(ZEUS_ENOTSUP, "GPU %u: resetting the GFX and memory clocks is not supported by the amdsmi library '%s' (no amdsmi_set_gpu_perf_level)",
                       i, s->path);
  amdsmi_status_t r = s->set_gpu_perf_level(s->dev[i], AMDSMI_DEV_PERF_LEVEL_AUTO);
  if (r)
    return am_fail(s, r, i, "resetting the GFX and memory clocks",
                   "amdsmi_set_gpu_perf_level(AMDSMI_DEV_PERF_LEVEL_AUTO)");
  pthread_mutex_lock(&s->mu);
  s->gfx_lock[i][0] = s->gfx_lock[i][1] = 0;
  s->mem_lock[i][0] = s->mem_lock[i][1] = 0;
  pthread_mutex_unlock(&s->mu);
  return ZEUS_OK;
}

static int am_pci(void *st, unsigned i, char *buf, size_t len) {
  AM_DEV(get_gpu_device_bdf, "reading the PCI address");
  amdsmi_bdf_t b;
  b.as_uint = 0;
  amdsmi_status_t r = s->get_gpu_device_bdf(dev, &b);
  if (r) return am_fail(s, r, i, "reading the PCI address", "amdsmi_get_gpu_device_bdf");
  uint64_t v = b.as_uint;
  snprintf(buf, len, "%04x:%02x:%02x.%x", (unsigned)((v >> 16) & 0xffff), (unsigned)((v >> 8) & 0xff),
           (unsigned)((v >> 3) & 0x1f), (unsigned)(v & 0x7));
  return ZEUS_OK;
}

static int am_driver_version(void *st, char *buf, size_t len) {
  amdsmi_state *s = st;
  if (!s->get_gpu_driver_info || !s->count)
    return zeus__error(ZEUS_ENOTSUP, "the amdsmi library '%s' cannot tell the driver version (no amdsmi_get_gpu_driver_info or no GPU)", s->path);
  amdsmi_driver_info_t d;
  memset(&d, 0, sizeof d);
  amdsmi_status_t r = s->get_gpu_driver_info(s->dev[0], &d);
  if (r) return am_fail(s, r, 0, "reading the driver version", "amdsmi_get_gpu_driver_info");
  d.driver_version[sizeof d.driver_version - 1] = '\0';
  snprintf(buf, len, "%s", d.driver_version);
  return ZEUS_OK;
}

static int am_library_version(void *st, char *buf, size_t len) {
  amdsmi_state *s = st;
  if (!s->get_lib_version) return zeus__error(ZEUS_ENOTSUP, "the amdsmi library '%s' lacks amdsmi_get_lib_version", s->path);
  amdsmi_version_t v;
  memset(&v, 0, sizeof v);
  amdsmi_status_t r = s->get_lib_version(&v);
  if (r) return zeus__error(map_status(r), "amdsmi %s (code %u) in amdsmi_get_lib_version", status_name(r), (unsigned)r);
  snprintf(buf, len, "%u.%u.%u.%u", v.year, v.major, v.minor, v.release);
  return ZEUS_OK;
}

const zeus__gpu_backend zeus__backend_amdsmi = {
    .name = "amdsmi",
    .open = am_open,
    .close = am_close,
    .count = am_count,
    .now = am_now,
    .name_of = am_name,
    .uuid = am_uuid,
    .energy_counter_supported = am_counter_supported,
    .power_limit_constraints = am_constraints,
    .get_power_limit = am_get_pl,
    .set_power_limit = am_set_pl,
    .total_energy = am_energy,
    .power = am_power,
    .temperature = am_temperature,
    .current_clocks = am_current_clocks,
    .pci_address = am_pci,
    .driver_version = am_driver_version,
    .library_version = am_library_version,
    .memory_clocks = am_mem_clocks,
    .graphics_clocks = am_gr_clocks,
    .set_locked_clocks = am_lock,
    .reset_locked_clocks = am_unlock,
    .set_memory_locked_clocks = am_mem_lock,
    .reset_memory_locked_clocks = am_mem_unlock,
    .reset_all_locked_clocks = am_unlock_all,
};
