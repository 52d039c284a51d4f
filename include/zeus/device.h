/* zeus/device.h: GPUs (and CPU packages) behind one interface.
 *
 * A zeus_devices handle is the set of GPUs visible to this process from one backend:
 *   "nvml"  NVIDIA GPUs through libnvidia-ml.so.1, loaded with dlopen at run time
 *           (path: ZEUS_NVML_LIBRARY). Setters need root or CAP_SYS_ADMIN.
 *   "sim"   simulated GPUs (see zeus/sim.h), configured by ZEUS_SIM_* settings.
 *   "none"  no GPU; every per-GPU call fails with ZEUS_ENOENT.
 *   "zeusd" every GPU of a zeus daemon (or the original zeusd), everything through it.
 *   "amdsmi" AMD GPUs through libamd_smi.so (path: ZEUS_AMDSMI_LIBRARY), numbered as HIP does.
 * Selection: opts->backend, else ZEUS_GPU_BACKEND, else nvml when it loads, else amdsmi when it
 * loads and lists GPUs, else zeusd when a daemon is configured, else none.
 *
 * Through a daemon (zeus/daemon.h; configured by ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT, token in
 * ZEUSD_TOKEN, as for the original Python package, or by opts->daemon and opts->daemon_token): the
 * nvml backend becomes "nvml+zeusd" (and amdsmi "amdsmi+zeusd"): the vendor library in this process
 * still reads energy, power, temperature and clocks, and every setting (power limit, persistence
 * mode, locked clocks), read or written, goes to the daemon, so none of them needs privilege here.
 * amdsmi+zeusd matches each GPU to the daemon's by PCI address; a visible GPU the daemon lists
 * never (ZEUS_ENOENT) or twice (ZEUS_ESTATE) fails zeus_devices_open naming the address and the
 * daemon's GPUs. The daemon gives the changes back when this process dies; restoring or closing the
 * handle has it give them back at once. A setting another client of the daemon holds is ZEUS_EBUSY,
 * naming the holder (daemon_override takes it over). The simulated GPU is never sent to a daemon:
 * it lives in this process and needs no privilege.
 *
 * GPU indices are visible indices: CUDA_VISIBLE_DEVICES is honoured as CUDA does (unset: all;
 * empty: none; comma-separated integers or GPU-<uuid> prefixes; parsing stops at the first
 * invalid entry; MIG-... entries are refused with ZEUS_ENOTSUP), mapped to devices by UUID.
 *
 * Units: power in mW, energy in mJ, clocks in MHz, time in s. A reading a GPU cannot make is
 * ZEUS_ENOTSUP, never zero.
 *
 * Settings the library changes (power limit, persistence mode, locked clocks) are recorded
 * before the first change and put back by zeus_devices_restore() and zeus_devices_close().
 *
 * Thread safety: every function may be called from several threads on the same handle.
 */
#ifndef ZEUS_DEVICE_H
#define ZEUS_DEVICE_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

#define ZEUS_MAX_GPUS 64
#define ZEUS_MAX_CPUS 16
#define ZEUS_NAME_LEN 96  /* enough for any GPU name or UUID, NUL included */

typedef struct zeus_devices zeus_devices;
struct zeus_sim_config;

/* Zero-initialised (or NULL) means defaults. */
typedef struct zeus_devices_opts {
  /* "nvml", "amdsmi", "sim", "none", "zeusd"; NULL: ZEUS_GPU_BACKEND, else nvml if it loads, else amdsmi
   * (ZEUS_AMDSMI_LIBRARY, else "libamd_smi.so") if it loads and lists GPUs, else none. */
  const char *backend;
  /* Path or name of the NVML library; NULL: ZEUS_NVML_LIBRARY, else "libnvidia-ml.so.1". */
  const char *nvml_library;
  /* The CUDA_VISIBLE_DEVICES value to apply; NULL: read the environment. */
  const char *visible_devices;
  /* true: ignore CUDA_VISIBLE_DEVICES and expose every GPU. */
  bool all_devices;
  /* Simulated GPUs (backend "sim"); NULL: from ZEUS_SIM_* settings. Copied. */
  const struct zeus_sim_config *sim;
  /* true: zeus_devices_close() does not restore changed settings (through a daemon: changes are
   * made for good, held by nobody, as `zeus gpus reset` wants). */
  bool keep_settings_on_close;
  /* The daemon to send privileged calls to: NULL: ZEUSD_SOCK_PATH, else ZEUSD_HOST_PORT, else
   * none; "": never use one; "unix:PATH", "tcp:HOST:PORT", "/path" or "HOST:PORT". */
  const char *daemon;
  /* Through a daemon: take over settings other clients hold instead of failing with ZEUS_EBUSY. */
  bool daemon_override;
  /* The bearer token to send to that daemon (a JWT of `zeus daemon token issue`): NULL: ZEUSD_TOKEN
   * from the environment (unset or empty: none); "": send no token, whatever the environment says.
   * Copied at open; never logged nor put into an error message; one with a control character (a
   * line break) fails zeus_devices_open with ZEUS_EINVAL. (Last, so that callers that
   * zero-initialise the struct and know nothing of it keep the environment's token.) */
  const char *daemon_token;
} zeus_devices_opts;

