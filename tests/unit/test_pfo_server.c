/* The Perseus server end to end over loopback HTTP: ranks in threads, dumps checked file by file,
 * and every kind of bad input answered with its status while the job carries on. */
#include "test_util.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <pthread.h>

#include <zeus.h>

#include "pfo_http.h"

#define WORLD 8
#define ROUNDS 20

static char g_dir[256];
static char g_plan[512];
static char g_job[256];
static int g_port;

static zeus_pfo_server *start(const char *token, size_t body_max, bool dump) {
  zeus_pfo_server *s;
  char args[700];
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", g_plan);
  char dump_dir[300];
  snprintf(dump_dir, sizeof dump_dir, "%s/dump", g_dir);
  zeus_pfo_server_opts o = {.port = -1, .scheduler = "PointSolution", .scheduler_args = args,
                            .dump_data = dump, .dump_dir = dump_dir, .token = token,
                            .max_body_bytes = body_max};
  assert_zeus_ok(zeus_pfo_server_open(&s, &o));
  g_port = zeus_pfo_server_port(s);
  assert_true(g_port > 0);
  return s;
}

static void write_plan(void) {
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  snprintf(g_plan, sizeof g_plan, "%s/freqs_pipeline_00000.py", g_dir);
  FILE *f = fopen(g_plan, "w");
  fputs("# one entry per rank\n[\n", f);
  for (int r = 0; r < WORLD; r++) fprintf(f, "  [(\"forward\", %d), (\"backward\", %d)],\n", 1000 + r, 1100 + r);
  fputs("]\n", f);
  fclose(f);
}

static void register_job(th_conn *c, int pp, const char *hdr) {
  char body[256], *resp;
  snprintf(body, sizeof body, "{\"job_id\": \"\", \"pp_degree\": %d, \"dp_degree\": 1, \"tp_degree\": 1, "
           "\"world_size\": %d, \"job_metadata\": \"e2e/test run\"}", pp, pp);
  assert_int_equal(th_request(c, "POST", "/register_job", body, hdr, &resp), 200);
  assert_true(resp[0] == '"');
  snprintf(g_job, sizeof g_job, "%.*s", (int)strlen(resp) - 2, resp + 1);
  assert_null(strchr(g_job, '/'));
  assert_non_null(strstr(g_job, "+dp1+pp"));
  free(resp);
}

static int register_rank(th_conn *c, int rank, int pp) {
  char path[400], body[256], *resp;
  snprintf(path, sizeof path, "/register_rank/%s", g_job);
  snprintf(body, sizeof body, "{\"rank\": %d, \"dp_rank\": 0, \"pp_rank\": %d, \"tp_rank\": 0, "
           "\"available_frequencies\": [1410, %d, %d]}", rank, rank % pp, 1100 + rank, 1000 + rank);
  int st = th_request(c, "POST", path, body, NULL, &resp);
  free(resp);
  return st;
}

static int post_result(th_conn *c, int rank, int round) {
  char path[400], body[1024], *resp;
  snprintf(path, sizeof path, "/result/%s", g_job);
  snprintf(body, sizeof body, "{\"rank\": %d, \"iter_time\": [%d.5, %d.25], \"iter_energy\": [%d, %d], "
           "\"time_breakdown\": {\"forward\": [[0.1, 0.2], [0.3]], \"backward\": [[0.4], [0.5]]}, "
           "\"energy_breakdown\": {\"forward\": [[1, 2], [3]], \"backward\": [[4], [5]]}}",
           rank, round, round, rank * 1000 + round, rank);
  int st = th_request(c, "POST", path, body, NULL, &resp);
  free(resp);
  return st;
}

typedef struct { int rank; int failures; char err[256]; } rank_arg;

