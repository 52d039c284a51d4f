/* libzeus as a client of the daemon: HTTP/1.1 over one persistent Unix or TCP socket per handle,
 * the daemon's errors turned into zeus codes with its own words, and the handle's lease. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "device/zeusd_client.h"
#include "zeus/version.h"

#define MAX_REPLY (4u << 20)
#define LEASE_HEADER "X-Zeus-Lease"

typedef struct conn {
  int fd;
  pid_t pid; /* the process that connected: another one (a fork child) reconnects */
  char *buf;  /* bytes read past the last reply (none with well-behaved servers) */
  size_t blen, bcap;
} conn;

struct zeus__zeusd {
  bool uds;
  char *path;                 /* Unix socket */
  char *host, *port, *hostport;
  char *token;                /* bearer token, or NULL */
  bool persist, override;
  double timeout_s;
  pthread_mutex_t mu;         /* guards c, the lease and the discover cache */
  conn c;
  json_t *discover;
  /* The lease: 0 none yet, 1 held, 2 the daemon has none (original zeusd) */
  int lease_state;
  char lease[33];
  pid_t lease_pid;
  unsigned ttl_s;
  /* TCP: the renewing thread, with its own connection */
  pthread_t renewer;
  bool renewer_started, closing;
  pthread_cond_t cv;
};

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- configuration ---- */

static const char *env_spec(bool *tcp) {
  const char *s = zeus__env_str("ZEUSD_SOCK_PATH");
  *tcp = false;
  if (s) return s;
  s = zeus__env_str("ZEUSD_HOST_PORT");
  if (s) *tcp = true;
  return s;
}

bool zeus__zeusd_configured(const char *spec) {
  bool tcp;
  if (spec) return *spec != '\0';
  return env_spec(&tcp) != NULL;
}

static int parse_spec(zeus__zeusd *z, const char *spec, bool tcp_hint) {
  if (strncmp(spec, "unix:", 5) == 0) { spec += 5; tcp_hint = false; }
  else if (strncmp(spec, "tcp:", 4) == 0) { spec += 4; tcp_hint = true; }
  else if (spec[0] == '/') tcp_hint = false;
  else if (!tcp_hint && strchr(spec, ':')) tcp_hint = true;
  if (!tcp_hint) {
    if (strlen(spec) >= sizeof(((struct sockaddr_un *)0)->sun_path))
      return zeus__error(ZEUS_EINVAL, "daemon socket path '%s' is too long", spec);
    z->uds = true;
    z->path = strdup(spec);
    return z->path ? ZEUS_OK : zeus__oom("naming the daemon");
  }
  const char *colon = strrchr(spec, ':');
  if (!colon || colon == spec || !colon[1])
    return zeus__error(ZEUS_EINVAL, "daemon address '%s' is not HOST:PORT (ZEUSD_HOST_PORT, e.g. 127.0.0.1:4938)",
                       spec);
  long port;
  if (zeus__parse_long(colon + 1, 1, 65535, "daemon port", &port)) return ZEUS_EINVAL;
  const char *h = spec;
  size_t hl = (size_t)(colon - spec);
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { h++; hl -= 2; }
  z->host = strndup(h, hl);
  z->port = strdup(colon + 1);
  z->hostport = strdup(spec);
  return z->host && z->port && z->hostport ? ZEUS_OK : zeus__oom("naming the daemon");
}

const char *zeus__zeusd_endpoint(const zeus__zeusd *z) { return z ? (z->uds ? z->path : z->hostport) : "(none)"; }

/* ---- the socket ---- */

static void conn_close(conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->blen = 0;
}

