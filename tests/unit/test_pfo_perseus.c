/* The Perseus scheduler: profiling, the solve on the solver threads, the plan it deploys, straggler
 * following with hysteresis, declarations, its routes and every bad input, driven round by round
 * with ranks computed by tests/pfo_pipeline_eval.h; and the server answering requests while the
 * GPT-3 96-microbatch solve runs (measured data). */
#include "test_util.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <time.h>

#include <zeus.h>

#include "pfo_http.h"
#include "pfo_pipeline_eval.h"
#include "pfo_server/sched.h"
#include "pfo_server/solver_pool.h"

/* ---- a job driven round by round ---- */

typedef struct drv {
  zeus__solver_pool *pool;
  zeus__sched *s;
  pe_profile *p;
  int D, S, T, M;
  double bp;
  double factor[8];
  bool no_backward;
  double job_time, pipe_e[8];
  char dir[256];
  int root;               /* dir's parent, held open as the server holds its dump folder */
  zeus__pfo_dump_loc loc; /* dir as the scheduler's dump folder */
} drv;

/* The 1F1B order of a stage (static names). */
static const char **order_1f1b(int S, int s, int M) {
  const char **v = calloc((size_t)(2 * M), sizeof *v);
  for (int k = 0; k < 2 * M; k++) {
    zeus_pipeline_instr kind;
    assert_zeus_ok(zeus_pipeline_1f1b_instr(S, s, M, k, &kind, NULL));
    v[k] = zeus_pipeline_instr_name(kind);
  }
  return v;
}

/* Creates the scheduler (Perseus unless `name`) for a D x S x T job over profile p. Returns the
 * create status (the scheduler is then in x->s). */
static int drv_try(drv *x, const char *name, int D, int S, int T, int M, pe_profile *p, const char *args_json) {
  memset(x, 0, sizeof *x);
  x->D = D, x->S = S, x->T = T, x->M = M, x->p = p, x->bp = 50;
  for (int d = 0; d < 8; d++) x->factor[d] = 1;
  zeus_test_tmpdir(x->dir, sizeof x->dir);
  char parent[256];
  snprintf(parent, sizeof parent, "%s", x->dir);
  char *slash = strrchr(parent, '/');
  assert_non_null(slash);
  *slash = '\0';
  x->root = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  assert_true(x->root >= 0);
  x->loc = (zeus__pfo_dump_loc){x->root, x->dir + (slash - parent) + 1, x->dir};
  if (zeus__solver_pool_open(&x->pool, 1, 4)) fail_msg("pool: %s", zeus_errmsg());
  zeus_pfo_job_info job = {
      .job_id = "test-job", .pp_degree = S, .dp_degree = D, .tp_degree = T, .world_size = D * S * T};
  int W = D * S * T;
  zeus_pfo_rank_info *ranks = calloc((size_t)W, sizeof *ranks);
  const char ***orders = calloc((size_t)S, sizeof *orders);
  for (int s = 0; s < S; s++) orders[s] = order_1f1b(S, s, M);
  for (int r = 0; r < W; r++) {
    int s = (r / T) % S;
    ranks[r] = (zeus_pfo_rank_info){.rank = r, .dp_rank = r / (S * T), .pp_rank = s, .tp_rank = r % T,
                                    .available_frequencies = p->mhz, .n_available_frequencies = (size_t)p->nclk,
                                    .pipe_schedule = (char **)orders[s], .n_pipe_schedule = (size_t)(2 * M)};
  }
  json_t *args = NULL;
  if (args_json) assert_zeus_ok(zeus__json_parse(args_json, strlen(args_json), "args", &args));
  int rc = zeus__sched_create(&x->s, name ? name : "Perseus", args, &job, ranks, (size_t)W, &x->loc, true, x->pool);
  json_decref(args);
  for (int s = 0; s < S; s++) free(orders[s]);
  free(orders);
  free(ranks);
  return rc;
}

static void drv_open(drv *x, int D, int S, int T, int M, pe_profile *p, const char *args_json) {
  if (drv_try(x, NULL, D, S, T, M, p, args_json)) fail_msg("Perseus: %s", zeus_errmsg());
}

static void drv_close(drv *x) {
  zeus__sched_destroy(x->s);
  zeus__solver_pool_close(x->pool);
  close(x->root);
}

/* One round: the current schedules run, the results are observed. Returns observe's status. */
static int drv_round(drv *x) {
  const zeus_pfo_schedule *cur;
  size_t n;
  zeus__sched_current(x->s, &cur, &n);
  zeus_pfo_prof_result *res = calloc(n, sizeof *res);
  if (pe_round(x->p, x->D, x->S, x->T, cur, x->factor, x->bp, 2, x->no_backward, res, &x->job_time, x->pipe_e))
    fail_msg("a schedule asks for a clock the profile lacks");
  int rc = zeus__sched_observe(x->s, res, n);
  for (size_t i = 0; i < n; i++) zeus_pfo_prof_result_clear(&res[i]);
  free(res);
  return rc;
}

/* GET or POST one of the scheduler's routes; returns the status, the body in *body (free()). */
static int drv_route(drv *x, const char *method, const char *path, const char *body, char **out) {
  zeus__sched_route_reply r = {0};
  int st = zeus__sched_route(x->s, method, path, body, body ? strlen(body) : 0, &r);
  assert_int_equal(st, r.status);
  assert_non_null(r.body);
  if (out) *out = r.body;
  else free(r.body);
  return st;
}

static json_t *drv_status(drv *x) {
  char *body;
  assert_int_equal(drv_route(x, "GET", "", NULL, &body), 200);
  json_t *v = json_loads(body, 0, NULL);
  assert_non_null(v);
  free(body);
  return v;
}

static const char *jstr(json_t *o, const char *path1, const char *path2) {
  json_t *v = json_object_get(o, path1);
  if (path2) v = json_object_get(v, path2);
  return json_string_value(v);
}

