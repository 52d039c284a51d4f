/* The power stream client (zeus/power_stream.h): every daemon's /gpu/stream_power and
 * /cpu/stream_power on non-blocking sockets served by one poll() loop on one thread.
 *
 * Each stream (server x kind) is a small state machine:
 *   WAIT (backoff) -> CONNECTING -> SEND "GET /time" -> HEAD -> BODY (the time, for the clock
 *   offset) -> SEND "GET /<kind>/stream_power" (same connection, or a new one when the server
 *   closed it) -> HEAD -> STREAM (bytes de-chunked, then cut into SSE events) -> ... -> WAIT.
 * Every failure closes the socket and goes to WAIT with a doubled delay; DEAD is final (401, 403,
 * 404). No step ever blocks: a stall shows as a deadline passed. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "core/core.h"
#include "zeus/format.h"
#include "zeus/power_stream.h"
#include "zeus/version.h"

#define HEAD_MAX 16384 /* the answer's status line and headers */
#define TIME_BODY_MAX 4096
#define LOOP_SLICE_S 0.05 /* the longest poll(): how soon close() is noticed */

enum { ST_WAIT, ST_CONNECTING, ST_SEND, ST_HEAD, ST_BODY, ST_STREAM, ST_DEAD, ST_OFF };
enum { CH_SIZE, CH_DATA, CH_CRLF, CH_END };

typedef struct server server;

typedef struct stream {
  server *srv;
  int kind;
  char *target;           /* "/gpu/stream_power?gpu_ids=0,1" */
  int state, phase;       /* phase 0: GET /time; 1: the stream */
  int fd;
  char req[1024];
  size_t req_len, req_off;
  char *head;             /* HEAD_MAX + 1 */
  size_t hlen;
  bool chunked, close_after;
  long long clen, body_got;
  int ch_state;
  char ch_line[24];
  size_t ch_len;
  unsigned long long ch_left;
  char tbody[TIME_BODY_MAX + 1];
  size_t tlen;
  char *ev;               /* the event being read: its lines, max_line_bytes + 1 */
  size_t elen, line_start;
  double t_sent, deadline, last_rx, retry_at, delay;
  bool was_connected;     /* a valid event came since the last failure: its loss is a warning */
} stream;

typedef struct slot {
  unsigned device;
  zeus_power_stream_reading r;
} slot;

struct server {
  char *endpoint;         /* the node's name */
  bool uds;
  char *path, *host, *port;
  char *token;
  stream st[2];
  slot *latest[2];
  size_t nlatest[2];
  double offset_s;
  bool live[2], dead[2];           /* that stream answers 200 / gave up (under ps->mu) */
  zeus_power_stream_status status; /* under ps->mu */
};

struct zeus_power_stream {
  zeus_power_stream_opts o;
  server *srv;
  size_t n;
  pthread_t thread;
  bool started;
  atomic_bool stopping;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  uint64_t seq, dropped;
  zeus_power_stream_event *q;
  size_t qhead, qlen;
};

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- parsing one event ---- */

static bool json_num(json_t *v, double *out) {
  if (!json_is_number(v)) return false;
  *out = json_number_value(v);
  return isfinite(*out);
}

static bool json_id(json_t *v, unsigned *out) {
  if (!json_is_integer(v)) return false;
  json_int_t x = json_integer_value(v);
  if (x < 0 || x > 1000000) return false;
  *out = (unsigned)x;
  return true;
}

