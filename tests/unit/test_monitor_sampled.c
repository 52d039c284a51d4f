/* Monitor windows on GPUs that behave like the measured H100 (ZEUS_SIM_HARDWARE=h100: 100 ms
 * sensor tick, 3.3 ms counter reads), against the simulated GPU's ground truth: the sampled
 * energy source (src/monitor/sampler.c) meets issue 24's targets and the raw counter does not.
 * These run on the wall clock (the sampler follows real time), a few seconds each; the bounds
 * leave room for a loaded machine where they can without losing what they test. Default DVFS
 * model: 290 W working, 30 W idle. */
#include "test_util.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

typedef struct fixture {
  zeus_sim_gpu_config gpus[2];
  zeus_sim_config cfg;
  zeus_devices *dev;
  zeus_sim_node *node;
} fixture;

/* GPUs with a hardware profile (power_phase_s >= 0 sets the power tick's phase) at full load. */
static void fx_open_hw(fixture *f, unsigned n, const char *hw, double power_phase_s) {
  memset(f, 0, sizeof *f);
  for (unsigned i = 0; i < n; i++) {
    assert_zeus_ok(zeus_sim_hardware_profile(hw, &f->gpus[i].hw));
    if (power_phase_s >= 0) f->gpus[i].hw.power_phase_s = power_phase_s;
  }
  f->cfg = (zeus_sim_config){.num_gpus = n, .gpus = f->gpus, .clock = ZEUS_SIM_CLOCK_WALL};
  zeus_devices_opts o = {.backend = "sim", .sim = &f->cfg, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&f->dev, &o));
  f->node = zeus_devices_sim_node(f->dev);
  for (unsigned i = 0; i < n; i++) assert_zeus_ok(zeus_sim_gpu_set_load(f->node, i, true));
}

static void fx_open(fixture *f, unsigned n) { fx_open_hw(f, n, "h100", -1); }

static zeus_monitor *mon_open(fixture *f, zeus_energy_source src) {
  zeus_monitor_opts o;
  zeus_monitor_opts_init(&o);
  o.devices = f->dev;
  o.cpu_indices = (const unsigned[]){0};
  o.num_cpu_indices = 0;
  o.energy_source = src;
  o.no_short_window_warning = true;
  zeus_monitor *m = NULL;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  return m;
}

