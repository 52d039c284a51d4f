/* A fake libnvidia-ml.so.1 for tests: NVML's C ABI over the simulated-GPU engine (zeus/sim.h).
 *
 * The first nvmlInit_v2/nvmlInitWithFlags creates one simulated node from the ZEUS_SIM_*
 * settings (see zeus/sim.h); the last nvmlShutdown destroys it. Init is reference-counted as in
 * the real library. Device handles point into a static array, one slot per GPU.
 *
 * Behaviour modelled on the real library (see shared/NVML.md):
 *   - every call but nvmlErrorString returns ERROR_UNINITIALIZED before Init;
 *   - INVALID_ARGUMENT for NULL pointers, unknown handles, a power limit outside the
 *     constraints, and locked clocks with min > max (or a zero maximum);
 *   - the INSUFFICIENT_SIZE count protocol for the clock lists, and INSUFFICIENT_SIZE for
 *     string buffers that are too short;
 *   - NOT_SUPPORTED for the energy counter on a GPU without one (ZEUS_SIM_ENERGY_COUNTER=0);
 *     such a GPU also reports the Pascal architecture, every other one Ampere;
 *   - NOT_FOUND from GetSupportedGraphicsClocks for an unsupported memory clock;
 *   - GetFieldValues answers POWER_INSTANT (186) and POWER_AVERAGE (185, the engine's mean over
 *     the last second) in the GPU scope as UNSIGNED_INT mW, and NOT_SUPPORTED per field for any
 *     other field or scope (memory and module power: the simulated GPU has neither);
 *   - a Grace Hopper module (ZEUS_SIM_HARDWARE=gh200, or a profile with "module_power_only":
 *     true) turns the scopes round: the GPU scope of both power fields answers NOT_SUPPORTED per
 *     field (the call itself SUCCESS, as NVML's header says a per-field failure is reported) and
 *     so does GetPowerUsage, while the module scope (NVML_POWER_SCOPE_MODULE, 1) answers the
 *     engine's power, which on such a profile is the module's (GPU + the CPU and memory's
 *     module_other_w). The energy counter works and counts the module. Which code real GH200
 *     NVML gives for the refused GPU scope, and whether GetPowerUsage is refused too, is
 *     assumed: see docs/grace-hopper.md;
 *   - GetPciInfo_v3 puts GPU i on bus i + 1 of domain 0;
 *   - GetTemperature (sensor GPU only) follows the engine's thermal model; GetClockInfo's memory
 *     clock honours a memory-clock lock;
 *   - SetGpuLockedClocks with both values special (0xffffff01 TDP / 0xffffff02 unlimited) acts
 *     as a reset; one special value with a normal one is INVALID_ARGUMENT.
 *
 * Test controls, read from the environment at the first (reference-creating) Init, except
 * FAKE_NVML_INIT_ERROR, which every Init reads:
 *   FAKE_NVML_LOG=<path>
 *       Appends one line per setter call (SetPowerManagementLimit, SetPersistenceMode,
 *       SetGpuLockedClocks, ResetGpuLockedClocks, SetMemoryLockedClocks,
 *       ResetMemoryLockedClocks), failed ones included:
 *         <function> <gpu index> <args...> -> <return code>
 *       e.g. "nvmlDeviceSetPowerManagementLimit 0 250000 -> 0". The file is opened with O_APPEND
 *       and each line is one write(), so several processes may share it. A call with an invalid
 *       handle logs "?" as the GPU index.
 *   FAKE_NVML_INJECT=<spec>[;<spec>...]   spec = <function>:<code>[:<gpu>[:<after>]]
 *       <function>  an exported NVML name (nvmlDeviceSetPowerManagementLimit), or * for every
 *                   device function;
 *       <code>      a number or a name with or without ERROR_ (NO_PERMISSION, NOT_SUPPORTED,
 *                   GPU_IS_LOST, ERROR_UNKNOWN...);
 *       <gpu>       a GPU index, or * for every GPU (the default);
 *       <after>     how many matching calls succeed normally before the injection fires
 *                   (default 0).
 *       Rule: once a spec has fired it answers every later matching call with its code. An
 *       injected GPU_IS_LOST or RESET_REQUIRED also marks the GPU lost, so that every later
 *       device call on that GPU returns GPU_IS_LOST (as a GPU that fell off the bus does).
 *       Injected failures do not reach the engine (a failed setter changes nothing).
 *   FAKE_NVML_INIT_ERROR=<code>
 *       nvmlInit_v2 / nvmlInitWithFlags fail with that code (a number or a name, e.g.
 *       DRIVER_NOT_LOADED), creating nothing.
 *   FAKE_NVML_STATE=<path>
 *       Settings outlive the process, as on a real GPU: the knobs (power limit, persistence
 *       mode, locked SM and memory clocks) are read from this file at the first Init and the
 *       whole set is written back (temporary file, rename) after every successful setter. One
 *       line per GPU: "gpu <i> power_limit_mw <mW> persistence <0|1> sm_lock <min> <max>
 *       mem_lock <min> <max>" (0 0: not locked). A process sees the settings as they were at its
 *       first Init, which is enough for processes that change settings one after another; two
 *       that change settings at the same time each write their own view (the last one wins).
 *       A missing file is the GPUs' defaults; a malformed one fails Init.
 *   FAKE_NVML_BUSY_FILE=<path>
 *       While this file exists every GPU is kept busy by a load outside the simulation (another
 *       process's kernels; zeus_sim_gpu_set_load): time between pieces of work draws the working
 *       power of the knobs in place instead of idle power. Looked at on every device call.
 *   FAKE_NVML_CLOCK_DELAY_MS=<ms>
 *       SetGpuLockedClocks and ResetGpuLockedClocks take effect in the engine at once, but
 *       GetClockInfo/GetClock keep reporting the SM clock of before for this long, as a real
 *       GPU takes time to move its clock (default 0).
 *   FAKE_NVML_COUNTS=<path>
 *       At the last Shutdown, appends "<function> <calls>" for every NVML function called since
 *       the first Init (Init and Shutdown included), with one write().
 *   FAKE_NVML_LIE=<lie>[,<lie>...]
 *       A GPU that lies, for proving that gpu-check's checks fail when a figure is wrong (every
 *       GPU of the node lies alike; the ground truth, fakeNvmlTrueEnergy, stays true). The parser
 *       and the lies are tests/fake_common/fake_common.h's, shared with the fake amdsmi's
 *       FAKE_AMDSMI_LIE:
 *       counter_skips_tick  every 5th change of the energy counter is not shown and its energy is
 *                           lost (the counter stays where it was and later changes add only their
 *                           own energy): the counter reads about 20 % below the energy drawn;
 *       counter_frozen      the energy counter never moves from its first reading;
 *       clock_frozen        the SM clock read back never moves from its first reading (locks
 *                           still act on the work and the power);
 *       power_scaled:<f>    instant and average power read <f> times what is drawn (0 < f <= 10);
 *       counter_gains:<f>   the energy counter gains: each increment is shown 1 + <f> x (seconds
 *                           since Init) times its size (0 < f <= 10), a counter whose calibration
 *                           drifts, so a later measurement reads more than an earlier one;
 *       counter_late:<ms>   each change of the energy counter shows late, by a delay drawn anew for
 *                           every change in [0, <ms>) (0 < ms <= 10000) after the engine's
 *                           tick: no energy is lost, but a change's time no longer says when
 *                           its energy was drawn (a counter published on an irregular schedule);
 *       power_late:<ms>     each change of the instant and of the average power (at the engine's
 *                           power tick) shows late, by a delay drawn anew for every change in
 *                           [0, <ms>) (0 < ms <= 10000; one tick's two readings alike): the
 *                           power's ticks no longer fall on a clock (a reading published on an
 *                           irregular schedule).
 * ZEUS_SIM_HARDWARE=h100 (or a profile file, see zeus/sim.h) gives every GPU the measured
 * hardware's behaviour through the engine: readings that move on a ~100 ms tick, calls that cost
 * their measured time (the energy counter 3.3 ms), settings that take effect late.
 * A malformed control or ZEUS_SIM_* setting makes Init fail with ERROR_UNKNOWN and one line on
 * stderr saying why.
 *
 * Test helpers (exported too; reach them with dlopen of the same path + dlsym):
 *   int    fakeNvmlRunWork(unsigned gpu, double units)  zeus_sim_work on the node (NVML code)
 *   int    fakeNvmlRunWorkAll(const double *units)      zeus_sim_work_all: units[i] on every GPU i
 *                                                       at once (NVML code)
 *   int    fakeNvmlIdle(double seconds)                 zeus_sim_idle on the node (NVML code)
 *   double fakeNvmlTrueEnergy(unsigned gpu)             ground-truth energy in J (NAN on error)
 *   unsigned long fakeNvmlCalls(unsigned gpu)           device calls made on that GPU so far
 *                                                       (any nvmlDevice* function, valid handle)
 *   double zeusSimClockNow(void)                        the node's clock in s (0 without a node);
 *                                                       the nvml backend times windows on it.
 *   int    fakeNvmlGpuOfUuid(const char *uuid)          the node index of a GPU's UUID, or -1.
 *
 * Built twice: libnvidia-ml.so.1 (everything), and with -DFAKE_NVML_OMIT_REQUIRED
 * libnvidia-ml-missing.so.1, which lacks nvmlDeviceGetUUID (a symbol the backend requires).
 * The engine comes from zeus_static, linked with --exclude-libs so that none of it is exported.
 */
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
#include "device/nvml_types.h"
#include "fake_common/fake_common.h"
#include "zeus/sim.h"

