/* server.c: zeus bso-server's HTTP side: libmicrohttpd with a pool of threads, each request
 * parsed and checked, then run as one transaction on a database connection of the pool; a
 * transaction the store asks to retry (busy, serialization failure) runs again, a lost database
 * answers 503 and the connection is opened again on its next use. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "bso_server/bso_server_internal.h"
#include "http/mhd_guard.h"
#include "metrics/metrics.h"
#include "core/core.h"
#include "core/json.h"
#include "zeus/bso_server.h"
#include "zeus/format.h"

#define DEFAULT_PORT 7788
#define DEFAULT_BODY 65536
#define DEFAULT_THREADS 8
#define DEFAULT_CONNECTIONS 1024
/* A day: longer than any epoch (the time between two reports of a trial) we know of, short enough
 * that a preempted job's pruning moves again the next day. */
#define DEFAULT_TRIAL_LEASE_S 86400.0

struct zeus_bso_server {
  struct MHD_Daemon *d;
  zeus__http_guard *guard; /* per-client bound, reserve and request deadline (src/http) */
  zeus__http_mhd_listener on; /* the guard, for libmicrohttpd's notices */
  char *url;
  char *token;
  size_t body_max;
  int port;
  const char *lock_suffix;
  double trial_lease_s; /* <= 0: none */
  double db_timeout_s;  /* <= 0: none */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  zeus__store **pool; /* NULL entries: to be (re)opened */
  bool *busy;
  int npool;
  bso_ratelog bad_uri_log; /* refused request targets: one line per client a minute */
  /* After a failed connection attempt, requests within a second answer 503 at once with its
   * message instead of each waiting out a connect timeout of its own (under mu). */
  double reconnect_after;
  char down_msg[256];
};

typedef struct req {
  zeus__buf body;
  int route;
  bool started; /* the handler has seen the request once */
  bool refused;
  int method_status; /* 404/405 decided at the first call */
  bool bad_uri;      /* its target is not UTF-8 or holds NUL (uri_msg says which part) */
  char uri_msg[200];
} req;

static enum MHD_Result send_json(struct MHD_Connection *c, int status, json_t *body) {
  char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17)) : strdup("null");
  json_decref(body);
  if (!text) return MHD_NO;
  struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
  enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  return rc;
}

static json_t *detail(const char *msg) { return json_pack("{ss}", "detail", msg); }

/* The guard's counters in the Prometheus text format (src/metrics). */
static enum MHD_Result send_metrics(zeus_bso_server *s, struct MHD_Connection *c) {
  unsigned open = 0;
  unsigned long long refused = 0, timed_out = 0;
  zeus__http_guard_stats(s->guard, &open, &refused, &timed_out);
  zeus__metrics_writer w;
  zeus__metrics_writer_init(&w);
  zeus__metrics_family(&w, "zeus_bso_connections_open", "gauge", "Connections the server holds now.");
  zeus__metrics_sample(&w, "zeus_bso_connections_open", NULL, NULL, 0, (double)open);
  zeus__metrics_family(&w, "zeus_bso_connections_refused_total", "counter",
                       "Connections refused at opening: a client at --max-connections-per-client, or the slots "
                       "kept for clients that hold none.");
  zeus__metrics_sample(&w, "zeus_bso_connections_refused_total", NULL, NULL, 0, (double)refused);
  zeus__metrics_family(&w, "zeus_bso_connections_timed_out_total", "counter",
                       "Connections cut because a whole request did not arrive within --request-timeout.");
  zeus__metrics_sample(&w, "zeus_bso_connections_timed_out_total", NULL, NULL, 0, (double)timed_out);
  struct MHD_Response *r =
      w.rc ? NULL : MHD_create_response_from_buffer(w.buf.len, w.buf.data, MHD_RESPMEM_MUST_COPY);
  zeus__metrics_writer_free(&w);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ZEUS__METRICS_CONTENT_TYPE);
  enum MHD_Result rc = MHD_queue_response(c, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return rc;
}

