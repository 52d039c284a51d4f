/* The "none" backend: zero GPUs; every per-GPU call fails cleanly in device.c. */
#include "device/backend.h"

static int none_open(void **state, const zeus_devices_opts *opts) {
  (void)opts;
  *state = NULL;
  return ZEUS_OK;
}
static void none_close(void *st) { (void)st; }
static unsigned none_count(void *st) { (void)st; return 0; }
static double none_now(void *st) { (void)st; return zeus_monotonic_s(); }

const zeus__gpu_backend zeus__backend_none = {
    .name = "none", .open = none_open, .close = none_close, .count = none_count, .now = none_now,
};
