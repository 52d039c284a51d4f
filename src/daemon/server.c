/* `zeus daemon`: libmicrohttpd on a Unix socket we create (and optionally TCP), zeusd's routing,
 * authentication and status codes, the reaper that gives back what dead clients held, and the
 * worker that runs non-blocking writes.
 *
 * The Unix socket is made here (bound with a umask that leaves it private until it is chmod'ed
 * and chown'ed as asked) and handed to libmicrohttpd with MHD_OPTION_LISTEN_SOCKET, so peers are
 * known by SO_PEERCRED. Connections are served one thread each (bounded by max_connections),
 * because a power stream blocks its thread between events and a round trip then needs no hop
 * between threads; requests, headers and bodies are bounded, idle connections time out.
 *
 * Requests are routed by the route table alone (ZEUS__DAEMON_ROUTES in daemon_internal.h, its
 * handlers in routes.c). Checks run in zeusd's order: unknown route 404; disabled API group 404;
 * wrong method 405 (with Allow); the auth routes without authentication 404; with authentication,
 * a missing or invalid bearer token 401 and a token without the route's scope 403; then the
 * route's handler. Counters by route and status are kept for a /metrics page
 * (zeus_daemon_counters). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/crypto.h>

#include "daemon/daemon_internal.h"
#include "device/rapl.h"

static const int STATUS_CODES[ZEUS__DSTATUS_SLOTS] = ZEUS__DSTATUS_CODES;

/* The methods of a route's flags, for an Allow header ("GET, POST") or a message ("GET or POST"). */
static void methods_text(unsigned flags, bool prose, char *buf, size_t len) {
  static const char *const NAMES[] = {"GET", "POST", "DELETE"};
  unsigned n = 0, total = 0;
  for (unsigned i = 0; i < 3; i++) total += (flags >> i) & 1u;
  size_t o = 0;
  buf[0] = '\0';
  for (unsigned i = 0; i < 3; i++) {
    if (!(flags & (1u << i))) continue;
    const char *sep = !n ? "" : (prose && n + 1 == total) ? " or " : ", ";
    o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", sep, NAMES[i]);
    n++;
  }
}

static unsigned method_flag(const char *method) {
  if (strcmp(method, "GET") == 0) return ZEUS__RF_GET;
  if (strcmp(method, "POST") == 0) return ZEUS__RF_POST;
  if (strcmp(method, "DELETE") == 0) return ZEUS__RF_DELETE;
  return 0;
}

/* ---- replies ---- */

static void count(zeus__dreq *q, int status) {
  int slot = ZEUS__DSTATUS_SLOTS - 1;
  for (int i = 0; i < ZEUS__DSTATUS_SLOTS - 1; i++)
    if (STATUS_CODES[i] == status) { slot = i; break; }
  atomic_fetch_add(&q->d->counts[q->route][slot], 1);
  q->status = status;
}

int zeus__dreply(zeus__dreq *q, int status, json_t *body) {
  char *text = NULL;
  size_t len = 0;
  if (body) {
    text = zeus_json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (!text) return MHD_NO;
    len = strlen(text);
  }
  struct MHD_Response *r = text ? MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_COPY)
                                : MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  zeus_free(text);
  if (!r) return MHD_NO;
  if (body) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"zeusd\"");
  if (status == 405) {
    char allow[32];
    methods_text(zeus__droute_table[q->route].flags, false, allow, sizeof allow);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
  }
  count(q, status);
  int rc = MHD_queue_response(q->c, (unsigned)status, r);
  MHD_destroy_response(r);
  return rc;
}

int zeus__dreply_text(zeus__dreq *q, int status, const char *content_type, const char *text, size_t len) {
  struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  count(q, status);
  int rc = MHD_queue_response(q->c, (unsigned)status, r);
  MHD_destroy_response(r);
  return rc;
}

int zeus__dreply_error(zeus__dreq *q, int status, const char *fmt, ...) {
  char msg[1200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return zeus__dreply(q, status, json_pack("{s:s}", "error", msg));
}

int zeus__dreply_stream(zeus__dreq *q, void *ctx, long (*reader)(void *, uint64_t, char *, size_t),
                        void (*free_ctx)(void *)) {
  struct MHD_Response *r =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, (MHD_ContentReaderCallback)reader, ctx, free_ctx);
  if (!r) { free_ctx(ctx); return MHD_NO; }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  count(q, 200);
  int rc = MHD_queue_response(q->c, 200, r);
  MHD_destroy_response(r);
  return rc;
}

int zeus__dstatus_of(int code) {
  switch (code) {
    case ZEUS_OK: return 200;
    case ZEUS_EINVAL:
    case ZEUS_ERANGE:
    case ZEUS_ENOTSUP:
    case ZEUS_ENOENT:
    case ZEUS_EPARSE: return 400;
    case ZEUS_EPERM: return 403;
    case ZEUS_EBUSY: return 409;
    default: return 500;
  }
}

/* ---- parameters ---- */

const char *zeus__dparam(zeus__dreq *q, const char *name) {
  for (unsigned i = 0; i < q->np; i++)
    if (strcmp(q->p[i].name, name) == 0) {
      q->p[i].used = true;
      return q->p[i].value ? q->p[i].value : "";
    }
  return NULL;
}

static int add_param(zeus__dreq *q, const char *name, const char *value) {
  for (unsigned i = 0; i < q->np; i++)
    if (strcmp(q->p[i].name, name) == 0) { q->param_error = "given twice"; return MHD_NO; }
  if (q->np == ZEUS__DMAX_PARAMS) { q->param_error = "too many"; return MHD_NO; }
  q->p[q->np].name = strdup(name);
  q->p[q->np].value = value ? strdup(value) : NULL;
  if (!q->p[q->np].name || (value && !q->p[q->np].value)) { q->param_error = "out of memory"; return MHD_NO; }
  q->np++;
  return MHD_YES;
}

