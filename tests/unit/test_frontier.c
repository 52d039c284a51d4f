/* frontier: the time–energy frontier solver (Perseus' optimizer). */
#include "test_util.h"

#include <limits.h>
#include <math.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <zeus.h>

#include "core/core.h"
#include "core/csv.h"
#include "frontier/frontier.h"

/* ---- helpers ---- */

static zeus_frontier_profile *synth(int stages, int nclocks, double fwd_s, unsigned seed) {
  zeus_frontier_profile *p;
  assert_zeus_ok(zeus_frontier_profile_new(&p, "synthetic"));
  assert_zeus_ok(zeus__frontier_synth(p, stages, nclocks, fwd_s, seed));
  return p;
}

static char *read_text(const char *path) {
  char *data;
  size_t len;
  assert_zeus_ok(zeus__read_file(path, &data, &len));
  return data;
}

/* Compares `got` with the golden file tests/data/frontier/<name>; with ZEUS_UPDATE_GOLDEN=1
 * rewrites the golden file instead. */
static void check_golden(const char *name, const char *got) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/frontier/%s", ZEUS_SOURCE_DIR, name);
  const char *upd = getenv("ZEUS_UPDATE_GOLDEN");
  if (upd && strcmp(upd, "1") == 0) {
    assert_zeus_ok(zeus__write_file_atomic(path, got, strlen(got)));
    return;
  }
  char *want = read_text(path);
  if (strcmp(want, got) != 0) fail_msg("%s differs from the golden file:\n--- got ---\n%s--- want ---\n%s", name, got, want);
  free(want);
}

/* ---- exhaustive search on tiny pipelines ---- */

typedef struct te {
  double t, e;
} te;

static int by_t(const void *a, const void *b) {
  const te *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

/* The least energy at or below time t of a list sorted by time with prefix minima. */
static double exact_at(const te *a, size_t n, double t) {
  size_t lo = 0, hi = n; /* first entry with time > t */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a[mid].t <= t * (1 + 1e-12)) lo = mid + 1;
    else hi = mid;
  }
  assert_true(lo > 0);
  return a[lo - 1].e;
}

/* Every clock assignment of an S × M pipeline, evaluated with the solver's evaluator; then the
 * solver's points are compared with the exact frontier (least energy at or below each time). */