#define FAKE_API __attribute__((visibility("default")))

#define FAKE_CLOCK_LIMIT_TDP 0xffffff01u
#define FAKE_CLOCK_LIMIT_UNLIMITED 0xffffff02u
#define FAKE_ARCH_PASCAL 4u
#define FAKE_ARCH_AMPERE 7u
#define FAKE_DRIVER_VERSION "555.42.06-zeus-fake"
#define FAKE_NVML_VERSION "12.555.42.06-zeus-fake"
#define FAKE_MAX_INJECT 16
#define FAKE_MAX_FUNCS 64

/* ---- the exported API (prototypes, since nothing else declares them) ---- */
FAKE_API nvmlReturn_t nvmlInit_v2(void);
FAKE_API nvmlReturn_t nvmlInitWithFlags(unsigned flags);
FAKE_API nvmlReturn_t nvmlShutdown(void);
FAKE_API const char *nvmlErrorString(nvmlReturn_t r);
FAKE_API nvmlReturn_t nvmlSystemGetDriverVersion(char *ver, unsigned len);
FAKE_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *ver, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int count, nvmlFieldValue_t *values);
FAKE_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned *celsius);
FAKE_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count);
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned idx, nvmlDevice_t *out);
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *out);
#ifndef FAKE_NVML_OMIT_REQUIRED
FAKE_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned len);
#endif
FAKE_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned *idx);
FAKE_API nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t dev, unsigned *arch);
FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned *min_mw,
                                                                    unsigned *max_mw);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t dev, unsigned mw);