static double jnumber(json_t *o, const char *k1, const char *k2) {
  json_t *v = json_object_get(o, k1);
  if (k2) v = json_object_get(v, k2);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static bool phase_is(drv *x, const char *want) {
  json_t *st = drv_status(x);
  bool ok = strcmp(jstr(st, "phase", NULL), want) == 0;
  json_decref(st);
  return ok;
}

/* Runs rounds until the phase leaves profiling and solving (at most 30 s). Returns the rounds run. */
static int drv_until_settled(drv *x) {
  int rounds = 0;
  double t0 = zeus_monotonic_s();
  while (phase_is(x, "profiling") || phase_is(x, "solving")) {
    assert_zeus_ok(drv_round(x));
    rounds++;
    if (phase_is(x, "solving")) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
    if (zeus_monotonic_s() - t0 > 30) fail_msg("Perseus did not settle in 30 s (%d rounds)", rounds);
  }
  return rounds;
}

/* The frequency of the k-th compute instruction of `rank` now. */
static int freq_of(drv *x, int rank, int k) {
  const zeus_pfo_schedule *cur;
  size_t n;
  zeus__sched_current(x->s, &cur, &n);
  return cur[rank].frequencies[k].frequency_mhz;
}

/* A frontier profile of every row of p, as the server keeps what it measures: times at the ns,
 * energies at the uJ (zeus/format.h). */
static zeus_frontier_profile *frontier_profile(const pe_profile *p) {
  zeus_frontier_profile *fp;
  assert_zeus_ok(zeus_frontier_profile_new(&fp, "test"));
  for (int s = 0; s < p->S; s++)
    for (int k = 0; k < 2; k++)
      for (int c = 0; c < p->nclk; c++)
        assert_zeus_ok(zeus_frontier_profile_add(fp, s, k ? ZEUS_FRONTIER_BACKWARD : ZEUS_FRONTIER_FORWARD, p->mhz[c],
                                                 zeus_round_decimals(p->t[(s * 2 + k) * p->nclk + c], 9),
                                                 zeus_round_decimals(p->e[(s * 2 + k) * p->nclk + c], 6)));
  return fp;
}

/* ---- the solver pool ---- */

static void solver_pool_solves_off_the_caller_and_bounds_its_queue(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  zeus__solver_pool *pool;
  assert_zeus_err(zeus__solver_pool_open(&pool, 0, 1), ZEUS_EINVAL, "solver threads 0");
  assert_zeus_ok(zeus__solver_pool_open(&pool, 1, 1));
  zeus_frontier_opts o = {.stages = 4, .microbatches = 8, .blocking_power_w = 50};
  zeus__solve *t;
  assert_zeus_ok(zeus__solver_pool_submit(pool, frontier_profile(p), &o, 0, "small", &t));
  zeus__solve_result r;
  double t0 = zeus_monotonic_s();
  while (!zeus__solve_take(t, &r)) {
    assert_true(zeus_monotonic_s() - t0 < 30);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(zeus__solve_poll(t, NULL, NULL), ZEUS__SOLVE_DONE);
  zeus__solve_result again;
  assert_false(zeus__solve_take(t, &again)); /* taken once: the second take has nothing */
  assert_int_equal(r.rc, 0);
  assert_non_null(r.frontier);
  assert_true(zeus_frontier_num_points(r.frontier) > 1);
  assert_non_null(r.csv);
  assert_true(strncmp(r.csv, "iteration,time_s", 16) == 0);
  assert_non_null(r.svg); /* drawn in a private temporary folder, which is gone */
  assert_non_null(strstr(r.svg, "<svg"));
  zeus__solve_result_clear(&r);
  zeus__solve_release(t);
  /* A slow solve (a fine time unit, many microbatches) holds the thread: of three more queued at
   * once with room for one waiting, at least one is refused; releasing queued ones drops them. */
  zeus_frontier_opts slow = {.stages = 4, .microbatches = 64, .blocking_power_w = 50, .unit_time_s = 0.0001};
  zeus__solve *v[3] = {NULL, NULL, NULL};
  int refused = 0;
  for (int i = 0; i < 3; i++) {
    int rc = zeus__solver_pool_submit(pool, frontier_profile(p), &slow, 0, "slow", &v[i]);
    if (rc) {
      assert_int_equal(rc, ZEUS_ERANGE);
      assert_non_null(strstr(zeus_errmsg(), "already waiting"));
      refused++;
      v[i] = NULL;
    }
  }
  assert_true(refused >= 1);
  for (int i = 0; i < 3; i++) zeus__solve_release(v[i]); /* never waits */
  /* A solve released while it runs is freed by its worker (ASan would see a leak or a double free). */
  zeus__solve *run;
  assert_zeus_ok(zeus__solver_pool_submit(pool, frontier_profile(p), &slow, 0, "slow", &run));
  t0 = zeus_monotonic_s();
  while (zeus__solve_poll(run, NULL, NULL) != ZEUS__SOLVE_RUNNING) {
    assert_true(zeus_monotonic_s() - t0 < 30);
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  double t_rel = zeus_monotonic_s();
  zeus__solve_release(run);
  assert_true(zeus_monotonic_s() - t_rel < 0.05); /* the caller does not wait for the solve */
  zeus__solver_pool_close(pool);                  /* joins the worker, whose solve stops at its next point */
  assert_true(zeus_monotonic_s() - t_rel < 0.5);
  /* A solve past its time limit is a failure (a frontier cut short lacks the fast plans). */
  assert_zeus_ok(zeus__solver_pool_open(&pool, 1, 1));
  assert_zeus_ok(zeus__solver_pool_submit(pool, frontier_profile(p), &slow, 0.02, "limited", &run));
  t0 = zeus_monotonic_s();
  while (!zeus__solve_take(run, &r)) {
    assert_true(zeus_monotonic_s() - t0 < 30);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  assert_int_equal(r.rc, ZEUS_ETIMEDOUT);
  assert_non_null(strstr(r.errmsg, "passed its limit of 0.02 s (max_solve_s)"));
  assert_null(r.frontier);
  zeus__solve_result_clear(&r);
  zeus__solve_release(run);
  zeus__solver_pool_close(pool);
  pe_free(p);
}

/* ---- profiling, solving, deploying ---- */

static void perseus_profiles_each_stage_then_deploys_the_least_energy_plan_at_the_fastest_time(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  drv_open(&x, 1, 4, 1, 8, p, "{\"warmup_iters\": 1, \"patience\": 100, \"blocking_power_w\": 50}");
  /* Round 0: warm-up at the highest clock; then every stage steps down one clock per round. */
  assert_int_equal(freq_of(&x, 2, 0), 1740);
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(freq_of(&x, 2, 0), 1740);
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(freq_of(&x, 2, 0), 1680);
  assert_int_equal(freq_of(&x, 0, 5), 1680);
  json_t *st = drv_status(&x);
  assert_string_equal(jstr(st, "phase", NULL), "profiling");
  assert_int_equal((int)jnumber(st, "profiling", "steps_done"), 4);
  assert_int_equal((int)jnumber(st, "profiling", "steps_max"), 40);
  json_decref(st);
  int rounds = drv_until_settled(&x);
  assert_true(rounds >= 9);
  st = drv_status(&x);
  assert_string_equal(jstr(st, "phase", NULL), "deployed");
  assert_string_equal(jstr(st, "blocking_power_source", NULL), "argument");
  /* The stage profile it dumped holds what the stages measured. */
  char path[400], *csv;
  size_t len;
  snprintf(path, sizeof path, "%s/stage_profile.csv", x.dir);
  assert_zeus_ok(zeus__read_file(path, &csv, &len));
  int lines = 0;
  for (char *q = csv; *q; q++) lines += *q == '\n';
  assert_int_equal(lines, 1 + 4 * 2 * 10);
  char want[128], t[32], e[32];
  /* (the means kept at the ns and the uJ: zeus/format.h) */
  zeus_format_double(zeus_round_decimals(p->t[(3 * 2 + 1) * 10 + 4], 9), t, sizeof t);
  zeus_format_double(zeus_round_decimals(p->e[(3 * 2 + 1) * 10 + 4], 6), e, sizeof e);
  snprintf(want, sizeof want, "\n3,backward,1500,%s,%s\n", t, e);
  assert_non_null(strstr(csv, want));
  free(csv);
  /* The plan equals the independent solve's least-energy point within one unit of the fastest. */
  zeus_frontier_profile *fp = frontier_profile(p);
  zeus_frontier *f;
  zeus_frontier_opts o = {.stages = 4, .microbatches = 8, .blocking_power_w = 50, .allow_fewer_microbatches = true};
  assert_zeus_ok(zeus_frontier_solve(&f, fp, &o));
  size_t np = zeus_frontier_num_points(f), best = 0;
  double tmin = INFINITY;
  zeus_frontier_point pt;
  for (size_t i = 0; i < np; i++) {
    zeus_frontier_get_point(f, i, &pt);
    if (pt.eval_time_s < tmin) tmin = pt.eval_time_s;
  }
  double best_e = INFINITY;
  for (size_t i = 0; i < np; i++) {
    zeus_frontier_get_point(f, i, &pt);
    if (pt.eval_time_s <= tmin + 0.001 && pt.eval_energy_j < best_e) best_e = pt.eval_energy_j, best = i;
  }
  assert_int_equal((long)jnumber(st, "base_plan", "point"), (long)best);
  for (int s = 0; s < 4; s++) {
    int freqs[16];
    size_t n;
    assert_zeus_ok(zeus_frontier_get_plan(f, best, s, NULL, freqs, 16, &n));
    for (size_t k = 0; k < n; k++) assert_int_equal(freq_of(&x, s, (int)k), freqs[k]);
  }
  /* Measured: less energy than every GPU at its highest clock, no slower. */
  assert_zeus_ok(drv_round(&x));
  double allmax_e = jnumber(st, "all_max", "eval_energy_j"), allmax_t = jnumber(st, "all_max", "eval_time_s");
  assert_near(x.job_time, jnumber(st, "base_plan", "eval_time_s"), 1e-9);
  assert_true(x.job_time <= allmax_t * 1.0001);
  assert_near(x.pipe_e[0], best_e, 1e-6);
  assert_true(best_e < allmax_e * 0.99);
  assert_non_null(strstr(jstr(st, "base_plan", "reason"), "least energy at the fastest iteration time"));
  /* The plan file of the deployed point, as zeus frontier names it. */
  snprintf(path, sizeof path, "%s/freqs_pipeline_%05zu.py", x.dir, best);
  char *plan;
  assert_zeus_ok(zeus__read_file(path, &plan, &len));
  char *text;
  assert_zeus_ok(zeus_frontier_plan_text(f, best, &text));
  assert_string_equal(plan, text);
  zeus_free(text);
  free(plan);
  json_decref(st);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(fp);
  drv_close(&x);
  pe_free(p);
}

static void perseus_measures_the_blocking_power_when_not_given(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  drv_open(&x, 1, 4, 2, 8, p, "{\"warmup_iters\": 0, \"min_frequency\": 1500}");
  x.bp = 61.25;
  drv_until_settled(&x);
  json_t *st = drv_status(&x);
  assert_string_equal(jstr(st, "phase", NULL), "deployed");
  assert_string_equal(jstr(st, "blocking_power_source", NULL), "measured");
  assert_near(jnumber(st, "blocking_power_w", NULL), 61.25, 1e-9);
  assert_true(jnumber(st, "blocking_power_samples", NULL) > 0);
  json_decref(st);
  drv_close(&x);
  pe_free(p);
}

static void perseus_target_time_and_max_slowdown_deploy_the_least_energy_plan_within(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  for (int mode = 0; mode < 2; mode++) {
    drv x;
    drv_open(&x, 1, 4, 1, 8, p, mode == 0 ? "{\"warmup_iters\": 0, \"blocking_power_w\": 50, \"target_time_s\": 0.55}"
                                          : "{\"warmup_iters\": 0, \"blocking_power_w\": 50, \"max_slowdown\": 1.1}");
    drv_until_settled(&x);
    json_t *st = drv_status(&x);
    assert_string_equal(jstr(st, "phase", NULL), "deployed");
    double limit = mode == 0 ? 0.55 : 1.1 * jnumber(st, "all_max", "eval_time_s");
    double t = jnumber(st, "base_plan", "eval_time_s"), e = jnumber(st, "base_plan", "eval_energy_j");
    assert_true(t <= limit + 1e-9);
    assert_true(t > 1.01 * jnumber(st, "all_max", "eval_time_s")); /* it used the time it was given */
    /* No point of the frontier within the limit costs less. */
    char *csv;
    assert_int_equal(drv_route(&x, "GET", "/frontier.csv", NULL, &csv), 200);
    int checked = 0;
    for (char *line = strchr(csv, '\n') + 1; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
      long it;
      double ts, c1, c2, et, ee;
      if (sscanf(line, "%ld,%lf,%lf,%lf,%lf,%lf", &it, &ts, &c1, &c2, &et, &ee) != 6) break;
      checked++;
      if (et <= limit - 1e-6) assert_true(ee >= e - 1e-3);
    }
    assert_true(checked > 5);
    free(csv);
    assert_non_null(strstr(jstr(st, "base_plan", "reason"), mode == 0 ? "target_time_s" : "max_slowdown"));
    json_decref(st);
    drv_close(&x);
  }
  pe_free(p);
}

/* ---- stragglers ---- */

static int deployments(drv *x) {
  json_t *st = drv_status(x);
  int n = (int)jnumber(st, "deployments", NULL);
  json_decref(st);
  return n;
}

static void perseus_follows_a_straggler_with_hysteresis_and_returns_when_it_recovers(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  drv_open(&x, 2, 4, 1, 8, p, "{\"warmup_iters\": 0, \"blocking_power_w\": 50}");
  drv_until_settled(&x);
  assert_int_equal(deployments(&x), 1);
  json_t *st = drv_status(&x);
  long base = (long)jnumber(st, "base_plan", "point");
  double tb = jnumber(st, "base_plan", "eval_time_s");
  json_decref(st);
  int base_f0 = freq_of(&x, 1, 0); /* pipeline 0, stage 1 */
  /* 3 % slower: within straggler_tolerance (5 %), nothing moves. */
  x.factor[1] = 1.03;
  assert_zeus_ok(drv_round(&x));
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 1);
  /* 1.2 x: pipeline 0 moves to the point of least energy at the straggler's time. */
  x.factor[1] = 1.2;
  assert_zeus_ok(drv_round(&x)); /* measured at 1.2 x: the next round's schedules change */
  assert_int_equal(deployments(&x), 2);
  st = drv_status(&x);
  assert_true(json_is_true(json_object_get(st, "following")));
  assert_near(jnumber(st, "following_time_s", NULL), 1.2 * tb, 1e-9);
  json_t *pl = json_object_get(st, "pipelines");
  assert_true(json_is_true(json_object_get(json_array_get(pl, 1), "straggler")));
  assert_int_equal((long)json_integer_value(json_object_get(json_array_get(pl, 1), "point")), base);
  long follow = (long)json_integer_value(json_object_get(json_array_get(pl, 0), "point"));
  assert_true(follow != base);
  json_decref(st);
  /* What pipeline 0 would cost on the base plan, waiting for the straggler: */
  double on_base;
  {
    const zeus_pfo_schedule *cur;
    size_t n;
    zeus__sched_current(x.s, &cur, &n);
    zeus_pfo_schedule *copy;
    size_t nc;
    assert_zeus_ok(zeus__pfo_schedules_copy(cur, n, &copy, &nc));
    for (int r = 0; r < 4; r++) { /* pipeline 0 back on pipeline 1's (base) schedule */
      zeus_pfo_schedule_clear(&copy[r]);
      assert_zeus_ok(zeus__pfo_schedule_copy(&cur[4 + r], &copy[r]));
    }
    zeus_pfo_prof_result res[8];
    double tj, pe[2];
    assert_int_equal(pe_round(p, 2, 4, 1, copy, x.factor, 50, 1, false, res, &tj, pe), 0);
    for (int r = 0; r < 8; r++) zeus_pfo_prof_result_clear(&res[r]);
    zeus_pfo_schedules_free(copy, nc);
    on_base = pe[0];
  }
  assert_zeus_ok(drv_round(&x));
  assert_true(x.job_time <= 1.2 * tb * 1.0000001); /* the straggler's time, not more */
  assert_true(x.pipe_e[0] < on_base);
  /* Back to 1.03 x: above recovery_tolerance (2 %), the pipelines stay as they are. */
  x.factor[1] = 1.03;
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 3); /* retargeted to 1.03 x (more than 2 % from 1.2 x) */
  st = drv_status(&x);
  assert_true(json_is_true(json_object_get(st, "following"))); /* still a straggler */
  assert_near(jnumber(st, "following_time_s", NULL), 1.03 * tb, 1e-9);
  json_decref(st);
  x.factor[1] = 1.2;
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 4);
  /* 1.21 x is within retarget_tolerance of 1.2 x: no change; 1.35 x is not. */
  x.factor[1] = 1.21;
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 4);
  x.factor[1] = 1.35;
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 5);
  /* Recovered: every pipeline returns to the base plan. */
  x.factor[1] = 1.0;
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 6);
  assert_int_equal(freq_of(&x, 1, 0), base_f0);
  st = drv_status(&x);
  assert_false(json_is_true(json_object_get(st, "following")));
  json_decref(st);
  /* Every change is in the events and the deployments, with its reason, and in perseus.json. */
  char *body;
  assert_int_equal(drv_route(&x, "GET", "/events", NULL, &body), 200);
  assert_non_null(strstr(body, "\"event\": \"straggler\""));
  assert_non_null(strstr(body, "\"event\": \"recovered\""));
  assert_non_null(strstr(body, "\"event\": \"retarget\""));
  free(body);
  assert_int_equal(drv_route(&x, "GET", "/plans", NULL, &body), 200);
  assert_non_null(strstr(body, "pipeline 1 runs at"));
  assert_non_null(strstr(body, "every pipeline returns to the base plan"));
  free(body);
  char path[400];
  size_t len;
  snprintf(path, sizeof path, "%s/perseus.json", x.dir);
  assert_zeus_ok(zeus__read_file(path, &body, &len));
  assert_non_null(strstr(body, "\"deployment\": 6"));
  free(body);
  drv_close(&x);
  pe_free(p);
}

