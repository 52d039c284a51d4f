/* Pictures of a frontier, written by hand as SVG: the frontier plot and a plan's timeline.
 *
 * Both are meant to be printed: SI-prefixed axes (J, kJ, MJ; µs, ms, s), colour-blind-safe
 * colours (the Okabe–Ito set for series, viridis for clocks), a legend that covers no data,
 * labels only where they fit (every timeline box also has a <title> tooltip), and files whose
 * size depends on the picture, not on the number of points: series are decimated to a few
 * points per pixel column, dots to one per small cell. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontier/frontier.h"

/* Okabe–Ito colours. */
#define C_BLUE "#0072B2"
#define C_VERMILION "#D55E00"
#define C_ORANGE "#E69F00"
#define C_GREY "#999999"

/* ---- scales, ticks and SI prefixes ---- */

typedef struct si_unit {
  double scale;     /* value / scale is what the ticks print */
  const char *name; /* "kJ" */
} si_unit;

static si_unit si_energy(double maxabs) {
  if (maxabs >= 1e6) return (si_unit){1e6, "MJ"};
  if (maxabs >= 1e3) return (si_unit){1e3, "kJ"};
  if (maxabs >= 1 || maxabs == 0) return (si_unit){1, "J"};
  return (si_unit){1e-3, "mJ"};
}

static si_unit si_time(double maxabs) {
  if (maxabs >= 1 || maxabs == 0) return (si_unit){1, "s"};
  if (maxabs >= 1e-3) return (si_unit){1e-3, "ms"};
  return (si_unit){1e-6, "µs"};
}

/* A "nice" tick step (1, 2 or 5 × 10^k) for a range, about `want` ticks. */
static double tick_step(double range, int want) {
  if (!(range > 0)) return 1;
  double raw = range / want, mag = pow(10, floor(log10(raw))), r = raw / mag;
  return mag * (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10);
}

/* Decimals that print every multiple of `step` (in display units) exactly. */
static int tick_decimals(double step) {
  int d = (int)-floor(log10(step) + 1e-9);
  return d < 0 ? 0 : d > 9 ? 9 : d;
}

/* "67,445" */
static void thousands(size_t v, char *buf, size_t len) {
  char raw[32];
  int n = snprintf(raw, sizeof raw, "%zu", v), k = 0;
  for (int i = 0; i < n && (size_t)k + 2 < len; i++) {
    if (i > 0 && (n - i) % 3 == 0) buf[k++] = ',';
    buf[k++] = raw[i];
  }
  buf[k] = '\0';
}

/* "27.3 kJ", "183 J": three significant digits with the unit's SI prefix. */
static void si_text(double v, bool energy, char *buf, size_t len) {
  si_unit u = energy ? si_energy(fabs(v)) : si_time(fabs(v));
  double x = v / u.scale;
  int dec = fabs(x) >= 100 ? 0 : fabs(x) >= 10 ? 1 : 2;
  snprintf(buf, len, "%.*f %s", dec, x, u.name);
}

/* Text width in pixels of DejaVu Sans (the usual sans-serif) at `size`, a little generous. */
static double text_width(const char *s, double size) {
  size_t chars = 0;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) chars += (*p & 0xC0) != 0x80;
  return 0.62 * size * (double)chars;
}

typedef struct axes {
  double x0, x1, y0, y1; /* data ranges */
  double L, T, W, H;     /* plot area in pixels */
} axes;

static double px(const axes *a, double x) { return a->L + (x - a->x0) / (a->x1 - a->x0) * a->W; }
static double py(const axes *a, double y) { return a->T + a->H - (y - a->y0) / (a->y1 - a->y0) * a->H; }

