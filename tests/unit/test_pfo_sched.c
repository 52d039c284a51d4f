/* PFO schedulers and the transport-free job table. */
#include "test_util.h"

#include <zeus.h>

#include <math.h>

#include "pfo_server/job_table.h"
#include "pfo_server/sched.h"

/* ---- helpers ---- */

/* A dp2 × pp2 × tp2 job; rank = ((pp * dp) + d) * tp + t with Megatron-like order. */
static void make_3d_job(zeus_pfo_job_info *job, zeus_pfo_rank_info *ranks, int *freqs) {
  *job = (zeus_pfo_job_info){.pp_degree = 2, .dp_degree = 2, .tp_degree = 2, .world_size = 8};
  for (int r = 0; r < 8; r++) {
    ranks[r] = (zeus_pfo_rank_info){.rank = r, .pp_rank = r / 4, .dp_rank = (r / 2) % 2, .tp_rank = r % 2,
                                    .available_frequencies = freqs, .n_available_frequencies = 3};
  }
}

/* A result whose values encode the rank: time = rank + it/10 (+ j/100), energy likewise × 10. */
static void make_result(zeus_pfo_prof_result *p, int rank, size_t iters, size_t per_iter) {
  memset(p, 0, sizeof *p);
  p->rank = rank;
  p->n_iter_time = p->n_iter_energy = iters;
  p->iter_time = malloc(iters * sizeof(double));
  p->iter_energy = malloc(iters * sizeof(double));
  for (size_t i = 0; i < iters; i++) { p->iter_time[i] = rank + i / 10.0; p->iter_energy[i] = 10.0 * rank + i; }
  static const char *insts[] = {"forward", "backward"};
  p->n_time_breakdown = p->n_energy_breakdown = 2;
  p->time_breakdown = calloc(2, sizeof(zeus_pfo_breakdown));
  p->energy_breakdown = calloc(2, sizeof(zeus_pfo_breakdown));
  for (int e = 0; e < 2; e++) {
    for (size_t k = 0; k < 2; k++) {
      zeus_pfo_breakdown *b = e ? &p->energy_breakdown[k] : &p->time_breakdown[k];
      b->instruction = strdup(insts[k]);
      b->n_iters = iters;
      b->offsets = malloc((iters + 1) * sizeof(size_t));
      b->values = malloc(iters * per_iter * sizeof(double));
      for (size_t i = 0; i <= iters; i++) b->offsets[i] = i * per_iter;
      for (size_t i = 0; i < iters * per_iter; i++) b->values[i] = (e ? 10.0 : 1.0) * (rank + 0.01 * (double)i);
    }
  }
}

/* ---- 3D wrapper ---- */

static void wrapper_3d_aggregates_stage_results_max_time_sum_energy(void **state) {
  (void)state;
  int freqs[] = {1410, 1200, 1000};
  zeus_pfo_job_info job;
  zeus_pfo_rank_info ranks[8];
  make_3d_job(&job, ranks, freqs);
  zeus_pfo_prof_result res[8];
  for (int r = 0; r < 8; r++) make_result(&res[r], r, 3, 2);
  zeus_pfo_prof_result *agg;
  size_t n;
  assert_zeus_ok(zeus__sched3d_aggregate(&job, ranks, 8, res, 8, &agg, &n));
  assert_int_equal(n, 2);
  /* Stage 1 = ranks 4..7: iteration time max = 7 + i/10, energy sum = 10*(4+5+6+7) + 4i. */
  assert_int_equal(agg[1].rank, 1);
  assert_true(agg[1].iter_time[2] == 7 + 0.2);
  assert_true(agg[1].iter_energy[1] == 220 + 4);
  assert_true(agg[0].iter_time[0] == 3);
  assert_true(agg[0].iter_energy[0] == 60);
  /* Breakdowns: forward time of stage 0, iteration 1, entry 0 = max over ranks 0..3 of r + .02. */
  assert_string_equal(agg[0].time_breakdown[0].instruction, "forward");
  assert_int_equal(agg[0].time_breakdown[0].n_iters, 3);
  assert_true(agg[0].time_breakdown[0].values[2] == 3 + 0.02);
  double esum = 0;
  for (int r = 4; r < 8; r++) esum += 10.0 * (r + 0.01 * 5);
  assert_true(fabs(agg[1].energy_breakdown[1].values[5] - esum) < 1e-9);
  zeus_pfo_prof_results_free(agg, n);
  /* A rank of a stage that lacks an instruction is named. */
  free(res[5].time_breakdown[1].instruction);
  res[5].time_breakdown[1].instruction = strdup("load");
  assert_zeus_err(zeus__sched3d_aggregate(&job, ranks, 8, res, 8, &agg, &n), ZEUS_EINVAL, "rank 5");
  for (int r = 0; r < 8; r++) zeus_pfo_prof_result_clear(&res[r]);
}

