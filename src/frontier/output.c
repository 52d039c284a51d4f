/* Frontier outputs: frontier.csv and the plan files freqs_pipeline_%05d.py. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontier/frontier.h"
#include "zeus/format.h"

/* A figure of a point as the CSV and the plan files write it: at the microsecond and the
 * microjoule (the six decimals these files always had), without the trailing zeros: 0.322, not
 * 0.322000 (zeus/format.h). `buf` holds ZEUS_FORMAT_DOUBLE_MAX bytes. */
static const char *fig(double v, char *buf) {
  zeus_format_double(zeus_round_decimals(v, 6), buf, ZEUS_FORMAT_DOUBLE_MAX);
  return buf;
}

int zeus_frontier_csv(const zeus_frontier *f, const zeus_frontier_write_opts *wo, char **text) {
  if (!f || !text) return zeus__error(ZEUS_EINVAL, "zeus_frontier_csv: NULL argument");
  bool drop = wo && wo->drop_dominated;
  zeus__buf b = {0};
  int rc = zeus__buf_puts(&b, "iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,eval_energy_j,dominated\n");
  for (size_t i = 0; i < f->npts && !rc; i++) {
    const zeus_frontier_point *p = &f->pts[i];
    if (drop && p->dominated) continue;
    char t[ZEUS_FORMAT_DOUBLE_MAX], c[ZEUS_FORMAT_DOUBLE_MAX], cb[ZEUS_FORMAT_DOUBLE_MAX],
        et[ZEUS_FORMAT_DOUBLE_MAX], ee[ZEUS_FORMAT_DOUBLE_MAX];
    rc = zeus__buf_printf(&b, "%ld,%s,%s,%s,%s,%s,%d\n", p->iteration, fig(p->time_s, t), fig(p->cost_j, c),
                          fig(p->cost_with_blocking_j, cb), fig(p->eval_time_s, et), fig(p->eval_energy_j, ee),
                          p->dominated ? 1 : 0);
  }
  if (rc) {
    zeus__buf_free(&b);
    return rc;
  }
  *text = b.data;
  return ZEUS_OK;
}

/* The plan file of point i, whose plan q holds. */
static int plan_text(const zeus_frontier *f, size_t i, const int32_t *q, char **text) {
  zeus__buf b = {0};
  int rc = zeus__buf_puts(&b, "[\n");
  for (int s = 0; s < f->dag.S && !rc; s++) {
    rc = zeus__buf_puts(&b, "    [");
    for (int k = 0; k < 2 * f->dag.M && !rc; k++) {
      int v = zeus__fdag_node(&f->dag, s, k);
      rc = zeus__buf_printf(&b, "%s(\"%s\", %d)", k ? ", " : "",
                            f->dag.kind[v] == ZEUS_FRONTIER_FORWARD ? "forward" : "backward",
                            zeus__frontier_opt(f, q, v)->freq_mhz);
    }
    if (!rc) rc = zeus__buf_puts(&b, "],\n");
  }
  const zeus_frontier_point *p = &f->pts[i];
  char t[ZEUS_FORMAT_DOUBLE_MAX], c[ZEUS_FORMAT_DOUBLE_MAX], cb[ZEUS_FORMAT_DOUBLE_MAX], et[ZEUS_FORMAT_DOUBLE_MAX],
      ee[ZEUS_FORMAT_DOUBLE_MAX];
  if (!rc)
    rc = zeus__buf_printf(&b,
                          "]\n# iteration: %ld\n# time_s: %s\n# time_units: %ld\n# cost_j: %s\n"
                          "# cost_with_blocking_j: %s\n# eval_time_s: %s\n# eval_energy_j: %s\n",
                          p->iteration, fig(p->time_s, t), p->time_units, fig(p->cost_j, c),
                          fig(p->cost_with_blocking_j, cb), fig(p->eval_time_s, et), fig(p->eval_energy_j, ee));
  if (rc) {
    zeus__buf_free(&b);
    return rc;
  }
  *text = b.data;
  return ZEUS_OK;
}

int zeus_frontier_plan_text(const zeus_frontier *f, size_t i, char **text) {
  if (!f || !text) return zeus__error(ZEUS_EINVAL, "zeus_frontier_plan_text: NULL argument");
  if (i >= f->npts) return zeus__error(ZEUS_ERANGE, "frontier point %zu: there are %zu", i, f->npts);
  int32_t *q = malloc((size_t)f->dag.n * sizeof *q);
  if (!q) return zeus__oom("formatting a frontier plan");
  zeus__fplans_get(&f->plans, i, q);
  int rc = plan_text(f, i, q, text);
  free(q);
  return rc;
}

