/* The Perseus client's HTTP transport: libcurl, one easy handle (one keep-alive connection) per
 * optimizer, timeouts, and retries with back-off on connection errors and 503 answers. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "pfo_client/client_http.h"
#include "core/core.h"

#define HTTP_MAX_BODY (64u << 20)
#define HTTP_MAX_BACKOFF_S 30.0

struct zeus__pfo_http {
  CURL *curl;
  char *base;
  struct curl_slist *hdrs;
  zeus__pfo_http_opts o;
  char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc;
static void curl_init_once(void) { g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

int zeus__pfo_http_open(zeus__pfo_http **out, const char *url, const zeus__pfo_http_opts *o) {
  if (!url || !*url)
    return zeus__error(ZEUS_EINVAL, "Perseus client: the server URL is required (server_url or ZEUS_PFO_SERVER_URL)");
  if (strncasecmp(url, "http://", 7) != 0 && strncasecmp(url, "https://", 8) != 0)
    return zeus__error(ZEUS_EINVAL, "Perseus client: server URL '%s' must start with http:// or https://", url);
  pthread_once(&g_curl_once, curl_init_once);
  if (g_curl_init_rc != CURLE_OK)
    return zeus__error(ZEUS_ENET, "Perseus client: libcurl failed to initialise: %s",
                       curl_easy_strerror(g_curl_init_rc));
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

typedef struct sink {
  zeus__buf b;
  bool too_big;
} sink;

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
  sink *s = ud;
  size_t len = size * n;
  if (s->b.len + len > HTTP_MAX_BODY) {
    s->too_big = true;
    return 0;
  }
  if (zeus__buf_append(&s->b, p, len)) return 0;
  return len;
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
static void easy_setup(zeus__pfo_http *h, const char *url, double timeout_s, sink *s) {
  CURL *c = h->curl;
  curl_easy_reset(c);
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->hdrs);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)(h->o.connect_timeout_s * 1000));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_s > 0 ? (long)(timeout_s * 1000) : 0L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, h->errbuf);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "zeus-pfo-client");
  h->errbuf[0] = '\0';
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
    CURL *c = h->curl;
    sink s = {0};
    easy_setup(h, url.data, timeout, &s);
    if (post) {
      curl_easy_setopt(c, CURLOPT_POST, 1L);
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(body ? strlen(body) : 0));
    } else {
      curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    CURLcode cc = curl_easy_perform(c);
    long code = 0;
    if (cc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
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
    double spent = zeus_monotonic_s() - t0;
    if (cc != CURLE_OK) {
      const char *why = h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc);
      if (s.too_big)
        rc = zeus__error(ZEUS_ENET, "Perseus server %s: %s %s: the answer is larger than %u bytes", h->base, method,
                         path, HTTP_MAX_BODY);
      else if (cc == CURLE_OPERATION_TIMEDOUT)
        rc = zeus__error(ZEUS_ETIMEDOUT, "Perseus server %s: %s %s: no answer within %g s (%s)%s", h->base, method,
                         path, timeout, why,
                         long_poll ? "; a schedule comes only once every rank of the job has asked for it: are all "
                                     "ranks running? (ZEUS_PFO_SCHEDULE_TIMEOUT sets the limit)"
                                   : "");
      else
        rc = zeus__error(ZEUS_ENET, "Perseus server %s: %s %s: %s (%s), after %d tr%s over %.2f s; is the server "
                         "running at that address?", h->base, method, path, curl_easy_strerror(cc), why, attempt + 1,
                         attempt ? "ies" : "y", spent);
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
    rc = zeus__error(ZEUS_EHTTP, "Perseus server %s: %s %s answered %ld: %s", h->base, method, path, code, detail);
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
  sink s = {0};
  *status = 0;
  easy_setup(h, url.data, 0, &s); /* no timeout: it lasts as long as the rank */
  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 10L);
  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 5L);
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_hold_progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)stop);
  CURLcode cc = curl_easy_perform(c);
  int rc = ZEUS_OK;
  long code = 0;
  if (cc == CURLE_OK) {
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    *status = (int)code;
  } else if (cc != CURLE_ABORTED_BY_CALLBACK) {
    rc = zeus__error(ZEUS_ENET, "Perseus server %s: GET %s: %s (%s)", h->base, path, curl_easy_strerror(cc),
                     h->errbuf[0] ? h->errbuf : "no detail");
  }
  zeus__buf_free(&s.b);
  zeus__buf_free(&url);
  return rc;
}