static enum MHD_Result collect_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  (void)kind;
  zeus__dreq *q = cls;
  if (q->param_error) return MHD_NO;
  if (add_param(q, key, value) != MHD_YES) {
    /* Keep which parameter it was for the message. */
    static _Thread_local char msg[160];
    snprintf(msg, sizeof msg, "parameter '%.64s' %s", key, q->param_error);
    q->param_error = msg;
    return MHD_NO;
  }
  return MHD_YES;
}

/* The legacy zeusd form POST /gpu/<n>/<op> carries its fields as a JSON object. */
static int legacy_body_params(zeus__dreq *q) {
  if (!q->body.len) return ZEUS_OK;
  json_error_t e;
  json_t *j = json_loadb(q->body.data, q->body.len, JSON_REJECT_DUPLICATES, &e);
  if (!j || !json_is_object(j)) {
    json_decref(j);
    q->param_error = "the request body is not a JSON object";
    return ZEUS_EPARSE;
  }
  const char *k;
  json_t *v;
  json_object_foreach(j, k, v) {
    char buf[32];
    if (json_is_boolean(v)) snprintf(buf, sizeof buf, "%s", json_is_true(v) ? "true" : "false");
    else if (json_is_integer(v)) snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v));
    else {
      static _Thread_local char msg[160];
      snprintf(msg, sizeof msg, "field '%.64s' of the request body must be a number or a boolean", k);
      q->param_error = msg;
      break;
    }
    if (collect_arg(q, MHD_GET_ARGUMENT_KIND, k, buf) != MHD_YES) break;
  }
  json_decref(j);
  return q->param_error ? ZEUS_EPARSE : ZEUS_OK;
}

/* ---- routing and authentication ---- */

/* Finds the route of a path; "/gpu/<n>/<op>" (zeusd before 0.2) maps to /gpu/<op> for GPU n. */
static zeus__droute find_route(const char *path, int *legacy_gpu) {
  *legacy_gpu = -1;
  for (int r = 0; r < ZEUS__R_OTHER; r++)
    if (strcmp(path, zeus__droute_table[r].path) == 0) return (zeus__droute)r;
  if (strncmp(path, "/gpu/", 5) == 0 && path[5] >= '0' && path[5] <= '9') {
    char *end;
    unsigned long n = strtoul(path + 5, &end, 10);
    if (*end == '/' && n < ZEUS_MAX_GPUS && end - (path + 5) <= 3) {
      char full[96];
      snprintf(full, sizeof full, "/gpu%.80s", end);
      for (int r = 0; r < ZEUS__R_OTHER; r++)
        if ((zeus__droute_table[r].flags & ZEUS__RF_LEGACY) && strcmp(full, zeus__droute_table[r].path) == 0) {
          *legacy_gpu = (int)n;
          return (zeus__droute)r;
        }
    }
  }
  return ZEUS__R_OTHER;
}

static void scope_list(unsigned scopes, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (unsigned b = 1; b <= ZEUS_DAEMON_CPU_CONTROL; b <<= 1)
    if (scopes & b)
      o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s'%s'", o ? ", " : "", zeus__daemon_group_name(b));
}

/* 0 when the request may go on; otherwise the reply was queued (its MHD result in *mhd). */
static int check_access(zeus__dreq *q, int *mhd) {
  zeus_daemon *d = q->d;
  const zeus__droute_def *rd = &zeus__droute_table[q->route];
  if (q->route == ZEUS__R_OTHER) {
    *mhd = zeus__dreply_error(q, 404, "no route %.200s (see docs/daemon.md for the API)", q->path);
    return 1;
  }
  if (rd->group && !(d->o.groups & rd->group)) {
    *mhd = zeus__dreply_error(q, 404, "API group '%s' is not enabled on this server.",
                              zeus__daemon_group_name(rd->group));
    return 1;
  }
  unsigned m = method_flag(q->method);
  if (!(rd->flags & m)) {
    char takes[32];
    methods_text(rd->flags, true, takes, sizeof takes);
    *mhd = zeus__dreply_error(q, 405, "%s takes %s, not %.20s", rd->path, takes, q->method);
    return 1;
  }
  if ((rd->flags & ZEUS__RF_WITH_KEY) && !d->key) {
    *mhd = zeus__dreply_error(q, 404, "Authentication is not enabled on this server.");
    return 1;
  }
  unsigned scopes = m == ZEUS__RF_GET ? rd->get_scopes : rd->write_scopes;
  if (!d->key || !scopes) return 0;
  const char *h = MHD_lookup_connection_value(q->c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
    *mhd = zeus__dreply_error(q, 401, "Authentication required. Provide an Authorization: Bearer <token> header.");
    return 1;
  }
  h += 7;
  while (*h == ' ') h++;
  if (zeus__jwt_verify(d->key, d->keylen, h, (long long)time(NULL), &q->claims) != ZEUS_OK) {
    *mhd = zeus__dreply_error(q, 401, "%s", zeus_errmsg());
    return 1;
  }
  q->authed = true;
  if (scopes != ZEUS__DSCOPE_ANY && !(q->claims.scopes & scopes)) {
    char have[96], need[96];
    scope_list(q->claims.scopes, have, sizeof have);
    scope_list(scopes, need, sizeof need);
    *mhd = zeus__dreply_error(q, 403, "Token for user '%s' lacks required scope %s. Token scopes: [%s]", q->claims.sub,
                              need, have);
    return 1;
  }
  return 0;
}

