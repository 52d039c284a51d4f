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
 *   - counters of refused and timed-out connections, for /metrics;
 *   - for zeus daemon: several listeners (a Unix socket and TCP) counted apart for the total and
 *     the reserve, which may be kept for root, while a client (a uid) counts once across them; a
 *     per-client bound on a second resource (power streams: zeus__http_guard_claim); the client's
 *     uid for the server's own use;
 *   - for zeus exporter: instead of per-client bounds, a new connection at the limit takes the
 *     slot of the oldest connection without a request in progress (take_oldest_idle).
 * A refused connection gets "503 Service Unavailable" with a JSON error naming the client and the
 * option, and is shut down; the server sees its peer gone and closes it as usual. The server calls
 * zeus__http_guard_admit when a connection starts (libmicrohttpd: MHD_CONNECTION_NOTIFY_STARTED),
 * zeus__http_guard_busy(true) when a whole request has arrived and (false) when its reply is done,
 * and zeus__http_guard_release when the connection closes. Thread-safe. */
#ifndef ZEUS_HTTP_GUARD_H
#define ZEUS_HTTP_GUARD_H

#include <stdbool.h>
#include <sys/types.h>

/* Listeners one guard counts apart (zeus__http_guard_admit_on). */
#define ZEUS__HTTP_GUARD_LISTENERS 4

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
  /* Appended for zeus daemon and zeus exporter; zero leaves each off, as bso-server has it. */
  bool reserve_for_root;         /* the reserved slots are root's (uid 0), not those of clients that
                                    hold none; max_connections and the reserve then count per
                                    listener (the daemon's Unix socket and TCP each take
                                    max_connections), while the per-client bound counts a client's
                                    connections on every listener together */
  unsigned reserve_listeners;    /* with reserve_for_root: bit i keeps the reserve on listener i;
                                    0: on every listener */
  bool identify_all;             /* ask who every connection is at admission, so that
                                    zeus__http_guard_uid and _is_root answer for each */
  bool take_oldest_idle;         /* at max_connections a new connection takes the slot of the oldest
                                    one without a request in progress (cut at once, counted as
                                    refused); only when every one is answering is the new one
                                    refused (503 "every connection is busy; try again shortly") */
  const char *error_field;       /* the JSON key of a refusal's message; NULL: "detail" */
  bool plain_errors;             /* a refusal's body is its message and a newline, text/plain */
  unsigned max_claims_per_client; /* zeus__http_guard_claim's bound; 0: none */
  const char *claims_option;     /* the option that sets it, for the log */
} zeus__http_guard_opts;

/* Starts the guard and its reaper thread. */
int zeus__http_guard_open(zeus__http_guard **out, const zeus__http_guard_opts *o);
/* Stops the reaper; every connection must have been released (stop the server first). */
void zeus__http_guard_close(zeus__http_guard *g);
/* A connection on socket fd opened: its record, or NULL when out of memory (then it is not
 * counted). When a bound refuses it, the 503 has been sent and the socket shut down. */
zeus__http_conn *zeus__http_guard_admit(zeus__http_guard *g, int fd);
/* The same for a connection that came through the server's listener number `listener`
 * (0 .. ZEUS__HTTP_GUARD_LISTENERS - 1; a larger number counts as the last); admit is listener 0. */
zeus__http_conn *zeus__http_guard_admit_on(zeus__http_guard *g, int fd, unsigned listener);
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

/* A second resource bound per client (the daemon's power streams): claims one for the connection's
 * client when it holds fewer than max_claims_per_client on its other connections (root: always;
 * a bound of 0: always). The claim ends with the reply (zeus__http_guard_busy false), on
 * zeus__http_guard_unclaim, or when the connection closes. *held (may be NULL): the client's other
 * claims. The client must be known at admission (any bound that counts per client, identify_all,
 * or max_claims_per_client itself makes it so). NULL k: true. */
bool zeus__http_guard_claim(zeus__http_guard *g, zeus__http_conn *k, unsigned *held);
void zeus__http_guard_unclaim(zeus__http_guard *g, zeus__http_conn *k);
/* Who is behind a connection, as the guard knows it at admission (identify_all, or any per-client
 * bound): the uid (a Unix peer's, or a loopback TCP peer's that the kernel told; false when the
 * client is an address or not known); whether it is root; and the client in words ("uid 1000",
 * "address 10.0.0.7"; "an unknown peer" when not asked). Any thread; never changed after
 * admission when the client was asked then. */
bool zeus__http_guard_uid(const zeus__http_conn *k, uid_t *uid);
bool zeus__http_guard_is_root(const zeus__http_conn *k);
const char *zeus__http_guard_who(const zeus__http_conn *k);

#endif