static void *rank_main(void *p) {
  rank_arg *a = p;
  th_conn c = {.fd = -1, .port = g_port};
  if (register_rank(&c, a->rank, WORLD) != 200) { a->failures++; snprintf(a->err, sizeof a->err, "register"); }
  char path[400], want[256];
  snprintf(path, sizeof path, "/schedule/%s?rank=%d", g_job, a->rank);
  snprintf(want, sizeof want, "{\"rank\":%d,\"frequencies\":[[\"forward\",%d],[\"backward\",%d]]}", a->rank,
           1000 + a->rank, 1100 + a->rank);
  for (int round = 0; round < ROUNDS && !a->failures; round++) {
    char *resp;
    int st = th_request(&c, "GET", path, NULL, NULL, &resp);
    if (st != 200 || strcmp(resp, want) != 0) {
      a->failures++;
      snprintf(a->err, sizeof a->err, "round %d: GET -> %d %s", round, st, resp ? resp : "");
    }
    free(resp);
    if (post_result(&c, a->rank, round) != 200) {
      a->failures++;
      snprintf(a->err, sizeof a->err, "round %d: POST", round);
    }
  }
  th_close(&c);
  return NULL;
}

static void server_runs_8_ranks_for_20_rounds_and_dumps_every_file(void **state) {
  (void)state;
  write_plan();
  zeus_pfo_server *s = start(NULL, 0, true);
  th_conn c = {.fd = -1, .port = g_port};
  char *resp;
  assert_int_equal(th_request(&c, "GET", "/info", NULL, NULL, &resp), 200);
  assert_non_null(strstr(resp, "\"scheduler\":\"PointSolution\""));
  assert_non_null(strstr(resp, "\"version\""));
  free(resp);
  register_job(&c, WORLD, NULL);
  assert_non_null(strstr(g_job, "+PointSolution+e2e_test_run"));
  pthread_t th[WORLD];
  rank_arg args[WORLD];
  for (int r = 0; r < WORLD; r++) {
    args[r] = (rank_arg){.rank = r};
    pthread_create(&th[r], NULL, rank_main, &args[r]);
  }
  for (int r = 0; r < WORLD; r++) {
    pthread_join(th[r], NULL);
    if (args[r].failures) fail_msg("rank %d: %s", r, args[r].err);
  }
  th_close(&c);
  zeus_pfo_server_close(s);

  /* The dumps, file by file. */
  char jd[600];
  snprintf(jd, sizeof jd, "%s/dump/%s", g_dir, g_job);
  zeus_pfo_rank_info *ranks;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_ranks(jd, &ranks, &n));
  assert_int_equal(n, WORLD);
  for (int r = 0; r < WORLD; r++) {
    assert_int_equal(ranks[r].rank, r);
    assert_int_equal(ranks[r].n_available_frequencies, 3);
  }
  zeus_pfo_ranks_free(ranks, n);
  for (int round = 0; round <= ROUNDS; round++) {
    zeus_pfo_schedule *sc;
    assert_zeus_ok(zeus_pfo_load_schedules(jd, round, &sc, &n));
    assert_int_equal(n, WORLD);
    for (int r = 0; r < WORLD; r++) {
      assert_int_equal(sc[r].rank, r);
      assert_int_equal(sc[r].frequencies[1].frequency_mhz, 1100 + r);
    }
    zeus_pfo_schedules_free(sc, n);
    if (round == ROUNDS) break;
    zeus_pfo_prof_result *pr;
    assert_zeus_ok(zeus_pfo_load_prof(jd, round, &pr, &n));
    assert_int_equal(n, WORLD);
    for (int r = 0; r < WORLD; r++) {
      assert_int_equal(pr[r].rank, r);
      assert_true(pr[r].iter_time[0] == round + 0.5);
      assert_true(pr[r].iter_energy[0] == r * 1000 + round);
      assert_int_equal(pr[r].n_time_breakdown, 2);
      assert_true(pr[r].energy_breakdown[0].values[2] == 3);
    }
    zeus_pfo_prof_results_free(pr, n);
  }
  char extra[700];
  snprintf(extra, sizeof extra, "%s/%d.prof.json", jd, ROUNDS);
  assert_int_not_equal(access(extra, F_OK), 0);
}