static void wrapper_3d_copies_each_stage_schedule_to_its_ranks(void **state) {
  (void)state;
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/plan.py", dir);
  zeus_test_write_file(path,
                       "[[(\"forward\", 1410), (\"backward\", 1200)], [(\"forward\", 1000), (\"backward\", 1000)]]");
  int freqs[] = {1410, 1200, 1000};
  zeus_pfo_job_info job;
  zeus_pfo_rank_info ranks[8];
  make_3d_job(&job, ranks, freqs);
  json_t *args = json_pack("{ss}", "solution_path", path);
  zeus__sched *s;
  /* Without the wrapper, a 2-entry plan does not fit 8 ranks. */
  assert_zeus_err(zeus__sched_create(&s, "PointSolution", args, &job, ranks, 8, NULL, false, NULL), ZEUS_EINVAL,
                  "assumes 2 ranks, but the job has 8");
  assert_zeus_ok(zeus__sched_create(&s, "PointSolution3D", args, &job, ranks, 8, NULL, false, NULL));
  const zeus_pfo_schedule *cur;
  size_t n;
  zeus__sched_current(s, &cur, &n);
  assert_int_equal(n, 8);
  for (int r = 0; r < 8; r++) {
    assert_int_equal(cur[r].rank, r);
    assert_int_equal(cur[r].n_frequencies, 2);
    assert_int_equal(cur[r].frequencies[0].frequency_mhz, r < 4 ? 1410 : 1000);
  }
  /* Observing aggregated results finishes PointSolution; the last schedule stays. */
  zeus_pfo_prof_result res[8];
  for (int r = 0; r < 8; r++) make_result(&res[r], r, 2, 2);
  assert_zeus_ok(zeus__sched_observe(s, res, 8));
  assert_true(zeus__sched_finished(s));
  zeus__sched_current(s, &cur, &n);
  assert_int_equal(cur[7].frequencies[1].frequency_mhz, 1000);
  for (int r = 0; r < 8; r++) zeus_pfo_prof_result_clear(&res[r]);
  zeus__sched_destroy(s);
  json_decref(args);
  /* A plan whose clock the GPUs do not have (made for another GPU) is refused at creation,
   * naming the entry, the instruction and the nearest clock they do have. */
  zeus_test_write_file(path,
                       "[[(\"forward\", 1410), (\"backward\", 1200)], [(\"forward\", 1005), (\"backward\", 1000)]]");
  args = json_pack("{ss}", "solution_path", path);
  assert_zeus_err(zeus__sched_create(&s, "PointSolution3D", args, &job, ranks, 8, NULL, false, NULL), ZEUS_EINVAL,
                  "entry 1 (rank 1), instruction 0 ('forward') asks for 1005 MHz");
  assert_true(strstr(zeus_errmsg(), "nearest: 1000 MHz") != NULL);
  json_decref(args);
}