FAKE_API nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, nvmlEnableState_t *mode);
FAKE_API nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t dev, nvmlEnableState_t mode);
FAKE_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long *mj);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t dev, unsigned *count, unsigned *mhz);
FAKE_API nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t dev, unsigned mem_mhz, unsigned *count,
                                                           unsigned *mhz);
FAKE_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, nvmlClockType_t type, unsigned *mhz);
FAKE_API nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t dev, nvmlClockType_t type, nvmlClockId_t id, unsigned *mhz);
FAKE_API nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t dev, unsigned min_mhz, unsigned max_mhz);
FAKE_API nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t dev);
FAKE_API nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t dev, unsigned min_mhz, unsigned max_mhz);
FAKE_API nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t dev);

FAKE_API int fakeNvmlRunWork(unsigned gpu, double units);
FAKE_API int fakeNvmlRunWorkAll(const double *units);
FAKE_API int fakeNvmlIdle(double seconds);
FAKE_API double fakeNvmlTrueEnergy(unsigned gpu);
FAKE_API unsigned long fakeNvmlCalls(unsigned gpu);
FAKE_API double zeusSimClockNow(void);
FAKE_API int fakeNvmlGpuOfUuid(const char *uuid);

/* ---- state ---- */

/* What a handle points at. The slot's address is the handle; `index` is its GPU. */
typedef struct fake_dev {
  unsigned index;
} fake_dev;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_refs;           /* Init reference count */
static zeus_sim_node *g_node;     /* non-NULL while g_refs > 0 */
static unsigned g_count;
static fake_dev g_devs[ZEUS_MAX_GPUS];
static bool g_lost[ZEUS_MAX_GPUS];
static unsigned long g_calls[ZEUS_MAX_GPUS];
static char g_log_path[1024];     /* "" when not logging */
static fake_inject g_inject[FAKE_MAX_INJECT];
static unsigned g_ninject;
static char g_state_path[1024];   /* FAKE_NVML_STATE, "" when off */
static char g_busy_path[1024];    /* FAKE_NVML_BUSY_FILE, "" when off */
static bool g_busy;               /* whether the node's GPUs are marked busy */
static double g_clock_delay_s;    /* FAKE_NVML_CLOCK_DELAY_MS / 1000 */
static unsigned g_clk_prev[ZEUS_MAX_GPUS];  /* SM clock shown before the last lock change */
static double g_clk_changed[ZEUS_MAX_GPUS]; /* node time of that change; -1: none */
static char g_counts_path[1024];  /* FAKE_NVML_COUNTS, "" when off */
static struct { const char *fn; unsigned long calls; } g_funcs[FAKE_MAX_FUNCS];
static fake_lie g_lie;            /* FAKE_NVML_LIE: what the GPUs lie about, and the lies' state */
static unsigned g_nfuncs;

/* Counts a call of `fn` (a string literal: __func__ or a name). Caller holds g_mu. */
static void count_call(const char *fn) {
  for (unsigned k = 0; k < g_nfuncs; k++) {
    if (g_funcs[k].fn == fn || strcmp(g_funcs[k].fn, fn) == 0) {
      g_funcs[k].calls++;
      return;
    }
  }
  if (g_nfuncs < FAKE_MAX_FUNCS) {
    g_funcs[g_nfuncs].fn = fn;
    g_funcs[g_nfuncs++].calls = 1;
  }
}

/* ---- return codes ---- */

/* Parses a code given as a number or as a name, with or without the ERROR_ prefix. */
static bool parse_code(const char *text, nvmlReturn_t *out) {
  while (isspace((unsigned char)*text)) text++;
  if (isdigit((unsigned char)*text)) {
    char *end;
    long v = strtol(text, &end, 10);
    if (*end || v < 0 || v > 100000) return false;
    *out = (nvmlReturn_t)v;
    return true;
  }
  if (strncasecmp(text, "NVML_", 5) == 0) text += 5;
  static const struct { const char *name; nvmlReturn_t value; } codes[] = {
#define FAKE__ENTRY(name, value) {#name, (value)},
      ZEUS_NVML_RETURN_MAP(FAKE__ENTRY)
#undef FAKE__ENTRY
  };
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(codes); i++) {
    const char *n = codes[i].name;
    if (strcasecmp(text, n) == 0 || (strncmp(n, "ERROR_", 6) == 0 && strcasecmp(text, n + 6) == 0)) {
      *out = codes[i].value;
      return true;
    }
  }
  return false;
}

/* NVIDIA's wording for the common codes; the backend never relies on these texts. */
const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    default: return "Unknown Error";
  }
}

/* ---- test controls ---- */

/* parse_code for fake_parse_inject. */
static bool parse_code_ll(const char *text, long long *out) {
  nvmlReturn_t r;
  if (!parse_code(text, &r)) return false;
  *out = r;
  return true;
}

/* Parses FAKE_NVML_INJECT into g_inject. Returns false (with a line on stderr) when malformed. */
static bool parse_inject(const char *value) {
  return fake_parse_inject("fake NVML", "FAKE_NVML_INJECT", value, g_inject, FAKE_MAX_INJECT, &g_ninject,
                           parse_code_ll);
}

/* Parses FAKE_NVML_LIE (tests/fake_common/fake_common.h). Returns false (with a line on stderr)
 * when malformed. */
static bool parse_lie(const char *value) { return fake_parse_lie("fake NVML", "FAKE_NVML_LIE", value, &g_lie); }

