/* The HTTP client side that grid/, pfo_client/ and metric_push/ share (src/http_client/) against
 * a server in this process that answers with a body larger than the cap, slowly, with an error
 * status whose body echoes the request's Authorization header, or not at all. Proves the body cap
 * (refused or truncated, and reported), the mapping of libcurl's outcome and of the HTTP status
 * to ZEUS_ERANGE, ZEUS_ETIMEDOUT, ZEUS_ENET and ZEUS_EHTTP with messages that name the URL, and
 * that a secret the server echoes is blanked in them. */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "test_http_server.h"
#include "test_util.h"

#include "core/core.h"
#include "http_client/client.h"

#define SECRET "TOKEN-5e1f0c7a9b"
#define BIG 100000

typedef enum { A_OK, A_BIG, A_SLOW, A_401 } answer_kind;

typedef struct server {
  zeus_test_http_server http;
  int port;           /* http.port */
  pthread_mutex_t mu; /* what follows */
  answer_kind kind;
  char last_method[16], last_body[256], last_auth[128], last_type[128];
} server;

static void serve(void *ud, int fd, const zeus_test_http_request *rq) {
  server *s = ud;
  pthread_mutex_lock(&s->mu);
  snprintf(s->last_method, sizeof s->last_method, "%s", rq->method);
  snprintf(s->last_body, sizeof s->last_body, "%s", rq->body);
  zeus_test_http_header(rq->head, "Authorization", s->last_auth, sizeof s->last_auth);
  zeus_test_http_header(rq->head, "Content-Type", s->last_type, sizeof s->last_type);
  answer_kind kind = s->kind;
  char auth[128];
  snprintf(auth, sizeof auth, "%s", s->last_auth);
  pthread_mutex_unlock(&s->mu);
  char *body;
  int status = 200;
  if (kind == A_BIG) {
    body = malloc(BIG + 1);
    memset(body, 'x', BIG);
    body[BIG] = '\0';
  } else if (kind == A_401) {
    status = 401;
    char b[512];
    snprintf(b, sizeof b, "wrong token\r\nyou sent: %s\n\n", auth);
    body = strdup(b);
  } else {
    if (kind == A_SLOW) usleep(1000 * 1000);
    body = strdup("hello");
  }
  zeus_test_http_reply(fd, status, NULL, body);
  free(body);
}