static int status_of(th_conn *c, const char *method, const char *path, const char *body, const char *hdr,
                     const char *needle) {
  char *resp = NULL;
  int st = th_request(c, method, path, body, hdr, &resp);
  if (needle && (!resp || !strstr(resp, needle)))
    fail_msg("%s %s -> %d '%s' lacks '%s'", method, path, st, resp ? resp : "", needle);
  free(resp);
  return st;
}

static void server_answers_bad_input_with_its_code_and_the_job_carries_on(void **state) {
  (void)state;
  write_plan();
  /* A 2-rank plan for a 2-rank job. */
  zeus_test_write_file(g_plan, "[[(\"forward\", 1410)], [(\"backward\", 1001)]]");
  zeus_pfo_server *s = start(NULL, 4096, false);
  th_conn c = {.fd = -1, .port = g_port};
  char path[600];
  /* Registering a job. */
  assert_int_equal(
      status_of(&c, "POST", "/register_job", "{\"job_id\": \"\",\n \"pp_degree\": 2,,}", NULL, "JobInfo:2:"), 400);
  assert_int_equal(status_of(&c, "POST", "/register_job", "{\"job_id\": \"\", \"pp_degree\": 2, \"dp_degree\": 1, "
                             "\"world_size\": 2}", NULL, "missing field 'tp_degree'"), 400);
  assert_int_equal(status_of(&c, "POST", "/register_job", "{\"job_id\": \"mine\", \"pp_degree\": 2, \"dp_degree\": 1, "
                             "\"tp_degree\": 1, \"world_size\": 2}", NULL, "job_id"), 400);
  assert_int_equal(status_of(&c, "POST", "/register_job", "{\"job_id\": \"\", \"pp_degree\": 2, \"dp_degree\": 1, "
                             "\"tp_degree\": 1, \"world_size\": 3}", NULL, "world_size"), 400);
  assert_int_equal(status_of(&c, "GET", "/register_job", NULL, NULL, "not allowed"), 405);
  assert_int_equal(status_of(&c, "GET", "/nowhere", NULL, NULL, "no such route"), 404);
  char big[6000];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(status_of(&c, "POST", "/register_job", big, NULL, "larger than the limit"), 413);
  th_close(&c);
  register_job(&c, 2, NULL);
  /* Ranks. */
  assert_int_equal(status_of(&c, "POST", "/register_rank/no-such-job", "{}", NULL, "unknown job"), 404);
  snprintf(path, sizeof path, "/register_rank/%s", g_job);
  assert_int_equal(status_of(&c, "POST", path, "{\"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 5, \"tp_rank\": 0, "
                             "\"available_frequencies\": [1410]}", NULL, "pp_rank"), 400);
  assert_int_equal(status_of(&c, "POST", path, "{\"rank\": 0, \"dp_rank\": 0, \"pp_rank\": 0, \"tp_rank\": 0}",
                             NULL, "available_frequencies"), 400);
  assert_int_equal(register_rank(&c, 0, 2), 200);
  assert_int_equal(register_rank(&c, 0, 2), 409);
  assert_int_equal(register_rank(&c, 2, 2), 400);
  assert_int_equal(status_of(&c, "DELETE", path, NULL, NULL, NULL), 405);
  /* Rank 0 waits, then its client goes away and comes back on a new connection. */
  th_conn gone = {.fd = -1, .port = g_port};
  assert_int_equal(th_connect(&gone, g_port), 0);
  snprintf(path, sizeof path, "/schedule/%s?rank=0", g_job);
  assert_int_equal(th_send_request(&gone, "GET", path, NULL, NULL), 0);
  usleep(50 * 1000);
  th_close(&gone);
  assert_int_equal(register_rank(&c, 1, 2), 200);
  snprintf(path, sizeof path, "/schedule/%s?rank=7", g_job);
  assert_int_equal(status_of(&c, "GET", path, NULL, NULL, "rank"), 400);
  snprintf(path, sizeof path, "/schedule/%s?rank=x", g_job);
  assert_int_equal(status_of(&c, "GET", path, NULL, NULL, "expected an integer"), 400);
  snprintf(path, sizeof path, "/schedule/%s", g_job);
  assert_int_equal(status_of(&c, "GET", path, NULL, NULL, "missing query parameter 'rank'"), 400);
  snprintf(path, sizeof path, "/result/%s", g_job);
  assert_int_equal(status_of(&c, "POST", path, "[1, 2", NULL, "ProfilingResult:1:"), 400);
  assert_int_equal(status_of(&c, "POST", path, "{\"rank\": 0, \"iter_time\": [1], \"iter_energy\": [1], "
                             "\"time_breakdown\": {}, \"energy_breakdown\": []}", NULL, "energy_breakdown"), 400);
  assert_int_equal(post_result(&c, 0, 0), 409); /* no schedule received yet */
  /* The round goes on: rank 0 asks again (new connection), rank 1 asks, both answered. The job id
   * is used as is (with its '+' signs) and percent-encoded. */
  th_conn c0 = {.fd = -1, .port = g_port};
  assert_int_equal(th_connect(&c0, g_port), 0);
  char enc[600], *q = enc;
  for (const char *p = g_job; *p; p++) q += *p == '+' ? sprintf(q, "%%2B") : sprintf(q, "%c", *p);
  *q = '\0';
  snprintf(path, sizeof path, "/schedule/%s?rank=0", enc);
  assert_int_equal(th_send_request(&c0, "GET", path, NULL, NULL), 0);
  snprintf(path, sizeof path, "/schedule/%s?rank=1", g_job);
  assert_int_equal(status_of(&c, "GET", path, NULL, NULL, "[[\"backward\",1001]]"), 200);
  char *resp;
  assert_int_equal(th_read_response(&c0, &resp), 200);
  assert_non_null(strstr(resp, "[[\"forward\",1410]]"));
  free(resp);
  assert_int_equal(post_result(&c0, 0, 0), 200);
  assert_int_equal(post_result(&c0, 0, 0), 409);
  assert_int_equal(post_result(&c, 1, 0), 200);
  snprintf(path, sizeof path, "/schedule/%s?rank=0", g_job);
  assert_int_equal(th_send_request(&c0, "GET", path, NULL, NULL), 0);
  snprintf(path, sizeof path, "/schedule/%s?rank=1", g_job);
  assert_int_equal(status_of(&c, "GET", path, NULL, NULL, "backward"), 200);
  assert_int_equal(th_read_response(&c0, &resp), 200);
  free(resp);
  th_close(&c0);
  th_close(&c);
  zeus_pfo_server_close(s);
}

