/* The Perseus client and its server: an unreachable server, HTTP errors with the server's
 * message, a restarted server, joining a given job, schedules the client must refuse, and a rank
 * that fails to start taking every rank of the job down with it (none hangs). */
#define PFO_CLIENT_TESTUTIL_SERVER
#include <stdatomic.h>

#include "pfo_client_testutil.h"
#include "pfo_http.h"
#include "test_http_server.h"

static void client_server_down_at_start_fails_after_retries(void **state) {
  (void)state;
  fresh_dir();
  /* A port nobody listens on, held by a bound socket that never listens (so that no test running
   * beside this one can take it meanwhile): connecting is refused. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
  int port = ntohs(sa.sin_port);
  char url[64];
  url_of(port, url, sizeof url);
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  solo_opts(&o, url, 1, d);
  zeus_pfo_optimizer *opt = NULL;
  double t0 = zeus_monotonic_s();
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_ENET, "after 3 tries");
  double spent = zeus_monotonic_s() - t0;
  url[strlen(url) - 1] = '\0'; /* the client drops the trailing '/' */
  assert_non_null(strstr(zeus_errmsg(), url));
  assert_non_null(strstr(zeus_errmsg(), "POST /register_job"));
  assert_true(spent >= 0.14); /* backed off 0.05 + 0.1 s */
  assert_true(spent < 5);
  assert_null(opt);
  assert_unlocked(d); /* the controller started and put everything back */
  zeus_devices_close(d);
  close(fd);
}

static void client_http_error_carries_the_servers_message(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", "{\"num_microbatches\": 1}", -1, "s3cret");
  char url[64];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  solo_opts(&o, url, 1, d);
  zeus_pfo_optimizer *opt = NULL;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EHTTP, "answered 401: missing or wrong bearer token");
  o.token = "s3cret";
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

/* Two ranks on their own simulated GPUs, driving the hooks directly (one forward, one backward). */
typedef struct restart_rank {
  int rank;
  const char *url;
  zeus_thread_group *tg;
  zeus_devices *d;
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int *phase; /* 0: run; 1: rank paused after round 1; 2: released */
  int rc;
  long iters_done;
  char err[1024];
} restart_rank;

static void *restart_rank_main(void *p) {
  restart_rank *a = p;
  zeus_collective coll;
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer *opt = NULL;
  static const char *const order[] = {"forward", "backward"};
  zeus_pfo_optimizer_opts_init(&o);
  int rc = zeus_thread_group_collective(a->tg, a->rank, &coll);
  if (!rc) {
    o.server_url = a->url;
    o.rank = a->rank, o.pp_rank = a->rank;
    o.pp_degree = 2, o.dp_degree = 1, o.tp_degree = 1, o.world_size = 2;
    o.devices = a->d;
    o.collective = &coll;
    o.pipe_schedule = order, o.n_pipe_schedule = 2;
    o.iters_per_round = 1;
    o.retries = 40, o.retry_backoff_s = 0.02, o.schedule_timeout_s = 20;
    rc = zeus_pfo_optimizer_open(&opt, &o);
  }
  for (int i = 0; i < 2 && !rc; i++, a->iters_done++) rc = one_iteration(opt);
  if (!rc) {
    pthread_mutex_lock(a->mu);
    if (a->rank == 1) { /* rank 1 holds back until the server has been replaced */
      *a->phase = 1;
      pthread_cond_broadcast(a->cv);
      while (*a->phase != 2) pthread_cond_wait(a->cv, a->mu);
    }
    pthread_mutex_unlock(a->mu);
    /* Rank 0 posts its result and waits for rank 1 in the schedule request when the server goes
     * away; rank 1 comes to the new server. Both must fail, saying the job is unknown. */
    rc = one_iteration(opt);
    if (!rc) a->iters_done++;
  }
  a->rc = rc;
  if (rc) snprintf(a->err, sizeof a->err, "%s", zeus_errmsg());
  if (opt && rc && !zeus_pfo_detached(opt)) snprintf(a->err, sizeof a->err, "failed but not detached");
  zeus_pfo_optimizer_close(opt);
  return NULL;
}

