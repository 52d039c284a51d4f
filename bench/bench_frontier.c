/* bench_frontier: seconds and iterations of the frontier solver on synthetic DVFS profiles and
 * on the SOSP'24 GPT-3 175B and Bloom profiles.
 *
 * usage: bench_frontier [DATA_DIR] [--model exponential|hull]
 * DATA_DIR defaults to $ZEUS_DATA_DIR, then ../shared/data; the measured profiles are skipped
 * with a message when absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <zeus.h>

#include "frontier/frontier.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int run(const char *label, const zeus_frontier_profile *p, int S, int M, double pb,
               zeus_frontier_cost_model cm) {
  zeus_frontier_opts o = {.stages = S, .microbatches = M, .blocking_power_w = pb, .cost_model = cm};
  zeus_frontier *f;
  double t0 = now();
  if (zeus_frontier_solve(&f, p, &o) != ZEUS_OK) {
    fprintf(stderr, "%s: %s\n", label, zeus_errmsg());
    return 1;
  }
  double secs = now() - t0;
  size_t n = zeus_frontier_num_points(f);
  zeus_frontier_point a, b;
  zeus_frontier_get_point(f, 0, &a);
  zeus_frontier_get_point(f, n - 1, &b);
  printf("%-28s %3d x %-3d %8.3f s %7zu iterations  %.3f..%.3f s\n", label, S, M, secs, n - 1, a.time_s,
         b.time_s);
  fflush(stdout);
  zeus_frontier_free(f);
  return 0;
}

int main(int argc, char **argv) {
  const char *dir = NULL;
  zeus_frontier_cost_model cm = ZEUS_FRONTIER_COST_EXPONENTIAL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
      cm = strcmp(argv[++i], "hull") == 0 ? ZEUS_FRONTIER_COST_HULL : ZEUS_FRONTIER_COST_EXPONENTIAL;
    } else {
      dir = argv[i];
    }
  }
  if (!dir || !*dir) dir = getenv("ZEUS_DATA_DIR");
  if (!dir || !*dir) dir = "../shared/data";
  printf("frontier solver, %s cost model\n", cm == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential");
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
    char path[4096];
    snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/%s+a100_sxm_bf16.csv", dir, models[k]);
    struct stat st;
    if (stat(path, &st) != 0) {
      printf("%s: skipped, %s is absent (give the data folder as the first argument or ZEUS_DATA_DIR)\n",
             models[k], path);
      continue;
    }
    zeus_frontier_profile *p;
    if (zeus_frontier_profile_load(&p, path)) {
      fprintf(stderr, "%s\n", zeus_errmsg());
      return 1;
    }
    static const int mbs[] = {12, 24, 48, 96};
    for (int j = 0; j < 4; j++) {
      char label[64];
      snprintf(label, sizeof label, "%s A100 SXM", models[k]);
      rc |= run(label, p, 8, mbs[j], 83.64, cm);
    }
    zeus_frontier_profile_free(p);
  }
  return rc;
}