static void server_requires_the_bearer_token_when_set(void **state) {
  (void)state;
  write_plan();
  zeus_pfo_server *s = start("s3cret", 0, false);
  th_conn c = {.fd = -1, .port = g_port};
  assert_int_equal(status_of(&c, "GET", "/info", NULL, NULL, "bearer token"), 401);
  assert_int_equal(status_of(&c, "GET", "/info", NULL, "Authorization: Bearer wrong\r\n", NULL), 401);
  assert_int_equal(status_of(&c, "POST", "/register_job", "{}", NULL, NULL), 401);
  assert_int_equal(status_of(&c, "GET", "/info", NULL, "Authorization: Bearer s3cret\r\n", "\"auth\":true"), 200);
  register_job(&c, WORLD, "Authorization: Bearer s3cret\r\n");
  th_close(&c);
  zeus_pfo_server_close(s);
}

static void server_answers_waiting_requests_with_503_on_close(void **state) {
  (void)state;
  write_plan();
  zeus_pfo_server *s = start(NULL, 0, false);
  th_conn c = {.fd = -1, .port = g_port};
  register_job(&c, WORLD, NULL);
  assert_int_equal(register_rank(&c, 0, WORLD), 200);
  char path[400];
  snprintf(path, sizeof path, "/schedule/%s?rank=0", g_job);
  assert_int_equal(th_send_request(&c, "GET", path, NULL, NULL), 0);
  usleep(50 * 1000);
  zeus_pfo_server_close(s);
  char *resp;
  int st = th_read_response(&c, &resp);
  assert_true(st == 503 || st == -1);
  if (st == 503) assert_non_null(strstr(resp, "shutting down"));
  free(resp);
  th_close(&c);
}

