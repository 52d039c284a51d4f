/* The Perseus client in whole pipeline jobs against a real server on loopback: every rank of
 * every scheduler's job runs each instruction at the clock the server's schedule gives it
 * (tests/pfo_client_testutil.h: ranks as threads on their own fake NVML copies). */
#define PFO_CLIENT_TESTUTIL_SERVER
#include "pfo_client_testutil.h"

static void client_pp4_all_max_frequency_clocks_match_schedule(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  harness h;
  harness_setup(&h, 1, 4, 1, 4, 6, 2, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  for (int r = 0; r < 4; r++) {
    gpu_log lg;
    read_log(r, &lg);
    assert_int_equal(lg.nsets, 1); /* locked at 1740 once, never changed */
  }
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

/* Forwards alternate between two clocks by microbatch, backwards run at one clock per stage
 * (supported clocks: 1740 - 15 k). */
static int pp4_plan_freq(int stage, size_t i, int microbatch, const char *instruction) {
  (void)i;
  return instruction[0] == 'f' ? 1500 - 60 * stage + 15 * (microbatch % 2) : 1650 - 45 * stage;
}

static void client_pp4_point_solution_clocks_match_plan(void **state) {
  (void)state;
  fresh_dir();
  enum { PP = 4, MB = 4 };
  int freqs[MAXW][2 * PLAN_MAX_MB];
  char args[700];
  write_1f1b_plan("freqs_pipeline_00007.py", PP, MB, pp4_plan_freq, freqs, args, sizeof args);
  zeus_pfo_server *s = start_server("PointSolution", args, -1, NULL);
  harness h;
  harness_setup(&h, 1, PP, 1, MB, 6, 3, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  /* The plan itself, read independently of the dumps. */
  for (int r = 0; r < PP; r++)
    for (size_t i = 0; i < h.r[r].pr.n; i++) assert_int_equal(h.r[r].seen[i], freqs[r][i]);
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

static void client_pp4_instruction_profiler_writes_csv_of_measured_instructions(void **state) {
  (void)state;
  fresh_dir();
  enum { PP = 4, MB = 3, K = 2, NF = 10 };
  /* Round 0 warms up at 1740; rounds 1..10 step down 1740..1605; then all stages at 1740. */
  zeus_pfo_server *s = start_server("InstructionProfiler",
                                    "{\"warmup_iters\": 0, \"min_frequency\": 1605, \"patience\": 100}", -1, NULL);
  harness h;
  harness_setup(&h, 1, PP, 1, MB, (NF + 2) * K, K, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  /* The rounds stepped down as the profiler says: round q (1..10) ran at 1755 - 15 q. */
  for (int r = 0; r < PP; r++)
    for (int q = 0; q < NF + 2; q++) {
      unsigned want = q == 0 || q == NF + 1 ? 1740 : (unsigned)(1755 - 15 * q);
      assert_int_equal(h.r[r].seen[(size_t)q * K * h.r[r].pr.n], want);
    }
  /* The instruction CSV: every (rank, instruction, frequency), with the model's exact time and
   * the energy to the counter's millijoule. */
  char csv[800];
  snprintf(csv, sizeof csv, "%s/instruction_profile.csv", h.r[0].job_dir);
  FILE *f = fopen(csv, "r");
  if (!f) fail_msg("no instruction CSV at %s", csv);
  char line[512];
  assert_non_null(fgets(line, sizeof line, f));
  assert_string_equal(line, "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n");
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    int rank, dp, pp, tp, stage;
    char inst[32];
    unsigned freq;
    double t, e;
    assert_int_equal(sscanf(line, "%d,%d,%d,%d,%d,%31[^,],%u,%lf,%lf", &rank, &dp, &pp, &tp, &stage, inst, &freq, &t, &e),
                     9);
    assert_int_equal(stage, pp);
    assert_int_equal(rank, pp);
    double units = strcmp(inst, "forward") == 0 ? 1 : 2;
    double want_t = model_time(stage, PP, units, freq);
    assert_near(t, want_t, 1e-9);
    assert_near(e, want_t * model_power(freq), 1.1e-3);
    rows++;
  }
  fclose(f);
  assert_int_equal(rows, PP * 2 * NF);
  /* A ProfilingResult as posted: K iterations, each instruction's values per iteration. */
  zeus_pfo_prof_result *pr;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_prof(h.r[0].job_dir, 3, &pr, &n));
  assert_int_equal(n, PP);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(pr[i].n_iter_time, K);
    assert_int_equal(pr[i].n_time_breakdown, 2);
    for (size_t b = 0; b < 2; b++) {
      assert_int_equal(pr[i].time_breakdown[b].n_iters, K);
      assert_int_equal(pr[i].time_breakdown[b].offsets[1], MB); /* MB forwards (backwards) per iteration */
    }
    /* Every rank's iteration lasts as long: the flush at the end of each iteration. */
    assert_near(pr[i].iter_time[0], pr[0].iter_time[0], 1e-12);
  }
  zeus_pfo_prof_results_free(pr, n);
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

/* Stage 0 speeds up instruction by instruction, stage 1 slows down. */
static int stage_plan_freq(int stage, size_t i, int microbatch, const char *instruction) {
  (void)microbatch, (void)instruction;
  return stage == 0 ? 1200 + 30 * (int)i : 1605 - 15 * (int)i;
}

static void client_3d_2x2x2_every_rank_of_a_stage_runs_the_stage_plan(void **state) {
  (void)state;
  fresh_dir();
  enum { PP = 2, MB = 2 };
  int freqs[MAXW][2 * PLAN_MAX_MB];
  char args[700];
  write_1f1b_plan("stage_plan.py", PP, MB, stage_plan_freq, freqs, args, sizeof args);
  zeus_pfo_server *s = start_server("PointSolution3D", args, -1, NULL);
  harness h;
  harness_setup(&h, 2, PP, 2, MB, 4, 2, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  for (int r = 0; r < h.world; r++) {
    fake_rank *f = &h.r[r];
    for (long it = 0; it < h.iters; it++)
      for (size_t i = 0; i < f->pr.n; i++)
        if (f->seen[it * f->pr.n + i] != (unsigned)freqs[f->pr.pp][i])
          fail_msg("rank %d (dp %d, pp %d, tp %d), iteration %ld, instruction %zu: %u MHz, the stage plan says %d", r,
                   f->pr.dp, f->pr.pp, f->pr.tp, it, i, f->seen[it * f->pr.n + i], freqs[f->pr.pp][i]);
  }
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(client_pp4_all_max_frequency_clocks_match_schedule),
      cmocka_unit_test(client_pp4_point_solution_clocks_match_plan),
      cmocka_unit_test(client_pp4_instruction_profiler_writes_csv_of_measured_instructions),
      cmocka_unit_test(client_3d_2x2x2_every_rank_of_a_stage_runs_the_stage_plan),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
