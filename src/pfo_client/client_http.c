/* The Perseus client's HTTP transport: libcurl, one easy handle (one keep-alive connection) per
 * optimizer, timeouts, and retries with back-off on connection errors and 503 answers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "pfo_client/client_http.h"
#include "core/core.h"
#include "http_client/client.h"

#define HTTP_MAX_BODY (64u << 20)
#define HTTP_MAX_BACKOFF_S 30.0

struct zeus__pfo_http {
  CURL *curl;
  char *base;
  struct curl_slist *hdrs;
  zeus__pfo_http_opts o;
  char errbuf[CURL_ERROR_SIZE];
};

int zeus__pfo_http_open(zeus__pfo_http **out, const char *url, const zeus__pfo_http_opts *o) {
  if (!url || !*url)
    return zeus__error(ZEUS_EINVAL, "Perseus client: the server URL is required (server_url or ZEUS_PFO_SERVER_URL)");
  if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
    return zeus__error(ZEUS_EINVAL, "Perseus client: server URL '%s' must start with http:// or https://", url);
  int rc = zeus__http_init("Perseus client");
  if (rc) return rc;
  zeus__pfo_http *h = calloc(1, sizeof *h);
  if (!h) return zeus__oom("creating the HTTP client");
  h->o = *o;
  size_t n = strlen(url);
  while (n > 0 && url[n - 1] == '/') n--;
  h->base = malloc(n + 1);
  h->curl = curl_easy_init();
  if (!h->base || !h->curl) {
    zeus__pfo_http_close(h);
    return zeus__oom("creating the HTTP client");
  }
  memcpy(h->base, url, n);
  h->base[n] = '\0';
  h->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
  h->hdrs = h->hdrs ? curl_slist_append(h->hdrs, "Accept: application/json") : NULL;
  h->hdrs = h->hdrs ? curl_slist_append(h->hdrs, "Expect:") : NULL; /* no 100-continue round trip */
  if (h->hdrs && o->token && *o->token) {
    zeus__buf b = {0};
    if (zeus__buf_printf(&b, "Authorization: Bearer %s", o->token) == ZEUS_OK) {
      struct curl_slist *l = curl_slist_append(h->hdrs, b.data);
      if (!l) curl_slist_free_all(h->hdrs);
      h->hdrs = l;
    } else {
      curl_slist_free_all(h->hdrs);
      h->hdrs = NULL;
    }
    zeus__buf_free(&b);
  }
  if (!h->hdrs) {
    zeus__pfo_http_close(h);
    return zeus__oom("creating the HTTP client");
  }
  *out = h;
  return ZEUS_OK;
}

void zeus__pfo_http_close(zeus__pfo_http *h) {
  if (!h) return;
  if (h->curl) curl_easy_cleanup(h->curl);
  curl_slist_free_all(h->hdrs);
  free(h->base);
  free(h);
}

const char *zeus__pfo_http_url(const zeus__pfo_http *h) { return h->base; }

int zeus__pfo_http_add_header(zeus__pfo_http *h, const char *line) {
  struct curl_slist *l = curl_slist_append(h->hdrs, line);
  if (!l) return zeus__oom("adding an HTTP header");
  h->hdrs = l;
  return ZEUS_OK;
}

int zeus__pfo_http_request_once(zeus__pfo_http *h, const char *method, const char *path, const char *body,
                                double timeout_s, char **resp, int *status) {
  zeus__pfo_http_opts saved = h->o;
  h->o.retries = 0;
  if (h->o.request_timeout_s > timeout_s) h->o.request_timeout_s = timeout_s;
  if (h->o.connect_timeout_s > timeout_s) h->o.connect_timeout_s = timeout_s;
  int rc = zeus__pfo_http_request(h, method, path, body, false, 0, resp, status);
  h->o = saved;
  return rc;
}

char *zeus__pfo_http_escape(zeus__pfo_http *h, const char *s) {
  char *e = curl_easy_escape(h->curl, s, 0);
  if (!e) return NULL;
  char *d = zeus__strdup(e);
  curl_free(e);
  return d;
}

static bool transient(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return true;
    default:
      return false;
  }
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* The server's {"detail": "..."} message, or the body itself (shortened). */
static void detail_of(const char *body, size_t len, char *out, size_t n) {
  json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
  const char *d = j ? json_string_value(json_object_get(j, "detail")) : NULL;
  if (d) snprintf(out, n, "%s", d);
  else if (body && len) snprintf(out, n, "%.*s", (int)(len > 300 ? 300 : len), body);
  else snprintf(out, n, "(no message)");
  json_decref(j);
}

