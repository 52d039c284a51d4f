/* The explicit table of GPU backends, looked up by name. Auto-selection (device.c): nvml, wrapped
 * as nvml+zeusd when a daemon is configured; else zeusd when a daemon is configured; else amdsmi
 * when it loads and lists GPUs; else none. */
#include "device/backend.h"

const zeus__gpu_backend *const zeus__gpu_backends[] = {
    &zeus__backend_nvml,
    &zeus__backend_amdsmi,
    &zeus__backend_sim,
    &zeus__backend_none,
    &zeus__backend_zeusd,
    NULL,
};
