/* bench_frontier: seconds, points and peak memory of the frontier solver on synthetic DVFS
 * profiles and on the SOSP'24 GPT-3 175B and Bloom profiles, up to Bloom on A40 with 8 stages
 * × 512 microbatches (67,445 points; 2.2 GB when every point kept a full copy of its plan).
 *
 * Each case runs in a child process, so its peak resident memory (the child's ru_maxrss, which
 * includes the few MB the parent had when it forked) is its own.
 *
 * usage: bench_frontier [DATA_DIR] [--model exponential|hull] [--quick]
 * DATA_DIR defaults to $ZEUS_DATA_DIR, then ../shared/data; the measured profiles are skipped
 * with a message when absent. --quick leaves out the 8 × 512 case. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zeus.h>

#include "frontier/frontier.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Solves one case in this (child) process and prints its line, without the memory column. */
static int solve_case(const char *label, const zeus_frontier_profile *p, int S, int M, double pb,
                      zeus_frontier_cost_model cm) {
  zeus_frontier_opts o = {.stages = S, .microbatches = M, .blocking_power_w = pb, .cost_model = cm};
  zeus_frontier *f;
  double t0 = now();
  if (zeus_frontier_solve(&f, p, &o) != ZEUS_OK) {
    fprintf(stderr, "%s: %s\n", label, zeus_errmsg());
    return 1;
  }
  double secs = now() - t0;
  size_t n = zeus_frontier_num_points(f), ndom = 0;
  zeus_frontier_point a, b;
  for (size_t i = 0; i < n; i++) {
    zeus_frontier_get_point(f, i, &a);
    ndom += a.dominated;
  }
  zeus_frontier_get_point(f, 0, &a);
  zeus_frontier_get_point(f, n - 1, &b);
  double full_mb = (double)n * (double)f->dag.n * 4 / 1048576.0;
  printf("%-22s %2d x %-3d %8.3f s %7zu points %6zu dominated  %8.3f..%-8.3f s  plans %6.1f MB (full copies %7.1f MB)",
         label, S, M, secs, n, ndom, a.time_s, b.time_s, (double)zeus__fplans_bytes(&f->plans) / 1048576.0, full_mb);
  fflush(stdout);
  zeus_frontier_free(f);
  return 0;
}

/* Runs solve_case in a child and appends the child's peak resident memory. */
static int run(const char *label, const zeus_frontier_profile *p, int S, int M, double pb,
               zeus_frontier_cost_model cm) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    return 1;
  }
  if (pid == 0) _exit(solve_case(label, p, S, M, pb, cm));
  int status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid) {
    perror("wait4");
    return 1;
  }
  printf("  peak RSS %7.1f MB\n", (double)ru.ru_maxrss / 1024.0);
  fflush(stdout);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

static zeus_frontier_profile *load(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/%s", dir, name);
  struct stat st;
  if (stat(path, &st) != 0) {
    printf("%s: skipped, %s is absent (give the data folder as the first argument or ZEUS_DATA_DIR)\n", name, path);
    return NULL;
  }
  zeus_frontier_profile *p;
  if (zeus_frontier_profile_load(&p, path)) {
    fprintf(stderr, "%s\n", zeus_errmsg());
    return NULL;
  }
  return p;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  bool quick = false;
  zeus_frontier_cost_model cm = ZEUS_FRONTIER_COST_EXPONENTIAL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
      cm = strcmp(argv[++i], "hull") == 0 ? ZEUS_FRONTIER_COST_HULL : ZEUS_FRONTIER_COST_EXPONENTIAL;
    } else if (strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      dir = argv[i];
    }
  }
  if (!dir || !*dir) dir = getenv("ZEUS_DATA_DIR");
  if (!dir || !*dir) dir = "../shared/data";
  printf("frontier solver, %s cost model (each case in its own process: peak RSS is the case's)\n",
         cm == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential");
  int rc = 0;
  static const int synth_cases[][2] = {{4, 8}, {4, 16}, {8, 16}, {8, 32}, {8, 64}};
  for (size_t i = 0; i < sizeof synth_cases / sizeof synth_cases[0]; i++) {
    int S = synth_cases[i][0], M = synth_cases[i][1];
    zeus_frontier_profile *p;
    if (zeus_frontier_profile_new(&p, "synthetic") || zeus__frontier_synth(p, S, 38, 0.03, 1)) {
      fprintf(stderr, "synthetic profile: %s\n", zeus_errmsg());
      return 1;
    }
    rc |= run("synthetic (38 clocks)", p, S, M, 80.0, cm);
    zeus_frontier_profile_free(p);
  }
  static const char *const models[] = {"gpt3-175b", "bloom"};
  for (int k = 0; k < 2; k++) {
    char name[64];
    snprintf(name, sizeof name, "%s+a100_sxm_bf16.csv", models[k]);
    zeus_frontier_profile *p = load(dir, name);
    if (!p) continue;
    static const int mbs[] = {12, 24, 48, 96};
    for (int j = 0; j < 4; j++) {
      char label[64];
      snprintf(label, sizeof label, "%s A100 SXM", models[k]);
      rc |= run(label, p, 8, mbs[j], 83.64, cm);
    }
    zeus_frontier_profile_free(p);
  }
  /* The large case: Bloom on A40 (60 clocks), 8 stages x 512 microbatches. */
  if (quick) {
    printf("bloom A40 8 x 512: left out (--quick)\n");
  } else {
    zeus_frontier_profile *p = load(dir, "bloom+a40_bf16.csv");
    if (p) {
      rc |= run("bloom A40", p, 8, 512, 70.38, cm);
      zeus_frontier_profile_free(p);
    }
  }
  return rc;
}