static void perseus_straggler_declarations_apply_at_the_next_round_and_bad_ones_are_refused(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  drv_open(&x, 2, 4, 1, 8, p, "{\"warmup_iters\": 0, \"blocking_power_w\": 50}");
  char *body;
  /* Declared before any plan: kept for later. */
  assert_int_equal(drv_route(&x, "POST", "/straggler", "{\"dp\": 1, \"iter_time_s\": null}", &body), 200);
  assert_non_null(strstr(body, "once a plan is deployed"));
  free(body);
  drv_until_settled(&x);
  json_t *st = drv_status(&x);
  double tb = jnumber(st, "base_plan", "eval_time_s");
  json_decref(st);
  assert_int_equal(drv_route(&x, "POST", "/straggler", "{\"dp\": 2, \"iter_time_s\": 1}", &body), 400);
  assert_non_null(strstr(body, "pipeline 2 does not exist: the job has 2 data-parallel pipelines (dp 0..1)"));
  free(body);
  assert_int_equal(drv_route(&x, "POST", "/straggler", "{\"dp\": 1, \"iter_time_s\": -1}", &body), 400);
  assert_non_null(strstr(body, "iter_time_s"));
  free(body);
  assert_int_equal(drv_route(&x, "POST", "/straggler", "{\"dp\": 1, \"when\": 3}", &body), 400);
  assert_non_null(strstr(body, "unknown field 'when'"));
  free(body);
  assert_int_equal(drv_route(&x, "POST", "/straggler", "{\"dp\": ", &body), 400);
  assert_non_null(strstr(body, "straggler declaration:1:"));
  free(body);
  assert_int_equal(drv_route(&x, "GET", "/nope", NULL, &body), 404);
  free(body);
  assert_int_equal(deployments(&x), 1);
  /* Pipeline 1 will run at 1.15 x: from the next round pipeline 0 follows (measured 1.0 x). */
  char decl[100];
  snprintf(decl, sizeof decl, "{\"dp\": 1, \"iter_time_s\": %.17g}", 1.15 * tb);
  assert_int_equal(drv_route(&x, "POST", "/straggler", decl, &body), 200);
  assert_non_null(strstr(body, "from the next round"));
  free(body);
  assert_int_equal(deployments(&x), 1);
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 2);
  st = drv_status(&x);
  assert_near(jnumber(st, "following_time_s", NULL), 1.15 * tb, 1e-9);
  json_decref(st);
  assert_int_equal(drv_route(&x, "GET", "/straggler", NULL, &body), 200);
  assert_non_null(strstr(body, "\"straggler\": true"));
  free(body);
  /* Withdrawn: its measured time (1.0 x) counts again, and everything returns. */
  assert_int_equal(drv_route(&x, "POST", "/straggler", "{\"dp\": 1, \"iter_time_s\": null}", &body), 200);
  free(body);
  assert_zeus_ok(drv_round(&x));
  assert_zeus_ok(drv_round(&x));
  assert_int_equal(deployments(&x), 3);
  st = drv_status(&x);
  assert_false(json_is_true(json_object_get(st, "following")));
  json_decref(st);
  drv_close(&x);
  pe_free(p);
}