static void all_max_uses_pipe_schedule_or_1f1b(void **state) {
  (void)state;
  int freqs[] = {1200, 1410, 1000};
  zeus_pfo_job_info job = {.pp_degree = 4, .dp_degree = 1, .tp_degree = 1, .world_size = 4};
  zeus_pfo_rank_info ranks[4];
  for (int r = 0; r < 4; r++)
    ranks[r] = (zeus_pfo_rank_info){
        .rank = r, .pp_rank = r, .available_frequencies = freqs, .n_available_frequencies = 3};
  char *ps[] = {"load", "forward", "backward"};
  ranks[3].pipe_schedule = ps;
  ranks[3].n_pipe_schedule = 3;
  zeus__sched *s;
  assert_zeus_err(zeus__sched_create(&s, "AllMaxFrequency", NULL, &job, ranks, 4, NULL, false, NULL), ZEUS_EINVAL,
                  "num_microbatches");
  json_t *args = json_pack("{si}", "num_microbatches", 3);
  assert_zeus_ok(zeus__sched_create(&s, "AllMaxFrequency", args, &job, ranks, 4, NULL, false, NULL));
  const zeus_pfo_schedule *cur;
  size_t n;
  zeus__sched_current(s, &cur, &n);
  /* Stage 0 of 4 with 3 microbatches: F F F B B B (warm-up min(3, 3)); stage 2: F F B F B B. */
  const char *st0 = "FFFBBB", *st2 = "FFBFBB";
  for (int i = 0; i < 6; i++) {
    assert_int_equal(cur[0].frequencies[i].instruction[0], st0[i] == 'F' ? 'f' : 'b');
    assert_int_equal(cur[2].frequencies[i].instruction[0], st2[i] == 'F' ? 'f' : 'b');
    assert_int_equal(cur[0].frequencies[i].frequency_mhz, 1410);
  }
  assert_int_equal(cur[3].n_frequencies, 3);
  assert_string_equal(cur[3].frequencies[0].instruction, "load");
  zeus__sched_destroy(s);
  json_decref(args);
}

static void scheduler_args_are_checked_against_parameters(void **state) {
  (void)state;
  assert_zeus_err(zeus_pfo_check_scheduler("Nope", NULL), ZEUS_EINVAL, "unknown scheduler 'Nope'");
  assert_zeus_err(zeus_pfo_check_scheduler("PointSolution", "{}"), ZEUS_EINVAL, "solution_path");
  assert_zeus_err(zeus_pfo_check_scheduler("PointSolution", "{\"solution_path\": 3}"), ZEUS_EINVAL, "must be a string");
  assert_zeus_err(zeus_pfo_check_scheduler("AllMaxFrequency", "{\"bogus\": 1}"), ZEUS_EINVAL, "no argument 'bogus'");
  assert_zeus_err(zeus_pfo_check_scheduler("AllMaxFrequency3D", "[1]"), ZEUS_EINVAL, "JSON object");
  assert_zeus_err(zeus_pfo_check_scheduler("PointSolution", "{\"solution_path\": \"/no/such.py\"}"), ZEUS_ENOENT,
                  "/no/such.py");
  assert_zeus_ok(zeus_pfo_check_scheduler("InstructionProfiler3D", "{\"warmup_iters\": 2, \"num_microbatches\": 4}"));
  assert_zeus_err(zeus_pfo_check_scheduler("InstructionProfiler", "{\"warmup_iters\": -1}"), ZEUS_EINVAL,
                  "warmup_iters");
}

/* ---- InstructionProfiler ---- */

/* Scripted results: forward time 1/f-ish, energy with a minimum at 1100 MHz. */
static double scripted_energy(int f) { return 100.0 + (f - 1100) * (f - 1100) / 1000.0; }

static void fill_profiler_result(zeus_pfo_prof_result *p, int rank, int f) {
  make_result(p, rank, 3, 2);
  for (int e = 0; e < 2; e++)
    for (size_t k = 0; k < 2; k++) {
      zeus_pfo_breakdown *b = e ? &p->energy_breakdown[k] : &p->time_breakdown[k];
      for (size_t i = 0; i < 6; i++) {
        double v = e ? scripted_energy(f) * (k + 1) : 1000.0 / f * (k + 1);
        b->values[i] = i < 2 ? 999.0 : v; /* iteration 0 is warm-up garbage */
      }
    }
}

