/* The connection guard of the HTTP servers (issue 36): what every server needs so that slow or
 * greedy clients cannot take it, independent of the HTTP library underneath.
 *
 *   - a per-client bound taken when a connection opens, before any header is read: a client is
 *     the uid at the other end (a Unix socket's peer, or a loopback TCP peer whose socket the
 *     kernel names, so that every address of 127.0.0.0/8 is the one user behind it), else the
 *     TCP peer's address (core/peer.c);
 *   - reserved slots: the last ones only for clients that hold no connection, so that a client at
 *     its bound cannot take them either;
 *   - a deadline for a whole request (headers and body), from the connection's opening or its
 *     previous reply: a request trickling in a byte at a time no longer keeps its slot by resetting
 *     the idle timeout; a reaper thread cuts such connections;
 *   - optionally (a server whose one client may need thousands of connections, zeus pfo-server),
 *     a bound on a client's *slow* connections instead of on all of them: a connection is slow
 *     when it has been open slow_after_s without a whole request, the server has read all it sent
 *     (the kernel holds nothing unread for it: a burst the server has not reached yet is not the
 *     client's fault), and it is not root's. Past max_slow_per_client the reaper cuts a client's
 *     newest slow connections, and while it is at the bound its new connections are refused;
 *   - optionally a longer deadline between requests once one was answered (keepalive_timeout_s),
 *     so that a kept-alive connection may idle as long as the server's idle timeout allows;
 *   - counters of refused and timed-out connections, for /metrics.
 * A refused connection gets "503 Service Unavailable" with a JSON error naming the client and the
 * option, and is shut down; the server sees its peer gone and closes it as usual. The server calls
 * zeus__http_guard_admit when a connection starts (libmicrohttpd: MHD_CONNECTION_NOTIFY_STARTED),
 * zeus__http_guard_busy(true) when a whole request has arrived and (false) when its reply is done,
 * and zeus__http_guard_release when the connection closes. Thread-safe. */
#ifndef ZEUS_HTTP_GUARD_H
#define ZEUS_HTTP_GUARD_H

#include <stdbool.h>

typedef struct zeus__http_guard zeus__http_guard;
typedef struct zeus__http_conn zeus__http_conn;

typedef struct zeus__http_guard_opts {
  const char *server;            /* names the server in log lines ("bso-server") */
  unsigned max_connections;      /* connections the server takes at once */
  unsigned max_per_client;       /* one client's; 0: a quarter of max_connections */
  unsigned reserved;             /* the last slots, for clients that hold none; 0: max_connections / 16 */
  double request_timeout_s;      /* a whole request within this; 0: 10 s */
  const char *per_client_option; /* the options that set them, for the messages */
  const char *connections_option;
  const char *timeout_option;
  /* Appended; zero leaves each off, as bso-server has it. */
  bool no_reserve;               /* no reserved slots (the server keeps a reserve of its own) */
  unsigned max_slow_per_client;  /* a client's slow connections (see above); 0: no such bound */
  double slow_after_s;           /* 0: 1 s */
  double keepalive_timeout_s;    /* the deadline after a reply; 0: request_timeout_s */
  const char *slow_option;       /* the option that sets max_slow_per_client, for the messages */
} zeus__http_guard_opts;

/* Starts the guard and its reaper thread. */
int zeus__http_guard_open(zeus__http_guard **out, const zeus__http_guard_opts *o);
/* Stops the reaper; every connection must have been released (stop the server first). */
void zeus__http_guard_close(zeus__http_guard *g);
/* A connection on socket fd opened: its record, or NULL when out of memory (then it is not
 * counted). When a bound refuses it, the 503 has been sent and the socket shut down. */
zeus__http_conn *zeus__http_guard_admit(zeus__http_guard *g, int fd);
/* The connection closed (the record is freed; NULL is ignored). */
void zeus__http_guard_release(zeus__http_guard *g, zeus__http_conn *k);
/* A whole request arrived (busy: the deadline is met) or its reply is done (the next request's
 * deadline starts). NULL is ignored. */
void zeus__http_guard_busy(zeus__http_guard *g, zeus__http_conn *k, bool busy);
/* A word the server keeps with its connection (0 at admission; NULL reads 0 and is ignored).
 * Only the connection's own thread may use it. */
void zeus__http_guard_set_tag(zeus__http_conn *k, int tag);
int zeus__http_guard_tag(const zeus__http_conn *k);
/* Connections open now, and refused and timed out since the start (a slow connection cut past
 * its client's bound counts as refused). */
void zeus__http_guard_stats(zeus__http_guard *g, unsigned *open, unsigned long long *refused,
                            unsigned long long *timed_out);

#endif