/* Fills *o with the defaults (every field NULL or false: the environment decides). */
ZEUS_EXTERN void zeus_devices_opts_init(zeus_devices_opts *o /* out */);

/* Opens the GPUs of one backend. opts may be NULL (all defaults). Errors: ZEUS_EINVAL for a
 * bad setting or option (named), ZEUS_ENOLIB when "nvml" or "amdsmi" was asked for explicitly and
 * cannot be loaded or initialised, ZEUS_ENOTSUP for MIG entries in CUDA_VISIBLE_DEVICES, ZEUS_ENOMEM. */
ZEUS_EXTERN int zeus_devices_open(zeus_devices **out /* out */, const zeus_devices_opts *opts);

/* Restores changed settings (unless keep_settings_on_close) and releases the handle. */
ZEUS_EXTERN void zeus_devices_close(zeus_devices *d);

/* The process-wide device set, opened on first use from the environment, shared by every
 * caller that passes no handle of its own (the monitor's default). Closed at exit, restoring
 * changed settings. Returns a borrowed handle. */
ZEUS_EXTERN int zeus_devices_default(zeus_devices **out /* out, borrowed */);

/* The backend's name: "nvml", "sim" or "none". */
ZEUS_EXTERN const char *zeus_devices_backend(const zeus_devices *d);

/* Why no NVIDIA GPU is there: when the backend was chosen automatically (no opts->backend, no
 * ZEUS_GPU_BACKEND) and NVML could not be loaded, the load error ("cannot load the NVML library
 * 'libnvidia-ml.so.1': ..."), then, where the amdsmi backend was tried after it and gave no GPU,
 * "; no AMD GPU: " and why; owned by the handle; NULL when nvml was used or not tried. */
ZEUS_EXTERN const char *zeus_devices_nvml_error(const zeus_devices *d);

/* Seconds on the backend's own monotonic clock (the simulated clock for "sim"). Every
 * measurement window is timed on it. */
ZEUS_EXTERN double zeus_devices_now(const zeus_devices *d);

/* Number of visible GPUs (0 is not an error). */
ZEUS_EXTERN unsigned zeus_gpu_count(const zeus_devices *d);

/* Name and UUID ("GPU-…") of a visible GPU, NUL-terminated and truncated to `len`. */
ZEUS_EXTERN int zeus_gpu_name(zeus_devices *d, unsigned gpu, char *buf /* out */, size_t len);
ZEUS_EXTERN int zeus_gpu_uuid(zeus_devices *d, unsigned gpu, char *buf /* out */, size_t len);

/* The GPU's PCI address as `lspci -D` writes it ("0000:01:00.0"); ZEUS_ENOTSUP where unknown. */
ZEUS_EXTERN int zeus_gpu_pci_address(zeus_devices *d, unsigned gpu, char *buf /* out */,
                                     size_t len);

/* Whether the GPU has a total-energy counter (Volta and newer on NVML). */
ZEUS_EXTERN int zeus_gpu_energy_counter_supported(zeus_devices *d, unsigned gpu, bool *out /* out */);

/* Power-limit range and default, in mW. */
ZEUS_EXTERN int zeus_gpu_power_limit_constraints(zeus_devices *d, unsigned gpu,
                                                 unsigned *min_mw /* out */, unsigned *max_mw /* out */,
                                                 unsigned *default_mw /* out */);