static int conn_open(zeus__zeusd *z, conn *c, double deadline) {
  conn_close(c);
  int fd = -1;
  if (z->uds) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, z->path, strlen(z->path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
      int e = errno;
      if (fd >= 0) close(fd);
      return zeus__error(e == EACCES ? ZEUS_EPERM : ZEUS_ENET, "cannot reach the zeus daemon at '%s': %s%s", z->path,
                         strerror(e),
                         e == EACCES ? " (the socket's permissions keep this user out)" : " (is it running?)");
    }
  } else {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL, *a;
    int g = getaddrinfo(z->host, z->port, &hints, &ai);
    if (g != 0) return zeus__error(ZEUS_ENET, "zeus daemon at '%s': %s", z->hostport, gai_strerror(g));
    int err = ECONNREFUSED;
    for (a = ai; a; a = a->ai_next) {
      fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) { err = errno; continue; }
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
      if (errno == EINPROGRESS) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        int ms = (int)((deadline - mono_now()) * 1000);
        int so = 0;
        socklen_t sl = sizeof so;
        if (ms > 0 && poll(&p, 1, ms) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) == 0 && so == 0) break;
        err = so ? so : ETIMEDOUT;
      } else {
        err = errno;
      }
      close(fd);
      fd = -1;
    }
    freeaddrinfo(ai);
    if (fd < 0)
      return zeus__error(err == ETIMEDOUT ? ZEUS_ETIMEDOUT : ZEUS_ENET,
                         "cannot reach the zeus daemon at %s: %s (is it running?)", z->hostport, strerror(err));
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  c->fd = fd;
  c->pid = getpid();
  return ZEUS_OK;
}

static int wait_fd(int fd, short ev, double deadline) {
  for (;;) {
    int ms = (int)((deadline - mono_now()) * 1000);
    if (ms <= 0) return -2;
    struct pollfd p = {.fd = fd, .events = ev};
    int r = poll(&p, 1, ms);
    if (r > 0) return 0;
    if (r == 0) return -2;
    if (errno != EINTR) return -1;
  }
}

/* Sends all of `req`; returns 0, -1 (connection broken) or -2 (timeout). */
static int send_all(conn *c, const char *req, size_t len, double deadline) {
  size_t off = 0;
  while (off < len) {
    ssize_t w = send(c->fd, req + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) { off += (size_t)w; continue; }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_fd(c->fd, POLLOUT, deadline);
      if (r) return r;
      continue;
    }
    return -1;
  }
  return 0;
}