static void exhaustive_case(int S, int M, int nclocks, zeus_frontier_cost_model model, double bound) {
  zeus_frontier_profile *p = synth(S, nclocks, 0.012, 7u + (unsigned)(S * 10 + M));
  int reduced = S >= 3 && M >= 3; /* keep the search small: only the middle clock count varies */
  if (reduced) {
    /* Stages other than 1 drop their slowest clock. */
    zeus_frontier_profile *q;
    assert_zeus_ok(zeus_frontier_profile_new(&q, "synthetic, reduced"));
    for (int k = 0; k < 2; k++)
      for (size_t r = 0; r < p->nrows[k]; r++) {
        int s = p->row_stage[k][r], c = (int)(r % (size_t)nclocks);
        if (s != 1 && c == nclocks - 1) continue;
        const zeus__fmeas *m = &p->rows[k][r];
        assert_zeus_ok(zeus_frontier_profile_add(q, s, (zeus_frontier_instr)k, m->freq_mhz, m->time_s, m->energy_j));
      }
    zeus_frontier_profile_free(p);
    p = q;
  }
  const double pb = 60.0;
  zeus_frontier_opts o = {.stages = S, .microbatches = M, .blocking_power_w = pb, .cost_model = model,
                          .allow_fewer_microbatches = M < S};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  zeus__fdag d;
  assert_zeus_ok(zeus__fdag_build(&d, S, M));
  int n = d.n, ni = n - 2;
  double time[64] = {0}, energy[64] = {0};
  int digit[64] = {0};
  /* Rows of each (stage, kind) in the profile, in stage order. */
  size_t first[2][8], count[2][8];
  memset(count, 0, sizeof count);
  for (int k = 0; k < 2; k++)
    for (size_t r = p->nrows[k]; r-- > 0;) {
      first[k][p->row_stage[k][r]] = r;
      count[k][p->row_stage[k][r]]++;
    }
  int radix[64];
  size_t total = 1;
  for (int v = 1; v <= ni; v++) {
    radix[v - 1] = (int)count[d.kind[v]][d.stage[v]];
    total *= (size_t)radix[v - 1];
  }
  te *all = malloc(total * sizeof *all);
  assert_non_null(all);
  for (size_t c = 0; c < total; c++) {
    for (int v = 1; v <= ni; v++) {
      int kind = (int)d.kind[v], s = d.stage[v];
      const zeus__fmeas *m = &p->rows[kind][first[kind][s] + (size_t)digit[v - 1]];
      time[v] = m->time_s;
      energy[v] = m->energy_j;
    }
    zeus__fdag_evaluate(&d, time, energy, pb, &all[c].t, &all[c].e);
    for (int k = 0; k < ni && ++digit[k] == radix[k]; k++) digit[k] = 0;
  }
  qsort(all, total, sizeof *all, by_t);
  for (size_t c = 1; c < total; c++)
    if (all[c - 1].e < all[c].e) all[c].e = all[c - 1].e; /* prefix minimum */
  /* Each point against the exact frontier, least energy at or below its evaluated time. */
  size_t npts = zeus_frontier_num_points(f), worst_i = 0;
  te *ours = malloc(npts * sizeof *ours);
  assert_non_null(ours);
  double worst_pt = 0;
  for (size_t i = 0; i < npts; i++) {
    zeus_frontier_point pt;
    assert_zeus_ok(zeus_frontier_get_point(f, i, &pt));
    ours[i] = (te){pt.eval_time_s, pt.eval_energy_j};
    double gap = pt.eval_energy_j / exact_at(all, total, pt.eval_time_s) - 1;
    assert_true(gap > -1e-9); /* a plan cannot beat the exact frontier */
    if (gap > worst_pt) {
      worst_pt = gap;
      worst_i = i;
    }
  }
  /* Our frontier against the exact one: at each of our evaluated times, the least energy of
   * our plans at or below it against the exact least energy. A point a faster one of ours
   * beats, such as the all-slowest point 0 when blocking power makes speed-ups save energy,
   * is not on our frontier: there the faster point stands for it. */
  qsort(ours, npts, sizeof *ours, by_t);
  for (size_t i = 1; i < npts; i++)
    if (ours[i - 1].e < ours[i].e) ours[i].e = ours[i - 1].e;
  double worst = 0, sum = 0, at = 0;
  size_t nchecked = 0;
  for (size_t k = 0; k < npts; k++) {
    double t = ours[k].t;
    double gap = ours[k].e / exact_at(all, total, t) - 1;
    assert_true(gap > -1e-9);
    sum += gap;
    nchecked++;
    if (gap > worst) {
      worst = gap;
      at = t;
    }
  }
  free(ours);
  if (worst > bound) print_message("OVER THE BOUND\n");
  print_message("%d x %d, %s clocks, %s model: %zu points over %zu assignments; our frontier above the exact one: "
                "worst %.3f %% (at %.4f s), mean %.3f %% over %zu times (bound %.1f %%); single points: "
                "worst %.3f %% (point %zu)\n",
                S, M, reduced ? "3 (stage 1) or 2" : nclocks == 5 ? "5" : "3",
                model == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential", npts, total, 100 * worst, at,
                100 * sum / (double)nchecked, nchecked, 100 * bound, 100 * worst_pt, worst_i);
  assert_true(worst <= bound);
  free(all);
  zeus__fdag_free(&d);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

static void exhaustive_2x2_five_clocks_bounds_gap(void **state) {
  (void)state;
  exhaustive_case(2, 2, 5, ZEUS_FRONTIER_COST_EXPONENTIAL, 0.05);
  exhaustive_case(2, 2, 5, ZEUS_FRONTIER_COST_HULL, 0.05);
}

static void exhaustive_2x3_three_clocks_bounds_gap(void **state) {
  (void)state;
  exhaustive_case(2, 3, 3, ZEUS_FRONTIER_COST_EXPONENTIAL, 0.05);
  exhaustive_case(2, 3, 3, ZEUS_FRONTIER_COST_HULL, 0.05);
}

/* Fewer microbatches than stages (allow_fewer_microbatches): a valid 1F1B (stage 0 warms up with
 * both forwards). */
static void exhaustive_3x2_three_clocks_bounds_gap(void **state) {
  (void)state;
  exhaustive_case(3, 2, 3, ZEUS_FRONTIER_COST_EXPONENTIAL, 0.05);
  exhaustive_case(3, 2, 3, ZEUS_FRONTIER_COST_HULL, 0.05);
}

/* A larger 3-stage case: 3 × 3 with 3 clocks on the middle stage and 2 on the others
 * (3^6 · 2^12 assignments). */
static void exhaustive_3x3_bounds_gap(void **state) {
  (void)state;
  exhaustive_case(3, 3, 3, ZEUS_FRONTIER_COST_EXPONENTIAL, 0.05);
  exhaustive_case(3, 3, 3, ZEUS_FRONTIER_COST_HULL, 0.05);
}

/* ---- frontier shape ---- */

static void monotone_case(zeus_frontier_cost_model model) {
  const int S = 4, M = 8;
  zeus_frontier_profile *p = synth(S, 12, 0.02, 3);
  zeus_frontier_opts o = {.stages = S, .microbatches = M, .blocking_power_w = 70, .cost_model = model};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  size_t npts = zeus_frontier_num_points(f);
  assert_true(npts > 10);
  /* The longest chain of instructions bounds how much quantisation can hide. */
  int n = f->dag.n;
  double *ones = calloc((size_t)n * 3, sizeof *ones);
  assert_non_null(ones);
  for (int v = 1; v < n - 1; v++) ones[v] = 1;
  double chain = zeus__fdag_longest(&f->dag, ones, ones + n, ones + 2 * n);
  /* All-fastest and all-slowest iteration times in units. */
  double *q = calloc((size_t)n * 3, sizeof *q);
  assert_non_null(q);
  for (int v = 1; v < n - 1; v++) q[v] = (double)f->fo[f->node_fo[v]].qmin;
  double fastest = zeus__fdag_longest(&f->dag, q, q + n, q + 2 * n);
  /* A duration between two options runs at the faster one, so a plan can also run up to
   * (gap − 1) units per instruction faster than its reported time. */
  long gap = 1;
  for (int k = 0; k < 2 * S; k++)
    for (size_t j = 1; j < f->fo[k].nopt; j++)
      if (f->fo[k].opt[j].quant - f->fo[k].opt[j - 1].quant > gap) gap = f->fo[k].opt[j].quant - f->fo[k].opt[j - 1].quant;
  double dev_hi = 0, dev_lo = 0;
  size_t skipped = 0;
  for (size_t i = 0; i < npts; i++) {
    zeus_frontier_point pt;
    assert_zeus_ok(zeus_frontier_get_point(f, i, &pt));
    assert_int_equal(pt.iteration, (long)i);
    if (i > 0) {
      zeus_frontier_point prev;
      assert_zeus_ok(zeus_frontier_get_point(f, i - 1, &prev));
      assert_true(pt.time_units < prev.time_units);
      skipped += (size_t)(prev.time_units - pt.time_units - 1);
      assert_true(pt.cost_j >= prev.cost_j - 1e-9 * fabs(prev.cost_j));
    }
    double unit = 0.001;
    assert_true(pt.eval_time_s >= pt.time_s - chain * (double)(gap - 1) * unit - 1e-9);
    assert_true(pt.eval_time_s <= pt.time_s + chain * unit + 1e-9);
    dev_hi = fmax(dev_hi, pt.eval_time_s - pt.time_s);
    dev_lo = fmin(dev_lo, pt.eval_time_s - pt.time_s);
  }
  assert_int_equal(skipped, 0); /* one unit per iteration */
  /* First plan: every instruction at its slowest option; last: the all-fastest time. */
  int freqs[64];
  size_t len;
  for (int s = 0; s < S; s++) {
    assert_zeus_ok(zeus_frontier_get_plan(f, 0, s, NULL, freqs, 64, &len));
    assert_int_equal(len, 2 * M);
    for (size_t k = 0; k < len; k++) {
      int v = zeus__fdag_node(&f->dag, s, (int)k);
      const zeus__fopts *fo = &f->fo[f->node_fo[v]];
      assert_int_equal(freqs[k], fo->opt[fo->nopt - 1].freq_mhz);
    }
  }
  zeus_frontier_point last;
  assert_zeus_ok(zeus_frontier_get_point(f, npts - 1, &last));
  assert_int_equal(last.time_units, (long)fastest);
  print_message("4 x 8 %s: %zu points, %ld..%ld units, longest chain %g instructions; evaluated minus "
                "reported time: %+.4f..%+.4f s (largest gap between options %ld units)\n",
                model == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential", npts, f->pts[0].time_units,
                last.time_units, chain, dev_lo, dev_hi, gap);
  free(ones);
  free(q);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

static void frontier_is_monotone_from_slowest_to_fastest(void **state) {
  (void)state;
  monotone_case(ZEUS_FRONTIER_COST_EXPONENTIAL);
  monotone_case(ZEUS_FRONTIER_COST_HULL);
}

static void quantisation_of_exact_multiples_gives_that_many_units(void **state) {
  (void)state;
  /* Plain floating-point floor division gives 29 for 0.030 / 0.001; we give 30. */
  assert_int_equal(zeus__frontier_quantise(0.030, 0.001), 30);
  assert_int_equal(zeus__frontier_quantise(0.0309999, 0.001), 30);
  assert_int_equal(zeus__frontier_quantise(0.0299999, 0.001), 29);
  assert_int_equal(zeus__frontier_quantise(0.3, 0.1), 3);
  assert_int_equal(zeus__frontier_quantise(0.05016, 0.001), 50);
}

/* ---- golden files ---- */

static void golden_1f1b_order(void **state) {
  (void)state;
  const int cases[2][2] = {{4, 8}, {3, 5}};
  for (int c = 0; c < 2; c++) {
    int S = cases[c][0], M = cases[c][1];
    zeus__buf b = {0};
    zeus_frontier_instr kinds[64];
    int mbs[64];
    for (int s = 0; s < S; s++) {
      zeus__fdag_1f1b_order(S, M, s, kinds, mbs);
      assert_zeus_ok(zeus__buf_printf(&b, "stage %d:", s));
      for (int k = 0; k < 2 * M; k++)
        assert_zeus_ok(zeus__buf_printf(&b, " %c%d", kinds[k] == ZEUS_FRONTIER_FORWARD ? 'F' : 'B', mbs[k]));
      assert_zeus_ok(zeus__buf_puts(&b, "\n"));
    }
    char name[64];
    snprintf(name, sizeof name, "order_%dx%d.txt", S, M);
    check_golden(name, b.data);
    zeus__buf_free(&b);
  }
}

/* DeepSpeed's TrainSchedule (which the original's Synchronous1F1B follows) walks
 * 2 × (M + S − 1) steps; on even steps even stages run a forward and odd stages a backward,
 * on odd steps the other way round, of the microbatch given by the step and the stage; ids
 * outside 0..M − 1 are idle steps. Our order must be the same, also with M < S. */
static int step_microbatch(int S, int s, int step, bool *forward) {
  bool even_step = step % 2 == 0, even_stage = s % 2 == 0;
  *forward = even_step == even_stage;
  if (*forward) return (even_step ? step / 2 : (step - 1) / 2) - s / 2;
  return even_step ? step / 2 - S + (s + 1) / 2 : (step - 1) / 2 - S + 1 + s / 2;
}

static void order_1f1b_matches_deepspeed_schedule_also_below_stage_count(void **state) {
  (void)state;
  for (int S = 1; S <= 6; S++)
    for (int M = 1; M <= 8; M++)
      for (int s = 0; s < S; s++) {
        zeus_frontier_instr kinds[16];
        int mbs[16], k = 0;
        zeus__fdag_1f1b_order(S, M, s, kinds, mbs);
        for (int step = 0; step < 2 * (M + S - 1); step++) {
          bool fwd;
          int mb = step_microbatch(S, s, step, &fwd);
          if (mb < 0 || mb >= M) continue;
          assert_true(k < 2 * M);
          if ((kinds[k] == ZEUS_FRONTIER_FORWARD) != fwd || mbs[k] != mb)
            fail_msg("S %d M %d stage %d instruction %d: %c%d, DeepSpeed %c%d", S, M, s, k,
                     kinds[k] == ZEUS_FRONTIER_FORWARD ? 'F' : 'B', mbs[k], fwd ? 'F' : 'B', mb);
          k++;
        }
        assert_int_equal(k, 2 * M);
      }
}

static void golden_options_and_hull_of_a_small_profile(void **state) {
  (void)state;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/data/frontier/small_profile.csv", ZEUS_SOURCE_DIR);
  zeus_frontier_profile *p;
  assert_zeus_ok(zeus_frontier_profile_load(&p, path));
  zeus__buf b = {0};
  for (int model = 0; model < 2; model++) {
    zeus_frontier_opts o = {.stages = 2, .microbatches = 2, .blocking_power_w = 50, .unit_time_s = 0.001,
                            .noise_factor = 0.95, .cost_model = (zeus_frontier_cost_model)model};
    for (int s = 0; s < 2; s++)
      for (int k = 0; k < 2; k++) {
        zeus__fopts fo;
        assert_zeus_ok(zeus__fopts_build(&fo, p, s, (zeus_frontier_instr)k, &o));
        assert_zeus_ok(zeus__fopts_dump(&fo, &b));
        zeus__fopts_free(&fo);
      }
  }
  check_golden("options_small.txt", b.data);
  zeus__buf_free(&b);
  zeus_frontier_profile_free(p);
}

/* ---- outputs ---- */

static void outputs_write_csv_and_plan_files(void **state) {
  (void)state;
  zeus_frontier_profile *p = synth(3, 8, 0.01, 5);
  zeus_frontier_opts o = {.stages = 3, .microbatches = 4, .blocking_power_w = 60};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  size_t npts = zeus_frontier_num_points(f);
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  zeus_frontier_write_opts wo = {.sample = 5};
  assert_zeus_ok(zeus_frontier_write(f, dir, &wo));
  snprintf(path, sizeof path, "%s/frontier.csv", dir);
  char *csv = read_text(path);
  assert_non_null(strstr(csv, "iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,eval_energy_j,dominated\n0,"));
  size_t lines = 0;
  for (char *c = csv; *c; c++) lines += *c == '\n';
  assert_int_equal(lines, npts + 1);
  free(csv);
  size_t files = 0;
  for (size_t i = 0; i < npts; i++) {
    snprintf(path, sizeof path, "%s/freqs_pipeline_%05zu.py", dir, i);
    files += access(path, F_OK) == 0;
  }
  assert_true(files >= 2 && files <= 5);
  snprintf(path, sizeof path, "%s/freqs_pipeline_%05zu.py", dir, npts - 1);
  char *plan = read_text(path);
  /* One list per stage of ("forward"|"backward", MHz), then comment lines. */
  assert_true(strncmp(plan, "[\n    [(\"forward\", ", 19) == 0);
  size_t stages = 0;
  for (char *c = plan; (c = strstr(c, "    [")); c++) stages++;
  assert_int_equal(stages, 3);
  assert_non_null(strstr(plan, "]\n# iteration: "));
  assert_non_null(strstr(plan, "\n# cost_j: "));
  free(plan);
  /* Plots. */
  snprintf(path, sizeof path, "%s/frontier.svg", dir);
  assert_zeus_ok(zeus_frontier_write_plot_svg(f, path, &wo));
  char *svg = read_text(path);
  assert_non_null(strstr(svg, "<svg"));
  assert_non_null(strstr(svg, "</svg>"));
  free(svg);
  snprintf(path, sizeof path, "%s/timeline.svg", dir);
  assert_zeus_ok(zeus_frontier_write_timeline_svg(f, npts / 2, path));
  svg = read_text(path);
  assert_non_null(strstr(svg, "stroke-width='2.5'")); /* the critical path */
  free(svg);
  assert_zeus_err(zeus_frontier_write_timeline_svg(f, npts, path), ZEUS_ERANGE, "there are");
  zeus_frontier_write_opts both = {.every = 2, .sample = 3};
  assert_zeus_err(zeus_frontier_write(f, dir, &both), ZEUS_EINVAL, "not both");
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

/* ---- slack reclamation ---- */

/* Reclaiming slack changes only the clocks: the same points, times and model costs, and per
 * point an evaluated energy and time no higher than the durations' own clocks give. */
static void reclaim_case(zeus_frontier_profile *p, int S, int M, zeus_frontier_cost_model cm, const char *label) {
  zeus_frontier_opts o = {.stages = S, .microbatches = M, .blocking_power_w = 70, .cost_model = cm,
                          .allow_fewer_microbatches = M < S};
  zeus_frontier *fr, *fk;
  assert_zeus_ok(zeus_frontier_solve(&fr, p, &o));
  o.slack = ZEUS_FRONTIER_SLACK_KEEP;
  assert_zeus_ok(zeus_frontier_solve(&fk, p, &o));
  size_t n = zeus_frontier_num_points(fr), better = 0, changed = 0;
  assert_int_equal(n, zeus_frontier_num_points(fk));
  double most = 0;
  for (size_t i = 0; i < n; i++) {
    zeus_frontier_point a, b;
    assert_zeus_ok(zeus_frontier_get_point(fr, i, &a));
    assert_zeus_ok(zeus_frontier_get_point(fk, i, &b));
    assert_int_equal(a.time_units, b.time_units);
    assert_true(a.cost_j == b.cost_j);
    assert_true(a.eval_time_s <= b.eval_time_s + 1e-12);
    assert_true(a.eval_energy_j <= b.eval_energy_j + 1e-9 * b.eval_energy_j);
    if (a.eval_energy_j < b.eval_energy_j - 1e-9 * b.eval_energy_j) better++;
    most = fmax(most, 1 - a.eval_energy_j / b.eval_energy_j);
    /* Reclaimed clocks are never faster than the durations' own. */
    for (int s = 0; s < S; s++) {
      int fa[512], fb[512];
      size_t len;
      assert_zeus_ok(zeus_frontier_get_plan(fr, i, s, NULL, fa, 512, &len));
      assert_zeus_ok(zeus_frontier_get_plan(fk, i, s, NULL, fb, 512, &len));
      for (size_t k = 0; k < len; k++) {
        assert_true(fa[k] <= fb[k]);
        changed += fa[k] != fb[k];
      }
    }
  }
  /* Point 0 is all-slowest either way. */
  zeus_frontier_point a0, b0;
  assert_zeus_ok(zeus_frontier_get_point(fr, 0, &a0));
  assert_zeus_ok(zeus_frontier_get_point(fk, 0, &b0));
  assert_true(a0.eval_energy_j == b0.eval_energy_j);
  print_message("%s, %s model: reclaiming slack lowers the evaluated energy of %zu of %zu points (by up to %.3f %%; "
                "%zu instruction clocks moved)\n",
                label, cm == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential", better, n, 100 * most, changed);
  assert_true(better > 0);
  zeus_frontier_free(fr);
  zeus_frontier_free(fk);
}

static void slack_reclaim_never_raises_energy_or_time(void **state) {
  (void)state;
  zeus_frontier_profile *p = synth(4, 12, 0.02, 3);
  reclaim_case(p, 4, 8, ZEUS_FRONTIER_COST_EXPONENTIAL, "synthetic 4 x 8");
  reclaim_case(p, 4, 8, ZEUS_FRONTIER_COST_HULL, "synthetic 4 x 8");
  reclaim_case(p, 4, 3, ZEUS_FRONTIER_COST_HULL, "synthetic 4 x 3");
  zeus_frontier_profile_free(p);
}

/* ---- minimum cut with lower bounds ---- */

static unsigned rng_next(unsigned *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* Every s–t cut of a small network by enumeration: the least value, and the smallest set of
 * least value (the intersection of all of them; 0 when every cut is infinite). */
static int brute_min_cut(int n, const zeus__lbedge *e, int m, double *best, unsigned *smallest) {
  *best = INFINITY;
  unsigned inter = 0;
  for (unsigned mask = 0; mask < (1u << (n - 2)); mask++) {
    unsigned S = 1u | (mask << 1); /* node 0 in, node n − 1 out */
    double v = 0;
    for (int i = 0; i < m; i++) {
      bool u_in = (S >> e[i].u) & 1u, v_in = (S >> e[i].v) & 1u;
      if (u_in && !v_in) v += e[i].ub;
      else if (!u_in && v_in) v -= e[i].lb;
    }
    if (isinf(v)) continue;
    if (v < *best - 1e-9) {
      *best = v;
      inter = S;
    } else if (v <= *best + 1e-9) {
      inter &= S;
    }
  }
  *smallest = inter;
  return isinf(*best) ? 0 : 1;
}

static void min_cut_with_lower_bounds_matches_enumeration_across_warm_starts(void **state) {
  (void)state;
  unsigned x = 12345u;
  size_t finite = 0, infinite = 0;
  for (int trial = 0; trial < 60; trial++) {
    zeus__mincut c = {0};
    int n = 4 + (int)(rng_next(&x) % 7); /* 4..10 nodes */
    zeus__lbedge e[64];
    /* One sequence of networks sharing one state: keys name the node pair, capacities and the
     * edge set change from call to call as in the solver. */
    for (int call = 0; call < 8; call++) {
      int m = 0;
      for (int u = 0; u < n; u++)
        for (int v = u + 1; v < n && m < 64; v++) {
          if (rng_next(&x) % 100 < 45) continue;
          double ub = (double)(rng_next(&x) % 1000) / 100.0 + 0.01;
          double lb = (rng_next(&x) % 3 == 0) ? 0 : ub * (double)(rng_next(&x) % 1000) / 1000.0;
          if (rng_next(&x) % 5 == 0) ub = INFINITY;
          e[m++] = (zeus__lbedge){u, v, lb, ub, u * n + v};
        }
      double want, got = NAN;
      unsigned smallest;
      int exp_rc = brute_min_cut(n, e, m, &want, &smallest);
      unsigned char side[16];
      int rc = zeus__mincut_lb(&c, n, e, m, 0, n - 1, side, &got);
      if (rc != exp_rc) fail_msg("trial %d call %d: rc %d, enumeration says %d", trial, call, rc, exp_rc);
      if (rc == 0) {
        infinite++;
        continue;
      }
      finite++;
      if (fabs(got - want) > 1e-7 * (1 + fabs(want)))
        fail_msg("trial %d call %d: cut value %.9f, enumeration %.9f", trial, call, got, want);
      unsigned S = 0;
      for (int v = 0; v < n; v++) S |= (unsigned)(side[v] != 0) << v;
      if (S != smallest) fail_msg("trial %d call %d: source side %#x, smallest minimum cut %#x", trial, call, S, smallest);
    }
    zeus__mincut_free(&c);
  }
  print_message("%zu finite and %zu infinite minimum cuts checked against enumeration\n", finite, infinite);
  assert_true(finite > 100 && infinite > 5);
  /* An edge against the topological order is refused. */
  zeus__mincut c = {0};
  zeus__lbedge bad = {2, 1, 0, 1, 0};
  unsigned char side[4];
  double v;
  assert_zeus_err(zeus__mincut_lb(&c, 4, &bad, 1, 0, 3, side, &v), ZEUS_EINTERNAL, "topological order");
  zeus__mincut_free(&c);
}

/* ---- bad input ---- */

static zeus_frontier_profile *load_text(const char *dir, const char *text, int *rc) {
  char path[512];
  snprintf(path, sizeof path, "%s/p.csv", dir);
  zeus_test_write_file(path, text);
  zeus_frontier_profile *p = NULL;
  *rc = zeus_frontier_profile_load(&p, path);
  return p;
}

static void bad_input_gives_clear_errors(void **state) {
  (void)state;
  char dir[256];
  zeus_test_tmpdir(dir, sizeof dir);
  int rc;
  zeus_frontier_profile *p;
  /* Missing column. */
  p = load_text(dir, "stage,instruction,frequency,time\n0,forward,1410,0.01\n", &rc);
  assert_null(p);
  assert_int_equal(rc, ZEUS_EPARSE);
  assert_non_null(strstr(zeus_errmsg(), "missing column 'energy'"));
  assert_non_null(strstr(zeus_errmsg(), "p.csv"));
  /* Non-numeric value: file, line and column. */
  p = load_text(dir, "stage,instruction,frequency,time,energy\n0,forward,1410,0.01,1\n0,backward,1410,fast,2\n", &rc);
  assert_null(p);
  assert_int_equal(rc, ZEUS_EPARSE);
  assert_non_null(strstr(zeus_errmsg(), "p.csv:3:4"));
  /* Unknown instruction. */
  p = load_text(dir, "stage,instruction,frequency,time,energy\n0,load,1410,0.01,1\n", &rc);
  assert_null(p);
  assert_non_null(strstr(zeus_errmsg(), "forward or backward"));
  /* A stage with no options for one instruction; extra columns are ignored. */
  p = load_text(dir,
                "rank,stage,instruction,frequency,time,energy\n"
                "0,0,forward,1410,0.010,2\n0,0,backward,1410,0.020,4\n1,1,forward,1410,0.011,2\n",
                &rc);
  assert_zeus_ok(rc);
  zeus_frontier *f = NULL;
  zeus_frontier_opts o = {.stages = 2, .microbatches = 2, .blocking_power_w = 50};
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "stage 1 has no options for backward");
  /* Fewer stages in the file than asked for. */
  o.stages = 3;
  o.microbatches = 4;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "has 2 stages, fewer than the 3 stages");
  /* No microbatches. */
  o.stages = 2;
  o.microbatches = 0;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "microbatches: 0, expected at least 1");
  /* Bad options. */
  o.microbatches = 2;
  o.noise_factor = 1.5;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "noise factor");
  o.noise_factor = 0;
  o.pareto = (zeus_frontier_pareto)7;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "pareto filter: 7");
  o.pareto = ZEUS_FRONTIER_PARETO_EFFECTIVE;
  o.slack = (zeus_frontier_slack)9;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "slack: 9");
  assert_null(f);
  zeus_frontier_profile_free(p);
  /* A time shorter than one unit. */
  p = load_text(dir, "stage,instruction,frequency,time,energy\n0,forward,1410,0.0004,1\n0,backward,1410,0.002,1\n", &rc);
  assert_zeus_ok(rc);
  o = (zeus_frontier_opts){.stages = 1, .microbatches = 1, .blocking_power_w = 50};
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "less than one time unit");
  zeus_frontier_profile_free(p);
}