/* The energy counter as the lying GPU shows it (FAKE_NVML_LIE), from the engine's reading. */
static uint64_t lie_counter(zeus_sim_node *node, unsigned gpu, uint64_t raw) {
  double now = zeus_sim_now(node), tick = now;
  if (g_lie.late_s > 0 && zeus_sim_gpu_last_tick(node, gpu, &tick)) tick = now;
  pthread_mutex_lock(&g_mu);
  raw = fake_lie_counter(&g_lie, gpu, raw, now, tick);
  pthread_mutex_unlock(&g_mu);
  return raw;
}

/* A power reading (mW; kind FAKE_POWER_INSTANT or FAKE_POWER_AVERAGE) as the lying GPU shows it,
 * from the engine's reading (power_late first, on the engine's mW, then power_scaled). */
static unsigned lie_power(zeus_sim_node *node, unsigned gpu, unsigned kind, unsigned mw) {
  if (g_lie.power_late_s > 0) {
    double now = zeus_sim_now(node), tick = fake_power_tick(node, gpu, now);
    pthread_mutex_lock(&g_mu);
    mw = fake_lie_power_late(&g_lie, gpu, kind, mw, now, tick);
    pthread_mutex_unlock(&g_mu);
  }
  return fake_lie_power(&g_lie, mw);
}

/* The injected answer for this call, or SUCCESS to run it normally. Caller holds g_mu.
 * gpu < 0 for functions without a device. */
static nvmlReturn_t injected(const char *fn, int gpu) {
  if (gpu >= 0 && g_lost[gpu]) return NVML_ERROR_GPU_IS_LOST;
  long long code;
  if (!fake_inject_fire(g_inject, g_ninject, fn, gpu, &code)) return NVML_SUCCESS;
  if (gpu >= 0 && (code == NVML_ERROR_GPU_IS_LOST || code == NVML_ERROR_RESET_REQUIRED)) g_lost[gpu] = true;
  return (nvmlReturn_t)code;
}

/* Appends "<fn> <gpu> <args> -> <code>" to FAKE_NVML_LOG with one write(). */
static void log_setter(const char *fn, int gpu, const char *args, nvmlReturn_t r) {
  char path[sizeof g_log_path];
  pthread_mutex_lock(&g_mu);
  memcpy(path, g_log_path, sizeof path);
  pthread_mutex_unlock(&g_mu);
  fake_log_setter("fake NVML", "FAKE_NVML_LOG", path, fn, gpu, args, r);
}

/* ---- settings that outlive the process (FAKE_NVML_STATE) ---- */

/* Applies the state file, if any, to a new node. False (with a line on stderr) when malformed. */
static bool state_load(zeus_sim_node *n) { return fake_state_load("fake NVML", "FAKE_NVML_STATE", g_state_path, n); }

/* Writes every GPU's knobs to the state file (temporary file, rename). */
static void state_save(void) {
  char path[sizeof g_state_path];
  pthread_mutex_lock(&g_mu);
  memcpy(path, g_state_path, sizeof path);
  zeus_sim_node *n = g_node;
  unsigned count = g_count;
  pthread_mutex_unlock(&g_mu);
  fake_state_save("fake NVML", "FAKE_NVML_STATE", path, n, count);
}

/* Marks every GPU busy while FAKE_NVML_BUSY_FILE exists. Caller holds g_mu; g_node is set. */
static void busy_poll_locked(void) { fake_busy_poll(g_busy_path, g_node, g_count, &g_busy); }

/* Appends the per-function call counts to FAKE_NVML_COUNTS. Caller holds g_mu. */
static void write_counts_locked(void) {
  if (!g_counts_path[0]) return;
  char text[FAKE_MAX_FUNCS * 80];
  size_t len = 0;
  for (unsigned k = 0; k < g_nfuncs && len < sizeof text; k++) {
    int w = snprintf(text + len, sizeof text - len, "%s %lu\n", g_funcs[k].fn, g_funcs[k].calls);
    if (w < 0) return;
    len += (size_t)w;
  }
  if (len > sizeof text) len = sizeof text;
  int fd = open(g_counts_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    fprintf(stderr, "fake NVML: cannot open FAKE_NVML_COUNTS '%s'\n", g_counts_path);
    return;
  }
  ssize_t w = write(fd, text, len);
  (void)w;
  close(fd);
}

/* ---- init / shutdown ---- */

