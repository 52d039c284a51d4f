/* src/device/backend.h: the GPU backend vtable (internal).
 *
 * A backend works on physical indices 0..count-1; src/device/device.c maps visible indices
 * (CUDA_VISIBLE_DEVICES) onto them, records settings before the first change, and restores them.
 * A NULL slot means "not supported" (ZEUS_ENOTSUP). Every slot sets zeus_errmsg on failure with
 * the GPU and the operation named.
 */
#ifndef ZEUS_DEVICE_BACKEND_H
#define ZEUS_DEVICE_BACKEND_H

#include "core/core.h"
#include "zeus/device.h"
#include "zeus/sim.h"

typedef struct zeus__gpu_backend {
  const char *name;
  /* Creates the backend state. ZEUS_ENOLIB when the vendor library is missing. */
  int (*open)(void **state, const zeus_devices_opts *opts);
  void (*close)(void *state);
  unsigned (*count)(void *st);
  double (*now)(void *st);
  int (*name_of)(void *st, unsigned i, char *buf, size_t len);
  int (*uuid)(void *st, unsigned i, char *buf, size_t len);
  int (*energy_counter_supported)(void *st, unsigned i, bool *out);
  int (*power_limit_constraints)(void *st, unsigned i, unsigned *min_mw, unsigned *max_mw,
                                 unsigned *default_mw);
  int (*get_power_limit)(void *st, unsigned i, unsigned *mw);
  int (*set_power_limit)(void *st, unsigned i, unsigned mw);
  int (*get_persistence_mode)(void *st, unsigned i, bool *enabled);
  int (*set_persistence_mode)(void *st, unsigned i, bool enabled);
  int (*total_energy)(void *st, unsigned i, uint64_t *mj);
  int (*power)(void *st, unsigned i, zeus_power_domain domain, unsigned *mw);
  /* What power and energy readings cover; NULL: the GPU (ZEUS_POWER_SCOPE_GPU). */
  int (*power_scope)(void *st, unsigned i, zeus_power_scope *out);
  int (*temperature)(void *st, unsigned i, unsigned *celsius);
  int (*current_clocks)(void *st, unsigned i, unsigned *sm_mhz, unsigned *mem_mhz);
  int (*architecture)(void *st, unsigned i, unsigned *arch);
  int (*driver_version)(void *st, char *buf, size_t len);
  int (*library_version)(void *st, char *buf, size_t len);
  int (*memory_clocks)(void *st, unsigned i, unsigned *mhz, size_t *count);
  int (*graphics_clocks)(void *st, unsigned i, unsigned mem_mhz, unsigned *mhz, size_t *count);
  int (*set_locked_clocks)(void *st, unsigned i, unsigned min_mhz, unsigned max_mhz);
  int (*reset_locked_clocks)(void *st, unsigned i);
  int (*set_memory_locked_clocks)(void *st, unsigned i, unsigned min_mhz, unsigned max_mhz);
  int (*reset_memory_locked_clocks)(void *st, unsigned i);
  /* Both locks at once where the backend can do it in fewer calls than the two slots above (amdsmi:
   * one performance-level reset; a daemon: one request); all or nothing. NULL: the device layer
   * calls the two slots. */
  int (*reset_all_locked_clocks)(void *st, unsigned i);
  /* The lock of the SM (mem false) or memory clock where the backend can read it back (out->source
   * set); ZEUS_ENOTSUP where it cannot (NVML; a daemon without the route). */
  int (*get_locked_clocks)(void *st, unsigned i, bool mem, zeus_clock_lock *out);
  /* The PCI address as lspci -D writes it ("0000:01:00.0"). */
  int (*pci_address)(void *st, unsigned i, char *buf, size_t len);
  /* "sim" only: the node behind the state. */
  zeus_sim_node *(*sim_node)(void *st);
  /* Backends through a daemon: gives back everything changed through this state (the daemon
   * restores the values); zeus_devices_restore calls it instead of putting values back itself. */
  int (*release)(void *st);
} zeus__gpu_backend;

extern const zeus__gpu_backend zeus__backend_nvml;
/* AMD GPUs through ROCm's libamd_smi.so (src/device/amdsmi.c). */
extern const zeus__gpu_backend zeus__backend_amdsmi;
extern const zeus__gpu_backend zeus__backend_sim;
extern const zeus__gpu_backend zeus__backend_none;
/* Through a zeus daemon (src/device/backend_zeusd.c): "zeusd" reads everything from the daemon;
 * "nvml+zeusd" and "amdsmi+zeusd" wrap a local NVML or amdsmi for readings and send settings to
 * the daemon. */
extern const zeus__gpu_backend zeus__backend_zeusd;
extern const zeus__gpu_backend zeus__backend_nvml_zeusd;
extern const zeus__gpu_backend zeus__backend_amdsmi_zeusd;
/* Wraps an opened local backend (nvml or amdsmi; its state is then owned by the wrapper, which
 * closes it on failure too). used[i] says whether local GPU i is visible (NULL: all): a GPU in use
 * that cannot be matched to one of the daemon's fails the open (amdsmi), one not in use never does. */
int zeus__zeusd_hybrid_open(void **state, const zeus__gpu_backend *local, void *local_state, const bool *used,
                            const zeus_devices_opts *opts);

/* The explicit table of backends, in the order auto-selection tries them (src/device/backends.c). */
extern const zeus__gpu_backend *const zeus__gpu_backends[];

/* Parses a CUDA_VISIBLE_DEVICES value against the physical devices' UUIDs (uuids[i] of device i,
 * NULL for a device this user cannot open). Writes visible → physical indices to map[] (capacity
 * ZEUS_MAX_GPUS) and their number to *n. ZEUS_ENOTSUP for a MIG entry. Exposed for tests. */
int zeus__parse_visible_devices(const char *value, const char *const *uuids, unsigned count,
                                unsigned *map, unsigned *n);

#endif