static int run_cli(const char *args, char *out, size_t cap) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' frontier %s 2>&1", ZEUS_CLI_PATH, args);
  FILE *pp = popen(cmd, "r");
  assert_non_null(pp);
  size_t n = fread(out, 1, cap - 1, pp);
  out[n] = 0;
  int st = pclose(pp);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void cli_answers_help_and_reports_errors(void **state) {
  (void)state;
  static char out[65536];
  assert_int_equal(run_cli("--help", out, sizeof out), 0);
  assert_non_null(strstr(out, "Example"));
  assert_non_null(strstr(out, "ZEUS_LOG_LEVEL"));
  assert_int_equal(run_cli("--stages 2", out, sizeof out), 2);
  assert_non_null(strstr(out, "required"));
  char dir[256], args[1024];
  zeus_test_tmpdir(dir, sizeof dir);
  char path[512];
  snprintf(path, sizeof path, "%s/p.csv", dir);
  zeus_test_write_file(path,
                       "stage,instruction,frequency,time,energy\n"
                       "0,forward,1410,0.010,3\n0,forward,1000,0.013,2.5\n0,forward,800,0.016,2.4\n"
                       "0,backward,1410,0.020,6\n0,backward,1000,0.026,5\n0,backward,800,0.032,4.9\n"
                       "1,forward,1410,0.011,3\n1,forward,1000,0.014,2.6\n1,forward,800,0.018,2.5\n"
                       "1,backward,1410,0.021,6\n1,backward,1000,0.027,5.2\n1,backward,800,0.034,5.1\n");
  snprintf(args, sizeof args, "--profile %s --stages 3 --microbatches 4 --blocking-power 40", path);
  assert_int_equal(run_cli(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "has 2 stages, fewer than the 3 stages"));
  /* Fewer microbatches than stages: refused (usually swapped counts), solved when asked for. */
  snprintf(args, sizeof args, "--profile %s --stages 2 --microbatches 1 --blocking-power 40 --json", path);
  assert_int_equal(run_cli(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "microbatches: 1 is fewer than the 2 stages"));
  snprintf(args, sizeof args,
           "--profile %s --stages 2 --microbatches 1 --blocking-power 40 --json --allow-fewer-microbatches", path);
  assert_int_equal(run_cli(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "\"num_points\": "));
  snprintf(args, sizeof args,
           "--profile %s --stages 2 --microbatches 3 --blocking-power 40 --out %s/o --every 3 "
           "--plot %s/o/f.svg --timeline last --cost-model hull --json",
           path, dir, dir);
  assert_int_equal(run_cli(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "\"num_points\": "));
  snprintf(path, sizeof path, "%s/o/frontier.csv", dir);
  assert_int_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/o/freqs_pipeline_00000.py", dir);
  assert_int_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/o/f.svg", dir);
  assert_int_equal(access(path, F_OK), 0);
}