static void server_start(server *s, answer_kind kind) {
  memset(s, 0, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  s->kind = kind;
  zeus_test_http_start(&s->http, serve, s);
  s->port = s->http.port;
}

static void server_stop(server *s) {
  zeus_test_http_stop(&s->http);
  pthread_mutex_destroy(&s->mu);
}

/* One request of http://127.0.0.1:<port>/path with the options given; the outcome mapped. */
typedef struct call {
  zeus__http_body body;
  CURLcode cc;
  long status;
  int rc;
  char url[128], what[256];
} call;

static void request(call *k, int port, const zeus__http_opts *o, zeus__http_report *r) {
  assert_int_equal(zeus__http_init(NULL), ZEUS_OK);
  snprintf(k->url, sizeof k->url, "http://127.0.0.1:%d/path", port);
  snprintf(k->what, sizeof k->what, "Test server at %s: GET /path", k->url);
  r->what = k->what;
  CURL *c = curl_easy_init();
  assert_non_null(c);
  char errbuf[CURL_ERROR_SIZE];
  zeus__http_setup(c, k->url, o, &k->body, errbuf);
  k->cc = zeus__http_perform(c, &k->status);
  k->rc = zeus__http_result(k->cc, k->status, &k->body, errbuf, NULL, r);
  curl_easy_cleanup(c);
}

static void http_client_body_over_the_cap_is_refused_and_reported(void **state) {
  (void)state;
  server s;
  server_start(&s, A_BIG);
  zeus__http_opts o = {.timeout_s = 5, .connect_timeout_s = 5, .web_only = true};
  call k = {.body = {.cap = 1000}};
  zeus__http_report r = {.timeout_s = 5};
  request(&k, s.port, &o, &r);
  assert_int_equal(k.cc, CURLE_WRITE_ERROR);
  assert_true(k.body.too_big);
  assert_true(k.body.b.len <= 1000);
  assert_int_equal(k.rc, ZEUS_ERANGE);
  assert_non_null(strstr(zeus_errmsg(), "Test server at http://127.0.0.1:"));
  assert_non_null(strstr(zeus_errmsg(), "GET /path answered more than 1000 bytes"));
  zeus__buf_free(&k.body.b);

  /* the code is the caller's (the Perseus client reports ZEUS_ENET) */
  call k2 = {.body = {.cap = 1000}};
  zeus__http_report r2 = {.timeout_s = 5, .too_big_rc = ZEUS_ENET};
  request(&k2, s.port, &o, &r2);
  assert_int_equal(k2.rc, ZEUS_ENET);
  zeus__buf_free(&k2.body.b);

  /* within the cap: all of it */
  call k3 = {.body = {.cap = BIG}};
  zeus__http_report r3 = {.timeout_s = 5};
  request(&k3, s.port, &o, &r3);
  assert_int_equal(k3.rc, ZEUS_OK);
  assert_int_equal(k3.status, 200);
  assert_int_equal(k3.body.b.len, BIG);
  assert_false(k3.body.too_big);
  zeus__buf_free(&k3.body.b);
  server_stop(&s);
}

static void http_client_truncating_body_keeps_the_first_cap_bytes(void **state) {
  (void)state;
  server s;
  server_start(&s, A_BIG);
  zeus__http_opts o = {.timeout_s = 5, .connect_timeout_s = 5};
  call k = {.body = {.cap = 300, .truncate = true}};
  zeus__http_report r = {.timeout_s = 5};
  request(&k, s.port, &o, &r);
  assert_int_equal(k.cc, CURLE_OK);
  assert_int_equal(k.rc, ZEUS_OK);
  assert_true(k.body.too_big);
  assert_int_equal(k.body.b.len, 300);
  assert_int_equal(strlen(k.body.b.data), 300);
  zeus__buf_free(&k.body.b);
  server_stop(&s);
}

static void http_client_timeout_maps_to_etimedout_with_the_hint(void **state) {
  (void)state;
  server s;
  server_start(&s, A_SLOW);
  zeus__http_opts o = {.timeout_s = 0.2, .connect_timeout_s = 0.2};
  call k = {.body = {.cap = 1000}};
  zeus__http_report r = {.timeout_s = 0.2, .timeout_hint = "; is it overloaded?", .net_hint = "; NOT THIS"};
  double t0 = zeus_monotonic_s();
  request(&k, s.port, &o, &r);
  assert_true(zeus_monotonic_s() - t0 < 0.9);
  assert_int_equal(k.cc, CURLE_OPERATION_TIMEDOUT);
  assert_int_equal(k.rc, ZEUS_ETIMEDOUT);
  assert_non_null(strstr(zeus_errmsg(), k.what));
  assert_non_null(strstr(zeus_errmsg(), ": no answer within 0.2 s ("));
  assert_non_null(strstr(zeus_errmsg(), "; is it overloaded?"));
  assert_null(strstr(zeus_errmsg(), "NOT THIS"));
  zeus__buf_free(&k.body.b);
  server_stop(&s);
}

static void http_client_unreachable_server_maps_to_enet(void **state) {
  (void)state;
  server s;
  server_start(&s, A_OK);
  int port = s.port;
  server_stop(&s); /* nothing listens there any more */
  zeus__http_opts o = {.timeout_s = 2, .connect_timeout_s = 2};
  call k = {.body = {.cap = 1000}};
  zeus__http_report r = {.timeout_s = 2, .net_hint = "; is it running at that address?"};
  request(&k, port, &o, &r);
  assert_int_equal(k.cc, CURLE_COULDNT_CONNECT);
  assert_int_equal(k.rc, ZEUS_ENET);
  assert_non_null(strstr(zeus_errmsg(), k.what));
  assert_non_null(strstr(zeus_errmsg(), curl_easy_strerror(CURLE_COULDNT_CONNECT)));
  assert_non_null(strstr(zeus_errmsg(), "; is it running at that address?"));
  zeus__buf_free(&k.body.b);
}

static void http_client_error_status_names_the_url_and_blanks_the_secret(void **state) {
  (void)state;
  server s;
  server_start(&s, A_401);
  struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer " SECRET);
  zeus__http_opts o = {.headers = h, .timeout_s = 5, .connect_timeout_s = 5, .user_agent = "zeus-test"};
  call k = {.body = {.cap = 1000}};
  zeus__http_report r = {.timeout_s = 5, .status_prefix = "HTTP ", .secret = SECRET};
  request(&k, s.port, &o, &r);
  curl_slist_free_all(h);
  pthread_mutex_lock(&s.mu);
  assert_string_equal(s.last_auth, "Bearer " SECRET); /* it was sent */
  pthread_mutex_unlock(&s.mu);
  assert_int_equal(k.status, 401);
  assert_int_equal(k.rc, ZEUS_EHTTP);
  const char *m = zeus_errmsg();
  assert_non_null(strstr(m, k.url));
  assert_non_null(strstr(m, "GET /path answered HTTP 401: wrong token  you sent: Bearer ****************"));
  assert_null(strstr(m, SECRET));
  assert_null(strchr(m, '\n'));
  assert_null(strchr(m, '\r'));
  assert_int_equal(m[strlen(m) - 1], '*'); /* trailing line breaks dropped */

  /* a detail given by the caller (the server's JSON "detail") is quoted instead of the body */
  zeus__http_report r2 = {.what = "Perseus server http://x: POST /j"};
  assert_int_equal(zeus__http_result(CURLE_OK, 409, &k.body, NULL, "registered twice", &r2), ZEUS_EHTTP);
  assert_string_equal(zeus_errmsg(), "Perseus server http://x: POST /j answered 409: registered twice");
  zeus__buf_free(&k.body.b);
  server_stop(&s);
}

static void http_client_post_sends_the_body_and_headers(void **state) {
  (void)state;
  server s;
  server_start(&s, A_OK);
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: text/plain");
  const char *payload = "metric 1\n";
  zeus__http_opts o = {.headers = h, .post = payload, .post_len = strlen(payload), .timeout_s = 5,
                       .connect_timeout_s = 5, .web_only = true};
  call k = {.body = {.cap = 1000}};
  zeus__http_report r = {.timeout_s = 5};
  request(&k, s.port, &o, &r);
  curl_slist_free_all(h);
  assert_int_equal(k.rc, ZEUS_OK);
  assert_string_equal(k.body.b.data, "hello");
  pthread_mutex_lock(&s.mu);
  assert_string_equal(s.last_method, "POST");
  assert_string_equal(s.last_body, payload);
  assert_string_equal(s.last_type, "text/plain");
  pthread_mutex_unlock(&s.mu);
  zeus__buf_free(&k.body.b);
  server_stop(&s);
}

static void http_client_quote_is_one_line_bounded_and_redacted(void **state) {
  (void)state;
  char q[16];
  zeus__http_quote(q, sizeof q, "a\r\nb", 4, NULL);
  assert_string_equal(q, "a  b");
  zeus__http_quote(q, sizeof q, "", 0, NULL);
  assert_string_equal(q, "(no message)");
  zeus__http_quote(q, sizeof q, "\r\n\n", 3, NULL);
  assert_string_equal(q, "(no message)");
  zeus__http_quote(q, sizeof q, "0123456789abcdefghij", 20, NULL);
  assert_string_equal(q, "0123456789abcde");
  zeus__http_quote(q, sizeof q, "k=KEY&x=KEY", 11, "KEY");
  assert_string_equal(q, "k=***&x=***");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(http_client_body_over_the_cap_is_refused_and_reported),
      cmocka_unit_test(http_client_truncating_body_keeps_the_first_cap_bytes),
      cmocka_unit_test(http_client_timeout_maps_to_etimedout_with_the_hint),
      cmocka_unit_test(http_client_unreachable_server_maps_to_enet),
      cmocka_unit_test(http_client_error_status_names_the_url_and_blanks_the_secret),
      cmocka_unit_test(http_client_post_sends_the_body_and_headers),
      cmocka_unit_test(http_client_quote_is_one_line_bounded_and_redacted),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
