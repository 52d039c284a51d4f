/* A fake libamd_smi.so for tests: amdsmi's C ABI (src/device/amdsmi_types.h) over the
 * simulated-GPU engine (zeus/sim.h), as tests/fake_nvml plays NVML.
 *
 * The first amdsmi_init creates one simulated node from the ZEUS_SIM_* settings (ZEUS_SIM_GPUS,
 * ZEUS_SIM_HARDWARE=mi300x, ...); the last amdsmi_shut_down destroys it. One socket per GPU, one
 * processor per socket, as on an MI300X platform. What each call answers:
 *   - every call but amdsmi_status_code_to_string answers NOT_INIT before amdsmi_init; an init
 *     without AMDSMI_INIT_AMD_GPUS lists no GPUs;
 *   - ARG_PTR_NULL for NULL out-pointers, INVAL for handles that are not ours, a sensor index
 *     other than 0, a power cap outside [min, max], a clock range with min > max or a clock type
 *     other than GFX (SYS) and MEM, a performance level other than AUTO and MANUAL;
 *   - the count protocol of amdsmi_get_socket_handles/amdsmi_get_processor_handles: a NULL array
 *     asks for the count;
 *   - amdsmi_get_gpu_asic_info: the engine's GPU name as market_name ("AMD Instinct MI300X" for
 *     an unnamed GPU of the mi300x profile), vendor 0x1002, device 0x74a1
 *     (an MI300X); amdsmi_get_gpu_device_uuid: the engine's UUID without its "GPU-" prefix
 *     (INSUFFICIENT_SIZE under AMDSMI_GPU_UUID_SIZE); amdsmi_get_gpu_device_bdf: bus i + 1 of
 *     domain 0, or FAKE_AMDSMI_BDFS's; amdsmi_get_gpu_kfd_info: node id i + 1 (so HIP order is
 *     this order), or FAKE_AMDSMI_KFD_NODES's; amdsmi_get_gpu_enumeration_info (ROCm 6.4+): the
 *     GPU's rank in node id order as hip_id, or FAKE_AMDSMI_HIP_IDS's;
 *   - power caps in uW from the engine's mW; amdsmi_get_power_info: the engine's instant and
 *     average power in whole watts (rounded), or 0xFFFF for a field FAKE_AMDSMI_POWER_NA names;
 *   - amdsmi_get_energy_count: the engine's counter in ticks of FAKE_AMDSMI_RESOLUTION_UJ
 *     (default 15.259 uJ, 1/65536 J), floored, the node's time as the timestamp (ns);
 *     NOT_SUPPORTED on a GPU without a counter (ZEUS_SIM_ENERGY_COUNTER=0);
 *   - amdsmi_get_temp_metric: EDGE and HOTSPOT current, the engine's temperature in millidegrees;
 *     every other sensor or metric NOT_SUPPORTED;
 *   - amdsmi_get_clock_info: clk, the clock now (the GFX clock's read-back follows the engine's
 *     ticks on a hardware profile); min_clk and max_clk the GPU's supported range (assumed: real
 *     amdsmi may show a locked range there); clk_locked while a lock of that domain holds;
 *   - amdsmi_set_gpu_clk_range locks the GFX or memory clock; amdsmi_set_gpu_perf_level(AUTO)
 *     frees both (AMD has no per-domain reset), MANUAL changes nothing.
 *
 * Test controls, read at the first (node-creating) init, except FAKE_AMDSMI_INIT_ERROR:
 *   FAKE_AMDSMI_LOG=<path>      one line per setter call, failed ones too:
 *                               "<function> <gpu|?> <args> -> <status>", one write() each
 *                               (amdsmi_set_power_cap 0 0 600000000 -> 0).
 *   FAKE_AMDSMI_INJECT=<fn>:<status>[:<gpu>[:<after>]][;...]   as FAKE_NVML_INJECT (the same
 *                               parser, tests/fake_common/fake_common.h): after
 *                               <after> matching calls, every matching call answers <status> (a
 *                               number or a name with or without AMDSMI_STATUS_: NO_PERM,
 *                               NOT_SUPPORTED...); * matches every device call. Injected failures
 *                               never reach the engine.
 *   FAKE_AMDSMI_INIT_ERROR=<status>   amdsmi_init fails with it.
 *   FAKE_AMDSMI_STATE=<path>    the knobs outlive the process, in the fake NVML's state format
 *                               (tests/fake_common/fake_common.h), read at init, written after
 *                               each setter.
 *   FAKE_AMDSMI_BUSY_FILE=<path> while it exists every GPU is busy (zeus_sim_gpu_set_load).
 *   FAKE_AMDSMI_POWER_NA=current|average|both   those power_info fields read 0xFFFF (N/A).
 *   FAKE_AMDSMI_RESOLUTION_UJ=<uJ>  the counter's resolution (0 < uJ <= 1e6).
 *   FAKE_AMDSMI_KFD_NODES=<n0>,<n1>,...  the KFD node id of GPU i (amd-smi's order), "na" for
 *                               none (0xFFFFFFFF); GPUs past the list keep i + 1. HIP numbers the
 *                               GPUs in node id order, which then differs from amd-smi's.
 *   FAKE_AMDSMI_BDFS=<addr0>,<addr1>,...  the PCI address ("0000:41:00.0") of GPU i (amd-smi's
 *                               order); GPUs past the list keep bus i + 1. Repeats are allowed.
 *   FAKE_AMDSMI_HIP_IDS=<id0>,<id1>,...  the hip_id of GPU i, as given (repeats and ids out of
 *                               range too); GPUs past the list keep their node id rank.
 *   FAKE_AMDSMI_ENUMERATION=0   amdsmi_get_gpu_enumeration_info answers NOT_SUPPORTED, as where
 *                               ROCm is older than 6.4 (default 1).
 *   FAKE_AMDSMI_LIE=<lie>[,<lie>...]  a GPU that lies, the fake NVML's FAKE_NVML_LIE (the same
 *                               parser and lies, tests/fake_common/fake_common.h) on amdsmi's
 *                               readings, for proving that gpu-check's checks fail on AMD too:
 *                               counter_skips_tick, counter_frozen, counter_gains:<f>,
 *                               counter_late:<ms> act on the engine's counter in mJ before
 *                               amdsmi_get_energy_count turns it into ticks; power_scaled:<f> scales amdsmi_get_power_info's current and
 *                               average power (mW, before rounding to W); power_late:<ms>
 *                               delays each change of both (before power_scaled); clock_frozen keeps
 *                               amdsmi_get_clock_info's GFX clk at its first reading (locks still
 *                               act on the work and the power). fakeAmdsmiTrueEnergy stays true.
 * A malformed control makes amdsmi_init fail with UNKNOWN_ERROR and one line on stderr.
 *
 * Test helpers (exported): fakeAmdsmiRunWork(gpu, units), fakeAmdsmiIdle(seconds) (statuses),
 * fakeAmdsmiTrueEnergy(gpu) (J, NAN on error), fakeAmdsmiCalls(gpu) (device calls so far) and
 * zeusSimClockNow() (the node's clock, which the amdsmi backend times windows on).
 *
 * Built three times: libamd_smi.so (everything); with -DFAKE_AMDSMI_OMIT_REQUIRED
 * libamd_smi-missing.so, which lacks amdsmi_get_gpu_device_uuid (required by the backend); with
 * -DFAKE_AMDSMI_OMIT_OPTIONAL libamd_smi-partial.so, which lacks amdsmi_set_power_cap,
 * amdsmi_get_energy_count, amdsmi_set_gpu_clk_range and amdsmi_get_gpu_enumeration_info
 * (optional ones). The engine comes from
 * zeus_static, linked with --exclude-libs so that none of it is exported. */