static nvmlReturn_t do_init(void) {
  const char *err = getenv("FAKE_NVML_INIT_ERROR");
  if (err && *err) {
    nvmlReturn_t code;
    if (!parse_code(err, &code)) {
      fprintf(stderr, "fake NVML: FAKE_NVML_INIT_ERROR '%s' is not an NVML return code\n", err);
      return NVML_ERROR_UNKNOWN;
    }
    if (code != NVML_SUCCESS) return code;
  }
  pthread_mutex_lock(&g_mu);
  nvmlReturn_t r = NVML_SUCCESS;
  if (g_refs == 0) {
    if (!parse_inject(getenv("FAKE_NVML_INJECT")) || !parse_lie(getenv("FAKE_NVML_LIE"))) {
      r = NVML_ERROR_UNKNOWN;
      goto out;
    }
    zeus_sim_node *n;
    if (zeus_sim_node_open(&n, NULL) != ZEUS_OK) {
      fprintf(stderr, "fake NVML: cannot create the simulated GPUs: %s\n", zeus_errmsg());
      r = NVML_ERROR_UNKNOWN;
      goto out;
    }
    const char *log = getenv("FAKE_NVML_LOG");
    snprintf(g_log_path, sizeof g_log_path, "%s", log ? log : "");
    const char *v = getenv("FAKE_NVML_STATE");
    snprintf(g_state_path, sizeof g_state_path, "%s", v ? v : "");
    v = getenv("FAKE_NVML_BUSY_FILE");
    snprintf(g_busy_path, sizeof g_busy_path, "%s", v ? v : "");
    v = getenv("FAKE_NVML_COUNTS");
    snprintf(g_counts_path, sizeof g_counts_path, "%s", v ? v : "");
    g_clock_delay_s = 0;
    v = getenv("FAKE_NVML_CLOCK_DELAY_MS");
    if (v && *v) {
      char *end;
      double ms = strtod(v, &end);
      if (*end || !(ms >= 0) || ms > 60000) {
        fprintf(stderr, "fake NVML: FAKE_NVML_CLOCK_DELAY_MS '%s' is not a number of ms in [0, 60000]\n", v);
        zeus_sim_node_close(n);
        r = NVML_ERROR_UNKNOWN;
        goto out;
      }
      g_clock_delay_s = ms / 1000.0;
    }
    if (!state_load(n)) {
      zeus_sim_node_close(n);
      r = NVML_ERROR_UNKNOWN;
      goto out;
    }
    g_node = n;
    g_lie.t0 = zeus_sim_now(n);
    g_count = zeus_sim_node_gpu_count(n);
    g_busy = false;
    g_nfuncs = 0;
    for (unsigned i = 0; i < ZEUS_MAX_GPUS; i++) {
      g_devs[i].index = i;
      g_lost[i] = false;
      g_calls[i] = 0;
      g_clk_changed[i] = -1;
    }
    busy_poll_locked();
  }
  count_call("nvmlInit");
  g_refs++;
out:
  pthread_mutex_unlock(&g_mu);
  return r;
}

nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned flags) {
  (void)flags;
  return do_init();
}

nvmlReturn_t nvmlShutdown(void) {
  pthread_mutex_lock(&g_mu);
  nvmlReturn_t r = NVML_SUCCESS;
  if (g_refs == 0) {
    r = NVML_ERROR_UNINITIALIZED;
  } else if (--g_refs == 0) {
    count_call("nvmlShutdown");
    write_counts_locked();
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

/* Resolves a handle to its GPU index, applying injections and counting the call. On success
 * *node is the node to call (valid until Shutdown, which tests do not race with calls). */
static nvmlReturn_t enter(const char *fn, nvmlDevice_t dev, unsigned *gpu, zeus_sim_node **node) {
  pthread_mutex_lock(&g_mu);
  nvmlReturn_t r = NVML_SUCCESS;
  if (!g_node) {
    r = NVML_ERROR_UNINITIALIZED;
    goto out;
  }
  const fake_dev *p = (const fake_dev *)(const void *)dev;
  if (!p || p < g_devs || p >= g_devs + g_count) {
    r = NVML_ERROR_INVALID_ARGUMENT;
    goto out;
  }
  *gpu = p->index;
  g_calls[*gpu]++;
  count_call(fn);
  busy_poll_locked();
  r = injected(fn, (int)*gpu);
  *node = g_node;
out:
  pthread_mutex_unlock(&g_mu);
  return r;
}

/* For functions without a device argument. */
static nvmlReturn_t enter_global(const char *fn, zeus_sim_node **node) {
  pthread_mutex_lock(&g_mu);
  nvmlReturn_t r = NVML_ERROR_UNINITIALIZED;
  if (g_node) {
    count_call(fn);
    r = injected(fn, -1);
  }
  *node = g_node;
  pthread_mutex_unlock(&g_mu);
  return r;
}

/* The GPU index of a handle for the setter log, or -1 when the handle is not ours. */
static int log_index(nvmlDevice_t dev) {
  const fake_dev *p = (const fake_dev *)(const void *)dev;
  pthread_mutex_lock(&g_mu);
  int i = p && p >= g_devs && p < g_devs + g_count ? (int)p->index : -1;
  pthread_mutex_unlock(&g_mu);
  return i;
}

/* Declares gpu, node and r for a device call named `fn`; returns early on a failed entry. */
#define ENTER_AS(fn, dev)                           \
  unsigned gpu = 0;                                 \
  zeus_sim_node *node = NULL;                       \
  nvmlReturn_t r = enter((fn), (dev), &gpu, &node); \
  if (r != NVML_SUCCESS) return r
#define ENTER(dev) ENTER_AS(__func__, dev)

/* Engine failures (already checked for before calling) map to UNKNOWN. */
static nvmlReturn_t engine(int rc) {
  switch (rc) {
    case ZEUS_OK: return NVML_SUCCESS;
    case ZEUS_EINVAL:
    case ZEUS_ERANGE: return NVML_ERROR_INVALID_ARGUMENT;
    case ZEUS_ENOTSUP: return NVML_ERROR_NOT_SUPPORTED;
    case ZEUS_ENOENT: return NVML_ERROR_NOT_FOUND;
    default: return NVML_ERROR_UNKNOWN;
  }
}

static nvmlReturn_t copy_string(const char *s, char *buf, unsigned len) {
  size_t n = strlen(s);
  if (len < n + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(buf, s, n + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *ver, unsigned len) {
  zeus_sim_node *node;
  nvmlReturn_t r = enter_global(__func__, &node);
  if (r) return r;
  if (!ver) return NVML_ERROR_INVALID_ARGUMENT;
  return copy_string(FAKE_DRIVER_VERSION, ver, len);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *ver, unsigned len) {
  zeus_sim_node *node;
  nvmlReturn_t r = enter_global(__func__, &node);
  if (r) return r;
  if (!ver) return NVML_ERROR_INVALID_ARGUMENT;
  return copy_string(FAKE_NVML_VERSION, ver, len);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count) {
  zeus_sim_node *node;
  nvmlReturn_t r = enter_global(__func__, &node);
  if (r) return r;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = zeus_sim_node_gpu_count(node);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned idx, nvmlDevice_t *out) {
  zeus_sim_node *node;
  nvmlReturn_t r = enter_global(__func__, &node);
  if (r) return r;
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  pthread_mutex_lock(&g_mu);
  if (idx >= g_count) {
    r = NVML_ERROR_INVALID_ARGUMENT;
  } else {
    g_calls[idx]++;
    r = injected(__func__, (int)idx);
  }
  pthread_mutex_unlock(&g_mu);
  if (r) return r;
  *out = (nvmlDevice_t)(void *)&g_devs[idx];
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *out) {
  zeus_sim_node *node;
  nvmlReturn_t r = enter_global(__func__, &node);
  if (r) return r;
  if (!uuid || !out) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < g_count; i++) {
    char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    zeus_sim_gpu_uuid(node, i, u, sizeof u);
    if (strcmp(u, uuid) == 0) {
      *out = (nvmlDevice_t)(void *)&g_devs[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

#ifndef FAKE_NVML_OMIT_REQUIRED
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned len) {
  ENTER(dev);
  if (!uuid) return NVML_ERROR_INVALID_ARGUMENT;
  char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
  if ((r = engine(zeus_sim_gpu_uuid(node, gpu, u, sizeof u)))) return r;
  return copy_string(u, uuid, len);
}
#endif

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned len) {
  ENTER(dev);
  if (!name) return NVML_ERROR_INVALID_ARGUMENT;
  char n[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
  if ((r = engine(zeus_sim_gpu_name(node, gpu, n, sizeof n)))) return r;
  return copy_string(n, name, len);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t dev, unsigned *idx) {
  ENTER(dev);
  if (!idx) return NVML_ERROR_INVALID_ARGUMENT;
  *idx = gpu;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t dev, unsigned *arch) {
  ENTER(dev);
  if (!arch) return NVML_ERROR_INVALID_ARGUMENT;
  bool counter = false;
  if ((r = engine(zeus_sim_gpu_energy_counter_supported(node, gpu, &counter)))) return r;
  *arch = counter ? FAKE_ARCH_AMPERE : FAKE_ARCH_PASCAL;
  return NVML_SUCCESS;
}

/* Bus <index + 1> in domain 0, as one card per slot would have. */
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
  ENTER(dev);
  (void)node;
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  memset(pci, 0, sizeof *pci);
  pci->bus = gpu + 1;
  snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", gpu + 1);
  snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", gpu + 1);
  pci->pciDeviceId = 0x223510de; /* an A40 */
  return NVML_SUCCESS;
}

/* ---- power ---- */

nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t dev, unsigned *min_mw, unsigned *max_mw) {
  ENTER(dev);
  if (!min_mw || !max_mw) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_gpu_power_limit_constraints(node, gpu, min_mw, max_mw, NULL));
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned *mw) {
  ENTER(dev);
  if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_gpu_get_power_limit(node, gpu, mw));
}

nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t dev, unsigned *mw) {
  ENTER(dev);
  if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_gpu_power_limit_constraints(node, gpu, NULL, NULL, mw));
}

