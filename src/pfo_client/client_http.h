/* src/pfo_client/client_http.h: the Perseus client's HTTP transport (not API). */
#ifndef ZEUS_PFO_CLIENT_HTTP_H
#define ZEUS_PFO_CLIENT_HTTP_H

#include <stddef.h>

#include "core/core.h"

typedef struct zeus__pfo_http zeus__pfo_http;

typedef struct zeus__pfo_http_opts {
  double connect_timeout_s;
  double request_timeout_s;
  double schedule_timeout_s; /* long polls */
  int retries;
  double retry_backoff_s;
  const char *token; /* NULL: none */
} zeus__pfo_http_opts;

/* A connection to the server at `url` ("http://host:port", a trailing '/' is ignored). The URL is
 * checked, nothing is contacted. ZEUS_EINVAL for a URL that is not http:// or https://. */
int zeus__pfo_http_open(zeus__pfo_http **out, const char *url, const zeus__pfo_http_opts *o);
void zeus__pfo_http_close(zeus__pfo_http *h);
/* The base URL without the trailing '/'. */
const char *zeus__pfo_http_url(const zeus__pfo_http *h);

/* Adds a header line ("Name: value") to every later request. ZEUS_ENOMEM only. */
int zeus__pfo_http_add_header(zeus__pfo_http *h, const char *line);

/* Percent-encodes a path segment (caller frees with free()). NULL when out of memory. */
char *zeus__pfo_http_escape(zeus__pfo_http *h, const char *s);

/* One request. `path` starts with '/'; `body` is JSON or NULL (GET). `long_poll` uses the
 * schedule timeout instead of the request timeout. Connection errors and 503 answers are retried
 * with back-off; when a request was retried, an answer with status `ok_on_retry` (0: none) counts
 * as success, since the earlier try may have reached the server (409 "registered twice").
 * On success *resp holds the body (NUL-terminated, free()) and *status the HTTP status.
 * Errors: ZEUS_ENET (unreachable after the retries), ZEUS_ETIMEDOUT, ZEUS_EHTTP "<url>: <method>
 * <path> answered <status>: <server's detail>" with *status set. */
int zeus__pfo_http_request(zeus__pfo_http *h, const char *method, const char *path, const char *body,
                           bool long_poll, int ok_on_retry, char **resp, int *status);
/* One try of a request, with no retry and at most `timeout_s` (a best-effort notice such as
 * POST /leave, which must not hold up a rank that is stopping). Errors as above. */
int zeus__pfo_http_request_once(zeus__pfo_http *h, const char *method, const char *path, const char *body,
                                double timeout_s, char **resp, int *status);

/* Holds GET `path` open until the server answers, the connection breaks, or *stop becomes true
 * (looked at about once a second): no timeout but the connect timeout; TCP keep-alive on. For
 * GET /presence, which the server keeps open for as long as the rank lives. ZEUS_OK with *status
 * when the server answered (any status), or with *status 0 when *stop ended it; ZEUS_ENET when
 * the connection failed or broke. */
int zeus__pfo_http_hold(zeus__pfo_http *h, const char *path, const volatile bool *stop, int *status);

#endif
