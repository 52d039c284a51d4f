/* frontier: the time–energy frontier solver (Perseus' optimizer). */
#include "test_util.h"

#include <limits.h>
#include <math.h>
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
  zeus_frontier_opts o = {.stages = S, .microbatches = M, .blocking_power_w = pb, .cost_model = model};
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
  double worst = 0, sum = 0;
  size_t npts = zeus_frontier_num_points(f), worst_i = 0;
  for (size_t i = 0; i < npts; i++) {
    zeus_frontier_point pt;
    assert_zeus_ok(zeus_frontier_get_point(f, i, &pt));
    size_t lo = 0, hi = total; /* first entry with t > eval time */
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (all[mid].t <= pt.eval_time_s * (1 + 1e-12)) lo = mid + 1;
      else hi = mid;
    }
    assert_true(lo > 0);
    double exact = all[lo - 1].e, gap = pt.eval_energy_j / exact - 1;
    assert_true(gap > -1e-9); /* a plan cannot beat the exact frontier */
    sum += gap;
    if (gap > worst) {
      worst = gap;
      worst_i = i;
    }
  }
  if (worst > bound) print_message("OVER THE BOUND\n");
  print_message("%d x %d, %s clocks, %s model: %zu points over %zu assignments; energy above the exact "
                "frontier: worst %.3f %% (point %zu), mean %.3f %% (bound %.1f %%)\n",
                S, M, reduced ? "3 (stage 1) or 2" : nclocks == 5 ? "5" : "3", model == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential", npts, total,
                100 * worst, worst_i, 100 * sum / (double)npts, 100 * bound);
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

/* 3 stages × 2 microbatches is rejected (fewer microbatches than stages), so the 3-stage case
 * is 3 × 3 with 3 clocks on the middle stage and 2 on the others (3^6 · 2^12 assignments). */
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
  assert_non_null(strstr(csv, "iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,eval_energy_j\n0,"));
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
  assert_zeus_ok(zeus_frontier_write_plot_svg(f, path));
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
  /* Fewer microbatches than stages. */
  o.stages = 2;
  o.microbatches = 1;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "microbatches: 1 is fewer than the 2 stages");
  /* Bad options. */
  o.microbatches = 2;
  o.noise_factor = 1.5;
  assert_zeus_err(zeus_frontier_solve(&f, p, &o), ZEUS_EINVAL, "noise factor");
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
  snprintf(args, sizeof args, "--profile %s --stages 2 --microbatches 1 --blocking-power 40", path);
  assert_int_equal(run_cli(args, out, sizeof out), 1);
  assert_non_null(strstr(out, "fewer than the 2 stages"));
  snprintf(args, sizeof args,
           "--profile %s --stages 2 --microbatches 3 --blocking-power 40 --out %s/o --every 3 "
           "--plot %s/o/f.svg --timeline last --cost-model hull --json",
           path, dir, dir);
  assert_int_equal(run_cli(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "\"points\": "));
  snprintf(path, sizeof path, "%s/o/frontier.csv", dir);
  assert_int_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/o/freqs_pipeline_00000.py", dir);
  assert_int_equal(access(path, F_OK), 0);
  snprintf(path, sizeof path, "%s/o/f.svg", dir);
  assert_int_equal(access(path, F_OK), 0);
}

/* ---- the SOSP'24 profiles against the authors' frontier ---- */

static void sosp24_case(const char *model_name, zeus_frontier_cost_model cm, double bound) {
  const char *data = zeus_test_data_dir();
  char path[1024];
  snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/%s+a100_sxm_bf16.csv", data, model_name);
  zeus_frontier_profile *p;
  assert_zeus_ok(zeus_frontier_profile_load(&p, path));
  zeus_frontier_opts o = {.stages = 8, .microbatches = 12, .blocking_power_w = 83.64, .unit_time_s = 0.001,
                          .cost_model = cm};
  zeus_frontier *f;
  assert_zeus_ok(zeus_frontier_solve(&f, p, &o));
  snprintf(path, sizeof path, "%s/perseus-sosp24/frontier/a100_sxm/%s_bf16_mb12.csv", data, model_name);
  zeus__csv *ref;
  assert_zeus_ok(zeus__csv_read_file(path, &ref));
  size_t ct, ce, npts = zeus_frontier_num_points(f);
  assert_zeus_ok(zeus__csv_require_col(ref, "time", &ct));
  assert_zeus_ok(zeus__csv_require_col(ref, "energy", &ce));
  long ref_fastest = LONG_MAX;
  double above = -INFINITY, below = INFINITY;
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
  }
  zeus_frontier_point last;
  assert_zeus_ok(zeus_frontier_get_point(f, npts - 1, &last));
  print_message("%s, %s model, 8 stages x 12 microbatches: %zu points (%.3f..%.3f s), %zu compared with the "
                "reference; evaluated energy vs reference: largest above %+.3f %% at %.3f s, largest "
                "below %+.3f %% at %.3f s (bound %+.1f %%)\n",
                model_name, cm == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential", npts, f->pts[0].time_s, last.time_s, compared, 100 * above, at_above * 0.001,
                100 * below, at_below * 0.001, 100 * bound);
  assert_int_equal(last.time_units, ref_fastest);
  assert_true(compared + 5 >= zeus__csv_nrows(ref));
  assert_true(above <= bound);
  zeus__csv_free(ref);
  zeus_frontier_free(f);
  zeus_frontier_profile_free(p);
}

static void sosp24_gpt3_matches_reference_frontier(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  sosp24_case("gpt3-175b", ZEUS_FRONTIER_COST_HULL, 0.005);
  sosp24_case("gpt3-175b", ZEUS_FRONTIER_COST_EXPONENTIAL, 0.005);
}

static void sosp24_bloom_matches_reference_frontier(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  sosp24_case("bloom", ZEUS_FRONTIER_COST_HULL, 0.005);
  /* Our exponential fit differs slightly from the original's; near the fastest end its plans
   * measure up to about 0.53 % above the reference, so this model gets a 1 % bound. */
  sosp24_case("bloom", ZEUS_FRONTIER_COST_EXPONENTIAL, 0.01);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(exhaustive_2x2_five_clocks_bounds_gap),
      cmocka_unit_test(exhaustive_2x3_three_clocks_bounds_gap),
      cmocka_unit_test(exhaustive_3x3_bounds_gap),
      cmocka_unit_test(frontier_is_monotone_from_slowest_to_fastest),
      cmocka_unit_test(quantisation_of_exact_multiples_gives_that_many_units),
      cmocka_unit_test(golden_1f1b_order),
      cmocka_unit_test(golden_options_and_hull_of_a_small_profile),
      cmocka_unit_test(outputs_write_csv_and_plan_files),
      cmocka_unit_test(bad_input_gives_clear_errors),
      cmocka_unit_test(cli_answers_help_and_reports_errors),
      cmocka_unit_test(sosp24_gpt3_matches_reference_frontier),
      cmocka_unit_test(sosp24_bloom_matches_reference_frontier),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