/* ---- routes ---- */

static void perseus_routes_serve_the_profile_frontier_plans_and_events(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  drv_open(&x, 1, 4, 1, 8, p, "{\"warmup_iters\": 0, \"blocking_power_w\": 50, \"min_frequency\": 1500}");
  char *body;
  assert_int_equal(drv_route(&x, "GET", "/frontier.csv", NULL, &body), 409);
  assert_non_null(strstr(body, "not solved yet (phase profiling"));
  free(body);
  assert_int_equal(drv_route(&x, "GET", "/plans/0", NULL, &body), 409);
  free(body);
  assert_int_equal(drv_route(&x, "POST", "", "{}", &body), 405);
  assert_non_null(strstr(body, "allowed: GET"));
  free(body);
  drv_until_settled(&x);
  zeus__sched_route_reply r = {0};
  assert_int_equal(zeus__sched_route(x.s, "GET", "/profile.csv", NULL, 0, &r), 200);
  assert_string_equal(r.content_type, "text/csv");
  assert_true(strncmp(r.body, "stage,instruction,frequency,time,energy\n0,forward,1740,", 55) == 0);
  free(r.body);
  assert_int_equal(zeus__sched_route(x.s, "GET", "/frontier.svg", NULL, 0, &r), 200);
  assert_string_equal(r.content_type, "image/svg+xml");
  assert_non_null(strstr(r.body, "<svg"));
  free(r.body);
  json_t *st = drv_status(&x);
  long base = (long)jnumber(st, "base_plan", "point");
  json_decref(st);
  char path[64];
  snprintf(path, sizeof path, "/plans/freqs_pipeline_%05ld.py", base);
  assert_int_equal(zeus__sched_route(x.s, "GET", path, NULL, 0, &r), 200);
  assert_string_equal(r.content_type, "text/x-python");
  assert_true(strncmp(r.body, "[\n    [(\"forward\", ", 19) == 0);
  free(r.body);
  snprintf(path, sizeof path, "/plans/%ld", base);
  assert_int_equal(drv_route(&x, "GET", path, NULL, &body), 200);
  free(body);
  assert_int_equal(drv_route(&x, "GET", "/plans/99999", NULL, &body), 404);
  assert_non_null(strstr(body, "the frontier has points 0.."));
  free(body);
  assert_int_equal(drv_route(&x, "GET", "/events", NULL, &body), 200);
  assert_non_null(strstr(body, "\"event\": \"solved\""));
  assert_non_null(strstr(body, "\"event\": \"deploy\""));
  free(body);
  /* The files in the job's folder. */
  static const char *const files[] = {"stage_profile.csv", "frontier.csv", "frontier.svg", "perseus.json"};
  for (size_t i = 0; i < 4; i++) {
    char f[400];
    struct stat sb;
    snprintf(f, sizeof f, "%s/%s", x.dir, files[i]);
    if (stat(f, &sb) != 0 || sb.st_size == 0) fail_msg("%s is missing", f);
  }
  drv_close(&x);
  pe_free(p);
}

