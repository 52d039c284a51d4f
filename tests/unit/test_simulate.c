/* simulate: the trace-driven simulator on a hand-computable synthetic trace, and on the NSDI '23
 * traces (skipped where ../shared/data is absent). */
#include <math.h>

#include "test_util.h"

#include <zeus.h>

/* A synthetic trace: batch sizes 8, 16 (default), 32 at limits 100 and 200 W, target 0.5.
 * Epoch costs (eta 0.5, max power 200 W): bs 16: 1900 at 200 W (best), 2212.5 at 100 W;
 * bs 8: 2100 / 2030 (100 W best); bs 32: 975 (200 W best) / 1200. Runs reach the target at
 * epoch 10 (bs 16, two runs), 4 (bs 8), and bs32_epoch (bs 32). */
static const char *write_trace(char *dir, size_t len, const char *bs32_epoch) {
  zeus_test_tmpdir(dir, len);
  char path[512], text[2048];
  snprintf(path, sizeof path, "%s/summary_train.csv", dir);
  snprintf(text, sizeof text,
           "dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n"
           "d,n,16,sgd,0.1,1,0.25,3\n"
           "d,n,16,sgd,0.1,1,0.5,10\n"
           "d,n,16,sgd,0.1,2,0.5,10\n"
           "d,n,8,sgd,0.05,1,0.5,4\n"
           "d,n,32,sgd,0.2,1,0.5,%s\n"
           "d,n,64,sgd,0.4,1,0.5,2\n" /* no power rows: not one of the job's batch sizes */
           "other,n,16,sgd,0.1,1,0.5,1\n",
           bs32_epoch);
  zeus_test_write_file(path, text);
  snprintf(path, sizeof path, "%s/summary_power_toy.csv", dir);
  zeus_test_write_file(path,
                       "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
                       "d,n,16,sgd,200,10,180\n"
                       "d,n,16,sgd,100,15,95\n"
                       "d,n,8,sgd,200,12,150\n"
                       "d,n,8,sgd,100,14,90\n"
                       "d,n,32,sgd,200,5,190\n"
                       "d,n,32,sgd,100,8,100\n");
  return dir;
}

static const zeus_trace_workload TOY = {"d", "n", "sgd", 0.5, 20, 16};

typedef struct want {
  long rec, tr, bs;
  unsigned pl;
  long epochs;
  double energy, time;
  bool reached;
} want;

static void check_history(const zeus_simulate_result *r, const want *w, size_t n) {
  assert_int_equal(r->history_len, n);
  for (size_t i = 0; i < n; i++) {
    const zeus_simulate_try *h = &r->history[i];
    if (h->recurrence != w[i].rec || h->try_index != w[i].tr || h->batch_size != w[i].bs ||
        h->power_limit_w != w[i].pl || h->epochs != w[i].epochs || h->reached != w[i].reached)
      fail_msg("try %zu: rec %ld try %ld bs %ld %u W %ld epochs %s; expected rec %ld try %ld bs %ld %u W %ld epochs %s",
               i, h->recurrence, h->try_index, h->batch_size, h->power_limit_w, h->epochs,
               h->reached ? "reached" : "failed", w[i].rec, w[i].tr, w[i].bs, w[i].pl, w[i].epochs,
               w[i].reached ? "reached" : "failed");
    assert_near(h->energy_j, w[i].energy, 1e-9);
    assert_near(h->time_s, w[i].time, 1e-9);
    assert_near(h->cost, 0.5 * w[i].energy + 0.5 * 200 * w[i].time, 1e-9);
  }
}