int zeus_power_stream_parse_event(const char *text, size_t len, int kind, zeus_power_stream_event *ev) {
  zeus__buf data = {0};
  bool have = false;
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    const char *ls = p;
    p = nl ? nl + 1 : end;
    if (le > ls && le[-1] == '\r') le--;
    if (le == ls || *ls == ':') continue; /* blank, or a comment (": keepalive") */
    size_t ll = (size_t)(le - ls);
    if (ll >= 5 && memcmp(ls, "data:", 5) == 0) {
      const char *v = ls + 5;
      if (v < le && *v == ' ') v++;
      if ((have && zeus__buf_puts(&data, "\n")) || zeus__buf_append(&data, v, (size_t)(le - v))) {
        zeus__buf_free(&data);
        return zeus__oom("reading a power event");
      }
      have = true;
    }
    /* event:, id:, retry: and unknown fields are ignored, as SSE says */
  }
  if (!have) return 0;
  json_error_t je;
  json_t *j = json_loadb(data.data ? data.data : "", data.len, 0, &je);
  zeus__buf_free(&data);
  if (!json_is_object(j)) {
    json_decref(j);
    return zeus__error(ZEUS_EPARSE, "a %s power event is not a JSON object (%s)", kind ? "CPU" : "GPU",
                       j ? "another JSON value" : je.text);
  }
  zeus_power_stream_event e = {.kind = kind, .dram_w = NAN};
  double ts_ms = 0, mw = 0, dmw = 0;
  int rc = ZEUS_OK;
  if (!json_num(json_object_get(j, "timestamp_ms"), &ts_ms)) {
    rc = zeus__error(ZEUS_EPARSE, "a %s power event lacks a numeric timestamp_ms", kind ? "CPU" : "GPU");
  } else if (kind == ZEUS_POWER_STREAM_GPU) {
    if (!json_id(json_object_get(j, "gpu_id"), &e.device))
      rc = zeus__error(ZEUS_EPARSE, "a GPU power event lacks gpu_id (an integer >= 0)");
    else if (!json_num(json_object_get(j, "power_mw"), &mw) || mw < 0)
      rc = zeus__error(ZEUS_EPARSE, "the GPU %u power event lacks power_mw (a number >= 0)", e.device);
    else
      e.power_w = mw / 1000.0;
  } else {
    json_t *d = json_object_get(j, "dram_mw");
    if (!json_id(json_object_get(j, "cpu_id"), &e.device))
      rc = zeus__error(ZEUS_EPARSE, "a CPU power event lacks cpu_id (an integer >= 0)");
    else if (!json_num(json_object_get(j, "cpu_mw"), &mw) || mw < 0)
      rc = zeus__error(ZEUS_EPARSE, "the CPU %u power event lacks cpu_mw (a number >= 0)", e.device);
    else if (d && !json_is_null(d) && (!json_num(d, &dmw) || dmw < 0))
      rc = zeus__error(ZEUS_EPARSE, "the CPU %u power event has a dram_mw that is not a number >= 0 or null",
                       e.device);
    else {
      e.power_w = mw / 1000.0;
      if (d && !json_is_null(d)) e.dram_w = dmw / 1000.0;
    }
  }
  json_decref(j);
  if (rc) return rc;
  e.timestamp_s = ts_ms / 1000.0;
  *ev = e;
  return 1;
}

/* ---- options and addresses ---- */

void zeus_power_stream_opts_init(zeus_power_stream_opts *o) {
  memset(o, 0, sizeof *o);
  o->reconnect_delay_s = 1;
  o->max_reconnect_delay_s = 30;
  o->stall_timeout_s = 10;
  o->connect_timeout_s = 5;
  o->max_line_bytes = 4096;
  o->max_devices = 256;
}

static int parse_address(server *s, size_t i, const char *a) {
  if (!a || !*a) return zeus__error(ZEUS_EINVAL, "power stream server %zu: no address (unix:PATH or tcp:HOST:PORT)", i);
  bool tcp;
  if (strncmp(a, "unix:", 5) == 0) { a += 5; tcp = false; }
  else if (strncmp(a, "tcp:", 4) == 0) { a += 4; tcp = true; }
  else tcp = a[0] != '/';
  if (!tcp) {
    if (!*a || strlen(a) >= sizeof(((struct sockaddr_un *)0)->sun_path))
      return zeus__error(ZEUS_EINVAL, "power stream server %zu: socket path '%s' is empty or too long", i, a);
    s->uds = true;
    s->path = strdup(a);
    s->endpoint = strdup(a);
    return s->path && s->endpoint ? ZEUS_OK : zeus__oom("naming a power stream server");
  }
  const char *colon = strrchr(a, ':');
  if (!colon || colon == a || !colon[1])
    return zeus__error(ZEUS_EINVAL, "power stream server %zu: address '%s' is not HOST:PORT (e.g. 127.0.0.1:4938)", i,
                       a);
  long port;
  if (zeus__parse_long(colon + 1, 1, 65535, "power stream server port", &port)) return ZEUS_EINVAL;
  const char *h = a;
  size_t hl = (size_t)(colon - a);
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { h++; hl -= 2; }
  s->host = strndup(h, hl);
  s->port = strdup(colon + 1);
  s->endpoint = strdup(a);
  return s->host && s->port && s->endpoint ? ZEUS_OK : zeus__oom("naming a power stream server");
}

/* The ids as a query value ("0,2"), checked to be digits and commas; NULL ids: "". */
static int ids_query(size_t i, const char *what, const char *ids, char *out, size_t cap) {
  size_t o = 0;
  bool digit = false;
  for (const char *p = ids; *p; p++) {
    if (*p == ' ') continue;
    if ((*p < '0' || *p > '9') && *p != ',')
      return zeus__error(ZEUS_EINVAL, "power stream server %zu: %s '%s': expected comma-separated indices", i, what,
                         ids);
    if (*p != ',') digit = true;
    if (o + 1 >= cap) return zeus__error(ZEUS_EINVAL, "power stream server %zu: %s is too long", i, what);
    out[o++] = *p;
  }
  out[o] = '\0';
  if (!digit) return zeus__error(ZEUS_EINVAL, "power stream server %zu: %s '%s' names no device", i, what, ids);
  return ZEUS_OK;
}

