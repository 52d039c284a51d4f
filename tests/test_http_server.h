/* tests/test_http_server.h: an HTTP/1.1 server inside the test's process, for the tests of code
 * that speaks HTTP to a service (header-only, as tests/pfo_http.h). A thread accepts on a loopback
 * port (zeus_test_http_start) or a Unix socket (zeus_test_http_start_unix), reads one request a
 * connection (its head and a Content-Length body, each read waited for up to 2 s, or until the test
 * stops the server), hands it to the
 * test's answer callback and closes the connection when the callback returns. The callback answers
 * with zeus_test_http_reply, or not at all (the client sees a closed connection); it may keep the
 * connection (zeus_test_http_reply_keep, then zeus_test_http_next for the next request on it) or
 * stream an answer (zeus_test_http_reply_stream, zeus_test_http_send / _chunk, zeus_test_http_hold
 * until the client or the test ends it). It runs on the server's thread, so what it shares with
 * the test is the test's to lock. */
#ifndef ZEUS_TEST_HTTP_SERVER_H
#define ZEUS_TEST_HTTP_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "test_util.h"

/* One request as read: the method, the target split at '?', the head (the request line and the
 * headers, each line ending in "\r\n": read it with zeus_test_http_header) and what followed the
 * head (the body; "" when none). head and body point into raw. */
typedef struct zeus_test_http_request {
  char method[16], path[1024], query[1024];
  const char *head, *body;
  char raw[8192];
} zeus_test_http_request;

typedef void (*zeus_test_http_answer_fn)(void *ud, int fd, const zeus_test_http_request *rq);

typedef struct zeus_test_http_server {
  int lfd, port;       /* port: 0 on a Unix socket */
  char unix_path[108]; /* the Unix socket's path, removed at the stop; "" on a port */
  pthread_t th;
  atomic_bool stop;
  atomic_int accepted; /* connections accepted so far */
  zeus_test_http_answer_fn answer;
  void *ud;
} zeus_test_http_server;

/* The value of header NAME (any case) in a request's head, cut to n - 1 bytes; "" when absent. */
static inline void zeus_test_http_header(const char *head, const char *name, char *out, size_t n) {
  char needle[128];
  snprintf(needle, sizeof needle, "\r\n%s: ", name);
  const char *h = strcasestr(head, needle);
  out[0] = '\0';
  if (h) snprintf(out, n, "%.*s", (int)strcspn(h + strlen(needle), "\r\n"), h + strlen(needle));
}

/* Sends S whole (or what the client takes of it). A client that has given up (a timeout) raises
 * no SIGPIPE. */
static inline void zeus_test_http_send(int fd, const char *s) { (void)!send(fd, s, strlen(s), MSG_NOSIGNAL); }

static inline void zeus_test_http__reply(int fd, int status, const char *content_type, const char *body,
                                         bool keep_alive) {
  char head[256];
  int n = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\n%s%s%sContent-Length: %zu\r\n%s\r\n", status,
                   content_type ? "Content-Type: " : "", content_type ? content_type : "", content_type ? "\r\n" : "",
                   strlen(body), keep_alive ? "" : "Connection: close\r\n");
  if (send(fd, head, (size_t)n, MSG_NOSIGNAL) >= 0) zeus_test_http_send(fd, body);
}

/* Answers STATUS with BODY and Connection: close, with a Content-Type line when content_type is
 * not NULL. */
static inline void zeus_test_http_reply(int fd, int status, const char *content_type, const char *body) {
  zeus_test_http__reply(fd, status, content_type, body, false);
}

/* As zeus_test_http_reply, without Connection: close: the connection may carry the client's next
 * request (read it with zeus_test_http_next). */
static inline void zeus_test_http_reply_keep(int fd, int status, const char *content_type, const char *body) {
  zeus_test_http__reply(fd, status, content_type, body, true);
}

/* Starts a 200 answer of no set length (a stream: chunked, then send it with zeus_test_http_chunk;
 * or not, and it ends when the connection does: send it with zeus_test_http_send). */
static inline void zeus_test_http_reply_stream(int fd, const char *content_type, bool chunked) {
  char head[256];
  snprintf(head, sizeof head, "HTTP/1.1 200 X\r\nContent-Type: %s\r\n%s\r\n", content_type,
           chunked ? "Transfer-Encoding: chunked\r\n" : "");
  zeus_test_http_send(fd, head);
}

/* Sends S as one chunk of a chunked answer. */
static inline void zeus_test_http_chunk(int fd, const char *s) {
  char h[32];
  snprintf(h, sizeof h, "%zx\r\n", strlen(s));
  zeus_test_http_send(fd, h);
  zeus_test_http_send(fd, s);
  zeus_test_http_send(fd, "\r\n");
}

/* Whether the test is stopping the server: a callback that streams or holds a connection ends
 * when this turns true (within 50 ms), or zeus_test_http_stop waits for it. */
static inline bool zeus_test_http_stopping(zeus_test_http_server *s) { return atomic_load(&s->stop); }

/* Holds the connection, reading and dropping what the client sends, until the client closes it or
 * the test stops the server. */
