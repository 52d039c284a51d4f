/* The Perseus HTTP server: a thin libmicrohttpd layer over the job table.
 *
 * Schedule requests that must wait are suspended (MHD_suspend_connection), not parked on a
 * thread; the job table completes them through on_complete, which stores the reply and resumes
 * the connection; the access handler then sends the stored reply. Per-request state is freed in
 * one place, the MHD completion callback, whatever happened. */
#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "metrics/metrics.h"
#include "pfo_server/job_table.h"
#include "zeus/pfo_server.h"
#include "zeus/version.h"

#define PFO_DEFAULT_BODY_MAX (16u << 20)

/* Routes as /metrics labels them (templates, never the client's URL). */
enum { R_NONE, R_INFO, R_JOB, R_RANK, R_SCHED, R_RESULT, R_METRICS, R_PERSEUS, NROUTES };
static const char *const route_label[NROUTES] = {
    "other", "/info", "/register_job", "/register_rank/{job_id}", "/schedule/{job_id}", "/result/{job_id}",
    "/metrics", "/perseus/{job_id}"};
#define NSTATUS 600 /* request counters by HTTP status 0..599 */
/* Latency histograms by route and status class (1xx-5xx), so that fast errors do not hide slow
 * answers. */
#define NCLASSES 5
static const char *const class_label[NCLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
static const double latency_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                        0.25,   0.5,   1,      2.5,   5,    10,   30,    60};

struct zeus_pfo_server {
  struct MHD_Daemon *d;
  zeus__job_table *jobs;
  int port;
  char *token;
  size_t body_max;
  char *info_json;
  atomic_long parked;
  pthread_t reaper;
  bool reaper_started, stopping;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  double idle_s;
  /* /metrics: answered requests by route and status, and their latency by route. */
  atomic_ulong requests[NROUTES][NSTATUS];
  zeus__metrics_hist latency[NROUTES][NCLASSES];
};

typedef struct req {
  zeus_pfo_server *srv;
  struct MHD_Connection *conn;
  zeus__buf body;
  bool too_big, parked, has_reply;
  zeus__reply reply;
  int route, status; /* status: of the reply queued (0: none yet) */
  double t0;
} req;

/* ---- replies ---- */

