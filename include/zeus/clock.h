/* zeus/clock.h: the monotonic clock every measurement uses. */
#ifndef ZEUS_CLOCK_H
#define ZEUS_CLOCK_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* Seconds on CLOCK_MONOTONIC (arbitrary origin, never goes back). Thread-safe. */
ZEUS_EXTERN double zeus_monotonic_s(void);
/* Nanoseconds on CLOCK_MONOTONIC. */
ZEUS_EXTERN uint64_t zeus_monotonic_ns(void);
/* Seconds since the Unix epoch (CLOCK_REALTIME), for timestamps in files. */
ZEUS_EXTERN double zeus_wall_s(void);

ZEUS_END_DECLS
#endif