/* ---- connections ---- */

static void sock_close(stream *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

/* Closes the connection and schedules the next try (backoff), or gives up for good. */
static void fail(zeus_power_stream *ps, stream *s, bool final, const char *fmt, ...) ZEUS__PRINTF(4, 5);
static void fail(zeus_power_stream *ps, stream *s, bool final, const char *fmt, ...) {
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  sock_close(s);
  double now = mono_now();
  pthread_mutex_lock(&ps->mu);
  server *v = s->srv;
  snprintf(v->status.last_error, sizeof v->status.last_error, "%s (%s stream of %s)", msg, s->kind ? "CPU" : "GPU",
           v->endpoint);
  v->status.failures++;
  v->live[s->kind] = false;
  if (final) v->status.gave_up = v->dead[s->kind] = true;
  pthread_mutex_unlock(&ps->mu);
  if (final) {
    s->state = ST_DEAD;
    zeus__log(ZEUS_LOG_WARN, "power_stream", "%s stream of %s: %s; not retried", s->kind ? "CPU" : "GPU", v->endpoint,
              msg);
    return;
  }
  zeus__log(s->was_connected ? ZEUS_LOG_WARN : ZEUS_LOG_DEBUG, "power_stream",
            "%s stream of %s: %s; reconnecting in %.1f s", s->kind ? "CPU" : "GPU", v->endpoint, msg, s->delay);
  s->was_connected = false;
  s->state = ST_WAIT;
  s->retry_at = now + s->delay;
  s->delay = s->delay * 2 > ps->o.max_reconnect_delay_s ? ps->o.max_reconnect_delay_s : s->delay * 2;
}

static void build_request(stream *s) {
  server *v = s->srv;
  int n = snprintf(s->req, sizeof s->req,
                   "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: libzeus/%s\r\nAccept: %s\r\n%s%s%s\r\n",
                   s->phase == 0 ? "/time" : s->target, v->uds ? "localhost" : v->endpoint, zeus_version(),
                   s->phase == 0 ? "application/json" : "text/event-stream",
                   v->token ? "Authorization: Bearer " : "", v->token ? v->token : "", v->token ? "\r\n" : "");
  s->req_len = n > 0 && (size_t)n < sizeof s->req ? (size_t)n : 0;
  s->req_off = 0;
  s->state = ST_SEND;
}

static void start_connect(zeus_power_stream *ps, stream *s, int phase) {
  server *v = s->srv;
  double now = mono_now();
  s->phase = phase;
  s->deadline = now + ps->o.connect_timeout_s;
  int fd = -1, err = 0;
  if (v->uds) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, v->path, strlen(v->path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS)) {
      err = errno;
      if (fd >= 0) close(fd);
      fail(ps, s, false, "cannot connect: %s", strerror(err));
      return;
    }
  } else {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    int g = getaddrinfo(v->host, v->port, &hints, &ai);
    if (g != 0) {
      fail(ps, s, false, "cannot resolve the host: %s", gai_strerror(g));
      return;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS)) {
      err = errno;
      if (fd >= 0) close(fd);
      freeaddrinfo(ai);
      fail(ps, s, false, "cannot connect: %s", strerror(err));
      return;
    }
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  s->fd = fd;
  s->state = ST_CONNECTING;
}

/* Stores a valid event: the latest reading of its device, the queue, the waiters. */
static void deliver(zeus_power_stream *ps, stream *s, zeus_power_stream_event *e) {
  server *v = s->srv;
  pthread_mutex_lock(&ps->mu);
  e->server = (unsigned)(v - ps->srv);
  e->timestamp_s += v->offset_s;
  e->seq = ++ps->seq;
  v->status.events++;
  slot *sl = NULL;
  for (size_t k = 0; k < v->nlatest[s->kind]; k++)
    if (v->latest[s->kind][k].device == e->device) sl = &v->latest[s->kind][k];
  if (!sl && v->nlatest[s->kind] < ps->o.max_devices) sl = &v->latest[s->kind][v->nlatest[s->kind]++];
  if (sl) {
    sl->device = e->device;
    sl->r = *e;
  }
  if (ps->o.queue_max) {
    if (ps->qlen == ps->o.queue_max) {
      ps->qhead = (ps->qhead + 1) % ps->o.queue_max;
      ps->qlen--;
      ps->dropped++;
    }
    ps->q[(ps->qhead + ps->qlen) % ps->o.queue_max] = *e;
    ps->qlen++;
  }
  pthread_cond_broadcast(&ps->cv);
  pthread_mutex_unlock(&ps->mu);
  s->delay = ps->o.reconnect_delay_s;
  s->was_connected = true;
}