static void client_server_restarted_mid_training_reports_unknown_job(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  int port = zeus_pfo_server_port(s);
  char url[64];
  url_of(port, url, sizeof url);
  zeus_thread_group *tg;
  assert_zeus_ok(zeus_thread_group_open(&tg, 2));
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  int phase = 0;
  restart_rank a[2];
  pthread_t th[2];
  double t0 = zeus_monotonic_s();
  for (int r = 0; r < 2; r++) {
    a[r] = (restart_rank){.rank = r, .url = url, .tg = tg, .d = open_sim(), .mu = &mu, .cv = &cv, .phase = &phase};
    assert_int_equal(pthread_create(&th[r], NULL, restart_rank_main, &a[r]), 0);
  }
  pthread_mutex_lock(&mu);
  while (phase != 1) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  usleep(300 * 1000); /* rank 0 is now waiting in its schedule request */
  zeus_pfo_server_close(s);
  s = start_server("AllMaxFrequency", NULL, port, NULL);
  pthread_mutex_lock(&mu);
  phase = 2;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  assert_true(zeus_monotonic_s() - t0 < 15);
  for (int r = 0; r < 2; r++) {
    if (a[r].iters_done != 2) fail_msg("rank %d ran %ld iterations before the restart: %s", r, a[r].iters_done, a[r].err);
    assert_int_equal(a[r].rc, ZEUS_EHTTP);
    if (!strstr(a[r].err, "unknown to the server") || !strstr(a[r].err, "answered 404"))
      fail_msg("rank %d: %s", r, a[r].err);
    assert_unlocked(a[r].d);
    zeus_devices_close(a[r].d);
  }
  zeus_pfo_server_close(s);
  zeus_thread_group_close(tg);
}

typedef struct joiner {
  int rank;
  const char *url, *job_id;
  zeus_devices *d;
  int steps; /* 0: 4 */
  int rc;
  char err[1024];
  zeus_pfo_round_stats st;
  bool detached;
  double failed_after_s; /* from open to the first error */
  atomic_int *gate;       /* when set: step i starts once *gate reaches gate_per_step * (i + 1) (5 s at most) */
  int gate_per_step;
  int hang_fd; /* > 0: after its steps the rank writes a byte here and hangs (never closes) */
} joiner;

static void *joiner_main(void *p) {
  joiner *a = p;
  static const char *const order[] = {"forward", "backward"};
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer *opt = NULL;
  zeus_pfo_optimizer_opts_init(&o);
  o.server_url = a->url;
  o.job_id = a->job_id; /* no collective: the job id is given */
  o.rank = a->rank, o.pp_rank = a->rank;
  o.pp_degree = 2, o.dp_degree = 1, o.tp_degree = 1, o.world_size = 2;
  o.devices = a->d;
  o.pipe_schedule = order, o.n_pipe_schedule = 2;
  o.iters_per_round = 2;
  o.retries = 2, o.retry_backoff_s = 0.05, o.schedule_timeout_s = 30;
  int rc = zeus_pfo_optimizer_open(&opt, &o);
  /* Each instruction: one unit of work on the rank's simulated GPU at the scheduled clock. */
  zeus_sim_node *node = zeus_devices_sim_node(a->d);
  double t0 = zeus_monotonic_s();
  for (int i = 0; i < (a->steps ? a->steps : 4) && !rc; i++) {
    for (double tg = zeus_monotonic_s(); a->gate && atomic_load(a->gate) < a->gate_per_step * (i + 1) &&
                                         zeus_monotonic_s() - tg < 5;)
      usleep(1000);
    rc = zeus_pfo_on_step_begin(opt);
    for (int k = 0; k < 2 && !rc; k++) {
      rc = zeus_pfo_on_instruction_begin(opt, order[k]);
      if (!rc) rc = zeus_pfo_controller_wait(zeus_pfo_optimizer_controller(opt), 10);
      if (!rc) rc = zeus_sim_work(node, 0, 1, NULL);
      if (!rc) rc = zeus_pfo_on_instruction_end(opt, order[k]);
    }
    if (!rc) rc = zeus_pfo_on_step_end(opt);
  }
  a->failed_after_s = zeus_monotonic_s() - t0;
  if (a->hang_fd > 0) {
    char b = rc ? 'E' : 'R';
    if (write(a->hang_fd, &b, 1) != 1) _exit(3);
    for (;;) pause(); /* until killed */
  }
  if (!rc && strcmp(zeus_pfo_job_id(opt), a->job_id) != 0) rc = zeus_set_errmsg(ZEUS_EINTERNAL, "wrong job id");
  if (!rc) zeus_pfo_last_round(opt, &a->st);
  a->rc = rc;
  a->detached = zeus_pfo_detached(opt);
  if (rc) snprintf(a->err, sizeof a->err, "%s", zeus_errmsg());
  zeus_pfo_optimizer_close(opt);
  return NULL;
}

