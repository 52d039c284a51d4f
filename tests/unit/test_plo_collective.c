/* The power-limit optimizer across ranks through a collective (simulated in-process): energy
 * summed, time maxed, one optimum; disagreements and failures are errors. */
#include "plo_testutil.h"

/* Pretends to be rank `rank` of 2 whose peer measured the same energy and 1.5x the time, and
 * whose peer (rank 0) chooses `bcast_w` when nonzero. */
typedef struct fake_peer {
  int sum_calls, max_calls, bcast_calls;
  double max_shift_mw;   /* added to the peer's maximum power limit in the range agreement */
  double peer_has_file;  /* the peer's answer to "does the profile file exist" */
  unsigned bcast_w;
  int fail_after;        /* > 0: the fail_after-th allreduce fails with ZEUS_ENET */
} fake_peer;

static int peer_allreduce(void *ctx, double *v, size_t n, zeus_reduce_op op) {
  fake_peer *fp = ctx;
  int call = fp->sum_calls + fp->max_calls + 1;
  if (fp->fail_after > 0 && call >= fp->fail_after) return zeus_set_errmsg(ZEUS_ENET, "peer unreachable");
  if (op == ZEUS_REDUCE_SUM) {
    fp->sum_calls++;
    if (n == 2) { /* open: GPUs and whether the profile file exists */
      v[0] *= 2;
      v[1] += fp->peer_has_file;
    } else {
      for (size_t i = 0; i < n; i++) v[i] *= 2;
    }
  } else {
    fp->max_calls++;
    if (n == 4) { /* open: max, -max, min, -min of the range */
      double peer[4] = {v[0] + fp->max_shift_mw, -(v[0] + fp->max_shift_mw), v[2], -v[2]};
      for (size_t i = 0; i < 4; i++) v[i] = fmax(v[i], peer[i]);
    } else {
      for (size_t i = 0; i < n; i++) v[i] = fmax(v[i], v[i] * 1.5);
    }
  }
  return ZEUS_OK;
}

static int peer_broadcast(void *ctx, void *buf, size_t len, int root) {
  fake_peer *fp = ctx;
  fp->bcast_calls++;
  assert_int_equal(root, 0);
  assert_int_equal(len, sizeof(double));
  if (fp->bcast_w) {
    double w = fp->bcast_w;
    memcpy(buf, &w, sizeof w);
  }
  return ZEUS_OK;
}

static void plo_collective_sums_energy_maxes_time_and_agrees(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t nfiles = list_profiles(paths, 16);
  scratch s;
  scratch_init(&s);
  for (size_t fi = 0; fi < nfiles; fi++) {
    ref_profile r;
    ref_load(paths[fi], &r);
    zeus_sim_config *cfg;
    assert_zeus_ok(zeus_sim_config_load(&cfg, r.path, 0));
    zeus_devices *d = open_sim_cfg(cfg);
    zeus_sim_config_free(cfg);
    zeus_monitor *m = open_monitor(d);
    for (int rank = 0; rank < 2; rank++) {
      fake_peer fp = {0};
      zeus_collective c = {.ctx = &fp, .rank = rank, .world_size = 2, .allreduce = peer_allreduce,
                           .broadcast = peer_broadcast};
      zeus_plo_opts o;
      zeus_plo_opts_init(&o);
      o.collective = &c;
      o.warmup_steps = 2;
      o.profile_steps = 40;
      o.profile_path = s.profile;
      unlink(s.profile);
      zeus_plo *p;
      assert_zeus_ok(zeus_plo_open(&p, m, &o));
      work w = {.node = zeus_devices_sim_node(d), .ngpu = r.ngpu};
      one_epoch(p, &w, 2 + (long)r.n * 42 + 3);
      assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
      /* Both ranks' figures: energy summed (x2), time the larger (x1.5). */
      ref_profile both = r;
      for (size_t i = 0; i < r.n; i++) {
        both.energy_j[i] *= 2;
        both.time_s[i] *= 1.5;
      }
      const zeus_plo_measurement *meas;
      assert_int_equal(zeus_plo_measurements(p, &meas), r.n);
      for (size_t i = 0; i < r.n; i++) {
        assert_near(meas[i].energy_j, both.energy_j[i], 0.004 * r.ngpu);
        assert_near(meas[i].time_s, both.time_s[i], 1e-9 * both.time_s[i]);
      }
      /* The default selector's world size counts the peer's GPUs too. */
      unsigned want = ref_optimum(&both, REF_COST, 0.5, 2 * r.ngpu);
      assert_int_equal(zeus_plo_optimal_power_limit_w(p), want);
      assert_int_equal(fp.sum_calls, 1 + (int)r.n);
      /* + 2: robust profiling agrees on the step-time spread after the first window and after
       * the sweep (noiseless here, so nothing else changes). */
      assert_int_equal(fp.max_calls, 1 + (int)r.n + 2);
      assert_int_equal(fp.bcast_calls, 1);
      /* Only rank 0 writes the profile. */
      assert_int_equal(access(s.profile, F_OK) == 0, rank == 0);
      zeus_plo_close(p);
    }
    zeus_monitor_close(m);
    zeus_devices_close(d);
  }
  scratch_free(&s);
}

static void plo_collective_disagreements_and_failures_are_errors(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  fake_peer fp = {0};
  zeus_collective c = {
      .ctx = &fp, .rank = 1, .world_size = 2, .allreduce = peer_allreduce, .broadcast = peer_broadcast};
  o.collective = &c;
  zeus_plo *p = NULL;
  /* The peer's GPUs have another range. */
  fp.max_shift_mw = 25000;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "power-limit ranges differ across ranks");
  /* The peer sees no profile file where this rank sees one. */
  fp = (fake_peer){0};
  const zeus_plo_measurement one[] = {{300, 10, 1}, {200, 5, 1.2}};
  assert_zeus_ok(zeus_plo_profile_save(s.profile, one, 2));
  o.profile_path = s.profile;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "exists on 1 of 2 ranks");
  /* Rank 0's choice wins when loading too. */
  fp = (fake_peer){.peer_has_file = 1, .bcast_w = 200};
  zeus_selector time_sel;
  zeus_selector_time(&time_sel);
  o.selector = &time_sel; /* this rank alone would choose 300 W */
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  assert_int_equal(zeus_plo_optimal_power_limit_w(p), 200);
  assert_int_equal(zeus_plo_current_power_limit_w(p), 200);
  zeus_plo_close(p);
  /* A failing collective during profiling is returned, naming what was being combined. */
  o.profile_path = NULL;
  o.selector = NULL;
  o.wait_steps = 0;
  o.warmup_steps = 0;
  o.profile_steps = 1;
  fp = (fake_peer){.fail_after = 3};
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  assert_zeus_ok(zeus_plo_on_step_begin(p)); /* 300 W, window begins */
  assert_zeus_err(zeus_plo_on_step_begin(p), ZEUS_ENET, "peer unreachable");
  assert_non_null(strstr(zeus_errmsg(), "combining the measurement of 300 W across ranks"));
  zeus_plo_close(p);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 300000);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  scratch_free(&s);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plo_collective_sums_energy_maxes_time_and_agrees),
      cmocka_unit_test(plo_collective_disagreements_and_failures_are_errors),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