/* ---- bad input ---- */

/* A profiling round whose results lack the backward: the profile misses that clock for backward
 * in every stage. Not a failure: an event names the gaps, and the plan uses only measured clocks. */
static void perseus_profile_missing_a_clock_is_named_and_the_plan_uses_only_measured_clocks(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  drv_open(&x, 1, 4, 1, 8, p, "{\"warmup_iters\": 0, \"blocking_power_w\": 50, \"min_frequency\": 1500}");
  assert_zeus_ok(drv_round(&x)); /* warm-up at 1740 MHz */
  assert_zeus_ok(drv_round(&x)); /* 1740 MHz */
  for (int r = 0; r < 4; r++) assert_int_equal(freq_of(&x, r, 0), 1680);
  x.no_backward = true;
  assert_zeus_ok(drv_round(&x)); /* 1680 MHz: forward only */
  x.no_backward = false;
  drv_until_settled(&x);
  json_t *st = drv_status(&x);
  assert_string_equal(jstr(st, "phase", NULL), "deployed");
  json_decref(st);
  char *body;
  assert_int_equal(drv_route(&x, "GET", "/profile.csv", NULL, &body), 200);
  assert_non_null(strstr(body, "0,forward,1680,"));
  assert_null(strstr(body, "0,backward,1680,"));
  free(body);
  assert_int_equal(drv_route(&x, "GET", "/events", NULL, &body), 200);
  json_t *ev = json_loads(body, 0, NULL);
  free(body);
  json_t *gap = NULL, *e;
  size_t i;
  json_array_foreach(json_object_get(ev, "events"), i, e) if (!strcmp(jstr(e, "event", NULL), "profile_incomplete"))
      gap = e;
  assert_non_null(gap);
  assert_int_equal(json_integer_value(json_object_get(gap, "missing")), 4);
  json_t *g0 = json_array_get(json_object_get(gap, "gaps"), 0);
  assert_int_equal(json_integer_value(json_object_get(g0, "stage")), 0);
  assert_string_equal(jstr(g0, "instruction", NULL), "backward");
  assert_int_equal(json_integer_value(json_object_get(g0, "frequency_mhz")), 1680);
  assert_non_null(strstr(jstr(gap, "message", NULL), "lacks 4 measurements (stage 0 backward at 1680 MHz, stage 1 "));
  json_decref(ev);
  /* No backward of the deployed plan runs at the clock it was never measured at. */
  const zeus_pfo_schedule *cur;
  size_t n;
  zeus__sched_current(x.s, &cur, &n);
  for (size_t r = 0; r < n; r++)
    for (size_t k = 0; k < cur[r].n_frequencies; k++)
      if (!strcmp(cur[r].frequencies[k].instruction, "backward"))
        assert_int_not_equal(cur[r].frequencies[k].frequency_mhz, 1680);
  drv_close(&x);
  pe_free(p);
}