static void instruction_profiler_writes_csv_and_stops_after_five_rises(void **state) {
  (void)state;
  char dir[256], jobdir[300], csv[400];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(jobdir, sizeof jobdir, "%s/job", dir);
  snprintf(csv, sizeof csv, "%s/instruction_profile.csv", jobdir);
  int freqs[] = {1000, 1100, 1200, 1300, 1400, 900, 800, 700, 600, 500, 400, 300};
  zeus_pfo_job_info job = {.pp_degree = 2, .dp_degree = 1, .tp_degree = 1, .world_size = 2};
  zeus_pfo_rank_info ranks[2];
  for (int r = 0; r < 2; r++)
    ranks[r] = (zeus_pfo_rank_info){
        .rank = r, .pp_rank = r, .available_frequencies = freqs, .n_available_frequencies = 12};
  json_t *args = json_pack("{sisisi}", "warmup_iters", 1, "num_microbatches", 2, "min_frequency", 350);
  zeus__sched *s;
  int root;
  assert_zeus_ok(zeus__open_private_dir(dir, &root));
  zeus__pfo_dump_loc loc = {root, "job", jobdir};
  assert_zeus_ok(zeus__sched_create(&s, "InstructionProfiler", args, &job, ranks, 2, &loc, false, NULL));
  const zeus_pfo_schedule *cur;
  size_t n;
  int seen[32], nseen = 0;
  for (int round = 0; round < 30 && !zeus__sched_finished(s); round++) {
    zeus__sched_current(s, &cur, &n);
    int f = cur[0].frequencies[0].frequency_mhz;
    seen[nseen++] = f;
    zeus_pfo_prof_result res[2];
    for (int r = 0; r < 2; r++) fill_profiler_result(&res[r], r, cur[r].frequencies[0].frequency_mhz);
    assert_zeus_ok(zeus__sched_observe(s, res, 2));
    for (int r = 0; r < 2; r++) zeus_pfo_prof_result_clear(&res[r]);
  }
  assert_true(zeus__sched_finished(s));
  /* Warm-up at 1410? no: the highest available is 1400; then 1400 down to 1100 (energy falls),
   * 1000..600 (five rises: stop), then the final all-max schedule. */
  int want[] = {1400, 1400, 1300, 1200, 1100, 1000, 900, 800, 700, 600, 1400};
  assert_int_equal(nseen, (int)(sizeof want / sizeof want[0]));
  for (int i = 0; i < nseen; i++) assert_int_equal(seen[i], want[i]);
  zeus__sched_current(s, &cur, &n);
  assert_int_equal(cur[1].frequencies[0].frequency_mhz, 1400);
  /* The CSV: 2 ranks × 2 instructions × 9 profiled frequencies, averages without warm-up. */
  FILE *f = fopen(csv, "r");
  assert_non_null(f);
  char line[256];
  int rows = 0;
  bool found = false;
  assert_non_null(fgets(line, sizeof line, f));
  assert_string_equal(line, "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n");
  while (fgets(line, sizeof line, f)) {
    rows++;
    int rank, dp, pp, tp, stage, freq;
    char inst[16];
    double t, e;
    assert_int_equal(
        sscanf(line, "%d,%d,%d,%d,%d,%15[a-z],%d,%lf,%lf", &rank, &dp, &pp, &tp, &stage, inst, &freq, &t, &e), 9);
    assert_int_equal(stage, pp);
    if (rank == 1 && !strcmp(inst, "backward") && freq == 1100) {
      found = true;
      assert_true(fabs(t - 2000.0 / 1100) < 1e-9);
      assert_true(fabs(e - 200.0) < 1e-9);
    }
  }
  fclose(f);
  assert_true(found);
  assert_int_equal(rows, 2 * 2 * 9);
  zeus__sched_destroy(s);
  close(root);
  json_decref(args);
}

/* ---- the job table, driven directly ---- */

typedef struct { int status; char body[512]; int calls; } waiter;