/* ---- the SOSP'24 profiles against the authors' frontier ---- */

/* The reference frontier (frontier/a100_sxm/<model>_bf16_mb12.csv, columns time,energy) came
 * from the original (lowtime); its energy is that solver's model figure, cost + blocking
 * power × S × time, not a measurement. With `pareto` = energy (the original's filter) and
 * `exact`, our model figure must reproduce it; in every case our evaluated (measured) energy at
 * each reference time must be at most `bound` above it. */
static void sosp24_case(const char *model_name, zeus_frontier_cost_model cm, zeus_frontier_pareto pareto,
                        double bound, bool exact) {
  const char *data = zeus_test_data_dir();
  char path[1024];
  snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/%s+a100_sxm_bf16.csv", data, model_name);
  zeus_frontier_profile *p;
  assert_zeus_ok(zeus_frontier_profile_load(&p, path));
  zeus_frontier_opts o = {.stages = 8, .microbatches = 12, .blocking_power_w = 83.64, .unit_time_s = 0.001,
                          .cost_model = cm, .pareto = pareto};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  snprintf(path, sizeof path, "%s/perseus-sosp24/frontier/a100_sxm/%s_bf16_mb12.csv", data, model_name);
  zeus__csv *ref;
  assert_zeus_ok(zeus__csv_read_file(path, &ref));
  size_t ct, ce, npts = zeus_frontier_num_points(f);
  assert_zeus_ok(zeus__csv_require_col(ref, "time", &ct));
  assert_zeus_ok(zeus__csv_require_col(ref, "energy", &ce));
  long ref_fastest = LONG_MAX;
  double above = -INFINITY, below = INFINITY, model_diff = 0;
  long at_above = 0, at_below = 0;
  size_t compared = 0;
  for (size_t r = 0; r < zeus__csv_nrows(ref); r++) {
    double t, e;
    assert_zeus_ok(zeus__csv_double(ref, r, ct, &t));
    assert_zeus_ok(zeus__csv_double(ref, r, ce, &e));
    long units = lround(t / 0.001);
    if (units < ref_fastest) ref_fastest = units;
    /* Our points are one per unit, from pts[0] down. */
    long idx = f->pts[0].time_units - units;
    if (idx < 0 || (size_t)idx >= npts) continue;
    assert_int_equal(f->pts[idx].time_units, units);
    double gap = f->pts[idx].eval_energy_j / e - 1;
    compared++;
    if (gap > above) { above = gap; at_above = units; }
    if (gap < below) { below = gap; at_below = units; }
    model_diff = fmax(model_diff, fabs(f->pts[idx].cost_with_blocking_j - e));
  }
  zeus_frontier_point last;
  assert_zeus_ok(zeus_frontier_get_point(f, npts - 1, &last));
  print_message("%s, %s model, %s Pareto filter, 8 stages x 12 microbatches: %zu points (%.3f..%.3f s), %zu "
                "compared with the reference; evaluated energy vs reference: largest above %+.3f %% at %.3f s, "
                "largest below %+.3f %% at %.3f s (bound %+.1f %%); model energy vs reference: largest "
                "difference %.2g J\n",
                model_name, cm == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential",
                pareto == ZEUS_FRONTIER_PARETO_ENERGY ? "energy" : "effective-cost", npts, f->pts[0].time_s,
                last.time_s, compared, 100 * above, at_above * 0.001, 100 * below, at_below * 0.001, 100 * bound,
                model_diff);
  assert_int_equal(last.time_units, ref_fastest);
  assert_true(compared + 5 >= zeus__csv_nrows(ref));
  assert_true(above <= bound);
  if (exact) {
    /* Every reference point, which starts one unit below our all-slowest point. */
    assert_int_equal(compared, zeus__csv_nrows(ref));
    assert_int_equal(npts, compared + 1);
    assert_true(model_diff < 1e-3);
  }
  zeus__csv_free(ref);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

static void sosp24_gpt3_matches_reference_frontier(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  sosp24_case("gpt3-175b", ZEUS_FRONTIER_COST_HULL, ZEUS_FRONTIER_PARETO_EFFECTIVE, 0.005, false);
  sosp24_case("gpt3-175b", ZEUS_FRONTIER_COST_EXPONENTIAL, ZEUS_FRONTIER_PARETO_EFFECTIVE, 0.005, false);
}

static void sosp24_bloom_matches_reference_frontier(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  sosp24_case("bloom", ZEUS_FRONTIER_COST_HULL, ZEUS_FRONTIER_PARETO_EFFECTIVE, 0.005, false);
  sosp24_case("bloom", ZEUS_FRONTIER_COST_EXPONENTIAL, ZEUS_FRONTIER_PARETO_EFFECTIVE, 0.005, false);
}

/* With the original's option filter our exponential model is the original's: the model
 * frontier reproduces the reference to a millijoule at every point. */
static void sosp24_energy_filter_reproduces_reference_model_frontier(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  sosp24_case("gpt3-175b", ZEUS_FRONTIER_COST_EXPONENTIAL, ZEUS_FRONTIER_PARETO_ENERGY, 0.005, true);
  sosp24_case("bloom", ZEUS_FRONTIER_COST_EXPONENTIAL, ZEUS_FRONTIER_PARETO_ENERGY, 0.005, true);
}

/* ---- plans at scale: delta encoding, dominance, progress, limits ---- */

/* The plan store gives back every plan pushed, by random access and walking in order, and holds
 * far less than full copies when plans change little. */
static void plan_store_returns_every_plan_and_stays_small(void **state) {
  (void)state;
  enum { N = 300, P = 2000 };
  static int32_t all[P][N];
  zeus__fplans pl;
  assert_zeus_ok(zeus__fplans_init(&pl, N));
  unsigned x = 12345;
  for (int v = 0; v < N; v++) all[0][v] = v % 7;
  for (int i = 0; i < P; i++) {
    if (i > 0) {
      memcpy(all[i], all[i - 1], sizeof all[i]);
      /* Mostly a few changes; now and then none, or a whole new plan (forces a checkpoint). */
      int changes = i % 97 == 0 ? N : i % 5 == 0 ? 0 : 1 + i % 3;
      for (int k = 0; k < changes; k++) {
        x = x * 1103515245u + 12345u;
        all[i][(x >> 8) % N] = (int32_t)((x >> 4) % 50);
      }
    }
    assert_zeus_ok(zeus__fplans_push(&pl, all[i]));
  }
  assert_int_equal(pl.npts, P);
  int32_t q[N], w[N];
  for (int i = 0; i < P; i++) {
    zeus__fplans_get(&pl, (size_t)i, q);
    assert_memory_equal(q, all[i], sizeof q);
    if (i == 0) zeus__fplans_get(&pl, 0, w);
    else zeus__fplans_step(&pl, (size_t)i, w);
    assert_memory_equal(w, all[i], sizeof w);
  }
  size_t bytes = zeus__fplans_bytes(&pl), full = sizeof all;
  print_message("plan store: %d plans of %d entries in %zu bytes (full copies: %zu)\n", P, N, bytes, full);
  assert_true(bytes * 4 < full);
  assert_true(pl.nck > 1 && pl.nck < P / 10);
  zeus__fplans_free(&pl);
}

/* Brute force: a point is dominated exactly when another is no slower, no costlier and better
 * in one, by the evaluated figures. */
static size_t check_dominance(const zeus_frontier *f) {
  size_t n = zeus_frontier_num_points(f), count = 0;
  for (size_t i = 0; i < n; i++) {
    zeus_frontier_point a;
    assert_zeus_ok(zeus_frontier_get_point(f, i, &a));
    bool dom = false;
    for (size_t j = 0; j < n && !dom; j++) {
      zeus_frontier_point b;
      assert_zeus_ok(zeus_frontier_get_point(f, j, &b));
      dom = b.eval_time_s <= a.eval_time_s && b.eval_energy_j <= a.eval_energy_j &&
            (b.eval_time_s < a.eval_time_s || b.eval_energy_j < a.eval_energy_j);
    }
    if (dom != a.dominated) fail_msg("point %zu: dominated %d, brute force says %d", i, a.dominated, dom);
    count += dom;
  }
  return count;
}

static void dominated_points_are_marked_and_can_be_dropped(void **state) {
  (void)state;
  zeus_frontier_profile *p = synth(4, 12, 0.02, 3);
  zeus_frontier_opts o = {.stages = 4, .microbatches = 8, .blocking_power_w = 70};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  size_t n = zeus_frontier_num_points(f), ndom = check_dominance(f);
  print_message("synthetic 4 x 8: %zu of %zu points dominated\n", ndom, n);
  assert_true(ndom > 0 && ndom < n);
  /* frontier.csv without the dominated rows; the plans written are among the kept points. */
  zeus_frontier_write_opts wo = {.drop_dominated = true};
  char *csv;
  assert_zeus_ok(zeus_frontier_csv(f, &wo, &csv));
  size_t rows = 0;
  for (char *c = csv; *c; c++) rows += *c == '\n';
  assert_int_equal(rows, n - ndom + 1);
  assert_null(strstr(csv, ",1\n"));
  zeus_free(csv);
  assert_zeus_ok(zeus_frontier_csv(f, NULL, &csv));
  rows = 0;
  for (char *c = csv; *c; c++) rows += *c == '\n';
  assert_int_equal(rows, n + 1);
  assert_non_null(strstr(csv, ",1\n"));
  zeus_free(csv);
  assert_int_equal(zeus_frontier_count_plans(f, &wo), (long)(n - ndom));
  assert_int_equal(zeus_frontier_count_plans(f, NULL), (long)n);
  wo.sample = 4;
  long k = zeus_frontier_count_plans(f, &wo);
  assert_true(k >= 2 && k <= 4);
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  assert_zeus_ok(zeus_frontier_write(f, dir, &wo));
  size_t files = 0;
  for (size_t i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%s/freqs_pipeline_%05zu.py", dir, i);
    if (access(path, F_OK) != 0) continue;
    files++;
    zeus_frontier_point pt;
    assert_zeus_ok(zeus_frontier_get_point(f, i, &pt));
    assert_false(pt.dominated);
  }
  assert_int_equal(files, (size_t)k);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

typedef struct progress_log {
  size_t calls, stop_at;
  zeus_frontier_progress first, last;
  bool monotone;
} progress_log;

static int log_progress(const zeus_frontier_progress *p, void *ctx) {
  progress_log *l = ctx;
  if (l->calls == 0) l->first = *p;
  else if (p->points != l->last.points + 1 || !(p->time_s < l->last.time_s)) l->monotone = false;
  l->last = *p;
  l->calls++;
  return l->stop_at && p->points >= l->stop_at;
}

static void progress_is_reported_per_point_and_can_stop_the_solve(void **state) {
  (void)state;
  zeus_frontier_profile *p = synth(3, 10, 0.01, 4);
  progress_log l = {.monotone = true};
  zeus_frontier_opts o = {.stages = 3, .microbatches = 6, .blocking_power_w = 60, .progress = log_progress,
                          .progress_ctx = &l};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  size_t n = zeus_frontier_num_points(f);
  zeus_frontier_point first, last;
  assert_zeus_ok(zeus_frontier_get_point(f, 0, &first));
  assert_zeus_ok(zeus_frontier_get_point(f, n - 1, &last));
  assert_int_equal(l.calls, n);
  assert_true(l.monotone);
  assert_int_equal(l.first.points, 1);
  assert_int_equal(l.last.points, n);
  assert_true(l.first.slowest_time_s == first.time_s && l.last.time_s == last.time_s);
  assert_true(fabs(l.first.fastest_time_s - last.time_s) < 1e-9); /* known before solving */
  assert_true(l.first.max_points >= n);
  zeus_frontier_free(f);
  /* A non-zero return stops after that point, keeping the points so far. */
  l = (progress_log){.monotone = true, .stop_at = 5};
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  assert_int_equal(zeus_frontier_num_points(f), 5);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

static void solves_past_the_limits_are_refused_naming_the_limit(void **state) {
  (void)state;
  zeus_frontier_profile *p = synth(2, 10, 0.01, 4);
  zeus_frontier *f = NULL;
  /* A unit time far below the profile's resolution: tables of ~1e7 entries per instruction. */
  zeus_frontier_opts o = {.stages = 2, .microbatches = 4, .blocking_power_w = 60, .unit_time_s = 1e-9};
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_ERANGE, "use a larger unit time");
  assert_non_null(strstr(zeus_errmsg(), "16777216"));
  /* Too many points: refused, unless max_iterations bounds them. */
  o.unit_time_s = 1e-8;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_ERANGE, "more than the limit of 4194304");
  o.max_iterations = 50;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  assert_int_equal(zeus_frontier_num_points(f), 50);
  zeus_frontier_free(f);
  f = NULL;
  /* Too many instructions. */
  o = (zeus_frontier_opts){.stages = 11, .microbatches = 100000, .blocking_power_w = 60};
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_ERANGE, "instructions, more than the limit");
  assert_null(f);
  zeus_frontier_profile_free(p);
}