int zeus__frontier_select(const zeus_frontier *f, const zeus_frontier_write_opts *wo, unsigned char *want) {
  long every = wo ? wo->every : 0, sample = wo ? wo->sample : 0;
  bool drop = wo && wo->drop_dominated;
  if (every < 0 || sample < 0 || (every > 0 && sample > 0))
    return zeus__error(ZEUS_EINVAL, "plan selection: give either every N (>= 1) or sample K (>= 2), not both");
  if (sample == 1) return zeus__error(ZEUS_EINVAL, "sample: 1 plan cannot span the frontier; give K >= 2");
  memset(want, 0, f->npts);
  /* The candidates: every point, or the non-dominated ones; kept[0..nk) in point order. */
  size_t nk = 0, *kept = malloc(f->npts * sizeof *kept);
  if (!kept) return zeus__oom("selecting plans to write");
  for (size_t i = 0; i < f->npts; i++)
    if (!drop || !f->pts[i].dominated) kept[nk++] = i;
  if (nk > 0 && sample > 0) {
    /* K targets evenly spaced in time; each picks the candidate nearest to it. */
    double t0 = f->pts[kept[0]].time_s, t1 = f->pts[kept[nk - 1]].time_s;
    size_t j = 0;
    for (long k = 0; k < sample; k++) {
      double target = t0 + (t1 - t0) * (double)k / (double)(sample - 1);
      while (j + 1 < nk && fabs(f->pts[kept[j + 1]].time_s - target) <= fabs(f->pts[kept[j]].time_s - target)) j++;
      want[kept[j]] = 1;
    }
  } else if (nk > 0) {
    for (size_t j = 0; j < nk; j++) want[kept[j]] = every <= 1 || j % (size_t)every == 0;
    want[kept[nk - 1]] = 1;
  }
  free(kept);
  return ZEUS_OK;
}

long zeus_frontier_count_plans(const zeus_frontier *f, const zeus_frontier_write_opts *wo) {
  if (!f) return zeus__error(ZEUS_EINVAL, "zeus_frontier_count_plans: NULL argument");
  unsigned char *want = malloc(f->npts);
  if (!want) return zeus__oom("selecting plans to write");
  int rc = zeus__frontier_select(f, wo, want);
  long n = 0;
  for (size_t i = 0; i < f->npts && !rc; i++) n += want[i];
  free(want);
  return rc ? rc : n;
}

static int write_text(const char *dir, const char *name, char *text) {
  zeus__buf path = {0};
  int rc = zeus__buf_printf(&path, "%s/%s", dir, name);
  if (!rc) rc = zeus__write_file_atomic(path.data, text, strlen(text));
  zeus__buf_free(&path);
  free(text);
  return rc;
}

int zeus_frontier_write(const zeus_frontier *f, const char *dir, const zeus_frontier_write_opts *wo) {
  if (!f || !dir) return zeus__error(ZEUS_EINVAL, "zeus_frontier_write: NULL argument");
  unsigned char *want = malloc(f->npts);
  if (!want) return zeus__oom("selecting plans to write");
  int rc = zeus__frontier_select(f, wo, want);
  if (rc) {
    free(want);
    return rc;
  }
  if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
    rc = zeus__error(ZEUS_EIO, "cannot create the output folder '%s': %s", dir, strerror(errno));
    free(want);
    return rc;
  }
  char *text;
  if ((rc = zeus_frontier_csv(f, wo, &text)) || (rc = write_text(dir, "frontier.csv", text))) {
    free(want);
    return rc;
  }
  /* The plans in order, each from the last by its changes: one plan in memory at a time. */
  int32_t *q = malloc((size_t)f->dag.n * sizeof *q);
  if (!q) rc = zeus__oom("writing frontier plans");
  for (size_t i = 0; i < f->npts && !rc; i++) {
    if (i == 0) zeus__fplans_get(&f->plans, 0, q);
    else zeus__fplans_step(&f->plans, i, q);
    if (!want[i]) continue;
    char name[64];
    snprintf(name, sizeof name, "freqs_pipeline_%05zu.py", i);
    if (!(rc = plan_text(f, i, q, &text))) rc = write_text(dir, name, text);
  }
  free(q);
  free(want);
  return rc;
}