ZEUS_EXTERN int zeus_gpu_get_power_limit(zeus_devices *d, unsigned gpu, unsigned *mw /* out */);
/* Sets the power limit; ZEUS_ERANGE outside the constraints (checked before the device is
 * called), ZEUS_EPERM without the privilege. Records the previous limit for restoring. */
ZEUS_EXTERN int zeus_gpu_set_power_limit(zeus_devices *d, unsigned gpu, unsigned mw);

ZEUS_EXTERN int zeus_gpu_get_persistence_mode(zeus_devices *d, unsigned gpu, bool *enabled /* out */);
ZEUS_EXTERN int zeus_gpu_set_persistence_mode(zeus_devices *d, unsigned gpu, bool enabled);

/* Energy used by the GPU since some fixed point (driver load), in mJ; ZEUS_ENOTSUP without a counter. */
ZEUS_EXTERN int zeus_gpu_total_energy(zeus_devices *d, unsigned gpu, uint64_t *mj /* out */);
/* Which power a reading means (NVML's field values; see docs/monitor.md or shared NVML notes). */
typedef enum zeus_power_domain {
  /* The GPU's power now: NVML field POWER_INSTANT, or nvmlDeviceGetPowerUsage where the field is
   * missing (on Ampere other than GA100 and later that call is a 1 s average). Where NVML refuses
   * the GPU scope (Grace Hopper), the module's: see zeus_gpu_power_scope. */
  ZEUS_POWER_INSTANT = 0,
  /* Averaged over the GPU's own window, about 1 s: NVML field POWER_AVERAGE. */
  ZEUS_POWER_AVERAGE = 1,
  /* The memory's average power: field POWER_AVERAGE, memory scope (seen on H100, not on A40). */
  ZEUS_POWER_MEMORY_AVERAGE = 2,
} zeus_power_domain;

/* Power of `domain` in mW; ZEUS_ENOTSUP where the GPU cannot read that domain, ZEUS_EINVAL for
 * an unknown domain. */
ZEUS_EXTERN int zeus_gpu_power(zeus_devices *d, unsigned gpu, zeus_power_domain domain, unsigned *mw /* out */);
/* zeus_gpu_power(d, gpu, ZEUS_POWER_INSTANT, mw). */
ZEUS_EXTERN int zeus_gpu_instant_power(zeus_devices *d, unsigned gpu, unsigned *mw /* out */);

/* What a GPU's power and energy readings cover. On a Grace Hopper superchip (GH200) NVML refuses
 * GPU-scope power and answers for the whole module instead (the Grace CPU, its memory and the
 * GPU together), and its energy counter counts the module too (docs/grace-hopper.md). */
typedef enum zeus_power_scope {
  ZEUS_POWER_SCOPE_GPU = 0,    /* the GPU and its board (every discrete GPU) */
  ZEUS_POWER_SCOPE_MODULE = 1, /* the whole superchip module: CPU + memory + GPU */
} zeus_power_scope;

/* The scope of the GPU's power and energy readings. Backends that cannot say report
 * ZEUS_POWER_SCOPE_GPU. On NVML the first call may probe the power fields (once per GPU) and logs
 * one warning when it falls back to the module scope. Errors: those of resolving `gpu`. */
ZEUS_EXTERN int zeus_gpu_power_scope(zeus_devices *d, unsigned gpu, zeus_power_scope *out /* out */);
/* "gpu" or "module" (the word the JSON reports carry as "power_scope"); "unknown" otherwise. Static. */
ZEUS_EXTERN const char *zeus_power_scope_name(zeus_power_scope scope);

/* GPU die temperature in degrees Celsius. */
ZEUS_EXTERN int zeus_gpu_temperature(zeus_devices *d, unsigned gpu, unsigned *celsius /* out */);
/* The SM clock and the memory clock the GPU runs at now, in MHz (either pointer may be NULL). */
ZEUS_EXTERN int zeus_gpu_current_clocks(zeus_devices *d, unsigned gpu, unsigned *sm_mhz /* out */,
                                        unsigned *mem_mhz /* out */);
/* The GPU's architecture in NVML's numbering (2 Kepler, 3 Maxwell, 4 Pascal, 5 Volta, 6 Turing,
 * 7 Ampere, 8 Ada, 9 Hopper, 10 Blackwell, 13 Rubin; 0xffffffff unknown). */
