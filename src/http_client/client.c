/* The HTTP client side shared by grid/, pfo_client/ and metric_push/ over libcurl
 * (src/http_client/client.h). */
#include "http_client/client.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init_rc;
static void init_once(void) { g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int zeus__http_init(const char *who) {
  pthread_once(&g_once, init_once);
  if (g_init_rc == CURLE_OK) return ZEUS_OK;
  return zeus__error(ZEUS_ENET, "%s%scannot initialise libcurl: %s", who ? who : "", who ? ": " : "",
                     curl_easy_strerror(g_init_rc));
}

/* libcurl's write callback: the answer into the buffer, never more than the cap. Returning less
 * than it was given makes libcurl end the transfer (CURLE_WRITE_ERROR). */
static size_t on_body(char *p, size_t size, size_t n, void *ud) {
  zeus__http_body *b = ud;
  size_t got = size * n;
  if (b->b.len + got > b->cap) {
    b->too_big = true;
    if (!b->truncate) return 0;
    size_t take = b->cap - b->b.len;
    if (take && zeus__buf_append(&b->b, p, take)) return 0;
    return got;
  }
  if (zeus__buf_append(&b->b, p, got)) return 0;
  return got;
}

void zeus__http_setup(CURL *c, const char *url, const zeus__http_opts *o, zeus__http_body *body,
                      char errbuf[CURL_ERROR_SIZE]) {
  curl_easy_reset(c);
  errbuf[0] = '\0';
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  if (o->headers) curl_easy_setopt(c, CURLOPT_HTTPHEADER, o->headers);
  if (o->post) {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, o->post);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)o->post_len);
  } else {
    curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  }
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, o->timeout_s > 0 ? (long)(o->timeout_s * 1000) : 0L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_s > 0 ? (long)(o->connect_timeout_s * 1000) : 0L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  if (o->user_agent) curl_easy_setopt(c, CURLOPT_USERAGENT, o->user_agent);
  if (o->any_encoding) curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
  if (o->web_only) {
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(c, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
  }
}

CURLcode zeus__http_perform(CURL *c, long *status) {
  CURLcode cc = curl_easy_perform(c);
  *status = 0;
  if (cc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
  return cc;
}

void zeus__http_redact(char *s, const char *secret) {
  if (!secret || !secret[0]) return;
  size_t kl = strlen(secret);
  for (char *p = strstr(s, secret); p; p = strstr(p + kl, secret)) memset(p, '*', kl);
}

void zeus__http_quote(char *out, size_t n, const char *s, size_t len, const char *secret) {
  if (!n) return;
  if (!s || !len) {
    snprintf(out, n, "(no message)");
    return;
  }
  size_t k = len < n - 1 ? len : n - 1;
  memcpy(out, s, k);
  out[k] = '\0';
  zeus__http_redact(out, secret);
  for (char *p = out; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  k = strlen(out);
  while (k && out[k - 1] == ' ') out[--k] = '\0';
  if (!k) snprintf(out, n, "(no message)");
}

int zeus__http_result(CURLcode cc, long status, const zeus__http_body *body, const char *errbuf,
                      const char *detail, const zeus__http_report *r) {
  if (body && body->too_big && !body->truncate)
    return zeus__error(r->too_big_rc ? r->too_big_rc : ZEUS_ERANGE, "%s answered more than %zu bytes", r->what,
                       body->cap);
  if (cc != CURLE_OK) {
    char why[CURL_ERROR_SIZE];
    snprintf(why, sizeof why, "%s", errbuf && errbuf[0] ? errbuf : curl_easy_strerror(cc));
    zeus__http_redact(why, r->secret);
    if (cc == CURLE_OPERATION_TIMEDOUT)
      return zeus__error(ZEUS_ETIMEDOUT, "%s: no answer within %g s (%s)%s", r->what, r->timeout_s, why,
                         r->timeout_hint ? r->timeout_hint : "");
    return zeus__error(ZEUS_ENET, "%s: %s (%s)%s", r->what, curl_easy_strerror(cc), why,
                       r->net_hint ? r->net_hint : "");
  }
  if (status >= 200 && status <= 299) return ZEUS_OK;
  char quote[301];
  if (!detail) zeus__http_quote(quote, sizeof quote, body ? body->b.data : NULL, body ? body->b.len : 0, r->secret);
  return zeus__error(ZEUS_EHTTP, "%s answered %s%ld: %s", r->what, r->status_prefix ? r->status_prefix : "", status,
                     detail ? detail : quote);
}
