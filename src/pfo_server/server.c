/* The Perseus HTTP server: a thin libmicrohttpd layer over the job table.
 *
 * An acceptor thread takes connections off the listening socket and hands them to the HTTP
 * threads: each runs an epoll loop of ours over a libmicrohttpd daemon in its external mode (see
 * loop_main for why not libmicrohttpd's own epoll thread, zeus_pfo_server_open for why not its
 * poll thread). Schedule requests that must wait are suspended (MHD_suspend_connection), not
 * parked on a thread; the job table completes them through on_complete, which stores the reply
 * and resumes the connection (resume()); the access handler then sends the stored reply. Per-request state is freed in
 * one place, the MHD completion callback, whatever happened.
 *
 * Everything a client can make the server hold is bounded here, for every route alike:
 * descriptors (soft limit raised to the hard one; connections kept below it, the last few kept
 * for registration, and a polite 503 before that), idle connections (idle_timeout_s), parked
 * long polls (a keeper thread polls their sockets and drops those whose client went away within
 * a second), request bodies (max_body_bytes each; received and parsed bodies together, with an
 * estimate of their JSON's size, under max_inflight_bytes), and requests whose framing is
 * ambiguous (two Content-Length headers, Transfer-Encoding with Content-Length) are refused and
 * their connection closed. Routes, authentication and these checks all happen once the headers
 * are in, before any body is read. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/guard.h"
#include "metrics/metrics.h"
#include "pfo_server/job_table.h"
#include "pfo_server/server_internal.h"
#include "zeus/format.h"
#include "zeus/pfo_server.h"
#include "zeus/version.h"

#define PFO_DEFAULT_BODY_MAX ((size_t)16 << 20)
#define PFO_DEFAULT_INFLIGHT_MAX ((size_t)256 << 20)
/* An 8,192-rank job holds a schedule connection per rank, plus its presences and registrations:
 * the default serves it (the descriptor limit permitting). */
#define PFO_DEFAULT_MAX_CONNECTIONS 32768
/* libmicrohttpd's memory per connection (headers and the read buffer; bodies are handed over as
 * they arrive, so a result body need not fit): 8 KiB keeps 8,192 connections small. */
#define PFO_CONNECTION_MEMORY ((size_t)8 << 10)
/* Before issue 28 (bench_pfo_server's baseline column, ZEUS__PFO_BENCH_BASELINE=1). */
#define PFO_BASELINE_CONNECTION_MEMORY ((size_t)16 << 10)
#define PFO_DEFAULT_IDLE_TIMEOUT_S 60.0
/* Slow requests (issue 36): a whole request within this of the connection's opening (after a
 * reply: within the idle timeout and this); a client's connections without a whole request after
 * PFO_DEFAULT_SLOW_AFTER_S, past PFO_DEFAULT_MAX_SLOW_PER_CLIENT, are cut. A rank's client sends
 * its request as soon as it connects, so even an 8,192-rank job on one uid holds none: a
 * connection whose request the server has not read yet (a burst) does not count. */
#define PFO_DEFAULT_REQUEST_TIMEOUT_S 10.0
#define PFO_DEFAULT_MAX_SLOW_PER_CLIENT 64
#define PFO_DEFAULT_SLOW_AFTER_S 1.0
/* A JSON body may hold at most this many values (counted before parsing): a ProfilingResult at
 * its bound, with a list per iteration, fits; the parse of anything larger is never started. */
#define PFO_MAX_JSON_VALUES (2 * (size_t)ZEUS_PFO_MAX_RESULT_VALUES + 65536)
/* Bodies up to this size are not scanned for their JSON values (see handle()). */
#define PFO_SCAN_FROM ((size_t)64 << 10)
/* What the parser holds per JSON value, at most (an empty list with its slots). */
#define PFO_BYTES_PER_JSON_VALUE 112
/* How often the keeper looks at parked connections and reaps idle jobs. */
#define PFO_KEEPER_PERIOD_S 0.25
#define PFO_RANK_TOKEN_HEADER "X-Zeus-Rank-Token"

typedef struct req req;

/* Routes as /metrics labels them (templates, never the client's URL). */
enum { R_NONE, R_INFO, R_JOB, R_RANK, R_SCHED, R_RESULT, R_METRICS, R_LEAVE, R_PERSEUS, R_PRESENCE, NROUTES };
static const char *const route_label[NROUTES] = {
    "other", "/info", "/register_job", "/register_rank/{job_id}", "/schedule/{job_id}", "/result/{job_id}",
    "/metrics", "/leave/{job_id}", "/perseus/{job_id}", "/presence/{job_id}"};
#define NSTATUS 600 /* request counters by HTTP status 0..599 */
/* Latency histograms by route and status class (1xx-5xx), so that fast errors do not hide slow
 * answers. */
#define NCLASSES 5
static const char *const class_label[NCLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const double latency_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                        0.25,   0.5,   1,      2.5,   5,    10,   30,    60};

/* A connection the acceptor took, waiting for its loop to hand it to libmicrohttpd. */
typedef struct {
  int fd;
  socklen_t al;
  struct sockaddr_storage a;
} pending_conn;

/* One event loop (see loop_main): a libmicrohttpd daemon in its external epoll mode, driven by a
 * thread of ours, and the connections the acceptor queued for it. */
typedef struct {
  zeus_pfo_server *srv;
  struct MHD_Daemon *d;
  int epfd; /* libmicrohttpd's epoll descriptor (MHD_DAEMON_INFO_EPOLL_FD) */
  int wake; /* eventfd: connections queued, or stop */
  pthread_t thread;
  bool started;
  atomic_bool kicked; /* the eventfd was written and the loop has not run libmicrohttpd since */
  pthread_mutex_t mu; /* guards what follows */
  bool stop;
  pending_conn *queue;
  size_t nqueue, capqueue;
} ev_loop;

/* Which event loop serves (issue 36): ours (default); libmicrohttpd's own poll thread, as before
 * (bench_pfo_server's "before" columns and baseline, ZEUS__PFO_BENCH_LOOP=poll); libmicrohttpd's
 * own epoll thread, which loses requests (ZEUS__PFO_BENCH_LOOP=mhd-epoll, so that the test that
 * proves the loss can be run against it). */
enum { LOOP_OURS, LOOP_MHD_POLL, LOOP_MHD_EPOLL };

struct zeus_pfo_server {
  struct MHD_Daemon *d; /* LOOP_MHD_*: libmicrohttpd's daemon and its threads */
  ev_loop *loops;       /* LOOP_OURS: one daemon per HTTP thread */
  unsigned nloops;
  zeus__job_table *jobs;
  int port;
  char *token;
  size_t body_max;
  size_t inflight_max;
  atomic_size_t inflight; /* bytes charged by requests in progress */
  unsigned conn_limit;    /* connections at once (the acceptor's limit) */
  unsigned conn_polite;   /* from this many on, new connections are only for registration */
  bool conn_by_fds;       /* conn_limit is the descriptor limit's, below max_connections */
  atomic_uint conns;      /* handed to libmicrohttpd by the acceptor and not closed yet */
  /* Slow requests: deadlines and the per-client bound on slow connections (src/http/guard.c);
   * each connection's record is its socket context, tagged 1 when it came past conn_polite. */
  zeus__http_guard *guard;
  /* The acceptor thread (see acceptor_main) and its listening socket. */
  int listen_fd;
  int wake[2]; /* a byte in wake[1] stops the acceptor */
  pthread_t acceptor;
  bool acceptor_started;
  double idle_timeout_s;
  char *info_json;
  atomic_long parked;  /* schedule requests waiting */
  atomic_long present; /* presence connections held (GET /presence) */
  /* The keeper thread: reaps idle jobs, drops parked polls whose client went away. */
  pthread_t keeper;
  bool keeper_started, stopping;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  double last_reap;
  /* Parked requests (a list under park_mu, which is taken before the job table's lock). */
  pthread_mutex_t park_mu;
  req *parked_head;
  atomic_ulong dropped_polls;
  atomic_ulong refused_busy;
  /* /metrics: answered requests by route and status, and their latency by route. */
  atomic_ulong requests[NROUTES][NSTATUS];
  zeus__metrics_hist latency[NROUTES][NCLASSES];
};

struct req {
  zeus_pfo_server *srv;
  struct MHD_Connection *conn;
  ev_loop *loop; /* the loop that serves the connection (NULL: libmicrohttpd's threads) */
  zeus__buf body;
  size_t charged;     /* bytes of srv->inflight this request holds */
  int route;
  const char *job_id; /* into the URL (MHD keeps it for the request's life) */
  bool parked, has_reply, drop, listed, refused;
  int fd;             /* the connection's socket, while listed */
  req *prev, *next;   /* the parked list */
  zeus__reply reply;
  int status; /* of the reply queued (0: none yet) */
  double t0;
  const char *rest;  /* /perseus/{job_id}<rest>: what follows the job id */
  char idbuf[512];   /* the job id of a /perseus route (decoded) */
};

