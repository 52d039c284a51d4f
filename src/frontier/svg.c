/* Pictures of a frontier, written by hand as SVG: the frontier plot and a plan's timeline. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"

/* A "nice" tick step for a range, about `want` ticks. */
static double tick_step(double range, int want) {
  if (!(range > 0)) return 1;
  double raw = range / want, mag = pow(10, floor(log10(raw))), r = raw / mag;
  return mag * (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10);
}

typedef struct axes {
  double x0, x1, y0, y1;  /* data ranges */
  double L, T, W, H;      /* plot area in pixels */
} axes;

static double px(const axes *a, double x) { return a->L + (x - a->x0) / (a->x1 - a->x0) * a->W; }
static double py(const axes *a, double y) { return a->T + a->H - (y - a->y0) / (a->y1 - a->y0) * a->H; }

static int draw_axes(zeus__buf *b, const axes *a, const char *xlabel, const char *ylabel) {
  int rc = zeus__buf_printf(b, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#444'/>\n",
                            a->L, a->T, a->W, a->H);
  double sx = tick_step(a->x1 - a->x0, 8), sy = tick_step(a->y1 - a->y0, 6);
  for (double x = ceil(a->x0 / sx) * sx; x <= a->x1 + 1e-9 * sx && !rc; x += sx)
    rc = zeus__buf_printf(b,
                          "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>"
                          "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%g</text>\n",
                          px(a, x), a->T, px(a, x), a->T + a->H, px(a, x), a->T + a->H + 15, x);
  for (double y = ceil(a->y0 / sy) * sy; y <= a->y1 + 1e-9 * sy && !rc; y += sy)
    rc = zeus__buf_printf(b,
                          "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#ddd'/>"
                          "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%g</text>\n",
                          a->L, py(a, y), a->L + a->W, py(a, y), a->L - 5, py(a, y) + 4, y);
  if (!rc)
    rc = zeus__buf_printf(b,
                          "<text x='%.1f' y='%.1f' font-size='13' text-anchor='middle'>%s</text>\n"
                          "<text x='15' y='%.1f' font-size='13' text-anchor='middle' "
                          "transform='rotate(-90 15 %.1f)'>%s</text>\n",
                          a->L + a->W / 2, a->T + a->H + 35, xlabel, a->T + a->H / 2, a->T + a->H / 2, ylabel);
  return rc;
}

static int finish(zeus__buf *b, int rc, const char *path) {
  if (!rc) rc = zeus__buf_puts(b, "</svg>\n");
  if (!rc) rc = zeus__write_file_atomic(path, b->data, b->len);
  zeus__buf_free(b);
  return rc;
}

int zeus_frontier_write_plot_svg(const zeus_frontier *f, const char *path, const zeus_frontier_write_opts *written) {
  (void)written;
  if (!f || !path) return zeus__error(ZEUS_EINVAL, "zeus_frontier_write_plot_svg: NULL argument");
  axes a = {INFINITY, -INFINITY, INFINITY, -INFINITY, 80, 40, 600, 380};
  for (size_t i = 0; i < f->npts; i++) {
    const zeus_frontier_point *p = &f->pts[i];
    double xs[2] = {p->time_s, p->eval_time_s}, ys[2] = {p->cost_with_blocking_j, p->eval_energy_j};
    for (int k = 0; k < 2; k++) {
      a.x0 = fmin(a.x0, xs[k]);
      a.x1 = fmax(a.x1, xs[k]);
      a.y0 = fmin(a.y0, ys[k]);
      a.y1 = fmax(a.y1, ys[k]);
    }
  }
  double dx = (a.x1 - a.x0) * 0.05 + 1e-9, dy = (a.y1 - a.y0) * 0.05 + 1e-9;
  a.x0 -= dx; a.x1 += dx; a.y0 -= dy; a.y1 += dy;
  zeus__buf b = {0};
  int rc = zeus__buf_printf(&b,
                            "<svg xmlns='http://www.w3.org/2000/svg' width='720' height='480' "
                            "font-family='sans-serif'>\n<rect width='720' height='480' fill='white'/>\n"
                            "<text x='380' y='22' font-size='14' text-anchor='middle'>"
                            "Iteration time–energy frontier (%d stages, %d microbatches, %zu points)</text>\n",
                            f->dag.S, f->dag.M, f->npts);
  if (!rc) rc = draw_axes(&b, &a, "iteration time (s)", "iteration energy (J)");
  const char *colour[2] = {"#1f77b4", "#d62728"};
  for (int series = 0; series < 2 && !rc; series++) {
    rc = zeus__buf_printf(&b, "<polyline fill='none' stroke='%s' stroke-width='1.5' points='", colour[series]);
    for (size_t i = 0; i < f->npts && !rc; i++) {
      const zeus_frontier_point *p = &f->pts[i];
      double x = series ? p->time_s : p->eval_time_s, y = series ? p->cost_with_blocking_j : p->eval_energy_j;
      rc = zeus__buf_printf(&b, "%.1f,%.1f ", px(&a, x), py(&a, y));
    }
    if (!rc) rc = zeus__buf_puts(&b, "'/>\n");
  }
  if (!rc)
    rc = zeus__buf_printf(&b,
                          "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='2'/>"
                          "<text x='%.0f' y='%.0f' font-size='12'>evaluated (measured profile)</text>\n"
                          "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='2'/>"
                          "<text x='%.0f' y='%.0f' font-size='12'>cost model</text>\n",
                          a.L + a.W - 220, a.T + 15, a.L + a.W - 195, a.T + 15, colour[0], a.L + a.W - 190, a.T + 19,
                          a.L + a.W - 220, a.T + 32, a.L + a.W - 195, a.T + 32, colour[1], a.L + a.W - 190, a.T + 36);
  return finish(&b, rc, path);
}

