/* A backend's own record of a GPU's energy-counter and power-reading ticks, for a tick follower that cannot poll
 * (monitor/sampler.c's virtual mode). Only the simulated GPU on the virtual clock keeps one: there
 * time moves only with the simulated work, so nothing can find the ticks by polling. */
#ifndef ZEUS_DEVICE_COUNTER_TICKS_H
#define ZEUS_DEVICE_COUNTER_TICKS_H
#include <stddef.h>

#include "zeus/device.h"

typedef struct zeus__counter_tick {
  double t_s;       /* the backend's time of the tick */
  double counter_j; /* the counter after it */
  double power_w;   /* the power the GPU drew then */
} zeus__counter_tick;

/* GPU gpu's ticks after backend time after_s, oldest first, at most max of the newest (out may be
 * NULL when max is 0: a probe); *n their count. ZEUS_ENOTSUP where the backend keeps no record
 * (any backend whose clock moves with real time: a follower thread polls there) or the GPU's
 * counter does not tick. */
int zeus__gpu_counter_ticks_since(zeus_devices *d, unsigned gpu, double after_s, zeus__counter_tick *out, size_t max,
                                  size_t *n);
/* The same for the power readings' ticks (instant power on a clock of its own; the counter's ticks
 * where the power shares the counter's clock or does not tick): power_w the reading from then on,
 * counter_j the counter as it read then. */
int zeus__gpu_power_ticks_since(zeus_devices *d, unsigned gpu, double after_s, zeus__counter_tick *out, size_t max,
                                size_t *n);
/* What one read of the energy counter and of the instant power costs on GPU gpu, in s, where the
 * backend keeps a record of the ticks (for a follower that replays its reads); ZEUS_ENOTSUP
 * elsewhere. */
int zeus__gpu_sensor_read_costs(zeus_devices *d, unsigned gpu, double *counter_s, double *power_s);
/* The most ticks either call returns at once (the simulated GPU's record of each clock). */
#define ZEUS__SENSOR_TICKS_MAX 256
#endif