/* SSE bytes of the stream: lines into the event buffer, an event at each blank line. Returns false
 * when the connection was failed (garbage). */
static bool sse_bytes(zeus_power_stream *ps, stream *s, const char *p, size_t n) {
  size_t cap = ps->o.max_line_bytes;
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    if (c == '\n') {
      size_t ll = s->elen - s->line_start;
      if (ll && s->ev[s->elen - 1] == '\r') ll--;
      if (ll == 0) { /* a blank line ends the event */
        zeus_power_stream_event e;
        int rc = zeus_power_stream_parse_event(s->ev, s->elen, s->kind, &e);
        s->elen = s->line_start = 0;
        if (rc == 1) {
          deliver(ps, s, &e);
        } else if (rc < 0) {
          pthread_mutex_lock(&ps->mu);
          s->srv->status.bad_events++;
          pthread_mutex_unlock(&ps->mu);
          fail(ps, s, false, "garbage in the stream: %s", zeus_errmsg());
          return false;
        }
        continue;
      }
      if (s->elen + 1 > cap) goto too_long;
      s->ev[s->elen++] = '\n';
      s->line_start = s->elen;
      continue;
    }
    if (s->elen + 1 > cap) goto too_long;
    s->ev[s->elen++] = c;
  }
  return true;
too_long:
  pthread_mutex_lock(&ps->mu);
  s->srv->status.bad_events++;
  pthread_mutex_unlock(&ps->mu);
  fail(ps, s, false, "an event longer than %zu bytes (max_line_bytes)", cap);
  return false;
}

static void time_done(zeus_power_stream *ps, stream *s);

/* Body bytes after the headers: de-chunked when chunked, then to the time body (phase 0) or the
 * SSE parser. Returns false when the stream changed state (failed, or the time body is done). */
static bool body_data(zeus_power_stream *ps, stream *s, const char *p, size_t n) {
  if (s->phase == 0) {
    if (s->tlen + n > TIME_BODY_MAX) {
      fail(ps, s, false, "the answer to GET /time is longer than %d bytes", TIME_BODY_MAX);
      return false;
    }
    memcpy(s->tbody + s->tlen, p, n);
    s->tlen += n;
    return true;
  }
  return sse_bytes(ps, s, p, n);
}

static bool body_bytes(zeus_power_stream *ps, stream *s, const char *p, size_t n) {
  if (!s->chunked) {
    if (s->phase == 0) {
      size_t want = (size_t)(s->clen - s->body_got);
      size_t k = n < want ? n : want;
      if (!body_data(ps, s, p, k)) return false;
      s->body_got += (long long)k;
      if (s->body_got >= s->clen) { time_done(ps, s); return false; }
      return true;
    }
    return sse_bytes(ps, s, p, n);
  }
  size_t i = 0;
  while (i < n) {
    switch (s->ch_state) {
    case CH_SIZE: {
      char c = p[i++];
      if (c == '\n') {
        s->ch_line[s->ch_len] = '\0';
        char *end;
        unsigned long long sz = strtoull(s->ch_line, &end, 16);
        if (end == s->ch_line) {
          fail(ps, s, false, "a malformed chunk size in the answer");
          return false;
        }
        s->ch_len = 0;
        s->ch_left = sz;
        s->ch_state = sz ? CH_DATA : CH_END;
        if (sz == 0) {
          if (s->phase == 0) { time_done(ps, s); return false; }
          fail(ps, s, false, "the server ended the stream");
          return false;
        }
      } else if (c != '\r') {
        /* past the room: an extension (";name=value"), ignored; the size is in front */
        if (s->ch_len + 1 < sizeof s->ch_line) s->ch_line[s->ch_len++] = c;
      }
      break;
    }
    case CH_DATA: {
      size_t k = n - i < s->ch_left ? n - i : (size_t)s->ch_left;
      if (!body_data(ps, s, p + i, k)) return false;
      i += k;
      s->ch_left -= k;
      if (!s->ch_left) { s->ch_state = CH_CRLF; s->ch_len = 0; }
      break;
    }
    case CH_CRLF:
      if (p[i++] == '\n') s->ch_state = CH_SIZE;
      break;
    default:
      i = n;
    }
  }
  return true;
}