/* GET /metrics: the connection guard's counters (not a route of the original's server). */
enum { ROUTE_METRICS = 100 };

static int route_of(const char *url, const char *method, int *status) {
  *status = 0;
  if (strcmp(url, "/metrics") == 0) {
    if (!strcmp(method, "GET")) return ROUTE_METRICS;
  } else if (strcmp(url, "/jobs") == 0) {
    if (!strcmp(method, "POST")) return BSO_R_REGISTER;
    if (!strcmp(method, "DELETE")) return BSO_R_DELETE;
  } else if (strcmp(url, "/jobs/batch_size") == 0) {
    if (!strcmp(method, "GET")) return BSO_R_PREDICT;
  } else if (strcmp(url, "/report") == 0) {
    if (!strcmp(method, "POST")) return BSO_R_REPORT;
  } else if (strcmp(url, "/trials") == 0) {
    if (!strcmp(method, "PATCH")) return BSO_R_END;
  } else {
    *status = 404;
    return 0;
  }
  *status = 405;
  return 0;
}

/* Called with the raw request target before libmicrohttpd decodes it: the request's state starts
 * here, with the verdict on its target (bso_uri_problem). */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c) {
  (void)cls, (void)c;
  req *q = calloc(1, sizeof *q);
  if (q) q->bad_uri = bso_uri_problem(uri, q->uri_msg, sizeof q->uri_msg) != 0;
  return q;
}

/* The client's address without its port (the unit of the refusal log's rate). */
static void client_of(struct MHD_Connection *c, char *out, size_t n) {
  snprintf(out, n, "?");
  const union MHD_ConnectionInfo *ai = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!ai || !ai->client_addr) return;
  const struct sockaddr *sa = ai->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out, (socklen_t)n);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out, (socklen_t)n);
}

static enum MHD_Result refuse_uri(zeus_bso_server *s, struct MHD_Connection *c, req *q, const char *method) {
  char who[64];
  unsigned long more = 0;
  client_of(c, who, sizeof who);
  if (bso_ratelog_allow(&s->bad_uri_log, who, zeus_monotonic_s(), &more)) {
    if (more)
      zeus__log(ZEUS_LOG_WARN, "bso", "refused a %s request from %s: %s (and %lu more from it in the last minute)",
                method, who, q->uri_msg, more);
    else
      zeus__log(ZEUS_LOG_WARN, "bso", "refused a %s request from %s: %s (logged once a minute per client)", method,
                who, q->uri_msg);
  }
  q->refused = true;
  return send_json(c, 400, detail(q->uri_msg));
}

static bool authorised(zeus_bso_server *s, struct MHD_Connection *c) {
  if (!s->token) return true;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
  return zeus__secret_equal(h + 7, s->token);
}

/* A connection of the pool for this thread (opened again when it was lost). */
static int pool_take(zeus_bso_server *s, int *slot, char *err, size_t errlen) {
  pthread_mutex_lock(&s->mu);
  int k = -1;
  for (;;) {
    for (int i = 0; i < s->npool; i++)
      if (!s->busy[i]) {
        k = i;
        break;
      }
    if (k >= 0) break;
    pthread_cond_wait(&s->cv, &s->mu);
  }
  s->busy[k] = true;
  pthread_mutex_unlock(&s->mu);
  *slot = k;
  if (!s->pool[k]) {
    pthread_mutex_lock(&s->mu);
    bool wait = zeus_monotonic_s() < s->reconnect_after;
    if (wait) snprintf(err, errlen, "%s (tried again within the last second)", s->down_msg);
    pthread_mutex_unlock(&s->mu);
    if (wait) return STORE_DOWN;
    int rc = zeus__store_open(s->url, &(zeus__store_opts){.timeout_s = s->db_timeout_s}, false, &s->pool[k], err,
                              errlen);
    if (rc) {
      pthread_mutex_lock(&s->mu);
      s->reconnect_after = zeus_monotonic_s() + zeus__store_defaults.reconnect_s;
      snprintf(s->down_msg, sizeof s->down_msg, "%s", err);
      pthread_mutex_unlock(&s->mu);
      return STORE_DOWN;
    }
    zeus__log(ZEUS_LOG_INFO, "bso", "database connection %d opened again", k);
  }
  return STORE_OK;
}

