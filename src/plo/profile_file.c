/* Power-limit profile files: {"measurements": [{"power_limit": W, "energy": J, "time": s}, ...]},
 * the original's _PowerLimitMeasurementList. Loading checks every field and names the file and
 * the entry in errors; saving is atomic (temporary file, fsync, rename). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "plo/plo_internal.h"

#define PROFILE_SHAPE "{\"measurements\": [{\"power_limit\": W, \"energy\": J, \"time\": s}, ...]}"

/* One number field of measurements[i]: present, a number, finite, and >= min (> min if strict). */
static int req_num(const char *path, size_t i, const json_t *o, const char *key, double min, bool strict,
                   double *out) {
  json_t *v = json_object_get(o, key);
  if (!v)
    return zeus__error(ZEUS_EPARSE, "power-limit profile '%s': measurements[%zu] lacks the field '%s' (expected %s)",
                       path, i, key, PROFILE_SHAPE);
  if (!json_is_number(v))
    return zeus__error(ZEUS_EPARSE, "power-limit profile '%s': measurements[%zu].%s must be a number, got %s", path,
                       i, key, zeus__json_type_name(v));
  double x = json_number_value(v);
  if (!isfinite(x) || x < min || (strict && x == min))
    return zeus__error(ZEUS_EPARSE, "power-limit profile '%s': measurements[%zu].%s is %g, expected a number %s %g",
                       path, i, key, x, strict ? ">" : ">=", min);
  *out = x;
  return ZEUS_OK;
}

typedef struct limit_at {
  unsigned limit_w;
  size_t index;
} limit_at;