ZEUS_EXTERN int zeus_gpu_architecture(zeus_devices *d, unsigned gpu, unsigned *arch /* out */);
/* "Hopper" and so on for an architecture number; "unknown" for one we do not know. Static string. */
ZEUS_EXTERN const char *zeus_gpu_architecture_name(unsigned arch);

/* The driver's version ("580.65.06"; "sim <version>" on the simulated GPU) and the version of the
 * vendor library (NVML's own version string), NUL-terminated and truncated to `len`.
 * ZEUS_ENOTSUP on the "none" backend or where the library cannot say. */
ZEUS_EXTERN int zeus_devices_driver_version(zeus_devices *d, char *buf /* out */, size_t len);
ZEUS_EXTERN int zeus_devices_library_version(zeus_devices *d, char *buf /* out */, size_t len);

/* Supported clocks, highest first. `*count` goes in as the capacity of `mhz` and comes out as
 * the number written; ZEUS_ERANGE (with *count set to the number needed) when too small. */
ZEUS_EXTERN int zeus_gpu_supported_memory_clocks(zeus_devices *d, unsigned gpu, unsigned *mhz /* out */,
                                                 size_t *count /* in, out */);
ZEUS_EXTERN int zeus_gpu_supported_graphics_clocks(zeus_devices *d, unsigned gpu, unsigned mem_mhz,
                                                   unsigned *mhz /* out */, size_t *count /* in, out */);

/* Locks the SM (graphics) clock to [min_mhz, max_mhz]; ZEUS_EINVAL when min > max. */
ZEUS_EXTERN int zeus_gpu_set_locked_clocks(zeus_devices *d, unsigned gpu, unsigned min_mhz, unsigned max_mhz);
ZEUS_EXTERN int zeus_gpu_reset_locked_clocks(zeus_devices *d, unsigned gpu);
/* Locks the memory clock (Ampere and newer on NVML). */
ZEUS_EXTERN int zeus_gpu_set_memory_locked_clocks(zeus_devices *d, unsigned gpu, unsigned min_mhz,
                                                  unsigned max_mhz);
ZEUS_EXTERN int zeus_gpu_reset_memory_locked_clocks(zeus_devices *d, unsigned gpu);
/* Resets both the SM (graphics) and the memory clock locks of one GPU, as the two calls above one
 * after the other would, in as few vendor calls or daemon requests as the backend allows: on NVML
 * (and the simulated GPU) the two resets; on amdsmi one amdsmi_set_gpu_perf_level(AUTO), which
 * frees both domains (a one-domain reset takes one too and then locks the other domain again
 * where this handle had locked it); through a zeus daemon one POST /gpu/reset_locked_clocks (the
 * two one-domain requests where the daemon lacks that route). Both locks then count as unlocked
 * for zeus_gpu_get_locked_clocks and are no longer restored by zeus_devices_restore.
 * A GPU that cannot lock its memory clock (NVML NOT_SUPPORTED before Ampere) is no failure: its SM
 * lock is reset and ZEUS_OK returned. Where the two locks are reset one by one (NVML, the
 * simulated GPU), the second is tried whatever the first did, the one reset counts as unlocked,
 * and the first failure is returned, a real one before ZEUS_ENOTSUP; amdsmi resets both or
 * neither; after a daemon's failure this handle's record of both locks stays as it was (the
 * daemon, which zeus_gpu_get_locked_clocks asks first, knows which it reset).
 * Errors: those of resolving `gpu`; ZEUS_ENOTSUP where the SM lock cannot be reset (the "none"
 * backend, an amdsmi library without amdsmi_set_gpu_perf_level); ZEUS_EPERM without the
 * privilege; ZEUS_EGPULOST; a daemon's refusal (ZEUS_EBUSY, ...); zeus_errmsg names the GPU and
 * the clock. Thread-safe, as the other setters. */
ZEUS_EXTERN int zeus_gpu_reset_all_clocks(zeus_devices *d, unsigned gpu);

/* Whether a clock is locked, as far as anyone this library can ask knows. NVML has no call that
 * reads a lock back, so on NVML only locks set or reset through this handle are known. */
