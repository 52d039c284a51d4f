/* GET /metrics of the Perseus server: jobs, ranks, rounds, parked requests, requests by route
 * and status with their latency, and dump failures, after a real job ran rounds over HTTP. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

#include "pfo_http.h"

#define ROUNDS 3
static int g_port;
static char g_job[256];

static double value_of(const char *text, const char *prefix) {
  size_t n = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, prefix, n) != 0) continue;
    const char *eol = strchr(p, '\n');
    const char *sp = eol ? eol : p + strlen(p);
    while (sp > p && sp[-1] != ' ') sp--;
    return strtod(sp, NULL);
  }
  return NAN;
}

typedef struct { int rank, failures; } rank_arg;

static void *rank_main(void *p) {
  rank_arg *a = p;
  th_conn c = {.fd = -1, .port = g_port};
  char path[400], body[600], *resp;
  snprintf(path, sizeof path, "/register_rank/%s", g_job);
  snprintf(body, sizeof body, "{\"rank\": %d, \"dp_rank\": 0, \"pp_rank\": %d, \"tp_rank\": 0, "
           "\"available_frequencies\": [1410, 1000]}", a->rank, a->rank);
  if (th_request(&c, "POST", path, body, NULL, &resp) != 200) a->failures++;
  free(resp);
  for (int round = 0; round < ROUNDS && !a->failures; round++) {
    snprintf(path, sizeof path, "/schedule/%s?rank=%d", g_job, a->rank);
    if (th_request(&c, "GET", path, NULL, NULL, &resp) != 200) a->failures++;
    free(resp);
    snprintf(path, sizeof path, "/result/%s", g_job);
    snprintf(body, sizeof body, "{\"rank\": %d, \"iter_time\": [1.5], \"iter_energy\": [100], "
             "\"time_breakdown\": {\"forward\": [[0.1]], \"backward\": [[0.2]]}, "
             "\"energy_breakdown\": {\"forward\": [[1]], \"backward\": [[2]]}}", a->rank);
    if (th_request(&c, "POST", path, body, NULL, &resp) != 200) a->failures++;
    free(resp);
  }
  th_close(&c);
  return NULL;
}

/* /metrics until `prefix` reaches `want` (requests are counted once their answer is sent, which a
 * client may see a moment earlier), at most 5 s. Returns the last text (free()). */