/* A dump that cannot be written (here the job's folder was replaced by a file) does not stop
 * the job: the round goes on, and GET /info counts the failure and names it. */
static void server_keeps_serving_when_a_dump_fails_and_reports_it(void **state) {
  (void)state;
  write_plan();
  zeus_test_write_file(g_plan, "[[(\"forward\", 1410)], [(\"backward\", 1001)]]");
  zeus_pfo_server *s = start(NULL, 0, true);
  th_conn a = {.fd = -1, .port = g_port}, b = {.fd = -1, .port = g_port};
  char *resp;
  assert_int_equal(th_request(&a, "GET", "/info", NULL, NULL, &resp), 200);
  assert_non_null(strstr(resp, "\"dump_failures\":0"));
  free(resp);
  register_job(&a, 2, NULL);
  char jd[800];
  snprintf(jd, sizeof jd, "%s/dump/%s", g_dir, g_job);
  assert_int_equal(rmdir(jd), 0);
  zeus_test_write_file(jd, "not a folder");
  assert_int_equal(register_rank(&a, 0, 2), 200);
  assert_int_equal(register_rank(&a, 1, 2), 200);
  char path[400];
  snprintf(path, sizeof path, "/schedule/%s?rank=0", g_job);
  assert_int_equal(th_send_request(&a, "GET", path, NULL, NULL), 0);
  snprintf(path, sizeof path, "/schedule/%s?rank=1", g_job);
  assert_int_equal(th_request(&b, "GET", path, NULL, NULL, &resp), 200);
  assert_non_null(strstr(resp, "[[\"backward\",1001]]"));
  free(resp);
  assert_int_equal(th_read_response(&a, &resp), 200);
  assert_non_null(strstr(resp, "[[\"forward\",1410]]"));
  free(resp);
  assert_int_equal(th_request(&a, "GET", "/info", NULL, NULL, &resp), 200);
  /* ranks.json and 0.sched.json failed. */
  assert_non_null(strstr(resp, "\"dump_failures\":2"));
  assert_non_null(strstr(resp, "dumping schedule 0 failed"));
  free(resp);
  th_close(&a);
  th_close(&b);
  zeus_pfo_server_close(s);
}

/* ---- many ranks, each on one keep-alive connection (issue 36) ---- */

#define BURST_RANKS 512
#define BURST_MAX_ROUNDS 64
#define BURST_BOUND_S 20.0

typedef struct {
  int fd, round;
  bool get; /* sending or awaiting GET /schedule (else POST /result) */
  char out[512];
  size_t out_len, out_off;
  char in[2048];
  size_t in_len;
} burst_rank;

static void burst_next(burst_rank *r, int rank, bool get) {
  static const char body_fmt[] =
      "{\"rank\": %d, \"iter_time\": [1.5], \"iter_energy\": [2], \"time_breakdown\": "
      "{\"forward\": [[0.1]], \"backward\": [[0.2]]}, \"energy_breakdown\": "
      "{\"forward\": [[1]], \"backward\": [[2]]}}";
  char body[300];
  int bl = snprintf(body, sizeof body, body_fmt, rank);
  r->get = get;
  r->out_off = r->in_len = 0;
  r->out_len = get ? (size_t)snprintf(r->out, sizeof r->out, "GET /schedule/%s?rank=%d HTTP/1.1\r\nHost: x\r\n\r\n",
                                      g_job, rank)
                   : (size_t)snprintf(r->out, sizeof r->out,
                                      "POST /result/%s HTTP/1.1\r\nHost: x\r\nContent-Type: "
                                      "application/json\r\nContent-Length: %d\r\n\r\n%s",
                                      g_job, bl, body);
}

