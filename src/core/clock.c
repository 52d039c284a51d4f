/* Clocks, and timed waits on the monotonic clock. */
#include <math.h>
#include <pthread.h>
#include <time.h>

#include "core/core.h"

uint64_t zeus_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double zeus_monotonic_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double zeus_wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int zeus__cond_init(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (!rc) rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  if (!rc) rc = pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
  return rc ? zeus__error(ZEUS_EINTERNAL, "initialising a condition variable failed (error %d)", rc) : ZEUS_OK;
}

struct timespec zeus__deadline_in(double seconds) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (!(seconds > 0)) return ts;
  if (seconds > 1e9) seconds = 1e9; /* about 31 years: "no limit" without overflowing time_t */
  double whole = floor(seconds);
  long ns = ts.tv_nsec + (long)((seconds - whole) * 1e9);
  ts.tv_sec += (time_t)whole + ns / 1000000000L;
  ts.tv_nsec = ns % 1000000000L;
  return ts;
}

int zeus__cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, const struct timespec *deadline) {
  return pthread_cond_timedwait(cv, mu, deadline);
}
