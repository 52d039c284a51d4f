/* Benchmark (issue 30): how often the power-limit optimizer chooses right on a noisy GPU.
 * Each measured profile of plo-profiles is replayed on the simulated GPU (virtual clock, energy
 * counter ticking every 100 ms) with steps of 5 % jitter (standard deviation), a first profiling
 * window 5 % slow and 2 % drift over the profiling; wait 1, warm-up 3, profile 10 steps; 20 seeded
 * runs per selector, robust profiling (the default) beside the original's (ZEUS_PLO_PROFILING=
 * original). A run is right when its limit's cost on the noiseless profile is within 1 % of the
 * best (MaxSlowdownConstraint: time within the factor + 0.5 %, energy within 1 % of the least
 * within the factor). docs/plo.md explains the figures.
 * Usage: bench_plo_robust [DATA_DIR] [RUNS] [HARDWARE]   (default $ZEUS_DATA_DIR, else ../shared/data;
 * HARDWARE: a simulated hardware profile such as h100 instead of the plain 100 ms counter)
 *
 * The "bound" column is what no profiling can beat on the same budget by much: an oracle that knows
 * which limits contend and spends the whole 1.5x budget on them (zeus__plo_oracle_bound). The
 * "swept" column is the same oracle made to sweep every limit first, as the original does and the
 * default must (a warm-up and a window of profile_steps at each limit), with only the rest of the
 * budget for the contenders: the bound of any profiling that measures every limit once before it
 * measures again. Only an allocation that adapts as it measures could go somewhat past either. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zeus.h>

#include "plo/plo_internal.h"

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

static const char *const names[] = {"ZeusCost(0.5)", "MaxSlowdown(1.1)", "Energy", "Time"};

static void make_selector(int k, zeus_selector *s) {
  if (k == 0) {
    zeus_selector_zeus_cost(s, 0.5, 1);
    s->world_size = 0; /* the replay's GPUs */
  } else if (k == 1) {
    zeus_selector_max_slowdown(s, 1.1);
  } else if (k == 2) {
    zeus_selector_energy(s);
  } else {
    zeus_selector_time(s);
  }
}

/* One table: every profile x selector, robust beside original, the oracle bound; with `lead`, the
 * best limit's lead over the next on the noiseless profile and whether the cell must reach 95 %
 * (lead > 1.5 %: issue 37's rule for GPUs with few limits). Returns nonzero on an error. */