static void client_ranks_join_a_given_job_id_without_a_collective(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  char url[64];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  /* A launcher registers the job; the ranks only know its id. */
  th_conn c = {.fd = -1, .port = zeus_pfo_server_port(s)};
  char *resp = NULL, id[256];
  assert_int_equal(th_request(&c, "POST", "/register_job", "{\"job_id\": \"\", \"pp_degree\": 2, \"dp_degree\": 1, "
                              "\"tp_degree\": 1, \"world_size\": 2, \"job_metadata\": \"launcher\"}", NULL, &resp),
                   200);
  snprintf(id, sizeof id, "%.*s", (int)strlen(resp) - 2, resp + 1);
  free(resp);
  th_close(&c);
  joiner a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    a[r] = (joiner){.rank = r, .url = url, .job_id = id, .d = open_sim()};
    assert_int_equal(pthread_create(&th[r], NULL, joiner_main, &a[r]), 0);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    if (a[r].rc) fail_msg("rank %d: %s", r, a[r].err);
    assert_int_equal(a[r].st.round, 1);
    assert_int_equal(a[r].st.iterations, 2);
    /* forward 1 unit + backward 1 unit at 1740 MHz on the default GPU: 2 x 0.05 s at 290 W */
    assert_near(a[r].st.iter_time_s, 0.1, 1e-9);
    assert_near(a[r].st.iter_energy_j, 29, 2e-3);
    zeus_devices_close(a[r].d);
  }
  char dir[700];
  snprintf(dir, sizeof dir, "%s/dump/%s", g_dir, id);
  zeus_pfo_rank_info *ranks;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_ranks(dir, &ranks, &n));
  assert_int_equal(n, 2);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(ranks[r].n_available_frequencies, 103); /* high to low */
    assert_int_equal(ranks[r].available_frequencies[0], 1740);
    assert_int_equal(ranks[r].available_frequencies[102], 210);
    assert_int_equal(ranks[r].n_pipe_schedule, 2);
    assert_string_equal(ranks[r].pipe_schedule[1], "backward");
  }
  zeus_pfo_ranks_free(ranks, n);
  zeus_pfo_server_close(s);
}

/* A launcher registers a two-rank job and returns its id. */
static void launcher_job(int port, char *id, size_t n) {
  th_conn c = {.fd = -1, .port = port};
  char *resp = NULL;
  assert_int_equal(th_request(&c, "POST", "/register_job", "{\"job_id\": \"\", \"pp_degree\": 2, \"dp_degree\": 1, "
                              "\"tp_degree\": 1, \"world_size\": 2}", NULL, &resp), 200);
  snprintf(id, n, "%.*s", (int)strlen(resp) - 2, resp + 1);
  free(resp);
  th_close(&c);
}

/* A rank that stops (here: closes its optimizer after one round while the other goes on) used
 * to leave the other waiting for its schedule until the schedule timeout. Now the stopping rank
 * tells the server, and the other's next exchange fails at once with the reason; it detaches and
 * keeps its last schedule. */
