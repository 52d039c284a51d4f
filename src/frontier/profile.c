/* Instruction profiles: the measured time and energy of each (stage, instruction, clock). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/csv.h"
#include "frontier/frontier.h"

int zeus_frontier_profile_new(zeus_frontier_profile **out, const char *name) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_frontier_profile_new: out is NULL");
  zeus_frontier_profile *p = calloc(1, sizeof *p);
  if (!p || !(p->name = strdup(name ? name : "profile"))) {
    free(p);
    return zeus__oom("creating a frontier profile");
  }
  *out = p;
  return ZEUS_OK;
}

void zeus_frontier_profile_free(zeus_frontier_profile *p) {
  if (!p) return;
  for (int k = 0; k < 2; k++) {
    free(p->rows[k]);
    free(p->row_stage[k]);
  }
  free(p->name);
  free(p);
}

int zeus_frontier_profile_num_stages(const zeus_frontier_profile *p) { return p ? p->nstages : 0; }

static int profile_push(zeus_frontier_profile *p, int stage, int kind, const zeus__fmeas *m) {
  if (p->nrows[kind] == p->cap[kind]) {
    size_t cap = p->cap[kind] ? 2 * p->cap[kind] : 64;
    zeus__fmeas *r = realloc(p->rows[kind], cap * sizeof *r);
    if (!r) return zeus__oom("reading a frontier profile");
    p->rows[kind] = r;
    int *st = realloc(p->row_stage[kind], cap * sizeof *st);
    if (!st) return zeus__oom("reading a frontier profile");
    p->row_stage[kind] = st;
    p->cap[kind] = cap;
  }
  p->rows[kind][p->nrows[kind]] = *m;
  p->row_stage[kind][p->nrows[kind]] = stage;
  p->nrows[kind]++;
  if (stage + 1 > p->nstages) p->nstages = stage + 1;
  return ZEUS_OK;
}

int zeus_frontier_profile_add(zeus_frontier_profile *p, int stage, zeus_frontier_instr kind,
                              int freq_mhz, double time_s, double energy_j) {
  if (!p) return zeus__error(ZEUS_EINVAL, "zeus_frontier_profile_add: profile is NULL");
  if (stage < 0) return zeus__error(ZEUS_EINVAL, "%s: stage %d is negative", p->name, stage);
  if (kind != ZEUS_FRONTIER_FORWARD && kind != ZEUS_FRONTIER_BACKWARD)
    return zeus__error(ZEUS_EINVAL, "%s: instruction kind %d is neither forward nor backward",
                       p->name, (int)kind);
  if (freq_mhz <= 0) return zeus__error(ZEUS_EINVAL, "%s: frequency %d MHz is not positive", p->name, freq_mhz);
  if (!isfinite(time_s) || time_s <= 0)
    return zeus__error(ZEUS_EINVAL, "%s: time %g s is not a positive number", p->name, time_s);
  if (!isfinite(energy_j) || energy_j < 0)
    return zeus__error(ZEUS_EINVAL, "%s: energy %g J is not a non-negative number", p->name, energy_j);
  zeus__fmeas m = {freq_mhz, time_s, energy_j, 0};
  return profile_push(p, stage, (int)kind, &m);
}

/* A profile is a CSV file: a regular file of at most 64 MiB (core's bounded reader refuses FIFOs,
 * devices and folders at once). */
#define ZEUS__PROFILE_MAX_BYTES ((size_t)64 << 20)

int zeus_frontier_profile_load(zeus_frontier_profile **out, const char *path) {
  if (!out || !path) return zeus__error(ZEUS_EINVAL, "zeus_frontier_profile_load: NULL argument");
  zeus__csv *c = NULL;
  zeus_frontier_profile *p = NULL;
  char *data = NULL;
  size_t len = 0;
  int rc = zeus__read_file_max(path, ZEUS__PROFILE_MAX_BYTES, "frontier profile (CSV)", &data, &len);
  if (rc) return rc;
  /* A UTF-8 byte-order mark (spreadsheets write one) is not part of the first column's name. */
  size_t skip = len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
  rc = zeus__csv_parse(data + skip, len - skip, path, &c);
  free(data);
  if (rc) return rc;
  size_t cs, ci, cf, ct, ce;
  if ((rc = zeus__csv_require_col(c, "stage", &cs)) || (rc = zeus__csv_require_col(c, "instruction", &ci)) ||
      (rc = zeus__csv_require_col(c, "frequency", &cf)) || (rc = zeus__csv_require_col(c, "time", &ct)) ||
      (rc = zeus__csv_require_col(c, "energy", &ce)))
    goto done;
  if ((rc = zeus_frontier_profile_new(&p, path))) goto done;
  for (size_t r = 0; r < zeus__csv_nrows(c); r++) {
    long stage, freq;
    double t, e;
    if ((rc = zeus__csv_long(c, r, cs, &stage)) || (rc = zeus__csv_long(c, r, cf, &freq)) ||
        (rc = zeus__csv_double(c, r, ct, &t)) || (rc = zeus__csv_double(c, r, ce, &e)))
      goto done;
    const char *instr = zeus__csv_cell(c, r, ci);
    size_t line = zeus__csv_line(c, r);
    int kind;
    if (strcasecmp(instr, "forward") == 0) kind = ZEUS_FRONTIER_FORWARD;
    else if (strcasecmp(instr, "backward") == 0) kind = ZEUS_FRONTIER_BACKWARD;
    else {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu:%zu: column 'instruction': expected forward or backward, got '%s'",
                       path, line, ci + 1, instr);
      goto done;
    }
    if (stage < 0 || stage > 100000) {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu:%zu: column 'stage': %ld is not a stage index", path, line,
                       cs + 1, stage);
      goto done;
    }
    if (freq <= 0 || freq > 1000000) {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu:%zu: column 'frequency': %ld MHz is not a clock", path,
                       line, cf + 1, freq);
      goto done;
    }
    if (!isfinite(t) || t <= 0) {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu:%zu: column 'time': %g s is not a positive time", path,
                       line, ct + 1, t);
      goto done;
    }
    if (!isfinite(e) || e < 0) {
      rc = zeus__error(ZEUS_EPARSE, "%s:%zu:%zu: column 'energy': %g J is not a non-negative energy",
                       path, line, ce + 1, e);
      goto done;
    }
    zeus__fmeas m = {(int)freq, t, e, line};
    if ((rc = profile_push(p, (int)stage, kind, &m))) goto done;
  }
  if (p->nrows[0] + p->nrows[1] == 0) {
    rc = zeus__error(ZEUS_EPARSE, "%s: no measurements (only a header)", path);
    goto done;
  }
  *out = p;
  p = NULL;
done:
  zeus_frontier_profile_free(p);
  zeus__csv_free(c);
  return rc;
}