static double truth(fixture *f, unsigned gpu) {
  double j = NAN;
  assert_zeus_ok(zeus_sim_true_energy(f->node, gpu, &j));
  return j;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Relative errors of `n` windows of `len` s on GPU 0 against the truth, sorted; the median and
 * the caller-side cost of the window pairs in *cost_s (median). Windows start at wandering tick
 * phases. */
static double run_windows(fixture *f, zeus_monitor *m, int n, double len, double *err, double *cost_s) {
  double costs[64];
  for (int k = 0; k < n; k++) {
    sleep_s(0.0173 * (k % 6));
    double n0 = zeus_sim_now(f->node), tr0 = truth(f, 0), c0 = zeus_monotonic_s();
    assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
    double c1 = zeus_monotonic_s();
    sleep_s(len);
    double c2 = zeus_monotonic_s();
    zeus_measurement r;
    assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
    double c3 = zeus_monotonic_s(), tr1 = truth(f, 0), n1 = zeus_sim_now(f->node);
    /* the truth over the window's own bounds: the load is steady, so the exact mean power over a
     * stretch around the window times its length (the truth read right before and after the
     * bounds would count this thread's scheduling delays, and the raw reads' 3.3 ms, as errors) */
    double want = (tr1 - tr0) / (n1 - n0) * r.time_s;
    err[k] = fabs(r.gpu_energy_j[0] - want) / want;
    costs[k] = (c1 - c0) + (c3 - c2);
  }
  if (cost_s) *cost_s = median(costs, (size_t)n);
  return median(err, (size_t)n);
}

/* The median cost of a window pair (begin, end) back to back on the caller's thread. */
static double pair_cost_s(zeus_monitor *m) {
  double pairs[200];
  for (int k = 0; k < 200; k++) {
    double c0 = zeus_monotonic_s();
    assert_zeus_ok(zeus_monitor_begin_window(m, "p", false));
    assert_zeus_ok(zeus_monitor_end_window(m, "p", false, NULL));
    pairs[k] = zeus_monotonic_s() - c0;
  }
  return median(pairs, 200);
}

/* The sampled source: a window pair costs microseconds on the caller's thread; 50 and 100 ms
 * windows are within 1.5 % median and 5 % worst, 500 ms within 0.5 % median; the sampler costs
 * under 5 % of a core. The raw counter, on the same GPU: 6.6 ms a pair, 50 ms windows far off. */
static void h100_sampled_windows_meet_the_targets_and_raw_does_not(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 1);
  zeus_monitor *m = mon_open(&f, ZEUS_ENERGY_AUTO); /* slow counter, wall clock: sampled */
  assert_int_equal(zeus_monitor_gpu_energy_source(m, 0), ZEUS_ENERGY_SAMPLED);
  double r0 = zeus_monotonic_s(), cpu0 = zeus_monitor_sampler_cpu_s(m);
  sleep_s(0.5); /* the tick's period is learnt */
  double err[64], cost50, cost100, cost500;
  double med50 = run_windows(&f, m, 20, 0.05, err, &cost50);
  double worst50 = err[19];
  double med100 = run_windows(&f, m, 12, 0.1, err, &cost100);
  double worst100 = err[11];
  double med500 = run_windows(&f, m, 5, 0.5, err, &cost500);
  double cpu_share = (zeus_monitor_sampler_cpu_s(m) - cpu0) / (zeus_monotonic_s() - r0);
  print_message("sampled: 50 ms median %.3f %% worst %.3f %%; 100 ms %.3f %% / %.3f %%; 500 ms median %.3f %%; "
                "pair %.2f us; sampler %.2f %% of a core\n",
                100 * med50, 100 * worst50, 100 * med100, 100 * worst100, 100 * med500, 1e6 * cost50,
                100 * cpu_share);
  assert_true(med50 <= 0.015 && worst50 <= 0.05);
  assert_true(med100 <= 0.015 && worst100 <= 0.05);
  assert_true(med500 <= 0.005);
  /* the pair's cost on its own, back to back (the figures above include waking from a sleep) */
  double pair = pair_cost_s(m);
  print_message("window pair back to back: median %.2f us\n", 1e6 * pair);
  assert_true(pair <= 10e-6);
  assert_true(cpu_share <= 0.05);
  zeus_window_detail d;
  assert_zeus_ok(zeus_monitor_begin_window(m, "d", false));
  sleep_s(0.25);
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window_detail(m, "d", false, &r, &d));
  assert_int_equal(d.source[0], ZEUS_ENERGY_SAMPLED);
  assert_true(d.corrected_energy_j[0] == r.gpu_energy_j[0]);
  print_message("detail: raw %.3f J corrected %.3f J bound %.3f J\n", d.raw_energy_j[0], d.corrected_energy_j[0], d.error_bound_j[0]);
  assert_true(d.raw_energy_j[0] > 0 && d.error_bound_j[0] > 0 && d.error_bound_j[0] < 0.5 * r.gpu_energy_j[0]);
  zeus_monitor_close(m);

  m = mon_open(&f, ZEUS_ENERGY_RAW);
  assert_int_equal(zeus_monitor_gpu_energy_source(m, 0), ZEUS_ENERGY_RAW);
  double raw50 = run_windows(&f, m, 8, 0.05, err, &cost50);
  print_message("raw: 50 ms median %.1f %% worst %.1f %%, pair %.2f ms\n", 100 * raw50, 100 * err[7], 1e3 * cost50);
  assert_true(err[7] > 0.5);       /* fails the worst-case target by far */
  assert_true(cost50 >= 6.6e-3);   /* two counter reads */
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

/* The H200's two sensor clocks on the wall clock, with the follower threads (issue 35): the power
 * ticks every ~101.6 ms, the counter every 100.0 ms, their phase sliding a whole period every ~6 s;
 * from two starting phases, 200 and 500 ms windows over ~5 s each (most of a phase cycle) are
 * within 0.5 % median and 2 % worst, and a window pair costs at most 10 us. The sampler that read the counter when the power ticked
 * attributed its value to the power's tick: tens of % off while the two were apart. */