/* A whole response in r->in: its status, else 0 (more to come). */
static int burst_response(burst_rank *r) {
  r->in[r->in_len] = '\0';
  const char *end = strstr(r->in, "\r\n\r\n"), *cl = strcasestr(r->in, "Content-Length:");
  if (!end || !cl || (size_t)(end + 4 - r->in) + strtoul(cl + 15, NULL, 10) > r->in_len) return 0;
  return atoi(r->in + 9);
}

/* Every rank of a 512-rank job holds one keep-alive connection and, round after round, long-polls
 * its schedule (parked until the round's results are in, then resumed) and sends its result on
 * the same connection. The end of a round answers every rank together, so the results arrive in
 * one burst of hundreds (here sent together once every schedule is in). libmicrohttpd 0.9.75's
 * epoll thread left such a burst unserved (a full batch of 128 events, then a blocking wait:
 * ZEUS__PFO_BENCH_LOOP=mhd-epoll makes the server use it, and the test then fails at its bound).
 * Bounded: 20 s. */
static void burst_rounds(int threads, int rounds) {
  zeus_pfo_server *s;
  zeus_pfo_server_opts o = {
      .port = -1, .scheduler = "AllMaxFrequency", .scheduler_args = "{\"num_microbatches\": 2}", .threads = threads};
  assert_zeus_ok(zeus_pfo_server_open(&s, &o));
  g_port = zeus_pfo_server_port(s);
  int pp = 8, dp = BURST_RANKS / pp;
  th_conn *c = calloc(1, sizeof *c);
  c->fd = -1;
  c->port = g_port;
  char body[256], path[400], *resp;
  snprintf(body, sizeof body,
           "{\"job_id\": \"\", \"pp_degree\": %d, \"dp_degree\": %d, \"tp_degree\": 1, "
           "\"world_size\": %d}",
           pp, dp, BURST_RANKS);
  assert_int_equal(th_request(c, "POST", "/register_job", body, NULL, &resp), 200);
  snprintf(g_job, sizeof g_job, "%.*s", (int)strlen(resp) - 2, resp + 1);
  free(resp);
  snprintf(path, sizeof path, "/register_rank/%s", g_job);
  for (int r = 0; r < BURST_RANKS; r++) {
    snprintf(body, sizeof body,
             "{\"rank\": %d, \"dp_rank\": %d, \"pp_rank\": %d, \"tp_rank\": 0, "
             "\"available_frequencies\": [1410, 1000]}",
             r, r % dp, r / dp);
    assert_int_equal(th_request(c, "POST", path, body, NULL, &resp), 200);
    free(resp);
  }
  th_close(c);
  free(c);

  burst_rank *rk = calloc(BURST_RANKS, sizeof *rk);
  struct pollfd *pf = calloc(BURST_RANKS, sizeof *pf);
  for (int r = 0; r < BURST_RANKS; r++) {
    th_conn t;
    assert_int_equal(th_connect(&t, g_port), 0);
    rk[r].fd = t.fd;
    fcntl(rk[r].fd, F_SETFL, O_NONBLOCK);
    burst_next(&rk[r], r, true);
  }
  double t0 = zeus_monotonic_s();
  int done = 0, scheduled = 0, answered[BURST_MAX_ROUNDS] = {0};
  while (done < BURST_RANKS && zeus_monotonic_s() - t0 < BURST_BOUND_S) {
    for (int r = 0; r < BURST_RANKS; r++)
      pf[r] = (struct pollfd){.fd = rk[r].round < rounds && rk[r].out_len ? rk[r].fd : -1,
                              .events = rk[r].out_off < rk[r].out_len ? POLLOUT : POLLIN};
    if (poll(pf, BURST_RANKS, 250) <= 0) continue;
    for (int r = 0; r < BURST_RANKS; r++) {
      burst_rank *b = &rk[r];
      if (!pf[r].revents) continue;
      if (b->out_off < b->out_len) {
        ssize_t w = send(b->fd, b->out + b->out_off, b->out_len - b->out_off, MSG_NOSIGNAL);
        if (w > 0) b->out_off += (size_t)w;
        continue;
      }
      ssize_t n = recv(b->fd, b->in + b->in_len, sizeof b->in - 1 - b->in_len, 0);
      if (n <= 0)
        fail_msg(
            "rank %d, round %d: the server closed its connection after %.1f s, its %s unanswered (expected "
            "an answer to every request)",
            r, b->round, zeus_monotonic_s() - t0, b->get ? "GET" : "POST");
      b->in_len += (size_t)n;
      int st = burst_response(b);
      if (!st) continue;
      if (st != 200) fail_msg("rank %d, round %d: %s answered %d: %s", r, b->round, b->get ? "GET" : "POST", st, b->in);
      if (b->get) {
        /* The results go out together once every schedule is in, as from ranks in step. */
        b->out_len = b->out_off = 0;
        if (++scheduled < BURST_RANKS) continue;
        scheduled = 0;
        for (int k = 0; k < BURST_RANKS; k++) {
          burst_next(&rk[k], k, false);
          ssize_t w = send(rk[k].fd, rk[k].out, rk[k].out_len, MSG_NOSIGNAL);
          if (w > 0) rk[k].out_off = (size_t)w;
        }
      } else {
        answered[b->round]++;
        if (++b->round == rounds)
          done++;
        else
          burst_next(b, r, true);
      }
    }
  }
  if (done < BURST_RANKS) {
    int round = 0;
    while (round < rounds - 1 && answered[round] == BURST_RANKS) round++;
    fail_msg(
        "after %.0f s, round %d: %d of %d ranks' results answered (expected every rank's every round, "
        "%d rounds, within the bound)",
        BURST_BOUND_S, round, answered[round], BURST_RANKS, rounds);
  }
  for (int r = 0; r < BURST_RANKS; r++) close(rk[r].fd);
  free(rk);
  free(pf);
  zeus_pfo_server_close(s);
}