static int cmp_limit_at(const void *a, const void *b) {
  const limit_at *x = a, *y = b;
  if (x->limit_w != y->limit_w) return x->limit_w < y->limit_w ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Every power limit once. Sorting (O(n log n)) instead of comparing every pair: a profile of
 * 100,000 limits took seconds that way. The message names the same pair the pairwise check
 * did: the earliest entry that repeats an earlier one, and the first of those. */
static int check_unique(const char *path, const zeus_plo_measurement *m, size_t n) {
  limit_at *v = malloc(n * sizeof *v);
  if (!v) return zeus__oom("loading a power-limit profile");
  for (size_t i = 0; i < n; i++) v[i] = (limit_at){m[i].power_limit_w, i};
  qsort(v, n, sizeof *v, cmp_limit_at);
  size_t first = 0, second = SIZE_MAX;
  for (size_t k = 1; k < n; k++) {
    /* v[k] repeats its group's first entry; only the group's second entry can be the earliest. */
    if (v[k].limit_w == v[k - 1].limit_w && (k == 1 || v[k - 1].limit_w != v[k - 2].limit_w) && v[k].index < second) {
      first = v[k - 1].index;
      second = v[k].index;
    }
  }
  int rc = ZEUS_OK;
  if (second != SIZE_MAX)
    rc = zeus__error(ZEUS_EPARSE,
                     "power-limit profile '%s': power limit %u W appears twice (measurements[%zu] and "
                     "[%zu])",
                     path, m[second].power_limit_w, first, second);
  free(v);
  return rc;
}

/* The file's optional "choice" (written by a run that re-measured): checked like the rest, each
 * limit one of the file's measurements (m[0..count)), none twice. */
static int load_choice(const char *path, json_t *root, const zeus_plo_measurement *m, size_t count,
                       zeus__plo_choice *c) {
  json_t *ch = json_object_get(root, "choice");
  if (!ch) return ZEUS_OK;
  json_t *sel = json_object_get(ch, "selector"), *among = json_object_get(ch, "among_w"),
         *eta = json_object_get(ch, "eta");
  static const char *const names[] = {"Energy", "Time", "ZeusCost", "MaxSlowdownConstraint"};
  bool known = false;
  for (size_t i = 0; json_is_string(sel) && i < sizeof names / sizeof *names; i++)
    known = known || strcmp(json_string_value(sel), names[i]) == 0;
  if (!json_is_object(ch) || !known || !json_is_array(among) ||
      (eta && !(json_is_number(eta) && json_number_value(eta) >= 0 && json_number_value(eta) <= 1)))
    return zeus__error(ZEUS_EPARSE,
                       "power-limit profile '%s': 'choice' must be {\"selector\": \"Energy\", \"Time\", "
                       "\"ZeusCost\" or \"MaxSlowdownConstraint\", \"among_w\": [W, ...]} with \"eta\" a number "
                       "in [0, 1] for ZeusCost",
                       path);
  size_t k = json_array_size(among);
  if (k && !(c->among_w = calloc(k, sizeof *c->among_w))) return zeus__oom("loading a power-limit profile");
  for (size_t i = 0; i < k; i++) {
    json_t *v = json_array_get(among, i);
    json_int_t w = json_is_integer(v) ? json_integer_value(v) : 0;
    bool measured = false, again = false;
    for (size_t j = 0; j < count; j++) measured = measured || (json_int_t)m[j].power_limit_w == w;
    for (size_t j = 0; j < i; j++) again = again || (json_int_t)c->among_w[j] == w;
    if (!measured || again) {
      free(c->among_w);
      c->among_w = NULL;
      return zeus__error(ZEUS_EPARSE,
                         "power-limit profile '%s': choice.among_w[%zu] must be a power limit of the file's "
                         "measurements, each once (in W)",
                         path, i);
    }
    c->among_w[i] = (unsigned)w;
  }
  c->namong = k;
  snprintf(c->selector, sizeof c->selector, "%s", json_string_value(sel));
  c->eta = eta ? json_number_value(eta) : 0;
  return ZEUS_OK;
}

/* The file's optional "decision" (issue 37): {"optimal_power_limit_w": W, "contenders_w": [W, ...],
 * "confidence": p}, each limit one of the file's measurements, the confidence in [0, 1]. */
static int load_decision(const char *path, json_t *root, const zeus_plo_measurement *m, size_t count,
                         zeus__plo_choice *c) {
  json_t *d = json_object_get(root, "decision");
  if (!d) return ZEUS_OK;
  json_t *w = json_object_get(d, "optimal_power_limit_w"), *cw = json_object_get(d, "contenders_w"),
         *conf = json_object_get(d, "confidence");
  bool ok = json_is_object(d) && json_is_integer(w) && json_is_array(cw) && json_is_number(conf) &&
            json_number_value(conf) >= 0 && json_number_value(conf) <= 1;
  size_t k = ok ? json_array_size(cw) : 0;
  for (size_t i = 0; ok && i <= k; i++) {
    json_t *v = i < k ? json_array_get(cw, i) : w;
    bool measured = false;
    for (size_t j = 0; json_is_integer(v) && j < count; j++)
      measured = measured || (json_int_t)m[j].power_limit_w == json_integer_value(v);
    ok = measured;
  }
  if (!ok)
    return zeus__error(ZEUS_EPARSE,
                       "power-limit profile '%s': 'decision' must be {\"optimal_power_limit_w\": W, \"contenders_w\": "
                       "[W, ...], \"confidence\": a number in [0, 1]} with every limit one of the file's measurements",
                       path);
  if (k && !(c->contenders_w = calloc(k, sizeof *c->contenders_w))) return zeus__oom("loading a power-limit profile");
  for (size_t i = 0; i < k; i++) c->contenders_w[i] = (unsigned)json_integer_value(json_array_get(cw, i));
  c->ncontenders = k;
  c->decided = true;
  c->optimal_w = (unsigned)json_integer_value(w);
  c->confidence = json_number_value(conf);
  return ZEUS_OK;
}

static int load_impl(const char *path, zeus_plo_measurement **out, size_t *n, zeus__plo_choice *choice);

int zeus_plo_profile_load(const char *path, zeus_plo_measurement **out, size_t *n) {
  return load_impl(path, out, n, NULL);
}

int zeus__plo_profile_load_choice(const char *path, zeus_plo_measurement **out, size_t *n,
                                  zeus__plo_choice *choice) {
  if (choice) memset(choice, 0, sizeof *choice);
  return load_impl(path, out, n, choice);
}

static int load_impl(const char *path, zeus_plo_measurement **out, size_t *n, zeus__plo_choice *choice) {
  if (!path || !out || !n) return zeus__error(ZEUS_EINVAL, "zeus_plo_profile_load: path, out and n are required");
  char *data;
  size_t len;
  int rc = zeus__read_file_max(path, ZEUS__READ_MAX, "power-limit profile (JSON)", &data, &len);
  if (rc) return zeus__error_ctx(rc, "power-limit profile");
  size_t k = 0;
  while (k < len && (data[k] == ' ' || data[k] == '\t' || data[k] == '\n' || data[k] == '\r')) k++;
  if (k == len) {
    free(data);
    return zeus__error(ZEUS_EPARSE, "power-limit profile '%s' is empty, expected %s", path, PROFILE_SHAPE);
  }
  json_t *root = NULL;
  rc = zeus__json_parse(data, len, path, &root);
  free(data);
  if (rc) return zeus__error_ctx(rc, "power-limit profile (delete the file to profile again)");

  zeus_plo_measurement *m = NULL;
  json_t *list = json_is_object(root) ? json_object_get(root, "measurements") : NULL;
  if (!json_is_object(root)) {
    rc = zeus__error(ZEUS_EPARSE, "power-limit profile '%s': expected an object %s, got %s", path, PROFILE_SHAPE,
                     zeus__json_type_name(root));
    goto done;
  }
  if (!list) {
    rc = zeus__error(ZEUS_EPARSE, "power-limit profile '%s': missing the field 'measurements' (expected %s)", path,
                     PROFILE_SHAPE);
    goto done;
  }
  if (!json_is_array(list)) {
    rc = zeus__error(ZEUS_EPARSE, "power-limit profile '%s': 'measurements' must be a list, got %s", path,
                     zeus__json_type_name(list));
    goto done;
  }
  size_t count = json_array_size(list);
  if (count == 0) {
    rc = zeus__error(ZEUS_EPARSE,
                     "power-limit profile '%s': 'measurements' is empty, expected at least one power limit", path);
    goto done;
  }
  if (!(m = calloc(count, sizeof *m))) {
    rc = zeus__oom("loading a power-limit profile");
    goto done;
  }
  for (size_t i = 0; i < count; i++) {
    json_t *o = json_array_get(list, i);
    if (!json_is_object(o)) {
      rc = zeus__error(ZEUS_EPARSE, "power-limit profile '%s': measurements[%zu] must be an object, got %s", path, i,
                       zeus__json_type_name(o));
      goto done;
    }
    double pl;
    if ((rc = req_num(path, i, o, "power_limit", 0, true, &pl)) ||
        (rc = req_num(path, i, o, "energy", 0, false, &m[i].energy_j)) ||
        (rc = req_num(path, i, o, "time", 0, true, &m[i].time_s)))
      goto done;
    if (pl != floor(pl) || pl > 1e6) {
      rc = zeus__error(ZEUS_EPARSE, "power-limit profile '%s': measurements[%zu].power_limit is %g, expected a whole "
                       "number of watts", path, i, pl);
      goto done;
    }
    m[i].power_limit_w = (unsigned)pl;
  }
  if ((rc = check_unique(path, m, count))) goto done;
  zeus__plo_choice unused = {0};
  if ((rc = load_choice(path, root, m, count, choice ? choice : &unused)) ||
      (rc = load_decision(path, root, m, count, choice ? choice : &unused))) {
    if (choice) {
      free(choice->among_w);
      choice->among_w = NULL;
    }
    free(unused.among_w);
    goto done;
  }
  free(unused.among_w); /* checked, not wanted */
  free(unused.contenders_w);
  *out = m;
  *n = count;
  m = NULL;
done:
  free(m);
  json_decref(root);
  return rc;
}

int zeus_plo_profile_save(const char *path, const zeus_plo_measurement *m, size_t n) {
  return zeus__plo_profile_save_info(path, m, NULL, n, NULL);
}

int zeus__plo_profile_save_info(const char *path, const zeus_plo_measurement *m, const zeus_plo_window_info *info,
                                size_t n, const zeus__plo_choice *choice) {
  if (!path || (!m && n)) return zeus__error(ZEUS_EINVAL, "zeus_plo_profile_save: path and measurements are required");
  if (n == 0) return zeus__error(ZEUS_EINVAL, "power-limit profile '%s': nothing to save (no measurements)", path);
  json_t *root = json_object(), *list = json_array();
  int rc = ZEUS_OK;
  if (!root || !list) {
    json_decref(list);
    rc = zeus__oom("saving a power-limit profile");
    goto done;
  }
  json_object_set_new(root, "measurements", list);
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(m[i].energy_j) || !isfinite(m[i].time_s)) {
      rc = zeus__error(ZEUS_EINVAL, "power-limit profile '%s': measurement %zu (%u W) has a non-finite energy or time",
                       path, i, m[i].power_limit_w);
      goto done;
    }
    json_t *o = json_pack("{s:I, s:f, s:f}", "power_limit", (json_int_t)m[i].power_limit_w, "energy", m[i].energy_j,
                          "time", m[i].time_s);
    if (o && info && info[i].steps > 0) {
      json_object_set_new(o, "steps", json_integer(info[i].steps));
      json_object_set_new(o, "duration_s", json_real(info[i].duration_s));
      json_object_set_new(o, "step_time_cv", json_real(info[i].step_cv));
      json_object_set_new(o, "windows", json_integer(info[i].windows));
      json_object_set_new(o, "outlier_steps", json_integer(info[i].outliers));
    }
    if (!o || json_array_append_new(list, o)) {
      rc = zeus__oom("saving a power-limit profile");
      goto done;
    }
  }
  if (choice && choice->namong) {
    json_t *ch = json_object(), *among = json_array();
    if (!ch || !among) {
      json_decref(ch);
      json_decref(among);
      rc = zeus__oom("saving a power-limit profile");
      goto done;
    }
    json_object_set_new(ch, "selector", json_string(choice->selector));
    if (strcmp(choice->selector, "ZeusCost") == 0) json_object_set_new(ch, "eta", json_real(choice->eta));
    for (size_t i = 0; i < choice->namong; i++) json_array_append_new(among, json_integer(choice->among_w[i]));
    json_object_set_new(ch, "among_w", among);
    json_object_set_new(root, "choice", ch);
  }
  if (choice && choice->decided) {
    json_t *d = json_object(), *cw = json_array();
    if (!d || !cw) {
      json_decref(d);
      json_decref(cw);
      rc = zeus__oom("saving a power-limit profile");
      goto done;
    }
    json_object_set_new(d, "optimal_power_limit_w", json_integer(choice->optimal_w));
    for (size_t i = 0; i < choice->ncontenders; i++) json_array_append_new(cw, json_integer(choice->contenders_w[i]));
    json_object_set_new(d, "contenders_w", cw);
    json_object_set_new(d, "confidence", json_real(choice->confidence));
    json_object_set_new(root, "decision", d);
  }
  rc = zeus__json_write_file_atomic(path, root, 4);
  if (rc) zeus__error_ctx(rc, "saving the power-limit profile");
done:
  json_decref(root);
  return rc;
}