#include <ctype.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core/core.h"
#include "device/amdsmi_types.h"
#include "fake_common/fake_common.h"
#include "zeus/sim.h"

#define FAKE_API __attribute__((visibility("default")))
#define FAKE_MAX_INJECT 16
#define FAKE_NA 0xFFFFu

FAKE_API amdsmi_status_t amdsmi_init(uint64_t flags);
FAKE_API amdsmi_status_t amdsmi_shut_down(void);
FAKE_API amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status, const char **text);
FAKE_API amdsmi_status_t amdsmi_get_socket_handles(uint32_t *count, amdsmi_socket_handle *handles);
FAKE_API amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket, uint32_t *count,
                                                      amdsmi_processor_handle *handles);
#ifndef FAKE_AMDSMI_OMIT_REQUIRED
FAKE_API amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, unsigned int *len, char *uuid);
#endif
FAKE_API amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, amdsmi_asic_info_t *info);
FAKE_API amdsmi_status_t amdsmi_get_gpu_kfd_info(amdsmi_processor_handle h, amdsmi_kfd_info_t *info);
FAKE_API amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, amdsmi_bdf_t *bdf);
FAKE_API amdsmi_status_t amdsmi_get_gpu_driver_info(amdsmi_processor_handle h, amdsmi_driver_info_t *info);
FAKE_API amdsmi_status_t amdsmi_get_lib_version(amdsmi_version_t *v);
FAKE_API amdsmi_status_t amdsmi_get_power_cap_info(amdsmi_processor_handle h, uint32_t sensor,
                                                   amdsmi_power_cap_info_t *info);
FAKE_API amdsmi_status_t amdsmi_get_power_info(amdsmi_processor_handle h, amdsmi_power_info_t *info);
FAKE_API amdsmi_status_t amdsmi_get_temp_metric(amdsmi_processor_handle h, amdsmi_temperature_type_t type,
                                                amdsmi_temperature_metric_t metric, int64_t *value);
FAKE_API amdsmi_status_t amdsmi_get_clock_info(amdsmi_processor_handle h, amdsmi_clk_type_t type,
                                               amdsmi_clk_info_t *info);
FAKE_API amdsmi_status_t amdsmi_set_gpu_perf_level(amdsmi_processor_handle h, amdsmi_dev_perf_level_t level);
#ifndef FAKE_AMDSMI_OMIT_OPTIONAL
FAKE_API amdsmi_status_t amdsmi_set_power_cap(amdsmi_processor_handle h, uint32_t sensor, uint64_t cap_uw);
FAKE_API amdsmi_status_t amdsmi_get_energy_count(amdsmi_processor_handle h, uint64_t *ticks, float *resolution,
                                                 uint64_t *timestamp);
FAKE_API amdsmi_status_t amdsmi_set_gpu_clk_range(amdsmi_processor_handle h, uint64_t min_mhz, uint64_t max_mhz,
                                                  amdsmi_clk_type_t type);
FAKE_API amdsmi_status_t amdsmi_get_gpu_enumeration_info(amdsmi_processor_handle h, amdsmi_enumeration_info_t *info);
#endif
FAKE_API int fakeAmdsmiRunWork(unsigned gpu, double units);
FAKE_API int fakeAmdsmiIdle(double seconds);
FAKE_API double fakeAmdsmiTrueEnergy(unsigned gpu);
FAKE_API unsigned long fakeAmdsmiCalls(unsigned gpu);
FAKE_API double zeusSimClockNow(void);

/* ---- state ---- */