static enum MHD_Result send_reply(req *q, struct MHD_Connection *c, int status, char *body, size_t len,
                                  const char *allow, const char *content_type) {
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
  enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result send_error(req *q, struct MHD_Connection *c, int status, const char *msg,
                                  const char *allow) {
  zeus__reply rep = {0};
  zeus__reply_error(&rep, status, msg);
  return send_reply(q, c, status, rep.body, rep.len, allow, NULL);
}

/* ---- job table callbacks ---- */

static void on_park(void *w) {
  req *q = w;
  q->parked = true;
  atomic_fetch_add(&q->srv->parked, 1);
  MHD_suspend_connection(q->conn);
}

static void on_complete(void *w, zeus__reply *reply) {
  req *q = w;
  q->reply = *reply;
  q->has_reply = true;
  MHD_resume_connection(q->conn);
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
  zeus__metrics_family(&w, "zeus_pfo_failed_jobs", "gauge", "Registered jobs whose scheduler failed.");
  zeus__metrics_sample(&w, "zeus_pfo_failed_jobs", NULL, NULL, 0, (double)st.failed_jobs);
  zeus__metrics_family(&w, "zeus_pfo_ranks", "gauge", "Ranks registered now, over every job.");
  zeus__metrics_sample(&w, "zeus_pfo_ranks", NULL, NULL, 0, (double)st.ranks);
  zeus__metrics_family(&w, "zeus_pfo_rounds_total", "counter", "Rounds completed (every rank's result in), over every job.");
  zeus__metrics_sample(&w, "zeus_pfo_rounds_total", NULL, NULL, 0, (double)st.rounds_done);
  zeus__metrics_family(&w, "zeus_pfo_parked_requests", "gauge", "Schedule requests waiting for the rest of their round.");
  zeus__metrics_sample(&w, "zeus_pfo_parked_requests", NULL, NULL, 0, (double)atomic_load(&s->parked));
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

/* ---- routing ---- */

static bool authorised(zeus_pfo_server *s, struct MHD_Connection *c) {
  if (!s->token) return true;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return false;
  h += 7;
  while (*h == ' ') h++;
  /* Constant-time comparison of equal-length strings. */
  size_t n = strlen(s->token);
  if (strlen(h) != n) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(h[i] ^ s->token[i]);
  return diff == 0;
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

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  zeus_pfo_server *s = cls;
  req *q = *con_cls;
  if (!q) {
    q = calloc(1, sizeof *q);
    if (!q) return MHD_NO;
    q->srv = s;
    q->conn = c;
    q->t0 = zeus_monotonic_s();
    *con_cls = q;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->body_max) q->too_big = true;
    return MHD_YES;
  }
  if (q->has_reply) { /* resumed after the job table answered */
    q->has_reply = false;
    q->parked = false;
    atomic_fetch_sub(&s->parked, 1);
    char *b = q->reply.body;
    q->reply.body = NULL;
    return send_reply(q, c, q->reply.status, b, q->reply.len, NULL, NULL);
  }
  if (*upload_size) {
    if (!q->too_big && q->body.len + *upload_size > s->body_max) q->too_big = true;
    if (!q->too_big && zeus__buf_append(&q->body, upload, *upload_size)) q->too_big = true;
    *upload_size = 0;
    return MHD_YES;
  }
  if (q->parked) return MHD_YES; /* spurious call while suspended */

  bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
  const char *id = NULL, *rest = NULL;
  char idbuf[512];
  int route = R_NONE;
  const char *allow = NULL;
  if (strcmp(url, "/info") == 0) route = R_INFO, allow = "GET";
  else if (strcmp(url, "/metrics") == 0) route = R_METRICS, allow = "GET";
  else if ((rest = route_id_rest(url, "/perseus", idbuf, sizeof idbuf)))
    route = R_PERSEUS, id = idbuf, allow = "GET, POST";
  else if (strcmp(url, "/register_job") == 0) route = R_JOB, allow = "POST";
  else if ((id = route_id(url, "/register_rank"))) route = R_RANK, allow = "POST";
  else if ((id = route_id(url, "/schedule"))) route = R_SCHED, allow = "GET";
  else if ((id = route_id(url, "/result"))) route = R_RESULT, allow = "POST";
  q->route = route;
  if (route == R_NONE)
    return send_error(q, c, 404,
                      "no such route (routes: GET /info, GET /metrics, POST /register_job, "
                      "POST /register_rank/{job_id}, GET /schedule/{job_id}?rank=N, "
                      "POST /result/{job_id}; with the Perseus scheduler GET /perseus/{job_id}[/...] "
                      "and POST /perseus/{job_id}/straggler)",
                      NULL);
  if (!authorised(s, c)) return send_error(q, c, 401, "missing or wrong bearer token", NULL);
  if ((strcmp(allow, "GET") == 0 && !get) || (strcmp(allow, "POST") == 0 && !post) || (!get && !post)) {
    char msg[96];
    snprintf(msg, sizeof msg, "method %s is not allowed here (allowed: %s)", method, allow);
    return send_error(q, c, 405, msg, allow);
  }
  if (q->too_big) {
    char msg[96];
    snprintf(msg, sizeof msg, "request body larger than the limit of %zu bytes", s->body_max);
    return send_error(q, c, 413, msg, NULL);
  }
  if (route == R_METRICS) {
    char *text = NULL;
    size_t tlen = 0;
    if (metrics_text(s, &text, &tlen)) return send_error(q, c, 500, "out of memory", NULL);
    return send_metrics(q, c, text, tlen);
  }
  const char *body = q->body.data ? q->body.data : "";
  size_t len = q->body.len;
  zeus__reply rep = {0};
  switch (route) {
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
      char *b = o ? json_dumps(o, JSON_COMPACT) : NULL;
      json_decref(o);
      return b ? send_reply(q, c, 200, b, strlen(b), NULL, NULL) : MHD_NO;
    }
    case R_JOB: zeus__job_table_register_job(s->jobs, body, len, &rep); break;
    case R_RANK: zeus__job_table_register_rank(s->jobs, id, body, len, &rep); break;
    case R_RESULT: zeus__job_table_post_result(s->jobs, id, body, len, &rep); break;
    case R_PERSEUS: zeus__job_table_sched_route(s->jobs, id, method, rest, body, len, &rep); break;
    case R_SCHED: {
      const char *rank = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "rank");
      if (zeus__job_table_request_schedule(s->jobs, id, rank, q, &rep) == 0) return MHD_YES; /* parked */
      break;
    }
    default: break;
  }
  return send_reply(q, c, rep.status, rep.body, rep.len, rep.allow, rep.content_type);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  zeus_pfo_server *s = cls;
  req *q = *con_cls;
  if (!q) return;
  if (q->status > 0 && q->status < NSTATUS && toe == MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    atomic_fetch_add_explicit(&s->requests[q->route][q->status], 1, memory_order_relaxed);
    if (q->status >= 100)
      zeus__metrics_hist_observe(&s->latency[q->route][q->status / 100 - 1], zeus_monotonic_s() - q->t0);
  }
  if (q->parked) {
    zeus__job_table_cancel_waiter(s->jobs, q);
    atomic_fetch_sub(&s->parked, 1);
  }
  free(q->reply.body);
  zeus__buf_free(&q->body);
  free(q);
  *con_cls = NULL;
}

