/* The Perseus client's instruction energy without counter reads on the training thread: a
 * follower thread that records the energy counter's ticks, and the fit that turns them, with the
 * instructions' timestamps, into a power per (instruction kind, clock) class. Internal. */
#ifndef ZEUS_PFO_CLIENT_FIT_H
#define ZEUS_PFO_CLIENT_FIT_H

#include <stddef.h>

#include "zeus/device.h"

typedef struct zeus__pfo_follower zeus__pfo_follower;

/* Starts a thread that reads GPU `gpu`'s energy counter in a loop and records (device time of the
 * tick, energy in J) whenever the value changes. The tick time is estimated as the midpoint of the
 * reads before and at the change (a counter that changes at every read: the read's time). When
 * reads are slow (>= 200 us) it sleeps between ticks and reads back to back only around the next
 * expected tick. */
int zeus__pfo_follower_open(zeus__pfo_follower **out, zeus_devices *d, unsigned gpu);
void zeus__pfo_follower_close(zeus__pfo_follower *f);
/* Copies up to cap samples, oldest first: the last one at or before `since` and all after it.
 * Returns the count. */
size_t zeus__pfo_follower_samples(zeus__pfo_follower *f, double since, double *t, double *e, size_t cap);
/* On a simulated GPU's virtual clock (time moves only with the work): waits until the follower
 * has looked at the counter at the current time, as its polling would on a real clock. Does
 * nothing on other clocks. */
void zeus__pfo_follower_observe(zeus__pfo_follower *f);
/* Counter reads made so far (for tests and the bench). */
unsigned long zeus__pfo_follower_reads(zeus__pfo_follower *f);

/* Least-squares fit of constant powers to the counter's increments. Instructions i (n of them,
 * non-overlapping, in time order) run [b[i], b[i] + d[i]) in class cls[i] (0..m-1); time outside
 * every instruction is class m ("other"). Each pair of consecutive samples (st, se) whose
 * interval starts at or after `from` (the round's start: before it ran instructions not given
 * here) and overlaps [b[0], end of the last) gives one equation: se[k] - se[k-1] = sum over
 * classes of power x time in that class. A light ridge pulls each power towards prior[c] (m + 1
 * values), so a class the ticks barely see keeps its prior. power gets m + 1 values (W). Returns
 * the number of equations used (0: none, power = prior), or -1 when out of memory. */
long zeus__pfo_fit_power(double from, const double *b, const double *d, const size_t *cls, size_t n, size_t m,
                         const double *st, const double *se, size_t ns, const double *prior, double *power);

#endif