static void identify(zeus__dreq *q) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(q->c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (q->uds) {
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0) {
      q->pid = cr.pid;
      q->uid = cr.uid;
    }
    return;
  }
  const union MHD_ConnectionInfo *ai = MHD_get_connection_info(q->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!ai || !ai->client_addr) return;
  char host[INET6_ADDRSTRLEN] = "?";
  const struct sockaddr *sa = ai->client_addr;
  unsigned port = 0;
  if (sa->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const void *)sa;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (sa->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const void *)sa;
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  snprintf(q->addr, sizeof q->addr, sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
  if (zeus__http_guard_uid(q->conn, &q->uid)) q->tcp_uid = true;
}

/* ---- connections: per-client limits and the request deadline ----
 * The connection guard (src/http/guard.c) counts connections from libmicrohttpd's start and end
 * notices (MHD_OPTION_NOTIFY_CONNECTION) of both listeners: a client (a uid, on the Unix socket or
 * from loopback TCP; else a TCP address) counts once across them, the last
 * --reserved-connections of the Unix socket's --max-connections are kept for root, a connection
 * beyond a limit is answered 503 at once and shut down, and so is one that has not delivered a
 * whole request within --request-timeout of opening or of its previous reply. Power streams are
 * the guard's claims, bound by --max-streams-per-client. */

enum { LISTENER_UDS, LISTENER_TCP };

bool zeus__dstream_admit(zeus__dreq *q, int *mhd) {
  unsigned mine = 0;
  if (zeus__http_guard_claim(q->d->guard, q->conn, &mine)) return true;
  *mhd = zeus__dreply_error(q, 503, "%s holds %u power streams, the most one client may hold "
                            "(--max-streams-per-client); close one first", zeus__http_guard_who(q->conn), mine);
  return false;
}

void zeus__daemon_conn_stats(zeus_daemon *d, unsigned *open, unsigned long long *refused,
                             unsigned long long *timed_out) {
  zeus__http_guard_stats(d->guard, open, refused, timed_out);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)version;
  zeus__dlistener *li = cls;
  zeus__dreq *q = *con_cls;
  if (!q) {
    q = calloc(1, sizeof *q);
    if (!q) return MHD_NO;
    q->d = li->d;
    q->c = c;
    q->uds = li->uds;
    q->path = url;
    q->method = method;
    q->legacy_gpu = -1;
    q->route = find_route(url, &q->legacy_gpu);
    q->conn = zeus__http_mhd_conn(c);
    *con_cls = q;
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > li->d->o.max_body_bytes) q->too_big = true;
    return MHD_YES;
  }
  if (*upload_size) {
    if (!q->too_big && q->body.len + *upload_size > q->d->o.max_body_bytes) q->too_big = true;
    if (!q->too_big && zeus__buf_append(&q->body, upload, *upload_size)) q->too_big = true;
    *upload_size = 0;
    return MHD_YES;
  }
  zeus__http_guard_busy(q->d->guard, q->conn, true); /* the whole request is here: the deadline is met */
  int mhd;
  if (check_access(q, &mhd)) return mhd;
  if (q->too_big)
    return zeus__dreply_error(q, 413, "the request body is larger than %u bytes", q->d->o.max_body_bytes);
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_arg, q);
  if (!q->param_error && q->legacy_gpu >= 0) legacy_body_params(q);
  if (q->param_error) return zeus__dreply_error(q, 400, "%s", q->param_error);
  identify(q);
  return zeus__droute_table[q->route].handler(q);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)c;
  (void)toe;
  zeus__dreq *q = *con_cls;
  if (!q) return;
  zeus__http_guard_busy(q->d->guard, q->conn, false);
  for (unsigned i = 0; i < q->np; i++) {
    free(q->p[i].name);
    free(q->p[i].value);
  }
  zeus__buf_free(&q->body);
  free(q);
  *con_cls = NULL;
}

/* ---- the device side of the lease table ---- */

static int dev_read(void *ctx, unsigned gpu, zeus__setting s, zeus__dval *out) {
  zeus_daemon *d = ctx;
  memset(out, 0, sizeof *out);
  switch (s) {
    case ZEUS__SET_POWER_LIMIT: return zeus_gpu_get_power_limit(d->dev, gpu, &out->a);
    case ZEUS__SET_PERSISTENCE: return zeus_gpu_get_persistence_mode(d->dev, gpu, &out->on);
    default: {
      /* NVML cannot read a lock: unless the device layer knows (the simulated GPU, or a lock this
       * daemon made), what came before the daemon counts as unlocked. */
      zeus_clock_lock l;
      int rc = zeus_gpu_get_locked_clocks(d->dev, gpu, s == ZEUS__SET_MEM_LOCK, &l);
      if (!rc && l.state == ZEUS_CLOCK_LOCKED) out->on = true, out->a = l.min_mhz, out->b = l.max_mhz;
      return rc;
    }
  }
}

/* A write through --gpu-command-overrides when the file names its operation: a lock's reset uses
 * its own operation, else reset_locked_clocks (which resets both). ZEUS_ENOENT: not overridden. */
static int dev_write_override(zeus_daemon *d, unsigned gpu, zeus__setting s, const zeus__dval *v) {
  if (!d->overrides) return ZEUS_ENOENT;
  zeus__override_values x = {.gpu = gpu, .enabled = v->on, .power_limit_mw = v->a, .min_clock_mhz = v->a,
                             .max_clock_mhz = v->b};
  zeus__gpu_op op;
  switch (s) {
    case ZEUS__SET_POWER_LIMIT: op = ZEUS__OP_SET_POWER_LIMIT; break;
    case ZEUS__SET_PERSISTENCE: op = ZEUS__OP_SET_PERSISTENCE; break;
    case ZEUS__SET_GPU_LOCK: op = v->on ? ZEUS__OP_SET_GPU_LOCK : ZEUS__OP_RESET_GPU_LOCK; break;
    default: op = v->on ? ZEUS__OP_SET_MEM_LOCK : ZEUS__OP_RESET_MEM_LOCK; break;
  }
  if (!v->on && s != ZEUS__SET_POWER_LIMIT && s != ZEUS__SET_PERSISTENCE && !zeus__overrides_has(d->overrides, op))
    op = ZEUS__OP_RESET_LOCKS;
  return zeus__overrides_run(d->overrides, op, &x);
}

