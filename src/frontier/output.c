/* Frontier outputs: frontier.csv and the plan files freqs_pipeline_%05d.py. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontier/frontier.h"

int zeus_frontier_csv(const zeus_frontier *f, char **text) {
  if (!f || !text) return zeus__error(ZEUS_EINVAL, "zeus_frontier_csv: NULL argument");
  zeus__buf b = {0};
  int rc = zeus__buf_puts(&b, "iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,eval_energy_j\n");
  for (size_t i = 0; i < f->npts && !rc; i++) {
    const zeus_frontier_point *p = &f->pts[i];
    rc = zeus__buf_printf(&b, "%ld,%.6f,%.6f,%.6f,%.6f,%.6f\n", p->iteration, p->time_s, p->cost_j,
                          p->cost_with_blocking_j, p->eval_time_s, p->eval_energy_j);
  }
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
  zeus__buf b = {0};
  int rc = zeus__buf_puts(&b, "[\n");
  for (int s = 0; s < f->dag.S && !rc; s++) {
    rc = zeus__buf_puts(&b, "    [");
    for (int k = 0; k < 2 * f->dag.M && !rc; k++) {
      int v = zeus__fdag_node(&f->dag, s, k);
      rc = zeus__buf_printf(&b, "%s(\"%s\", %d)", k ? ", " : "",
                            f->dag.kind[v] == ZEUS_FRONTIER_FORWARD ? "forward" : "backward",
                            zeus__frontier_node_opt(f, i, v)->freq_mhz);
    }
    if (!rc) rc = zeus__buf_puts(&b, "],\n");
  }
  const zeus_frontier_point *p = &f->pts[i];
  if (!rc)
    rc = zeus__buf_printf(&b,
                          "]\n# iteration: %ld\n# time_s: %.6f\n# time_units: %ld\n# cost_j: %.6f\n"
                          "# cost_with_blocking_j: %.6f\n# eval_time_s: %.6f\n# eval_energy_j: %.6f\n",
                          p->iteration, p->time_s, p->time_units, p->cost_j, p->cost_with_blocking_j,
                          p->eval_time_s, p->eval_energy_j);
  if (rc) {
    zeus__buf_free(&b);
    return rc;
  }
  *text = b.data;
  return ZEUS_OK;
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
  long every = wo ? wo->every : 0, sample = wo ? wo->sample : 0;
  if (every < 0 || sample < 0 || (every > 0 && sample > 0))
    return zeus__error(ZEUS_EINVAL, "plan selection: give either every N (>= 1) or sample K (>= 2), not both");
  if (sample == 1) return zeus__error(ZEUS_EINVAL, "sample: 1 plan cannot span the frontier; give K >= 2");
  if (mkdir(dir, 0777) != 0 && errno != EEXIST)
    return zeus__error(ZEUS_EIO, "cannot create the output folder '%s': %s", dir, strerror(errno));
  char *text;
  int rc = zeus_frontier_csv(f, &text);
  if (rc || (rc = write_text(dir, "frontier.csv", text))) return rc;
  unsigned char *want = calloc(f->npts, 1);
  if (!want) return zeus__oom("selecting plans to write");
  if (sample > 0) {
    /* K targets evenly spaced in time; each picks the point nearest to it. */
    double t0 = f->pts[0].time_s, t1 = f->pts[f->npts - 1].time_s;
    size_t j = 0;
    for (long k = 0; k < sample; k++) {
      double target = t0 + (t1 - t0) * (double)k / (double)(sample - 1);
      while (j + 1 < f->npts && fabs(f->pts[j + 1].time_s - target) <= fabs(f->pts[j].time_s - target)) j++;
      want[j] = 1;
    }
  } else {
    for (size_t i = 0; i < f->npts; i++) want[i] = every <= 1 || i % (size_t)every == 0;
    if (f->npts > 0) want[f->npts - 1] = 1;
  }
  for (size_t i = 0; i < f->npts && !rc; i++) {
    if (!want[i]) continue;
    char name[64];
    snprintf(name, sizeof name, "freqs_pipeline_%05zu.py", i);
    if (!(rc = zeus_frontier_plan_text(f, i, &text))) rc = write_text(dir, name, text);
  }
  free(want);
  return rc;
}