static void pool_give(zeus_bso_server *s, int slot, bool broken) {
  if (broken && s->pool[slot]) {
    zeus__store_close(s->pool[slot]);
    s->pool[slot] = NULL;
  }
  pthread_mutex_lock(&s->mu);
  s->busy[slot] = false;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* One request as a transaction of the store (zeus__store_transact), run again while the store asks
 * to retry: each attempt starts from the request as it came (register may fill in the job id). */
typedef struct request_tx {
  zeus_bso_server *s;
  bso_req *q;
  bso_reply *r;
  json_t *saved; /* the body as it came, for the next attempt */
  bool tried;
} request_tx;

static int request_body(zeus__store *db, void *arg, bool *commit, char *err, size_t errlen) {
  request_tx *t = arg;
  if (t->tried) {
    json_decref(t->q->body);
    t->q->body = t->saved;
    t->saved = NULL;
    json_decref(t->r->body);
    *t->r = (bso_reply){0};
  }
  t->tried = true;
  t->saved = t->q->body ? json_deep_copy(t->q->body) : NULL;
  int rc = bso_route(db, t->s->lock_suffix, t->q, t->r, err, errlen);
  *commit = t->r->status < 400;
  return rc;
}

static void run(zeus_bso_server *s, bso_req *q, bso_reply *r) {
  char err[512] = "";
  int slot, attempts = 0, rc = pool_take(s, &slot, err, sizeof err);
  if (rc == STORE_OK) {
    request_tx t = {.s = s, .q = q, .r = r};
    rc = zeus__store_transact(s->pool[slot], request_body, &t, &attempts, err, sizeof err);
    json_decref(t.saved);
  }
  if (rc == STORE_DOWN) {
    json_decref(r->body);
    r->status = 503;
    r->body = bso_message("the database is unavailable: %s; try again shortly", err);
    zeus__log(ZEUS_LOG_WARN, "bso", "the database is unavailable: %s", err);
  } else if (rc == STORE_RETRY) {
    json_decref(r->body);
    r->status = 503;
    r->body = bso_message("the database stayed busy through %d attempts: %s; try again", attempts, err);
  } else if (rc) {
    json_decref(r->body);
    r->status = 500;
    r->body = bso_message("database error: %s", err);
    zeus__log(ZEUS_LOG_ERROR, "bso", "database error: %s", err);
  }
  pool_give(s, slot, rc == STORE_DOWN);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)version;
  zeus_bso_server *s = cls;
  req *q = *con_cls;
  if (!q) return MHD_NO; /* out of memory in uri_seen */
  if (!q->started) {
    q->started = true;
    q->route = route_of(url, method, &q->method_status);
    if (!authorised(s, c)) {
      q->refused = true;
      return send_json(c, 401, detail("a bearer token is required (Authorization: Bearer TOKEN)"));
    }
    if (q->bad_uri) return refuse_uri(s, c, q, method);
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->body_max) {
      q->refused = true;
      char m[128];
      snprintf(m, sizeof m, "request body larger than the limit of %zu bytes (--max-body)", s->body_max);
      return send_json(c, 413, detail(m));
    }
    return MHD_YES;
  }
  if (q->refused) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (q->body.len + n > s->body_max || zeus__buf_append(&q->body, upload, n)) {
      q->refused = true;
      char m[128];
      snprintf(m, sizeof m, "request body larger than the limit of %zu bytes (--max-body)", s->body_max);
      return send_json(c, 413, detail(m));
    }
    return MHD_YES;
  }
  zeus__http_mhd_busy(s->guard, c, true); /* the whole request is here: its deadline is met */
  if (q->method_status == 404) return send_json(c, 404, detail("Not Found"));
  if (q->method_status == 405) return send_json(c, 405, detail("Method Not Allowed"));
  if (q->route == ROUTE_METRICS) return send_metrics(s, c);
  bso_req rq = {.route = q->route, .trial_lease_s = s->trial_lease_s};
  bso_reply rep = {0};
  if (q->route == BSO_R_DELETE || q->route == BSO_R_PREDICT) {
    rq.job_id = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "job_id");
  } else {
    json_error_t je;
    rq.body = json_loadb(q->body.data ? q->body.data : "", q->body.len, JSON_REJECT_DUPLICATES, &je);
    if (!rq.body) {
      char m[256];
      snprintf(m, sizeof m, "JSON decode error: %s", je.text);
      json_t *d = json_pack("{s[{s[si]ssss}]}", "detail", "loc", "body", (int)je.position, "msg", m, "type",
                            "value_error.jsondecode");
      return send_json(c, 422, d);
    }
  }
  if (bso_validate(&rq, &rep) == 0) run(s, &rq, &rep);
  json_decref(rq.body);
  return send_json(c, rep.status ? rep.status : 500, rep.body);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)toe;
  zeus__http_mhd_busy(((zeus_bso_server *)cls)->guard, c, false); /* the next request's deadline starts */
  req *q = *con_cls;
  if (!q) return;
  zeus__buf_free(&q->body);
  free(q);
  *con_cls = NULL;
}