static void perseus_profile_without_backward_fails_cleanly_and_keeps_the_highest_clocks(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  drv_open(&x, 1, 4, 1, 8, p, "{\"warmup_iters\": 0, \"blocking_power_w\": 50, \"min_frequency\": 1500}");
  x.no_backward = true;
  drv_until_settled(&x);
  json_t *st = drv_status(&x);
  assert_string_equal(jstr(st, "phase", NULL), "failed");
  assert_non_null(strstr(jstr(st, "error", NULL), "pipeline stage 0 has no backward measurement"));
  json_decref(st);
  for (int r = 0; r < 4; r++) assert_int_equal(freq_of(&x, r, 3), 1740);
  assert_zeus_ok(drv_round(&x));
  assert_true(zeus__sched_finished(x.s));
  for (int r = 0; r < 4; r++) assert_int_equal(freq_of(&x, r, 0), 1740);
  char *body;
  assert_int_equal(drv_route(&x, "GET", "/frontier.csv", NULL, &body), 409);
  assert_non_null(strstr(body, "Perseus has no frontier"));
  free(body);
  assert_int_equal(drv_route(&x, "POST", "/straggler", "{\"dp\": 0, \"iter_time_s\": 1}", &body), 409);
  free(body);
  drv_close(&x);
  pe_free(p);
}

static void perseus_solver_failure_is_reported_and_the_job_keeps_the_highest_clocks(void **state) {
  (void)state;
  pe_profile *p = pe_synth(4);
  drv x;
  /* A time unit longer than every instruction: the solver refuses the profile. */
  drv_open(&x, 1, 4, 1, 8, p,
           "{\"warmup_iters\": 0, \"blocking_power_w\": 50, \"min_frequency\": 1600, \"unit_time_s\": 0.5}");
  drv_until_settled(&x);
  json_t *st = drv_status(&x);
  assert_string_equal(jstr(st, "phase", NULL), "failed");
  const char *err = jstr(st, "error", NULL);
  assert_non_null(strstr(err, "the frontier solve failed"));
  assert_non_null(strstr(err, "less than one time unit"));
  json_decref(st);
  for (int r = 0; r < 4; r++) assert_int_equal(freq_of(&x, r, 1), 1740);
  assert_zeus_ok(drv_round(&x));
  assert_zeus_ok(drv_round(&x));
  char *body;
  assert_int_equal(drv_route(&x, "GET", "/events", NULL, &body), 200);
  assert_non_null(strstr(body, "\"event\": \"solve_failed\""));
  free(body);
  drv_close(&x);
  pe_free(p);
}

static void perseus_refuses_bad_arguments_the_3d_suffix_and_orders_other_than_1f1b(void **state) {
  (void)state;
  assert_zeus_err(zeus_pfo_check_scheduler("Perseus3D", NULL), ZEUS_EINVAL,
                  "Perseus handles data and tensor parallelism");
  assert_zeus_err(zeus_pfo_check_scheduler("Perseus", "{\"target_time_s\": 1, \"max_slowdown\": 1.1}"), ZEUS_EINVAL,
                  "not both");
  assert_zeus_err(zeus_pfo_check_scheduler("Perseus", "{\"recovery_tolerance\": 0.1}"), ZEUS_EINVAL,
                  "must be below straggler_tolerance");
  assert_zeus_err(zeus_pfo_check_scheduler("Perseus", "{\"cost_model\": \"cubic\"}"), ZEUS_EINVAL, "cost_model");
  assert_zeus_err(zeus_pfo_check_scheduler("Perseus", "{\"max_slowdown\": 0.5}"), ZEUS_EINVAL, "max_slowdown");
  assert_zeus_err(zeus_pfo_check_scheduler("Perseus", "{\"unit_time_s\": 0}"), ZEUS_EINVAL, "unit_time_s");
  assert_zeus_ok(zeus_pfo_check_scheduler("Perseus", "{\"warmup_iters\": 2, \"cost_model\": \"hull\"}"));
  const char *const *names = zeus_pfo_scheduler_names();
  bool listed = false;
  for (size_t i = 0; names[i]; i++) {
    listed |= strcmp(names[i], "Perseus") == 0;
    assert_string_not_equal(names[i], "Perseus3D");
  }
  assert_true(listed);
  /* A GPipe-like order (all forwards, then all backwards) on a middle stage is not 1F1B. */
  pe_profile *p = pe_synth(4);
  zeus_pfo_job_info job = {.job_id = "j", .pp_degree = 4, .dp_degree = 1, .tp_degree = 1, .world_size = 4};
  zeus_pfo_rank_info ranks[4];
  const char **o[4];
  for (int s = 0; s < 4; s++) {
    o[s] = order_1f1b(4, s, 8);
    ranks[s] = (zeus_pfo_rank_info){.rank = s,
                                    .pp_rank = s,
                                    .available_frequencies = p->mhz,
                                    .n_available_frequencies = 10,
                                    .pipe_schedule = (char **)o[s],
                                    .n_pipe_schedule = 16};
  }
  for (int k = 0; k < 16; k++) o[2][k] = k < 8 ? "forward" : "backward";
  zeus__solver_pool *pool;
  assert_zeus_ok(zeus__solver_pool_open(&pool, 1, 1));
  zeus__sched *s;
  assert_zeus_err(zeus__sched_create(&s, "Perseus", NULL, &job, ranks, 4, NULL, false, pool), ZEUS_EINVAL,
                  "rank 2's instruction 2 ('forward') is not where synchronous 1F1B puts it");
  assert_zeus_err(zeus__sched_create(&s, "Perseus", NULL, &job, ranks, 4, NULL, false, NULL), ZEUS_EINVAL,
                  "solver threads");
  zeus__solver_pool_close(pool);
  for (int i = 0; i < 4; i++) free(o[i]);
  pe_free(p);
}