/* The answer to GET /time is in: the offset, then the stream request (same connection if kept). */
static void time_done(zeus_power_stream *ps, stream *s) {
  s->tbody[s->tlen] = '\0';
  json_error_t je;
  json_t *j = json_loads(s->tbody, 0, &je);
  double ms;
  if (json_num(json_object_get(j, "timestamp_ms"), &ms)) {
    double rtt_mid_wall = zeus_wall_s() - (mono_now() - s->t_sent) / 2;
    pthread_mutex_lock(&ps->mu);
    s->srv->offset_s = rtt_mid_wall - ms / 1000.0;
    s->srv->status.clock_offset_s = s->srv->offset_s;
    pthread_mutex_unlock(&ps->mu);
  }
  json_decref(j);
  if (s->close_after) {
    sock_close(s);
    start_connect(ps, s, 1);
    return;
  }
  s->phase = 1;
  build_request(s);
}

/* The status line and headers are in s->head[0..hend). */
static bool on_head(zeus_power_stream *ps, stream *s, size_t hend) {
  s->head[hend] = '\0';
  int minor = 1, status = 0;
  if (sscanf(s->head, "HTTP/1.%d %d", &minor, &status) != 2) {
    fail(ps, s, false, "the answer is not HTTP");
    return false;
  }
  s->close_after = minor == 0;
  s->chunked = false;
  s->clen = -1;
  for (char *line = strstr(s->head, "\r\n"); line && line[2]; line = strstr(line + 2, "\r\n")) {
    char *l = line + 2;
    if (strncasecmp(l, "Content-Length:", 15) == 0) s->clen = strtoll(l + 15, NULL, 10);
    else if (strncasecmp(l, "Transfer-Encoding:", 18) == 0) {
      char *eol = strstr(l, "\r\n");
      char *ch = strcasestr(l, "chunked");
      if (ch && (!eol || ch < eol)) s->chunked = true;
    } else if (strncasecmp(l, "Connection:", 11) == 0) {
      const char *v = l + 11;
      while (*v == ' ') v++;
      if (strncasecmp(v, "close", 5) == 0) s->close_after = true;
    }
  }
  s->ch_state = CH_SIZE;
  s->ch_len = 0;
  s->body_got = 0;
  s->tlen = 0;
  if (s->phase == 0) {
    if (status != 200 || (!s->chunked && s->clen < 0)) {
      /* No /time (an old daemon, or a refusal that the stream will report): offset unchanged. */
      sock_close(s);
      start_connect(ps, s, 1);
      return false;
    }
    if (!s->chunked && s->clen == 0) { time_done(ps, s); return false; }
    s->state = ST_BODY;
    return true;
  }
  if (status != 200) {
    char reason[80] = "";
    const char *sp = strchr(s->head, ' ');
    sp = sp ? strchr(sp + 1, ' ') : NULL;
    if (sp) {
      size_t k = strcspn(sp + 1, "\r\n");
      snprintf(reason, sizeof reason, " %.*s", (int)(k < 60 ? k : 60), sp + 1);
    }
    bool final = status == 401 || status == 403 || status == 404;
    fail(ps, s, final, "GET %s answered HTTP %d%s", s->target, status, reason);
    return false;
  }
  s->state = ST_STREAM;
  s->elen = s->line_start = 0;
  s->last_rx = mono_now();
  pthread_mutex_lock(&ps->mu);
  s->srv->status.connects++;
  s->srv->live[s->kind] = true;
  pthread_mutex_unlock(&ps->mu);
  zeus__log(ZEUS_LOG_INFO, "power_stream", "%s stream of %s connected", s->kind ? "CPU" : "GPU", s->srv->endpoint);
  return true;
}

/* Reads what is there; drives HEAD, BODY and STREAM. */
static void on_readable(zeus_power_stream *ps, stream *s) {
  char buf[8192];
  for (int rounds = 0; rounds < 64; rounds++) {
    int st = s->state;
    if (st != ST_HEAD && st != ST_BODY && st != ST_STREAM) return;
    ssize_t r = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (r <= 0) {
      if (r == 0) fail(ps, s, false, "the server closed the connection");
      else fail(ps, s, false, "the connection broke: %s", strerror(errno));
      return;
    }
    s->last_rx = mono_now();
    size_t off = 0;
    if (st == ST_HEAD) {
      size_t k = (size_t)r;
      if (s->hlen + k > HEAD_MAX) k = HEAD_MAX - s->hlen;
      memcpy(s->head + s->hlen, buf, k);
      size_t old = s->hlen;
      s->hlen += k;
      s->head[s->hlen] = '\0';
      char *e = strstr(s->head, "\r\n\r\n");
      if (!e) {
        if (s->hlen >= HEAD_MAX) fail(ps, s, false, "the answer's headers are longer than %d bytes", HEAD_MAX);
        continue;
      }
      size_t hend = (size_t)(e - s->head) + 4;
      off = hend - old; /* bytes of buf past the headers */
      if (!on_head(ps, s, hend - 2)) return;
      if (s->state != ST_BODY && s->state != ST_STREAM) return;
    }
    if (off < (size_t)r && !body_bytes(ps, s, buf + off, (size_t)r - off)) return;
  }
}