static void simulate_toy_trace_matches_hand_computation(void **state) {
  (void)state;
  char dir[256];
  write_trace(dir, sizeof dir, "nan");
  zeus_trace *t;
  assert_zeus_ok(zeus_trace_open(&t, dir, "toy"));
  zeus_simulate_opts o;
  zeus_simulate_opts_init(&o);
  o.recurrences = 4;
  zeus_simulate_result *r;
  assert_zeus_ok(zeus_simulate(t, &TOY, &o, &r));
  /* Rec 1: default 16 profiles (first epoch: mean of 1800 J/10 s and 1425 J/15 s), then 9 epochs
   *   at 200 W: 17812.5 J, 102.5 s; best cost 19156.25.
   * Rec 2: 8 profiles (1530 J, 13 s) + 3 epochs at 100 W: 5310 J, 55 s (bound 38312.5 / 2030 = 18).
   * Rec 3: 32 (never reaches) runs floor(2 * 8155 / 975) = 16 epochs: 875 + 15 * 950 J, 6.5 + 75 s;
   *   then round 2 starts from the new default 8: 4 epochs, 5040 J, 56 s.
   * Rec 4: 16 may run floor(16310 / 1900) = 8 < 10 epochs and fails; pruning leaves only 8. */
  const want w[] = {
      {1, 1, 16, 200, 10, 17812.5, 102.5, true}, {2, 1, 8, 100, 4, 5310, 55, true},
      {3, 1, 32, 200, 16, 15125, 81.5, false},   {3, 2, 8, 100, 4, 5040, 56, true},
      {4, 1, 16, 200, 8, 14400, 80, false},      {4, 2, 8, 100, 4, 5040, 56, true},
  };
  check_history(r, w, sizeof w / sizeof w[0]);
  assert_int_equal(r->num_batch_sizes, 3);
  assert_int_equal(r->batch_sizes[0], 8);
  assert_int_equal(r->batch_sizes[2], 32);
  assert_int_equal(r->num_power_limits, 2);
  assert_near(r->max_power_w, 200, 0);
  assert_near(r->energy_j, 62727.5, 1e-9);
  assert_near(r->time_s, 431, 1e-9);
  assert_near(r->baseline_energy_j, 18000, 1e-9);
  assert_near(r->baseline_time_s, 100, 1e-9);
  assert_int_equal(r->oracle_bs, 8);
  assert_int_equal(r->oracle_power_limit_w, 100);
  assert_near(r->oracle_energy_j, 5040, 1e-9);
  assert_near(r->energy_savings_pct, 100.0 * (1 - 62727.5 / 72000.0), 1e-9);
  assert_near(r->time_change_pct, 100.0 * (1 - 431.0 / 400.0), 1e-9);
  char *json;
  assert_zeus_ok(zeus_simulate_result_json(r, true, &json));
  assert_non_null(strstr(json, "\"history\":[{\"recurrence\":1,\"try\":1,\"batch_size\":16,\"power_limit_w\":200"));
  assert_non_null(strstr(json, "\"oracle_per_recurrence\":{\"batch_size\":8,\"power_limit_w\":100.0,"
                                    "\"energy_j\":5040.0,"));
  assert_non_null(strstr(json, "\"total\":{\"energy_j\":62727.5,\"time_s\":431.0,"));
  assert_non_null(strstr(json, "\"baseline_per_recurrence\":{\"batch_size\":16,\"power_limit_w\":200.0,"
                                    "\"energy_j\":18000.0,\"time_s\":100.0,"));
  assert_non_null(strstr(json, "\"energy_saved_pct\":"));
  assert_non_null(strstr(json, "\"time_saved_pct\":"));
  zeus_free(json);
  zeus_simulate_result_free(r);
  zeus_trace_close(t);
}

static void simulate_try_that_cannot_run_an_epoch_has_no_history(void **state) {
  (void)state;
  char dir[256];
  write_trace(dir, sizeof dir, "1");
  zeus_trace *t;
  assert_zeus_ok(zeus_trace_open(&t, dir, "toy"));
  zeus_simulate_opts o;
  zeus_simulate_opts_init(&o);
  o.recurrences = 2;
  o.beta = 0.1;
  zeus_simulate_result *r;
  assert_zeus_ok(zeus_simulate(t, &TOY, &o, &r));
  /* Rec 2: bound 0.1 * 19156.25 = 1915.6 < 2030 (bs 8's epoch): try 1 cannot start; try 2 is 32,
   * which profiles during its one epoch and reaches the target. */
  const want w[] = {{1, 1, 16, 200, 10, 17812.5, 102.5, true}, {2, 2, 32, 200, 1, 875, 6.5, true}};
  check_history(r, w, 2);
  zeus_simulate_result_free(r);
  zeus_trace_close(t);
}

static void simulate_default_recurrences_and_default_replacement(void **state) {
  (void)state;
  char dir[256];
  write_trace(dir, sizeof dir, "nan");
  zeus_trace *t;
  assert_zeus_ok(zeus_trace_open(&t, dir, "toy"));
  zeus_trace_workload w = TOY;
  w.default_bs = 20; /* not in the traces: 16 is the largest below */
  zeus_simulate_result *r;
  assert_zeus_ok(zeus_simulate(t, &w, NULL, &r));
  assert_int_equal(r->default_bs, 16);
  assert_int_equal(r->recurrences, 2 * 3 * 2);
  assert_int_equal(r->history[0].batch_size, 16);
  long reached = 0;
  for (size_t i = 0; i < r->history_len; i++) reached += r->history[i].reached;
  assert_int_equal(reached, r->recurrences);
  zeus_simulate_result_free(r);
  w.default_bs = 4;
  assert_zeus_err(zeus_simulate(t, &w, NULL, &r), ZEUS_EINVAL, "no batch size at or below the default 4");
  w = TOY;
  w.dataset = "nope";
  assert_zeus_err(zeus_simulate(t, &w, NULL, &r), ZEUS_EINVAL, "no batch size is in both");
  w = TOY;
  w.default_bs = 32; /* never reaches: the first recurrence must converge */
  assert_zeus_err(zeus_simulate(t, &w, NULL, &r), ZEUS_ESTATE, "never reaches the target");
  zeus_simulate_opts o;
  zeus_simulate_opts_init(&o);
  o.eta = 1.5;
  assert_zeus_err(zeus_simulate(t, &TOY, &o, &r), ZEUS_EINVAL, "eta");
  zeus_simulate_opts_init(&o);
  o.beta = 0;
  assert_zeus_err(zeus_simulate(t, &TOY, &o, &r), ZEUS_EINVAL, "beta");
  zeus_trace_close(t);
}