static int table(char (*paths)[1200], size_t np, int runs, const char *hw, bool lead) {
  printf("%-34s %-17s %9s %9s %8s %7s %7s%s\n", "profile", "selector", "robust", "original", "steps", "bound",
         "swept", lead ? "    lead" : "");
  int tot[2] = {0, 0}, cells95 = 0, cells = 0, cells_bound = 0, cells_swept = 0, need = 0, need_ok = 0, need_out = 0;
  double worst = 0;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise nz;
      zeus__plo_noise_issue30(&nz);
      nz.seed = 1;
      if (hw) {
        nz.hardware = hw;
        nz.counter_period_s = 0;
      }
      int r[2];
      double ratio = 0;
      if (zeus__plo_robustness(paths[i], &s, &nz, 0, runs, &r[0], &ratio) ||
          zeus__plo_robustness(paths[i], &s, &nz, 1, runs, &r[1], NULL)) {
        fprintf(stderr, "bench_plo_robust: %s\n", zeus_errmsg());
        return 1;
      }
      double bound = zeus__plo_oracle_bound(paths[i], &s, &nz, 4000, false);
      double swept = zeus__plo_oracle_bound(paths[i], &s, &nz, 4000, true);
      printf("%-34s %-17s %6d/%-2d %6d/%-2d %7.2fx %6.1f%% %6.1f%%", strrchr(paths[i], '/') + 1, names[k], r[0],
             runs, r[1], runs, ratio, 100 * bound, 100 * swept);
      if (lead) {
        zeus__plo_noise clean;
        zeus__plo_noise_init(&clean);
        zeus__plo_replay_result t;
        double ld = 0;
        zeus_selector js = s;
        int rc = zeus__plo_noisy_replay(paths[i], &s, &clean, 1, &t);
        if (!rc && js.kind == ZEUS_SELECTOR_ZEUS_COST) js.world_size = t.ngpu;
        if (rc || zeus__plo_lead(&js, t.meas, t.n, &ld)) {
          fprintf(stderr, "bench_plo_robust: %s\n", zeus_errmsg());
          return 1;
        }
        /* A selector whose noiseless choice is already judged wrong (MaxSlowdown takes the lowest
         * limit within the factor, the judge the least energy within it) cannot be asked for 95 %. */
        bool clean_ok = false;
        if (zeus__plo_judge(&js, t.meas, t.n, t.chosen_w, &clean_ok, NULL)) return 1;
        /* A cell whose swept bound is below 95 % is out of reach of any profiling that sweeps first
         * within the budget: counted apart. */
        bool must = ld > 0.015 && clean_ok, out = must && swept < 0.95, ok = r[0] * 100 >= 95 * runs;
        need += must && !out;
        need_ok += must && !out && ok;
        need_out += out;
        printf(" %6.2f%%%s", 100 * ld,
               out    ? (ok ? " must: ok (past the swept bound)" : " must: out of reach (swept bound < 95 %)")
               : must ? (ok ? " must: ok" : " must: BELOW")
                      : (clean_ok ? "" : " (noiseless choice wrong)"));
      }
      printf("\n");
      cells_bound += bound < 0.95;
      cells_swept += swept < 0.95;
      tot[0] += r[0];
      tot[1] += r[1];
      cells++;
      cells95 += r[0] * 100 >= 95 * runs;
      worst = fmax(worst, ratio);
    }
  }
  printf("total: robust %d/%d, original %d/%d; %d of %d cells at >= 95 %%; profiling <= %.2fx the original's steps\n",
         tot[0], cells * runs, tot[1], cells * runs, cells95, cells, worst);
  printf("%d of %d cells have an oracle bound below 95 %% on this budget (the \"bound\" column), %d a swept bound "
         "(\"swept\")\n", cells_bound, cells, cells_swept);
  if (lead)
    printf("%d of %d cells whose best limit leads by > 1.5 %% and whose swept bound reaches 95 %% are at >= 95 %%; %d "
           "more lead by > 1.5 %% with a swept bound below 95 %%\n", need_ok, need, need_out);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The confidence mode (issue 37) at `conf`: per cell the right runs, the mean cost of the wrong
 * choices over the best (regret), the steps profiling took in multiples of the original's (median
 * and worst) and the runs that reached the cap unsettled; the cap is the end of the first epoch
 * (the replay's epochs are 3x the original's profiling steps). Returns nonzero on an error. */