static int dev_write_now(zeus_daemon *d, unsigned gpu, zeus__setting s, const zeus__dval *v) {
  int rc = dev_write_override(d, gpu, s, v);
  if (rc != ZEUS_ENOENT) return rc;
  switch (s) {
    case ZEUS__SET_POWER_LIMIT: return zeus_gpu_set_power_limit(d->dev, gpu, v->a);
    case ZEUS__SET_PERSISTENCE: return zeus_gpu_set_persistence_mode(d->dev, gpu, v->on);
    case ZEUS__SET_GPU_LOCK:
      return v->on ? zeus_gpu_set_locked_clocks(d->dev, gpu, v->a, v->b) : zeus_gpu_reset_locked_clocks(d->dev, gpu);
    default:
      return v->on ? zeus_gpu_set_memory_locked_clocks(d->dev, gpu, v->a, v->b)
                   : zeus_gpu_reset_memory_locked_clocks(d->dev, gpu);
  }
}

/* Both clock locks unlocked: a --gpu-command-overrides reset_locked_clocks runs once; where the
 * file overrides a one-domain reset instead, the two writes (each through its own); otherwise
 * zeus_gpu_reset_all_clocks, one backend operation (amdsmi: one amdsmi_set_gpu_perf_level). */
static int dev_reset_locks_now(zeus_daemon *d, unsigned gpu) {
  if (d->overrides) {
    zeus__override_values x = {.gpu = gpu};
    if (zeus__overrides_has(d->overrides, ZEUS__OP_RESET_LOCKS))
      return zeus__overrides_run(d->overrides, ZEUS__OP_RESET_LOCKS, &x);
    if (zeus__overrides_has(d->overrides, ZEUS__OP_RESET_GPU_LOCK) ||
        zeus__overrides_has(d->overrides, ZEUS__OP_RESET_MEM_LOCK)) {
      const zeus__dval off = {0};
      int rc = dev_write_now(d, gpu, ZEUS__SET_GPU_LOCK, &off);
      return rc ? rc : dev_write_now(d, gpu, ZEUS__SET_MEM_LOCK, &off);
    }
  }
  return zeus_gpu_reset_all_clocks(d->dev, gpu);
}

/* Runs queued non-blocking writes (lease lock held). */
static void drain_queue(zeus_daemon *d) {
  while (d->qlen) {
    zeus__dwrite w = d->queue[d->qhead];
    d->qhead = (d->qhead + 1) % ZEUS__DQUEUE;
    d->qlen--;
    if (w.both_locks ? dev_reset_locks_now(d, w.gpu) : dev_write_now(d, w.gpu, w.s, &w.v))
      zeus__log(ZEUS_LOG_ERROR, "daemon", "GPU %u: non-blocking %s change failed: %s", w.gpu,
                w.both_locks ? "clock locks" : zeus__setting_name(w.s), zeus_errmsg());
  }
}

static int dev_write(void *ctx, unsigned gpu, zeus__setting s, const zeus__dval *v) {
  zeus_daemon *d = ctx;
  if (d->async_now && d->qlen < ZEUS__DQUEUE && d->worker_started) {
    d->queue[(d->qhead + d->qlen) % ZEUS__DQUEUE] = (zeus__dwrite){.gpu = gpu, .s = s, .v = *v};
    d->qlen++;
    pthread_cond_signal(&d->qcv);
    return ZEUS_OK;
  }
  drain_queue(d);
  return dev_write_now(d, gpu, s, v);
}

static int dev_reset_locks(void *ctx, unsigned gpu) {
  zeus_daemon *d = ctx;
  if (d->async_now && d->qlen < ZEUS__DQUEUE && d->worker_started) {
    d->queue[(d->qhead + d->qlen) % ZEUS__DQUEUE] = (zeus__dwrite){.gpu = gpu, .both_locks = true};
    d->qlen++;
    pthread_cond_signal(&d->qcv);
    return ZEUS_OK;
  }
  drain_queue(d);
  return dev_reset_locks_now(d, gpu);
}

const zeus__lease_dev zeus__daemon_lease_dev = {dev_read, dev_write, NULL, dev_reset_locks};

void zeus__daemon_sync(zeus_daemon *d) {
  zeus__leases_lock(d->L);
  drain_queue(d);
  zeus__leases_unlock(d->L);
}

/* The worker drains the queue under the lease table's lock, waiting on qcv with that lock. */
static void *worker_main(void *arg) {
  zeus_daemon *d = arg;
  zeus__leases_lock(d->L);
  while (!atomic_load(&d->stopping)) {
    if (!d->qlen) {
      pthread_cond_wait(&d->qcv, zeus__leases_mutex(d->L));
      continue;
    }
    drain_queue(d);
  }
  drain_queue(d);
  zeus__leases_unlock(d->L);
  return NULL;
}

void zeus__daemon_wake(zeus_daemon *d) {
  uint64_t one = 1;
  if (d->wake_fd >= 0 && write(d->wake_fd, &one, sizeof one) < 0) { /* the reaper wakes within 250 ms anyway */ }
}