/* The settings every request of ours has (the easy handle is reset first). */
static void easy_setup(zeus__pfo_http *h, const char *url, double timeout_s, const char *post,
                       zeus__http_body *s) {
  zeus__http_opts o = {.user_agent = "zeus-pfo-client", .headers = h->hdrs, .post = post,
                       .post_len = post ? strlen(post) : 0, .timeout_s = timeout_s,
                       .connect_timeout_s = h->o.connect_timeout_s};
  zeus__http_setup(h->curl, url, &o, s, h->errbuf);
  curl_easy_setopt(h->curl, CURLOPT_TCP_KEEPALIVE, 1L);
}

int zeus__pfo_http_request(zeus__pfo_http *h, const char *method, const char *path, const char *body,
                           bool long_poll, int ok_on_retry, char **resp, int *status) {
  zeus__buf url = {0};
  if (zeus__buf_printf(&url, "%s%s", h->base, path)) return zeus__oom("building a URL");
  bool post = strcmp(method, "POST") == 0;
  double timeout = long_poll ? h->o.schedule_timeout_s : h->o.request_timeout_s;
  double t0 = zeus_monotonic_s(), backoff = h->o.retry_backoff_s;
  int rc = ZEUS_OK;
  *status = 0;
  for (int attempt = 0;; attempt++) {
    zeus__http_body s = {.cap = HTTP_MAX_BODY};
    easy_setup(h, url.data, timeout, post ? (body ? body : "") : NULL, &s);
    long code;
    CURLcode cc = zeus__http_perform(h->curl, &code);
    bool retry = transient(cc) || (cc == CURLE_OK && code == 503);
    if (retry && attempt < h->o.retries) {
      zeus__log(ZEUS_LOG_INFO, "pfo", "%s %s%s: %s; retrying in %.3g s (try %d of %d)", method, h->base, path,
                cc == CURLE_OK ? "503 Service Unavailable" : (h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc)),
                backoff, attempt + 2, h->o.retries + 1);
      zeus__buf_free(&s.b);
      sleep_s(backoff);
      backoff = fmin(backoff * 2, HTTP_MAX_BACKOFF_S);
      continue;
    }
    char what[1024], net_hint[128];
    snprintf(what, sizeof what, "Perseus server %s: %s %s", h->base, method, path);
    snprintf(net_hint, sizeof net_hint, ", after %d tr%s over %.2f s; is the server running at that address?",
             attempt + 1, attempt ? "ies" : "y", zeus_monotonic_s() - t0);
    zeus__http_report r = {
        .what = what,
        .timeout_s = timeout,
        .timeout_hint = long_poll ? "; a schedule comes only once every rank of the job has asked for it: are all "
                                    "ranks running? (ZEUS_PFO_SCHEDULE_TIMEOUT sets the limit)"
                                  : NULL,
        .net_hint = net_hint,
        .too_big_rc = ZEUS_ENET};
    if (cc != CURLE_OK) {
      rc = zeus__http_result(cc, code, &s, h->errbuf, NULL, &r);
      zeus__buf_free(&s.b);
      break;
    }
    *status = (int)code;
    if ((code >= 200 && code < 300) || (attempt > 0 && ok_on_retry && code == ok_on_retry)) {
      /* An empty body still gives the caller a (empty) string. */
      if (!s.b.data && zeus__buf_append(&s.b, "", 0)) { rc = zeus__oom("reading an answer"); break; }
      *resp = s.b.data;
      break;
    }
    char detail[600];
    detail_of(s.b.data, s.b.len, detail, sizeof detail);
    zeus__buf_free(&s.b);
    rc = zeus__http_result(cc, code, NULL, NULL, detail, &r);
    break;
  }
  zeus__buf_free(&url);
  return rc;
}

/* ---- a held request (GET /presence) ---- */

static int on_hold_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  return __atomic_load_n((const volatile bool *)ud, __ATOMIC_ACQUIRE) ? 1 : 0;
}

int zeus__pfo_http_hold(zeus__pfo_http *h, const char *path, const volatile bool *stop, int *status) {
  zeus__buf url = {0};
  if (zeus__buf_printf(&url, "%s%s", h->base, path)) return zeus__oom("building a URL");
  CURL *c = h->curl;
  zeus__http_body s = {.cap = HTTP_MAX_BODY};
  easy_setup(h, url.data, 0, NULL, &s); /* no timeout: it lasts as long as the rank */
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 10L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_hold_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)stop);
  long code;
  CURLcode cc = zeus__http_perform(c, &code);
  int rc = ZEUS_OK;
  *status = (int)code;
  if (cc != CURLE_OK && cc != CURLE_ABORTED_BY_CALLBACK) {
    rc = zeus__error(ZEUS_ENET, "Perseus server %s: GET %s: %s (%s)", h->base, path, curl_easy_strerror(cc),
                     h->errbuf[0] ? h->errbuf : "no detail");
  }
  zeus__buf_free(&s.b);
  zeus__buf_free(&url);
  return rc;
}
