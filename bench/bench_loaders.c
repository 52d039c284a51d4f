/* bench_loaders: the time to load large input files, one per parser that takes a user's file: a
 * power-limit profile (JSON), a simulated GPU's profile table (CSV, and its node opened, which
 * checks the table), a frontier instruction profile (CSV) and a train/power trace pair (CSV).
 * Each file has N entries (argument 1; default 100,000), all distinct, written to a temporary
 * folder first. Loading must grow about linearly with N (issue 19: a 100,000-entry profile took
 * 18.5 s when a duplicate check compared every pair).
 *
 *   build/bench_loaders [N]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zeus.h>

static void write_file(const char *path, void (*gen)(FILE *, long), long n) {
  FILE *f = fopen(path, "w");
  if (!f) {
    perror(path);
    exit(1);
  }
  gen(f, n);
  fclose(f);
}

static void gen_plo(FILE *f, long n) {
  fputs("{\"measurements\": [", f);
  for (long i = 0; i < n; i++)
    fprintf(f, "%s{\"power_limit\": %ld, \"energy\": %ld.5, \"time\": 2.0}", i ? "," : "", i + 1, 100 + i);
  fputs("]}\n", f);
}

static void gen_sim(FILE *f, long n) {
  fputs("start_time,window_name,elapsed_time,gpu0_energy\n", f);
  /* limits 100 W + i mW (window names hold W), each window 1 s at about 50 W */
  for (long i = 0; i < n; i++) fprintf(f, "0,__PowerLimitOptimizer_%.3f,1.0,%.4f\n", 100 + i * 1e-3, 50 + i * 1e-4);
}

static void gen_frontier(FILE *f, long n) {
  fputs("stage,instruction,frequency,time,energy\n", f);
  for (long i = 0; i < n; i++)
    fprintf(f, "%ld,%s,%ld,0.01,1.0\n", i % 4, (i / 4) % 2 ? "forward" : "backward", i / 8 + 100);
}

static void gen_train(FILE *f, long n) {
  fputs("dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch\n", f);
  for (long i = 0; i < n; i++) fprintf(f, "data%ld,net%ld,32,adam,0.1,0,0.5,3\n", i, i);
}

static void gen_power(FILE *f, long n) {
  fputs("dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power\n", f);
  for (long i = 0; i < n; i++) fprintf(f, "data%ld,net%ld,32,adam,100,1.0,90\n", i, i);
}

static void check(int rc, const char *what) {
  if (rc) {
    fprintf(stderr, "bench_loaders: %s: %s\n", what, zeus_errmsg());
    exit(1);
  }
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 100000;
  if (n < 1) n = 100000;
  char dir[] = "/tmp/zeus-bench-loaders-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  char plo[128], sim[128], fr[128], tr[128], pw[128];
  snprintf(plo, sizeof plo, "%s/plo.json", dir);
  snprintf(sim, sizeof sim, "%s/sim.csv", dir);
  snprintf(fr, sizeof fr, "%s/frontier.csv", dir);
  snprintf(tr, sizeof tr, "%s/train.csv", dir);
  snprintf(pw, sizeof pw, "%s/power.csv", dir);
  write_file(plo, gen_plo, n);
  write_file(sim, gen_sim, n);
  write_file(fr, gen_frontier, n);
  write_file(tr, gen_train, n);
  write_file(pw, gen_power, n);
  printf("bench_loaders: %ld entries per file\n", n);

  double t0 = zeus_monotonic_s();
  zeus_plo_measurement *m;
  size_t nm;
  check(zeus_plo_profile_load(plo, &m, &nm), "power-limit profile");
  printf("  power-limit profile (JSON, %zu limits)        %8.3f s\n", nm, zeus_monotonic_s() - t0);
  zeus_free(m);

  t0 = zeus_monotonic_s();
  zeus_sim_config *cfg;
  check(zeus_sim_config_load(&cfg, sim, 40), "simulated GPU profile");
  zeus_sim_node *node;
  check(zeus_sim_node_open(&node, cfg), "simulated GPU profile (node)");
  printf("  simulated GPU table (CSV, %ld rows, opened)   %8.3f s\n", n, zeus_monotonic_s() - t0);
  zeus_sim_node_close(node);
  zeus_sim_config_free(cfg);

  t0 = zeus_monotonic_s();
  zeus_frontier_profile *p;
  check(zeus_frontier_profile_load(&p, fr), "frontier profile");
  printf("  frontier profile (CSV, %ld rows)             %8.3f s\n", n, zeus_monotonic_s() - t0);
  zeus_frontier_profile_free(p);

  t0 = zeus_monotonic_s();
  zeus_trace *t;
  check(zeus_trace_open_files(&t, tr, pw), "trace");
  printf("  trace (2 CSVs, %ld rows and names each)      %8.3f s\n", n, zeus_monotonic_s() - t0);
  zeus_trace_close(t);

  unlink(plo);
  unlink(sim);
  unlink(fr);
  unlink(tr);
  unlink(pw);
  rmdir(dir);
  return 0;
}