/* Waits on every lease's pidfd and on the next TTL expiry, then ends leases whose client is gone. */
static void *reaper_main(void *arg) {
  zeus_daemon *d = arg;
  enum { MAXW = 1025 };
  struct pollfd *pf = calloc(MAXW, sizeof *pf);
  int *fds = calloc(MAXW, sizeof *fds);
  if (!pf || !fds) {
    zeus__log(ZEUS_LOG_ERROR, "daemon", "out of memory: the lease reaper does not run");
    free(pf);
    free(fds);
    return NULL;
  }
  while (!atomic_load(&d->stopping)) {
    zeus__leases_lock(d->L);
    unsigned n = zeus__leases_pidfds(d->L, fds, MAXW - 1);
    double next = zeus__leases_next_expiry(d->L);
    zeus__leases_unlock(d->L);
    pf[0] = (struct pollfd){.fd = d->wake_fd, .events = POLLIN};
    for (unsigned i = 0; i < n; i++) pf[i + 1] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    int timeout = 250;
    if (next > 0) {
      double wait = next - zeus_monotonic_s();
      if (wait < 0) wait = 0;
      if (wait * 1000 < timeout) timeout = (int)(wait * 1000) + 1;
    }
    int r = poll(pf, n + 1, timeout);
    if (r > 0 && (pf[0].revents & POLLIN)) {
      uint64_t v;
      if (read(d->wake_fd, &v, sizeof v) < 0) { /* nothing to drain */ }
    }
    if (atomic_load(&d->stopping)) break;
    zeus__leases_lock(d->L);
    zeus__leases_sweep(d->L, zeus_monotonic_s());
    zeus__leases_unlock(d->L);
  }
  free(pf);
  free(fds);
  return NULL;
}

/* ---- sockets ---- */

static int make_parent_dir(const char *path) {
  char *dir = strdup(path);
  if (!dir) return zeus__oom("creating the socket folder");
  char *slash = strrchr(dir, '/');
  int rc = ZEUS_OK;
  if (slash && slash != dir) {
    *slash = '\0';
    struct stat st;
    if (stat(dir, &st) != 0) rc = zeus__mkdirs(dir);
    else if (!S_ISDIR(st.st_mode)) rc = zeus__error(ZEUS_EINVAL, "socket folder '%s' is not a folder", dir);
  }
  free(dir);
  return rc;
}

static int bind_unix(zeus_daemon *d) {
  const char *path = d->socket_path;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path)
    return zeus__error(ZEUS_EINVAL, "socket path '%s' is longer than %zu bytes", path, sizeof sa.sun_path - 1);
  memcpy(sa.sun_path, path, strlen(path) + 1);
  int rc = make_parent_dir(path);
  if (rc) return rc;
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return zeus__error(ZEUS_EEXIST, "'%s' exists and is not a socket; remove it or choose another --socket-path",
                         path);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (probe >= 0) close(probe);
    if (live) return zeus__error(ZEUS_EEXIST, "a daemon already listens on '%s'", path);
    if (unlink(path) != 0)
      return zeus__error(ZEUS_EPERM, "cannot remove the stale socket '%s': %s", path, strerror(errno));
    zeus__log(ZEUS_LOG_INFO, "daemon", "removed the stale socket '%s' (nothing listened on it)", path);
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return zeus__error(ZEUS_EIO, "socket(AF_UNIX): %s", strerror(errno));
  /* Private until chmod: nobody connects before the permissions asked for are in place. */
  mode_t old = umask(0177);
  int b = bind(fd, (struct sockaddr *)&sa, sizeof sa);
  int berr = errno;
  umask(old);
  if (b != 0) {
    close(fd);
    return zeus__error(berr == EACCES ? ZEUS_EPERM : ZEUS_EIO, "cannot bind '%s': %s", path, strerror(berr));
  }
  d->uds_bound = true;
  if (chmod(path, d->o.socket_mode) != 0) {
    close(fd);
    return zeus__error(ZEUS_EPERM, "cannot chmod '%s' to %03o: %s", path, d->o.socket_mode, strerror(errno));
  }
  if ((d->o.socket_uid >= 0 || d->o.socket_gid >= 0) &&
      lchown(path, d->o.socket_uid >= 0 ? (uid_t)d->o.socket_uid : (uid_t)-1,
             d->o.socket_gid >= 0 ? (gid_t)d->o.socket_gid : (gid_t)-1) != 0) {
    close(fd);
    return zeus__error(ZEUS_EPERM, "cannot chown '%s' to %ld:%ld: %s (needs root or CAP_CHOWN)", path, d->o.socket_uid,
                       d->o.socket_gid, strerror(errno));
  }
  if (listen(fd, 128) != 0) {
    close(fd);
    return zeus__error(ZEUS_EIO, "listen on '%s': %s", path, strerror(errno));
  }
  d->uds_fd = fd;
  return ZEUS_OK;
}

static int start_mhd(zeus_daemon *d, bool uds, const struct sockaddr *sa, zeus__dlistener *li) {
  li->d = d;
  li->uds = uds;
  li->on = (zeus__http_mhd_listener){d->guard, uds ? LISTENER_UDS : LISTENER_TCP};
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
  if (!uds && sa->sa_family == AF_INET6) flags |= MHD_USE_IPv6;
  /* Where it listens: the Unix socket we bound, or TCP with the backlog the Unix socket has. */
  struct MHD_OptionItem where[] = {
      uds ? (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, (intptr_t)d->uds_fd, NULL}
          : (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)sa},
      uds ? (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL}
          : (struct MHD_OptionItem){MHD_OPTION_LISTEN_BACKLOG_SIZE, 128, NULL},
      {MHD_OPTION_END, 0, NULL}};
  struct MHD_Daemon *m =
      MHD_start_daemon(flags, 0, NULL, NULL, handle, li, MHD_OPTION_ARRAY, where, MHD_OPTION_NOTIFY_COMPLETED,
                       completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, zeus__http_mhd_notify, &li->on,
                       MHD_OPTION_CONNECTION_LIMIT, d->o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
                       d->o.connection_timeout_s, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
                       MHD_OPTION_END);
  if (!m)
    return zeus__error(uds ? ZEUS_EIO : ZEUS_ENET, "libmicrohttpd could not start on %s",
                       uds ? d->socket_path : d->tcp_address);
  if (uds) {
    d->uds_d = m;
  } else {
    d->tcp_d = m;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(m, MHD_DAEMON_INFO_BIND_PORT);
    d->tcp_port = di ? di->port : 0;
  }
  return ZEUS_OK;
}