static inline void zeus_test_http_hold(zeus_test_http_server *s, int fd) {
  char b[256];
  while (!zeus_test_http_stopping(s)) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 50) <= 0) continue;
    if (recv(fd, b, sizeof b, 0) <= 0) return;
  }
}

/* Reads the next request on fd into rq; false when it does not arrive whole within 2 s a read (or
 * the server is stopping, or the client went away), or its request line has no target. */
static inline bool zeus_test_http_next(zeus_test_http_server *s, int fd, zeus_test_http_request *rq) {
  char *req = rq->raw;
  size_t have = 0;
  char *end = NULL;
  req[0] = '\0';
  while (have < sizeof rq->raw - 1) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int ready; /* what is there is read even when stopping; waiting for more ends then */
    for (int waited = 50; !(ready = poll(&p, 1, 50)) && waited < 2000 && !zeus_test_http_stopping(s); waited += 50) {}
    if (ready <= 0) return false;
    ssize_t r = read(fd, req + have, sizeof rq->raw - 1 - have);
    if (r <= 0) return false;
    have += (size_t)r;
    req[have] = '\0';
    if ((end = strstr(req, "\r\n\r\n"))) {
      char cl[32];
      end[2] = '\0'; /* the head alone, for the header's look-up */
      zeus_test_http_header(req, "Content-Length", cl, sizeof cl);
      end[2] = '\r';
      if (have >= (size_t)(end + 4 - req) + (size_t)atoi(cl)) break;
    }
  }
  if (!end) return false;
  end[2] = '\0';
  rq->head = req;
  rq->body = end + 4;
  rq->method[0] = rq->path[0] = rq->query[0] = '\0';
  const char *sp = strchr(req, ' ');
  if (!sp) return false;
  const char *target = sp + 1, *tend = strchr(target, ' ');
  if (!tend) return false;
  const char *q = memchr(target, '?', (size_t)(tend - target));
  snprintf(rq->method, sizeof rq->method, "%.*s", (int)(sp - req), req);
  snprintf(rq->path, sizeof rq->path, "%.*s", (int)((q ? q : tend) - target), target);
  if (q) snprintf(rq->query, sizeof rq->query, "%.*s", (int)(tend - q - 1), q + 1);
  return true;
}

/* Reads one request from fd and hands it to the callback; one that does not come gets no answer. */
static inline void zeus_test_http__serve_one(zeus_test_http_server *s, int fd) {
  zeus_test_http_request rq;
  if (zeus_test_http_next(s, fd, &rq)) s->answer(s->ud, fd, &rq);
}

static inline void *zeus_test_http__thread(void *arg) {
  zeus_test_http_server *s = arg;
  while (!atomic_load(&s->stop)) {
    struct pollfd p = {.fd = s->lfd, .events = POLLIN};
    if (poll(&p, 1, 20) <= 0) continue;
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0) continue;
    atomic_fetch_add(&s->accepted, 1);
    zeus_test_http__serve_one(s, fd);
    close(fd);
  }
  return NULL;
}

static inline void zeus_test_http__init(zeus_test_http_server *s, zeus_test_http_answer_fn answer, void *ud) {
  memset(s, 0, sizeof *s);
  atomic_init(&s->stop, false);
  atomic_init(&s->accepted, 0);
  s->answer = answer;
  s->ud = ud;
}

static inline void zeus_test_http__listen(zeus_test_http_server *s, struct sockaddr *a, socklen_t len) {
  assert_true(s->lfd >= 0);
  assert_int_equal(bind(s->lfd, a, len), 0);
  assert_int_equal(listen(s->lfd, 16), 0);
  assert_int_equal(pthread_create(&s->th, NULL, zeus_test_http__thread, s), 0);
}

/* Listens on a free loopback port (s->port) and serves each request with answer(ud, ...). */
static inline void zeus_test_http_start(zeus_test_http_server *s, zeus_test_http_answer_fn answer, void *ud) {
  zeus_test_http__init(s, answer, ud);
  s->lfd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t l = sizeof a;
  zeus_test_http__listen(s, (struct sockaddr *)&a, sizeof a);
  getsockname(s->lfd, (struct sockaddr *)&a, &l);
  s->port = ntohs(a.sin_port);
}

/* Listens on the Unix socket PATH (a stale one there is removed first) and serves each request with
 * answer(ud, ...); the stop removes the socket. */
static inline void zeus_test_http_start_unix(zeus_test_http_server *s, const char *path,
                                             zeus_test_http_answer_fn answer, void *ud) {
  zeus_test_http__init(s, answer, ud);
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  assert_true(strlen(path) < sizeof a.sun_path);
  snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
  snprintf(s->unix_path, sizeof s->unix_path, "%s", path);
  unlink(path);
  s->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
  zeus_test_http__listen(s, (struct sockaddr *)&a, sizeof a);
}

/* Stops serving and closes the port: nothing listens there any more. A second call does nothing. */
static inline void zeus_test_http_stop(zeus_test_http_server *s) {
  if (atomic_exchange(&s->stop, true)) return;
  pthread_join(s->th, NULL);
  close(s->lfd);
  if (s->unix_path[0]) unlink(s->unix_path);
}

#endif