static void client_rank_that_stops_is_reported_to_the_other_ranks_at_once(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  char url[64], id[256];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  launcher_job(zeus_pfo_server_port(s), id, sizeof id);
  joiner a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    a[r] = (joiner){.rank = r, .url = url, .job_id = id, .d = open_sim(), .steps = r == 1 ? 2 : 6};
    assert_int_equal(pthread_create(&th[r], NULL, joiner_main, &a[r]), 0);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  if (a[1].rc) fail_msg("rank 1: %s", a[1].err);
  assert_int_equal(a[0].rc, ZEUS_EHTTP);
  if (!strstr(a[0].err, "answered 410") || !strstr(a[0].err, "rank 1 left the job: rank 1 closed its optimizer"))
    fail_msg("rank 0: %s", a[0].err);
  assert_true(a[0].detached);
  assert_true(a[0].failed_after_s < 10); /* its schedule timeout is 30 s */
  for (int r = 0; r < 2; r++) zeus_devices_close(a[r].d);
  zeus_pfo_server_close(s);
}

/* A rank killed outright (kill -9) cannot say it leaves. Its presence connection, held open by
 * the client's thread, closes with the process; the server tells the other rank at once (410
 * naming it), long before its schedule timeout. Rank 1 runs in a child process forked before any
 * thread exists, trains one round, then hangs until killed. */
static void client_rank_killed_outright_is_reported_to_the_other_ranks_at_once(void **state) {
  (void)state;
  fresh_dir();
  int to_child[2], from_child[2];
  assert_int_equal(pipe(to_child), 0);
  assert_int_equal(pipe(from_child), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    char msg[512] = "";
    ssize_t n = read(to_child[0], msg, sizeof msg - 1);
    if (n <= 0) _exit(2);
    msg[n] = '\0';
    char *id = strchr(msg, ' ');
    if (!id) _exit(2);
    *id++ = '\0';
    joiner a = {.rank = 1, .url = msg, .job_id = id, .d = open_sim(), .steps = 2, .hang_fd = from_child[1]};
    joiner_main(&a);
    _exit(1); /* not reached */
  }
  close(to_child[0]);
  close(from_child[1]);
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  char url[64], id[256], msg[400];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  launcher_job(zeus_pfo_server_port(s), id, sizeof id);
  snprintf(msg, sizeof msg, "%s %s", url, id);
  assert_int_equal(write(to_child[1], msg, strlen(msg)), (ssize_t)strlen(msg));
  joiner a = {.rank = 0, .url = url, .job_id = id, .d = open_sim(), .steps = 6};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, joiner_main, &a), 0);
  char b = 0;
  assert_int_equal(read(from_child[0], &b, 1), 1); /* rank 1 trained its round */
  assert_int_equal(b, 'R');
  usleep(300 * 1000); /* rank 0 now waits for its next schedule */
  double t0 = zeus_monotonic_s();
  kill(pid, SIGKILL);
  int wst;
  assert_int_equal(waitpid(pid, &wst, 0), pid);
  pthread_join(th, NULL);
  double took = zeus_monotonic_s() - t0;
  assert_int_equal(a.rc, ZEUS_EHTTP);
  if (!strstr(a.err, "answered 410") || !strstr(a.err, "rank 1 went away without leaving the job"))
    fail_msg("rank 0: %s", a.err);
  assert_true(a.detached);
  if (took > 5) fail_msg("rank 0 heard of rank 1's death after %.2f s (its schedule timeout is 30 s)", took);
  zeus_devices_close(a.d);
  close(to_child[1]);
  close(from_child[0]);
  zeus_pfo_server_close(s);
}

typedef struct forger {
  int port;
  const char *job_id;
  atomic_bool stop;
  atomic_int sent;
  int accepted, unknown; /* answers 200, and 404 (the unknown-job answer) */
} forger;