static int confidence_table(char (*paths)[1200], size_t np, int runs, const char *hw, double conf, double cap) {
  printf("\nconfidence mode %.2f, cap %s: right, regret of the wrong (mean, %% of the best), steps / original's "
         "(median, worst), runs that ended below the target\n",
         conf, cap > 0 ? "max_profile_steps" : "the first epoch (3x the original's steps)");
  if (cap > 0) printf("(max_profile_steps = %gx the original's steps)\n", cap);
  printf("%-34s %-17s %9s %8s %7s %7s %6s\n", "profile", "selector", "right", "regret", "median", "worst", "unset");
  int tot = 0, cells = 0, cells95 = 0;
  double worst_all = 0;
  double *ratios = malloc((size_t)runs * sizeof *ratios);
  if (!ratios) return 1;
  for (size_t i = 0; i < np; i++) {
    for (int k = 0; k < 4; k++) {
      zeus_selector s;
      make_selector(k, &s);
      zeus__plo_noise clean;
      zeus__plo_noise_init(&clean);
      zeus__plo_replay_result t, r;
      if (zeus__plo_noisy_replay(paths[i], &s, &clean, 1, &t)) goto fail;
      zeus_selector js = s;
      if (js.kind == ZEUS_SELECTOR_ZEUS_COST) js.world_size = t.ngpu;
      int right = 0, unset = 0;
      double regret = 0;
      for (int seed = 1; seed <= runs; seed++) {
        zeus__plo_noise nz;
        zeus__plo_noise_issue30(&nz);
        nz.seed = (uint64_t)seed;
        nz.confidence = conf;
        if (cap > 0) { /* a cap of cap x the original's steps, beyond the first epoch */
          nz.max_profile_steps = (long)(cap * (double)t.original_steps);
          nz.steps_per_epoch = nz.max_profile_steps + 1;
        }
        if (hw) {
          nz.hardware = hw;
          nz.counter_period_s = 0;
        }
        if (zeus__plo_noisy_replay(paths[i], &s, &nz, 0, &r)) goto fail;
        bool ok;
        double excess = 0;
        if (zeus__plo_judge(&js, t.meas, t.n, r.chosen_w, &ok, &excess)) goto fail;
        right += ok;
        if (!ok) regret += excess;
        unset += !(r.confidence >= conf);
        ratios[seed - 1] = (double)r.steps / (double)r.original_steps;
      }
      qsort(ratios, (size_t)runs, sizeof *ratios, cmp_double);
      double med = runs % 2 ? ratios[runs / 2] : 0.5 * (ratios[runs / 2 - 1] + ratios[runs / 2]);
      printf("%-34s %-17s %6d/%-2d %7.2f%% %6.2fx %6.2fx %6d\n", strrchr(paths[i], '/') + 1, names[k], right, runs,
             runs - right ? 100 * regret / (runs - right) : 0.0, med, ratios[runs - 1], unset);
      tot += right;
      cells++;
      cells95 += right * 100 >= 95 * runs;
      worst_all = fmax(worst_all, ratios[runs - 1]);
    }
  }
  printf("total: %d/%d right; %d of %d cells at >= 95 %%; profiling <= %.2fx the original's steps\n", tot,
         cells * runs, cells95, cells, worst_all);
  free(ratios);
  return 0;
fail:
  fprintf(stderr, "bench_plo_robust: %s\n", zeus_errmsg());
  free(ratios);
  return 1;
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : getenv("ZEUS_DATA_DIR");
  if (!d || !*d) d = ZEUS_BENCH_DATA_DIR;
  int runs = argc > 2 ? atoi(argv[2]) : 20;
  const char *hw = argc > 3 ? argv[3] : NULL; /* e.g. h100: that hardware model instead of the table's 100 ms counter */
  /* BENCH_PLO_ONLY: "full", "confidence" or "few": only that table */
  const char *only = getenv("BENCH_PLO_ONLY");
  static char paths[32][1200], cut[32][1200];
  char pdir[1100];
  snprintf(pdir, sizeof pdir, "%s/plo-profiles", d);
  DIR *dd = opendir(pdir);
  if (!dd) {
    printf("bench_plo_robust: skipped, no %s (set ZEUS_DATA_DIR)\n", pdir);
    return 0;
  }
  size_t np = 0;
  struct dirent *e;
  while ((e = readdir(dd)) && np < 32) {
    size_t l = strlen(e->d_name);
    if (l > 4 && !strcmp(e->d_name + l - 4, ".csv")) snprintf(paths[np++], sizeof paths[0], "%s/%s", pdir, e->d_name);
  }
  closedir(dd);
  qsort(paths, np, sizeof paths[0], cmp_str);
  printf("plo robustness: %d seeded runs per cell; 5%% step jitter, first window 5%% slow, 2%% drift, %s\n", runs,
         hw ? hw : "100 ms counter");
  if (!only || !strcmp(only, "full")) {
    if (table(paths, np, runs, hw, false)) return 1;
  }
  if (!only || !strcmp(only, "confidence")) {
    static const double levels[] = {0.9, 0.95, 0.99};
    for (size_t l = 0; l < 3; l++)
      if (confidence_table(paths, np, runs, hw, levels[l], 0)) return 1;
    /* With a cap of 12x the original's steps (max_profile_steps), what the seeded test asserts. */
    if (confidence_table(paths, np, runs, hw, 0.95, 12)) return 1;
  }
  if (only && strcmp(only, "few")) return 0;
  /* GPUs with few limits (issue 37): each profile cut to a V100-like range, 250 W down to 100 W
   * (7 limits), in a scratch folder. */
  char tmpl[] = "/tmp/bench_plo_few.XXXXXX";
  if (!mkdtemp(tmpl)) {
    perror("bench_plo_robust: mkdtemp");
    return 1;
  }
  for (size_t i = 0; i < np; i++) {
    snprintf(cut[i], sizeof cut[i], "%s/%s", tmpl, strrchr(paths[i], '/') + 1);
    size_t kept = 0;
    if (zeus__plo_cut_profile(paths[i], cut[i], 250, 100, &kept) || kept != 7) {
      fprintf(stderr, "bench_plo_robust: cutting %s: %s (%zu limits)\n", paths[i], zeus_errmsg(), kept);
      return 1;
    }
  }
  printf("\nGPUs with few limits: every profile cut to 250-100 W (7 limits, a V100's range)\n");
  int rc = table(cut, np, runs, hw, true);
  if (!rc) rc = confidence_table(cut, np, runs, hw, 0.95, 0);
  if (!rc) rc = confidence_table(cut, np, runs, hw, 0.95, 12);
  for (size_t i = 0; i < np; i++) unlink(cut[i]);
  rmdir(tmpl);
  return rc;
}