typedef struct fake_dev {
  unsigned index;
} fake_dev;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_refs;
static zeus_sim_node *g_node;
static unsigned g_count;
static fake_dev g_devs[ZEUS_MAX_GPUS];
static unsigned long g_calls[ZEUS_MAX_GPUS];
static fake_inject g_inject[FAKE_MAX_INJECT];
static unsigned g_ninject;
static char g_log_path[1024], g_state_path[1024], g_busy_path[1024];
static bool g_busy, g_na_current, g_na_average;
static fake_lie g_lie;                     /* FAKE_AMDSMI_LIE */
static double g_resolution_uj = 15.259;
static uint32_t g_kfd_node[ZEUS_MAX_GPUS]; /* FAKE_AMDSMI_KFD_NODES; 0: i + 1 */
static uint64_t g_bdf[ZEUS_MAX_GPUS];      /* FAKE_AMDSMI_BDFS; 0: bus i + 1 */
static uint32_t g_hip_id[ZEUS_MAX_GPUS];   /* FAKE_AMDSMI_HIP_IDS where g_hip_given */
static bool g_hip_given[ZEUS_MAX_GPUS];
static bool g_enumeration = true;          /* FAKE_AMDSMI_ENUMERATION */
static char g_version_build[] = "24.7.0.0-zeus-fake";

static const struct {
  const char *name;
  amdsmi_status_t value;
} g_codes[] = {
#define FAKE__ENTRY(name, value) {#name, (value)},
    ZEUS_AMDSMI_STATUS_MAP(FAKE__ENTRY)
#undef FAKE__ENTRY
};

/* A status given as a number or a name, with or without the AMDSMI_STATUS_ prefix. */
static bool parse_code(const char *text, amdsmi_status_t *out) {
  while (isspace((unsigned char)*text)) text++;
  if (isdigit((unsigned char)*text)) {
    char *end;
    unsigned long v = strtoul(text, &end, 0);
    if (*end || v > 0xFFFFFFFFul) return false;
    *out = (amdsmi_status_t)v;
    return true;
  }
  if (strncasecmp(text, "AMDSMI_STATUS_", 14) == 0) text += 14;
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(g_codes); i++) {
    if (strcasecmp(text, g_codes[i].name + 14) == 0) {
      *out = g_codes[i].value;
      return true;
    }
  }
  return false;
}

amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status, const char **text) {
  if (!text) return AMDSMI_STATUS_ARG_PTR_NULL;
  switch (status) {
    case AMDSMI_STATUS_SUCCESS: *text = "Success"; break;
    case AMDSMI_STATUS_INVAL: *text = "Invalid parameters"; break;
    case AMDSMI_STATUS_NOT_SUPPORTED: *text = "Command not supported"; break;
    case AMDSMI_STATUS_NO_PERM: *text = "Permission Denied"; break;
    case AMDSMI_STATUS_NOT_FOUND: *text = "Device Not found"; break;
    case AMDSMI_STATUS_NOT_INIT: *text = "Device not initialized"; break;
    case AMDSMI_STATUS_TIMEOUT: *text = "Timeout in API call"; break;
    case AMDSMI_STATUS_BUSY: *text = "Device busy"; break;
    case AMDSMI_STATUS_INSUFFICIENT_SIZE: *text = "Not enough resources were available for the operation"; break;
    case AMDSMI_STATUS_ARG_PTR_NULL: *text = "Parsed argument is invalid"; break;
    default: *text = "An unknown error occurred"; break;
  }
  return AMDSMI_STATUS_SUCCESS;
}

/* ---- controls ---- */

static bool parse_code_ll(const char *text, long long *out) {
  amdsmi_status_t r;
  if (!parse_code(text, &r)) return false;
  *out = r;
  return true;
}

static bool parse_inject(const char *value) {
  return fake_parse_inject("fake amdsmi", "FAKE_AMDSMI_INJECT", value, g_inject, FAKE_MAX_INJECT, &g_ninject,
                           parse_code_ll);
}

/* The injected answer for a call, or SUCCESS. Caller holds g_mu. */
static amdsmi_status_t injected(const char *fn, int gpu) {
  long long code;
  return fake_inject_fire(g_inject, g_ninject, fn, gpu, &code) ? (amdsmi_status_t)code : AMDSMI_STATUS_SUCCESS;
}

static void log_setter(const char *fn, int gpu, const char *args, amdsmi_status_t r) {
  char path[sizeof g_log_path];
  pthread_mutex_lock(&g_mu);
  memcpy(path, g_log_path, sizeof path);
  pthread_mutex_unlock(&g_mu);
  fake_log_setter("fake amdsmi", "FAKE_AMDSMI_LOG", path, fn, gpu, args, (long long)r);
}

/* The fake NVML's state format (fake_common.h), so a test can read either. */
static bool state_load(zeus_sim_node *n) {
  return fake_state_load("fake amdsmi", "FAKE_AMDSMI_STATE", g_state_path, n);
}

static void state_save(void) {
  char path[sizeof g_state_path];
  pthread_mutex_lock(&g_mu);
  memcpy(path, g_state_path, sizeof path);
  zeus_sim_node *n = g_node;
  unsigned count = g_count;
  pthread_mutex_unlock(&g_mu);
  fake_state_save("fake amdsmi", "FAKE_AMDSMI_STATE", path, n, count);
}

static void busy_poll_locked(void) { fake_busy_poll(g_busy_path, g_node, g_count, &g_busy); }

static void copy_env(char *dst, size_t len, const char *name) {
  const char *v = getenv(name);
  snprintf(dst, len, "%s", v ? v : "");
}

/* FAKE_AMDSMI_BDFS: "dddd:bb:dd.f" per GPU in amd-smi's order (lspci -D's form); GPUs past the
 * list keep bus i + 1. Two GPUs may be given one address (a test of the daemon's matching). */