/* ---- replies ---- */

static enum MHD_Result send_reply(req *q, struct MHD_Connection *c, int status, char *body, size_t len,
                                  const char *allow, bool close_after, const char *content_type) {
  struct MHD_Response *resp;
  q->status = status;
  if (body) {
    resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
  } else {
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  }
  if (!resp) { free(body); return MHD_NO; }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type ? content_type : "application/json");
  if (allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
  if (status == 401) MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  if (status == 503) MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  if (close_after) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result send_error(req *q, struct MHD_Connection *c, int status, const char *msg,
                                  const char *allow, bool close_after) {
  zeus__reply rep = {0};
  zeus__reply_error(&rep, status, msg);
  return send_reply(q, c, status, rep.body, rep.len, allow, close_after, NULL);
}

/* ---- the parked list ---- */

static void list_add(zeus_pfo_server *s, req *q) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(q->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  pthread_mutex_lock(&s->park_mu);
  q->fd = ci ? ci->connect_fd : -1;
  q->prev = NULL;
  q->next = s->parked_head;
  if (q->next) q->next->prev = q;
  s->parked_head = q;
  q->listed = true;
  pthread_mutex_unlock(&s->park_mu);
}

static void list_remove(zeus_pfo_server *s, req *q) {
  pthread_mutex_lock(&s->park_mu);
  if (q->listed) {
    if (q->prev) q->prev->next = q->next;
    else s->parked_head = q->next;
    if (q->next) q->next->prev = q->prev;
    q->listed = false;
  }
  pthread_mutex_unlock(&s->park_mu);
}

/* ---- job table callbacks ---- */

/* The gauge a parked request counts in. */
static atomic_long *park_gauge(req *q) { return q->route == R_PRESENCE ? &q->srv->present : &q->srv->parked; }

static void on_park(void *w) {
  req *q = w;
  q->parked = true;
  atomic_fetch_add(park_gauge(q), 1);
  MHD_suspend_connection(q->conn);
}

static void loop_kick(ev_loop *l);

/* Resumes q's connection from any thread. In external mode libmicrohttpd has no inter-thread
 * channel (it drops MHD_USE_ITC), so the loop that serves the connection is woken here. */
static void resume(req *q) {
  /* Read before the resume: from then on q's own loop may send the reply and free q (a
   * use-after-free that ASan caught under load in test_pfo_server's long-poll burst). */
  ev_loop *loop = q->loop;
  MHD_resume_connection(q->conn);
  if (loop) loop_kick(loop);
}

static void on_complete(void *w, zeus__reply *reply) {
  req *q = w;
  q->reply = *reply;
  q->has_reply = true;
  resume(q);
}

/* ---- /metrics ---- */

/* The server's state in the Prometheus text format (src/metrics). */
static int metrics_text(zeus_pfo_server *s, char **text, size_t *len) {
  zeus__job_table_stats_t st;
  zeus__job_table_stats(s->jobs, &st);
  zeus__metrics_writer w;
  zeus__metrics_writer_init(&w);
  zeus__metrics_family(&w, "zeus_pfo_jobs", "gauge", "Jobs registered now.");
  zeus__metrics_sample(&w, "zeus_pfo_jobs", NULL, NULL, 0, (double)st.jobs);
  zeus__metrics_family(&w, "zeus_pfo_failed_jobs", "gauge",
                       "Registered jobs that failed: their scheduler failed or a rank left on an error.");
  zeus__metrics_sample(&w, "zeus_pfo_failed_jobs", NULL, NULL, 0, (double)st.failed_jobs);
  zeus__metrics_family(&w, "zeus_pfo_ended_jobs", "gauge",
                       "Registered jobs whose training ended: a rank closed its optimizer.");
  zeus__metrics_sample(&w, "zeus_pfo_ended_jobs", NULL, NULL, 0, (double)st.ended_jobs);
  zeus__metrics_family(&w, "zeus_pfo_ranks", "gauge", "Ranks registered now, over every job.");
  zeus__metrics_sample(&w, "zeus_pfo_ranks", NULL, NULL, 0, (double)st.ranks);
  zeus__metrics_family(&w, "zeus_pfo_rounds_total", "counter", "Rounds completed (every rank's result in), over every job.");
  zeus__metrics_sample(&w, "zeus_pfo_rounds_total", NULL, NULL, 0, (double)st.rounds_done);
  zeus__metrics_family(&w, "zeus_pfo_parked_requests", "gauge", "Schedule requests waiting for the rest of their round.");
  zeus__metrics_sample(&w, "zeus_pfo_parked_requests", NULL, NULL, 0, (double)atomic_load(&s->parked));
  zeus__metrics_family(&w, "zeus_pfo_present_ranks", "gauge",
                       "Ranks holding a presence connection (GET /presence): its close before the rank leaves ends "
                       "the job for the others at once.");
  zeus__metrics_sample(&w, "zeus_pfo_present_ranks", NULL, NULL, 0, (double)atomic_load(&s->present));
  unsigned long long refused = 0, timed_out = 0;
  zeus__http_guard_stats(s->guard, NULL, &refused, &timed_out);
  zeus__metrics_family(&w, "zeus_pfo_connections_refused_total", "counter",
                       "Connections refused or cut before their request was read: a client's connections without a "
                       "whole request past --max-slow-per-client.");
  zeus__metrics_sample(&w, "zeus_pfo_connections_refused_total", NULL, NULL, 0, (double)refused);
  zeus__metrics_family(&w, "zeus_pfo_connections_timed_out_total", "counter",
                       "Connections closed because no whole request arrived within --request-timeout of their "
                       "opening (after a reply: --idle-timeout and --request-timeout).");
  zeus__metrics_sample(&w, "zeus_pfo_connections_timed_out_total", NULL, NULL, 0, (double)timed_out);
  zeus__metrics_family(&w, "zeus_pfo_dump_failures_total", "counter",
                       "Dump writes that failed (the rounds went on; GET /info has the last error).");
  zeus__metrics_sample(&w, "zeus_pfo_dump_failures_total", NULL, NULL, 0, (double)st.dump_failures);
  zeus__metrics_family(&w, "zeus_pfo_requests_total", "counter", "Requests answered, by route and HTTP status.");
  char code[8];
  for (int r = 0; r < NROUTES; r++) {
    for (int k = 0; k < NSTATUS; k++) {
      unsigned long n = atomic_load_explicit(&s->requests[r][k], memory_order_relaxed);
      if (!n) continue;
      snprintf(code, sizeof code, "%d", k);
      zeus__metrics_label l[] = {{"route", route_label[r]}, {"code", code}};
      zeus__metrics_sample(&w, "zeus_pfo_requests_total", NULL, l, 2, (double)n);
    }
  }
  zeus__metrics_family(&w, "zeus_pfo_request_duration_seconds", "histogram",
                       "Time from a request's arrival to its answer, by route and status class (long polls "
                       "included), in seconds.");
  for (int r = 0; r < NROUTES; r++) {
    for (int k = 0; k < NCLASSES; k++) {
      const zeus__metrics_hist *h = &s->latency[r][k];
      bool any = false;
      for (size_t b = 0; b <= h->nbounds && !any; b++) any = atomic_load_explicit(&h->counts[b], memory_order_relaxed);
      if (!any) continue; /* only the series that happened */
      zeus__metrics_label l[] = {{"route", route_label[r]}, {"status_class", class_label[k]}};
      zeus__metrics_hist_write(&w, "zeus_pfo_request_duration_seconds", l, 2, h);
    }
  }
  if (w.rc) {
    zeus__metrics_writer_free(&w);
    return zeus__oom("writing the metrics");
  }
  *text = w.buf.data;
  *len = w.buf.len;
  return ZEUS_OK;
}

static enum MHD_Result send_metrics(req *q, struct MHD_Connection *c, char *text, size_t len) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ZEUS__METRICS_CONTENT_TYPE);
  q->status = 200;
  enum MHD_Result rc = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  return rc;
}

/* ---- checks before the body ---- */

static bool authorised(zeus_pfo_server *s, struct MHD_Connection *c) {
  if (!s->token) return true;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
  h += 7;
  while (*h == ' ') h++;
  return zeus__secret_equal(h, s->token);
}

/* Matches "/<prefix>/<id>[/<rest>]": copies the id (non-empty) into buf and returns the rest ("" or
 * "/..."), or NULL. */
