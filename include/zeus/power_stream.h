/* zeus/power_stream.h: the power of many nodes, followed through their daemons' power streams.
 *
 * A power stream client follows `GET /gpu/stream_power` and `GET /cpu/stream_power` (server-sent
 * events, one per device whose reading changed: zeusd's format, docs/daemon.md) of several zeus
 * daemons or original zeusd at once, each reached by its Unix socket or TCP HOST:PORT with an
 * optional bearer token. One background thread serves every connection (non-blocking sockets in
 * one poll() loop), so a server that is slow, stalls or sends garbage never holds up the others.
 * It is the engine of zeusc's PowerStreamingClient (the original's zeus.monitor.power_streaming)
 * and of `zeus monitor power --from`.
 *
 *   zeus_power_stream_server s[2] = {{.address = "unix:/run/zeusd/zeusd.sock"},
 *                                    {.address = "tcp:node2:4938", .token = tok}};
 *   zeus_power_stream_opts o;
 *   zeus_power_stream_opts_init(&o);
 *   o.servers = s; o.num_servers = 2; o.queue_max = 4096;
 *   zeus_power_stream *ps;
 *   if (zeus_power_stream_open(&ps, &o)) { fprintf(stderr, "%s\n", zeus_errmsg()); ... }
 *   zeus_power_stream_event ev;
 *   while (zeus_power_stream_next(ps, 1.0, &ev) == ZEUS_OK) ...   // every event, in arrival order
 *   zeus_power_stream_reading *r; size_t n;
 *   zeus_power_stream_snapshot(ps, &r, &n);                      // the latest per (node, device)
 *   zeus_free(r);
 *   zeus_power_stream_close(ps);
 *
 * Nodes are named as the original names them: a Unix socket by its path, TCP by "HOST:PORT"
 * (zeus_power_stream_endpoint()).
 *
 * Time: each event's timestamp_s is the daemon's timestamp_ms / 1000 plus the estimated offset of
 * that daemon's clock from ours (seconds since the Unix epoch on this machine's clock). The offset
 * is measured with `GET /time` at each connection (the midpoint of the round trip minus the
 * daemon's time, as the original estimates it); a daemon without /time gets offset 0.
 *
 * Reconnection: a connection that fails, closes, answers other than 200, sends an event longer
 * than max_line_bytes or one that is not the stream's JSON, sends nothing at all (no event and no
 * keepalive comment) for stall_timeout_s, or does not answer within connect_timeout_s, is closed
 * and made again after a delay that starts at reconnect_delay_s and doubles at each failure in a
 * row up to max_reconnect_delay_s; a valid event resets it. 401 and 403 (a token refused) and 404
 * (the stream or its API group is not served) are final for that stream: it is not retried, and
 * its status says why. The latest readings of a server that went away stay in the snapshot with
 * their old timestamps.
 *
 * Memory is bounded: per connection the answer's headers (16 KiB) and one event
 * (max_line_bytes); per server and kind at most max_devices latest readings; the event queue
 * holds at most queue_max events (the oldest are dropped when it is full, and counted).
 *
 * Thread safety: every function may be called from any thread while the client runs, except
 * zeus_power_stream_close(), which must not race with other calls on the same client.
 */
#ifndef ZEUS_POWER_STREAM_H
#define ZEUS_POWER_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

typedef struct zeus_power_stream zeus_power_stream;

/* One daemon to follow. Every string is copied at open. */
typedef struct zeus_power_stream_server {
  /* "unix:PATH", "tcp:HOST:PORT", "/PATH" (a Unix socket) or "HOST:PORT" (TCP; [v6]:PORT too). */
  const char *address;
  /* Bearer token sent with every request, or NULL for none. Never logged nor put in messages. */
  const char *token;
  /* The devices to stream, comma-separated ids as zeusd's gpu_ids / cpu_ids ("0,2"). NULL: every
   * device of that kind (no query parameter); "": none (that stream is not opened). */
  const char *gpu_ids;
  const char *cpu_ids;
} zeus_power_stream_server;

typedef struct zeus_power_stream_opts {
  const zeus_power_stream_server *servers; /* borrowed for the call */
  size_t num_servers;                      /* 1 to 1024; endpoints must differ */
  double reconnect_delay_s;     /* first delay after a failure; (0, 3600], default 1 */
  double max_reconnect_delay_s; /* cap of the doubling delay; >= reconnect_delay_s, default 30 */
  double stall_timeout_s;       /* no byte for this long: reconnect; (0, 3600], default 10 */
  double connect_timeout_s;     /* connecting and the answer's headers; (0, 3600], default 5 */
  size_t max_line_bytes;        /* the longest event (its lines together); [64, 1 MiB], default 4096 */
  size_t max_devices;           /* latest readings kept per server and kind; [1, 4096], default 256 */
  size_t queue_max;             /* events kept for zeus_power_stream_next(); 0: no queue */
} zeus_power_stream_opts;