static void profile_with_bom_is_read_and_special_files_are_refused(void **state) {
  (void)state;
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  int rc;
  zeus_frontier_profile *p = load_text(dir,
                                       "\xEF\xBB\xBFstage,instruction,frequency,time,energy\n"
                                       "0,forward,1410,0.010,3\n0,backward,1410,0.020,6\n",
                                       &rc);
  assert_zeus_ok(rc);
  assert_int_equal(zeus_frontier_profile_num_stages(p), 1);
  zeus_frontier_profile_free(p);
  p = NULL;
  assert_zeus_err(zeus_frontier_profile_load(&p, "/dev/zero"), ZEUS_EINVAL, "not a regular file");
  assert_zeus_err(zeus_frontier_profile_load(&p, dir), ZEUS_EINVAL, "not a regular file");
  snprintf(path, sizeof path, "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_zeus_err(zeus_frontier_profile_load(&p, path), ZEUS_EINVAL, "not a regular file"); /* never blocks */
  snprintf(path, sizeof path, "%s/big.csv", dir);
  FILE *fp = fopen(path, "w");
  assert_non_null(fp);
  assert_int_equal(ftruncate(fileno(fp), (64L << 20) + 1), 0);
  fclose(fp);
  assert_zeus_err(zeus_frontier_profile_load(&p, path), ZEUS_ERANGE, "64 MiB");
  unlink(path);
  assert_null(p);
}

/* The frontier SVG: decimated (its size does not follow the number of points), SI-prefixed axes,
 * markers for the plans written and the least-energy plan, a legend away from every dot. */
static void frontier_plot_is_decimated_and_labelled(void **state) {
  (void)state;
  zeus_frontier_profile *p = synth(4, 24, 0.05, 6);
  zeus_frontier_opts o = {.stages = 4, .microbatches = 16, .blocking_power_w = 70, .unit_time_s = 0.0002};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  size_t n = zeus_frontier_num_points(f);
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/frontier.svg", dir);
  zeus_frontier_write_opts wo = {.sample = 7};
  assert_zeus_ok(zeus_frontier_write_plot_svg(f, path, &wo));
  char *svg = read_text(path);
  size_t len = strlen(svg), circles = 0, coords = 0;
  for (char *c = svg; (c = strstr(c, "<circle")); c++) circles++;
  for (char *c = strstr(svg, "<polyline"); c && *c; c++) coords += *c == ',';
  print_message("frontier plot of %zu points: %zu bytes, %zu circles, ~%zu polyline vertices\n", n, len, circles,
                coords);
  assert_true(n > 5000);
  assert_true(len < 120000);     /* the old plot wrote every point twice: ~25 bytes × 2 × n */
  assert_true(circles < 2 * 1000);
  assert_non_null(strstr(svg, "iteration energy (kJ)"));
  assert_non_null(strstr(svg, "iteration time (s)"));
  assert_null(strstr(svg, "e+0"));
  assert_non_null(strstr(svg, "plan files written (7)"));
  assert_non_null(strstr(svg, "least energy: "));
  assert_non_null(strstr(svg, "dominated ("));
  /* The legend's background covers no dot: every circle outside the legend box lies outside it. */
  char *lg = strstr(svg, "<g font-size='11'><rect x='");
  assert_non_null(lg);
  double lx, ly, lw, lh;
  assert_int_equal(sscanf(lg, "<g font-size='11'><rect x='%lf' y='%lf' width='%lf' height='%lf'", &lx, &ly, &lw, &lh), 4);
  *lg = '\0'; /* what comes before is the data */
  for (char *c = svg; (c = strstr(c, "<circle cx='")); c++) {
    double cx, cy;
    assert_int_equal(sscanf(c, "<circle cx='%lf' cy='%lf'", &cx, &cy), 2);
    if (cx >= lx && cx <= lx + lw && cy >= ly && cy <= ly + lh) fail_msg("a dot at (%g, %g) under the legend", cx, cy);
  }
  free(svg);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
  /* A frontier of one point (one clock): readable ticks around it, not a range of 1e-9. */
  int rc;
  p = load_text(dir, "stage,instruction,frequency,time,energy\n0,forward,1410,0.010,3\n0,backward,1410,0.020,6\n", &rc);
  assert_zeus_ok(rc);
  o = (zeus_frontier_opts){.stages = 1, .microbatches = 1, .blocking_power_w = 10};
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  assert_int_equal(zeus_frontier_num_points(f), 1);
  assert_zeus_ok(zeus_frontier_write_plot_svg(f, path, NULL));
  svg = read_text(path);
  assert_non_null(strstr(svg, "1 stage × 1 microbatch, 1 plan<"));
  assert_non_null(strstr(svg, ">30.0</text>")); /* ms ticks at 0.5 ms steps around 30 ms */
  assert_null(strstr(svg, "0000<"));
  free(svg);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

/* The timeline's colours: one absolute scale, so a clock has the same colour in every plan. */
static void timeline_colours_one_absolute_clock_scale(void **state) {
  (void)state;
  zeus_frontier_profile *p = synth(3, 12, 0.02, 2);
  zeus_frontier_opts o = {.stages = 3, .microbatches = 4, .blocking_power_w = 60};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  size_t n = zeus_frontier_num_points(f);
  char dir[256], path[512];
  zeus_test_tmpdir(dir, sizeof dir);
  char colour_of[2000][8];
  memset(colour_of, 0, sizeof colour_of);
  size_t plans[3] = {0, n / 2, n - 1}, distinct = 0;
  for (int k = 0; k < 3; k++) {
    snprintf(path, sizeof path, "%s/t%d.svg", dir, k);
    assert_zeus_ok(zeus_frontier_write_timeline_svg(f, plans[k], path));
    char *svg = read_text(path);
    assert_non_null(strstr(svg, "SM clock (MHz)"));
    assert_non_null(strstr(svg, "linearGradient"));
    /* Every instruction box: a <rect ...> whose content is its tooltip naming the clock. */
    for (char *c = svg; (c = strstr(c, "<rect ")); c++) {
      char *gt = strchr(c, '>'), *fill = strstr(c, "fill='#");
      if (!gt || gt[-1] == '/' || strncmp(gt + 1, "<title>", 7) != 0 || !fill || fill > gt) continue;
      char colour[8];
      memcpy(colour, fill + 6, 7);
      colour[7] = '\0';
      int mhz;
      assert_int_equal(sscanf(strstr(gt, ": ") + 2, "%d MHz", &mhz), 1);
      assert_true(mhz > 0 && mhz < 2000);
      if (!colour_of[mhz][0]) {
        memcpy(colour_of[mhz], colour, 8);
        distinct++;
      } else if (strcmp(colour_of[mhz], colour) != 0) {
        fail_msg("%d MHz is %s in one plan and %s in another", mhz, colour_of[mhz], colour);
      }
    }
    free(svg);
  }
  assert_true(distinct >= 3);
  /* Viridis' green channel grows with the clock: a faster clock is always a lighter colour. */
  int prev_mhz = 0;
  unsigned prev_g = 0;
  for (int m = 0; m < 2000; m++) {
    if (!colour_of[m][0]) continue;
    unsigned r, g, bl;
    assert_int_equal(sscanf(colour_of[m], "#%02x%02x%02x", &r, &g, &bl), 3);
    if (prev_mhz && g <= prev_g) fail_msg("%d MHz (%s) is not lighter than %d MHz", m, colour_of[m], prev_mhz);
    prev_mhz = m;
    prev_g = g;
  }
  /* The profile's own lowest and highest clocks are the scale's ends. */
  assert_true(f->clock_min_mhz == 635 && f->clock_max_mhz == 1410);
  if (colour_of[635][0]) assert_string_equal(colour_of[635], "#440154");
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(exhaustive_2x2_five_clocks_bounds_gap),
      cmocka_unit_test(exhaustive_2x3_three_clocks_bounds_gap),
      cmocka_unit_test(exhaustive_3x2_three_clocks_bounds_gap),
      cmocka_unit_test(exhaustive_3x3_bounds_gap),
      cmocka_unit_test(frontier_is_monotone_from_slowest_to_fastest),
      cmocka_unit_test(quantisation_of_exact_multiples_gives_that_many_units),
      cmocka_unit_test(golden_1f1b_order),
      cmocka_unit_test(order_1f1b_matches_deepspeed_schedule_also_below_stage_count),
      cmocka_unit_test(golden_options_and_hull_of_a_small_profile),
      cmocka_unit_test(outputs_write_csv_and_plan_files),
      cmocka_unit_test(slack_reclaim_never_raises_energy_or_time),
      cmocka_unit_test(min_cut_with_lower_bounds_matches_enumeration_across_warm_starts),
      cmocka_unit_test(bad_input_gives_clear_errors),
      cmocka_unit_test(cli_answers_help_and_reports_errors),
      cmocka_unit_test(plan_store_returns_every_plan_and_stays_small),
      cmocka_unit_test(dominated_points_are_marked_and_can_be_dropped),
      cmocka_unit_test(progress_is_reported_per_point_and_can_stop_the_solve),
      cmocka_unit_test(solves_past_the_limits_are_refused_naming_the_limit),
      cmocka_unit_test(profile_with_bom_is_read_and_special_files_are_refused),
      cmocka_unit_test(frontier_plot_is_decimated_and_labelled),
      cmocka_unit_test(timeline_colours_one_absolute_clock_scale),
      cmocka_unit_test(sosp24_gpt3_matches_reference_frontier),
      cmocka_unit_test(sosp24_bloom_matches_reference_frontier),
      cmocka_unit_test(sosp24_energy_filter_reproduces_reference_model_frontier),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