static void *forger_main(void *p) {
  forger *f = p;
  th_conn c = {.fd = -1, .port = f->port};
  char path[400], body[400];
  while (!atomic_load(&f->stop)) {
    for (int r = 0; r < 2; r++) {
      char *resp = NULL;
      snprintf(path, sizeof path, "/result/%s", f->job_id);
      snprintf(body, sizeof body, "{\"rank\": %d, \"iter_time\": [9], \"iter_energy\": [9], \"time_breakdown\": {}, "
               "\"energy_breakdown\": {}}", r);
      int st = th_request(&c, "POST", path, body, NULL, &resp);
      free(resp);
      f->sent++;
      f->accepted += st == 200;
      f->unknown += st == 404;
      snprintf(path, sizeof path, "/leave/%s", f->job_id);
      snprintf(body, sizeof body, "{\"rank\": %d, \"reason\": \"forged\"}", r);
      st = th_request(&c, "POST", path, body, "X-Zeus-Rank-Token: forged-credential-0123456789\r\n", &resp);
      free(resp);
      f->sent++;
      f->accepted += st == 200;
      f->unknown += st == 404;
    }
    usleep(2000);
  }
  th_close(&c);
  return NULL;
}

/* The red team detached a rank with one forged POST /result (its own post then got 409). With the
 * client's per-rank credentials, an outsider who knows the job id forges results and departures
 * all through training, every one is refused, and the ranks finish their rounds. */
static void client_ranks_finish_while_an_outsider_forges_their_results(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  char url[64], id[256];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  launcher_job(zeus_pfo_server_port(s), id, sizeof id);
  forger f = {.port = zeus_pfo_server_port(s), .job_id = id};
  pthread_t ft;
  joiner a[2];
  pthread_t th[2];
  /* Every step waits for four more forgeries, so they land all through training however fast
   * the machine is (a quiet machine finished the rounds before the forger had sent five). */
  for (int r = 0; r < 2; r++) {
    a[r] = (joiner){.rank = r, .url = url, .job_id = id, .d = open_sim(), .steps = 8, .gate = &f.sent,
                    .gate_per_step = 4};
    assert_int_equal(pthread_create(&th[r], NULL, joiner_main, &a[r]), 0);
  }
  assert_int_equal(pthread_create(&ft, NULL, forger_main, &f), 0);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  int during = atomic_load(&f.sent);
  atomic_store(&f.stop, true);
  pthread_join(ft, NULL);
  for (int r = 0; r < 2; r++) {
    if (a[r].rc) fail_msg("rank %d: %s", r, a[r].err);
    assert_false(a[r].detached);
    assert_int_equal(a[r].st.round, 3);
    zeus_devices_close(a[r].d);
  }
  /* Before a rank registers, a forgery about it gets 409 or 400 (nothing to act on); after, the
   * unknown-job answer. None is ever taken. */
  if (during < 32) fail_msg("only %d forgeries were sent while the ranks trained (32 expected)", during);
  assert_int_equal(f.accepted, 0);
  assert_true(f.unknown > 0);
  zeus_pfo_server_close(s);
}

/* A scripted server: answers the registrations, then GET /schedule with `schedule` (any text);
 * after those three, no more. */
typedef struct scripted {
  zeus_test_http_server http; /* http.port */
  const char *schedule;
  atomic_int served; /* answers other than to the client's presence */
} scripted;

static void scripted_answer(void *ud, int fd, const zeus_test_http_request *rq) {
  scripted *sv = ud;
  /* The client's presence (GET /presence): answered as a server without the route would, and not
   * counted. */
  if (strcmp(rq->method, "GET") == 0 && strncmp(rq->path, "/presence", 9) == 0) {
    zeus_test_http_reply(fd, 404, "application/json", "{\"detail\": \"no such route\"}");
    return;
  }
  if (atomic_fetch_add(&sv->served, 1) >= 3) return; /* register_job, register_rank, schedule */
  bool post = strcmp(rq->method, "POST") == 0;
  const char *body = post && strncmp(rq->path, "/register_job", 13) == 0    ? "\"scripted-job\""
                     : post && strncmp(rq->path, "/register_rank", 14) == 0 ? "null"
                                                                            : sv->schedule;
  zeus_test_http_reply(fd, 200, "application/json", body);
}