static int x_ticks(zeus__buf *b, const axes *a, si_unit u, bool grid, int want) {
  double sx = tick_step(a->x1 - a->x0, want);
  int dec = tick_decimals(sx / u.scale), rc = 0;
  for (double k = ceil(a->x0 / sx - 1e-9); k * sx <= a->x1 + 1e-9 * sx && !rc; k++) {
    double x = k * sx + 0.0; /* a multiple of the step, never "-0" */
    if (grid)
      rc = zeus__buf_printf(b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#e4e4e4'/>\n", px(a, x), a->T,
                            px(a, x), a->T + a->H);
    if (!rc)
      rc = zeus__buf_printf(b,
                            "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#444'/>"
                            "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%.*f</text>\n",
                            px(a, x), a->T + a->H, px(a, x), a->T + a->H + 4, px(a, x), a->T + a->H + 16, dec,
                            x / u.scale);
  }
  return rc;
}

static int y_ticks(zeus__buf *b, const axes *a, si_unit u) {
  double sy = tick_step(a->y1 - a->y0, 6);
  int dec = tick_decimals(sy / u.scale), rc = 0;
  for (double k = ceil(a->y0 / sy - 1e-9); k * sy <= a->y1 + 1e-9 * sy && !rc; k++) {
    double y = k * sy + 0.0;
    rc = zeus__buf_printf(b,
                          "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#e4e4e4'/>"
                          "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#444'/>"
                          "<text x='%.1f' y='%.1f' font-size='11' text-anchor='end'>%.*f</text>\n",
                          a->L, py(a, y), a->L + a->W, py(a, y), a->L - 4, py(a, y), a->L, py(a, y), a->L - 6,
                          py(a, y) + 4, dec, y / u.scale);
  }
  return rc;
}

static int finish(zeus__buf *b, int rc, const char *path) {
  if (!rc) rc = zeus__buf_puts(b, "</svg>\n");
  if (!rc) rc = zeus__write_file_atomic(path, b->data, b->len);
  zeus__buf_free(b);
  return rc;
}

/* ---- what the plot covers: a grid of 4-pixel cells, for placing the legend ---- */

#define CELL 4
typedef struct cover {
  int cols, rows;
  unsigned char *cell;
} cover;

static void cover_mark(cover *c, double x, double y) {
  int i = (int)floor(x / CELL), j = (int)floor(y / CELL);
  if (i >= 0 && j >= 0 && i < c->cols && j < c->rows) c->cell[j * c->cols + i] = 1;
}

static void cover_disc(cover *c, double x, double y, double r) {
  for (double dx = -r; dx <= r; dx += CELL / 2.0)
    for (double dy = -r; dy <= r; dy += CELL / 2.0) cover_mark(c, x + dx, y + dy);
  cover_mark(c, x, y);
}

static void cover_segment(cover *c, double x0, double y0, double x1, double y1) {
  double len = hypot(x1 - x0, y1 - y0);
  int steps = (int)(len / (CELL / 2.0)) + 1;
  for (int k = 0; k <= steps; k++) cover_mark(c, x0 + (x1 - x0) * k / steps, y0 + (y1 - y0) * k / steps);
}

static bool cover_free(const cover *c, double x, double y, double w, double h) {
  for (int j = (int)floor(y / CELL); j <= (int)floor((y + h) / CELL); j++)
    for (int i = (int)floor(x / CELL); i <= (int)floor((x + w) / CELL); i++)
      if (i >= 0 && j >= 0 && i < c->cols && j < c->rows && c->cell[j * c->cols + i]) return false;
  return true;
}

/* ---- decimated series ---- */

/* A polyline through (xs[k], ys[k]) in pixels, in order, keeping of each run of consecutive
 * points in one pixel column its first, last, highest and lowest (which draws the same
 * picture), and marking what it covers. */