static void on_done(void *w, zeus__reply *rep) {
  waiter *x = w;
  x->status = rep->status;
  snprintf(x->body, sizeof x->body, "%s", rep->body ? rep->body : "");
  x->calls++;
  free(rep->body);
}

static zeus__job_table *open_reg(const char *sched, const char *args) {
  zeus__job_table *r;
  zeus__job_table_opts o = {.scheduler = sched, .scheduler_args = args, .on_complete = on_done,
                           .max_job_idle_time_s = 100};
  assert_zeus_ok(zeus__job_table_open(&r, &o));
  return r;
}

static char *reg_job(zeus__job_table *r, int pp) {
  char body[200];
  snprintf(body, sizeof body, "{\"job_id\":\"\",\"pp_degree\":%d,\"dp_degree\":1,\"tp_degree\":1,\"world_size\":%d}",
           pp, pp);
  zeus__reply rep = {0};
  assert_int_equal(zeus__job_table_register_job(r, body, strlen(body), &rep), 200);
  assert_true(rep.body[0] == '"');
  char *id = strndup(rep.body + 1, strlen(rep.body) - 2);
  free(rep.body);
  return id;
}

static int reg_rank(zeus__job_table *r, const char *id, int rank, char **msg) {
  char body[200];
  snprintf(body, sizeof body,
           "{\"rank\":%d,\"dp_rank\":0,\"pp_rank\":%d,\"tp_rank\":0,\"available_frequencies\":[1410,1000]}",
           rank, rank);
  zeus__reply rep = {0};
  int st = zeus__job_table_register_rank(r, id, NULL, body, strlen(body), &rep);
  if (msg) *msg = rep.body; else free(rep.body);
  return st;
}

static int post(zeus__job_table *r, const char *id, int rank) {
  char body[300];
  snprintf(body, sizeof body,
           "{\"rank\":%d,\"iter_time\":[1],\"iter_energy\":[2],\"time_breakdown\":{\"forward\":[[0.5]]},"
           "\"energy_breakdown\":{\"forward\":[[5]]}}",
           rank);
  zeus__reply rep = {0};
  int st = zeus__job_table_post_result(r, id, NULL, body, strlen(body), &rep);
  free(rep.body);
  return st;
}