static void on_writable(zeus_power_stream *ps, stream *s) {
  if (s->state == ST_CONNECTING) {
    int so = 0;
    socklen_t sl = sizeof so;
    if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &so, &sl) != 0) so = errno;
    if (so) {
      fail(ps, s, false, "cannot connect: %s", strerror(so));
      return;
    }
    build_request(s);
  }
  while (s->state == ST_SEND && s->req_off < s->req_len) {
    ssize_t w = send(s->fd, s->req + s->req_off, s->req_len - s->req_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) { s->req_off += (size_t)w; continue; }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    fail(ps, s, false, "sending the request: %s", strerror(errno));
    return;
  }
  if (s->state == ST_SEND) {
    s->state = ST_HEAD;
    s->hlen = 0;
    s->t_sent = mono_now();
    s->deadline = s->t_sent + ps->o.connect_timeout_s;
  }
}

static void *loop_main(void *arg) {
  zeus_power_stream *ps = arg;
  size_t ns = ps->n * 2;
  struct pollfd *pf = calloc(ns, sizeof *pf);
  stream **who = calloc(ns, sizeof *who);
  if (!pf || !who) {
    free(pf);
    free(who);
    zeus__log(ZEUS_LOG_ERROR, "power_stream", "out of memory: the power streams are not followed");
    return NULL;
  }
  while (!atomic_load(&ps->stopping)) {
    double now = mono_now(), wake = now + LOOP_SLICE_S;
    size_t np = 0;
    for (size_t i = 0; i < ps->n; i++)
      for (int k = 0; k < 2; k++) {
        stream *s = &ps->srv[i].st[k];
        if (s->state == ST_WAIT && now >= s->retry_at) start_connect(ps, s, 0);
        if (s->state == ST_WAIT && s->retry_at < wake) wake = s->retry_at;
        if (s->fd < 0) continue;
        double dl = s->state == ST_STREAM ? s->last_rx + ps->o.stall_timeout_s : s->deadline;
        if (now >= dl) {
          if (s->state == ST_STREAM)
            fail(ps, s, false, "stalled: nothing for %.1f s", ps->o.stall_timeout_s);
          else
            fail(ps, s, false, "no answer within %.1f s", ps->o.connect_timeout_s);
          continue;
        }
        if (dl < wake) wake = dl;
        pf[np] = (struct pollfd){.fd = s->fd,
                                 .events = s->state == ST_CONNECTING || s->state == ST_SEND ? POLLOUT : POLLIN};
        who[np++] = s;
      }
    int ms = (int)ceil((wake - now) * 1000);
    if (ms < 0) ms = 0;
    int r = poll(pf, np, ms);
    if (r <= 0) continue;
    for (size_t j = 0; j < np; j++) {
      stream *s = who[j];
      if (!pf[j].revents || s->fd != pf[j].fd) continue;
      if (s->state == ST_CONNECTING || s->state == ST_SEND) on_writable(ps, s);
      else on_readable(ps, s);
    }
  }
  free(pf);
  free(who);
  return NULL;
}

/* ---- open, close, queries ---- */

static void server_free(server *v) {
  for (int k = 0; k < 2; k++) {
    sock_close(&v->st[k]);
    free(v->st[k].target);
    free(v->st[k].head);
    free(v->st[k].ev);
    free(v->latest[k]);
  }
  free(v->endpoint);
  free(v->path);
  free(v->host);
  free(v->port);
  if (v->token) {
    memset(v->token, 0, strlen(v->token));
    free(v->token);
  }
}

void zeus_power_stream_close(zeus_power_stream *ps) {
  if (!ps) return;
  atomic_store(&ps->stopping, true);
  if (ps->started) pthread_join(ps->thread, NULL);
  for (size_t i = 0; i < ps->n; i++) server_free(&ps->srv[i]);
  free(ps->srv);
  free(ps->q);
  pthread_cond_destroy(&ps->cv);
  pthread_mutex_destroy(&ps->mu);
  free(ps);
}

static int check_range(double v, double lo, double hi, const char *name) {
  if (!(v > lo && v <= hi))
    return zeus__error(ZEUS_EINVAL, "power stream option %s = %g is outside (%g, %g]", name, v, lo, hi);
  return ZEUS_OK;
}

