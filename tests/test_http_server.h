/* tests/test_http_server.h: an HTTP/1.1 server inside the test's process, for the tests of code
 * that speaks HTTP to a service (header-only, as tests/pfo_http.h). A thread accepts on a loopback
 * port, reads one request a connection (its head and a Content-Length body, each read waited for
 * up to 2 s), hands it to the test's answer callback and closes the connection. The callback
 * answers with zeus_test_http_reply, or not at all (the client sees a closed connection); it runs
 * on the server's thread, so what it shares with the test is the test's to lock. */
#ifndef ZEUS_TEST_HTTP_SERVER_H
#define ZEUS_TEST_HTTP_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_util.h"

/* One request as read: the method, the target split at '?', the head (the request line and the
 * headers, each line ending in "\r\n": read it with zeus_test_http_header) and what followed the
 * head (the body; "" when none). */
typedef struct zeus_test_http_request {
  char method[16], path[1024], query[1024];
  const char *head, *body;
} zeus_test_http_request;

typedef void (*zeus_test_http_answer_fn)(void *ud, int fd, const zeus_test_http_request *rq);

typedef struct zeus_test_http_server {
  int lfd, port;
  pthread_t th;
  atomic_bool stop;
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

/* Answers STATUS with BODY and Connection: close, with a Content-Type line when content_type is
 * not NULL. A client that has given up (a timeout) raises no SIGPIPE. */
static inline void zeus_test_http_reply(int fd, int status, const char *content_type, const char *body) {
  char head[256];
  int n = snprintf(head, sizeof head, "HTTP/1.1 %d X\r\n%s%s%sContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
                   content_type ? "Content-Type: " : "", content_type ? content_type : "", content_type ? "\r\n" : "",
                   strlen(body));
  if (send(fd, head, (size_t)n, MSG_NOSIGNAL) >= 0) (void)send(fd, body, strlen(body), MSG_NOSIGNAL);
}

/* Reads one request from fd and hands it to the callback; a request that does not arrive whole
 * within 2 s a read, or whose request line has no target, gets no answer. */
static inline void zeus_test_http__serve_one(zeus_test_http_server *s, int fd) {
  char req[8192];
  size_t have = 0;
  char *end = NULL;
  while (have < sizeof req - 1) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 2000) <= 0) return;
    ssize_t r = read(fd, req + have, sizeof req - 1 - have);
    if (r <= 0) return;
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
  if (!end) return;
  end[2] = '\0';
  zeus_test_http_request rq = {.head = req, .body = end + 4};
  const char *sp = strchr(req, ' ');
  if (!sp) return;
  const char *target = sp + 1, *tend = strchr(target, ' ');
  if (!tend) return;
  const char *q = memchr(target, '?', (size_t)(tend - target));
  snprintf(rq.method, sizeof rq.method, "%.*s", (int)(sp - req), req);
  snprintf(rq.path, sizeof rq.path, "%.*s", (int)((q ? q : tend) - target), target);
  if (q) snprintf(rq.query, sizeof rq.query, "%.*s", (int)(tend - q - 1), q + 1);
  s->answer(s->ud, fd, &rq);
}

static inline void *zeus_test_http__thread(void *arg) {
  zeus_test_http_server *s = arg;
  while (!atomic_load(&s->stop)) {
    struct pollfd p = {.fd = s->lfd, .events = POLLIN};
    if (poll(&p, 1, 20) <= 0) continue;
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0) continue;
    zeus_test_http__serve_one(s, fd);
    close(fd);
  }
  return NULL;
}

/* Listens on a free loopback port (s->port) and serves each request with answer(ud, ...). */
static inline void zeus_test_http_start(zeus_test_http_server *s, zeus_test_http_answer_fn answer, void *ud) {
  memset(s, 0, sizeof *s);
  atomic_init(&s->stop, false);
  s->answer = answer;
  s->ud = ud;
  s->lfd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(s->lfd >= 0);
  int one = 1;
  setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(s->lfd, 16), 0);
  socklen_t l = sizeof a;
  getsockname(s->lfd, (struct sockaddr *)&a, &l);
  s->port = ntohs(a.sin_port);
  assert_int_equal(pthread_create(&s->th, NULL, zeus_test_http__thread, s), 0);
}

/* Stops serving and closes the port: nothing listens there any more. A second call does nothing. */
static inline void zeus_test_http_stop(zeus_test_http_server *s) {
  if (atomic_exchange(&s->stop, true)) return;
  pthread_join(s->th, NULL);
  close(s->lfd);
}

#endif