static int start_tcp(zeus_daemon *d) {
  char host[256];
  const char *addr = d->tcp_address, *colon = strrchr(addr, ':');
  if (!colon || colon == addr || !colon[1])
    return zeus__error(ZEUS_EINVAL, "TCP address '%s' is not HOST:PORT (e.g. 127.0.0.1:4938)", addr);
  size_t hl = (size_t)(colon - addr);
  if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']') { addr++; hl -= 2; }
  if (hl >= sizeof host) return zeus__error(ZEUS_EINVAL, "TCP host in '%s' is too long", d->tcp_address);
  memcpy(host, addr, hl);
  host[hl] = '\0';
  long port;
  if (zeus__parse_long(colon + 1, 0, 65535, "TCP port", &port)) return ZEUS_EINVAL;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
  char ps[8];
  snprintf(ps, sizeof ps, "%ld", port);
  int g = getaddrinfo(host, ps, &hints, &ai);
  if (g != 0 || !ai) return zeus__error(ZEUS_EINVAL, "TCP address '%s': %s", d->tcp_address, gai_strerror(g));
  int rc = ZEUS_OK;
  if (!zeus__sockaddr_is_loopback(ai->ai_addr) && !d->key && !d->o.allow_unauthenticated_tcp)
    rc = zeus__error(ZEUS_EINVAL,
                     "refusing unauthenticated TCP on the non-loopback address '%s': give a signing key "
                     "(--signing-key-path) or opt in with --allow-unauthenticated-tcp",
                     d->tcp_address);
  if (!rc) rc = start_mhd(d, false, ai->ai_addr, &d->li[1]);
  freeaddrinfo(ai);
  return rc;
}

/* ---- privileges ---- */

static bool has_cap(int cap) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return false;
  char line[256];
  unsigned long long eff = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "CapEff: %llx", &eff) == 1) break;
  fclose(f);
  return (eff >> cap) & 1ull;
}

#define CAP_DAC_READ_SEARCH_ 2
#define CAP_SYS_ADMIN_ 21

static int check_privileges(zeus_daemon *d) {
  if (d->o.skip_privilege_check || geteuid() == 0) return ZEUS_OK;
  if ((d->o.groups & ZEUS_DAEMON_GPU_CONTROL) && !d->sim && zeus__overrides_count(d->overrides) &&
      !has_cap(CAP_SYS_ADMIN_)) {
    /* As zeusd: the commands carry the privilege; what they do not cover goes to NVML and may fail. */
    char names[256];
    zeus__overrides_names(d->overrides, names, sizeof names);
    zeus__log(ZEUS_LOG_INFO, "daemon", "gpu-control without root: command overrides cover %s", names);
    if (zeus__overrides_count(d->overrides) < ZEUS__OP_COUNT)
      zeus__log(ZEUS_LOG_WARN, "daemon",
                "GPU control operations without a command override use NVML and may fail for lack of privilege");
  } else if ((d->o.groups & ZEUS_DAEMON_GPU_CONTROL) && !d->sim && !has_cap(CAP_SYS_ADMIN_))
    return zeus__error(ZEUS_EPERM,
                       "API group gpu-control needs root or CAP_SYS_ADMIN (%s); run the daemon as root, give it "
                       "CAP_SYS_ADMIN, or leave the group out (--enable gpu-read,cpu-read)",
                       strcmp(zeus_devices_backend(d->dev), "amdsmi") == 0
                           ? "amdsmi's power-cap and clock setters write the GPUs' sysfs files"
                           : "NVML's power-limit, clock and persistence setters");
  if (d->o.groups & ZEUS_DAEMON_CPU_READ) {
    unsigned unreadable = zeus__rapl_unreadable(d->rapl);
    if (unreadable && !has_cap(CAP_DAC_READ_SEARCH_))
      return zeus__error(ZEUS_EPERM,
                         "API group cpu-read needs root or CAP_DAC_READ_SEARCH: %u RAPL energy counter%s under %s %s "
                         "readable by root only; run the daemon as root, give it the capability, or leave the group "
                         "out (--enable gpu-control,gpu-read)",
                         unreadable, unreadable == 1 ? "" : "s", zeus__rapl_root(), unreadable == 1 ? "is" : "are");
  }
  return ZEUS_OK;
}

/* ---- open and close ---- */

void zeus_daemon_opts_init(zeus_daemon_opts *o) {
  memset(o, 0, sizeof *o);
  o->socket_uid = -1;
  o->socket_gid = -1;
}