static const char *route_id_rest(const char *url, const char *prefix, char *buf, size_t len) {
  size_t n = strlen(prefix);
  if (strncmp(url, prefix, n) != 0 || url[n] != '/') return NULL;
  const char *id = url + n + 1, *slash = strchr(id, '/');
  size_t idlen = slash ? (size_t)(slash - id) : strlen(id);
  if (idlen == 0 || idlen >= len) return NULL;
  memcpy(buf, id, idlen);
  buf[idlen] = '\0';
  return id + idlen;
}

/* Matches "/<prefix>/<id>" and returns the id (non-empty, no further '/'), or NULL. */
static const char *route_id(const char *url, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(url, prefix, n) != 0 || url[n] != '/') return NULL;
  const char *id = url + n + 1;
  if (!*id || strchr(id, '/')) return NULL;
  return id;
}

typedef struct header_count {
  unsigned content_length, transfer_encoding, authorization, rank_token;
} header_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  (void)value;
  header_count *h = cls;
  if (!key) return MHD_YES;
  if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) h->content_length++;
  else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) h->transfer_encoding++;
  else if (!strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION)) h->authorization++;
  else if (!strcasecmp(key, PFO_RANK_TOKEN_HEADER)) h->rank_token++;
  return MHD_YES;
}

/* A request whose length or credentials two headers could disagree on is refused: a proxy in
 * front of us might read it the other way (request smuggling). NULL when the framing is clear. */
static const char *ambiguous_framing(struct MHD_Connection *c) {
  header_count h = {0};
  MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &h);
  if (h.content_length > 1) return "the request has more than one Content-Length header";
  if (h.transfer_encoding && h.content_length)
    return "the request has both Transfer-Encoding and Content-Length headers";
  if (h.transfer_encoding > 1) return "the request has more than one Transfer-Encoding header";
  if (h.transfer_encoding) {
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (!te || strcasecmp(te, "chunked") != 0) return "Transfer-Encoding other than 'chunked' is not supported";
  }
  if (h.authorization > 1) return "the request has more than one Authorization header";
  if (h.rank_token > 1) return "the request has more than one " PFO_RANK_TOKEN_HEADER " header";
  return NULL;
}

/* Whether the connection was accepted past the polite limit (see on_connection). */
static bool connection_over(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci && zeus__http_guard_tag(ci->socket_context) != 0;
}

/* A whole request arrived (busy) or its reply is done: the guard's deadlines. */
static void guard_busy(zeus_pfo_server *s, struct MHD_Connection *c, bool busy) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  if (ci && ci->socket_context) zeus__http_guard_busy(s->guard, ci->socket_context, busy);
}

/* Takes `n` bytes of the in-flight budget for request q, or returns false (nothing taken). */
static bool inflight_take(zeus_pfo_server *s, req *q, size_t n) {
  size_t cur = atomic_load(&s->inflight);
  do {
    if (cur + n > s->inflight_max || cur + n < cur) return false;
  } while (!atomic_compare_exchange_weak(&s->inflight, &cur, cur + n));
  q->charged += n;
  return true;
}

/* How many JSON values the body holds, counting separators and openings outside strings (a
 * bound for what parsing it would allocate), stopping once past `max`. */
static size_t json_values(const char *p, size_t n, size_t max) {
  size_t v = 1;
  bool in_str = false;
  for (size_t i = 0; i < n && v <= max; i++) {
    char ch = p[i];
    if (in_str) {
      if (ch == '\\') i++;
      else if (ch == '"') in_str = false;
    } else if (ch == '"') {
      in_str = true;
    } else if (ch == ',' || ch == '[' || ch == '{' || ch == ':') {
      v++;
    }
  }
  return v;
}

/* ---- the access handler ---- */

/* The first call of a request: headers are in, nothing of the body is read. Decides the route and
 * refuses what can be refused before the body arrives. Returns MHD_YES with *refused false to go
 * on reading the body. */