/* Reads more bytes into c->buf; returns bytes read, 0 at EOF, -1 error, -2 timeout. */
static ssize_t fill(conn *c, double deadline) {
  if (c->blen + 4096 > c->bcap) {
    size_t cap = c->bcap ? c->bcap * 2 : 8192;
    while (cap < c->blen + 4096) cap *= 2;
    char *nb = realloc(c->buf, cap);
    if (!nb) return -1;
    c->buf = nb;
    c->bcap = cap;
  }
  for (;;) {
    ssize_t r = recv(c->fd, c->buf + c->blen, c->bcap - c->blen - 1, MSG_DONTWAIT);
    if (r > 0) { c->blen += (size_t)r; c->buf[c->blen] = '\0'; return r; }
    if (r == 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    int w = wait_fd(c->fd, POLLIN, deadline);
    if (w) return w;
  }
}

typedef struct reply {
  int status;
  char *body;
  size_t len;
  bool close;
} reply;

/* Reads one response (Content-Length or chunked). Returns 0, -1 broken (no byte seen: *fresh),
 * -2 timeout, -3 malformed / too large. */
static int read_reply(conn *c, reply *r, double deadline, bool *fresh) {
  *fresh = true;
  char *hend;
  while (!(c->buf && (hend = strstr(c->buf, "\r\n\r\n")))) {
    if (c->blen > 65536) return -3;
    ssize_t n = fill(c, deadline);
    if (n <= 0) return n == -2 ? -2 : -1;
    *fresh = false;
  }
  *fresh = false;
  size_t hlen = (size_t)(hend - c->buf) + 4;
  int minor = 1;
  if (sscanf(c->buf, "HTTP/1.%d %d", &minor, &r->status) != 2) return -3;
  r->close = minor == 0;
  long long clen = -1;
  bool chunked = false;
  for (char *line = strstr(c->buf, "\r\n") + 2; line < hend; line = strstr(line, "\r\n") + 2) {
    if (strncasecmp(line, "Content-Length:", 15) == 0) clen = strtoll(line + 15, NULL, 10);
    else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 && strstr(line, "chunked") &&
             strstr(line, "chunked") < strstr(line, "\r\n"))
      chunked = true;
    else if (strncasecmp(line, "Connection:", 11) == 0) {
      const char *v = line + 11;
      while (*v == ' ') v++;
      if (strncasecmp(v, "close", 5) == 0) r->close = true;
      if (strncasecmp(v, "keep-alive", 10) == 0) r->close = false;
    }
  }
  zeus__buf body = {0};
  size_t pos = hlen;
  if (chunked) {
    for (;;) {
      char *crlf;
      while (!(crlf = strstr(c->buf + pos, "\r\n"))) {
        ssize_t n = fill(c, deadline);
        if (n <= 0) { zeus__buf_free(&body); return n == -2 ? -2 : -1; }
      }
      unsigned long long sz = strtoull(c->buf + pos, NULL, 16);
      if (sz > MAX_REPLY || body.len + sz > MAX_REPLY) { zeus__buf_free(&body); return -3; }
      size_t start = (size_t)(crlf - c->buf) + 2;
      while (c->blen < start + sz + 2) {
        ssize_t n = fill(c, deadline);
        if (n <= 0) { zeus__buf_free(&body); return n == -2 ? -2 : -1; }
      }
      if (sz == 0) { pos = start + 2; break; }
      if (zeus__buf_append(&body, c->buf + start, sz)) { zeus__buf_free(&body); return -3; }
      pos = start + sz + 2;
    }
  } else {
    if (clen < 0) { clen = 0; if (!r->close) clen = 0; }
    if ((unsigned long long)clen > MAX_REPLY) return -3;
    while (c->blen < hlen + (size_t)clen) {
      ssize_t n = fill(c, deadline);
      if (n <= 0) return n == -2 ? -2 : -1;
    }
    if (clen && zeus__buf_append(&body, c->buf + hlen, (size_t)clen)) return -3;
    pos = hlen + (size_t)clen;
  }
  memmove(c->buf, c->buf + pos, c->blen - pos);
  c->blen -= pos;
  c->buf[c->blen] = '\0';
  r->body = body.data;
  r->len = body.len;
  return 0;
}

/* One request on `c` (reconnecting once when a kept-alive connection turns out closed). */
static int request(zeus__zeusd *z, conn *c, const char *method, const char *target, const char *lease, reply *r) {
  double deadline = mono_now() + z->timeout_s;
  if (c->fd >= 0 && c->pid != getpid()) {
    /* Inherited across fork: the parent owns that socket and its peer identity. */
    c->fd = -1;
    c->blen = 0;
  }
  zeus__buf req = {0};
  int rc = zeus__buf_printf(&req, "%s %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: libzeus/%s\r\nContent-Length: 0\r\n",
                            method, target, z->uds ? "localhost" : z->hostport, zeus_version());
  if (!rc && z->token) rc = zeus__buf_printf(&req, "Authorization: Bearer %s\r\n", z->token);
  if (!rc && lease) rc = zeus__buf_printf(&req, LEASE_HEADER ": %s\r\n", lease);
  if (!rc) rc = zeus__buf_puts(&req, "\r\n");
  if (rc) return rc;
  for (int attempt = 0; attempt < 2; attempt++) {
    bool reused = c->fd >= 0;
    if (!reused && (rc = conn_open(z, c, deadline))) break;
    int s = send_all(c, req.data, req.len, deadline);
    bool fresh = true;
    if (!s) s = read_reply(c, r, deadline, &fresh);
    if (!s) {
      if (r->close) conn_close(c);
      rc = ZEUS_OK;
      break;
    }
    conn_close(c);
    if (s == -2) {
      rc = zeus__error(ZEUS_ETIMEDOUT, "the zeus daemon at %s did not answer %s %s within %.0f s",
                       zeus__zeusd_endpoint(z), method, target, z->timeout_s);
      break;
    }
    if (s == -3) {
      rc = zeus__error(ZEUS_EHTTP, "the zeus daemon at %s sent a malformed or oversized reply to %s %s",
                       zeus__zeusd_endpoint(z), method, target);
      break;
    }
    if (!(reused && fresh)) {
      rc = zeus__error(ZEUS_ENET, "the connection to the zeus daemon at %s broke during %s %s", zeus__zeusd_endpoint(z),
                       method, target);
      break;
    }
    /* The server closed an idle kept-alive connection before reading this request: once more, fresh. */
  }
  zeus__buf_free(&req);
  return rc;
}

