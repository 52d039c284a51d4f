/* The Perseus client on GPUs that behave like the measured H100 (ZEUS_SIM_HARDWARE=h100: a 100 ms
 * sensor tick, 3.3 ms counter reads, clock locks that return after 11.4 ms and take effect 8.1 ms
 * after the call starts), on the wall clock (issue 25):
 *   - instruction profiling costs the training thread almost nothing (timestamps only), and the
 *     per-class energies fitted from the counter's ticks match the ground truth within 5 %, times
 *     within 1 %; reading the counter around every instruction costs ~6.6 ms per instruction;
 *   - clocks are issued ahead by the lock latency, so >= 90 % of instruction time runs at the
 *     planned clock (by the simulated GPU's ground truth and by the client's own accounting);
 *     setting them at each instruction's start, as before, gives ~83 % by the client's account;
 *   - a lock call that hangs never stalls the training thread; it shows as "clock late";
 *   - the merge rule for instructions shorter than the latency (ideal GPU, virtual clock). */
#define PFO_CLIENT_TESTUTIL_SERVER
#include "pfo_client_testutil.h"

#include <math.h>

#define NI 8 /* instructions per iteration: forward, backward, ... */
#define F_MHZ 1740
#define B_MHZ 1200

static const char *const kind_name[2] = {"forward", "backward"};

/* A one-rank PointSolution server: NI instructions alternating forward@F_MHZ, backward@B_MHZ. */
static zeus_pfo_server *alternating_server(char *url, size_t len) {
  char plan[1024];
  size_t k = (size_t)snprintf(plan, sizeof plan, "[[");
  for (int i = 0; i < NI; i++)
    k += (size_t)snprintf(plan + k, sizeof plan - k, "%s(\"%s\", %d)", i ? ", " : "", kind_name[i % 2],
                          i % 2 ? B_MHZ : F_MHZ);
  snprintf(plan + k, sizeof plan - k, "]]\n");
  return start_plan_server(plan, url, len);
}

/* A simulated GPU on the wall clock with hardware profile `hw` ("h100" or a file). A forward is
 * 35 ms at 1740 MHz, a backward ~94 ms at 1200 MHz. */
static zeus_devices *open_hw(const char *hw) {
  zeus_sim_gpu_config g;
  memset(&g, 0, sizeof g);
  g.model = ZEUS_SIM_DVFS;
  g.dvfs.time_per_unit_s = 0.035;
  assert_zeus_ok(zeus_sim_hardware_profile(hw, &g.hw));
  zeus_sim_config cfg = {.num_gpus = 1, .gpus = &g, .clock = ZEUS_SIM_CLOCK_WALL};
  zeus_devices_opts o = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

typedef struct truth_round {
  double t[2], e[2];  /* summed ground-truth time and energy per kind */
  long n[2];
  double at_plan, busy; /* work time at the planned clock, all work time */
  double hook_ns[4 * NI * 8];
  int nhooks;
} truth_round;

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Runs `iters` iterations; the last `rec` of them are recorded in *tr. Each instruction's work runs
 * in pieces of 0.1 units (3.5 ms at 1740 MHz), each at the clock in effect when it starts, so a
 * clock that arrives during an instruction shows. */
static void run_iters(zeus_pfo_optimizer *opt, zeus_devices *d, int iters, int rec, truth_round *tr) {
  zeus_sim_node *node = zeus_devices_sim_node(d);
  memset(tr, 0, sizeof *tr);
  for (int it = 0; it < iters; it++) {
    bool on = it >= iters - rec;
    assert_zeus_ok(zeus_pfo_on_step_begin(opt));
    for (int i = 0; i < NI; i++) {
      int kind = i % 2;
      unsigned want = kind ? B_MHZ : F_MHZ;
      uint64_t h0 = zeus_monotonic_ns();
      assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, kind_name[kind]));
      uint64_t h1 = zeus_monotonic_ns();
      double t0 = zeus_sim_now(node), e0;
      assert_zeus_ok(zeus_sim_true_energy(node, 0, &e0));
      for (int p = 0; p < (kind ? 20 : 10); p++) {
        unsigned clk;
        assert_zeus_ok(zeus_sim_operating_point(node, 0, &clk, NULL));
        double el;
        assert_zeus_ok(zeus_sim_work(node, 0, 0.1, &el));
        if (on) {
          tr->busy += el;
          if (clk == want) tr->at_plan += el;
        }
      }
      double t1 = zeus_sim_now(node), e1;
      assert_zeus_ok(zeus_sim_true_energy(node, 0, &e1));
      uint64_t h2 = zeus_monotonic_ns();
      assert_zeus_ok(zeus_pfo_on_instruction_end(opt, kind_name[kind]));
      uint64_t h3 = zeus_monotonic_ns();
      if (on) {
        tr->t[kind] += t1 - t0;
        tr->e[kind] += e1 - e0;
        tr->n[kind]++;
        if (tr->nhooks < (int)(sizeof tr->hook_ns / sizeof tr->hook_ns[0]))
          tr->hook_ns[tr->nhooks++] = (double)((h1 - h0) + (h3 - h2));
      }
    }
    assert_zeus_ok(zeus_pfo_on_step_end(opt));
  }
  qsort(tr->hook_ns, (size_t)tr->nhooks, sizeof tr->hook_ns[0], cmp_d);
}