/* Fills the defaults above (queue_max 0). */
ZEUS_EXTERN void zeus_power_stream_opts_init(zeus_power_stream_opts *opts /* out */);

enum { ZEUS_POWER_STREAM_GPU = 0, ZEUS_POWER_STREAM_CPU = 1 };

/* One event, and one latest reading in a snapshot. */
typedef struct zeus_power_stream_event {
  unsigned server;    /* index in opts.servers */
  int kind;           /* ZEUS_POWER_STREAM_GPU or ZEUS_POWER_STREAM_CPU */
  unsigned device;    /* gpu_id, or cpu_id (the RAPL package number) */
  double timestamp_s; /* the daemon's time of the reading, aligned to this machine's Unix time */
  double power_w;     /* the GPU's power, or the CPU package's */
  double dram_w;      /* the package's DRAM power; NaN for a GPU or a package without DRAM */
  uint64_t seq;       /* 1, 2, ...: order of arrival over the whole client */
} zeus_power_stream_event;
typedef zeus_power_stream_event zeus_power_stream_reading;

/* A server's state (both of its streams together). */
typedef struct zeus_power_stream_status {
  bool connected;      /* every stream that runs has a connection answering 200 */
  bool gave_up;        /* a stream got 401, 403 or 404 and is not retried */
  uint64_t connects;   /* connections answered 200, over the client's life */
  uint64_t failures;   /* connections lost, refused, stalled or closed for garbage */
  uint64_t events;     /* valid events received */
  uint64_t bad_events; /* events or lines rejected (the connection was then closed) */
  double clock_offset_s; /* the last offset measured (0 before any) */
  char last_error[256];  /* the last failure in words, "" for none; never holds the token */
} zeus_power_stream_status;

/* Starts the background thread and connects to every server (without waiting for any: a server
 * that is down now is retried with backoff). ZEUS_EINVAL naming the server for a malformed
 * address or ids, duplicate endpoints, an option out of range; ZEUS_ENOMEM; ZEUS_EINTERNAL when no
 * thread can be started. */
ZEUS_EXTERN int zeus_power_stream_open(zeus_power_stream **out /* out */, const zeus_power_stream_opts *opts);

/* Stops the thread, closes every connection, frees the client. NULL: nothing. Returns within
 * about 0.1 s whatever the servers do. */
ZEUS_EXTERN void zeus_power_stream_close(zeus_power_stream *ps);

/* The node name of server `i`: its socket path or "HOST:PORT" (borrowed; lives as long as the
 * client), or NULL when i is out of range. */
ZEUS_EXTERN const char *zeus_power_stream_endpoint(const zeus_power_stream *ps, size_t i);
ZEUS_EXTERN size_t zeus_power_stream_num_servers(const zeus_power_stream *ps);

/* The latest reading of every (server, kind, device) seen, ordered by server, kind, device: an
 * array of *n (zeus_free() it; NULL when *n is 0). ZEUS_ENOMEM. */
ZEUS_EXTERN int zeus_power_stream_snapshot(zeus_power_stream *ps, zeus_power_stream_reading **readings /* out */,
                                           size_t *n /* out */);

/* Takes the oldest queued event, waiting up to timeout_s (0: no wait) for one. ZEUS_ETIMEDOUT
 * when none came in time, ZEUS_ENOTSUP when the client has no queue (queue_max 0). */
ZEUS_EXTERN int zeus_power_stream_next(zeus_power_stream *ps, double timeout_s,
                                       zeus_power_stream_event *ev /* out */);

/* Waits until an event newer than `after_seq` arrived (or timeout_s passed), then gives the seq of
 * the newest event. ZEUS_ETIMEDOUT when none came in time (*seq still set). */
ZEUS_EXTERN int zeus_power_stream_wait(zeus_power_stream *ps, uint64_t after_seq, double timeout_s,
                                       uint64_t *seq /* out */);

/* Events dropped because the queue was full. */
ZEUS_EXTERN uint64_t zeus_power_stream_dropped(zeus_power_stream *ps);

/* Server i's state. ZEUS_EINVAL when i is out of range. */
ZEUS_EXTERN int zeus_power_stream_server_status(zeus_power_stream *ps, size_t i,
                                                zeus_power_stream_status *st /* out */);

/* Parses one SSE event's text (its lines, without the blank line that ends it) as the stream of
 * `kind` sends it: a comment (":" line) or an event without data gives 0; a valid data line fills
 * *ev (server 0, seq 0, timestamp_s the daemon's own) and gives 1; anything else gives
 * ZEUS_EPARSE with a message saying what was wrong. Exposed for tests and tools. */
ZEUS_EXTERN int zeus_power_stream_parse_event(const char *text, size_t len, int kind,
                                              zeus_power_stream_event *ev /* out */);

ZEUS_END_DECLS

#endif