int zeus_power_stream_open(zeus_power_stream **out, const zeus_power_stream_opts *opts) {
  *out = NULL;
  if (!opts || !opts->servers || opts->num_servers == 0 || opts->num_servers > 1024)
    return zeus__error(ZEUS_EINVAL, "a power stream client needs 1 to 1024 servers (got %zu)",
                       opts && opts->servers ? opts->num_servers : 0);
  zeus_power_stream_opts o = *opts;
  int rc;
  if ((rc = check_range(o.reconnect_delay_s, 0, 3600, "reconnect_delay_s")) ||
      (rc = check_range(o.max_reconnect_delay_s, 0, 3600, "max_reconnect_delay_s")) ||
      (rc = check_range(o.stall_timeout_s, 0, 3600, "stall_timeout_s")) ||
      (rc = check_range(o.connect_timeout_s, 0, 3600, "connect_timeout_s")))
    return rc;
  if (o.max_reconnect_delay_s < o.reconnect_delay_s)
    return zeus__error(ZEUS_EINVAL, "power stream option max_reconnect_delay_s (%g) is below reconnect_delay_s (%g)",
                       o.max_reconnect_delay_s, o.reconnect_delay_s);
  if (o.max_line_bytes < 64 || o.max_line_bytes > (1u << 20))
    return zeus__error(ZEUS_EINVAL, "power stream option max_line_bytes = %zu is outside [64, 1048576]",
                       o.max_line_bytes);
  if (o.max_devices < 1 || o.max_devices > 4096)
    return zeus__error(ZEUS_EINVAL, "power stream option max_devices = %zu is outside [1, 4096]", o.max_devices);
  if (o.queue_max > ((size_t)1 << 24))
    return zeus__error(ZEUS_EINVAL, "power stream option queue_max = %zu is above 16777216", o.queue_max);
  zeus_power_stream *ps = calloc(1, sizeof *ps);
  if (!ps) return zeus__oom("opening a power stream client");
  pthread_mutex_init(&ps->mu, NULL);
  zeus__cond_init(&ps->cv);
  o.servers = NULL;
  ps->o = o;
  ps->srv = calloc(opts->num_servers, sizeof *ps->srv);
  if (!ps->srv || (o.queue_max && !(ps->q = calloc(o.queue_max, sizeof *ps->q)))) {
    zeus_power_stream_close(ps);
    return zeus__oom("opening a power stream client");
  }
  for (size_t i = 0; i < opts->num_servers; i++) {
    server *v = &ps->srv[i];
    ps->n = i + 1;
    for (int k = 0; k < 2; k++) v->st[k].fd = -1;
    const zeus_power_stream_server *c = &opts->servers[i];
    rc = parse_address(v, i, c->address);
    for (size_t j = 0; !rc && j < i; j++)
      if (strcmp(ps->srv[j].endpoint, v->endpoint) == 0)
        rc = zeus__error(ZEUS_EINVAL, "Duplicate server endpoints: ['%s'] (servers %zu and %zu)", v->endpoint, j, i);
    if (!rc && c->token && *c->token) {
      if (strpbrk(c->token, "\r\n")) rc = zeus__error(ZEUS_EINVAL, "power stream server %zu: the token holds a line break", i);
      else if (strlen(c->token) > 700) rc = zeus__error(ZEUS_EINVAL, "power stream server %zu: the token is longer than 700 bytes", i);
      else if (!(v->token = strdup(c->token))) rc = zeus__oom("opening a power stream client");
    }
    for (int k = 0; !rc && k < 2; k++) {
      stream *s = &v->st[k];
      const char *ids = k ? c->cpu_ids : c->gpu_ids;
      s->srv = v;
      s->kind = k;
      s->delay = o.reconnect_delay_s;
      if (ids && !*ids) { s->state = ST_OFF; continue; }
      char q[300] = "";
      if (ids && (rc = ids_query(i, k ? "cpu_ids" : "gpu_ids", ids, q, sizeof q))) break;
      char t[400];
      snprintf(t, sizeof t, "/%s/stream_power%s%s%s", k ? "cpu" : "gpu", ids ? "?" : "", ids ? (k ? "cpu_ids=" : "gpu_ids=") : "",
               q);
      s->target = strdup(t);
      s->head = malloc(HEAD_MAX + 1);
      s->ev = malloc(o.max_line_bytes + 1);
      v->latest[k] = calloc(o.max_devices, sizeof(slot));
      if (!s->target || !s->head || !s->ev || !v->latest[k]) rc = zeus__oom("opening a power stream client");
      s->state = ST_WAIT;
      s->retry_at = 0;
    }
    if (rc) {
      zeus_power_stream_close(ps);
      return rc;
    }
  }
  if (pthread_create(&ps->thread, NULL, loop_main, ps) != 0) {
    zeus_power_stream_close(ps);
    return zeus__error(ZEUS_EINTERNAL, "cannot start the power stream thread");
  }
  ps->started = true;
  *out = ps;
  return ZEUS_OK;
}