static enum MHD_Result first_call(zeus_pfo_server *s, req *q, struct MHD_Connection *c, const char *url,
                                  const char *method) {
  const char *why = ambiguous_framing(c);
  if (why) {
    q->refused = true;
    char msg[200];
    snprintf(msg, sizeof msg, "%s; refusing it and closing the connection", why);
    return send_error(q, c, 400, msg, NULL, true);
  }
  const char *allow = NULL, *id = NULL;
  if (strcmp(url, "/info") == 0) q->route = R_INFO, allow = "GET";
  else if (strcmp(url, "/metrics") == 0) q->route = R_METRICS, allow = "GET";
  else if (strcmp(url, "/register_job") == 0) q->route = R_JOB, allow = "POST";
  else if ((id = route_id(url, "/register_rank"))) q->route = R_RANK, allow = "POST";
  else if ((id = route_id(url, "/schedule"))) q->route = R_SCHED, allow = "GET";
  else if ((id = route_id(url, "/result"))) q->route = R_RESULT, allow = "POST";
  else if ((id = route_id(url, "/leave"))) q->route = R_LEAVE, allow = "POST";
  else if ((id = route_id(url, "/presence"))) q->route = R_PRESENCE, allow = "GET";
  else if ((q->rest = route_id_rest(url, "/perseus", q->idbuf, sizeof q->idbuf)))
    q->route = R_PERSEUS, id = q->idbuf, allow = "GET, POST";
  q->job_id = id;
  /* A presence is one per registered rank (a newer one replaces it): part of joining a job. */
  bool registration = q->route == R_JOB || q->route == R_RANK || q->route == R_LEAVE || q->route == R_PRESENCE;
  if (connection_over(c) && !registration) {
    /* Past the polite limit: the last connections are kept for registering and leaving, so that
     * whoever holds many connections cannot stop new jobs from starting. */
    q->refused = true;
    atomic_fetch_add(&s->refused_busy, 1);
    char msg[320];
    snprintf(msg, sizeof msg, "the server has %u connections open, near its limit of %u (the rest are kept for "
             "registration); try again shortly, or raise the limit: %s", atomic_load(&s->conns), s->conn_limit,
             s->conn_by_fds ? "the server's descriptor limit (ulimit -n) sets it"
                            : "--max-connections (ZEUS_PFO_MAX_CONNECTIONS) above the job's ranks times 2");
    return send_error(q, c, 503, msg, NULL, true);
  }
  if (q->route == R_NONE) {
    q->refused = true;
    return send_error(q, c, 404, "no such route (routes: GET /info, GET /metrics, POST /register_job, "
                      "POST /register_rank/{job_id}, GET /schedule/{job_id}?rank=N, POST /result/{job_id}, "
                      "POST /leave/{job_id}, GET /presence/{job_id}?rank=N; with the Perseus scheduler GET /perseus/{job_id}[/...] and "
                      "POST /perseus/{job_id}/straggler)", NULL, false);
  }
  if (!authorised(s, c)) {
    q->refused = true;
    return send_error(q, c, 401, "missing or wrong bearer token", NULL, false);
  }
  bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
  if ((strcmp(allow, "GET") == 0 && !get) || (strcmp(allow, "POST") == 0 && !post) || (!get && !post)) {
    q->refused = true;
    char msg[96];
    snprintf(msg, sizeof msg, "method %.16s is not allowed here (allowed: %s)", method, allow);
    return send_error(q, c, 405, msg, allow, false);
  }
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  unsigned long long want = cl ? strtoull(cl, NULL, 10) : 0;
  if (want > s->body_max) {
    q->refused = true;
    char msg[128];
    snprintf(msg, sizeof msg, "request body of %llu bytes is larger than the limit of %zu bytes (max_body_bytes, "
             "--max-body)", want, s->body_max);
    return send_error(q, c, 413, msg, NULL, true);
  }
  if (want && !inflight_take(s, q, (size_t)want)) {
    q->refused = true;
    atomic_fetch_add(&s->refused_busy, 1);
    char msg[200];
    snprintf(msg, sizeof msg, "the server is receiving %zu bytes of requests, its limit is %zu "
             "(max_inflight_bytes); try again shortly", atomic_load(&s->inflight), s->inflight_max);
    return send_error(q, c, 503, msg, NULL, true);
  }
  return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)version;
  zeus_pfo_server *s = cls;
  req *q = *con_cls;
  if (!q) {
    q = calloc(1, sizeof *q);
    if (!q) return MHD_NO;
    q->srv = s;
    q->conn = c;
    q->fd = -1;
    q->t0 = zeus_monotonic_s();
    if (s->loops) {
      const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
      q->loop = ci && ci->connect_fd >= 0 ? &s->loops[(unsigned)ci->connect_fd % s->nloops] : NULL;
    }
    *con_cls = q;
    return first_call(s, q, c, url, method);
  }
  if (q->refused) { /* answered already: drop whatever body still comes */
    *upload_size = 0;
    return MHD_YES;
  }
  if (q->drop) { /* the keeper found the client gone */
    list_remove(s, q);
    return MHD_NO;
  }
  if (q->has_reply) { /* resumed after the job table answered */
    list_remove(s, q);
    q->has_reply = false;
    q->parked = false;
    atomic_fetch_sub(park_gauge(q), 1);
    char *b = q->reply.body;
    q->reply.body = NULL;
    return send_reply(q, c, q->reply.status, b, q->reply.len, NULL, false, NULL);
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    /* A chunked body has no Content-Length: it is charged as it comes. */
    bool fits = q->body.len + n <= s->body_max;
    if (fits && q->body.len + n > q->charged && !inflight_take(s, q, q->body.len + n - q->charged)) {
      q->refused = true;
      atomic_fetch_add(&s->refused_busy, 1);
      return send_error(q, c, 503, "the server is receiving too many requests at once (max_inflight_bytes); try again "
                        "shortly", NULL, true);
    }
    if (!fits || zeus__buf_append(&q->body, upload, n)) {
      q->refused = true;
      char msg[128];
      snprintf(msg, sizeof msg, "request body larger than the limit of %zu bytes (max_body_bytes, --max-body)",
               s->body_max);
      return send_error(q, c, 413, msg, NULL, true);
    }
    return MHD_YES;
  }
  if (q->parked) return MHD_YES; /* spurious call while suspended */
  guard_busy(s, c, true);        /* the whole request is here: its deadline is met */

  if (q->route == R_METRICS) {
    char *text = NULL;
    size_t tlen = 0;
    if (metrics_text(s, &text, &tlen)) return send_error(q, c, 500, "out of memory", NULL, false);
    return send_metrics(q, c, text, tlen);
  }
  const char *body = q->body.data ? q->body.data : "";
  size_t len = q->body.len;
  if (len) {
    /* Parsing allocates per value: count first, charge the estimate, refuse what cannot fit. A
     * value takes at least two bytes ("1,"), so a small body is charged that bound unscanned:
     * the requests of every round stay free of the scan. */
    size_t nv = len <= PFO_SCAN_FROM ? len / 2 + 1 : json_values(body, len, PFO_MAX_JSON_VALUES);
    if (nv > PFO_MAX_JSON_VALUES) {
      char msg[160];
      snprintf(msg, sizeof msg, "request body holds more than %zu JSON values, the most any request needs",
               (size_t)PFO_MAX_JSON_VALUES);
      return send_error(q, c, 413, msg, NULL, true);
    }
    if (!inflight_take(s, q, nv * PFO_BYTES_PER_JSON_VALUE)) {
      atomic_fetch_add(&s->refused_busy, 1);
      return send_error(q, c, 503, "the server is parsing too many requests at once (max_inflight_bytes); try again "
                        "shortly", NULL, false);
    }
  }
  const char *token = MHD_lookup_connection_value(c, MHD_HEADER_KIND, PFO_RANK_TOKEN_HEADER);
  zeus__reply rep = {0};
  switch (q->route) {
    case R_INFO: {
      /* The fixed settings, plus the dump failures so far (a full disk is visible from outside). */
      unsigned long fails;
      char last[512];
      zeus__job_table_dump_status(s->jobs, &fails, last, sizeof last);
      json_t *o = json_loads(s->info_json, 0, NULL);
      if (o) {
        json_object_set_new(o, "dump_failures", json_integer((json_int_t)fails));
        json_object_set_new(o, "last_dump_error", fails ? json_string(last) : json_null());
      }
      char *b = o ? zeus_json_dumps(o, JSON_COMPACT) : NULL; /* zeus_free() is free() */
      json_decref(o);
      return b ? send_reply(q, c, 200, b, strlen(b), NULL, false, NULL) : MHD_NO;
    }
    case R_JOB: { /* counted against the client: its uid from loopback, else its address */
      const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
      char who[96];
      if (ci) zeus__peer_who(ci->connect_fd, who, sizeof who, NULL);
      zeus__job_table_register_job_for(s->jobs, ci ? who : NULL, body, len, &rep);
      break;
    }
    case R_RANK: zeus__job_table_register_rank(s->jobs, q->job_id, token, body, len, &rep); break;
    case R_RESULT: zeus__job_table_post_result(s->jobs, q->job_id, token, body, len, &rep); break;
    case R_LEAVE: zeus__job_table_leave(s->jobs, q->job_id, token, body, len, &rep); break;
    case R_PERSEUS: zeus__job_table_sched_route(s->jobs, q->job_id, method, q->rest, body, len, &rep); break;
    case R_SCHED:
    case R_PRESENCE: {
      const char *rank = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "rank");
      int st = q->route == R_SCHED ? zeus__job_table_request_schedule(s->jobs, q->job_id, rank, token, q, &rep)
                                   : zeus__job_table_presence(s->jobs, q->job_id, rank, token, q, &rep);
      if (st == 0) {
        list_add(s, q); /* parked: the keeper watches its socket from now on */
        return MHD_YES;
      }
      break;
    }
    default: break;
  }
  /* The parse is over: what it held is free again. */
  atomic_fetch_sub(&s->inflight, q->charged);
  q->charged = 0;
  zeus__buf_free(&q->body);
  return send_reply(q, c, rep.status, rep.body, rep.len, rep.allow, false, rep.content_type);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)toe;
  zeus_pfo_server *s = cls;
  guard_busy(s, c, false); /* the next request's deadline starts */
  req *q = *con_cls;
  if (!q) return;
  list_remove(s, q);
  if (q->status > 0 && q->status < NSTATUS && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    atomic_fetch_add_explicit(&s->requests[q->route][q->status], 1, memory_order_relaxed);
    if (q->status >= 100)
      zeus__metrics_hist_observe(&s->latency[q->route][q->status / 100 - 1], zeus_monotonic_s() - q->t0);
  }
  if (q->parked) {
    zeus__job_table_cancel_waiter(s->jobs, q);
    atomic_fetch_sub(park_gauge(q), 1);
  }
  if (q->charged) atomic_fetch_sub(&s->inflight, q->charged);
  free(q->reply.body);
  zeus__buf_free(&q->body);
  free(q);
  *con_cls = NULL;
}

/* Counts closed connections (the acceptor counts them in), admits each to the guard (which may
 * refuse it: a client at its bound of slow connections) and marks those accepted past the polite
 * limit, and turns on TCP keep-alive probes so that a peer host that vanished without closing is
 * noticed within half a minute. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  zeus_pfo_server *s = cls;
  if (code != MHD_CONNECTION_NOTIFY_STARTED) {
    zeus__http_guard_release(s->guard, *socket_context);
    *socket_context = NULL;
    atomic_fetch_sub(&s->conns, 1);
    return;
  }
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  zeus__http_conn *k = ci && ci->connect_fd >= 0 ? zeus__http_guard_admit(s->guard, ci->connect_fd) : NULL;
  zeus__http_guard_set_tag(k, atomic_load(&s->conns) > s->conn_polite);
  *socket_context = k;
  if (ci && ci->connect_fd >= 0) {
    int one = 1, idle = 10, intvl = 5, cnt = 3;
    setsockopt(ci->connect_fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(ci->connect_fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
  }
}

/* ---- the keeper thread ---- */

/* Drops parked requests whose client closed its end (or whose socket failed): the poll is
 * cancelled in the job table and the connection resumed to be closed. Lock order: park_mu, then
 * the job table's. */
