/* The explicit table of GPU backends, in auto-selection order (nvml, then none). */
#include "device/backend.h"

const zeus__gpu_backend *const zeus__gpu_backends[] = {
    &zeus__backend_nvml,
    &zeus__backend_sim,
    &zeus__backend_none,
    NULL,
};