static int open_devices(zeus_daemon *d) {
  zeus_devices_opts dopts = {0};
  if (d->o.devices) dopts = *d->o.devices;
  dopts.all_devices = true;
  dopts.keep_settings_on_close = true; /* the lease table gives back what it changed */
  dopts.daemon = "";                   /* never a client of a daemon, ourselves least of all */
  int rc = zeus_devices_open(&d->dev, &dopts);
  if (rc) return zeus__error_ctx(rc, "opening the GPUs");
  d->sim = strcmp(zeus_devices_backend(d->dev), "sim") == 0;
  d->ngpus = (d->o.groups & (ZEUS_DAEMON_GPU_CONTROL | ZEUS_DAEMON_GPU_READ)) ? zeus_gpu_count(d->dev) : 0;
  d->gpus = calloc(d->ngpus ? d->ngpus : 1, sizeof *d->gpus);
  if (!d->gpus) return zeus__oom("listing the GPUs");
  for (unsigned g = 0; g < d->ngpus; g++) {
    zeus__dgpu *x = &d->gpus[g];
    if (zeus_gpu_name(d->dev, g, x->name, sizeof x->name)) snprintf(x->name, sizeof x->name, "unknown");
    if (zeus_gpu_uuid(d->dev, g, x->uuid, sizeof x->uuid)) snprintf(x->uuid, sizeof x->uuid, "GPU-unknown-%u", g);
    if (zeus_gpu_pci_address(d->dev, g, x->pci, sizeof x->pci)) x->pci[0] = '\0';
    bool ok = false;
    x->energy_ok = zeus_gpu_energy_counter_supported(d->dev, g, &ok) == ZEUS_OK && ok;
  }
  if (d->o.groups & ZEUS_DAEMON_CPU_READ) {
    /* Our own scan only: a daemon never reads RAPL through another daemon. */
    if ((rc = zeus__rapl_open_local(&d->rapl))) return rc;
    d->ncpus = zeus__rapl_count(d->rapl);
    for (unsigned i = 0; i < d->ncpus; i++) {
      zeus_cpu_zone z;
      zeus__rapl_info(d->rapl, i, &z);
      d->cpus[i].pkg = z.zone;
      d->cpus[i].dram = z.has_dram;
      zeus__rapl_range(d->rapl, i, &d->cpus[i].range_uj, &d->cpus[i].dram_range_uj);
    }
  }
  return ZEUS_OK;
}