/* No out-of-band limiter in the simulation: the enforced limit is the software one. */
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t dev, unsigned *mw) {
  ENTER(dev);
  if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_gpu_get_power_limit(node, gpu, mw));
}

static nvmlReturn_t set_power_limit(const char *fn, nvmlDevice_t dev, unsigned mw) {
  ENTER_AS(fn, dev);
  unsigned lo, hi;
  if ((r = engine(zeus_sim_gpu_power_limit_constraints(node, gpu, &lo, &hi, NULL)))) return r;
  if (mw < lo || mw > hi) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_gpu_set_power_limit(node, gpu, mw));
}

nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t dev, unsigned mw) {
  nvmlReturn_t r = set_power_limit(__func__, dev, mw);
  if (r == NVML_SUCCESS) state_save();
  char args[32];
  snprintf(args, sizeof args, "%u", mw);
  log_setter(__func__, log_index(dev), args, r);
  return r;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t dev, nvmlEnableState_t *mode) {
  ENTER(dev);
  if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
  bool on = false;
  if ((r = engine(zeus_sim_gpu_get_persistence_mode(node, gpu, &on)))) return r;
  *mode = on ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

static nvmlReturn_t set_persistence(const char *fn, nvmlDevice_t dev, nvmlEnableState_t mode) {
  ENTER_AS(fn, dev);
  if (mode != NVML_FEATURE_ENABLED && mode != NVML_FEATURE_DISABLED) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_gpu_set_persistence_mode(node, gpu, mode == NVML_FEATURE_ENABLED));
}

nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t dev, nvmlEnableState_t mode) {
  nvmlReturn_t r = set_persistence(__func__, dev, mode);
  if (r == NVML_SUCCESS) state_save();
  char args[32];
  snprintf(args, sizeof args, "%d", mode);
  log_setter(__func__, log_index(dev), args, r);
  return r;
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long *mj) {
  ENTER(dev);
  if (!mj) return NVML_ERROR_INVALID_ARGUMENT;
  bool counter = false;
  if ((r = engine(zeus_sim_gpu_energy_counter_supported(node, gpu, &counter)))) return r;
  if (!counter) return NVML_ERROR_NOT_SUPPORTED;
  uint64_t v;
  if ((r = engine(zeus_sim_gpu_total_energy(node, gpu, &v)))) return r;
  *mj = (unsigned long long)lie_counter(node, gpu, v);
  return NVML_SUCCESS;
}

