/* trace.c: loading the NSDI '23 train and power traces into flat rows with interned names. */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/csv.h"
#include "trace/trace_internal.h"

static size_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (size_t)h;
}

int zeus__trace_name(const zeus_trace *t, const char *name) {
  if (!t->name_slots_cap) return -1;
  size_t mask = t->name_slots_cap - 1;
  for (size_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
    size_t v = t->name_slots[i];
    if (v == 0) return -1;
    if (strcmp(t->names[v - 1], name) == 0) return (int)(v - 1);
  }
}

static void index_name(zeus_trace *t, size_t idx) {
  size_t mask = t->name_slots_cap - 1, i = name_hash(t->names[idx]) & mask;
  while (t->name_slots[i]) i = (i + 1) & mask;
  t->name_slots[i] = idx + 1;
}

static int intern(zeus_trace *t, const char *name, int *out) {
  int i = zeus__trace_name(t, name);
  if (i >= 0) {
    *out = i;
    return ZEUS_OK;
  }
  if (t->nnames >= INT_MAX - 1) return zeus__error(ZEUS_ERANGE, "a trace holds more than %d names", INT_MAX - 1);
  if (2 * (t->nnames + 1) > t->name_slots_cap) {
    size_t cap = t->name_slots_cap ? 2 * t->name_slots_cap : 64;
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots) return zeus__oom("loading a trace");
    free(t->name_slots);
    t->name_slots = slots;
    t->name_slots_cap = cap;
    for (size_t k = 0; k < t->nnames; k++) index_name(t, k);
  }
  int rc = zeus__grow(&t->names, &t->names_cap, t->nnames + 1, sizeof *t->names, "loading a trace");
  if (rc) return rc;
  char *s = strdup(name);
  if (!s) return zeus__oom("loading a trace");
  t->names[t->nnames] = s;
  index_name(t, t->nnames);
  *out = (int)t->nnames++;
  return ZEUS_OK;
}

typedef struct cols {
  size_t dataset, network, optimizer, bs, a, b, c;
} cols;

static int require(const zeus__csv *c, const char *const *names, size_t *out, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc = zeus__csv_require_col(c, names[i], &out[i]);
    if (rc) return rc;
  }
  return ZEUS_OK;
}

static int names_of(zeus_trace *t, const zeus__csv *c, size_t r, const size_t *col, int *d, int *n, int *o) {
  int rc = intern(t, zeus__csv_cell(c, r, col[0]), d);
  if (!rc) rc = intern(t, zeus__csv_cell(c, r, col[1]), n);
  if (!rc) rc = intern(t, zeus__csv_cell(c, r, col[2]), o);
  return rc;
}

static int positive_long(const zeus__csv *c, size_t r, size_t col, long *out) {
  int rc = zeus__csv_long(c, r, col, out);
  if (!rc && *out <= 0)
    rc = zeus__error(ZEUS_EPARSE, "%s:%zu: column '%s': %ld, expected a positive integer", zeus__csv_name(c),
                     zeus__csv_line(c, r), zeus__csv_header(c, col), *out);
  return rc;
}

static int positive_double(const zeus__csv *c, size_t r, size_t col, double *out) {
  int rc = zeus__csv_double(c, r, col, out);
  if (!rc && !(*out > 0 && isfinite(*out)))
    rc = zeus__error(ZEUS_EPARSE, "%s:%zu: column '%s': %g, expected a positive number", zeus__csv_name(c),
                     zeus__csv_line(c, r), zeus__csv_header(c, col), *out);
  return rc;
}