static bool parse_bdfs(const char *v) {
  memset(g_bdf, 0, sizeof g_bdf);
  for (unsigned i = 0; v && *v && i < ZEUS_MAX_GPUS; i++) {
    unsigned dom, bus, dev, fn;
    int used = 0;
    if (sscanf(v, "%4x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &used) != 4 || dev > 0x1f || fn > 7 ||
        (v[used] && v[used] != ',')) {
      fprintf(stderr, "fake amdsmi: FAKE_AMDSMI_BDFS '%s' is not a list of PCI addresses (0000:01:00.0,...)\n",
              getenv("FAKE_AMDSMI_BDFS"));
      return false;
    }
    g_bdf[i] = ZEUS_AMDSMI_BDF(dom, bus, dev, fn) | (1ull << 63); /* the top bit: given */
    v += used;
    if (*v) v++;
  }
  return true;
}

/* FAKE_AMDSMI_HIP_IDS: the hip_id amdsmi_get_gpu_enumeration_info gives GPU i (amd-smi's order),
 * taken as given (duplicates too, to test the backend's check). Unset: the GPUs ranked by KFD node
 * id, as HIP numbers them (ties and "na" nodes last, in amd-smi's order). */
static bool parse_hip_ids(const char *v) {
  memset(g_hip_given, 0, sizeof g_hip_given);
  for (unsigned i = 0; v && *v && i < ZEUS_MAX_GPUS; i++) {
    char *end;
    unsigned long id = strtoul(v, &end, 10);
    if (end == v || (*end && *end != ',') || id > 0xFFFFFFFFul) {
      fprintf(stderr, "fake amdsmi: FAKE_AMDSMI_HIP_IDS '%s' is not a list of HIP ids\n", getenv("FAKE_AMDSMI_HIP_IDS"));
      return false;
    }
    g_hip_id[i] = (uint32_t)id;
    g_hip_given[i] = true;
    v = *end ? end + 1 : end;
  }
  return true;
}

#ifndef FAKE_AMDSMI_OMIT_OPTIONAL
/* GPU i's place in KFD node id order among the node's GPUs. */
static uint32_t kfd_rank(unsigned i) {
  uint32_t mine = g_kfd_node[i] ? g_kfd_node[i] : i + 1, rank = 0;
  for (unsigned j = 0; j < g_count; j++) {
    uint32_t other = g_kfd_node[j] ? g_kfd_node[j] : j + 1;
    if (other < mine || (other == mine && j < i)) rank++;
  }
  return rank;
}
#endif

/* FAKE_AMDSMI_ENUMERATION=0 plays a library before ROCm 6.4: amdsmi_get_gpu_enumeration_info
 * answers NOT_SUPPORTED (libamd_smi-partial.so lacks the symbol altogether). */
static bool parse_enumeration(const char *v) {
  g_enumeration = true;
  if (!v || !*v || strcmp(v, "1") == 0) return true;
  if (strcmp(v, "0") == 0) {
    g_enumeration = false;
    return true;
  }
  fprintf(stderr, "fake amdsmi: FAKE_AMDSMI_ENUMERATION '%s' is not 0 or 1\n", v);
  return false;
}

/* ---- init / shutdown ---- */

amdsmi_status_t amdsmi_init(uint64_t flags) {
  const char *err = getenv("FAKE_AMDSMI_INIT_ERROR");
  if (err && *err) {
    amdsmi_status_t code;
    if (!parse_code(err, &code)) {
      fprintf(stderr, "fake amdsmi: FAKE_AMDSMI_INIT_ERROR '%s' is not an amdsmi status\n", err);
      return AMDSMI_STATUS_UNKNOWN_ERROR;
    }
    if (code != AMDSMI_STATUS_SUCCESS) return code;
  }
  pthread_mutex_lock(&g_mu);
  amdsmi_status_t r = AMDSMI_STATUS_SUCCESS;
  if (g_refs == 0) {
    if (!parse_inject(getenv("FAKE_AMDSMI_INJECT")) ||
        !fake_parse_lie("fake amdsmi", "FAKE_AMDSMI_LIE", getenv("FAKE_AMDSMI_LIE"), &g_lie)) {
      r = AMDSMI_STATUS_UNKNOWN_ERROR;
      goto out;
    }
    const char *na = getenv("FAKE_AMDSMI_POWER_NA");
    g_na_current = g_na_average = false;
    if (na && *na) {
      if (strcmp(na, "current") == 0) g_na_current = true;
      else if (strcmp(na, "average") == 0) g_na_average = true;
      else if (strcmp(na, "both") == 0) g_na_current = g_na_average = true;
      else {
        fprintf(stderr, "fake amdsmi: FAKE_AMDSMI_POWER_NA '%s' is not current, average or both\n", na);
        r = AMDSMI_STATUS_UNKNOWN_ERROR;
        goto out;
      }
    }
    g_resolution_uj = 15.259;
    const char *res = getenv("FAKE_AMDSMI_RESOLUTION_UJ");
    if (res && *res) {
      char *end;
      double v = strtod(res, &end);
      if (*end || !(v > 0) || v > 1e6) {
        fprintf(stderr, "fake amdsmi: FAKE_AMDSMI_RESOLUTION_UJ '%s' is not a number in (0, 1e6]\n", res);
        r = AMDSMI_STATUS_UNKNOWN_ERROR;
        goto out;
      }
      g_resolution_uj = v;
    }
    memset(g_kfd_node, 0, sizeof g_kfd_node);
    const char *kfd = getenv("FAKE_AMDSMI_KFD_NODES");
    for (unsigned i = 0; kfd && *kfd && i < ZEUS_MAX_GPUS; i++) {
      char *end = (char *)kfd;
      unsigned long v = strncmp(kfd, "na", 2) == 0 ? (end += 2, 0xFFFFFFFFul) : strtoul(kfd, &end, 10);
      if (end == kfd || (*end && *end != ',') || v == 0) {
        fprintf(stderr, "fake amdsmi: FAKE_AMDSMI_KFD_NODES '%s' is not a list of node ids > 0 (or na)\n",
                getenv("FAKE_AMDSMI_KFD_NODES"));
        r = AMDSMI_STATUS_UNKNOWN_ERROR;
        goto out;
      }
      g_kfd_node[i] = (uint32_t)v;
      kfd = *end ? end + 1 : end;
    }
    if (!parse_bdfs(getenv("FAKE_AMDSMI_BDFS")) || !parse_hip_ids(getenv("FAKE_AMDSMI_HIP_IDS")) ||
        !parse_enumeration(getenv("FAKE_AMDSMI_ENUMERATION"))) {
      r = AMDSMI_STATUS_UNKNOWN_ERROR;
      goto out;
    }
    zeus_sim_node *n;
    if (zeus_sim_node_open(&n, NULL) != ZEUS_OK) {
      fprintf(stderr, "fake amdsmi: cannot create the simulated GPUs: %s\n", zeus_errmsg());
      r = AMDSMI_STATUS_UNKNOWN_ERROR;
      goto out;
    }
    copy_env(g_log_path, sizeof g_log_path, "FAKE_AMDSMI_LOG");
    copy_env(g_state_path, sizeof g_state_path, "FAKE_AMDSMI_STATE");
    copy_env(g_busy_path, sizeof g_busy_path, "FAKE_AMDSMI_BUSY_FILE");
    if (!state_load(n)) {
      zeus_sim_node_close(n);
      r = AMDSMI_STATUS_UNKNOWN_ERROR;
      goto out;
    }
    g_node = n;
    g_lie.t0 = zeus_sim_now(n);
    g_count = (flags & AMDSMI_INIT_AMD_GPUS) ? zeus_sim_node_gpu_count(n) : 0;
    g_busy = false;
    for (unsigned i = 0; i < ZEUS_MAX_GPUS; i++) {
      g_devs[i].index = i;
      g_calls[i] = 0;
    }
    busy_poll_locked();
  }
  g_refs++;
out:
  pthread_mutex_unlock(&g_mu);
  return r;
}

amdsmi_status_t amdsmi_shut_down(void) {
  pthread_mutex_lock(&g_mu);
  amdsmi_status_t r = AMDSMI_STATUS_SUCCESS;
  if (g_refs == 0) {
    r = AMDSMI_STATUS_NOT_INIT;
  } else if (--g_refs == 0) {
    zeus_sim_node_close(g_node);
    g_node = NULL;
    g_count = 0;
    g_ninject = 0;
    g_log_path[0] = '\0';
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

/* ---- handles ---- */

/* Resolves a processor handle, counts the call and applies injections. */
static amdsmi_status_t enter(const char *fn, amdsmi_processor_handle h, unsigned *gpu, zeus_sim_node **node) {
  pthread_mutex_lock(&g_mu);
  amdsmi_status_t r = AMDSMI_STATUS_SUCCESS;
  const fake_dev *p = h;
  if (!g_node) r = AMDSMI_STATUS_NOT_INIT;
  else if (!p || p < g_devs || p >= g_devs + g_count) r = AMDSMI_STATUS_INVAL;
  else {
    *gpu = p->index;
    g_calls[*gpu]++;
    busy_poll_locked();
    r = injected(fn, (int)*gpu);
    *node = g_node;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

static amdsmi_status_t enter_global(const char *fn) {
  pthread_mutex_lock(&g_mu);
  amdsmi_status_t r = g_node ? injected(fn, -1) : AMDSMI_STATUS_NOT_INIT;
  pthread_mutex_unlock(&g_mu);
  return r;
}

static int log_index(amdsmi_processor_handle h) {
  const fake_dev *p = h;
  pthread_mutex_lock(&g_mu);
  int i = p && p >= g_devs && p < g_devs + g_count ? (int)p->index : -1;
  pthread_mutex_unlock(&g_mu);
  return i;
}

#define ENTER_AS(fn, h)                              \
  unsigned gpu = 0;                                  \
  zeus_sim_node *node = NULL;                        \
  amdsmi_status_t r = enter((fn), (h), &gpu, &node); \
  if (r != AMDSMI_STATUS_SUCCESS) return r
#define ENTER(h) ENTER_AS(__func__, h)

static amdsmi_status_t engine(int rc) {
  switch (rc) {
    case ZEUS_OK: return AMDSMI_STATUS_SUCCESS;
    case ZEUS_EINVAL:
    case ZEUS_ERANGE: return AMDSMI_STATUS_INVAL;
    case ZEUS_ENOTSUP: return AMDSMI_STATUS_NOT_SUPPORTED;
    case ZEUS_ENOENT: return AMDSMI_STATUS_NOT_FOUND;
    default: return AMDSMI_STATUS_UNKNOWN_ERROR;
  }
}

/* Sockets are the GPUs' slots (one GPU each); a socket handle points at the same slot. */
amdsmi_status_t amdsmi_get_socket_handles(uint32_t *count, amdsmi_socket_handle *handles) {
  amdsmi_status_t r = enter_global(__func__);
  if (r) return r;
  if (!count) return AMDSMI_STATUS_ARG_PTR_NULL;
  pthread_mutex_lock(&g_mu);
  unsigned n = g_count;
  pthread_mutex_unlock(&g_mu);
  if (!handles) {
    *count = n;
    return AMDSMI_STATUS_SUCCESS;
  }
  if (*count < n) n = *count;
  for (unsigned i = 0; i < n; i++) handles[i] = &g_devs[i];
  *count = n;
  return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_processor_handles(amdsmi_socket_handle socket, uint32_t *count,
                                             amdsmi_processor_handle *handles) {
  amdsmi_status_t r = enter_global(__func__);
  if (r) return r;
  if (!count) return AMDSMI_STATUS_ARG_PTR_NULL;
  if (log_index(socket) < 0) return AMDSMI_STATUS_INVAL;
  if (!handles) {
    *count = 1;
    return AMDSMI_STATUS_SUCCESS;
  }
  if (*count < 1) return AMDSMI_STATUS_INSUFFICIENT_SIZE;
  handles[0] = socket;
  *count = 1;
  return AMDSMI_STATUS_SUCCESS;
}

#ifndef FAKE_AMDSMI_OMIT_REQUIRED
amdsmi_status_t amdsmi_get_gpu_device_uuid(amdsmi_processor_handle h, unsigned int *len, char *uuid) {
  ENTER(h);
  if (!len || !uuid) return AMDSMI_STATUS_ARG_PTR_NULL;
  char u[ZEUS_NAME_LEN];
  if ((r = engine(zeus_sim_gpu_uuid(node, gpu, u, sizeof u)))) return r;
  const char *s = strncmp(u, "GPU-", 4) == 0 ? u + 4 : u;
  size_t n = strlen(s);
  if (*len < AMDSMI_GPU_UUID_SIZE || *len < n + 1) return AMDSMI_STATUS_INSUFFICIENT_SIZE;
  memcpy(uuid, s, n + 1);
  *len = (unsigned)n;
  return AMDSMI_STATUS_SUCCESS;
}
#endif

amdsmi_status_t amdsmi_get_gpu_asic_info(amdsmi_processor_handle h, amdsmi_asic_info_t *info) {
  ENTER(h);
  if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
  memset(info, 0, sizeof *info);
  if ((r = engine(zeus_sim_gpu_name(node, gpu, info->market_name, sizeof info->market_name)))) return r;
  zeus_sim_hardware hw;
  if (strncmp(info->market_name, "Zeus Simulated GPU", 18) == 0 && zeus_sim_gpu_hardware(node, gpu, &hw) == ZEUS_OK &&
      strcmp(hw.name, "mi300x") == 0)
    snprintf(info->market_name, sizeof info->market_name, "AMD Instinct MI300X"); /* as amd-smi names it */
  info->vendor_id = 0x1002;
  snprintf(info->vendor_name, sizeof info->vendor_name, "Advanced Micro Devices Inc. [AMD/ATI]");
  info->device_id = 0x74a1;
  info->oam_id = gpu;
  info->num_of_compute_units = 304;
  info->target_graphics_version = 0x942;
  snprintf(info->asic_serial, sizeof info->asic_serial, "0x5A1A%012X", gpu);
  return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_kfd_info(amdsmi_processor_handle h, amdsmi_kfd_info_t *info) {
  ENTER(h);
  (void)node;
  if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
  memset(info, 0, sizeof *info);
  info->kfd_id = 0x1000u + gpu;
  info->node_id = g_kfd_node[gpu] ? g_kfd_node[gpu] : gpu + 1;
  return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_gpu_device_bdf(amdsmi_processor_handle h, amdsmi_bdf_t *bdf) {
  ENTER(h);
  (void)node;
  if (!bdf) return AMDSMI_STATUS_ARG_PTR_NULL;
  bdf->as_uint = g_bdf[gpu] ? g_bdf[gpu] & ~(1ull << 63) : ZEUS_AMDSMI_BDF(0, gpu + 1, 0, 0);
  return AMDSMI_STATUS_SUCCESS;
}

#ifndef FAKE_AMDSMI_OMIT_OPTIONAL
amdsmi_status_t amdsmi_get_gpu_enumeration_info(amdsmi_processor_handle h, amdsmi_enumeration_info_t *info) {
  ENTER(h);
  (void)node;
  if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
  if (!g_enumeration) return AMDSMI_STATUS_NOT_SUPPORTED;
  memset(info, 0, sizeof *info);
  info->drm_render = 128 + gpu;
  info->drm_card = gpu;
  info->hsa_id = (g_kfd_node[gpu] && g_kfd_node[gpu] != 0xFFFFFFFFu) ? g_kfd_node[gpu] : gpu + 1;
  info->hip_id = g_hip_given[gpu] ? g_hip_id[gpu] : kfd_rank(gpu);
  snprintf(info->hip_uuid, sizeof info->hip_uuid, "GPU-5a1a%012x", gpu);
  return AMDSMI_STATUS_SUCCESS;
}
#endif

amdsmi_status_t amdsmi_get_gpu_driver_info(amdsmi_processor_handle h, amdsmi_driver_info_t *info) {
  ENTER(h);
  (void)node;
  if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
  memset(info, 0, sizeof *info);
  snprintf(info->driver_version, sizeof info->driver_version, "6.8.5-zeus-fake");
  snprintf(info->driver_name, sizeof info->driver_name, "amdgpu");
  return AMDSMI_STATUS_SUCCESS;
}

amdsmi_status_t amdsmi_get_lib_version(amdsmi_version_t *v) {
  amdsmi_status_t r = enter_global(__func__);
  if (r) return r;
  if (!v) return AMDSMI_STATUS_ARG_PTR_NULL;
  v->year = 24;
  v->major = 7;
  v->minor = 0;
  v->release = 0;
  v->build = g_version_build;
  return AMDSMI_STATUS_SUCCESS;
}

/* ---- power ---- */

amdsmi_status_t amdsmi_get_power_cap_info(amdsmi_processor_handle h, uint32_t sensor, amdsmi_power_cap_info_t *info) {
  ENTER(h);
  if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
  if (sensor != 0) return AMDSMI_STATUS_INVAL;
  unsigned lo, hi, def, cur;
  if ((r = engine(zeus_sim_gpu_power_limit_constraints(node, gpu, &lo, &hi, &def)))) return r;
  if ((r = engine(zeus_sim_gpu_get_power_limit(node, gpu, &cur)))) return r;
  memset(info, 0, sizeof *info);
  info->power_cap = (uint64_t)cur * 1000u;
  info->default_power_cap = (uint64_t)def * 1000u;
  info->min_power_cap = (uint64_t)lo * 1000u;
  info->max_power_cap = (uint64_t)hi * 1000u;
  unsigned mem, top[1024];
  size_t n = 1;
  if (zeus_sim_gpu_memory_clocks(node, gpu, &mem, &n) == ZEUS_OK) {
    n = ZEUS__ARRAY_LEN(top);
    if (zeus_sim_gpu_graphics_clocks(node, gpu, mem, top, &n) == ZEUS_OK && n) info->dpm_cap = top[0];
  }
  return AMDSMI_STATUS_SUCCESS;
}

static unsigned to_watts(unsigned mw) { return (mw + 500u) / 1000u; }

amdsmi_status_t amdsmi_get_power_info(amdsmi_processor_handle h, amdsmi_power_info_t *info) {
  ENTER(h);
  if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
  unsigned now_mw, avg_mw, limit_mw;
  if ((r = engine(zeus_sim_gpu_instant_power(node, gpu, &now_mw)))) return r;
  if ((r = engine(zeus_sim_gpu_average_power(node, gpu, &avg_mw)))) return r;
  if ((r = engine(zeus_sim_gpu_get_power_limit(node, gpu, &limit_mw)))) return r;
  if (g_lie.power_late_s > 0) { /* FAKE_AMDSMI_LIE=power_late:<ms> */
    double now = zeus_sim_now(node), tick = fake_power_tick(node, gpu, now);
    pthread_mutex_lock(&g_mu);
    now_mw = fake_lie_power_late(&g_lie, gpu, FAKE_POWER_INSTANT, now_mw, now, tick);
    avg_mw = fake_lie_power_late(&g_lie, gpu, FAKE_POWER_AVERAGE, avg_mw, now, tick);
    pthread_mutex_unlock(&g_mu);
  }
  now_mw = fake_lie_power(&g_lie, now_mw); /* FAKE_AMDSMI_LIE=power_scaled:<f> */
  avg_mw = fake_lie_power(&g_lie, avg_mw);
  memset(info, 0, sizeof *info);
  info->current_socket_power = g_na_current ? FAKE_NA : to_watts(now_mw);
  info->average_socket_power = g_na_average ? FAKE_NA : to_watts(avg_mw);
  info->gfx_voltage = info->soc_voltage = info->mem_voltage = FAKE_NA;
  info->power_limit = to_watts(limit_mw);
  return AMDSMI_STATUS_SUCCESS;
}

#ifndef FAKE_AMDSMI_OMIT_OPTIONAL
static amdsmi_status_t set_cap(const char *fn, amdsmi_processor_handle h, uint32_t sensor, uint64_t cap_uw) {
  ENTER_AS(fn, h);
  if (sensor != 0) return AMDSMI_STATUS_INVAL;
  unsigned lo, hi;
  if ((r = engine(zeus_sim_gpu_power_limit_constraints(node, gpu, &lo, &hi, NULL)))) return r;
  uint64_t mw = cap_uw / 1000u;
  if (mw < lo || mw > hi) return AMDSMI_STATUS_INVAL;
  return engine(zeus_sim_gpu_set_power_limit(node, gpu, (unsigned)mw));
}

amdsmi_status_t amdsmi_set_power_cap(amdsmi_processor_handle h, uint32_t sensor, uint64_t cap_uw) {
  amdsmi_status_t r = set_cap(__func__, h, sensor, cap_uw);
  if (r == AMDSMI_STATUS_SUCCESS) state_save();
  char args[48];
  snprintf(args, sizeof args, "%u %llu", sensor, (unsigned long long)cap_uw);
  log_setter(__func__, log_index(h), args, r);
  return r;
}

amdsmi_status_t amdsmi_get_energy_count(amdsmi_processor_handle h, uint64_t *ticks, float *resolution,
                                        uint64_t *timestamp) {
  ENTER(h);
  bool counter = false;
  if ((r = engine(zeus_sim_gpu_energy_counter_supported(node, gpu, &counter)))) return r;
  if (!counter) return AMDSMI_STATUS_NOT_SUPPORTED;
  if (!ticks || !resolution || !timestamp) return AMDSMI_STATUS_ARG_PTR_NULL;
  uint64_t mj;
  if ((r = engine(zeus_sim_gpu_total_energy(node, gpu, &mj)))) return r;
  double now = zeus_sim_now(node), tick = now;
  if (g_lie.late_s > 0 && zeus_sim_gpu_last_tick(node, gpu, &tick)) tick = now;
  pthread_mutex_lock(&g_mu); /* FAKE_AMDSMI_LIE: the counter's lies act on the engine's mJ */
  mj = fake_lie_counter(&g_lie, gpu, mj, now, tick);
  pthread_mutex_unlock(&g_mu);
  float res = (float)g_resolution_uj;
  *ticks = (uint64_t)floor((double)mj * 1e3 / (double)res);
  *resolution = res;
  *timestamp = (uint64_t)llround(zeus_sim_now(node) * 1e9);
  return AMDSMI_STATUS_SUCCESS;
}
#endif

amdsmi_status_t amdsmi_get_temp_metric(amdsmi_processor_handle h, amdsmi_temperature_type_t type,
                                       amdsmi_temperature_metric_t metric, int64_t *value) {
  ENTER(h);
  if (!value) return AMDSMI_STATUS_ARG_PTR_NULL;
  if ((type != AMDSMI_TEMPERATURE_TYPE_EDGE && type != AMDSMI_TEMPERATURE_TYPE_HOTSPOT) || metric != AMDSMI_TEMP_CURRENT)
    return AMDSMI_STATUS_NOT_SUPPORTED;
  unsigned c;
  if ((r = engine(zeus_sim_gpu_temperature(node, gpu, &c)))) return r;
  *value = (int64_t)c * 1000;
  return AMDSMI_STATUS_SUCCESS;
}

/* ---- clocks ---- */

amdsmi_status_t amdsmi_get_clock_info(amdsmi_processor_handle h, amdsmi_clk_type_t type, amdsmi_clk_info_t *info) {
  ENTER(h);
  if (!info) return AMDSMI_STATUS_ARG_PTR_NULL;
  if (type != AMDSMI_CLK_TYPE_GFX && type != AMDSMI_CLK_TYPE_MEM) return AMDSMI_STATUS_NOT_SUPPORTED;
  unsigned sm, mem, lo, hi, mlo, mhi;
  if ((r = engine(zeus_sim_gpu_current_clocks(node, gpu, &sm, &mem)))) return r;
  if ((r = engine(zeus_sim_gpu_get_locked_clocks(node, gpu, &lo, &hi, &mlo, &mhi)))) return r;
  unsigned mems[64];
  size_t nm = ZEUS__ARRAY_LEN(mems);
  if ((r = engine(zeus_sim_gpu_memory_clocks(node, gpu, mems, &nm)))) return r;
  memset(info, 0, sizeof *info);
  if (type == AMDSMI_CLK_TYPE_MEM) {
    info->clk = mem;
    info->max_clk = mems[0];
    info->min_clk = mems[nm - 1];
    info->clk_locked = mhi != 0;
  } else {
    unsigned gfx[1024];
    size_t ng = ZEUS__ARRAY_LEN(gfx);
    if ((r = engine(zeus_sim_gpu_graphics_clocks(node, gpu, mems[0], gfx, &ng)))) return r;
    pthread_mutex_lock(&g_mu); /* FAKE_AMDSMI_LIE=clock_frozen */
    info->clk = fake_lie_clock(&g_lie, gpu, sm);
    pthread_mutex_unlock(&g_mu);
    info->max_clk = gfx[0];
    info->min_clk = gfx[ng - 1];
    info->clk_locked = hi != 0;
  }
  return AMDSMI_STATUS_SUCCESS;
}

#ifndef FAKE_AMDSMI_OMIT_OPTIONAL
static amdsmi_status_t clk_range(const char *fn, amdsmi_processor_handle h, uint64_t lo, uint64_t hi,
                                 amdsmi_clk_type_t type) {
  ENTER_AS(fn, h);
  if ((type != AMDSMI_CLK_TYPE_GFX && type != AMDSMI_CLK_TYPE_MEM) || lo > hi || hi == 0 || hi > 100000)
    return AMDSMI_STATUS_INVAL;
  return engine(type == AMDSMI_CLK_TYPE_MEM ? zeus_sim_gpu_set_memory_locked_clocks(node, gpu, (unsigned)lo, (unsigned)hi)
                                            : zeus_sim_gpu_set_locked_clocks(node, gpu, (unsigned)lo, (unsigned)hi));
}

amdsmi_status_t amdsmi_set_gpu_clk_range(amdsmi_processor_handle h, uint64_t min_mhz, uint64_t max_mhz,
                                         amdsmi_clk_type_t type) {
  amdsmi_status_t r = clk_range(__func__, h, min_mhz, max_mhz, type);
  if (r == AMDSMI_STATUS_SUCCESS) state_save();
  char args[64];
  snprintf(args, sizeof args, "%llu %llu %d", (unsigned long long)min_mhz, (unsigned long long)max_mhz, type);
  log_setter(__func__, log_index(h), args, r);
  return r;
}
#endif

static amdsmi_status_t perf_level(const char *fn, amdsmi_processor_handle h, amdsmi_dev_perf_level_t level) {
  ENTER_AS(fn, h);
  if (level == AMDSMI_DEV_PERF_LEVEL_MANUAL) return AMDSMI_STATUS_SUCCESS;
  if (level != AMDSMI_DEV_PERF_LEVEL_AUTO) return AMDSMI_STATUS_INVAL;
  if ((r = engine(zeus_sim_gpu_reset_locked_clocks(node, gpu)))) return r;
  return engine(zeus_sim_gpu_reset_memory_locked_clocks(node, gpu));
}

amdsmi_status_t amdsmi_set_gpu_perf_level(amdsmi_processor_handle h, amdsmi_dev_perf_level_t level) {
  amdsmi_status_t r = perf_level(__func__, h, level);
  if (r == AMDSMI_STATUS_SUCCESS) state_save();
  char args[16];
  snprintf(args, sizeof args, "%d", level);
  log_setter(__func__, log_index(h), args, r);
  return r;
}

/* ---- test helpers ---- */

static zeus_sim_node *node_now(void) {
  pthread_mutex_lock(&g_mu);
  zeus_sim_node *n = g_node;
  pthread_mutex_unlock(&g_mu);
  return n;
}

int fakeAmdsmiRunWork(unsigned gpu, double units) {
  zeus_sim_node *n = node_now();
  if (!n) return (int)AMDSMI_STATUS_NOT_INIT;
  return (int)engine(zeus_sim_work(n, gpu, units, NULL));
}

int fakeAmdsmiIdle(double seconds) {
  zeus_sim_node *n = node_now();
  if (!n) return (int)AMDSMI_STATUS_NOT_INIT;
  return (int)engine(zeus_sim_idle(n, seconds));
}

double fakeAmdsmiTrueEnergy(unsigned gpu) {
  zeus_sim_node *n = node_now();
  double j;
  if (!n || zeus_sim_true_energy(n, gpu, &j) != ZEUS_OK) return NAN;
  return j;
}

unsigned long fakeAmdsmiCalls(unsigned gpu) {
  if (gpu >= ZEUS_MAX_GPUS) return 0;
  pthread_mutex_lock(&g_mu);
  unsigned long c = g_calls[gpu];
  pthread_mutex_unlock(&g_mu);
  return c;
}

double zeusSimClockNow(void) {
  zeus_sim_node *n = node_now();
  return n ? zeus_sim_now(n) : 0.0;
}