/* ---- through HTTP: requests stay prompt while the GPT-3 96-microbatch solve runs ---- */

#define LAT_S 8
#define LAT_M 96

typedef struct lat_job {
  int port;
  char id[256];
  pe_profile *p;
} lat_job;

static json_t *http_json(int port, const char *method, const char *path, const char *body, int want) {
  th_conn c = {.fd = -1, .port = port};
  char *resp;
  int st = th_request(&c, method, path, body, NULL, &resp);
  th_close(&c);
  if (st != want) fail_msg("%s %s -> %d (%s), expected %d", method, path, st, resp ? resp : "", want);
  json_t *v = json_loads(resp, JSON_DECODE_ANY, NULL);
  free(resp);
  return v;
}

/* One round over HTTP: every rank asks for its schedule (eight connections, so the long polls
 * wait together), then every rank posts its result. Returns the round's wall time. */
static double lat_round(lat_job *j, th_conn *c) {
  double t0 = zeus_monotonic_s();
  char path[400];
  for (int r = 0; r < LAT_S; r++) {
    snprintf(path, sizeof path, "/schedule/%s?rank=%d", j->id, r);
    if (c[r].fd < 0) assert_int_equal(th_connect(&c[r], j->port), 0);
    assert_int_equal(th_send_request(&c[r], "GET", path, NULL, NULL), 0);
  }
  zeus_pfo_schedule sched[LAT_S];
  for (int r = 0; r < LAT_S; r++) {
    char *resp;
    int st = th_read_response(&c[r], &resp);
    if (st != 200) fail_msg("schedule of rank %d: %d %s", r, st, resp ? resp : "");
    assert_zeus_ok(zeus_pfo_schedule_from_json(resp, strlen(resp), "schedule", &sched[r]));
    free(resp);
  }
  zeus_pfo_prof_result res[LAT_S];
  assert_int_equal(pe_round(j->p, 1, LAT_S, 1, sched, NULL, 70.38, 1, false, res, NULL, NULL), 0);
  snprintf(path, sizeof path, "/result/%s", j->id);
  for (int r = 0; r < LAT_S; r++) {
    char *body, *resp;
    assert_zeus_ok(zeus_pfo_prof_result_to_json(&res[r], &body));
    int st = th_request(&c[r], "POST", path, body, NULL, &resp);
    if (st != 200) fail_msg("result of rank %d: %d %s", r, st, resp ? resp : "");
    free(resp);
    zeus_free(body);
    zeus_pfo_prof_result_clear(&res[r]);
    zeus_pfo_schedule_clear(&sched[r]);
  }
  return zeus_monotonic_s() - t0;
}

static const char *solve_state(json_t *st) {
  const char *s = jstr(st, "solve", "state");
  return s ? s : "";
}

static void perseus_server_answers_promptly_while_the_gpt3_96_microbatch_solve_runs(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char profile[512], dir[256];
  snprintf(profile, sizeof profile, "%s/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv", zeus_test_data_dir());
  lat_job j = {.p = pe_load(profile, LAT_S)};
  assert_non_null(j.p);
  assert_int_equal(j.p->nclk, 60);
  zeus_test_tmpdir(dir, sizeof dir);
  zeus_pfo_server_opts o;
  zeus_pfo_server_opts_init(&o);
  o.port = -1;
  o.scheduler = "Perseus";
  o.scheduler_args = "{\"warmup_iters\": 0, \"blocking_power_w\": 70.38}";
  o.dump_dir = dir;
  o.threads = 2;
  /* The ranks' keep-alive connections sit idle while the test waits for the solve, which takes
   * over a minute under ASan on a loaded machine: past the default idle timeout (60 s) the server
   * closed them and the next round read -1 on a closed connection. */
  o.idle_timeout_s = 600;
  zeus_pfo_server *srv;
  assert_zeus_ok(zeus_pfo_server_open(&srv, &o));
  j.port = zeus_pfo_server_port(srv);
  json_t *v = http_json(j.port, "POST", "/register_job",
                        "{\"job_id\": \"\", \"pp_degree\": 8, \"dp_degree\": 1, \"tp_degree\": 1, \"world_size\": 8}",
                        200);
  snprintf(j.id, sizeof j.id, "%s", json_string_value(v));
  json_decref(v);
  char path[400];
  snprintf(path, sizeof path, "/perseus/%s", j.id);
  v = http_json(j.port, "GET", path, NULL, 409); /* ranks not registered yet */
  assert_non_null(strstr(json_string_value(json_object_get(v, "detail")), "0 of 8 so far"));
  json_decref(v);
  for (int r = 0; r < LAT_S; r++) {
    zeus__buf b = {0};
    zeus__buf_printf(&b, "{\"rank\": %d, \"dp_rank\": 0, \"pp_rank\": %d, \"tp_rank\": 0, \"available_frequencies\": [",
                     r, r);
    for (int c = 0; c < j.p->nclk; c++) zeus__buf_printf(&b, "%s%d", c ? ", " : "", j.p->mhz[c]);
    zeus__buf_puts(&b, "], \"pipe_schedule\": [");
    const char **ord = order_1f1b(LAT_S, r, LAT_M);
    for (int k = 0; k < 2 * LAT_M; k++) zeus__buf_printf(&b, "%s\"%s\"", k ? ", " : "", ord[k]);
    free(ord);
    zeus__buf_puts(&b, "]}");
    char rp[400];
    snprintf(rp, sizeof rp, "/register_rank/%s", j.id);
    json_decref(http_json(j.port, "POST", rp, b.data, 200));
    zeus__buf_free(&b);
  }
  th_conn c[LAT_S];
  for (int r = 0; r < LAT_S; r++) c[r] = (th_conn){.fd = -1, .port = j.port};
  /* Profile every clock (61 rounds), then measure while the solve runs. */
  double worst_round = 0, worst_get = 0, sum_round = 0, t0 = zeus_monotonic_s();
  int measured_rounds = 0, measured_gets = 0, rounds = 0, base_n = 0;
  double base_sum = 0, base_worst = 0; /* rounds before the solve, for comparison */
  double points_seen = 0;             /* the status' points_so_far while the solve runs */
  for (;;) {
    json_t *st = http_json(j.port, "GET", path, NULL, 200);
    const char *ph = jstr(st, "phase", NULL);
    bool running = strcmp(ph, "solving") == 0 && strcmp(solve_state(st), "running") == 0;
    bool done = strcmp(ph, "deployed") == 0 || strcmp(ph, "failed") == 0;
    json_decref(st);
    if (done) break;
    if (zeus_monotonic_s() - t0 > 110) fail_msg("no plan after 110 s (%d rounds)", rounds);
    if (!running || measured_rounds >= 40) {
      if (running) { /* measured enough: wait for the solve without more load */
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
        json_decref(http_json(j.port, "GET", "/info", NULL, 200));
        continue;
      }
      double dt = lat_round(&j, c);
      rounds++;
      if (!running) base_n++, base_sum += dt, base_worst = fmax(base_worst, dt);
      continue;
    }
    /* While it runs: a whole round (8 long polls + 8 results), GET /info and the status. */
    double dt = lat_round(&j, c);
    rounds++;
    double t1 = zeus_monotonic_s();
    json_decref(http_json(j.port, "GET", "/info", NULL, 200));
    double t2 = zeus_monotonic_s();
    st = http_json(j.port, "GET", path, NULL, 200);
    double t3 = zeus_monotonic_s();
    bool still = strcmp(solve_state(st), "running") == 0;
    if (still) { /* the points found so far only grow */
      double pts = jnumber(st, "solve", "points_so_far");
      assert_true(pts >= points_seen);
      points_seen = pts;
    }
    json_decref(st);
    if (!still) continue; /* the solve ended during these requests: they do not count */
    measured_rounds++;
    sum_round += dt;
    worst_round = dt > worst_round ? dt : worst_round;
    measured_gets += 2;
    worst_get = fmax(worst_get, fmax(t2 - t1, t3 - t2));
  }
  json_t *st = http_json(j.port, "GET", path, NULL, 200);
  assert_string_equal(jstr(st, "phase", NULL), "deployed");
  double solve_s = jnumber(st, "solve", "solve_s");
  print_message("GPT-3 A40 8 x 96: solve %.3f s (%d points); rounds of 16 requests (8 long polls, 8 results) "
                "before it: %d, mean %.1f ms, worst %.1f ms; while it ran: %d, mean %.1f ms, worst %.1f ms; %d single "
                "GETs while it ran, worst %.1f ms\n", solve_s, (int)jnumber(st, "solve", "points"), base_n,
                base_n ? 1e3 * base_sum / base_n : 0, 1e3 * base_worst, measured_rounds,
                measured_rounds ? 1e3 * sum_round / measured_rounds : 0, 1e3 * worst_round, measured_gets,
                1e3 * worst_get);
  double final_points = jnumber(st, "solve", "points");
  json_decref(st);
  /* The solve took long enough to be measured against, and never stalled a request. */
  assert_true(measured_rounds >= 3);
  assert_true(points_seen > 0 && points_seen <= final_points);
  /* A round after the plan is deployed (the ranks come back for their schedules). */
  lat_round(&j, c);
  assert_true(worst_round < 0.5);
  assert_true(worst_get < 0.25);
  for (int r = 0; r < LAT_S; r++) th_close(&c[r]);
  zeus_pfo_server_close(srv);
  pe_free(j.p);
}