static zeus_pfo_optimizer *open_rank(zeus_devices *d, const char *url, long k, int energy, double latency) {
  zeus_pfo_optimizer_opts o;
  solo_opts(&o, url, k, d);
  o.no_signal_handlers = true;
  o.instruction_energy = energy;
  o.clock_latency_s = latency;
  zeus_pfo_optimizer *opt;
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  return opt;
}

/* The recorded round's per-class fit against the ground truth: prints each class and returns
 * whether every time is within 1 % and every energy within 5 %. */
static bool fit_matches_truth(const zeus_pfo_optimizer *opt, const truth_round *tr) {
  zeus_pfo_class_stats cs[4];
  assert_int_equal(zeus_pfo_last_round_classes(opt, cs, 4), 2);
  bool ok = true;
  for (int k = 0; k < 2; k++) {
    assert_string_equal(cs[k].instruction, kind_name[k]);
    assert_int_equal(cs[k].count, tr->n[k]);
    double t = tr->t[k] / (double)tr->n[k], e = tr->e[k] / (double)tr->n[k];
    double et = fabs(cs[k].mean_time_s - t) / t, ee = fabs(cs[k].mean_energy_j - e) / e;
    print_message("%s: time %.5f s (truth %.5f, %.2f %%), energy %.4f J (truth %.4f, %.2f %%), at plan %.1f %%\n",
                  kind_name[k], cs[k].mean_time_s, t, 100 * et, cs[k].mean_energy_j, e, 100 * ee,
                  100 * cs[k].planned_clock_fraction);
    ok = ok && et <= 0.01 && ee <= 0.05;
  }
  return ok;
}

/* A machine so loaded that this thread's 3.5 ms sleeps overshoot by 5 % or more (the forward's
 * pieces take 35 ms of work at 1740 MHz) also starves the follower thread, whose tick times then
 * carry that delay: the wall-clock figures mean nothing there. */
static bool too_loaded(const truth_round *tr) {
  double fwd_busy = tr->t[0] / (double)tr->n[0];
  if (fwd_busy <= 1.05 * 0.0355) return false;
  print_message("the machine is too loaded for wall-clock timing (a forward took %.1f ms for 35.0 ms of work)\n",
                1e3 * fwd_busy);
  return true;
}

/* Items 1 and 2 on the h100 profile: fitted energies, the hooks' cost, clocks in time. */
static void h100_fitted_energy_is_right_hooks_cost_nothing_and_clocks_arrive_in_time(void **state) {
  (void)state;
  fresh_dir();
  char url[64];
  zeus_pfo_server *s = alternating_server(url, sizeof url);
  zeus_devices *d = open_hw("h100");
  /* AUTO finds the 3.3 ms counter read slow and fits; the latency comes from the profile. */
  zeus_pfo_optimizer *opt = open_rank(d, url, 6, ZEUS_PFO_ENERGY_AUTO, 0);
  assert_near(zeus_pfo_controller_latency(zeus_pfo_optimizer_controller(opt)), 8.1e-3, 1e-9);
  truth_round tr;
  run_iters(opt, d, 12, 6, &tr); /* round 0 learns the durations; round 1 (~3 s, ~30 ticks) is recorded */
  zeus_pfo_round_stats st;
  zeus_pfo_last_round(opt, &st);
  assert_int_equal(st.round, 1);
  assert_true(st.energy_fitted);
  /* A brief burst of load that this thread's pace does not show can still delay the follower's
   * view of a few ticks (a fresh-machine run of make check once fitted a backward 5.4 % off): one
   * more round is recorded, and that one must match. A fit that is wrong, not unlucky, misses in
   * both. */
  bool ok = !too_loaded(&tr) && fit_matches_truth(opt, &tr);
  if (!ok) {
    print_message("round 1 missed; recording round 2\n");
    run_iters(opt, d, 6, 6, &tr);
    zeus_pfo_last_round(opt, &st);
    assert_int_equal(st.round, 2);
    if (too_loaded(&tr)) {
      zeus_pfo_optimizer_close(opt);
      zeus_devices_close(d);
      zeus_pfo_server_close(s);
      print_message("SKIPPED: the machine is too loaded for wall-clock timing\n");
      skip();
    }
    assert_true(fit_matches_truth(opt, &tr));
  }
  double truth_frac = tr.at_plan / tr.busy, med = tr.hook_ns[tr.nhooks / 2];
  print_message("at the planned clock: %.1f %% (ground truth), %.1f %% (client), %ld late; hooks median %.0f ns\n",
                100 * truth_frac, 100 * st.planned_clock_fraction, st.clock_late, med);
  assert_true(truth_frac >= 0.90);
  assert_true(st.planned_clock_fraction >= 0.90);
  /* The hooks' own cost: a pair <= 1 us on an idle machine (make bench), but a loaded one
   * preempts this thread inside them (a median of 114 us in a fresh-machine run of make check on
   * 2 cores). What this guards is that no hook reads the counter (3.3 ms a read, 6.8 ms a pair
   * around an instruction): 1 ms tells the two apart with room for the load. */
  assert_true(med <= 1e6);
  zeus_pfo_optimizer_close(opt);
  zeus_devices_close(d);
  zeus_pfo_server_close(s);
}