/* Turns a non-200 reply into a zeus error with the daemon's message (for `gpu` when per-device). */
static int reply_error(zeus__zeusd *z, const char *what, const reply *r, int gpu) {
  char msg[900] = "";
  json_error_t e;
  json_t *j = r->len ? json_loadb(r->body, r->len, 0, &e) : NULL;
  const char *m = json_string_value(json_object_get(j, "error"));
  json_t *errs = json_object_get(j, "errors");
  if (!m && json_is_object(errs)) {
    char key[16];
    snprintf(key, sizeof key, "%d", gpu);
    m = json_string_value(json_object_get(errs, key));
    if (!m) {
      const char *k;
      json_t *v;
      json_object_foreach(errs, k, v) { m = json_string_value(v); break; }
    }
  }
  if (m) snprintf(msg, sizeof msg, "%s", m);
  else if (r->len) snprintf(msg, sizeof msg, "%.200s", r->body);
  json_decref(j);
  int code = r->status == 400 ? ZEUS_EINVAL
             : r->status == 401 || r->status == 403 ? ZEUS_EPERM
             : r->status == 404 ? ZEUS_ENOTSUP
             : r->status == 409 ? ZEUS_EBUSY
                                : ZEUS_EHTTP;
  return zeus__error(code, "zeus daemon at %s: %s: HTTP %d%s%s", zeus__zeusd_endpoint(z), what, r->status,
                     msg[0] ? ": " : "", msg);
}

/* ---- open, close, requests ---- */

static double env_timeout(void) {
  double t = 10;
  if (zeus__env_double("ZEUS_DAEMON_TIMEOUT_S", 0.01, 3600, 10, &t)) t = 10;
  return t;
}

int zeus__zeusd_open(zeus__zeusd **out, const char *spec, const char *token, bool persist, bool override) {
  *out = NULL;
  bool tcp = false;
  if (!spec) spec = env_spec(&tcp);
  if (!spec || !*spec) return ZEUS_OK;
  zeus__zeusd *z = calloc(1, sizeof *z);
  if (!z) return zeus__oom("connecting to the daemon");
  z->c.fd = -1;
  pthread_mutex_init(&z->mu, NULL);
  pthread_cond_init(&z->cv, NULL);
  z->persist = persist;
  z->override = override;
  z->timeout_s = env_timeout();
  long ttl = 30;
  zeus__env_long("ZEUS_DAEMON_LEASE_TTL_S", 1, 3600, 30, &ttl);
  z->ttl_s = (unsigned)ttl;
  int rc = parse_spec(z, spec, tcp);
  /* The caller's token wins over the environment's ("" is none): a zeusc ZeusdClient with its own
   * token must act here under the identity it was checked under. */
  const char *tok = token ? (*token ? token : NULL) : zeus__env_str("ZEUSD_TOKEN");
  /* It goes into a header line: a line break would end it (or add headers). Named, never shown. */
  for (const char *p = tok; !rc && p && *p; p++)
    if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
      rc = zeus__error(ZEUS_EINVAL, "the daemon token (%s) has a control character or line break",
                       token ? "daemon_token" : "ZEUSD_TOKEN");
  if (!rc && tok && !(z->token = strdup(tok))) rc = zeus__oom("connecting to the daemon");
  if (rc) { zeus__zeusd_close(z); return rc; }
  *out = z;
  return ZEUS_OK;
}

static void *renew_main(void *arg);

