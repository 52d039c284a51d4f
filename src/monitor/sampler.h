/* A per-GPU tick follower under the monitor (issue 24).
 *
 * On GPUs whose readings move on a coarse sensor tick and whose energy counter is slow to read
 * (an H100: 100 ms, 3.3 ms), one thread per GPU follows the ticks: it polls the cheap instant
 * power, densely only around the expected tick, and a change of the value marks a tick (its time
 * is known to half the gap between two polls); it then reads the counter once, on its own thread.
 * Each tick is kept as (time, counter, power) in a ring. The energy at any instant t is then
 *   between two known ticks:  C_k + (C_k+1 - C_k) (t - T_k) / (T_k+1 - T_k)   ("after the fact")
 *   after the last known one: C_k + P_k (t - T_k)                           (tick-phase corrected)
 * with no device call on the caller's thread. On the virtual simulated clock (time moves only with
 * the work, so nothing can poll) there are no threads: each query takes the backend's record of
 * the GPU's recent ticks (device/counter_ticks.h), what a follower would have found. Another clock
 * that does not move with real time is refused (zeus__sampler_open says so). */
#ifndef ZEUS_MONITOR_SAMPLER_H
#define ZEUS_MONITOR_SAMPLER_H

#include "zeus/device.h"

typedef struct zeus__sampler zeus__sampler;

/* An estimate of the energy of one GPU at an instant, in J, on the counter's origin. */
typedef struct zeus__sampler_energy {
  double energy_j; /* the corrected estimate */
  double raw_j;    /* the counter as a read at that instant would have shown it (its last tick) */
  double bound_j;  /* an estimate of the error bound of energy_j */
} zeus__sampler_energy;

/* Starts one thread per GPU (visible indices gpus[0..n)). Each reads the counter once and begins
 * to poll. On the virtual simulated clock no thread (see above); ZEUS_EINVAL on another backend
 * whose clock does not move with real time. */
int zeus__sampler_open(zeus__sampler **out, zeus_devices *dev, const unsigned *gpus, unsigned n);
/* Stops the threads and frees the sampler. */
void zeus__sampler_close(zeus__sampler *s);
/* The energy of entry k at backend time t (the recent past or now). */
int zeus__sampler_energy_at(zeus__sampler *s, unsigned k, double t, zeus__sampler_energy *out);
/* CPU time the sampler's threads have used, in s (for the cost figures). */
double zeus__sampler_cpu_s(zeus__sampler *s);
/* Ticks seen on entry k, and the tick period it measured (0 while unknown). */
void zeus__sampler_stats(zeus__sampler *s, unsigned k, unsigned long *ticks, double *period_s);

#endif