static void h200_sampled_windows_follow_the_counters_own_clock(void **state) {
  (void)state;
  for (int o = 0; o < 2; o++) {
    fixture f;
    fx_open_hw(&f, 1, "h200", 0.05 * o);
    zeus_monitor *m = mon_open(&f, ZEUS_ENERGY_SAMPLED);
    sleep_s(0.6); /* the periods are learnt */
    double err[16], cost;
    double med200 = run_windows(&f, m, 12, 0.2, err, &cost), worst200 = err[11];
    double med500 = run_windows(&f, m, 6, 0.5, err, &cost), worst500 = err[5];
    print_message("h200, power phase %.0f ms at the start: 200 ms median %.3f %% worst %.3f %%; 500 ms %.3f %% / "
                  "%.3f %%\n", 50.0 * o, 100 * med200, 100 * worst200, 100 * med500, 100 * worst500);
    assert_true(med200 <= 0.005 && worst200 <= 0.02);
    assert_true(med500 <= 0.005 && worst500 <= 0.02);
    /* issue 35's pair-cost target holds with two followers per GPU as with one clock */
    double pair = pair_cost_s(m);
    print_message("h200 window pair back to back: median %.2f us\n", 1e6 * pair);
    assert_true(pair <= 10e-6);
    zeus_monitor_close(m);
    zeus_devices_close(f.dev);
  }
}