void zeus__zeusd_close(zeus__zeusd *z) {
  if (!z) return;
  pthread_mutex_lock(&z->mu);
  z->closing = true;
  pthread_cond_broadcast(&z->cv);
  pthread_mutex_unlock(&z->mu);
  if (z->renewer_started) pthread_join(z->renewer, NULL);
  if (z->c.pid == getpid()) conn_close(&z->c);
  free(z->c.buf);
  json_decref(z->discover);
  free(z->path);
  free(z->host);
  free(z->port);
  free(z->hostport);
  if (z->token) { memset(z->token, 0, strlen(z->token)); free(z->token); }
  pthread_cond_destroy(&z->cv);
  pthread_mutex_destroy(&z->mu);
  free(z);
}

static int get_locked(zeus__zeusd *z, const char *path, int gpu, json_t **out) {
  reply r = {0};
  int rc = request(z, &z->c, "GET", path, NULL, &r);
  if (rc) return rc;
  if (r.status != 200) {
    rc = reply_error(z, path, &r, gpu);
  } else if (out) {
    json_error_t e;
    *out = json_loadb(r.body ? r.body : "", r.len, 0, &e);
    if (!*out)
      rc = zeus__error(ZEUS_EHTTP, "zeus daemon at %s: %s: the reply is not JSON (%s)", zeus__zeusd_endpoint(z), path,
                       e.text);
  }
  free(r.body);
  return rc;
}

int zeus__zeusd_get(zeus__zeusd *z, const char *path, int gpu, json_t **out) {
  pthread_mutex_lock(&z->mu);
  int rc = get_locked(z, path, gpu, out);
  pthread_mutex_unlock(&z->mu);
  return rc;
}

json_t *zeus__zeusd_discover(zeus__zeusd *z) {
  pthread_mutex_lock(&z->mu);
  if (!z->discover && get_locked(z, "/discover", -1, &z->discover)) z->discover = NULL;
  json_t *d = z->discover;
  pthread_mutex_unlock(&z->mu);
  return d;
}

/* Makes this handle's lease (mutex held). The original zeusd has none: changes go without. */
static int ensure_lease(zeus__zeusd *z) {
  if (z->persist) return ZEUS_OK;
  if (z->lease_state == 1 && z->lease_pid == getpid()) return ZEUS_OK;
  if (z->lease_state == 2) return ZEUS_OK;
  if (!z->discover) {
    int rc = get_locked(z, "/discover", -1, &z->discover);
    if (rc) return rc;
  }
  if (!json_is_true(json_object_get(json_object_get(z->discover, "zeus"), "leases"))) {
    z->lease_state = 2;
    zeus__log(ZEUS_LOG_INFO, "device",
              "the daemon at %s keeps no leases (the original zeusd): changes are not given back "
              "if this process dies",
              zeus__zeusd_endpoint(z));
    return ZEUS_OK;
  }
  char target[64];
  if (z->uds) snprintf(target, sizeof target, "/leases");
  else snprintf(target, sizeof target, "/leases?ttl_s=%u", z->ttl_s);
  reply r = {0};
  int rc = request(z, &z->c, "POST", target, NULL, &r);
  if (rc) return rc;
  if (r.status != 200) {
    rc = reply_error(z, "making a lease", &r, -1);
    free(r.body);
    return rc;
  }
  json_error_t e;
  json_t *j = json_loadb(r.body ? r.body : "", r.len, 0, &e);
  free(r.body);
  const char *tok = json_string_value(json_object_get(j, "lease"));
  if (!tok || strlen(tok) != 32) {
    json_decref(j);
    return zeus__error(ZEUS_EHTTP, "zeus daemon at %s: POST /leases returned no lease", zeus__zeusd_endpoint(z));
  }
  memcpy(z->lease, tok, 33);
  zeus__log(ZEUS_LOG_DEBUG, "device", "daemon lease %s at %s", json_string_value(json_object_get(j, "id")),
            zeus__zeusd_endpoint(z));
  json_decref(j);
  z->lease_state = 1;
  z->lease_pid = getpid();
  if (!z->uds && !z->renewer_started) {
    if (pthread_create(&z->renewer, NULL, renew_main, z) == 0) z->renewer_started = true;
    else zeus__log(ZEUS_LOG_WARN, "device", "cannot start the lease renewer: the lease lapses after %u s", z->ttl_s);
  }
  return ZEUS_OK;
}