static void drop_vanished(zeus_pfo_server *s, struct pollfd **pfd, req ***who, size_t *cap) {
  pthread_mutex_lock(&s->park_mu);
  size_t n = 0;
  for (req *q = s->parked_head; q; q = q->next) {
    if (q->fd < 0) continue;
    if (n == *cap) {
      size_t nc = *cap ? 2 * *cap : 256;
      struct pollfd *np = realloc(*pfd, nc * sizeof **pfd);
      if (np) *pfd = np;
      req **nw = np ? realloc(*who, nc * sizeof **who) : NULL;
      if (nw) *who = nw;
      if (!np || !nw) break; /* look at the others next time */
      *cap = nc;
    }
    (*pfd)[n] = (struct pollfd){.fd = q->fd, .events = POLLRDHUP};
    (*who)[n++] = q;
  }
  if (n && poll(*pfd, n, 0) > 0) {
    for (size_t i = 0; i < n; i++) {
      if (!((*pfd)[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
      req *q = (*who)[i];
      /* Only a request the table still holds is ours to end; one it answered meanwhile goes its
       * own way (its reply is on the way to a closed socket, which MHD notices). */
      if (zeus__job_table_cancel_waiter(s->jobs, q)) {
        q->drop = true;
        if (q->route != R_PRESENCE) { /* a presence that ends is a rank that died: the table said so */
          atomic_fetch_add(&s->dropped_polls, 1);
          zeus__log(ZEUS_LOG_DEBUG, "pfo", "dropped a waiting schedule request of a client that went away");
        }
        resume(q);
      }
    }
  }
  pthread_mutex_unlock(&s->park_mu);
}

static void *keeper_main(void *arg) {
  zeus_pfo_server *s = arg;
  struct pollfd *pfd = NULL;
  req **who = NULL;
  size_t cap = 0;
  pthread_mutex_lock(&s->mu);
  while (!s->stopping) {
    struct timespec until = zeus__deadline_in(PFO_KEEPER_PERIOD_S);
    zeus__cond_wait_until(&s->cv, &s->mu, &until);
    if (s->stopping) break;
    pthread_mutex_unlock(&s->mu);
    drop_vanished(s, &pfd, &who, &cap);
    double now = zeus_monotonic_s();
    if (now - s->last_reap >= 1.0) {
      s->last_reap = now;
      zeus__job_table_reap(s->jobs, now);
    }
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  free(pfd);
  free(who);
  return NULL;
}

/* ---- the event loops ---- */

/* Why our own loop (issue 36). libmicrohttpd 0.9.75's epoll thread (MHD_epoll in its daemon.c)
 * takes events in batches of 128 (MAX_EVENTS) and, whenever a batch comes back full, calls
 * epoll_wait again with the same blocking timeout before it serves the batch. If nothing else
 * becomes ready meanwhile, the thread sleeps until the next event or the earliest connection
 * timeout (the idle timeout: a minute) with up to 128 connections it was told about unserved;
 * being edge-triggered, it is never told again. The end of a round answers every waiting rank at
 * once, so every rank's next request (its result) arrives in one burst: a job of 128 ranks or
 * more hangs after its first long polls (bench_pfo_server: 1,023 of 1,024 ranks' results
 * unanswered; strace: epoll_wait returns 128 events, the next epoll_wait sleeps with 600 s).
 * libmicrohttpd's repository (1.0.1 and after) still loops so. Here libmicrohttpd runs in its
 * external mode: MHD_run calls MHD_epoll with a timeout of 0, which never blocks however many
 * batches come back full, and this thread does the waiting, on libmicrohttpd's epoll descriptor
 * (readable while any of its sockets has an event) and on its own eventfd, for as long as
 * MHD_get_timeout allows. In external mode libmicrohttpd has no inter-thread channel, so whoever
 * queues a connection (the acceptor: MHD_add_connection must be called from the thread that runs
 * the daemon) or resumes one (resume()) writes the eventfd. */
static void *loop_main(void *arg) {
  ev_loop *l = arg;
  sigset_t pipe_set; /* a peer that closed must not kill the server (libmicrohttpd's threads do the same) */
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
  struct pollfd p[2] = {{.fd = l->epfd, .events = POLLIN}, {.fd = l->wake, .events = POLLIN}};
  for (;;) {
    MHD_UNSIGNED_LONG_LONG to = 0;
    int ms = MHD_get_timeout(l->d, &to) != MHD_YES ? -1 : to < INT_MAX ? (int)to : INT_MAX;
    p[0].revents = p[1].revents = 0;
    if (poll(p, 2, ms) < 0 && errno != EINTR) {
      struct timespec ts = {0, 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    if (p[1].revents & POLLIN) {
      uint64_t v;
      if (read(l->wake, &v, sizeof v) < 0 && errno != EAGAIN)
        zeus__log(ZEUS_LOG_WARN, "pfo", "cannot read an HTTP thread's eventfd: %s", strerror(errno));
      /* Only after the read: a kick from here on writes again, and one that came before (its
       * resume or queued connection in place already) is served below. Cleared before the read,
       * a kick between the two would leave the flag set with nothing to read: every later kick
       * would then be skipped, and the loop would sleep through resumed long polls. */
      atomic_store(&l->kicked, false);
      pthread_mutex_lock(&l->mu);
      bool stop = l->stop;
      pending_conn *q = l->queue;
      size_t n = l->nqueue;
      l->queue = NULL;
      l->nqueue = l->capqueue = 0;
      pthread_mutex_unlock(&l->mu);
      for (size_t i = 0; i < n; i++) /* on failure libmicrohttpd has closed the socket, unannounced */
        if (MHD_add_connection(l->d, q[i].fd, (struct sockaddr *)&q[i].a, q[i].al) != MHD_YES)
          atomic_fetch_sub(&l->srv->conns, 1);
      free(q);
      if (stop) break;
    }
    MHD_run(l->d);
  }
  return NULL;
}

/* Wakes loop l (any thread); writes its eventfd once until the loop has woken. */
static void loop_kick(ev_loop *l) {
  if (atomic_exchange(&l->kicked, true)) return;
  uint64_t one = 1;
  if (write(l->wake, &one, sizeof one) < 0 && errno != EAGAIN)
    zeus__log(ZEUS_LOG_WARN, "pfo", "cannot wake an HTTP thread: %s", strerror(errno));
}

/* Queues an accepted connection for loop l (called by the acceptor; the count in srv->conns is
 * taken already and given back here if the connection cannot be queued). */
static void loop_hand_over(ev_loop *l, int fd, const struct sockaddr_storage *a, socklen_t al) {
  pthread_mutex_lock(&l->mu);
  bool ok = true;
  if (l->nqueue == l->capqueue) {
    size_t nc = l->capqueue ? 2 * l->capqueue : 64;
    pending_conn *nq = realloc(l->queue, nc * sizeof *nq);
    if (nq) {
      l->queue = nq;
      l->capqueue = nc;
    } else
      ok = false;
  }
  if (ok) l->queue[l->nqueue++] = (pending_conn){.fd = fd, .al = al, .a = *a};
  pthread_mutex_unlock(&l->mu);
  if (!ok) {
    close(fd);
    atomic_fetch_sub(&l->srv->conns, 1);
    return;
  }
  loop_kick(l);
}

/* Stops every loop that started and its daemon (after the acceptor stopped: nothing is queued
 * any more but what the loop adds on its way out, which MHD_stop_daemon then closes). */
static void loops_close(zeus_pfo_server *s) {
  for (unsigned i = 0; s->loops && i < s->nloops; i++) {
    ev_loop *l = &s->loops[i];
    if (l->started) {
      pthread_mutex_lock(&l->mu);
      l->stop = true;
      pthread_mutex_unlock(&l->mu);
      uint64_t one = 1;
      if (write(l->wake, &one, sizeof one) < 0) zeus__log(ZEUS_LOG_WARN, "pfo", "cannot wake an HTTP thread to stop");
      pthread_join(l->thread, NULL);
    }
    for (size_t k = 0; k < l->nqueue; k++) {
      close(l->queue[k].fd);
      atomic_fetch_sub(&s->conns, 1);
    }
    free(l->queue);
    if (l->d) MHD_stop_daemon(l->d); /* releases every connection's guard record */
    if (l->wake >= 0) close(l->wake);
    pthread_mutex_destroy(&l->mu);
  }
  free(s->loops);
  s->loops = NULL;
}

/* ---- the acceptor thread ---- */

/* Takes connections off the listening socket and hands each to libmicrohttpd
 * (MHD_add_connection), which places it by descriptor number across its pool's threads, so that
 * the threads hold even shares of a job's ranks. With the pool's own listening socket its threads
 * raced to accept, and one of two could take two thirds of an 8,192-rank job's connections (its
 * thread then had twice the other's work, and every round waited for it). Only below the
 * connection limit: at the limit new connections wait in the backlog, as they did when
 * libmicrohttpd accepted. Each connection handed over is counted in s->conns (on_connection
 * counts it out when it closes). */
static void *acceptor_main(void *arg) {
  zeus_pfo_server *s = arg;
  struct pollfd p[2] = {{.fd = s->wake[0], .events = POLLIN}, {.fd = s->listen_fd, .events = POLLIN}};
  for (;;) {
    bool full = atomic_load(&s->conns) >= s->conn_limit;
    p[0].revents = p[1].revents = 0;
    /* At the limit, look again every 10 ms for a connection that closed. */
    if (poll(p, full ? 1 : 2, full ? 10 : -1) < 0 && errno != EINTR) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
      continue;
    }
    if (p[0].revents) break; /* stopping */
    if (full || !(p[1].revents & POLLIN)) continue;
    for (int k = 0; k < 64 && atomic_load(&s->conns) < s->conn_limit; k++) {
      struct sockaddr_storage a;
      socklen_t al = sizeof a;
      int fd = accept4(s->listen_fd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          /* Out of descriptors or memory: the connection waits in the backlog meanwhile. */
          struct timespec ts = {0, 10 * 1000 * 1000};
          nanosleep(&ts, NULL);
        }
        break; /* EAGAIN: all taken */
      }
      atomic_fetch_add(&s->conns, 1);
      if (s->loops) {
        loop_hand_over(&s->loops[(unsigned)fd % s->nloops], fd, &a, al);
        continue;
      }
      /* On failure libmicrohttpd has closed the socket without a notification. */
      if (MHD_add_connection(s->d, fd, (struct sockaddr *)&a, al) != MHD_YES) atomic_fetch_sub(&s->conns, 1);
    }
  }
  return NULL;
}

/* A listening socket on ai's address (backlog 4096), or -1 (errno set). */
static int listen_on(const struct addrinfo *ai) {
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (ai->ai_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 4096) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

/* ---- settings ---- */

void zeus_pfo_server_opts_init(zeus_pfo_server_opts *o) {
  memset(o, 0, sizeof *o);
  o->host = "127.0.0.1";
  o->port = 7787;
  o->scheduler = "PointSolution";
  o->dump_dir = "./dump";
  o->max_job_idle_time_s = 7 * 24 * 3600;
  o->max_body_bytes = PFO_DEFAULT_BODY_MAX;
  o->max_connections = PFO_DEFAULT_MAX_CONNECTIONS;
  o->idle_timeout_s = PFO_DEFAULT_IDLE_TIMEOUT_S;
  o->max_jobs = ZEUS__PFO_DEFAULT_MAX_JOBS;
  o->max_job_memory_bytes = ZEUS__PFO_DEFAULT_MAX_JOB_BYTES;
  o->max_memory_bytes = ZEUS__PFO_DEFAULT_MAX_TOTAL_BYTES;
  o->max_inflight_bytes = PFO_DEFAULT_INFLIGHT_MAX;
  o->request_timeout_s = PFO_DEFAULT_REQUEST_TIMEOUT_S;
  o->max_slow_per_client = PFO_DEFAULT_MAX_SLOW_PER_CLIENT;
  o->slow_after_s = PFO_DEFAULT_SLOW_AFTER_S;
}

/* A token variable that is set but empty would turn authentication off without a word. */
static int refuse_empty_env(const char *name) {
  char z[64], p[64];
  snprintf(z, sizeof z, "ZEUS_PFO_%s", name);
  snprintf(p, sizeof p, "PERSEUS_%s", name);
  const char *which = NULL;
  if (getenv(z) && !*getenv(z)) which = z;
  else if (!getenv(z) && getenv(p) && !*getenv(p)) which = p;
  if (which)
    return zeus__error(ZEUS_EINVAL, "%s is set but empty, which would turn authentication off; unset it for no "
                       "token", which);
  return ZEUS_OK;
}

int zeus_pfo_server_opts_from_env(zeus_pfo_server_opts *o) {
  char name[64];
  const char *v;
  int rc;
  if ((v = zeus__pfo_env("SCHEDULER", name, sizeof name))) o->scheduler = v;
  if ((v = zeus__pfo_env("SCHEDULER_ARGS", name, sizeof name))) {
    json_t *j;
    if (zeus__json_parse(v, strlen(v), name, &j)) return zeus_errcode();
    bool obj = json_is_object(j);
    json_decref(j);
    if (!obj) return zeus__error(ZEUS_EINVAL, "%s: expected a JSON object such as "
                                 "{\"solution_path\": \"plan.py\"}, got '%s'", name, v);
    o->scheduler_args = v;
  }
  if ((v = zeus__pfo_env("LOG_LEVEL", name, sizeof name))) {
    int lvl;
    if (zeus_log_level_parse(v, &lvl)) return zeus__error_ctx(ZEUS_EINVAL, "%s", name);
    o->log_level = v;
  }
  if ((v = zeus__pfo_env("DUMP_DATA", name, sizeof name))) {
    bool b;
    if (zeus__parse_bool(v, name, &b)) return zeus_errcode();
    o->dump_data = b;
  }
  if ((v = zeus__pfo_env("DUMP_DIR", name, sizeof name))) o->dump_dir = v;
  long t;
  if ((v = zeus__pfo_env("MAX_JOB_IDLE_TIME", name, sizeof name))) {
    if (zeus__parse_long(v, 1, 100L * 365 * 24 * 3600, name, &t)) return zeus_errcode();
    o->max_job_idle_time_s = (int)(t > 2000000000L ? 2000000000L : t);
  }
  if ((rc = refuse_empty_env("TOKEN")) || (rc = refuse_empty_env("TOKEN_FILE"))) return rc;
  if ((v = zeus__pfo_env("TOKEN", name, sizeof name))) o->token = v;
  if ((v = zeus__pfo_env("TOKEN_FILE", name, sizeof name))) o->token_file = v;
  if ((v = zeus__pfo_env("REQUIRE_RANK_TOKENS", name, sizeof name))) {
    bool b;
    if (zeus__parse_bool(v, name, &b)) return zeus_errcode();
    o->require_rank_tokens = b;
  }
  if ((v = zeus__pfo_env("MAX_CONNECTIONS", name, sizeof name))) {
    if (zeus__parse_long(v, 16, 1000000, name, &t)) return zeus_errcode();
    o->max_connections = (int)t;
  }
  if ((v = zeus__pfo_env("IDLE_TIMEOUT", name, sizeof name))) {
    double d;
    if (zeus__parse_double(v, 1, 86400, name, &d)) return zeus_errcode();
    o->idle_timeout_s = d;
  }
  if ((v = zeus__pfo_env("REQUEST_TIMEOUT", name, sizeof name))) {
    double d;
    if (zeus__parse_double(v, 0.1, 86400, name, &d)) return zeus_errcode();
    o->request_timeout_s = d;
  }
  if ((v = zeus__pfo_env("MAX_SLOW_PER_CLIENT", name, sizeof name))) {
    if (zeus__parse_long(v, 1, 1000000, name, &t)) return zeus_errcode();
    o->max_slow_per_client = (int)t;
  }
  if ((v = zeus__pfo_env("SLOW_AFTER", name, sizeof name))) {
    double d;
    if (zeus__parse_double(v, 0.1, 3600, name, &d)) return zeus_errcode();
    o->slow_after_s = d;
  }
  if ((v = zeus__pfo_env("MAX_JOBS", name, sizeof name))) {
    if (zeus__parse_long(v, 1, 1000000, name, &t)) return zeus_errcode();
    o->max_jobs = (int)t;
  }
  if ((v = zeus__pfo_env("MAX_JOBS_PER_CLIENT", name, sizeof name))) {
    if (zeus__parse_long(v, 1, 1000000, name, &t)) return zeus_errcode();
    o->max_jobs_per_client = (int)t;
  }
  if ((v = zeus__pfo_env("RESERVED_JOBS", name, sizeof name))) {
    if (zeus__parse_long(v, 0, 1000000, name, &t)) return zeus_errcode();
    o->reserved_jobs = (int)t;
  }
  if ((v = zeus__pfo_env("MAX_JOB_MEMORY", name, sizeof name))) {
    if (zeus__parse_long(v, 1L << 20, 1L << 40, name, &t)) return zeus_errcode();
    o->max_job_memory_bytes = (size_t)t;
  }
  if ((v = zeus__pfo_env("MAX_MEMORY", name, sizeof name))) {
    if (zeus__parse_long(v, 1L << 20, 1L << 40, name, &t)) return zeus_errcode();
    o->max_memory_bytes = (size_t)t;
  }
  return ZEUS_OK;
}

/* Raises the soft descriptor limit to the hard one; returns the soft limit now in force. */
static rlim_t raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
  rlim_t want = rl.rlim_max == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_max;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
      zeus__log(ZEUS_LOG_INFO, "pfo", "raised the descriptor limit from %llu to %llu", (unsigned long long)old,
                (unsigned long long)want);
    getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur == RLIM_INFINITY ? (rlim_t)1 << 20 : rl.rlim_cur;
}

int zeus_pfo_server_open(zeus_pfo_server **out, const zeus_pfo_server_opts *opts) {
  zeus_pfo_server_opts o = opts ? *opts : (zeus_pfo_server_opts){0};
  if (!o.host || !*o.host) o.host = "127.0.0.1";
  if (o.port == 0) o.port = 7787;
  if (o.port < -1 || o.port > 65535) return zeus__error(ZEUS_EINVAL, "port %d is outside 1..65535", o.port);
  if (!o.scheduler || !*o.scheduler) o.scheduler = "PointSolution";
  if (!o.dump_dir || !*o.dump_dir) o.dump_dir = "./dump";
  if (o.max_job_idle_time_s <= 0) o.max_job_idle_time_s = 7 * 24 * 3600;
  if (!o.max_body_bytes) o.max_body_bytes = PFO_DEFAULT_BODY_MAX;
  if (!o.max_inflight_bytes) o.max_inflight_bytes = PFO_DEFAULT_INFLIGHT_MAX;
  if (o.max_inflight_bytes < o.max_body_bytes) o.max_inflight_bytes = o.max_body_bytes;
  if (o.idle_timeout_s <= 0) o.idle_timeout_s = PFO_DEFAULT_IDLE_TIMEOUT_S;
  if (o.request_timeout_s <= 0) o.request_timeout_s = PFO_DEFAULT_REQUEST_TIMEOUT_S;
  if (o.slow_after_s <= 0) o.slow_after_s = PFO_DEFAULT_SLOW_AFTER_S;
  if (o.max_slow_per_client < 0)
    return zeus__error(ZEUS_EINVAL, "max_slow_per_client %d is negative", o.max_slow_per_client);
  if (o.max_slow_per_client == 0) o.max_slow_per_client = PFO_DEFAULT_MAX_SLOW_PER_CLIENT;
  if (o.max_connections <= 0) o.max_connections = PFO_DEFAULT_MAX_CONNECTIONS;
  if (o.max_connections < 16) return zeus__error(ZEUS_EINVAL, "max_connections %d is below 16", o.max_connections);
  if (o.max_jobs < 0) return zeus__error(ZEUS_EINVAL, "max_jobs %d is negative", o.max_jobs);
  if (o.max_jobs_per_client < 0 || o.reserved_jobs < 0)
    return zeus__error(ZEUS_EINVAL, "max_jobs_per_client %d and reserved_jobs %d must not be negative",
                       o.max_jobs_per_client, o.reserved_jobs);
  if (o.threads <= 0) {
    /* One HTTP thread per online CPU, at most 8: the server is CPU-bound on parsing and JSON. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
  }
  if (o.threads > 64) return zeus__error(ZEUS_EINVAL, "threads %d is outside 1..64", o.threads);
  if (o.solver_threads < 0 || o.solver_threads > 16)
    return zeus__error(ZEUS_EINVAL, "solver_threads %d is outside 1..16", o.solver_threads);

  if (o.token && !*o.token)
    return zeus__error(ZEUS_EINVAL, "the token is empty, which would turn authentication off; give no token for "
                       "none, or a non-empty one");
  if (o.token && o.token_file && *o.token_file)
    return zeus__error(ZEUS_EINVAL, "give the token or the token file, not both");

  char *token = NULL;
  int rc = ZEUS_OK;
  if (o.token) token = zeus__strdup(o.token);
  else if (o.token_file && *o.token_file) rc = zeus__read_token_file(o.token_file, "pfo", &token);
  if (rc) return rc;
  if (o.token && !token) return zeus__oom("creating the server");

  /* Descriptors: every connection is one; the rest (dumps, the listening socket, libmicrohttpd's
   * wake-up pipes, logs) gets a reserve. */
  rlim_t nofile = raise_nofile();
  long reserve = 32 + 4L * o.threads;
  long fd_budget = (long)(nofile > (rlim_t)1 << 30 ? (rlim_t)1 << 30 : nofile) - reserve;
  if (fd_budget < 16) {
    free(token);
    return zeus__error(ZEUS_EINVAL, "the descriptor limit (%llu) leaves no room for connections; raise it "
                       "(ulimit -n)", (unsigned long long)nofile);
  }
  unsigned limit = (unsigned)(o.max_connections < fd_budget ? o.max_connections : fd_budget);
  /* Bench only (bench_pfo_server's baseline column): the server as it was before issue 28. */
  const char *base_env = getenv("ZEUS__PFO_BENCH_BASELINE");
  bool baseline = base_env && !strcmp(base_env, "1");
  /* Bench and tests only: the event loop (see LOOP_OURS). The baseline ran libmicrohttpd's poll. */
  const char *loop_env = getenv("ZEUS__PFO_BENCH_LOOP");
  int loop_kind = baseline || (loop_env && !strcmp(loop_env, "poll")) ? LOOP_MHD_POLL
                  : loop_env && !strcmp(loop_env, "mhd-epoll")        ? LOOP_MHD_EPOLL
                                                                      : LOOP_OURS;
  if (loop_env && *loop_env && strcmp(loop_env, "poll") && strcmp(loop_env, "mhd-epoll") && strcmp(loop_env, "ours"))
    zeus__log(ZEUS_LOG_WARN, "pfo", "ZEUS__PFO_BENCH_LOOP='%s' is none of poll, mhd-epoll, ours: serving with ours",
              loop_env);

  zeus_pfo_server *s = calloc(1, sizeof *s);
  if (!s) { free(token); return zeus__oom("creating the server"); }
  s->token = token;
  s->listen_fd = s->wake[0] = s->wake[1] = -1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->park_mu, NULL);
  if (zeus__cond_init(&s->cv)) {
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->park_mu);
    free(s->token);
    free(s);
    return zeus_errcode();
  }
  s->body_max = o.max_body_bytes;
  s->inflight_max = o.max_inflight_bytes;
  s->idle_timeout_s = o.idle_timeout_s;
  s->conn_limit = limit;
  s->conn_by_fds = (long)o.max_connections > fd_budget;
  if (s->conn_by_fds) /* a warning when asked for; the default just says so */
    zeus__log(o.max_connections != PFO_DEFAULT_MAX_CONNECTIONS ? ZEUS_LOG_WARN : ZEUS_LOG_INFO, "pfo", "the descriptor limit (%llu) allows only %u connections, below "
              "--max-connections %d: raise it (ulimit -n, LimitNOFILE= in a systemd unit) for jobs of more than "
              "%u ranks", (unsigned long long)nofile, limit, o.max_connections, limit / 2);
  unsigned spare = limit / 16 < 8 ? 8 : limit / 16;
  s->conn_polite = limit - spare;
  s->last_reap = zeus_monotonic_s();
  for (int r = 0; r < NROUTES; r++)
    for (int k = 0; k < NCLASSES; k++) zeus__metrics_hist_init(&s->latency[r][k], latency_bounds, 16);
  zeus__job_table_opts ro = {o.scheduler, o.scheduler_args, o.dump_data, o.dump_dir,
                             (double)o.max_job_idle_time_s, on_complete, on_park,
                             (size_t)o.max_jobs, o.max_job_memory_bytes, o.max_memory_bytes,
                             o.require_rank_tokens, o.solver_threads, baseline,
                             (size_t)o.max_jobs_per_client, (size_t)o.reserved_jobs};
  rc = zeus__job_table_open(&s->jobs, &ro);
  if (rc) { zeus_pfo_server_close(s); return rc; }

  json_t *args = NULL;
  if (o.scheduler_args && *o.scheduler_args)
    zeus__json_parse(o.scheduler_args, strlen(o.scheduler_args), "args", &args);
  json_t *info = json_pack("{sssosssbsssisbsbss}", "scheduler", o.scheduler, "scheduler_args",
                           args ? args : json_object(), "log_level",
                           o.log_level ? o.log_level : zeus_log_level_name(zeus_get_log_level()),
                           "dump_data", o.dump_data, "dump_dir", o.dump_dir, "max_job_idle_time",
                           o.max_job_idle_time_s, "auth", s->token != NULL, "rank_tokens_required",
                           o.require_rank_tokens, "version", zeus_version());
  size_t job_bytes = o.max_job_memory_bytes ? o.max_job_memory_bytes : ZEUS__PFO_DEFAULT_MAX_JOB_BYTES;
  size_t total_bytes = o.max_memory_bytes ? o.max_memory_bytes : ZEUS__PFO_DEFAULT_MAX_TOTAL_BYTES;
  json_t *lim = json_pack("{sIsIsfsfsIsfsIsIsIsIsI}", "max_connections", (json_int_t)limit, "registration_reserve",
                          (json_int_t)spare, "idle_timeout_s", o.idle_timeout_s, "request_timeout_s",
                          o.request_timeout_s, "max_slow_per_client", (json_int_t)o.max_slow_per_client,
                          "slow_after_s", o.slow_after_s, "max_jobs",
                          (json_int_t)(o.max_jobs ? o.max_jobs : ZEUS__PFO_DEFAULT_MAX_JOBS), "max_job_memory_bytes",
                          (json_int_t)job_bytes, "max_memory_bytes", (json_int_t)total_bytes,
                          "max_body_bytes", (json_int_t)o.max_body_bytes, "max_inflight_bytes",
                          (json_int_t)o.max_inflight_bytes);
  if (info && lim) json_object_set_new(info, "limits", lim);
  else json_decref(lim);
  s->info_json = info ? zeus_json_dumps(info, JSON_COMPACT) : NULL;
  json_decref(info);
  if (!s->info_json) { zeus_pfo_server_close(s); return zeus__oom("creating the server"); }

  struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  char port[16];
  snprintf(port, sizeof port, "%d", o.port < 0 ? 0 : o.port);
  int gai = getaddrinfo(o.host, port, &hints, &ai);
  if (gai) {
    zeus_pfo_server_close(s);
    return zeus__error(ZEUS_EINVAL, "cannot resolve host '%s': %s", o.host, gai_strerror(gai));
  }
  if (!s->token && !zeus__sockaddr_is_loopback(ai->ai_addr))
    zeus__log(ZEUS_LOG_WARN, "pfo", "listening on %s, which is not a loopback address, without a token: anyone who "
              "can reach this port can register jobs and read their schedules; set ZEUS_PFO_TOKEN or "
              "ZEUS_PFO_TOKEN_FILE (--token-file)", o.host);
  s->listen_fd = listen_on(ai);
  freeaddrinfo(ai);
  if (s->listen_fd < 0) {
    int e = errno;
    zeus_pfo_server_close(s);
    return zeus__error(ZEUS_ENET, "cannot listen on %s port %d: %s (in use, or not an address of this machine?)",
                       o.host, o.port, strerror(e));
  }
  /* The guard: no per-client bound on connections as such (a job's ranks on one uid need
   * thousands) and no reserve of its own (conn_polite keeps one for registration), but deadlines
   * for whole requests and the per-client bound on slow connections, taken before any header is
   * read, so that trickling connections cannot hold the slots that registration needs. */
  zeus__http_guard_opts go = {.server = "pfo-server", .max_connections = limit, .max_per_client = limit,
                              .no_reserve = true, .request_timeout_s = o.request_timeout_s,
                              .max_slow_per_client = (unsigned)o.max_slow_per_client,
                              .slow_after_s = o.slow_after_s,
                              .keepalive_timeout_s = o.idle_timeout_s + o.request_timeout_s,
                              .connections_option = "--max-connections", .timeout_option = "--request-timeout",
                              .slow_option = "--max-slow-per-client"};
  if ((rc = zeus__http_guard_open(&s->guard, &go))) {
    zeus_pfo_server_close(s);
    return rc;
  }
  unsigned pool = (unsigned)(o.threads > 1 ? o.threads : 0);
  /* Issue 36 measured the price of poll (bench_pfo_server's idle table, 2 cores): with 8,192
   * idle keep-alive connections a request waited ~1.05 ms (epoll: 0.03 ms), and 8,192 ranks
   * registering one after another, each keeping its connection, took 9.7 s (epoll: 1.06 s): each
   * poll() passes every connection of its thread to the kernel. So the server serves with epoll,
   * from its own loop threads (loop_main says why not libmicrohttpd's epoll thread), one
   * libmicrohttpd daemon per HTTP thread in external mode. Connections come from the acceptor
   * thread (MHD_USE_NO_LISTEN_SOCKET, see acceptor_main), placed by descriptor number; each
   * daemon may hold the whole limit and the acceptor keeps the total. */
  unsigned timeout = (unsigned)(o.idle_timeout_s + 0.999);
  size_t conn_memory = baseline ? PFO_BASELINE_CONNECTION_MEMORY : PFO_CONNECTION_MEMORY;
  if (loop_kind == LOOP_OURS) {
    s->nloops = (unsigned)o.threads;
    s->loops = calloc(s->nloops, sizeof *s->loops);
    if (!s->loops) {
      zeus_pfo_server_close(s);
      return zeus__oom("creating the HTTP threads");
    }
    for (unsigned i = 0; i < s->nloops; i++) { /* so that loops_close can close any of them */
      s->loops[i] = (ev_loop){.srv = s, .epfd = -1, .wake = -1};
      pthread_mutex_init(&s->loops[i].mu, NULL);
    }
    for (unsigned i = 0; i < s->nloops; i++) {
      ev_loop *l = &s->loops[i];
      l->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      l->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL,
                              handle, s, MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
                              on_connection, s, MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT,
                              timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_memory, MHD_OPTION_END);
      const union MHD_DaemonInfo *di = l->d ? MHD_get_daemon_info(l->d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
      if (di) l->epfd = di->epoll_fd;
      if (l->wake < 0 || l->epfd < 0 || pthread_create(&l->thread, NULL, loop_main, l) != 0) {
        int e = errno;
        zeus_pfo_server_close(s);
        return zeus__error(ZEUS_ENET,
                           "cannot start HTTP thread %u of %d on %s port %d (libmicrohttpd in epoll "
                           "mode, an eventfd and a thread): %s",
                           i + 1, o.threads, o.host, o.port, strerror(e));
      }
      l->started = true;
    }
  } else {
    unsigned flags = (loop_kind == LOOP_MHD_EPOLL ? MHD_USE_EPOLL_INTERNAL_THREAD : MHD_USE_POLL_INTERNAL_THREAD) |
                     MHD_ALLOW_SUSPEND_RESUME | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    s->d = MHD_start_daemon(
        flags, 0, NULL, NULL, handle, s, MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_NOTIFY_CONNECTION,
        on_connection, s, MHD_OPTION_CONNECTION_LIMIT, limit * (pool ? pool : 1), MHD_OPTION_CONNECTION_TIMEOUT,
        timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, conn_memory, MHD_OPTION_THREAD_POOL_SIZE, pool, MHD_OPTION_END);
    if (!s->d) {
      zeus_pfo_server_close(s);
      return zeus__error(ZEUS_ENET, "cannot start the HTTP threads on %s port %d", o.host, o.port);
    }
  }
  struct sockaddr_storage bound;
  socklen_t blen = sizeof bound;
  s->port = o.port < 0 ? 0 : o.port;
  if (getsockname(s->listen_fd, (struct sockaddr *)&bound, &blen) == 0)
    s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                : ((struct sockaddr_in *)&bound)->sin_port);
  if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0 || pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
    zeus_pfo_server_close(s);
    return zeus__error(ZEUS_ENOMEM, "cannot start the acceptor thread");
  }
  s->acceptor_started = true;
  if (pthread_create(&s->keeper, NULL, keeper_main, s) == 0) s->keeper_started = true;
  zeus__log(ZEUS_LOG_INFO, "pfo", "serving on %s port %d with scheduler %s (at most %u connections, %u kept for "
            "registration)", o.host, s->port, o.scheduler, limit, spare);
  *out = s;
  return ZEUS_OK;
}

int zeus_pfo_server_port(const zeus_pfo_server *s) { return s ? s->port : -1; }

void zeus__pfo_server_stats_get(zeus_pfo_server *s, zeus__pfo_server_stats *out) {
  *out = (zeus__pfo_server_stats){
      .connections = atomic_load(&s->conns),
      .conn_limit = s->conn_limit,
      .conn_polite = s->conn_polite,
      .parked = atomic_load(&s->parked),
      .present = atomic_load(&s->present),
      .dropped_polls = atomic_load(&s->dropped_polls),
      .refused_busy = atomic_load(&s->refused_busy),
      .inflight_bytes = atomic_load(&s->inflight),
      .jobs = zeus__job_table_njobs(s->jobs),
      .job_bytes = zeus__job_table_bytes(s->jobs),
  };
}

void zeus_pfo_server_close(zeus_pfo_server *s) {
  if (!s) return;
  if (s->keeper_started) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->keeper, NULL);
  }
  if (s->jobs) zeus__job_table_fail_all_waiters(s->jobs, "the server is shutting down");
  /* Give resumed long polls a moment to send their 503 before the daemon stops. */
  for (int i = 0; (s->d || s->loops) && i < 200 && atomic_load(&s->parked) + atomic_load(&s->present) > 0; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (s->acceptor_started) { /* no new connections from here on */
    char b = 1;
    if (write(s->wake[1], &b, 1) != 1) zeus__log(ZEUS_LOG_WARN, "pfo", "cannot wake the acceptor thread");
    pthread_join(s->acceptor, NULL);
  }
  loops_close(s);
  if (s->d) MHD_stop_daemon(s->d); /* releases every connection's guard record */
  zeus__http_guard_close(s->guard);
  if (s->listen_fd >= 0) close(s->listen_fd);
  if (s->wake[0] >= 0) close(s->wake[0]);
  if (s->wake[1] >= 0) close(s->wake[1]);
  zeus__job_table_close(s->jobs);
  if (s->token) memset(s->token, 0, strlen(s->token));
  free(s->token);
  free(s->info_json);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->park_mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}
