/* src/pfo_server/server_internal.h: counters of the Perseus HTTP server (not API), for tests and
 * a future /metrics route. */
#ifndef ZEUS_PFO_SERVER_INTERNAL_H
#define ZEUS_PFO_SERVER_INTERNAL_H

#include <stddef.h>

#include "zeus/pfo_server.h"

typedef struct zeus__pfo_server_stats {
  unsigned connections;       /* open now */
  unsigned conn_limit;        /* libmicrohttpd's limit */
  unsigned conn_polite;       /* from this many on, new connections are for registration only */
  long parked;                /* schedule requests waiting now */
  long present;               /* presence connections held now */
  unsigned long dropped_polls; /* waiting requests dropped because their client went away */
  unsigned long refused_busy; /* requests refused with 503 for connections or in-flight bytes */
  size_t inflight_bytes;      /* bodies being received or parsed, with their parse estimate */
  size_t jobs;                /* jobs held */
  size_t job_bytes;           /* their estimated memory */
} zeus__pfo_server_stats;

void zeus__pfo_server_stats_get(zeus_pfo_server *s, zeus__pfo_server_stats *out);

#endif