int zeus__zeusd_write(zeus__zeusd *z, const char *op, unsigned gpu, const char *extra) {
  char target[512];
  snprintf(target, sizeof target, "/gpu/%s?gpu_ids=%u%s%s&block=true%s%s", op, gpu, extra && *extra ? "&" : "",
           extra ? extra : "", z->override ? "&override=true" : "", z->persist ? "&persist=true" : "");
  pthread_mutex_lock(&z->mu);
  int rc = ZEUS_OK;
  for (int attempt = 0; attempt < 2; attempt++) {
    if ((rc = ensure_lease(z))) break;
    reply r = {0};
    if ((rc = request(z, &z->c, "POST", target, z->lease_state == 1 ? z->lease : NULL, &r))) break;
    if (r.status == 410 && z->lease_state == 1 && attempt == 0) {
      /* The lease lapsed (and what it held was given back): a new one, then this change again. */
      zeus__log(ZEUS_LOG_WARN, "device", "the daemon at %s let this process's lease lapse and gave its changes back; "
                "making a new one", zeus__zeusd_endpoint(z));
      z->lease_state = 0;
      free(r.body);
      continue;
    }
    char what[160];
    snprintf(what, sizeof what, "POST /gpu/%s on GPU %u", op, gpu);
    if (r.status != 200) rc = reply_error(z, what, &r, (int)gpu);
    free(r.body);
    break;
  }
  pthread_mutex_unlock(&z->mu);
  return rc;
}

int zeus__zeusd_release(zeus__zeusd *z) {
  if (!z) return ZEUS_OK;
  pthread_mutex_lock(&z->mu);
  int rc = ZEUS_OK;
  if (z->lease_state == 1 && z->lease_pid == getpid()) {
    reply r = {0};
    rc = request(z, &z->c, "POST", "/leases/release", z->lease, &r);
    if (!rc && r.status != 200 && r.status != 410) rc = reply_error(z, "releasing the lease", &r, -1);
    free(r.body);
    z->lease_state = 0;
    memset(z->lease, 0, sizeof z->lease);
  }
  pthread_mutex_unlock(&z->mu);
  return rc;
}

/* TCP: renews the lease every third of its TTL on a connection of its own. */
static void *renew_main(void *arg) {
  zeus__zeusd *z = arg;
  conn c = {.fd = -1};
  pthread_mutex_lock(&z->mu);
  while (!z->closing) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double wait = z->ttl_s / 3.0;
    ts.tv_sec += (time_t)wait;
    ts.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&z->cv, &z->mu, &ts);
    if (z->closing || z->lease_state != 1 || z->lease_pid != getpid()) continue;
    char lease[33];
    memcpy(lease, z->lease, sizeof lease);
    pthread_mutex_unlock(&z->mu);
    reply r = {0};
    int rc = request(z, &c, "POST", "/leases/renew", lease, &r);
    if (rc) zeus__log(ZEUS_LOG_WARN, "device", "renewing the daemon lease: %s", zeus_errmsg());
    else if (r.status != 200) zeus__log(ZEUS_LOG_WARN, "device", "renewing the daemon lease: HTTP %d", r.status);
    free(r.body);
    pthread_mutex_lock(&z->mu);
  }
  pthread_mutex_unlock(&z->mu);
  conn_close(&c);
  free(c.buf);
  return NULL;
}

static pthread_once_t shared_once = PTHREAD_ONCE_INIT;
static zeus__zeusd *shared;

static void close_shared(void) {
  zeus__zeusd_close(shared);
  shared = NULL;
}

static void open_shared(void) {
  if (zeus__zeusd_open(&shared, NULL, NULL, false, false) == ZEUS_OK && shared) atexit(close_shared);
}

zeus__zeusd *zeus__zeusd_shared(void) {
  pthread_once(&shared_once, open_shared);
  return shared;
}
