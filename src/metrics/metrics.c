/* The Prometheus text exposition format: see metrics.h. */
#include "metrics/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void zeus__metrics_writer_init(zeus__metrics_writer *w) { memset(w, 0, sizeof *w); }

void zeus__metrics_writer_free(zeus__metrics_writer *w) {
  zeus__buf_free(&w->buf);
  w->rc = 0;
}

static void put(zeus__metrics_writer *w, const char *s, size_t n) {
  if (w->rc) return;
  int rc = zeus__buf_append(&w->buf, s, n);
  if (rc) w->rc = rc;
}

static void puts_(zeus__metrics_writer *w, const char *s) { put(w, s, strlen(s)); }

/* HELP text escapes backslash and newline; label values also escape the double quote. */
static void escaped(zeus__metrics_writer *w, const char *s, int quote) {
  const char *run = s;
  for (; *s; s++) {
    const char *rep = NULL;
    if (*s == '\\') rep = "\\\\";
    else if (*s == '\n') rep = "\\n";
    else if (quote && *s == '"') rep = "\\\"";
    if (!rep) continue;
    put(w, run, (size_t)(s - run));
    puts_(w, rep);
    run = s + 1;
  }
  put(w, run, (size_t)(s - run));
}

void zeus__metrics_family(zeus__metrics_writer *w, const char *name, const char *type, const char *help) {
  puts_(w, "# HELP ");
  puts_(w, name);
  puts_(w, " ");
  escaped(w, help, 0);
  puts_(w, "\n# TYPE ");
  puts_(w, name);
  puts_(w, " ");
  puts_(w, type);
  puts_(w, "\n");
}

void zeus__metrics_value(zeus__metrics_writer *w, double v) {
  if (isnan(v)) return puts_(w, "NaN");
  if (isinf(v)) return puts_(w, v > 0 ? "+Inf" : "-Inf");
  char s[40];
  /* Whole numbers (most counters) print as integers; others with the fewest digits that read
   * back to the same double. */
  if (v == floor(v) && fabs(v) < 1e15) {
    snprintf(s, sizeof s, "%.0f", v);
  } else {
    for (int prec = 6; prec <= 17; prec++) {
      snprintf(s, sizeof s, "%.*g", prec, v);
      if (strtod(s, NULL) == v) break;
    }
  }
  puts_(w, s);
}

static void labels_(zeus__metrics_writer *w, const zeus__metrics_label *labels, size_t n, const char *le) {
  if (!n && !le) return;
  puts_(w, "{");
  for (size_t i = 0; i < n; i++) {
    if (i) puts_(w, ",");
    puts_(w, labels[i].name);
    puts_(w, "=\"");
    escaped(w, labels[i].value ? labels[i].value : "", 1);
    puts_(w, "\"");
  }
  if (le) {
    if (n) puts_(w, ",");
    puts_(w, "le=\"");
    puts_(w, le);
    puts_(w, "\"");
  }
  puts_(w, "}");
}

void zeus__metrics_sample(zeus__metrics_writer *w, const char *name, const char *suffix,
                          const zeus__metrics_label *labels, size_t nlabels, double value) {
  puts_(w, name);
  if (suffix) puts_(w, suffix);
  labels_(w, labels, nlabels, NULL);
  puts_(w, " ");
  zeus__metrics_value(w, value);
  puts_(w, "\n");
}

void zeus__metrics_hist_init(zeus__metrics_hist *h, const double *bounds, size_t nbounds) {
  if (nbounds > ZEUS__METRICS_MAX_BUCKETS) nbounds = ZEUS__METRICS_MAX_BUCKETS;
  h->bounds = bounds;
  h->nbounds = nbounds;
  for (size_t i = 0; i <= ZEUS__METRICS_MAX_BUCKETS; i++) atomic_init(&h->counts[i], 0);
  atomic_init(&h->sum_ns, 0);
}

void zeus__metrics_hist_observe(zeus__metrics_hist *h, double v) {
  size_t i = 0;
  while (i < h->nbounds && v > h->bounds[i]) i++;
  atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
  if (v > 0 && v < 1.8e10) atomic_fetch_add_explicit(&h->sum_ns, (uint_fast64_t)llround(v * 1e9), memory_order_relaxed);
}

void zeus__metrics_hist_write(zeus__metrics_writer *w, const char *name, const zeus__metrics_label *labels,
                              size_t nlabels, const zeus__metrics_hist *h) {
  uint64_t cum = 0;
  char le[40];
  for (size_t i = 0; i <= h->nbounds; i++) {
    cum += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
    if (i < h->nbounds) {
      zeus__metrics_writer tmp;
      zeus__metrics_writer_init(&tmp);
      zeus__metrics_value(&tmp, h->bounds[i]);
      snprintf(le, sizeof le, "%s", tmp.buf.data ? tmp.buf.data : "0");
      zeus__metrics_writer_free(&tmp);
    } else {
      snprintf(le, sizeof le, "+Inf");
    }
    puts_(w, name);
    puts_(w, "_bucket");
    labels_(w, labels, nlabels, le);
    puts_(w, " ");
    zeus__metrics_value(w, (double)cum);
    puts_(w, "\n");
  }
  zeus__metrics_sample(w, name, "_sum", labels, nlabels,
                       (double)atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9);
  zeus__metrics_sample(w, name, "_count", labels, nlabels, (double)cum);
}

void zeus__metrics_counter_update(zeus__metrics_counter *c, uint64_t reading, uint64_t wrap) {
  if (!c->have_last) {
    c->total = (double)reading;
    c->last = reading;
    c->have_last = 1;
    return;
  }
  if (reading >= c->last) c->total += (double)(reading - c->last);
  else if (wrap && c->last <= wrap && reading <= wrap) c->total += (double)(wrap - c->last) + (double)reading;
  else c->total += (double)reading; /* reset: the counter started again from zero */
  c->last = reading;
}