static void scripted_start(scripted *sv, const char *schedule) {
  sv->schedule = schedule;
  atomic_init(&sv->served, 0);
  zeus_test_http_start(&sv->http, scripted_answer, sv);
}

static void client_checks_the_schedule_it_receives(void **state) {
  (void)state;
  fresh_dir();
  static const struct { const char *schedule; int code; const char *needle; } cases[] = {
      {"{\"rank\": 0, \"frequencies\": [[\"forward\", 1740], [\"backward\", 1741]]}", ZEUS_EINVAL,
       "asks for 1741 MHz at instruction 2 ('backward'), which GPU 0 does not support (210..1740 MHz)"},
      {"{\"rank\": 3, \"frequencies\": [[\"forward\", 1740]]}", ZEUS_EINVAL, "sent rank 3's schedule to rank 0"},
      {"{\"rank\": 0, \"frequencies\": []}", ZEUS_EINVAL, "has no instructions"},
      {"{\"rank\": 0, \"frequencies\": [[\"forward\"", ZEUS_EPARSE, "the server's FrequencySchedule:1:"},
  };
  zeus_devices *d = open_sim();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    scripted sv;
    scripted_start(&sv, cases[i].schedule);
    char url[64];
    url_of(sv.http.port, url, sizeof url);
    zeus_pfo_optimizer_opts o;
    solo_opts(&o, url, 1, d);
    zeus_pfo_optimizer *opt = NULL;
    assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), cases[i].code, cases[i].needle);
    assert_null(opt);
    zeus_test_http_stop(&sv.http);
    assert_unlocked(d);
  }
  zeus_devices_close(d);
}

static void client_nvml_permission_error_at_controller_start_fails_every_rank(void **state) {
  (void)state;
  fresh_dir();
  /* Rank 1's GPU refuses locked clocks; rank 0 must learn it and fail too, not hang. */
  setenv("FAKE_NVML_INJECT", "nvmlDeviceSetGpuLockedClocks:NO_PERMISSION:1", 1);
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  harness h;
  harness_setup(&h, 1, 2, 1, 2, 2, 1, zeus_pfo_server_port(s));
  pthread_t th[2];
  for (int r = 0; r < 2; r++) assert_int_equal(pthread_create(&th[r], NULL, fake_rank_main, &h.r[r]), 0);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  assert_int_equal(h.r[1].rc, ZEUS_EPERM);
  if (!strstr(h.r[1].err, "NO_PERMISSION") || !strstr(h.r[1].err, "locking the SM clock at 1740 MHz") ||
      !strstr(h.r[1].err, "CAP_SYS_ADMIN"))
    fail_msg("rank 1: %s", h.r[1].err);
  assert_int_equal(h.r[0].rc, ZEUS_ESTATE);
  if (!strstr(h.r[0].err, "1 other rank(s) of the job failed")) fail_msg("rank 0: %s", h.r[0].err);
  /* Rank 1 put back the memory clock it had locked; rank 0 reset everything at close. */
  gpu_log lg;
  read_log(1, &lg);
  assert_true(lg.mem_locked && lg.mem_reset);
  assert_int_equal(lg.nsets, 0);
  read_log(0, &lg);
  assert_true(lg.nsets == 1 && lg.reset_after_last_set && lg.mem_reset);
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(client_server_down_at_start_fails_after_retries),
      cmocka_unit_test(client_http_error_carries_the_servers_message),
      cmocka_unit_test(client_server_restarted_mid_training_reports_unknown_job),
      cmocka_unit_test(client_ranks_join_a_given_job_id_without_a_collective),
      cmocka_unit_test(client_rank_that_stops_is_reported_to_the_other_ranks_at_once),
      cmocka_unit_test(client_rank_killed_outright_is_reported_to_the_other_ranks_at_once),
      cmocka_unit_test(client_ranks_finish_while_an_outsider_forges_their_results),
      cmocka_unit_test(client_checks_the_schedule_it_receives),
      cmocka_unit_test(client_nvml_permission_error_at_controller_start_fails_every_rank),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
