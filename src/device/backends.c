/* The explicit table of GPU backends, looked up by name. Auto-selection (device.c): nvml; else
 * amdsmi when it loads and lists GPUs; either wrapped as nvml+zeusd or amdsmi+zeusd when a daemon
 * is configured; else zeusd when a daemon is configured; else none. The hybrids are not in the
 * table: naming nvml or amdsmi with a daemon configured gives them. */
#include "device/backend.h"

const zeus__gpu_backend *const zeus__gpu_backends[] = {
    &zeus__backend_nvml,
    &zeus__backend_amdsmi,
    &zeus__backend_sim,
    &zeus__backend_none,
    &zeus__backend_zeusd,
    NULL,
};