typedef enum zeus_clock_lock_state {
  ZEUS_CLOCK_LOCK_UNKNOWN = 0, /* nobody can say (NVML, and this handle never set or reset it) */
  ZEUS_CLOCK_UNLOCKED = 1,
  ZEUS_CLOCK_LOCKED = 2,
} zeus_clock_lock_state;

typedef struct zeus_clock_lock {
  zeus_clock_lock_state state;
  unsigned min_mhz, max_mhz; /* the locked range as requested (0, 0 unless locked) */
  /* Who said: "device" (the backend reads the lock: the simulated GPU), "daemon" (the zeus daemon,
   * which knows the locks made through it), "handle" (this handle set or reset it), or "" when
   * unknown. A static string. */
  const char *source;
} zeus_clock_lock;

/* The lock of the SM clock (memory false) or of the memory clock (memory true) of a GPU. Asks the
 * backend first (the simulated GPU knows its locks; a zeus daemon knows those made through it);
 * where it cannot say, reports what this handle did: locked to the range it set, unlocked after
 * it reset the lock or restored the GPU, and ZEUS_CLOCK_LOCK_UNKNOWN otherwise. ZEUS_OK with
 * state UNKNOWN is not an error; errors are those of resolving `gpu`. */
ZEUS_EXTERN int zeus_gpu_get_locked_clocks(zeus_devices *d, unsigned gpu, bool memory, zeus_clock_lock *out /* out */);

/* Puts back every setting changed through this handle since it was opened (power limit and
 * persistence mode to their earlier values; locked clocks reset). Lost GPUs are skipped.
 * Idempotent. Returns the first error but tries every GPU. */
ZEUS_EXTERN int zeus_devices_restore(zeus_devices *d);

/* Restores the GPUs of every open handle; async-signal-tolerant enough for a SIGINT/SIGTERM
 * handler that exits right after (it takes no locks another thread could hold forever). */
ZEUS_EXTERN void zeus_devices_restore_all(void);

/* ---- CPU packages (Intel RAPL through /sys/class/powercap) ----
 *
 * A CPU package is a RAPL zone intel-rapl:N whose energy_uj is readable; its DRAM zone, when it
 * has one, is the sub-zone intel-rapl:N:M named "dram". The folder is /sys/class/powercap, or
 * ZEUS_RAPL_ROOT. Since Linux 5.10 energy_uj is readable by root only. Each function below scans
 * the folder again (a monitor scans it once and keeps the files open: use a monitor to measure).
 * Thread-safe. */

/* Number of CPU packages whose energy counter is readable (0 when none). When this process can
 * read none (root only since Linux 5.10) and a daemon is configured (ZEUSD_SOCK_PATH or
 * ZEUSD_HOST_PORT), the packages and their energy come from the daemon's /cpu routes, for these
 * functions and for monitors alike. */
ZEUS_EXTERN unsigned zeus_cpu_count(void);
/* Package energy in mJ, and whether a DRAM sub-zone exists (then its energy too). */
ZEUS_EXTERN int zeus_cpu_energy(unsigned cpu, uint64_t *pkg_mj /* out */, bool *has_dram /* out */,
                                uint64_t *dram_mj /* out */);
/* The value at which the package (dram) counter wraps around, in mJ. */
ZEUS_EXTERN int zeus_cpu_energy_range(unsigned cpu, uint64_t *pkg_max_mj /* out */, uint64_t *dram_max_mj /* out */);

typedef struct zeus_cpu_zone {
  unsigned zone;           /* N of intel-rapl:N */
  char name[32];           /* the zone's own name ("package-0"), "" when it has none */
  char energy_path[512];   /* the package's energy_uj */
  bool has_dram;
  char dram_path[512];     /* the DRAM zone's energy_uj ("" without one) */
} zeus_cpu_zone;

/* Where CPU package `cpu` (0 .. zeus_cpu_count()-1) and its DRAM zone are read from. ZEUS_ENOENT
 * when there is no such package; zeus_errmsg() then says why no (or no more) package is readable:
 * no RAPL zone in the folder, the folder missing, or the counters not readable (permission). */
ZEUS_EXTERN int zeus_cpu_zone_info(unsigned cpu, zeus_cpu_zone *out /* out */);

ZEUS_END_DECLS
#endif
