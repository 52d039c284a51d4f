/* bench_simulate: `zeus simulate --all` (load the traces, simulate the six workloads) for each of
 * the four GPUs; prints seconds per GPU. Target: under 1 s for all four together. */
#include <stdio.h>
#include <stdlib.h>

#include <zeus.h>

int main(void) {
  const char *data = getenv("ZEUS_DATA_DIR");
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/nsdi23-trace", data && *data ? data : "../shared/data");
  static const char *const gpus[] = {"a40", "v100", "p100", "rtx6000"};
  const zeus_trace_workload *six;
  size_t n = zeus_trace_default_workloads(&six);
  const int reps = 5;
  double total = 0;
  printf("zeus simulate --all (trace load + %zu workloads), best of %d runs, traces in %s\n", n, reps, dir);
  for (size_t g = 0; g < 4; g++) {
    double best = 1e30;
    size_t tries = 0;
    for (int k = 0; k < reps; k++) {
      double t0 = zeus_monotonic_s();
      zeus_trace *t;
      if (zeus_trace_open(&t, dir, gpus[g]) != ZEUS_OK) {
        fprintf(stderr, "bench_simulate: %s (set ZEUS_DATA_DIR to the data folder)\n", zeus_errmsg());
        return 1;
      }
      tries = 0;
      for (size_t i = 0; i < n; i++) {
        zeus_simulate_result *r;
        if (zeus_simulate(t, &six[i], NULL, &r) != ZEUS_OK) {
          fprintf(stderr, "bench_simulate: %s/%s on %s: %s\n", six[i].dataset, six[i].network, gpus[g], zeus_errmsg());
          zeus_trace_close(t);
          return 1;
        }
        tries += r->history_len;
        zeus_simulate_result_free(r);
      }
      zeus_trace_close(t);
      double dt = zeus_monotonic_s() - t0;
      if (dt < best) best = dt;
    }
    total += best;
    printf("  %-8s %8.4f s  (%zu simulated tries)\n", gpus[g], best, tries);
  }
  printf("  total    %8.4f s  (target < 1 s: %s)\n", total, total < 1.0 ? "met" : "NOT met");
  return 0;
}