int zeus_daemon_open(zeus_daemon **out, const zeus_daemon_opts *opts) {
  if (!out || !opts) return zeus__error(ZEUS_EINVAL, "zeus_daemon_open: out and options are required");
  if (!opts->socket_path && !opts->tcp_address)
    return zeus__error(ZEUS_EINVAL, "the daemon needs a Unix socket path or a TCP address to listen on");
  if (opts->groups & ~(unsigned)ZEUS_DAEMON_ALL_GROUPS)
    return zeus__error(ZEUS_EINVAL, "unknown API group bits 0x%x (the daemon serves gpu-control, gpu-read, cpu-read)",
                       opts->groups);
  if (opts->socket_mode > 0777)
    return zeus__error(ZEUS_EINVAL, "socket mode %o is not a permission mode", opts->socket_mode);
  zeus_daemon *d = calloc(1, sizeof *d);
  if (!d) return zeus__oom("starting the daemon");
  d->o = *opts;
  d->uds_fd = -1;
  d->wake_fd = -1;
  pthread_cond_init(&d->qcv, NULL);
  if (!d->o.groups) d->o.groups = ZEUS_DAEMON_ALL_GROUPS;
  if (!d->o.socket_mode) d->o.socket_mode = 0666;
  if (!d->o.max_connections) d->o.max_connections = 256;
  if (!d->o.connection_timeout_s) d->o.connection_timeout_s = 30;
  if (!d->o.max_body_bytes) d->o.max_body_bytes = 4096;
  if (!(d->o.gpu_poll_hz > 0)) d->o.gpu_poll_hz = 20;
  if (!(d->o.cpu_poll_hz > 0)) d->o.cpu_poll_hz = 10;
  if (d->o.gpu_poll_hz > 1000 || d->o.cpu_poll_hz > 1000) {
    free(d);
    return zeus__error(ZEUS_EINVAL, "power polling above 1000 Hz is not supported");
  }
  if (!d->o.max_lease_ttl_s) d->o.max_lease_ttl_s = 3600;
  if (!d->o.max_leases) d->o.max_leases = 1024;
  if (!d->o.max_leases_per_client) d->o.max_leases_per_client = 64;
  if (!d->o.reserved_leases) d->o.reserved_leases = d->o.max_leases >= 128 ? 64 : d->o.max_leases / 2;
  if (!d->o.max_connections_per_client) d->o.max_connections_per_client = 32;
  if (!d->o.reserved_connections) d->o.reserved_connections = d->o.max_connections >= 32 ? 16 : d->o.max_connections / 2;
  if (!d->o.max_streams_per_client) d->o.max_streams_per_client = 8;
  if (!d->o.request_timeout_s) d->o.request_timeout_s = 10;
  if (d->o.reserved_leases >= d->o.max_leases || d->o.reserved_connections >= d->o.max_connections) {
    zeus__error(ZEUS_EINVAL, "the reserved leases (%u) and connections (%u) must be fewer than their limits (%u, %u)",
                d->o.reserved_leases, d->o.reserved_connections, d->o.max_leases, d->o.max_connections);
    free(d);
    return ZEUS_EINVAL;
  }
  d->socket_path = opts->socket_path ? strdup(opts->socket_path) : NULL;
  d->tcp_address = opts->tcp_address ? strdup(opts->tcp_address) : NULL;
  d->state_path = opts->state_path ? strdup(opts->state_path) : NULL;
  int rc = ZEUS_OK;
  if ((opts->socket_path && !d->socket_path) || (opts->tcp_address && !d->tcp_address) ||
      (opts->state_path && !d->state_path))
    rc = zeus__oom("starting the daemon");
  if (!rc && opts->signing_key_path) rc = zeus__daemon_read_key(opts->signing_key_path, &d->key, &d->keylen);
  if (!rc && opts->gpu_command_overrides) {
    if (!(d->o.groups & ZEUS_DAEMON_GPU_CONTROL))
      zeus__log(ZEUS_LOG_WARN, "daemon", "GPU command overrides are ignored: the gpu-control API group is not enabled");
    else
      rc = zeus__overrides_load(opts->gpu_command_overrides, &d->overrides);
  }
  if (!rc) rc = open_devices(d);
  if (!rc) rc = check_privileges(d);
  if (!rc) {
    const char **uuids = calloc(d->ngpus ? d->ngpus : 1, sizeof *uuids);
    if (!uuids) rc = zeus__oom("starting the daemon");
    for (unsigned g = 0; !rc && g < d->ngpus; g++) uuids[g] = d->gpus[g].uuid;
    zeus__lease_dev dev = zeus__daemon_lease_dev;
    dev.ctx = d;
    if (!rc && d->state_path) rc = make_parent_dir(d->state_path);
    if (!rc) rc = zeus__leases_open(&d->L, d->ngpus, uuids, &dev, d->state_path, d->o.max_leases);
    if (!rc) zeus__leases_set_limits(d->L, d->o.max_leases, d->o.max_leases_per_client, d->o.reserved_leases);
    free(uuids);
  }
  if (!rc && (d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
    rc = zeus__error(ZEUS_EIO, "eventfd: %s", strerror(errno));
  if (!rc) {
    if (pthread_create(&d->reaper, NULL, reaper_main, d) == 0) d->reaper_started = true;
    else rc = zeus__error(ZEUS_EIO, "cannot start the lease reaper thread");
  }
  if (!rc) {
    if (pthread_create(&d->worker, NULL, worker_main, d) == 0) d->worker_started = true;
    else rc = zeus__error(ZEUS_EIO, "cannot start the worker thread");
  }
  if (!rc) {
    zeus__http_guard_opts go = {.server = "daemon", .max_connections = d->o.max_connections,
                                .max_per_client = d->o.max_connections_per_client,
                                .reserved = d->o.reserved_connections, .no_reserve = !d->o.reserved_connections,
                                .reserve_for_root = true, .reserve_listeners = 1u << LISTENER_UDS,
                                .identify_all = true, .request_timeout_s = d->o.request_timeout_s,
                                .max_claims_per_client = d->o.max_streams_per_client,
                                .claims_option = "--max-streams-per-client",
                                .connections_option = "--reserved-connections", .error_field = "error"};
    rc = zeus__http_guard_open(&d->guard, &go);
  }
  if (!rc && d->socket_path) rc = bind_unix(d);
  if (!rc && d->socket_path) rc = start_mhd(d, true, NULL, &d->li[0]);
  if (!rc && d->tcp_address) rc = start_tcp(d);
  if (rc) {
    char saved[1200];
    snprintf(saved, sizeof saved, "%s", zeus_errmsg());
    zeus_daemon_close(d);
    return zeus__error(rc, "%s", saved);
  }
  zeus__log(ZEUS_LOG_INFO, "daemon", "serving %u GPU%s (%s) and %u CPU package%s%s%s%s%s; groups:%s%s%s; auth %s",
            d->ngpus, d->ngpus == 1 ? "" : "s", zeus_devices_backend(d->dev), d->ncpus, d->ncpus == 1 ? "" : "s",
            d->socket_path ? " on " : "", d->socket_path ? d->socket_path : "", d->tcp_address ? " and TCP " : "",
            d->tcp_address ? d->tcp_address : "", (d->o.groups & ZEUS_DAEMON_GPU_CONTROL) ? " gpu-control" : "",
            (d->o.groups & ZEUS_DAEMON_GPU_READ) ? " gpu-read" : "",
            (d->o.groups & ZEUS_DAEMON_CPU_READ) ? " cpu-read" : "", d->key ? "on (JWT HS256)" : "off");
  *out = d;
  return ZEUS_OK;
}

int zeus_daemon_tcp_port(const zeus_daemon *d) { return d ? d->tcp_port : 0; }

void zeus_daemon_close(zeus_daemon *d) {
  if (!d) return;
  atomic_store(&d->stopping, true);
  if (d->uds_d) MHD_stop_daemon(d->uds_d); /* closes the listen socket we passed */
  else if (d->uds_fd >= 0) close(d->uds_fd);
  if (d->tcp_d) MHD_stop_daemon(d->tcp_d);
  zeus__http_guard_close(d->guard); /* every connection was released */
  d->guard = NULL;
  if (d->uds_bound && d->socket_path && unlink(d->socket_path) != 0 && errno != ENOENT)
    zeus__log(ZEUS_LOG_WARN, "daemon", "cannot remove the socket '%s': %s", d->socket_path, strerror(errno));
  zeus__daemon_wake(d);
  if (d->L) {
    zeus__leases_lock(d->L);
    pthread_cond_broadcast(&d->qcv);
    zeus__leases_unlock(d->L);
  }
  if (d->reaper_started) pthread_join(d->reaper, NULL);
  if (d->worker_started) pthread_join(d->worker, NULL);
  d->worker_started = false;
  zeus__leases_close(d->L, "the daemon stopped"); /* gives back through the overrides too */
  zeus__overrides_free(d->overrides);
  if (d->wake_fd >= 0) close(d->wake_fd);
  zeus_devices_close(d->dev);
  zeus__rapl_close(d->rapl);
  if (d->key) OPENSSL_cleanse(d->key, d->keylen);
  free(d->key);
  free(d->gpus);
  free(d->socket_path);
  free(d->tcp_address);
  free(d->state_path);
  pthread_cond_destroy(&d->qcv);
  free(d);
}

void zeus_daemon_counters(zeus_daemon *d, zeus_daemon_counter_fn fn, void *userdata) {
  if (!d || !fn) return;
  for (int r = 0; r < ZEUS__R_COUNT; r++)
    for (int s = 0; s < ZEUS__DSTATUS_SLOTS; s++) {
      unsigned long long v = atomic_load(&d->counts[r][s]);
      if (v) fn(zeus__droute_table[r].path, STATUS_CODES[s], v, userdata);
    }
}

void zeus_daemon_lease_stats(zeus_daemon *d, unsigned *live, unsigned long long *restores) {
  if (live) *live = d ? zeus__leases_live(d->L) : 0;
  if (restores) *restores = d ? zeus__leases_restores(d->L) : 0;
}