static char *metrics_until(th_conn *c, const char *prefix, double want) {
  char *resp = NULL;
  for (int i = 0; i < 500; i++) {
    free(resp);
    assert_int_equal(th_request(c, "GET", "/metrics", NULL, NULL, &resp), 200);
    if (value_of(resp, prefix) == want) break;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return resp;
}

static void pfo_server_metrics_count_jobs_rounds_and_requests(void **state) {
  (void)state;
  zeus_pfo_server *s;
  zeus_pfo_server_opts o = {.port = -1, .scheduler = "AllMaxFrequency",
                            .scheduler_args = "{\"num_microbatches\": 2}"};
  assert_zeus_ok(zeus_pfo_server_open(&s, &o));
  g_port = zeus_pfo_server_port(s);
  th_conn c = {.fd = -1, .port = g_port};
  char *resp;
  assert_int_equal(th_request(&c, "POST", "/register_job",
                              "{\"job_id\": \"\", \"pp_degree\": 2, \"dp_degree\": 1, \"tp_degree\": 1, "
                              "\"world_size\": 2}", NULL, &resp), 200);
  snprintf(g_job, sizeof g_job, "%.*s", (int)strlen(resp) - 2, resp + 1);
  free(resp);
  assert_int_equal(th_request(&c, "GET", "/no/such/route", NULL, NULL, &resp), 404);
  free(resp);
  assert_int_equal(th_request(&c, "POST", "/info", "{}", NULL, &resp), 405);
  free(resp);
  pthread_t th[2];
  rank_arg a[2] = {{0, 0}, {1, 0}};
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, rank_main, &a[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  assert_int_equal(a[0].failures + a[1].failures, 0);

  char *m = metrics_until(&c, "zeus_pfo_requests_total{route=\"/result/{job_id}\",code=\"200\"}", 2 * ROUNDS);
  assert_non_null(strstr(m, "# TYPE zeus_pfo_requests_total counter\n"));
  assert_near(value_of(m, "zeus_pfo_jobs "), 1, 0);
  assert_near(value_of(m, "zeus_pfo_ranks "), 2, 0);
  assert_near(value_of(m, "zeus_pfo_rounds_total "), ROUNDS, 0);
  assert_near(value_of(m, "zeus_pfo_parked_requests "), 0, 0);
  assert_near(value_of(m, "zeus_pfo_present_ranks "), 0, 0); /* these ranks hold no presence */
  assert_near(value_of(m, "zeus_pfo_dump_failures_total "), 0, 0);
  assert_near(value_of(m, "zeus_pfo_requests_total{route=\"/register_job\",code=\"200\"}"), 1, 0);
  assert_near(value_of(m, "zeus_pfo_requests_total{route=\"/register_rank/{job_id}\",code=\"200\"}"), 2, 0);
  assert_near(value_of(m, "zeus_pfo_requests_total{route=\"/schedule/{job_id}\",code=\"200\"}"), 2 * ROUNDS, 0);
  assert_near(value_of(m, "zeus_pfo_requests_total{route=\"/result/{job_id}\",code=\"200\"}"), 2 * ROUNDS, 0);
  assert_near(value_of(m, "zeus_pfo_requests_total{route=\"other\",code=\"404\"}"), 1, 0);
  assert_near(value_of(m, "zeus_pfo_requests_total{route=\"/info\",code=\"405\"}"), 1, 0);
  assert_near(value_of(m, "zeus_pfo_request_duration_seconds_count{route=\"/schedule/{job_id}\",status_class=\"2xx\"}"),
              2 * ROUNDS, 0);
  assert_near(value_of(m, "zeus_pfo_request_duration_seconds_bucket{route=\"/schedule/{job_id}\",status_class=\"2xx\","
                          "le=\"+Inf\"}"), 2 * ROUNDS, 0);
  assert_true(value_of(m, "zeus_pfo_request_duration_seconds_sum{route=\"/schedule/{job_id}\",status_class=\"2xx\"}") > 0);
  assert_near(value_of(m, "zeus_pfo_request_duration_seconds_count{route=\"other\",status_class=\"4xx\"}"), 1, 0);
  /* Only the series that happened: no 5xx answers, no 5xx histogram. */
  assert_null(strstr(m, "status_class=\"5xx\""));
  /* The client's URL (the job id) never becomes a label. */
  assert_null(strstr(m, g_job));
  assert_near(value_of(m, "zeus_pfo_failed_jobs "), 0, 0);
  free(m);
  /* A rank that leaves: its own route label, and the job counts as failed. */
  char path[400];
  snprintf(path, sizeof path, "/leave/%s", g_job);
  assert_int_equal(th_request(&c, "POST", path, "{\"rank\": 0, \"reason\": \"done early\"}", NULL, &resp), 200);
  free(resp);
  m = metrics_until(&c, "zeus_pfo_requests_total{route=\"/leave/{job_id}\",code=\"200\"}", 1);
  assert_near(value_of(m, "zeus_pfo_requests_total{route=\"/leave/{job_id}\",code=\"200\"}"), 1, 0);
  assert_near(value_of(m, "zeus_pfo_failed_jobs "), 1, 0);
  assert_near(value_of(m, "zeus_pfo_ended_jobs "), 0, 0);
  assert_near(value_of(m, "zeus_pfo_jobs "), 1, 0);
  free(m);
  /* A second job whose rank leaves because its training ended (what zeus_pfo_optimizer_close
   * sends) counts as ended, not failed; a 'closed' that is not a boolean is refused. */
  assert_int_equal(th_request(&c, "POST", "/register_job",
                              "{\"job_id\": \"\", \"pp_degree\": 1, \"dp_degree\": 1, \"tp_degree\": 1, "
                              "\"world_size\": 1}", NULL, &resp), 200);
  char job2[256];
  snprintf(job2, sizeof job2, "%.*s", (int)strlen(resp) - 2, resp + 1);
  free(resp);
  snprintf(path, sizeof path, "/register_rank/%s", job2);
  assert_int_equal(th_request(&c, "POST", path,
                              "{\"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0, "
                              "\"available_frequencies\": [1000], \"pipe_schedule\": [\"forward1\", \"backward1\"]}",
                              NULL, &resp), 200);
  free(resp);
  snprintf(path, sizeof path, "/leave/%s", job2);
  assert_int_equal(th_request(&c, "POST", path, "{\"rank\": 0, \"closed\": \"yes\"}", NULL, &resp), 400);
  assert_non_null(strstr(resp, "'closed' must be true or false"));
  free(resp);
  assert_int_equal(th_request(&c, "POST", path, "{\"rank\": 0, \"reason\": \"done\", \"closed\": true}", NULL,
                              &resp), 200);
  free(resp);
  m = metrics_until(&c, "zeus_pfo_ended_jobs ", 1);
  assert_near(value_of(m, "zeus_pfo_ended_jobs "), 1, 0);
  assert_near(value_of(m, "zeus_pfo_failed_jobs "), 1, 0);
  assert_near(value_of(m, "zeus_pfo_jobs "), 2, 0);
  free(m);
  th_close(&c);
  zeus_pfo_server_close(s);
}

static void pfo_server_metrics_need_the_token_when_set(void **state) {
  (void)state;
  zeus_pfo_server *s;
  zeus_pfo_server_opts o = {.port = -1, .scheduler = "AllMaxFrequency",
                            .scheduler_args = "{\"num_microbatches\": 2}", .token = "tok"};
  assert_zeus_ok(zeus_pfo_server_open(&s, &o));
  th_conn c = {.fd = -1, .port = zeus_pfo_server_port(s)};
  char *resp;
  assert_int_equal(th_request(&c, "GET", "/metrics", NULL, NULL, &resp), 401);
  free(resp);
  assert_int_equal(th_request(&c, "GET", "/metrics", NULL, "Authorization: Bearer tok\r\n", &resp), 200);
  assert_non_null(strstr(resp, "zeus_pfo_jobs 0\n"));
  free(resp);
  th_close(&c);
  zeus_pfo_server_close(s);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pfo_server_metrics_count_jobs_rounds_and_requests),
      cmocka_unit_test(pfo_server_metrics_need_the_token_when_set),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