static int load_train(zeus_trace *t, const char *path) {
  zeus__csv *c;
  int rc = zeus__csv_read_file_as(path, "train trace (CSV)", &c);
  if (rc) return rc;
  static const char *const need[] = {"dataset", "network", "optimizer", "batch_size", "target_metric", "target_epoch"};
  size_t col[6];
  rc = require(c, need, col, 6);
  size_t n = zeus__csv_nrows(c);
  if (!rc && n == 0) rc = zeus__error(ZEUS_EPARSE, "%s: no rows", path);
  if (!rc) {
    t->train = calloc(n, sizeof *t->train);
    if (!t->train) rc = zeus__oom("loading the train trace");
  }
  for (size_t r = 0; r < n && !rc; r++) {
    zeus__train_row *row = &t->train[r];
    rc = names_of(t, c, r, col, &row->dataset, &row->network, &row->optimizer);
    if (!rc) rc = positive_long(c, r, col[3], &row->bs);
    if (!rc) rc = zeus__csv_double(c, r, col[4], &row->target);
    if (!rc) {
      const char *e = zeus__csv_cell(c, r, col[5]);
      if (!*e || strcasecmp(e, "nan") == 0) {
        row->epoch = NAN;
      } else {
        rc = positive_double(c, r, col[5], &row->epoch);
      }
    }
    t->ntrain = r + 1;
  }
  zeus__csv_free(c);
  return rc;
}

static int load_power(zeus_trace *t, const char *path) {
  zeus__csv *c;
  int rc = zeus__csv_read_file_as(path, "power trace (CSV)", &c);
  if (rc) return rc;
  static const char *const need[] = {"dataset",    "network",        "optimizer",    "batch_size",
                                     "power_limit", "time_per_epoch", "average_power"};
  size_t col[7];
  rc = require(c, need, col, 7);
  size_t n = zeus__csv_nrows(c);
  if (!rc && n == 0) rc = zeus__error(ZEUS_EPARSE, "%s: no rows", path);
  if (!rc) {
    t->power = calloc(n, sizeof *t->power);
    if (!t->power) rc = zeus__oom("loading the power trace");
  }
  for (size_t r = 0; r < n && !rc; r++) {
    zeus__power_row *row = &t->power[r];
    rc = names_of(t, c, r, col, &row->dataset, &row->network, &row->optimizer);
    if (!rc) rc = positive_long(c, r, col[3], &row->bs);
    if (!rc) rc = positive_double(c, r, col[4], &row->pl_w);
    if (!rc) rc = positive_double(c, r, col[5], &row->time_per_epoch);
    if (!rc) rc = positive_double(c, r, col[6], &row->power_w);
    if (!rc && row->pl_w > t->max_power_w) t->max_power_w = row->pl_w;
    t->npower = r + 1;
  }
  zeus__csv_free(c);
  return rc;
}

int zeus_trace_open_files(zeus_trace **out, const char *train_csv, const char *power_csv) {
  zeus_trace *t = calloc(1, sizeof *t);
  if (!t) return zeus__oom("loading a trace");
  int rc = load_train(t, train_csv);
  if (!rc) rc = load_power(t, power_csv);
  if (rc) {
    zeus_trace_close(t);
    return rc;
  }
  *out = t;
  return ZEUS_OK;
}

int zeus_trace_open(zeus_trace **out, const char *dir, const char *gpu) {
  if (!dir || !*dir) return zeus__error(ZEUS_EINVAL, "trace folder: expected a path");
  if (!gpu || !*gpu || strchr(gpu, '/'))
    return zeus__error(ZEUS_EINVAL, "GPU '%s': expected a name such as a40, v100, p100 or rtx6000", gpu ? gpu : "");
  zeus__buf train = {0}, power = {0};
  int rc = zeus__buf_printf(&train, "%s/summary_train.csv", dir);
  if (!rc) rc = zeus__buf_printf(&power, "%s/summary_power_%s.csv", dir, gpu);
  if (!rc) rc = zeus_trace_open_files(out, train.data, power.data);
  zeus__buf_free(&train);
  zeus__buf_free(&power);
  return rc;
}

void zeus_trace_close(zeus_trace *t) {
  if (!t) return;
  for (size_t i = 0; i < t->nnames; i++) free(t->names[i]);
  free(t->names);
  free(t->name_slots);
  free(t->train);
  free(t->power);
  free(t);
}