int zeus_bso_server_open(zeus_bso_server **out, const zeus_bso_server_opts *opts) {
  zeus_bso_server_opts o = opts ? *opts : (zeus_bso_server_opts){0};
  if (!o.host || !*o.host) o.host = "127.0.0.1";
  if (o.port == 0) o.port = DEFAULT_PORT;
  if (o.port < -1 || o.port > 65535) return zeus__error(ZEUS_EINVAL, "port %d is outside 1..65535", o.port);
  if (!o.database || !*o.database) o.database = "sqlite://zeus-bso.db";
  if (o.threads <= 0) o.threads = DEFAULT_THREADS;
  if (o.threads > 256) return zeus__error(ZEUS_EINVAL, "threads %d is outside 1..256", o.threads);
  if (o.max_connections <= 0) o.max_connections = DEFAULT_CONNECTIONS;
  if (!o.max_body_bytes) o.max_body_bytes = DEFAULT_BODY;
  if (o.idle_timeout_s <= 0) o.idle_timeout_s = 60;
  if (o.trial_lease_s == 0) o.trial_lease_s = DEFAULT_TRIAL_LEASE_S;
  if (isnan(o.trial_lease_s)) return zeus__error(ZEUS_EINVAL, "trial lease: NaN, expected seconds > 0 (or < 0: none)");
  if (o.db_timeout_s == 0) o.db_timeout_s = zeus__store_defaults.timeout_s; /* the store's one table */
  if (isnan(o.db_timeout_s) || o.db_timeout_s > 86400)
    return zeus__error(ZEUS_EINVAL, "database timeout: %g, expected seconds in 0..86400 (or < 0: none)",
                       o.db_timeout_s);
  if (o.max_connections_per_client <= 0) o.max_connections_per_client = 64;
  if (o.request_timeout_s <= 0) o.request_timeout_s = 10;
  if (o.token && !*o.token)
    return zeus__error(ZEUS_EINVAL, "the token is empty, which would turn authentication off; give no token for none");
  if (o.token && o.token_file && *o.token_file)
    return zeus__error(ZEUS_EINVAL, "give the token or the token file, not both");
  zeus_bso_server *s = calloc(1, sizeof *s);
  if (!s) return zeus__oom("creating the server");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  bso_ratelog_init(&s->bad_uri_log);
  s->body_max = o.max_body_bytes;
  s->trial_lease_s = o.trial_lease_s;
  s->db_timeout_s = o.db_timeout_s;
  int rc = ZEUS_OK;
  if (o.token)
    s->token = zeus__strdup(o.token);
  else if (o.token_file && *o.token_file)
    rc = zeus__read_token_file(o.token_file, "bso", &s->token);
  s->url = zeus__strdup(o.database);
  bool pg = zeus__store_url_is_pg(o.database);
  s->lock_suffix = pg ? " FOR UPDATE" : "";
  /* SQLite serialises writers on the file anyway: one connection queues them in this process
   * without busy waits (other processes on the same file still wait on its lock). */
  s->npool = pg ? o.threads : 1;
  s->pool = calloc((size_t)s->npool, sizeof *s->pool);
  s->busy = calloc((size_t)s->npool, sizeof *s->busy);
  if (!rc && (!s->url || !s->pool || !s->busy)) rc = zeus__oom("creating the server");
  if (rc) {
    zeus_bso_server_close(s);
    return rc;
  }
  char err[512];
  if (zeus__store_open(o.database, &(zeus__store_opts){.timeout_s = s->db_timeout_s}, true, &s->pool[0], err,
                       sizeof err)) {
    zeus_bso_server_close(s);
    return zeus__error(ZEUS_EIO, "database %s: %s", pg ? "(postgresql)" : o.database, err);
  }
  struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  char port[16];
  snprintf(port, sizeof port, "%d", o.port < 0 ? 0 : o.port);
  int gai = getaddrinfo(o.host, port, &hints, &ai);
  if (gai) {
    zeus_bso_server_close(s);
    return zeus__error(ZEUS_EINVAL, "cannot resolve host '%s': %s", o.host, gai_strerror(gai));
  }
  if (!s->token && !zeus__sockaddr_is_loopback(ai->ai_addr))
    zeus__log(ZEUS_LOG_WARN, "bso",
              "listening on %s, which is not a loopback address, without a token: anyone who can "
              "reach this port can register, read and delete jobs; give --token-file",
              o.host);
  zeus__http_guard_opts go = {.server = "bso-server", .max_connections = (unsigned)o.max_connections,
                              .max_per_client = (unsigned)o.max_connections_per_client,
                              .request_timeout_s = o.request_timeout_s};
  if ((rc = zeus__http_guard_open(&s->guard, &go))) {
    freeaddrinfo(ai);
    zeus_bso_server_close(s);
    return rc;
  }
  s->on = (zeus__http_mhd_listener){s->guard, 0};
  unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  s->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                          MHD_OPTION_NOTIFY_CONNECTION, zeus__http_mhd_notify, &s->on,
                          MHD_OPTION_NOTIFY_COMPLETED, completed, s, MHD_OPTION_URI_LOG_CALLBACK, uri_seen, s,
                          MHD_OPTION_CONNECTION_LIMIT,
                          (unsigned)o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                          (unsigned)(o.idle_timeout_s + 0.999), MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
                          MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)4096, MHD_OPTION_THREAD_POOL_SIZE,
                          (unsigned)(o.threads > 1 ? o.threads : 0), MHD_OPTION_END);
  freeaddrinfo(ai);
  if (!s->d) {
    zeus_bso_server_close(s);
    return zeus__error(ZEUS_ENET, "cannot listen on %s port %d (in use, or not an address of this machine?)", o.host,
                       o.port);
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = di ? di->port : o.port;
  zeus__log(ZEUS_LOG_INFO, "bso", "serving on %s port %d, database %s", o.host, s->port,
            pg ? "postgresql" : o.database);
  *out = s;
  return ZEUS_OK;
}

int zeus_bso_server_port(const zeus_bso_server *s) { return s ? s->port : -1; }

void zeus_bso_server_close(zeus_bso_server *s) {
  if (!s) return;
  if (s->d) MHD_stop_daemon(s->d);
  zeus__http_guard_close(s->guard);
  for (int i = 0; s->pool && i < s->npool; i++) zeus__store_close(s->pool[i]);
  free(s->pool);
  free(s->busy);
  if (s->token) memset(s->token, 0, strlen(s->token));
  free(s->token);
  free(s->url);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  bso_ratelog_destroy(&s->bad_uri_log);
  free(s);
}
