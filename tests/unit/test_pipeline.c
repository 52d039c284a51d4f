/* The synchronous 1F1B order (zeus/pipeline.h): its closed form, and that the frontier solver,
 * the Perseus schedulers and examples/pipeline_sim.h all take their order from it. */
#include "test_util.h"

#include <zeus.h>
#include <zeus/config.h>

#include "frontier/frontier.h"
#if ZEUS_HAVE_PFO_CLIENT
#include "../../examples/pipeline_sim.h"
#endif
#if ZEUS_HAVE_PFO_SERVER
#include "pfo_server/sched.h"
#endif

static char kind_letter(zeus_pipeline_instr k) { return k == ZEUS_PIPELINE_FORWARD ? 'F' : 'B'; }

static void pipeline_1f1b_closed_form_matches_the_textbook_order(void **state) {
  (void)state;
  /* 3 stages, 5 microbatches (tests/data/frontier/order_3x5.txt). */
  static const char *const want[3] = {"F0 F1 F2 B0 F3 B1 F4 B2 B3 B4", "F0 F1 B0 F2 B1 F3 B2 F4 B3 B4",
                                      "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4"};
  for (int s = 0; s < 3; s++) {
    char got[64] = "";
    size_t len = 0;
    for (int k = 0; k < 10; k++) {
      zeus_pipeline_instr kd;
      int mb;
      assert_zeus_ok(zeus_pipeline_1f1b_instr(3, s, 5, k, &kd, &mb));
      len += (size_t)snprintf(got + len, sizeof got - len, "%s%c%d", k ? " " : "", kind_letter(kd), mb);
    }
    assert_string_equal(got, want[s]);
  }
  /* Fewer microbatches than stages: stage 0 of 4 warms up with both forwards. */
  zeus_pipeline_instr kd;
  int mb;
  assert_zeus_ok(zeus_pipeline_1f1b_instr(4, 0, 2, 1, &kd, &mb));
  assert_int_equal(kd, ZEUS_PIPELINE_FORWARD);
  assert_int_equal(mb, 1);
  assert_zeus_ok(zeus_pipeline_1f1b_instr(4, 0, 2, 2, &kd, NULL));
  assert_int_equal(kd, ZEUS_PIPELINE_BACKWARD);
  assert_string_equal(zeus_pipeline_instr_name(ZEUS_PIPELINE_FORWARD), "forward");
  assert_string_equal(zeus_pipeline_instr_name(ZEUS_PIPELINE_BACKWARD), "backward");
  assert_null(zeus_pipeline_instr_name((zeus_pipeline_instr)7));
}

static void pipeline_1f1b_rejects_arguments_out_of_range(void **state) {
  (void)state;
  zeus_pipeline_instr kd = ZEUS_PIPELINE_BACKWARD;
  int mb = -7;
  assert_zeus_err(zeus_pipeline_1f1b_instr(0, 0, 4, 0, &kd, &mb), ZEUS_EINVAL, "stages is 0");
  assert_zeus_err(zeus_pipeline_1f1b_instr(4, 4, 4, 0, &kd, &mb), ZEUS_EINVAL, "stage is 4, expected 0..3");
  assert_zeus_err(zeus_pipeline_1f1b_instr(4, 0, 0, 0, &kd, &mb), ZEUS_EINVAL, "microbatches is 0");
  assert_zeus_err(zeus_pipeline_1f1b_instr(4, 0, 4, 8, &kd, &mb), ZEUS_EINVAL, "instruction 8, expected 0..7");
  assert_zeus_err(zeus_pipeline_1f1b_instr(4, 0, 4, -1, &kd, &mb), ZEUS_EINVAL, "instruction -1");
  assert_zeus_err(zeus_pipeline_1f1b_instr(4, 0, 4, 0, NULL, &mb), ZEUS_EINVAL, "kind");
  assert_int_equal(kd, ZEUS_PIPELINE_BACKWARD); /* untouched on error */
  assert_int_equal(mb, -7);
}