static void registry_rounds_wait_for_every_rank_and_survive_reconnects(void **state) {
  (void)state;
  zeus__job_table *r = open_reg("AllMaxFrequency", "{\"num_microbatches\": 2}");
  char *id = reg_job(r, 2);
  zeus__reply rep = {0};
  waiter w0 = {0}, w0b = {0}, w1 = {0};
  /* Rank 0 asks before rank 1 registered: it waits. */
  assert_int_equal(reg_rank(r, id, 0, NULL), 200);
  assert_int_equal(zeus__job_table_request_schedule(r, id, "0", NULL, &w0, &rep), 0);
  /* It disconnects and asks again: the newer request replaces the old one (409 to the old). */
  assert_int_equal(zeus__job_table_request_schedule(r, id, "0", NULL, &w0b, &rep), 0);
  assert_int_equal(w0.calls, 1);
  assert_int_equal(w0.status, 409);
  char *msg;
  assert_int_equal(reg_rank(r, id, 0, &msg), 409);
  assert_non_null(strstr(msg, "already registered"));
  free(msg);
  assert_int_equal(reg_rank(r, id, 1, NULL), 200);
  assert_int_equal(w0b.calls, 0); /* rank 1 has not asked yet */
  /* Rank 1 asks last: it is answered at once, rank 0 through its waiter. */
  assert_int_equal(zeus__job_table_request_schedule(r, id, "1", NULL, &w1, &rep), 200);
  assert_non_null(strstr(rep.body, "\"rank\":1"));
  free(rep.body);
  assert_int_equal(w0b.calls, 1);
  assert_int_equal(w0b.status, 200);
  assert_non_null(strstr(w0b.body, "[\"forward\",1410]"));
  /* A lost answer is sent again. */
  assert_int_equal(zeus__job_table_request_schedule(r, id, "0", NULL, &w0, &rep), 200);
  free(rep.body);
  /* Results: twice is a conflict; an early ask for the next round waits. */
  assert_int_equal(post(r, id, 0), 200);
  assert_int_equal(post(r, id, 0), 409);
  waiter n0 = {0};
  assert_int_equal(zeus__job_table_request_schedule(r, id, "0", NULL, &n0, &rep), 0);
  assert_int_equal(post(r, id, 1), 200);
  assert_int_equal(n0.calls, 0);
  assert_int_equal(zeus__job_table_request_schedule(r, id, "1", NULL, &w1, &rep), 200);
  free(rep.body);
  assert_int_equal(n0.calls, 1);
  assert_int_equal(n0.status, 200);
  /* Bad inputs. */
  assert_int_equal(zeus__job_table_request_schedule(r, id, "2", NULL, &w1, &rep), 400);
  free(rep.body);
  assert_int_equal(zeus__job_table_request_schedule(r, id, NULL, NULL, &w1, &rep), 400);
  assert_non_null(strstr(rep.body, "rank"));
  free(rep.body);
  assert_int_equal(zeus__job_table_request_schedule(r, "nope", "0", NULL, &w1, &rep), 404);
  free(rep.body);
  assert_int_equal(zeus__job_table_post_result(r, id, NULL, "{\"rank\":0}", 10, &rep), 400);
  assert_non_null(strstr(rep.body, "iter_time"));
  free(rep.body);
  /* Idle jobs are reaped; parked requests hear 404. */
  waiter late = {0};
  assert_int_equal(post(r, id, 0), 200);
  assert_int_equal(zeus__job_table_request_schedule(r, id, "0", NULL, &late, &rep), 0);
  assert_int_equal(zeus__job_table_reap(r, zeus_monotonic_s() + 50), 0);
  assert_int_equal(zeus__job_table_reap(r, zeus_monotonic_s() + 101), 1);
  assert_int_equal(late.status, 404);
  assert_int_equal(zeus__job_table_njobs(r), 0);
  free(id);
  zeus__job_table_close(r);
}

static void registry_scheduler_error_reaches_every_rank(void **state) {
  (void)state;
  char dir[256], path[512], args[600];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/plan.py", dir);
  zeus_test_write_file(path, "[[(\"forward\", 1410)]]"); /* one entry, the job has two ranks */
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", path);
  zeus__job_table *r = open_reg("PointSolution", args);
  char *id = reg_job(r, 2);
  zeus__reply rep = {0};
  waiter w0 = {0};
  assert_int_equal(reg_rank(r, id, 0, NULL), 200);
  assert_int_equal(zeus__job_table_request_schedule(r, id, "0", NULL, &w0, &rep), 0);
  char *msg;
  assert_int_equal(reg_rank(r, id, 1, &msg), 400);
  free(msg);
  assert_int_equal(w0.status, 400);
  assert_non_null(strstr(w0.body, "assumes 1 ranks, but the job has 2"));
  assert_int_equal(zeus__job_table_request_schedule(r, id, "1", NULL, &w0, &rep), 400);
  assert_non_null(strstr(rep.body, "assumes 1 ranks"));
  free(rep.body);
  /* Two jobs in the same second get distinct ids. */
  char *id2 = reg_job(r, 2), *id3 = reg_job(r, 2);
  assert_string_not_equal(id2, id3);
  free(id);
  free(id2);
  free(id3);
  zeus__job_table_close(r);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(wrapper_3d_aggregates_stage_results_max_time_sum_energy),
      cmocka_unit_test(wrapper_3d_copies_each_stage_schedule_to_its_ranks),
      cmocka_unit_test(all_max_uses_pipe_schedule_or_1f1b),
      cmocka_unit_test(scheduler_args_are_checked_against_parameters),
      cmocka_unit_test(instruction_profiler_writes_csv_and_stops_after_five_rises),
      cmocka_unit_test(registry_rounds_wait_for_every_rank_and_survive_reconnects),
      cmocka_unit_test(registry_scheduler_error_reaches_every_rank),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