static int polyline(zeus__buf *b, cover *cv, const double *xs, const double *ys, size_t n, const char *style) {
  int rc = zeus__buf_printf(b, "<polyline fill='none' %s points='", style);
  double lx = NAN, ly = NAN;
  for (size_t i = 0; i < n && !rc;) {
    size_t j = i, lo = i, hi = i;
    long col = lround(floor(xs[i]));
    while (j < n && lround(floor(xs[j])) == col) {
      if (ys[j] < ys[lo]) lo = j;
      if (ys[j] > ys[hi]) hi = j;
      j++;
    }
    size_t keep[4] = {i, lo < hi ? lo : hi, lo < hi ? hi : lo, j - 1};
    for (int k = 0; k < 4 && !rc; k++) {
      if (k > 0 && keep[k] == keep[k - 1]) continue;
      double x = xs[keep[k]], y = ys[keep[k]];
      if (!isnan(lx)) cover_segment(cv, lx, ly, x, y);
      lx = x;
      ly = y;
      rc = zeus__buf_printf(b, "%.1f,%.1f ", x, y);
    }
    i = j;
  }
  if (!rc) rc = zeus__buf_puts(b, "'/>\n");
  return rc;
}

/* Dots at (xs[k], ys[k]) where sel is NULL or sel[k], at most one per cell of `grid` pixels. */
static int dots(zeus__buf *b, cover *cv, const double *xs, const double *ys, const unsigned char *sel, size_t n,
                double grid, double r, const char *style) {
  int cols = (int)(720 / grid) + 2, rows = (int)(480 / grid) + 2;
  unsigned char *seen = calloc((size_t)cols * (size_t)rows, 1);
  if (!seen) return zeus__oom("drawing a frontier plot");
  int rc = zeus__buf_printf(b, "<g %s>", style);
  for (size_t k = 0; k < n && !rc; k++) {
    if (sel && !sel[k]) continue;
    int i = (int)(xs[k] / grid), j = (int)(ys[k] / grid);
    if (i < 0 || j < 0 || i >= cols || j >= rows || seen[j * cols + i]) continue;
    seen[j * cols + i] = 1;
    cover_disc(cv, xs[k], ys[k], r);
    rc = zeus__buf_printf(b, "<circle cx='%.1f' cy='%.1f' r='%.1f'/>", xs[k], ys[k], r);
  }
  if (!rc) rc = zeus__buf_puts(b, "</g>\n");
  free(seen);
  return rc;
}

/* ---- the frontier plot ---- */

typedef struct by_t {
  double t;
  size_t i;
} by_t;

static int cmp_by_t(const void *pa, const void *pb) {
  const by_t *a = pa, *b = pb;
  if (a->t != b->t) return a->t < b->t ? -1 : 1;
  return (a->i > b->i) - (a->i < b->i);
}

/* A legend entry's symbol at (x, y), the row's vertical middle. */
typedef enum legend_sym { SYM_LINE_DOTS, SYM_DOT, SYM_DASHED, SYM_RING, SYM_DIAMOND } legend_sym;

static int legend_symbol(zeus__buf *b, legend_sym s, double x, double y) {
  switch (s) {
    case SYM_LINE_DOTS:
      return zeus__buf_printf(b,
                              "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='" C_BLUE "' stroke-width='2'/>"
                              "<circle cx='%.1f' cy='%.1f' r='2.2' fill='" C_BLUE "'/>\n",
                              x, y, x + 22, y, x + 11, y);
    case SYM_DOT:
      return zeus__buf_printf(b, "<circle cx='%.1f' cy='%.1f' r='2' fill='" C_GREY "'/>\n", x + 11, y);
    case SYM_DASHED:
      return zeus__buf_printf(b,
                              "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='" C_VERMILION
                              "' stroke-width='1.5' stroke-dasharray='5 3'/>\n",
                              x, y, x + 22, y);
    case SYM_RING:
      return zeus__buf_printf(b, "<circle cx='%.1f' cy='%.1f' r='3.5' fill='none' stroke='#000' stroke-width='1.2'/>\n",
                              x + 11, y);
    case SYM_DIAMOND:
      return zeus__buf_printf(b,
                              "<path d='M%.1f %.1fl6 6l-6 6l-6 -6z' fill='" C_ORANGE "' stroke='#000' stroke-width='1'/>\n",
                              x + 11, y - 6);
  }
  return ZEUS_OK;
}