/* The solver's DAG, AllMaxFrequency (through the scheduler table, as the server runs it) and
 * pipeline_sim give, for every stage, the same 2M instructions as zeus_pipeline_1f1b_instr. A
 * build without the Perseus server or client (cmake/components.cmake) compares what it has. */
static void solver_schedulers_and_pipeline_sim_share_one_1f1b_order(void **state) {
  (void)state;
  for (int S = 1; S <= 6; S++) {
    for (int M = 1; M <= 8; M++) {
      zeus__fdag dag;
      assert_zeus_ok(zeus__fdag_build(&dag, S, M));
#if ZEUS_HAVE_PFO_SERVER
      int freqs[] = {1410};
      zeus_pfo_rank_info ranks[6];
      for (int r = 0; r < S; r++)
        ranks[r] = (zeus_pfo_rank_info){.rank = r, .pp_rank = r, .available_frequencies = freqs,
                                        .n_available_frequencies = 1};
      zeus_pfo_job_info job = {.pp_degree = S, .dp_degree = 1, .tp_degree = 1, .world_size = S};
      json_t *args = json_pack("{si}", "num_microbatches", M);
      zeus__sched *sched;
      assert_zeus_ok(zeus__sched_create(&sched, "AllMaxFrequency", args, &job, ranks, (size_t)S, NULL, false, NULL));
      const zeus_pfo_schedule *cur;
      size_t ncur;
      assert_zeus_ok(zeus__sched_current(sched, &cur, &ncur));
      assert_int_equal(ncur, S);
#endif
      for (int s = 0; s < S; s++) {
#if ZEUS_HAVE_PFO_CLIENT
        const char *names[16];
        int sim_mb[16];
        assert_int_equal(psim_order(S, s, M, names, sim_mb), 2 * M);
#endif
#if ZEUS_HAVE_PFO_SERVER
        assert_int_equal(cur[s].n_frequencies, 2 * M);
#endif
        for (int k = 0; k < 2 * M; k++) {
          zeus_pipeline_instr kd;
          int mb;
          assert_zeus_ok(zeus_pipeline_1f1b_instr(S, s, M, k, &kd, &mb));
          const char *name = zeus_pipeline_instr_name(kd);
          int v = zeus__fdag_node(&dag, s, k);
          const char *solver = dag.kind[v] == ZEUS_FRONTIER_FORWARD ? "forward" : "backward";
          if (strcmp(solver, name) != 0 || dag.mb[v] != mb)
            fail_msg("S %d M %d stage %d instruction %d: solver %s %d, zeus_pipeline_1f1b_instr %s %d", S, M, s, k,
                     solver, dag.mb[v], name, mb);
#if ZEUS_HAVE_PFO_SERVER
          if (strcmp(cur[s].frequencies[k].instruction, name) != 0)
            fail_msg("S %d M %d stage %d instruction %d: AllMaxFrequency '%s', zeus_pipeline_1f1b_instr '%s'", S, M, s,
                     k, cur[s].frequencies[k].instruction, name);
#endif
#if ZEUS_HAVE_PFO_CLIENT
          if (strcmp(names[k], name) != 0 || sim_mb[k] != mb)
            fail_msg("S %d M %d stage %d instruction %d: pipeline_sim %s %d, zeus_pipeline_1f1b_instr %s %d", S, M, s,
                     k, names[k], sim_mb[k], name, mb);
#endif
        }
      }
#if ZEUS_HAVE_PFO_SERVER
      zeus__sched_destroy(sched);
      json_decref(args);
#endif
      zeus__fdag_free(&dag);
    }
  }
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pipeline_1f1b_closed_form_matches_the_textbook_order),
      cmocka_unit_test(pipeline_1f1b_rejects_arguments_out_of_range),
      cmocka_unit_test(solver_schedulers_and_pipeline_sim_share_one_1f1b_order),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
