/* A tiny blocking HTTP/1.1 client over one keep-alive loopback connection, for the PFO server
 * tests. Responses must carry Content-Length (the server always sends it). */
#ifndef ZEUS_TEST_PFO_HTTP_H
#define ZEUS_TEST_PFO_HTTP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct {
  int fd;
  int port;
  char buf[1 << 16];
  size_t have;
} th_conn;

static inline int th_connect(th_conn *c, int port) {
  c->port = port;
  c->have = 0;
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (c->fd < 0) return -1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct timeval tv = {30, 0}; /* every test is bounded in time */
  setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) { close(c->fd); c->fd = -1; return -1; }
  return 0;
}

static inline void th_close(th_conn *c) {
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
}

static inline int th_send_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0) { if (errno == EINTR) continue; return -1; }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static inline int th_send_request(th_conn *c, const char *method, const char *path, const char *body,
                                  const char *extra_headers) {
  char head[2048];
  size_t blen = body ? strlen(body) : 0;
  int n = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%sContent-Length: %zu\r\n\r\n",
                   method, path, extra_headers ? extra_headers : "",
                   body ? "Content-Type: application/json\r\n" : "", blen);
  if (th_send_all(c->fd, head, (size_t)n)) return -1;
  return body ? th_send_all(c->fd, body, blen) : 0;
}

/* Reads one response; *body is malloc'd (NUL-terminated). Returns the status or -1. */
static inline int th_read_response(th_conn *c, char **body) {
  *body = NULL;
  for (;;) {
    char *end = memmem(c->buf, c->have, "\r\n\r\n", 4);
    if (end) {
      size_t hlen = (size_t)(end - c->buf) + 4;
      int status = -1;
      sscanf(c->buf, "HTTP/1.%*d %d", &status);
      size_t clen = 0;
      for (char *p = c->buf; p < end; p++)
        if ((p == c->buf || p[-1] == '\n') && strncasecmp(p, "Content-Length:", 15) == 0)
          clen = strtoul(p + 15, NULL, 10);
      char *b = malloc(clen + 1);
      size_t got = c->have - hlen < clen ? c->have - hlen : clen;
      memcpy(b, c->buf + hlen, got);
      while (got < clen) {
        ssize_t r = recv(c->fd, b + got, clen - got, 0);
        if (r <= 0) { if (r < 0 && errno == EINTR) continue; free(b); return -1; }
        got += (size_t)r;
      }
      b[clen] = '\0';
      size_t used = hlen + (c->have - hlen < clen ? c->have - hlen : clen);
      memmove(c->buf, c->buf + used, c->have - used);
      c->have -= used;
      *body = b;
      return status;
    }
    if (c->have == sizeof c->buf) return -1;
    ssize_t r = recv(c->fd, c->buf + c->have, sizeof c->buf - c->have, 0);
    if (r <= 0) { if (r < 0 && errno == EINTR) continue; return -1; }
    c->have += (size_t)r;
  }
}

/* One request on the connection (reconnecting once if the server closed it). */
static inline int th_request(th_conn *c, const char *method, const char *path, const char *body,
                             const char *extra_headers, char **resp) {
  for (int attempt = 0; attempt < 2; attempt++) {
    if (c->fd < 0 && th_connect(c, c->port)) return -1;
    if (th_send_request(c, method, path, body, extra_headers) == 0) {
      int st = th_read_response(c, resp);
      if (st >= 0) return st;
    }
    th_close(c);
  }
  return -1;
}

#endif