int zeus_frontier_write_plot_svg(const zeus_frontier *f, const char *path, const zeus_frontier_write_opts *written) {
  if (!f || !path) return zeus__error(ZEUS_EINVAL, "zeus_frontier_write_plot_svg: NULL argument");
  size_t n = f->npts;
  const double WIDTH = 720, HEIGHT = 480;
  axes a = {INFINITY, -INFINITY, INFINITY, -INFINITY, 80, 40, 610, 370};
  size_t ndom = 0, emin = 0;
  for (size_t i = 0; i < n; i++) {
    const zeus_frontier_point *p = &f->pts[i];
    double xs[2] = {p->time_s, p->eval_time_s}, ys[2] = {p->cost_with_blocking_j, p->eval_energy_j};
    for (int k = 0; k < 2; k++) {
      a.x0 = fmin(a.x0, xs[k]);
      a.x1 = fmax(a.x1, xs[k]);
      a.y0 = fmin(a.y0, ys[k]);
      a.y1 = fmax(a.y1, ys[k]);
    }
    ndom += p->dominated;
    if (p->eval_energy_j < f->pts[emin].eval_energy_j) emin = i;
  }
  /* 4 % (5 %) of the range around the data; a range that is (nearly) a single value gets 5 % of
   * the value, so that one point still gets readable ticks. */
  double dx = (a.x1 - a.x0) * 0.04, dy = (a.y1 - a.y0) * 0.05;
  if (!(dx > 1e-6 * fabs(a.x1))) dx = fabs(a.x1) > 0 ? 0.05 * fabs(a.x1) : 1;
  if (!(dy > 1e-6 * fabs(a.y1))) dy = fabs(a.y1) > 0 ? 0.05 * fabs(a.y1) : 1;
  a.x0 -= dx;
  a.x1 += dx;
  a.y0 -= dy;
  a.y1 += dy;
  si_unit ut = si_time(fmax(fabs(a.x0), fabs(a.x1))), ue = si_energy(fmax(fabs(a.y0), fabs(a.y1)));

  /* Pixel positions: evaluated points, the model's, and the non-dominated in time order. */
  double *ex = malloc(6 * (n ? n : 1) * sizeof *ex);
  by_t *order = malloc((n ? n : 1) * sizeof *order);
  unsigned char *sel = malloc(n ? n : 1), *want = written ? malloc(n ? n : 1) : NULL;
  cover cv = {(int)(WIDTH / CELL) + 1, (int)(HEIGHT / CELL) + 1, NULL};
  cv.cell = calloc((size_t)cv.cols * (size_t)cv.rows, 1);
  zeus__buf b = {0};
  int rc = ZEUS_OK;
  if (!ex || !order || !sel || (written && !want) || !cv.cell) rc = zeus__oom("drawing a frontier plot");
  if (!rc && written) rc = zeus__frontier_select(f, written, want);
  double *ey = ex + n, *mx = ex + 2 * n, *my = ex + 3 * n, *ox = ex + 4 * n, *oy = ex + 5 * n;
  size_t nopt = 0, nwant = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const zeus_frontier_point *p = &f->pts[i];
    ex[i] = px(&a, p->eval_time_s);
    ey[i] = py(&a, p->eval_energy_j);
    mx[i] = px(&a, p->time_s);
    my[i] = py(&a, p->cost_with_blocking_j);
    sel[i] = p->dominated;
    if (!p->dominated) order[nopt++] = (by_t){p->eval_time_s, i};
    if (want) nwant += want[i];
  }
  if (!rc) {
    qsort(order, nopt, sizeof *order, cmp_by_t);
    for (size_t k = 0; k < nopt; k++) {
      ox[k] = ex[order[k].i];
      oy[k] = ey[order[k].i];
    }
  }
  char npts_s[32], ndom_s[32], nopt_s[32], nwant_s[32];
  thousands(n, npts_s, sizeof npts_s);
  thousands(ndom, ndom_s, sizeof ndom_s);
  thousands(nopt, nopt_s, sizeof nopt_s);
  thousands(nwant, nwant_s, sizeof nwant_s);

  /* Drawn first into `body`, so the legend's place (which needs what the data cover) and the
   * picture's height are known before the header. */
  zeus__buf body = {0};
  if (!rc) rc = x_ticks(&body, &a, ut, true, 8);
  if (!rc) rc = y_ticks(&body, &a, ue);
  if (!rc)
    rc = zeus__buf_printf(&body, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#444'/>\n",
                          a.L, a.T, a.W, a.H);
  if (!rc) rc = dots(&body, &cv, ex, ey, sel, n, 2, 1.6, "fill='" C_GREY "' fill-opacity='0.7'");
  if (!rc)
    rc = polyline(&body, &cv, mx, my, n,
                  "stroke='" C_VERMILION "' stroke-width='1.5' stroke-dasharray='5 3' stroke-linejoin='round'");
  if (!rc) rc = polyline(&body, &cv, ox, oy, nopt, "stroke='" C_BLUE "' stroke-width='2' stroke-linejoin='round'");
  if (!rc) rc = dots(&body, &cv, ox, oy, NULL, nopt, 3, 2.2, "fill='" C_BLUE "'");
  if (!rc && want) rc = dots(&body, &cv, ex, ey, want, n, 5, 3.5, "fill='none' stroke='#000' stroke-width='1.2'");
  if (!rc && n > 0) {
    double x = ex[emin], y = ey[emin];
    cover_disc(&cv, x, y, 7);
    rc = zeus__buf_printf(&body,
                          "<path d='M%.1f %.1fl7 7l-7 7l-7 -7z' fill='" C_ORANGE "' stroke='#000' stroke-width='1'>"
                          "<title>least energy: plan %zu</title></path>\n",
                          x, y - 7, emin);
  }

  /* The legend: in a corner of the plot where it covers nothing, else below the plot. */
  char lab[5][160], emin_e[32], emin_t[32];
  legend_sym sym[5];
  int nl = 0;
  if (n > 0) {
    si_text(f->pts[emin].eval_energy_j, true, emin_e, sizeof emin_e);
    si_text(f->pts[emin].eval_time_s, false, emin_t, sizeof emin_t);
  }
  snprintf(lab[nl], sizeof lab[0], "evaluated plans, Pareto-optimal (%s)", nopt_s);
  sym[nl++] = SYM_LINE_DOTS;
  snprintf(lab[nl], sizeof lab[0], "evaluated plans, dominated (%s)", ndom_s);
  sym[nl++] = SYM_DOT;
  snprintf(lab[nl], sizeof lab[0], "cost model (the solver's estimate)");
  sym[nl++] = SYM_DASHED;
  if (want) {
    snprintf(lab[nl], sizeof lab[0], "plan files written (%s)", nwant_s);
    sym[nl++] = SYM_RING;
  }
  if (n > 0) {
    snprintf(lab[nl], sizeof lab[0], "least energy: %s at %s (plan %zu)", emin_e, emin_t, emin);
    sym[nl++] = SYM_DIAMOND;
  }
  double lw = 0, row = 17, lh = row * nl + 10;
  for (int k = 0; k < nl; k++) lw = fmax(lw, text_width(lab[k], 11));
  lw += 44;
  double cand[4][2] = {{a.L + a.W - lw - 8, a.T + 8},
                       {a.L + 8, a.T + a.H - lh - 8},
                       {a.L + 8, a.T + 8},
                       {a.L + a.W - lw - 8, a.T + a.H - lh - 8}};
  double lx = 0, ly = 0, height = HEIGHT;
  bool placed = false;
  for (int k = 0; k < 4 && !placed; k++)
    if (cover_free(&cv, cand[k][0], cand[k][1], lw, lh)) {
      lx = cand[k][0];
      ly = cand[k][1];
      placed = true;
    }
  /* Else the free place nearest the top (then the right) of the plot. */
  for (double y = a.T + 8; !placed && y + lh <= a.T + a.H - 8; y += 8)
    for (double x = a.L + a.W - lw - 8; !placed && x >= a.L + 8; x -= 8)
      if (cover_free(&cv, x, y, lw, lh)) {
        lx = x;
        ly = y;
        placed = true;
      }
  if (!placed) { /* below the x-axis title */
    lx = a.L + (a.W - lw) / 2;
    ly = a.T + a.H + 48;
    height = ly + lh + 10;
  }
  if (!rc)
    rc = zeus__buf_printf(&body,
                          "<g font-size='11'><rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='white' "
                          "fill-opacity='0.95' stroke='#888' rx='3'/>\n",
                          lx, ly, lw, lh);
  for (int k = 0; k < nl && !rc; k++) {
    double y = ly + 5 + row * k + row / 2;
    rc = legend_symbol(&body, sym[k], lx + 8, y);
    if (!rc) rc = zeus__buf_printf(&body, "<text x='%.1f' y='%.1f'>%s</text>\n", lx + 38, y + 4, lab[k]);
  }
  if (!rc) rc = zeus__buf_puts(&body, "</g>\n");

  if (!rc)
    rc = zeus__buf_printf(&b,
                          "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
                          "viewBox='0 0 %.0f %.0f' font-family='DejaVu Sans, Helvetica, Arial, sans-serif'>\n"
                          "<rect width='%.0f' height='%.0f' fill='white'/>\n"
                          "<text x='%.1f' y='22' font-size='14' text-anchor='middle'>Time–energy frontier: %d stage%s "
                          "× %d microbatch%s, %s plan%s</text>\n"
                          "<text x='%.1f' y='%.1f' font-size='13' text-anchor='middle'>iteration time (%s)</text>\n"
                          "<text x='16' y='%.1f' font-size='13' text-anchor='middle' transform='rotate(-90 16 %.1f)'>"
                          "iteration energy (%s)</text>\n",
                          WIDTH, height, WIDTH, height, WIDTH, height, a.L + a.W / 2, f->dag.S, f->dag.S == 1 ? "" : "s",
                          f->dag.M, f->dag.M == 1 ? "" : "es", npts_s, n == 1 ? "" : "s",
                          a.L + a.W / 2, a.T + a.H + 36, ut.name, a.T + a.H / 2, a.T + a.H / 2, ue.name);
  if (!rc) rc = zeus__buf_append(&b, body.data ? body.data : "", body.len);
  zeus__buf_free(&body);
  free(ex);
  free(order);
  free(sel);
  free(want);
  free(cv.cell);
  return finish(&b, rc, path);
}