int zeus_frontier_write_timeline_svg(const zeus_frontier *f, size_t i, const char *path) {
  if (!f || !path) return zeus__error(ZEUS_EINVAL, "zeus_frontier_write_timeline_svg: NULL argument");
  if (i >= f->npts) return zeus__error(ZEUS_ERANGE, "frontier point %zu: there are %zu", i, f->npts);
  const zeus__fdag *d = &f->dag;
  int n = d->n;
  double *dur = calloc((size_t)n * 3, sizeof *dur);
  unsigned char *crit = calloc((size_t)n, 1);
  int32_t *q = malloc((size_t)n * sizeof *q);
  if (!dur || !crit || !q) {
    free(dur);
    free(crit);
    free(q);
    return zeus__oom("drawing a timeline");
  }
  double *start = dur + n, *fin = dur + 2 * n;
  zeus__fplans_get(&f->plans, i, q);
  int fmin_mhz = 1 << 30, fmax_mhz = 0;
  for (int v = 1; v < n - 1; v++) {
    const zeus__fopt *o = zeus__frontier_opt(f, q, v);
    dur[v] = o->time_s;
    if (o->freq_mhz < fmin_mhz) fmin_mhz = o->freq_mhz;
    if (o->freq_mhz > fmax_mhz) fmax_mhz = o->freq_mhz;
  }
  double T = zeus__fdag_longest(d, dur, start, fin);
  /* The critical path: from the sink, step to a predecessor that finishes last. */
  for (int v = n - 1; v > 0;) {
    crit[v] = 1;
    int best = -1;
    for (int k = d->pred_off[v]; k < d->pred_off[v + 1]; k++)
      if (best < 0 || fin[d->pred[k]] > fin[best]) best = d->pred[k];
    v = best;
  }
  axes a = {0, T > 0 ? T : 1, 0, 1, 70, 40, 1000, 34.0 * d->S};
  double H = a.T + a.H + 60, row = 34.0;
  zeus__buf b = {0};
  int rc = zeus__buf_printf(&b,
                            "<svg xmlns='http://www.w3.org/2000/svg' width='1100' height='%.0f' "
                            "font-family='sans-serif'>\n<rect width='1100' height='%.0f' fill='white'/>\n"
                            "<text x='550' y='22' font-size='14' text-anchor='middle'>Plan %zu: %.3f s, "
                            "%.1f J (evaluated); colour: clock %d (blue) to %d MHz (red); thick outline: "
                            "critical path</text>\n",
                            H, H, i, f->pts[i].eval_time_s, f->pts[i].eval_energy_j, fmin_mhz, fmax_mhz);
  for (int s = 0; s < d->S && !rc; s++)
    rc = zeus__buf_printf(&b, "<text x='%.0f' y='%.1f' font-size='12' text-anchor='end'>stage %d</text>\n",
                          a.L - 8, a.T + row * s + row / 2 + 4, s);
  for (int v = 1; v < n - 1 && !rc; v++) {
    const zeus__fopt *o = zeus__frontier_opt(f, q, v);
    double w = fmax_mhz > fmin_mhz ? (double)(o->freq_mhz - fmin_mhz) / (fmax_mhz - fmin_mhz) : 1.0;
    int r = (int)(40 + 200 * w), g = 90, bl = (int)(240 - 200 * w);
    double x0 = px(&a, start[v]), x1 = px(&a, fin[v]), y = a.T + row * d->stage[v] + 3;
    rc = zeus__buf_printf(&b,
                          "<rect x='%.2f' y='%.1f' width='%.2f' height='%.1f' fill='#%02x%02x%02x' "
                          "stroke='%s' stroke-width='%s'><title>%s %d, stage %d, %d MHz, %.4f–%.4f s</title></rect>\n",
                          x0, y, x1 - x0, row - 6, r, g, bl, crit[v] ? "#000" : "#fff", crit[v] ? "2.5" : "0.5",
                          d->kind[v] == ZEUS_FRONTIER_FORWARD ? "forward" : "backward", d->mb[v], d->stage[v],
                          o->freq_mhz, start[v], fin[v]);
    if (!rc && x1 - x0 > 18)
      rc = zeus__buf_printf(&b, "<text x='%.2f' y='%.1f' font-size='10' fill='white' text-anchor='middle'>%c%d</text>\n",
                            (x0 + x1) / 2, y + row / 2 + 1, d->kind[v] == ZEUS_FRONTIER_FORWARD ? 'F' : 'B', d->mb[v]);
  }
  axes ax = a;
  ax.y0 = 0;
  ax.y1 = 1;
  double sx = tick_step(ax.x1, 10);
  for (double x = 0; x <= ax.x1 + 1e-9 && !rc; x += sx)
    rc = zeus__buf_printf(&b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%g</text>\n", px(&a, x),
                          a.T + a.H + 15, x);
  if (!rc)
    rc = zeus__buf_printf(&b, "<text x='%.1f' y='%.1f' font-size='13' text-anchor='middle'>time (s)</text>\n",
                          a.L + a.W / 2, a.T + a.H + 35);
  free(dur);
  free(crit);
  free(q);
  return finish(&b, rc, path);
}
