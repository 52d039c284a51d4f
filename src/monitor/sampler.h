/* A per-GPU tick follower under the monitor (issues 24 and 35).
 *
 * On GPUs whose readings move on coarse sensor ticks and whose energy counter is slow to read (an
 * H100: 100 ms, 3.3 ms; an H200: 2.3 ms), two threads per GPU follow the sensors, each on its own
 * clock (on an H200 the counter ticks every 100.0 ms and the instant power every ~101.6 ms, their
 * phase sliding a whole period every few seconds):
 *   - the power follower polls the cheap instant power, densely only around its expected tick, and
 *     keeps each change (time, reading) and the integral of the readings, pi(t);
 *   - the counter follower reads the counter back to back from a little before the tick its own
 *     period predicts until the read that shows the new value: the tick lay between the start of
 *     the last read of the old value and the end of that read (a few ms on a real GPU).
 * The counter is pi plus an offset that moves slowly (the readings' noise and gain); each tick's
 * interval bounds that offset, a filter of the bounds gives it to a fraction of a ms of power, and
 * each counter value is attributed to the instant where pi plus the offset reaches it (kept within
 * the interval it was seen in; a load change that the readings missed resets the offset). The
 * energy at any instant t is then
 *   between two known ticks:  C_k + (C_k+1 - C_k) (pi(t) - pi(T_k)) / (pi(T_k+1) - pi(T_k))
 *   after the last known one: C_k + pi(t) - pi(T_k)
 * with no device call on the caller's thread. On the virtual simulated clock (time moves only with
 * the work, so nothing can poll) there are no threads: at each query the followers' reads up to
 * now are replayed, on the same schedule and at the same costs, against the backend's record of
 * the GPU's recent ticks (device/counter_ticks.h): the same code with the same blind spots. Another
 * clock that does not move with real time is refused (zeus__sampler_open says so). */
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

/* Starts two threads per GPU (visible indices gpus[0..n)), after one read of the counter and the
 * power. On the virtual simulated clock no thread (see above); ZEUS_EINVAL on another backend
 * whose clock does not move with real time. */
int zeus__sampler_open(zeus__sampler **out, zeus_devices *dev, const unsigned *gpus, unsigned n);
/* Stops the threads and frees the sampler. */
void zeus__sampler_close(zeus__sampler *s);
/* The energy of entry k at backend time t (the recent past or now). */
int zeus__sampler_energy_at(zeus__sampler *s, unsigned k, double t, zeus__sampler_energy *out);
/* Entry k's counter ticks placed after backend time after_s, oldest first, at most max: each tick's
 * time on the counter's own clock (as above: not the power's) in t[] and the counter after it in
 * c_j[]; their count. For a follower that fits energy to what ran between ticks (the Perseus
 * client's fit.c). */
size_t zeus__sampler_ticks_since(zeus__sampler *s, unsigned k, double after_s, double *t, double *c_j, size_t max);
/* CPU time the sampler's threads have used, in s (for the cost figures). */
double zeus__sampler_cpu_s(zeus__sampler *s);
/* Ticks seen on entry k, and the tick period it measured (0 while unknown). */
void zeus__sampler_stats(zeus__sampler *s, unsigned k, unsigned long *ticks, double *period_s);

#endif