/* ---- the timeline ---- */

/* Viridis at 0, 1/8, ..., 1 (perceptually uniform, readable in grey and with the common
 * colour-vision deficiencies), interpolated linearly. */
static const unsigned char VIRIDIS[9][3] = {{0x44, 0x01, 0x54}, {0x47, 0x2c, 0x7a}, {0x3b, 0x51, 0x8b},
                                            {0x2c, 0x71, 0x8e}, {0x21, 0x90, 0x8d}, {0x27, 0xad, 0x81},
                                            {0x5c, 0xc8, 0x63}, {0xaa, 0xdc, 0x32}, {0xfd, 0xe7, 0x25}};

static void viridis(double w, char out[8]) {
  if (!(w > 0)) w = 0;
  if (w > 1) w = 1;
  double pos = w * 8;
  int k = (int)pos;
  if (k > 7) k = 7;
  double t = pos - k;
  int c[3];
  for (int j = 0; j < 3; j++) c[j] = (int)lround(VIRIDIS[k][j] + t * (VIRIDIS[k + 1][j] - VIRIDIS[k][j]));
  snprintf(out, 8, "#%02x%02x%02x", c[0], c[1], c[2]);
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
  for (int v = 1; v < n - 1; v++) dur[v] = zeus__frontier_opt(f, q, v)->time_s;
  double T = zeus__fdag_longest(d, dur, start, fin);
  /* The critical path: from the sink, step to a predecessor that finishes last. */
  for (int v = n - 1; v > 0;) {
    crit[v] = 1;
    int best = -1;
    for (int k = d->pred_off[v]; k < d->pred_off[v + 1]; k++)
      if (best < 0 || fin[d->pred[k]] > fin[best]) best = d->pred[k];
    v = best;
  }
  /* One colour scale for every plan of the frontier: the profile's clocks over the stages used. */
  int fmin = f->clock_min_mhz, fmax = f->clock_max_mhz;
  const double row = 34, WIDTH = 1100;
  axes a = {0, T > 0 ? T : 1, 0, 1, 70, 40, 1000, row * d->S};
  double bar_y = a.T + a.H + 58, height = bar_y + 62;
  si_unit ut = si_time(a.x1);
  char e_txt[32], t_txt[32];
  si_text(f->pts[i].eval_energy_j, true, e_txt, sizeof e_txt);
  si_text(f->pts[i].eval_time_s, false, t_txt, sizeof t_txt);
  char npts_s[32];
  thousands(f->npts, npts_s, sizeof npts_s);
  zeus__buf b = {0};
  int rc = zeus__buf_printf(&b,
                            "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' viewBox='0 0 %.0f %.0f' "
                            "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'>\n"
                            "<rect width='%.0f' height='%.0f' fill='white'/>\n"
                            "<text x='%.1f' y='22' font-size='14' text-anchor='middle'>Plan %zu (of %s): %s, %s "
                            "(evaluated); %d stage%s × %d microbatch%s</text>\n",
                            WIDTH, height, WIDTH, height, WIDTH, height, a.L + a.W / 2, i, npts_s, t_txt, e_txt, d->S,
                            d->S == 1 ? "" : "s", d->M, d->M == 1 ? "" : "es");
  for (int s = 0; s < d->S && !rc; s++)
    rc = zeus__buf_printf(&b, "<text x='%.0f' y='%.1f' font-size='12' text-anchor='end'>stage %d</text>\n", a.L - 8,
                          a.T + row * s + row / 2 + 4, s);
  for (int v = 1; v < n - 1 && !rc; v++) {
    const zeus__fopt *o = zeus__frontier_opt(f, q, v);
    double w = fmax > fmin ? (double)(o->freq_mhz - fmin) / (fmax - fmin) : 1.0;
    char colour[8];
    viridis(w, colour);
    double x0 = px(&a, start[v]), x1 = px(&a, fin[v]), y = a.T + row * d->stage[v] + 3, bw = x1 - x0;
    const char *kind = d->kind[v] == ZEUS_FRONTIER_FORWARD ? "forward" : "backward";
    /* The critical path: a black bar under each of its boxes, and an outline where the box is wide
     * enough that the outline does not hide its colour. Other boxes: a white hairline between. */
    if (crit[v])
      rc = zeus__buf_printf(&b, "<rect x='%.2f' y='%.1f' width='%.2f' height='3' fill='#000'/>", x0, y + row - 6,
                            bw > 0.6 ? bw : 0.6);
    const char *stroke = crit[v] && bw >= 8 ? "stroke='#000' stroke-width='2.5'"
                         : bw >= 4          ? "stroke='#fff' stroke-width='0.5'"
                                            : "";
    if (!rc)
      rc = zeus__buf_printf(&b,
                            "<rect x='%.2f' y='%.1f' width='%.2f' height='%.1f' fill='%s' %s>"
                            "<title>%s of microbatch %d, stage %d: %d MHz, %.4f s to %.4f s%s</title></rect>\n",
                            x0, y, bw, row - 9, colour, stroke, kind, d->mb[v], d->stage[v], o->freq_mhz, start[v],
                            fin[v], crit[v] ? " (critical path)" : "");
    char label[24];
    snprintf(label, sizeof label, "%c%d", kind[0] == 'f' ? 'F' : 'B', d->mb[v]);
    if (!rc && text_width(label, 10) + 4 <= bw)
      rc = zeus__buf_printf(&b, "<text x='%.2f' y='%.1f' font-size='10' fill='%s' text-anchor='middle'>%s</text>\n",
                            (x0 + x1) / 2, y + (row - 9) / 2 + 3.5, w < 0.6 ? "#fff" : "#000", label);
  }
  /* Time axis. */
  if (!rc)
    rc = zeus__buf_printf(&b, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#444'/>\n", a.L, a.T + a.H, a.L + a.W,
                          a.T + a.H);
  if (!rc) rc = x_ticks(&b, &a, ut, false, 10);
  if (!rc)
    rc = zeus__buf_printf(&b, "<text x='%.1f' y='%.1f' font-size='13' text-anchor='middle'>time (%s)</text>\n",
                          a.L + a.W / 2, a.T + a.H + 34, ut.name);
  /* Colour bar (the same for every plan of the frontier) and the critical path's key. */
  double bar_w = 400, bar_h = 12;
  if (!rc) rc = zeus__buf_puts(&b, "<defs><linearGradient id='clock' x1='0' x2='1' y1='0' y2='0'>");
  for (int k = 0; k <= 8 && !rc; k++) {
    char colour[8];
    viridis(k / 8.0, colour);
    rc = zeus__buf_printf(&b, "<stop offset='%.3f' stop-color='%s'/>", k / 8.0, colour);
  }
  if (!rc)
    rc = zeus__buf_printf(&b,
                          "</linearGradient></defs>\n"
                          "<text x='%.1f' y='%.1f' font-size='12' text-anchor='end'>SM clock (MHz)</text>\n"
                          "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='url(#clock)' stroke='#444' "
                          "stroke-width='0.5'/>\n",
                          a.L + 120, bar_y + bar_h - 2, a.L + 130, bar_y, bar_w, bar_h);
  if (!rc && fmax > fmin) {
    double step = tick_step(fmax - fmin, 6), bx0 = a.L + 130, first = NAN, last = NAN;
    for (double k = ceil(fmin / step - 1e-9); k * step <= fmax + 1e-9 && !rc; k++) {
      double m = k * step, x = bx0 + (m - fmin) / (fmax - fmin) * bar_w;
      if (isnan(first)) first = x;
      last = x;
      rc = zeus__buf_printf(&b,
                            "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#444'/>"
                            "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%.0f</text>\n",
                            x, bar_y + bar_h, x, bar_y + bar_h + 4, x, bar_y + bar_h + 16, m);
    }
    /* The ends, where no tick label is near: the slowest and fastest clocks. */
    if (!rc && (isnan(first) || first - bx0 > 36))
      rc = zeus__buf_printf(&b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle' fill='#555'>%d</text>\n",
                            bx0, bar_y - 3, fmin);
    if (!rc && (isnan(last) || bx0 + bar_w - last > 36))
      rc = zeus__buf_printf(&b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle' fill='#555'>%d</text>\n",
                            bx0 + bar_w, bar_y - 3, fmax);
  }
  if (!rc && !(fmax > fmin)) /* one clock: its colour is the scale's top */
    rc = zeus__buf_printf(&b, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>%d</text>\n",
                          a.L + 130 + bar_w, bar_y + bar_h + 16, fmax);
  if (!rc)
    rc = zeus__buf_printf(&b,
                          "<rect x='%.1f' y='%.1f' width='22' height='%.1f' fill='#bbb' stroke='#000' stroke-width='2.5'/>"
                          "<rect x='%.1f' y='%.1f' width='22' height='3' fill='#000'/>"
                          "<text x='%.1f' y='%.1f' font-size='12'>critical path (outline, bar below)</text>\n"
                          "<text x='%.1f' y='%.1f' font-size='11' fill='#555'>F3, B3: forward, backward of microbatch 3; "
                          "every box's tooltip gives its clock and times</text>\n",
                          a.L + 580, bar_y - 3, bar_h - 2, a.L + 580, bar_y + bar_h + 1, a.L + 610, bar_y + bar_h - 1, a.L,
                          bar_y + 48);
  free(dur);
  free(crit);
  free(q);
  return finish(&b, rc, path);
}
