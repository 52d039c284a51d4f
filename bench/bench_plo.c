/* Benchmark: the cost of zeus_plo_on_step_begin, the one hook a training loop calls every step.
 *   - in DONE (after profiling; the common case for the rest of training): target <= 5 ns;
 *   - during profiling, on the steps that only count (no window begins or ends, no limit
 *     changes, so no device call): target <= 200 ns;
 *   - for reference, a full transition (end a window, set the next limit on every GPU, begin the
 *     next window), which does call the devices, on the sim backend.
 * Prints ns per call (best of 5 runs). Usage: bench_plo [CALLS]   (default 100000000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zeus.h>

static double now_ns(void) { return (double)zeus_monotonic_ns(); }

static zeus_plo *open_plo(zeus_monitor *m, long wait, long warmup, long profile, unsigned step_w, const char *path) {
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.wait_steps = wait;
  o.warmup_steps = warmup;
  o.profile_steps = profile;
  o.pl_step_w = step_w;
  o.profile_path = path;
  o.no_signal_handlers = true;
  zeus_plo *p;
  if (zeus_plo_open(&p, m, &o) != ZEUS_OK) {
    fprintf(stderr, "bench_plo: %s\n", zeus_errmsg());
    exit(1);
  }
  return p;
}

/* Best of 5 runs of `calls` step begins, in ns per call. */
static double time_calls(zeus_plo *p, long calls) {
  double best = 1e18;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now_ns();
    for (long i = 0; i < calls; i++) {
      if (zeus_plo_on_step_begin(p) != ZEUS_OK) {
        fprintf(stderr, "bench_plo: %s\n", zeus_errmsg());
        exit(1);
      }
    }
    double ns = (now_ns() - t0) / (double)calls;
    if (ns < best) best = ns;
  }
  return best;
}

int main(int argc, char **argv) {
  long calls = argc > 1 ? atol(argv[1]) : 100000000L;
  if (calls < 1000) calls = 1000;
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  setenv("ZEUS_RAPL_ROOT", "/nonexistent", 1);
  unsigned ngpu = 4;
  zeus_sim_gpu_config g[4];
  memset(g, 0, sizeof g);
  zeus_sim_config cfg = {.num_gpus = ngpu, .gpus = g, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts dopts = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  zeus_monitor *m;
  static const unsigned no_cpu[1];
  if (zeus_devices_open(&d, &dopts) != ZEUS_OK) {
    fprintf(stderr, "bench_plo: %s\n", zeus_errmsg());
    return 1;
  }
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = no_cpu, .num_cpu_indices = 0};
  if (zeus_monitor_open(&m, &mo) != ZEUS_OK) {
    fprintf(stderr, "bench_plo: %s\n", zeus_errmsg());
    return 1;
  }
  printf("zeus_plo_on_step_begin on %u simulated GPUs (best of 5 runs of %ld calls)\n", ngpu, calls);

  /* DONE: from a saved profile. */
  char path[] = "/tmp/zeus-bench-plo-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return 1;
  close(fd);
  const zeus_plo_measurement prof[] = {{300, 1000, 10}, {250, 900, 11}, {200, 850, 13}};
  if (zeus_plo_profile_save(path, prof, 3) != ZEUS_OK) {
    fprintf(stderr, "bench_plo: %s\n", zeus_errmsg());
    return 1;
  }
  zeus_plo *p = open_plo(m, 1, 10, 40, 25, path);
  unlink(path);
  if (zeus_plo_get_state(p) != ZEUS_PLO_DONE) return 1;
  double done_ns = time_calls(p, calls);
  zeus_plo_close(p);
  printf("  DONE                              %8.2f ns/call   (target <= 5)   %s\n", done_ns,
         done_ns <= 5 ? "ok" : "OVER TARGET");

  /* PROFILING: a window that stays open for all the calls. */
  p = open_plo(m, 0, 0, 20 * calls + 10, 25, NULL);
  zeus_plo_on_step_begin(p); /* sets the first limit and begins the window */
  if (zeus_plo_get_state(p) != ZEUS_PLO_PROFILING) return 1;
  double prof_ns = time_calls(p, calls / 4);
  if (zeus_plo_get_state(p) != ZEUS_PLO_PROFILING) return 1;
  zeus_plo_close(p);
  printf("  PROFILING, no device call         %8.2f ns/call   (target <= 200) %s\n", prof_ns,
         prof_ns <= 200 ? "ok" : "OVER TARGET");

  /* Transitions: profile_steps 1, warmup 0, so every call ends a window, sets the next limit on
   * every GPU and begins a window (1 W steps give 201 limits). Reopened when done. */
  long trans = 0;
  double t0 = now_ns();
  while (trans < 20000) {
    p = open_plo(m, 0, 0, 1, 1, NULL);
    zeus_plo_on_step_begin(p);
    while (zeus_plo_get_state(p) != ZEUS_PLO_DONE) {
      zeus_plo_on_step_begin(p);
      trans++;
    }
    zeus_plo_close(p);
  }
  double trans_ns = (now_ns() - t0) / (double)trans;
  printf("  transition with device calls      %8.0f ns/call   (end window, set %u GPUs, begin window; "
         "for reference)\n", trans_ns, ngpu);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  return done_ns <= 5 && prof_ns <= 200 ? 0 : 1;
}
