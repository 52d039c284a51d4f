/* src/http_client/client.h: the HTTP client side that the components talking to a server share
 * (not API): libcurl initialised once, an easy handle set up with our limits, an answer read
 * into a buffer of bounded size, and the failure of a request turned into ZEUS_ETIMEDOUT,
 * ZEUS_ENET, ZEUS_ERANGE or ZEUS_EHTTP with a message naming the server and the request. Used by
 * grid/ (ElectricityMaps, OpenEI), pfo_client/ (zeus pfo-server) and metric_push/ (Pushgateway);
 * built only with one of them (ZEUS_WITH_HTTP_CLIENT), so that a build without them links no
 * libcurl. Secrets (API keys, bearer tokens) go in headers or the URL; the helper never logs
 * either, and blanks a given secret wherever it quotes text the server or libcurl produced. */
#ifndef ZEUS_HTTP_CLIENT_H
#define ZEUS_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include <curl/curl.h>

#include "core/core.h"

/* curl_global_init() once per process (thread-safe). ZEUS_OK, or ZEUS_ENET "cannot initialise
 * libcurl: <why>" (prefixed "<who>: " when who is not NULL). */
int zeus__http_init(const char *who);

/* An answer's body, read into b (NUL-terminated) up to `cap` bytes. Over the cap the transfer is
 * refused (curl_easy_perform fails with CURLE_WRITE_ERROR) and too_big set; with `truncate` the
 * first cap bytes are kept, the rest read and dropped, and too_big set all the same. */
typedef struct zeus__http_body {
  zeus__buf b;
  size_t cap;
  bool truncate;
  bool too_big;
} zeus__http_body;

/* What a request sends and how long it may take. Zero-initialised: GET, no headers, no limits. */
typedef struct zeus__http_opts {
  const char *user_agent;      /* NULL: libcurl's none */
  struct curl_slist *headers;  /* borrowed; must live until the transfer ends */
  const char *post;            /* NULL: GET; else POST of post_len bytes */
  size_t post_len;
  double timeout_s;            /* the whole transfer; 0: none */
  double connect_timeout_s;    /* 0: libcurl's default */
  bool web_only;               /* only http:// and https:// (no other protocol, no redirect to one) */
  bool any_encoding;           /* Accept-Encoding: every encoding libcurl decodes */
} zeus__http_opts;

/* Resets `c` and sets it up for one request of `url`: no signals, the options above, the answer
 * into *body, libcurl's message into errbuf (emptied). */
void zeus__http_setup(CURL *c, const char *url, const zeus__http_opts *o, zeus__http_body *body,
                      char errbuf[CURL_ERROR_SIZE]);

/* curl_easy_perform(c); the answer's HTTP status in *status (0 when the transfer failed). */
CURLcode zeus__http_perform(CURL *c, long *status);

/* How a failed request is reported: every message starts with `what`, which names the server, its
 * URL and the request ("ElectricityMaps at http://h:8080: GET /v3/carbon-intensity/latest"). */
typedef struct zeus__http_report {
  const char *what;
  double timeout_s;          /* quoted by a timeout's message */
  const char *timeout_hint;  /* added to a timeout's message, or NULL */
  const char *net_hint;      /* added to a network error's message, or NULL */
  int too_big_rc;            /* the code of an answer over the cap; 0: ZEUS_ERANGE */
  const char *status_prefix; /* before the status: "HTTP " gives "answered HTTP 500"; NULL: "" */
  const char *secret;        /* blanked in every quoted text; NULL: none */
} zeus__http_report;

/* The outcome of a transfer as our error model: ZEUS_OK for a 2xx answer; otherwise
 *   ZEUS_ERANGE (too_big_rc) "<what> answered more than <cap> bytes"
 *   ZEUS_ETIMEDOUT "<what>: no answer within <timeout_s> s (<libcurl's message>)<timeout_hint>"
 *   ZEUS_ENET      "<what>: <libcurl error> (<libcurl's message>)<net_hint>"
 *   ZEUS_EHTTP     "<what> answered <status_prefix><status>: <detail>"
 * where detail is `detail` when not NULL (quoted as is), else the start of the body on one line (at most 300
 * bytes), or "(no message)". */
int zeus__http_result(CURLcode cc, long status, const zeus__http_body *body, const char *errbuf,
                      const char *detail, const zeus__http_report *r);

/* Copies at most n - 1 bytes of s (len bytes) into out on one line: line breaks become blanks,
 * trailing blanks go, the secret (when not NULL or empty) is blanked; "(no message)" when empty. */
void zeus__http_quote(char *out, size_t n, const char *s, size_t len, const char *secret);

/* Blanks (with '*') every occurrence of secret in s. */
void zeus__http_redact(char *s, const char *secret);

#endif