static void perseus_routes_go_through_the_servers_auth_and_unknown_jobs(void **state) {
  (void)state;
  zeus_pfo_server_opts o;
  zeus_pfo_server_opts_init(&o);
  char dir[256];
  zeus_test_tmpdir(dir, sizeof dir);
  o.port = -1;
  o.scheduler = "Perseus";
  o.dump_dir = dir;
  o.token = "s3cret";
  zeus_pfo_server *srv;
  assert_zeus_ok(zeus_pfo_server_open(&srv, &o));
  int port = zeus_pfo_server_port(srv);
  th_conn c = {.fd = -1, .port = port};
  char *resp;
  assert_int_equal(th_request(&c, "GET", "/perseus/nope", NULL, NULL, &resp), 401);
  free(resp);
  assert_int_equal(th_request(&c, "POST", "/perseus/nope/straggler", "{}", NULL, &resp), 401);
  free(resp);
  const char *auth = "Authorization: Bearer s3cret\r\n";
  assert_int_equal(th_request(&c, "GET", "/perseus/nope", NULL, auth, &resp), 404);
  assert_non_null(strstr(resp, "unknown job id"));
  free(resp);
  assert_int_equal(th_request(&c, "DELETE", "/perseus/nope", NULL, auth, &resp), 405);
  free(resp);
  /* /metrics counts them under the route's template, never the client's path (a request is
   * counted once its answer is sent, which the client may see a moment earlier: up to 5 s). */
  const char *want = "zeus_pfo_requests_total{route=\"/perseus/{job_id}\",code=\"404\"} 1\n";
  bool seen = false;
  for (int i = 0; i < 500 && !seen; i++) {
    assert_int_equal(th_request(&c, "GET", "/metrics", NULL, auth, &resp), 200);
    seen = strstr(resp, want) != NULL;
    if (seen) {
      assert_non_null(strstr(resp, "zeus_pfo_requests_total{route=\"/perseus/{job_id}\",code=\"401\"} 2\n"));
      assert_null(strstr(resp, "nope"));
    }
    free(resp);
    struct timespec ts = {0, 10 * 1000 * 1000};
    if (!seen) nanosleep(&ts, NULL);
  }
  assert_true(seen);
  th_close(&c);
  zeus_pfo_server_close(srv);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(solver_pool_solves_off_the_caller_and_bounds_its_queue),
      cmocka_unit_test(perseus_profiles_each_stage_then_deploys_the_least_energy_plan_at_the_fastest_time),
      cmocka_unit_test(perseus_measures_the_blocking_power_when_not_given),
      cmocka_unit_test(perseus_target_time_and_max_slowdown_deploy_the_least_energy_plan_within),
      cmocka_unit_test(perseus_follows_a_straggler_with_hysteresis_and_returns_when_it_recovers),
      cmocka_unit_test(perseus_straggler_declarations_apply_at_the_next_round_and_bad_ones_are_refused),
      cmocka_unit_test(perseus_routes_serve_the_profile_frontier_plans_and_events),
      cmocka_unit_test(perseus_profile_without_backward_fails_cleanly_and_keeps_the_highest_clocks),
      cmocka_unit_test(perseus_solver_failure_is_reported_and_the_job_keeps_the_highest_clocks),
      cmocka_unit_test(perseus_profile_missing_a_clock_is_named_and_the_plan_uses_only_measured_clocks),
      cmocka_unit_test(perseus_refuses_bad_arguments_the_3d_suffix_and_orders_other_than_1f1b),
      cmocka_unit_test(perseus_server_answers_promptly_while_the_gpt3_96_microbatch_solve_runs),
      cmocka_unit_test(perseus_routes_go_through_the_servers_auth_and_unknown_jobs),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