/* The client as it was: the counter read around every instruction (6.6 ms per instruction on the
 * caller's thread; ZEUS_MONITOR_ENERGY=raw, since issue 24's sampler otherwise follows a slow
 * counter for the READ meter) and each clock set when its instruction starts (~83 % at the planned
 * clock). */
static void h100_reading_around_instructions_costs_ms_and_late_clocks(void **state) {
  (void)state;
  fresh_dir();
  char url[64];
  zeus_pfo_server *s = alternating_server(url, sizeof url);
  zeus_devices *d = open_hw("h100");
  setenv("ZEUS_MONITOR_ENERGY", "raw", 1); /* the counter read at the bounds, not the monitor's sampler */
  zeus_pfo_optimizer *opt = open_rank(d, url, 2, ZEUS_PFO_ENERGY_READ, -1);
  unsetenv("ZEUS_MONITOR_ENERGY");
  truth_round tr;
  run_iters(opt, d, 4, 2, &tr);
  zeus_pfo_round_stats st;
  zeus_pfo_last_round(opt, &st);
  assert_false(st.energy_fitted);
  double truth_frac = tr.at_plan / tr.busy, med = tr.hook_ns[tr.nhooks / 2];
  print_message("as before: at the planned clock %.1f %% (truth), %.1f %% (client); hooks median %.2f ms\n",
                100 * truth_frac, 100 * st.planned_clock_fraction, med / 1e6);
  assert_true(med >= 6.5e6);
  /* The lock starts with the instruction and takes effect 8.1 ms later (the begin hook's own 3.3 ms
   * read delays the work, which hides part of it from the ground truth). */
  assert_true(truth_frac < 0.94);
  assert_true(st.planned_clock_fraction < 0.90);
  zeus_pfo_optimizer_close(opt);
  zeus_devices_close(d);
  zeus_pfo_server_close(s);
}

/* A lock call that hangs (an NVML stuck for 1.5 s): the hooks keep their cost, and the round
 * reports the clocks late. */
static void h100_a_hung_lock_call_is_clock_late_not_a_stalled_thread(void **state) {
  (void)state;
  fresh_dir();
  char path[512], url[64];
  snprintf(path, sizeof path, "%s/stuck.json", g_dir);
  zeus_test_write_file(path, "{\"base\": \"h100\", \"clock_lock_call_s\": 1.5}\n");
  zeus_pfo_server *s = alternating_server(url, sizeof url);
  zeus_devices *d = open_hw(path);
  zeus_pfo_optimizer *opt = open_rank(d, url, 2, ZEUS_PFO_ENERGY_AUTO, 0);
  truth_round tr;
  double t0 = zeus_monotonic_s();
  run_iters(opt, d, 2, 2, &tr);
  double took = zeus_monotonic_s() - t0, max_hook = tr.hook_ns[tr.nhooks - 1];
  zeus_pfo_round_stats st;
  zeus_pfo_last_round(opt, &st);
  print_message("stuck NVML: 2 iterations in %.2f s, slowest hook pair %.0f us, at the planned clock %.1f %%, %ld of "
                "%d late, %lu slow calls\n", took, max_hook / 1e3, 100 * st.planned_clock_fraction, st.clock_late,
                2 * NI, zeus_pfo_controller_late_calls(zeus_pfo_optimizer_controller(opt)));
  assert_true(max_hook < 5e6);          /* never the 1.5 s of the call */
  assert_true(took < 2 * 1.05 + 0.5);   /* the work's own ~1 s per iteration and the HTTP round trip */
  assert_true(st.clock_late >= NI);
  assert_true(st.planned_clock_fraction < 0.6);
  /* The hung call counts as slow once it returns. */
  assert_zeus_ok(zeus_pfo_controller_wait(zeus_pfo_optimizer_controller(opt), 10));
  assert_true(zeus_pfo_controller_late_calls(zeus_pfo_optimizer_controller(opt)) >= 1);
  zeus_pfo_optimizer_close(opt);
  zeus_devices_close(d);
  zeus_pfo_server_close(s);
}