static void simulate_bad_trace_files_are_named(void **state) {
  (void)state;
  char dir[256], path[512];
  write_trace(dir, sizeof dir, "nan");
  zeus_trace *t;
  assert_zeus_err(zeus_trace_open(&t, dir, "h100"), ZEUS_ENOENT, "summary_power_h100.csv");
  assert_zeus_err(zeus_trace_open(&t, dir, "../x"), ZEUS_EINVAL, "GPU");
  snprintf(path, sizeof path, "%s/summary_power_bad.csv", dir);
  zeus_test_write_file(path,
                       "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
                       "d,n,16,sgd,200,ten,180\n");
  assert_zeus_err(zeus_trace_open(&t, dir, "bad"), ZEUS_EPARSE, "summary_power_bad.csv:2");
  snprintf(path, sizeof path, "%s/summary_power_nocol.csv", dir);
  zeus_test_write_file(path, "dataset,network,batch_size,optimizer,power_limit,time_per_epoch\nd,n,16,sgd,200,1\n");
  assert_zeus_err(zeus_trace_open(&t, dir, "nocol"), ZEUS_EPARSE, "average_power");
  snprintf(path, sizeof path, "%s/summary_power_neg.csv", dir);
  zeus_test_write_file(path,
                       "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n"
                       "d,n,-16,sgd,200,10,180\n");
  assert_zeus_err(zeus_trace_open(&t, dir, "neg"), ZEUS_EPARSE, "positive");
}

/* ---- the NSDI '23 traces ---- */

static void simulate_v100_six_workloads_save_energy(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/nsdi23-trace", zeus_test_data_dir());
  zeus_trace *t;
  assert_zeus_ok(zeus_trace_open(&t, dir, "v100"));
  const zeus_trace_workload *six;
  size_t n = zeus_trace_default_workloads(&six);
  assert_int_equal(n, 6);
  for (size_t i = 0; i < n; i++) {
    zeus_simulate_result *r;
    assert_zeus_ok(zeus_simulate(t, &six[i], NULL, &r));
    print_message("%-14s %-18s energy saved %6.2f %%, time saved %6.2f %%, %zu tries\n", six[i].dataset,
                  six[i].network, r->energy_savings_pct, r->time_change_pct, r->history_len);
    if (!(r->energy_savings_pct > 0))
      fail_msg("%s/%s: energy savings %.2f %%, expected > 0", six[i].dataset, six[i].network, r->energy_savings_pct);
    assert_int_equal(r->recurrences, (long)(2 * r->num_batch_sizes * r->num_power_limits));
    assert_true(r->history_len >= (size_t)r->recurrences);
    assert_true(r->history[0].batch_size == r->default_bs);
    zeus_simulate_result_free(r);
  }
  zeus_trace_close(t);
}

static void simulate_same_seed_same_result(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/nsdi23-trace", zeus_test_data_dir());
  zeus_trace *t;
  assert_zeus_ok(zeus_trace_open(&t, dir, "v100"));
  const zeus_trace_workload *six;
  zeus_trace_default_workloads(&six);
  zeus_simulate_opts o;
  zeus_simulate_opts_init(&o);
  o.seed = 7;
  char *a, *b, *c;
  zeus_simulate_result *r;
  assert_zeus_ok(zeus_simulate(t, &six[0], &o, &r));
  assert_zeus_ok(zeus_simulate_result_json(r, true, &a));
  zeus_simulate_result_free(r);
  assert_zeus_ok(zeus_simulate(t, &six[0], &o, &r));
  assert_zeus_ok(zeus_simulate_result_json(r, true, &b));
  zeus_simulate_result_free(r);
  o.seed = 8;
  assert_zeus_ok(zeus_simulate(t, &six[0], &o, &r));
  assert_zeus_ok(zeus_simulate_result_json(r, true, &c));
  zeus_simulate_result_free(r);
  assert_string_equal(a, b);
  assert_string_not_equal(a, c);
  zeus_free(a);
  zeus_free(b);
  zeus_free(c);
  zeus_trace_close(t);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(simulate_toy_trace_matches_hand_computation),
      cmocka_unit_test(simulate_try_that_cannot_run_an_epoch_has_no_history),
      cmocka_unit_test(simulate_default_recurrences_and_default_replacement),
      cmocka_unit_test(simulate_bad_trace_files_are_named),
      cmocka_unit_test(simulate_v100_six_workloads_save_energy),
      cmocka_unit_test(simulate_same_seed_same_result),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