/* Whether GPU `gpu` is a superchip module whose GPU-scope power NVML refuses (gh200). */
static bool module_only(zeus_sim_node *node, unsigned gpu) {
  zeus_sim_hardware hw;
  return zeus_sim_gpu_hardware(node, gpu, &hw) == ZEUS_OK && hw.module_power_only;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned *mw) {
  ENTER(dev);
  if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
  if (module_only(node, gpu)) return NVML_ERROR_NOT_SUPPORTED;
  if ((r = engine(zeus_sim_gpu_instant_power(node, gpu, mw)))) return r;
  *mw = lie_power(node, gpu, FAKE_POWER_INSTANT, *mw);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t dev, int count, nvmlFieldValue_t *values) {
  ENTER(dev);
  if (count <= 0 || !values) return NVML_ERROR_INVALID_ARGUMENT;
  long long now_us = (long long)llround(zeus_sim_now(node) * 1e6);
  unsigned answered = module_only(node, gpu) ? NVML_POWER_SCOPE_MODULE : NVML_POWER_SCOPE_GPU;
  for (int k = 0; k < count; k++) {
    nvmlFieldValue_t *v = &values[k];
    v->timestamp = now_us;
    v->latencyUsec = 0;
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
    v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (v->scopeId != answered) continue;
    unsigned kind;
    if (v->fieldId == NVML_FI_DEV_POWER_INSTANT)
      v->nvmlReturn = engine(zeus_sim_gpu_instant_power(node, gpu, &v->value.uiVal)), kind = FAKE_POWER_INSTANT;
    else if (v->fieldId == NVML_FI_DEV_POWER_AVERAGE)
      v->nvmlReturn = engine(zeus_sim_gpu_average_power(node, gpu, &v->value.uiVal)), kind = FAKE_POWER_AVERAGE;
    else continue;
    if (v->nvmlReturn == NVML_SUCCESS) v->value.uiVal = lie_power(node, gpu, kind, v->value.uiVal);
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, int sensor, unsigned *celsius) {
  ENTER(dev);
  if (!celsius || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_gpu_temperature(node, gpu, celsius));
}

/* ---- clocks ---- */

/* NVML's count protocol over an engine list: *count in = capacity, out = entries or needed. */
static nvmlReturn_t clock_list(int rc, size_t n, unsigned *count) {
  if (rc == ZEUS_ERANGE) {
    *count = (unsigned)n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (rc) return engine(rc);
  *count = (unsigned)n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t dev, unsigned *count, unsigned *mhz) {
  ENTER(dev);
  if (!count || (*count && !mhz)) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned scratch;
  size_t n = *count;
  int rc = zeus_sim_gpu_memory_clocks(node, gpu, mhz ? mhz : &scratch, &n);
  return clock_list(rc, n, count);
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t dev, unsigned mem_mhz, unsigned *count,
                                                  unsigned *mhz) {
  ENTER(dev);
  if (!count || (*count && !mhz)) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned scratch;
  size_t n = *count;
  int rc = zeus_sim_gpu_graphics_clocks(node, gpu, mem_mhz, mhz ? mhz : &scratch, &n);
  return clock_list(rc, n, count);
}

/* The SM clock a reading shows now: the engine's operating point, or, within
 * FAKE_NVML_CLOCK_DELAY_MS of a locked-clock change, the clock shown before it. */
static nvmlReturn_t shown_sm_clock(zeus_sim_node *node, unsigned gpu, unsigned *mhz) {
  pthread_mutex_lock(&g_mu);
  double delay = g_clock_delay_s, changed = g_clk_changed[gpu];
  unsigned prev = g_clk_prev[gpu];
  pthread_mutex_unlock(&g_mu);
  if (delay > 0 && changed >= 0 && zeus_sim_now(node) - changed < delay) {
    *mhz = prev;
    return NVML_SUCCESS;
  }
  nvmlReturn_t r = engine(zeus_sim_gpu_current_clocks(node, gpu, mhz, NULL)); /* the read-back (a tick's, on h100) */
  if (r == NVML_SUCCESS && g_lie.clock_frozen) { /* FAKE_NVML_LIE=clock_frozen */
    pthread_mutex_lock(&g_mu);
    *mhz = fake_lie_clock(&g_lie, gpu, *mhz);
    pthread_mutex_unlock(&g_mu);
  }
  return r;
}

/* Before a locked-clock change: remembers the clock shown now, so readings lag the change. */
static void note_clock_change(zeus_sim_node *node, unsigned gpu) {
  unsigned shown = 0;
  if (g_clock_delay_s <= 0 || shown_sm_clock(node, gpu, &shown) != NVML_SUCCESS) return;
  double now = zeus_sim_now(node);
  pthread_mutex_lock(&g_mu);
  g_clk_prev[gpu] = shown;
  g_clk_changed[gpu] = now;
  pthread_mutex_unlock(&g_mu);
}

/* The clock a unit of work runs at now (SM/graphics), or the memory clock. */
static nvmlReturn_t current_clock(zeus_sim_node *node, unsigned gpu, nvmlClockType_t type, unsigned *mhz) {
  if (type == NVML_CLOCK_GRAPHICS || type == NVML_CLOCK_SM) return shown_sm_clock(node, gpu, mhz);
  if (type == NVML_CLOCK_MEM) return engine(zeus_sim_gpu_current_clocks(node, gpu, NULL, mhz));
  return NVML_ERROR_NOT_SUPPORTED; /* VIDEO and anything newer */
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, nvmlClockType_t type, unsigned *mhz) {
  ENTER(dev);
  if (!mhz) return NVML_ERROR_INVALID_ARGUMENT;
  return current_clock(node, gpu, type, mhz);
}

/* CURRENT as GetClockInfo; every other id (application clocks, customer boost) is the highest
 * supported clock of that type. */
nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t dev, nvmlClockType_t type, nvmlClockId_t id, unsigned *mhz) {
  ENTER(dev);
  if (!mhz || id < 0 || id > 3) return NVML_ERROR_INVALID_ARGUMENT;
  if (id == 0) return current_clock(node, gpu, type, mhz);
  if (type == NVML_CLOCK_MEM) return current_clock(node, gpu, type, mhz);
  if (type != NVML_CLOCK_GRAPHICS && type != NVML_CLOCK_SM) return NVML_ERROR_NOT_SUPPORTED;
  unsigned mem;
  size_t n = 1;
  if ((r = engine(zeus_sim_gpu_memory_clocks(node, gpu, &mem, &n)))) return r;
  unsigned list[1024];
  n = ZEUS__ARRAY_LEN(list);
  if ((r = engine(zeus_sim_gpu_graphics_clocks(node, gpu, mem, list, &n)))) return r;
  *mhz = list[0];
  return NVML_SUCCESS;
}

static bool special_clock(unsigned v) { return v == FAKE_CLOCK_LIMIT_TDP || v == FAKE_CLOCK_LIMIT_UNLIMITED; }

static nvmlReturn_t set_locked(const char *fn, nvmlDevice_t dev, unsigned lo, unsigned hi, bool mem) {
  ENTER_AS(fn, dev);
  if (special_clock(lo) || special_clock(hi)) {
    if (mem || !special_clock(lo) || !special_clock(hi)) return NVML_ERROR_INVALID_ARGUMENT;
    note_clock_change(node, gpu);
    return engine(zeus_sim_gpu_reset_locked_clocks(node, gpu));
  }
  if (lo > hi || hi == 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (!mem) note_clock_change(node, gpu);
  return engine(mem ? zeus_sim_gpu_set_memory_locked_clocks(node, gpu, lo, hi)
                    : zeus_sim_gpu_set_locked_clocks(node, gpu, lo, hi));
}

static nvmlReturn_t reset_locked(const char *fn, nvmlDevice_t dev, bool mem) {
  ENTER_AS(fn, dev);
  if (!mem) note_clock_change(node, gpu);
  return engine(mem ? zeus_sim_gpu_reset_memory_locked_clocks(node, gpu) : zeus_sim_gpu_reset_locked_clocks(node, gpu));
}

/* The four locked-clock setters: apply, then log the call with its result. */
static nvmlReturn_t set_locked_logged(const char *fn, nvmlDevice_t dev, unsigned lo, unsigned hi, bool mem) {
  nvmlReturn_t r = set_locked(fn, dev, lo, hi, mem);
  if (r == NVML_SUCCESS) state_save();
  char args[32];
  snprintf(args, sizeof args, "%u %u", lo, hi);
  log_setter(fn, log_index(dev), args, r);
  return r;
}

static nvmlReturn_t reset_locked_logged(const char *fn, nvmlDevice_t dev, bool mem) {
  nvmlReturn_t r = reset_locked(fn, dev, mem);
  if (r == NVML_SUCCESS) state_save();
  log_setter(fn, log_index(dev), "", r);
  return r;
}

nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t dev, unsigned min_mhz, unsigned max_mhz) {
  return set_locked_logged(__func__, dev, min_mhz, max_mhz, false);
}

nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t dev) { return reset_locked_logged(__func__, dev, false); }

nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t dev, unsigned min_mhz, unsigned max_mhz) {
  return set_locked_logged(__func__, dev, min_mhz, max_mhz, true);
}

nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t dev) { return reset_locked_logged(__func__, dev, true); }

/* ---- test helpers ---- */

static zeus_sim_node *node_now(void) {
  pthread_mutex_lock(&g_mu);
  zeus_sim_node *n = g_node;
  pthread_mutex_unlock(&g_mu);
  return n;
}

int fakeNvmlRunWork(unsigned gpu, double units) {
  zeus_sim_node *n = node_now();
  if (!n) return NVML_ERROR_UNINITIALIZED;
  return engine(zeus_sim_work(n, gpu, units, NULL));
}

int fakeNvmlRunWorkAll(const double *units) {
  zeus_sim_node *n = node_now();
  if (!n) return NVML_ERROR_UNINITIALIZED;
  if (!units) return NVML_ERROR_INVALID_ARGUMENT;
  return engine(zeus_sim_work_all(n, units, NULL));
}

int fakeNvmlIdle(double seconds) {
  zeus_sim_node *n = node_now();
  if (!n) return NVML_ERROR_UNINITIALIZED;
  return engine(zeus_sim_idle(n, seconds));
}

double fakeNvmlTrueEnergy(unsigned gpu) {
  zeus_sim_node *n = node_now();
  double j;
  if (!n || zeus_sim_true_energy(n, gpu, &j) != ZEUS_OK) return NAN;
  return j;
}

unsigned long fakeNvmlCalls(unsigned gpu) {
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

int fakeNvmlGpuOfUuid(const char *uuid) {
  zeus_sim_node *n = node_now();
  if (!n || !uuid) return -1;
  for (unsigned i = 0; i < zeus_sim_node_gpu_count(n); i++) {
    char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (zeus_sim_gpu_uuid(n, i, u, sizeof u) == ZEUS_OK && strcmp(u, uuid) == 0) return (int)i;
  }
  return -1;
}