size_t zeus_power_stream_num_servers(const zeus_power_stream *ps) { return ps ? ps->n : 0; }

const char *zeus_power_stream_endpoint(const zeus_power_stream *ps, size_t i) {
  return ps && i < ps->n ? ps->srv[i].endpoint : NULL;
}

static int slot_cmp(const void *a, const void *b) {
  const zeus_power_stream_reading *x = a, *y = b;
  return x->device < y->device ? -1 : x->device > y->device;
}

int zeus_power_stream_snapshot(zeus_power_stream *ps, zeus_power_stream_reading **readings, size_t *n) {
  pthread_mutex_lock(&ps->mu);
  size_t total = 0;
  for (size_t i = 0; i < ps->n; i++) total += ps->srv[i].nlatest[0] + ps->srv[i].nlatest[1];
  zeus_power_stream_reading *r = NULL;
  if (total && !(r = malloc(total * sizeof *r))) {
    pthread_mutex_unlock(&ps->mu);
    return zeus__oom("copying the latest power readings");
  }
  size_t o = 0;
  for (size_t i = 0; i < ps->n; i++)
    for (int k = 0; k < 2; k++) {
      size_t start = o;
      for (size_t j = 0; j < ps->srv[i].nlatest[k]; j++) r[o++] = ps->srv[i].latest[k][j].r;
      qsort(r + start, o - start, sizeof *r, slot_cmp);
    }
  pthread_mutex_unlock(&ps->mu);
  *readings = r;
  *n = total;
  return ZEUS_OK;
}

int zeus_power_stream_next(zeus_power_stream *ps, double timeout_s, zeus_power_stream_event *ev) {
  if (!ps->o.queue_max) return zeus__error(ZEUS_ENOTSUP, "this power stream client has no event queue (queue_max 0)");
  struct timespec dl = zeus__deadline_in(timeout_s > 0 ? timeout_s : 0);
  pthread_mutex_lock(&ps->mu);
  while (ps->qlen == 0 && timeout_s > 0)
    if (zeus__cond_wait_until(&ps->cv, &ps->mu, &dl) == ETIMEDOUT) break;
  int rc = ZEUS_OK;
  if (ps->qlen) {
    *ev = ps->q[ps->qhead];
    ps->qhead = (ps->qhead + 1) % ps->o.queue_max;
    ps->qlen--;
  } else {
    rc = ZEUS_ETIMEDOUT;
  }
  pthread_mutex_unlock(&ps->mu);
  return rc ? zeus__error(rc, "no power event within %.3f s", timeout_s) : ZEUS_OK;
}

int zeus_power_stream_wait(zeus_power_stream *ps, uint64_t after_seq, double timeout_s, uint64_t *seq) {
  struct timespec dl = zeus__deadline_in(timeout_s > 0 ? timeout_s : 0);
  pthread_mutex_lock(&ps->mu);
  while (ps->seq <= after_seq && timeout_s > 0)
    if (zeus__cond_wait_until(&ps->cv, &ps->mu, &dl) == ETIMEDOUT) break;
  uint64_t s = ps->seq;
  pthread_mutex_unlock(&ps->mu);
  *seq = s;
  return s > after_seq ? ZEUS_OK : zeus__error(ZEUS_ETIMEDOUT, "no power event within %.3f s", timeout_s);
}

uint64_t zeus_power_stream_dropped(zeus_power_stream *ps) {
  pthread_mutex_lock(&ps->mu);
  uint64_t d = ps->dropped;
  pthread_mutex_unlock(&ps->mu);
  return d;
}

int zeus_power_stream_server_status(zeus_power_stream *ps, size_t i, zeus_power_stream_status *st) {
  if (i >= ps->n) return zeus__error(ZEUS_EINVAL, "power stream server %zu does not exist (%zu servers)", i, ps->n);
  pthread_mutex_lock(&ps->mu);
  *st = ps->srv[i].status;
  bool any = false, all = true;
  for (int k = 0; k < 2; k++) {
    if (!ps->srv[i].st[k].target || ps->srv[i].dead[k]) continue; /* not streamed, or given up */
    any = true;
    all = all && ps->srv[i].live[k];
  }
  st->connected = any && all;
  pthread_mutex_unlock(&ps->mu);
  return ZEUS_OK;
}