/* Keep-alive connections stay open between rounds; a client that vanishes is dropped after it
 * has been idle this long (suspended long polls are exempt: MHD does not time them out). */
#define PFO_CONN_TIMEOUT_S 600

static void *reaper_main(void *arg) {
  zeus_pfo_server *s = arg;
  pthread_mutex_lock(&s->mu);
  while (!s->stopping) {
    struct timespec until = zeus__deadline_in(1.0);
    zeus__cond_wait_until(&s->cv, &s->mu, &until);
    if (s->stopping) break;
    pthread_mutex_unlock(&s->mu);
    zeus__job_table_reap(s->jobs, zeus_monotonic_s());
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

void zeus_pfo_server_opts_init(zeus_pfo_server_opts *o) {
  memset(o, 0, sizeof *o);
  o->host = "127.0.0.1";
  o->port = 7787;
  o->scheduler = "PointSolution";
  o->dump_dir = "./dump";
  o->max_job_idle_time_s = 7 * 24 * 3600;
  o->max_body_bytes = PFO_DEFAULT_BODY_MAX;
}

int zeus_pfo_server_opts_from_env(zeus_pfo_server_opts *o) {
  char name[64];
  const char *v;
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
  if ((v = zeus__pfo_env("MAX_JOB_IDLE_TIME", name, sizeof name))) {
    long t;
    if (zeus__parse_long(v, 1, 100L * 365 * 24 * 3600, name, &t)) return zeus_errcode();
    o->max_job_idle_time_s = (int)(t > 2000000000L ? 2000000000L : t);
  }
  if ((v = zeus__pfo_env("TOKEN", name, sizeof name))) o->token = v;
  return ZEUS_OK;
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
  if (o.threads <= 0) {
    /* One HTTP thread per online CPU, at most 8: the server is CPU-bound on parsing and JSON. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = ncpu < 1 ? 1 : ncpu > 8 ? 8 : (int)ncpu;
  }
  if (o.threads > 64) return zeus__error(ZEUS_EINVAL, "threads %d is outside 1..64", o.threads);
  if (o.solver_threads < 0 || o.solver_threads > 16)
    return zeus__error(ZEUS_EINVAL, "solver_threads %d is outside 1..16", o.solver_threads);

  zeus_pfo_server *s = calloc(1, sizeof *s);
  if (!s) return zeus__oom("creating the server");
  pthread_mutex_init(&s->mu, NULL);
  if (zeus__cond_init(&s->cv)) {
    pthread_mutex_destroy(&s->mu);
    free(s);
    return zeus_errcode();
  }
  s->body_max = o.max_body_bytes;
  for (int r = 0; r < NROUTES; r++)
    for (int k = 0; k < NCLASSES; k++) zeus__metrics_hist_init(&s->latency[r][k], latency_bounds, 16);
  s->idle_s = o.max_job_idle_time_s;
  if (o.token && *o.token && !(s->token = zeus__strdup(o.token))) {
    zeus_pfo_server_close(s);
    return zeus__oom("creating the server");
  }
  zeus__job_table_opts ro = {o.scheduler, o.scheduler_args, o.dump_data, o.dump_dir,
                            (double)o.max_job_idle_time_s, on_complete, on_park, o.solver_threads};
  int rc = zeus__job_table_open(&s->jobs, &ro);
  if (rc) { free(s->token); free(s); return rc; }

  json_t *args = NULL;
  if (o.scheduler_args && *o.scheduler_args)
    zeus__json_parse(o.scheduler_args, strlen(o.scheduler_args), "args", &args);
  json_t *info = json_pack("{sssosssbsssisbss}", "scheduler", o.scheduler, "scheduler_args",
                           args ? args : json_object(), "log_level",
                           o.log_level ? o.log_level : zeus_log_level_name(zeus_get_log_level()),
                           "dump_data", o.dump_data, "dump_dir", o.dump_dir, "max_job_idle_time",
                           o.max_job_idle_time_s, "auth", s->token != NULL, "version", zeus_version());
  s->info_json = info ? json_dumps(info, JSON_COMPACT) : NULL;
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
  /* poll(), level-triggered: with edge-triggered epoll, libmicrohttpd 0.9.75 could miss the next
   * request on a connection resumed after a long poll when it arrived during the resume. */
  unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                   (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
  s->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, s,
                          MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                          MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)8192,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)PFO_CONN_TIMEOUT_S,
                          MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(16 * 1024),
                          MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)4096,
                          MHD_OPTION_THREAD_POOL_SIZE, (unsigned)(o.threads > 1 ? o.threads : 0),
                          MHD_OPTION_END);
  freeaddrinfo(ai);
  if (!s->d) {
    zeus_pfo_server_close(s);
    return zeus__error(ZEUS_ENET, "cannot listen on %s port %d (in use, or not an address of this machine?)",
                       o.host, o.port);
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = di ? di->port : o.port;
  if (pthread_create(&s->reaper, NULL, reaper_main, s) == 0) s->reaper_started = true;
  zeus__log(ZEUS_LOG_INFO, "pfo", "serving on %s port %d with scheduler %s", o.host, s->port, o.scheduler);
  *out = s;
  return ZEUS_OK;
}

int zeus_pfo_server_port(const zeus_pfo_server *s) { return s ? s->port : -1; }

void zeus_pfo_server_close(zeus_pfo_server *s) {
  if (!s) return;
  if (s->reaper_started) {
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->reaper, NULL);
  }
  if (s->jobs) zeus__job_table_fail_all_waiters(s->jobs, "the server is shutting down");
  /* Give resumed long polls a moment to send their 503 before the daemon stops. */
  for (int i = 0; s->d && i < 200 && atomic_load(&s->parked) > 0; i++) {
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (s->d) MHD_stop_daemon(s->d);
  zeus__job_table_close(s->jobs);
  free(s->token);
  free(s->info_json);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}