/* Waits up to `limit_s` for child pid; its exit status, or -1 (killed) when it did not exit. */
static int wait_child(pid_t pid, double limit_s) {
  for (double waited = 0; waited < limit_s; waited += 0.02) {
    int st;
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    sleep_s(0.02);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

/* Issue 36, finding 9: a process forked after a monitor started its sampler (and a power-polling
 * thread) gets a working monitor in the child: a window measures, and closing it returns; the
 * parent's monitor goes on. Before, the child hung in the sampler's close (pthread_cond_destroy
 * waiting for the parent's threads), 5 runs of 5. */
static void a_forked_child_gets_a_working_monitor_and_exits(void **state) {
  (void)state;
#if defined(__SANITIZE_ADDRESS__)
  /* glibc's malloc is safe in the child of a threaded process (its fork handlers); GCC 12's ASan
   * allocator is not: a child can deadlock on a lock another thread held at the fork (seen in
   * test_pfo_server_attacks). The release build runs this test. */
  print_message("SKIPPED: allocating in a forked child is not safe under AddressSanitizer\n");
  skip();
#endif
  fixture f;
  fx_open_hw(&f, 2, "h100", -1);
  zeus_monitor *m = mon_open(&f, ZEUS_ENERGY_SAMPLED);
  sleep_s(0.3);
  for (int variant = 0; variant < 2; variant++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      int code = 0;
      if (variant == 0) { /* measure in the child, then close */
        zeus_measurement r;
        if (zeus_monitor_begin_window(m, "child", false) != ZEUS_OK) code = 2;
        sleep_s(0.3);
        if (!code && zeus_monitor_end_window(m, "child", false, &r) != ZEUS_OK) code = 3;
        if (!code && !(r.gpu_energy_j[0] > 0.25 * 290 * 0.2 && r.gpu_energy_j[0] < 290 * 0.5)) code = 4;
      }
      zeus_monitor_close(m); /* variant 1: close at once, as zeusc does at exit */
      _exit(code);
    }
    int code = wait_child(pid, 10.0);
    print_message("forked child (variant %d): exit %d\n", variant, code);
    assert_int_equal(code, 0);
  }
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_begin_window(m, "parent", false));
  sleep_s(0.2);
  assert_zeus_ok(zeus_monitor_end_window(m, "parent", false, &r));
  assert_true(r.gpu_energy_j[0] > 290 * 0.15);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

/* A step from idle to full power inside the window (at a random point of its first 40 %): error
 * within 5 % for windows of 200 ms and more. */
static void step_in_the_load(const char *hw) {
  fixture f;
  fx_open_hw(&f, 1, hw, -1);
  zeus_monitor *m = mon_open(&f, ZEUS_ENERGY_SAMPLED);
  assert_zeus_ok(zeus_sim_gpu_set_load(f.node, 0, false));
  sleep_s(0.5);
  double worst = 0;
  srand(24);
  int redo = 0;
  for (int k = 0; k < 6; k++) {
    double len = k < 4 ? 0.2 : 0.5;
    assert_zeus_ok(zeus_sim_gpu_set_load(f.node, 0, false));
    sleep_s(0.25 + 0.0173 * k);
    double b0 = zeus_sim_now(f.node), tr0 = truth(&f, 0);
    assert_zeus_ok(zeus_monitor_begin_window(m, "step", false));
    double b1 = zeus_sim_now(f.node);
    double at = len * (0.1 + 0.3 * rand() / (double)RAND_MAX);
    sleep_s(at);
    assert_zeus_ok(zeus_sim_gpu_set_load(f.node, 0, true));
    sleep_s(len - at);
    zeus_measurement r;
    double a0 = zeus_sim_now(f.node);
    assert_zeus_ok(zeus_monitor_end_window(m, "step", false, &r));
    double want = truth(&f, 0) - tr0, a1 = zeus_sim_now(f.node);
    if ((b1 - b0 > 0.0005 || a1 - a0 > 0.0005) && ++redo < 30) { /* preempted at a bound: the truth */
      k--;                                     /* around it is not the window's; measure again */
      continue;
    }
    double e = fabs(r.gpu_energy_j[0] - want) / want;
    if (e > 0.05)
      print_message("step window %d: %.3f s, step at %.3f s: measured %.3f J, truth %.3f J\n", k, r.time_s, at,
                    r.gpu_energy_j[0], want);
    if (e > worst) worst = e;
  }
  print_message("%s, step load, 200-500 ms windows: worst %.2f %%\n", hw, 100 * worst);
  assert_true(worst <= 0.05);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

static void h100_sampled_windows_follow_a_step_in_the_load(void **state) {
  (void)state;
  step_in_the_load("h100");
}

/* The same on the H200, whose power readings tick on their own clock (idle 130 W to 440 W). */
static void h200_sampled_windows_follow_a_step_in_the_load(void **state) {
  (void)state;
  step_in_the_load("h200");
}

/* The virtual clock does not move with real time: auto falls back to the raw counter (no thread
 * can poll for ticks there); sampled, asked for, follows the simulated GPU's own record of its
 * ticks (the virtual mode, see the next test); ZEUS_MONITOR_ENERGY=raw is honoured. */
static void sampled_needs_a_real_clock_and_the_env_chooses(void **state) {
  (void)state;
  fixture f;
  memset(&f, 0, sizeof f);
  assert_zeus_ok(zeus_sim_hardware_profile("h100", &f.gpus[0].hw));
  f.cfg = (zeus_sim_config){.num_gpus = 1, .gpus = f.gpus, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts o = {.backend = "sim", .sim = &f.cfg, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&f.dev, &o));
  zeus_monitor *m = mon_open(&f, ZEUS_ENERGY_AUTO);
  assert_int_equal(zeus_monitor_gpu_energy_source(m, 0), ZEUS_ENERGY_RAW);
  zeus_monitor_close(m);
  zeus_monitor_opts mo;
  zeus_monitor_opts_init(&mo);
  mo.devices = f.dev;
  mo.cpu_indices = (const unsigned[]){0};
  mo.energy_source = ZEUS_ENERGY_SAMPLED;
  assert_zeus_ok(zeus_monitor_open(&m, &mo));
  assert_int_equal(zeus_monitor_gpu_energy_source(m, 0), ZEUS_ENERGY_SAMPLED);
  assert_true(zeus_monitor_sampler_cpu_s(m) == 0); /* no thread */
  zeus_monitor_close(m);
  mo.energy_source = (zeus_energy_source)7;
  assert_zeus_err(zeus_monitor_open(&m, &mo), ZEUS_EINVAL, "energy_source");
  zeus_devices_close(f.dev);
  fixture w;
  fx_open(&w, 1);
  setenv("ZEUS_MONITOR_ENERGY", "raw", 1);
  m = mon_open(&w, ZEUS_ENERGY_AUTO);
  assert_int_equal(zeus_monitor_gpu_energy_source(m, 0), ZEUS_ENERGY_RAW);
  zeus_monitor_close(m);
  setenv("ZEUS_MONITOR_ENERGY", "fast", 1);
  mo.devices = w.dev;
  mo.energy_source = ZEUS_ENERGY_AUTO;
  assert_zeus_err(zeus_monitor_open(&m, &mo), ZEUS_EINVAL, "ZEUS_MONITOR_ENERGY");
  unsetenv("ZEUS_MONITOR_ENERGY");
  /* the ideal GPU's counter is fast: auto needs no sampler */
  zeus_devices_close(w.dev);
  zeus_sim_config ideal = {.num_gpus = 1, .clock = ZEUS_SIM_CLOCK_WALL};
  zeus_devices_opts io = {.backend = "sim", .sim = &ideal, .all_devices = true};
  assert_zeus_ok(zeus_devices_open(&w.dev, &io));
  m = mon_open(&w, ZEUS_ENERGY_AUTO);
  assert_int_equal(zeus_monitor_gpu_energy_source(m, 0), ZEUS_ENERGY_RAW);
  assert_true(zeus_monitor_sampler_cpu_s(m) == 0);
  zeus_monitor_close(m);
  zeus_devices_close(w.dev);
}

/* The virtual clock's sampled source (used by the power-limit optimizer's noisy replays): windows
 * of 0.42-0.5 s on a counter ticking every 100 ms (the table model's counter alone, and the h100
 * model) are within 1 % of the truth (the followers' reads replayed: what they find on a real GPU),
 * where the raw counter's difference is off by up to a tick (more than 5 % in some window); the
 * reads cost the work's clock nothing. */
static void sampled_on_the_virtual_clock_follows_the_simulated_ticks(void **state) {
  (void)state;
  for (int hw = 0; hw < 2; hw++) {
    double worst[2] = {0, 0};
    for (int src = 0; src < 2; src++) {
      zeus_sim_gpu_config g[1];
      memset(g, 0, sizeof g);
      if (hw) assert_zeus_ok(zeus_sim_hardware_profile("h100", &g[0].hw));
      else g[0].counter_period_s = 0.1;
      zeus_sim_config cfg = {.num_gpus = 1, .gpus = g, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
      zeus_devices_opts o = {.backend = "sim", .sim = &cfg, .all_devices = true};
      zeus_devices *dev = NULL;
      assert_zeus_ok(zeus_devices_open(&dev, &o));
      zeus_sim_node *node = zeus_devices_sim_node(dev);
      zeus_monitor_opts mo;
      zeus_monitor_opts_init(&mo);
      mo.devices = dev;
      mo.cpu_indices = (const unsigned[]){0};
      mo.num_cpu_indices = 0;
      mo.energy_source = src ? ZEUS_ENERGY_SAMPLED : ZEUS_ENERGY_RAW;
      mo.no_short_window_warning = true;
      zeus_monitor *m = NULL;
      assert_zeus_ok(zeus_monitor_open(&m, &mo));
      double units[1];
      for (int w = 0; w < 12; w++) {
        units[0] = 1;
        /* a new limit, then warm-up steps, as the optimizer does (a load change between two queries
         * is spread over the span between the ticks they saw: see sampler.c's virtual mode) */
        if (w % 3 == 2) assert_zeus_ok(zeus_gpu_set_power_limit(dev, 0, w % 2 ? 250000 : 200000));
        for (int k = 0; k < 3; k++) assert_zeus_ok(zeus_sim_work_all(node, units, NULL));
        double e0, e1, t0 = zeus_devices_now(dev);
        assert_zeus_ok(zeus_sim_true_energy(node, 0, &e0));
        assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
        for (int k = 0; k < 10; k++) {
          units[0] = 0.84 + 0.02 * (double)((k * 7 + w) % 5); /* steps of uneven length */
          assert_zeus_ok(zeus_sim_work_all(node, units, NULL));
        }
        double t1 = zeus_devices_now(dev);
        zeus_measurement r;
        assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
        assert_zeus_ok(zeus_sim_true_energy(node, 0, &e1));
        assert_near(r.time_s, t1 - t0, 1e-9); /* the sampler's reads took no time of the work's */
        worst[src] = fmax(worst[src], fabs(r.gpu_energy_j[0] / (e1 - e0) - 1));
      }
      zeus_monitor_close(m);
      zeus_devices_close(dev);
    }
    if (!hw) { /* a counter that does not tick has nothing to follow: sampled is refused, as before */
      zeus_sim_config ideal = {.num_gpus = 1, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
      zeus_devices_opts io = {.backend = "sim", .sim = &ideal, .all_devices = true};
      zeus_devices *dev = NULL;
      assert_zeus_ok(zeus_devices_open(&dev, &io));
      zeus_monitor_opts mo;
      zeus_monitor_opts_init(&mo);
      mo.devices = dev;
      mo.cpu_indices = (const unsigned[]){0};
      mo.num_cpu_indices = 0;
      mo.energy_source = ZEUS_ENERGY_SAMPLED;
      zeus_monitor *m = NULL;
      assert_zeus_err(zeus_monitor_open(&m, &mo), ZEUS_EINVAL, "counter ticks");
      zeus_devices_close(dev);
    }
    print_message("%s: worst window error raw %.2f %%, sampled %.4f %%\n", hw ? "h100" : "100 ms counter",
                  100 * worst[0], 100 * worst[1]);
    assert_true(worst[0] > 0.05);
    assert_true(worst[1] < 0.01);
  }
}

/* A long window: the sampled figure within 0.1 % of the truth, and within one tick's energy of the
 * raw counter difference. */
static void h100_long_sampled_window_agrees_with_the_counter(void **state) {
  (void)state;
  fixture f;
  fx_open(&f, 2);
  zeus_monitor *m = mon_open(&f, ZEUS_ENERGY_SAMPLED);
  sleep_s(0.4);
  double tr0 = truth(&f, 1);
  assert_zeus_ok(zeus_monitor_begin_window(m, "long", false));
  sleep_s(3.0);
  zeus_measurement r;
  zeus_window_detail d;
  assert_zeus_ok(zeus_monitor_end_window_detail(m, "long", false, &r, &d));
  double want = truth(&f, 1) - tr0;
  double err = fabs(r.gpu_energy_j[1] - want);
  print_message("3 s window on GPU 1: sampled %.4f %% off the truth (its error bound %.4f %%), raw %.3f %%\n",
                100 * (r.gpu_energy_j[1] - want) / want, 100 * d.error_bound_j[1] / want,
                100 * (d.raw_energy_j[1] - want) / want);
  /* 0.06-0.09 % on an idle machine; a loaded one starves the follower thread (0.16 % in a
   * fresh-machine ASan run of make check on 2 cores). 0.3 % still fails the raw counter's ~0.9 %
   * (one tick's worth at either end), which is what this guards. */
  assert_true(err / want <= 0.003);
  assert_true(fabs(d.raw_energy_j[1] - r.gpu_energy_j[1]) <= 290 * 0.11);
  zeus_monitor_close(m);
  zeus_devices_close(f.dev);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(h100_sampled_windows_meet_the_targets_and_raw_does_not),
      cmocka_unit_test(h100_sampled_windows_follow_a_step_in_the_load),
      cmocka_unit_test(h200_sampled_windows_follow_a_step_in_the_load),
      cmocka_unit_test(h200_sampled_windows_follow_the_counters_own_clock),
      cmocka_unit_test(a_forked_child_gets_a_working_monitor_and_exits),
      cmocka_unit_test(sampled_needs_a_real_clock_and_the_env_chooses),
      cmocka_unit_test(sampled_on_the_virtual_clock_follows_the_simulated_ticks),
      cmocka_unit_test(h100_long_sampled_window_agrees_with_the_counter),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