/* The merge rule, on the ideal GPU on the virtual clock with a configured latency of 25 ms:
 * 10 ms instructions are merged three at a time and run at their highest clock (no change after
 * the first iteration here); 60 ms ones keep their own clocks (a change per instruction). */
static void instructions_shorter_than_the_latency_merge_at_the_higher_clock(void **state) {
  (void)state;
  for (int longer = 0; longer < 2; longer++) {
    fresh_dir();
    char url[64];
    zeus_pfo_server *s = alternating_server(url, sizeof url);
    zeus_devices *d = open_sim();
    zeus_sim_node *node = zeus_devices_sim_node(d);
    zeus_pfo_optimizer *opt = open_rank(d, url, 100, ZEUS_PFO_ENERGY_READ, 0.025);
    zeus_pfo_controller *ctl = zeus_pfo_optimizer_controller(opt);
    assert_near(zeus_pfo_controller_latency(ctl), 0.025, 1e-12);
    unsigned long before = 0;
    for (int it = 0; it < 3; it++) {
      if (it == 1) before = zeus_pfo_controller_changes(ctl);
      assert_zeus_ok(zeus_pfo_on_step_begin(opt));
      for (int i = 0; i < NI; i++) {
        assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, kind_name[i % 2]));
        assert_zeus_ok(zeus_pfo_controller_wait(ctl, 10)); /* virtual time: let the controller act */
        assert_zeus_ok(zeus_sim_idle(node, longer ? 0.06 : 0.01));
        assert_zeus_ok(zeus_pfo_on_instruction_end(opt, kind_name[i % 2]));
      }
      assert_zeus_ok(zeus_pfo_on_step_end(opt));
    }
    assert_zeus_ok(zeus_pfo_controller_wait(ctl, 10));
    unsigned long changes = zeus_pfo_controller_changes(ctl) - before;
    print_message("%s instructions: %lu clock changes in 2 iterations after the first\n", longer ? "60 ms" : "10 ms",
                  changes);
    if (longer) {
      assert_true(changes >= NI);
    } else {
      assert_true(changes <= 1); /* from the last backward of iteration 0 to the merged groups' 1740 MHz */
      assert_int_equal(zeus_pfo_controller_current_mhz(ctl), F_MHZ);
    }
    zeus_pfo_optimizer_close(opt);
    zeus_devices_close(d);
    zeus_pfo_server_close(s);
  }
}

/* The settings: ZEUS_PFO_INSTRUCTION_ENERGY and ZEUS_PFO_CLOCK_LATENCY. */
static void energy_and_latency_settings_are_read_and_checked(void **state) {
  (void)state;
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer_opts_init(&o);
  setenv("ZEUS_PFO_INSTRUCTION_ENERGY", "fit", 1);
  setenv("ZEUS_PFO_CLOCK_LATENCY", "0.0081", 1);
  assert_zeus_ok(zeus_pfo_optimizer_opts_from_env(&o));
  assert_int_equal(o.instruction_energy, ZEUS_PFO_ENERGY_FIT);
  assert_near(o.clock_latency_s, 0.0081, 1e-12);
  setenv("ZEUS_PFO_CLOCK_LATENCY", "0", 1);
  assert_zeus_ok(zeus_pfo_optimizer_opts_from_env(&o));
  assert_true(o.clock_latency_s < 0); /* none */
  setenv("ZEUS_PFO_CLOCK_LATENCY", "auto", 1);
  assert_zeus_ok(zeus_pfo_optimizer_opts_from_env(&o));
  assert_true(o.clock_latency_s == 0);
  setenv("ZEUS_PFO_INSTRUCTION_ENERGY", "sometimes", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_EINVAL, "ZEUS_PFO_INSTRUCTION_ENERGY");
  unsetenv("ZEUS_PFO_INSTRUCTION_ENERGY");
  setenv("ZEUS_PFO_CLOCK_LATENCY", "soon", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_EINVAL, "ZEUS_PFO_CLOCK_LATENCY");
  unsetenv("ZEUS_PFO_CLOCK_LATENCY");
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(h100_fitted_energy_is_right_hooks_cost_nothing_and_clocks_arrive_in_time),
      cmocka_unit_test(h100_reading_around_instructions_costs_ms_and_late_clocks),
      cmocka_unit_test(h100_a_hung_lock_call_is_clock_late_not_a_stalled_thread),
      cmocka_unit_test(instructions_shorter_than_the_latency_merge_at_the_higher_clock),
      cmocka_unit_test(energy_and_latency_settings_are_read_and_checked),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