static void server_serves_the_request_after_a_resumed_long_poll_for_512_ranks_at_once(void **state) {
  (void)state;
  burst_rounds(1, 16);
}

/* The same over 4 HTTP threads for 64 rounds: a round's last result resumes long polls on every
 * thread, so each is woken by another (libmicrohttpd in external mode has no channel of its own
 * for that). Without the wake-up every thread but the last result's sleeps through its resumed
 * polls (fails at round 0). A rarer loss, a wake-up flag cleared before its eventfd was read,
 * hung bench_pfo_server once in about 50 rounds of 1,024 ranks under load; this test did not
 * catch that one in 4 tries. */
static void server_wakes_every_http_thread_for_its_resumed_long_polls(void **state) {
  (void)state;
  burst_rounds(4, BURST_MAX_ROUNDS);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(server_runs_8_ranks_for_20_rounds_and_dumps_every_file),
      cmocka_unit_test(server_answers_bad_input_with_its_code_and_the_job_carries_on),
      cmocka_unit_test(server_requires_the_bearer_token_when_set),
      cmocka_unit_test(server_answers_waiting_requests_with_503_on_close),
      cmocka_unit_test(server_keeps_serving_when_a_dump_fails_and_reports_it),
      cmocka_unit_test(server_serves_the_request_after_a_resumed_long_poll_for_512_ranks_at_once),
      cmocka_unit_test(server_wakes_every_http_thread_for_its_resumed_long_polls),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
