/* src/metrics/metrics.h: the Prometheus text exposition format (version 0.0.4), internal.
 *
 * One writer for every endpoint that serves /metrics (`zeus exporter`, the Perseus server, a
 * daemon): families with their HELP and TYPE lines, samples with escaped labels, and a histogram
 * with fixed buckets that many threads may observe into. A server adds /metrics in a few lines:
 *
 *   zeus__metrics_writer w;  zeus__metrics_writer_init(&w);
 *   zeus__metrics_family(&w, "zeus_x_requests_total", "counter", "Requests served.");
 *   zeus__metrics_sample(&w, "zeus_x_requests_total", NULL, labels, 2, (double)count);
 *   ... then serve w.buf.data (w.buf.len bytes) with ZEUS__METRICS_CONTENT_TYPE, or fail with
 *   w.rc (ZEUS_ENOMEM) when it is nonzero; zeus__metrics_writer_free(&w) in both cases.
 *
 * Names must already follow the format ([a-zA-Z_:][a-zA-Z0-9_:]*); label values may hold anything
 * (backslash, double quote and newline are escaped). Values: shortest text that reads back to the
 * same double; NaN and infinities as Prometheus spells them.
 */
#ifndef ZEUS_METRICS_INTERNAL_H
#define ZEUS_METRICS_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

#define ZEUS__METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct zeus__metrics_label {
  const char *name;
  const char *value;
} zeus__metrics_label;

typedef struct zeus__metrics_writer {
  zeus__buf buf;
  int rc; /* sticky: the first error (ZEUS_ENOMEM); later calls then do nothing */
} zeus__metrics_writer;

void zeus__metrics_writer_init(zeus__metrics_writer *w);
void zeus__metrics_writer_free(zeus__metrics_writer *w);

/* "# HELP <name> <help>\n# TYPE <name> <type>\n"; type is counter, gauge, histogram or untyped. */
void zeus__metrics_family(zeus__metrics_writer *w, const char *name, const char *type, const char *help);
/* "<name><suffix>{l1="v1",...} <value>\n"; suffix (e.g. "_bucket") may be NULL. */
void zeus__metrics_sample(zeus__metrics_writer *w, const char *name, const char *suffix,
                          const zeus__metrics_label *labels, size_t nlabels, double value);
/* Appends a value as the format writes it (shortest round-trip, NaN, +Inf, -Inf). */
void zeus__metrics_value(zeus__metrics_writer *w, double v);

/* A histogram with fixed upper bounds (seconds, bytes, ...), observed lock-free by any thread.
 * Counts are cumulative only when written; each observation increments one bucket. */
#define ZEUS__METRICS_MAX_BUCKETS 16
typedef struct zeus__metrics_hist {
  const double *bounds; /* ascending, nbounds entries, static storage; +Inf is implicit */
  size_t nbounds;
  atomic_uint_fast64_t counts[ZEUS__METRICS_MAX_BUCKETS + 1];
  atomic_uint_fast64_t sum_ns; /* sum of observations, in units of 1e-9 */
} zeus__metrics_hist;

/* Sets the bounds (at most ZEUS__METRICS_MAX_BUCKETS) and zeroes the counts. */
void zeus__metrics_hist_init(zeus__metrics_hist *h, const double *bounds, size_t nbounds);
void zeus__metrics_hist_observe(zeus__metrics_hist *h, double v);
/* The _bucket (with le), _sum and _count samples of one histogram series (no HELP/TYPE). */
void zeus__metrics_hist_write(zeus__metrics_writer *w, const char *name, const zeus__metrics_label *labels,
                              size_t nlabels, const zeus__metrics_hist *h);

/* A counter fed by readings of a device counter that may wrap around or be reset: `total` only
 * grows. `wrap` is the value the counter wraps at (0: unknown, a decrease is taken as a reset
 * that restarted the count from zero). The first reading starts the total at that reading. */
typedef struct zeus__metrics_counter {
  double total;
  uint64_t last;
  int have_last;
} zeus__metrics_counter;
void zeus__metrics_counter_update(zeus__metrics_counter *c, uint64_t reading, uint64_t wrap);

#endif
