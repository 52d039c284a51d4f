/* PFO models: JSON in the original shapes, validation, deep copies and release. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pfo/pfo_internal.h"
#include "zeus/format.h"

/* Upper bound of world_size: the server keeps per-rank state, so an absurd size is bad input. */
#define PFO_MAX_WORLD ZEUS_PFO_MAX_WORLD

/* ---- field helpers ---- */

static int req_int(const json_t *o, const char *key, const char *ctx, long long min, long long max,
                   int *out) {
  long long v;
  int rc = zeus__json_req_int(o, key, ctx, &v);
  if (rc) return rc;
  if (v < min || v > max)
    return zeus__error(ZEUS_EINVAL, "%s: field '%s' is %lld, expected %lld..%lld", ctx, key, v, min, max);
  *out = (int)v;
  return ZEUS_OK;
}

/* ZEUS_EINVAL when list `what` has more than `max` entries: refused before anything is copied. */
static int check_len(size_t n, size_t max, const char *ctx, const char *what, const char *why) {
  if (n <= max) return ZEUS_OK;
  return zeus__error(ZEUS_EINVAL, "%s: field '%s' has %zu entries, more than the %zu allowed (%s)", ctx, what, n, max,
                     why);
}

/* ZEUS_EINVAL when an instruction name is empty or longer than ZEUS_PFO_MAX_NAME bytes. */
static int check_name(const json_t *x, const char *ctx, const char *what, size_t i) {
  if (!json_is_string(x) || !json_string_length(x))
    return zeus__error(ZEUS_EINVAL, "%s: field '%s'[%zu] must be a non-empty string, got %s", ctx, what, i,
                       zeus__json_type_name(x));
  if (json_string_length(x) > ZEUS_PFO_MAX_NAME)
    return zeus__error(ZEUS_EINVAL, "%s: field '%s'[%zu] is %zu bytes long, more than the %d allowed for an "
                       "instruction name", ctx, what, i, json_string_length(x), ZEUS_PFO_MAX_NAME);
  return ZEUS_OK;
}

/* A list of numbers into a fresh array. `what` names the list in errors. */
static int num_list(const json_t *a, const char *ctx, const char *what, double **out, size_t *n) {
  if (!json_is_array(a))
    return zeus__error(ZEUS_EINVAL, "%s: field '%s' must be a list of numbers, got %s", ctx, what,
                       zeus__json_type_name(a));
  size_t len = json_array_size(a);
  int rc = check_len(len, ZEUS_PFO_MAX_ITERS, ctx, what, "iterations of one profiling round");
  if (rc) return rc;
  double *v = malloc((len ? len : 1) * sizeof *v);
  if (!v) return zeus__oom("parsing a list of numbers");
  for (size_t i = 0; i < len; i++) {
    const json_t *x = json_array_get(a, i);
    if (!json_is_number(x)) {
      free(v);
      return zeus__error(ZEUS_EINVAL, "%s: field '%s'[%zu] must be a number, got %s", ctx, what, i,
                         zeus__json_type_name(x));
    }
    v[i] = json_number_value(x);
  }
  *out = v;
  *n = len;
  return ZEUS_OK;
}

/* ---- JobInfo ---- */

int zeus_pfo_job_info_validate(const zeus_pfo_job_info *v, bool registering) {
  const char *ctx = "JobInfo";
  if (registering && v->job_id && v->job_id[0])
    return zeus__error(ZEUS_EINVAL, "%s: field 'job_id' must be empty when registering a job "
                       "(the server assigns it), got '%s'", ctx, v->job_id);
  const struct { const char *name; int val; } f[] = {
      {"pp_degree", v->pp_degree}, {"dp_degree", v->dp_degree},
      {"tp_degree", v->tp_degree}, {"world_size", v->world_size}};
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(f); i++)
    if (f[i].val < 1 || f[i].val > PFO_MAX_WORLD)
      return zeus__error(ZEUS_EINVAL, "%s: field '%s' is %d, expected 1..%d", ctx, f[i].name,
                         f[i].val, PFO_MAX_WORLD);
  long long prod = (long long)v->pp_degree * v->dp_degree * v->tp_degree;
  if (prod != v->world_size)
    return zeus__error(ZEUS_EINVAL, "%s: field 'world_size' is %d, but pp_degree × dp_degree × "
                       "tp_degree = %d × %d × %d = %lld", ctx, v->world_size, v->pp_degree,
                       v->dp_degree, v->tp_degree, prod);
  return ZEUS_OK;
}

int zeus__pfo_job_info_from_jt(const json_t *o, const char *ctx, zeus_pfo_job_info *out) {
  zeus_pfo_job_info v = {0};
  const char *id;
  int rc;
  if (!json_is_object(o))
    return zeus__error(ZEUS_EINVAL, "%s: expected an object, got %s", ctx, zeus__json_type_name(o));
  if ((rc = zeus__json_req_string(o, "job_id", ctx, &id))) return rc;
  if ((rc = req_int(o, "pp_degree", ctx, 1, PFO_MAX_WORLD, &v.pp_degree)) ||
      (rc = req_int(o, "dp_degree", ctx, 1, PFO_MAX_WORLD, &v.dp_degree)) ||
      (rc = req_int(o, "tp_degree", ctx, 1, PFO_MAX_WORLD, &v.tp_degree)) ||
      (rc = req_int(o, "world_size", ctx, 1, PFO_MAX_WORLD, &v.world_size)))
    return rc;
  const json_t *md = json_object_get(o, "job_metadata");
  if (md && !json_is_null(md) && !json_is_string(md))
    return zeus__error(ZEUS_EINVAL, "%s: field 'job_metadata' must be a string or null, got %s",
                       ctx, zeus__json_type_name(md));
  if (json_is_string(md) && json_string_length(md) > ZEUS_PFO_MAX_METADATA)
    return zeus__error(ZEUS_EINVAL, "%s: field 'job_metadata' is %zu bytes long, more than the %d allowed", ctx,
                       json_string_length(md), ZEUS_PFO_MAX_METADATA);
  v.job_id = (char *)id;
  if ((rc = zeus_pfo_job_info_validate(&v, false))) return rc;
  v.job_id = zeus__strdup(id);
  v.job_metadata = json_is_string(md) ? zeus__strdup(json_string_value(md)) : NULL;
  if (!v.job_id || (json_is_string(md) && !v.job_metadata)) {
    zeus_pfo_job_info_clear(&v);
    return zeus__oom("parsing JobInfo");
  }
  *out = v;
  return ZEUS_OK;
}

json_t *zeus__pfo_job_info_to_jt(const zeus_pfo_job_info *v) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "job_id", json_string(v->job_id ? v->job_id : ""));
  json_object_set_new(o, "pp_degree", json_integer(v->pp_degree));
  json_object_set_new(o, "dp_degree", json_integer(v->dp_degree));
  json_object_set_new(o, "tp_degree", json_integer(v->tp_degree));
  json_object_set_new(o, "world_size", json_integer(v->world_size));
  json_object_set_new(o, "job_metadata", v->job_metadata ? json_string(v->job_metadata) : json_null());
  return o;
}

void zeus_pfo_job_info_clear(zeus_pfo_job_info *v) {
  if (!v) return;
  free(v->job_id);
  free(v->job_metadata);
  memset(v, 0, sizeof *v);
}

/* ---- RankInfo ---- */

int zeus_pfo_rank_info_validate(const zeus_pfo_rank_info *v, const zeus_pfo_job_info *job) {
  const char *ctx = "RankInfo";
  if (v->rank < 0 || v->dp_rank < 0 || v->pp_rank < 0 || v->tp_rank < 0)
    return zeus__error(ZEUS_EINVAL, "%s: ranks must be >= 0 (rank %d, dp_rank %d, pp_rank %d, "
                       "tp_rank %d)", ctx, v->rank, v->dp_rank, v->pp_rank, v->tp_rank);
  if (v->n_available_frequencies == 0)
    return zeus__error(ZEUS_EINVAL, "%s: field 'available_frequencies' must not be empty", ctx);
  for (size_t i = 0; i < v->n_available_frequencies; i++)
    if (v->available_frequencies[i] <= 0)
      return zeus__error(ZEUS_EINVAL, "%s: field 'available_frequencies'[%zu] is %d, expected a "
                         "positive MHz value", ctx, i, v->available_frequencies[i]);
  if (job) {
    const struct { const char *name; int val, lim; const char *deg; } f[] = {
        {"rank", v->rank, job->world_size, "world_size"},
        {"dp_rank", v->dp_rank, job->dp_degree, "dp_degree"},
        {"pp_rank", v->pp_rank, job->pp_degree, "pp_degree"},
        {"tp_rank", v->tp_rank, job->tp_degree, "tp_degree"}};
    for (size_t i = 0; i < ZEUS__ARRAY_LEN(f); i++)
      if (f[i].val >= f[i].lim)
        return zeus__error(ZEUS_EINVAL, "%s: field '%s' is %d, expected 0..%d (the job's %s is %d)",
                           ctx, f[i].name, f[i].val, f[i].lim - 1, f[i].deg, f[i].lim);
  }
  return ZEUS_OK;
}

int zeus__pfo_rank_info_from_jt(const json_t *o, const char *ctx, zeus_pfo_rank_info *out) {
  zeus_pfo_rank_info v = {0};
  json_t *freqs;
  int rc;
  if (!json_is_object(o))
    return zeus__error(ZEUS_EINVAL, "%s: expected an object, got %s", ctx, zeus__json_type_name(o));
  if ((rc = req_int(o, "rank", ctx, 0, INT_MAX, &v.rank)) ||
      (rc = req_int(o, "dp_rank", ctx, 0, INT_MAX, &v.dp_rank)) ||
      (rc = req_int(o, "pp_rank", ctx, 0, INT_MAX, &v.pp_rank)) ||
      (rc = req_int(o, "tp_rank", ctx, 0, INT_MAX, &v.tp_rank)) ||
      (rc = zeus__json_req_array(o, "available_frequencies", ctx, &freqs)))
    return rc;
  size_t nf = json_array_size(freqs);
  if (nf == 0) return zeus__error(ZEUS_EINVAL, "%s: field 'available_frequencies' must not be empty", ctx);
  if ((rc = check_len(nf, ZEUS_PFO_MAX_FREQUENCIES, ctx, "available_frequencies",
                      "the SM clocks NVML can report for one GPU")))
    return rc;
  v.available_frequencies = malloc(nf * sizeof(int));
  if (!v.available_frequencies) return zeus__oom("parsing RankInfo");
  v.n_available_frequencies = nf;
  for (size_t i = 0; i < nf; i++) {
    const json_t *x = json_array_get(freqs, i);
    if (!json_is_integer(x) || json_integer_value(x) <= 0 || json_integer_value(x) > 1000000) {
      zeus_pfo_rank_info_clear(&v);
      return zeus__error(ZEUS_EINVAL, "%s: field 'available_frequencies'[%zu] must be a positive "
                         "integer (MHz), got %s", ctx, i, zeus__json_type_name(x));
    }
    v.available_frequencies[i] = (int)json_integer_value(x);
  }
  const json_t *ps = json_object_get(o, "pipe_schedule");
  if (ps && !json_is_null(ps)) {
    if (!json_is_array(ps)) {
      zeus_pfo_rank_info_clear(&v);
      return zeus__error(ZEUS_EINVAL, "%s: field 'pipe_schedule' must be a list of instruction "
                         "names, got %s", ctx, zeus__json_type_name(ps));
    }
    size_t np = json_array_size(ps);
    if ((rc = check_len(np, ZEUS_PFO_MAX_INSTRUCTIONS, ctx, "pipe_schedule",
                        "instructions of one iteration: forward and backward of 8192 microbatches"))) {
      zeus_pfo_rank_info_clear(&v);
      return rc;
    }
    v.pipe_schedule = calloc(np ? np : 1, sizeof(char *));
    if (!v.pipe_schedule) { zeus_pfo_rank_info_clear(&v); return zeus__oom("parsing RankInfo"); }
    v.n_pipe_schedule = np;
    for (size_t i = 0; i < np; i++) {
      const json_t *x = json_array_get(ps, i);
      if ((rc = check_name(x, ctx, "pipe_schedule", i))) {
        zeus_pfo_rank_info_clear(&v);
        return rc;
      }
      if (!(v.pipe_schedule[i] = zeus__strdup(json_string_value(x)))) {
        zeus_pfo_rank_info_clear(&v);
        return zeus__oom("parsing RankInfo");
      }
    }
  }
  *out = v;
  return ZEUS_OK;
}

json_t *zeus__pfo_rank_info_to_jt(const zeus_pfo_rank_info *v) {
  json_t *o = json_object(), *f = json_array();
  if (!o || !f) { json_decref(o); json_decref(f); return NULL; }
  json_object_set_new(o, "rank", json_integer(v->rank));
  json_object_set_new(o, "dp_rank", json_integer(v->dp_rank));
  json_object_set_new(o, "pp_rank", json_integer(v->pp_rank));
  json_object_set_new(o, "tp_rank", json_integer(v->tp_rank));
  for (size_t i = 0; i < v->n_available_frequencies; i++)
    json_array_append_new(f, json_integer(v->available_frequencies[i]));
  json_object_set_new(o, "available_frequencies", f);
  if (v->pipe_schedule) {
    json_t *p = json_array();
    for (size_t i = 0; i < v->n_pipe_schedule; i++) json_array_append_new(p, json_string(v->pipe_schedule[i]));
    json_object_set_new(o, "pipe_schedule", p);
  }
  return o;
}

void zeus_pfo_rank_info_clear(zeus_pfo_rank_info *v) {
  if (!v) return;
  free(v->available_frequencies);
  if (v->pipe_schedule)
    for (size_t i = 0; i < v->n_pipe_schedule; i++) free(v->pipe_schedule[i]);
  free(v->pipe_schedule);
  memset(v, 0, sizeof *v);
}

int zeus__pfo_rank_info_copy(const zeus_pfo_rank_info *s, zeus_pfo_rank_info *d) {
  zeus_pfo_rank_info v = *s;
  v.available_frequencies = malloc(s->n_available_frequencies * sizeof(int) + 1);
  v.pipe_schedule = NULL;
  if (!v.available_frequencies) return zeus__oom("copying RankInfo");
  memcpy(v.available_frequencies, s->available_frequencies, s->n_available_frequencies * sizeof(int));
  if (s->pipe_schedule) {
    v.pipe_schedule = calloc(s->n_pipe_schedule + 1, sizeof(char *));
    if (!v.pipe_schedule) { v.n_pipe_schedule = 0; zeus_pfo_rank_info_clear(&v); return zeus__oom("copying RankInfo"); }
    for (size_t i = 0; i < s->n_pipe_schedule; i++)
      if (!(v.pipe_schedule[i] = zeus__strdup(s->pipe_schedule[i]))) {
        zeus_pfo_rank_info_clear(&v);
        return zeus__oom("copying RankInfo");
      }
  }
  *d = v;
  return ZEUS_OK;
}

void zeus_pfo_ranks_free(zeus_pfo_rank_info *v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) zeus_pfo_rank_info_clear(&v[i]);
  free(v);
}

/* ---- FrequencySchedule ---- */

int zeus__pfo_schedule_from_jt(const json_t *o, const char *ctx, zeus_pfo_schedule *out) {
  zeus_pfo_schedule v = {0};
  json_t *fr;
  int rc;
  if (!json_is_object(o))
    return zeus__error(ZEUS_EINVAL, "%s: expected an object, got %s", ctx, zeus__json_type_name(o));
  if ((rc = req_int(o, "rank", ctx, 0, INT_MAX, &v.rank))) return rc;
  if ((rc = zeus__json_req_array(o, "frequencies", ctx, &fr))) return rc;
  size_t n = json_array_size(fr);
  if ((rc = check_len(n, ZEUS_PFO_MAX_INSTRUCTIONS, ctx, "frequencies", "instructions of one iteration")))
    return rc;
  v.frequencies = calloc(n ? n : 1, sizeof *v.frequencies);
  if (!v.frequencies) return zeus__oom("parsing FrequencySchedule");
  v.n_frequencies = n;
  for (size_t i = 0; i < n; i++) {
    const json_t *p = json_array_get(fr, i);
    const json_t *a = json_array_get(p, 0), *b = json_array_get(p, 1);
    if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_string(a) || !json_is_integer(b) ||
        json_integer_value(b) <= 0 || json_integer_value(b) > 1000000) {
      zeus_pfo_schedule_clear(&v);
      return zeus__error(ZEUS_EINVAL, "%s: field 'frequencies'[%zu] must be a pair "
                         "[instruction, positive MHz]", ctx, i);
    }
    if (json_string_length(a) > ZEUS_PFO_MAX_NAME) {
      zeus_pfo_schedule_clear(&v);
      return zeus__error(ZEUS_EINVAL, "%s: field 'frequencies'[%zu]: the instruction name is %zu bytes long, more "
                         "than the %d allowed", ctx, i, json_string_length(a), ZEUS_PFO_MAX_NAME);
    }
    v.frequencies[i].frequency_mhz = (int)json_integer_value(b);
    if (!(v.frequencies[i].instruction = zeus__strdup(json_string_value(a)))) {
      zeus_pfo_schedule_clear(&v);
      return zeus__oom("parsing FrequencySchedule");
    }
  }
  *out = v;
  return ZEUS_OK;
}

json_t *zeus__pfo_schedule_to_jt(const zeus_pfo_schedule *v) {
  json_t *o = json_object(), *f = json_array();
  if (!o || !f) { json_decref(o); json_decref(f); return NULL; }
  json_object_set_new(o, "rank", json_integer(v->rank));
  for (size_t i = 0; i < v->n_frequencies; i++)
    json_array_append_new(f, json_pack("[si]", v->frequencies[i].instruction,
                                       v->frequencies[i].frequency_mhz));
  json_object_set_new(o, "frequencies", f);
  return o;
}

static int buf_json_string(zeus__buf *b, const char *s) {
  int rc = zeus__buf_append(b, "\"", 1);
  while (!rc && *s) {
    const char *p = s; /* the longest run that needs no escape, in one append */
    while (*p && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
    if (p > s) rc = zeus__buf_append(b, s, (size_t)(p - s));
    if (rc || !*p) break;
    unsigned char c = (unsigned char)*p;
    if (c == '"' || c == '\\') rc = zeus__buf_printf(b, "\\%c", c);
    else rc = zeus__buf_printf(b, "\\u%04x", c);
    s = p + 1;
  }
  return rc ? rc : zeus__buf_append(b, "\"", 1);
}

/* Appends `prefix`, the decimal text of v, then `suffix` (no printf: the server's hot path). */
static int buf_int(zeus__buf *b, const char *prefix, int v, const char *suffix) {
  char t[48], *q = t + sizeof t;
  size_t ns = strlen(suffix), np = strlen(prefix);
  q -= ns;
  memcpy(q, suffix, ns);
  unsigned long long u = v < 0 ? (unsigned long long)(-(long long)v) : (unsigned long long)v;
  do *--q = (char)('0' + u % 10); while (u /= 10);
  if (v < 0) *--q = '-';
  q -= np;
  memcpy(q, prefix, np);
  return zeus__buf_append(b, q, (size_t)(t + sizeof t - q));
}

int zeus__pfo_schedule_to_buf(const zeus_pfo_schedule *v, zeus__buf *b) {
  int rc = buf_int(b, "{\"rank\":", v->rank, ",\"frequencies\":[");
  for (size_t i = 0; !rc && i < v->n_frequencies; i++) {
    rc = zeus__buf_puts(b, i ? ",[" : "[");
    if (!rc) rc = buf_json_string(b, v->frequencies[i].instruction);
    if (!rc) rc = buf_int(b, ",", v->frequencies[i].frequency_mhz, "]");
  }
  return rc ? rc : zeus__buf_puts(b, "]}");
}

void zeus_pfo_schedule_clear(zeus_pfo_schedule *v) {
  if (!v) return;
  if (v->frequencies)
    for (size_t i = 0; i < v->n_frequencies; i++) free(v->frequencies[i].instruction);
  free(v->frequencies);
  memset(v, 0, sizeof *v);
}

int zeus__pfo_schedule_copy(const zeus_pfo_schedule *s, zeus_pfo_schedule *d) {
  zeus_pfo_schedule v = {.rank = s->rank, .n_frequencies = s->n_frequencies};
  v.frequencies = calloc(s->n_frequencies + 1, sizeof *v.frequencies);
  if (!v.frequencies) return zeus__oom("copying a schedule");
  for (size_t i = 0; i < s->n_frequencies; i++) {
    v.frequencies[i].frequency_mhz = s->frequencies[i].frequency_mhz;
    if (!(v.frequencies[i].instruction = zeus__strdup(s->frequencies[i].instruction))) {
      zeus_pfo_schedule_clear(&v);
      return zeus__oom("copying a schedule");
    }
  }
  *d = v;
  return ZEUS_OK;
}

int zeus__pfo_schedules_copy(const zeus_pfo_schedule *s, size_t n, zeus_pfo_schedule **out, size_t *nout) {
  zeus_pfo_schedule *v = calloc(n + 1, sizeof *v);
  if (!v) return zeus__oom("copying schedules");
  for (size_t i = 0; i < n; i++) {
    int rc = zeus__pfo_schedule_copy(&s[i], &v[i]);
    if (rc) { zeus_pfo_schedules_free(v, i); return rc; }
  }
  *out = v;
  *nout = n;
  return ZEUS_OK;
}

void zeus_pfo_schedules_free(zeus_pfo_schedule *v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) zeus_pfo_schedule_clear(&v[i]);
  free(v);
}

/* ---- ProfilingResult ---- */

void zeus__pfo_breakdown_clear(zeus_pfo_breakdown *b) {
  free(b->instruction);
  free(b->offsets);
  free(b->values);
  memset(b, 0, sizeof *b);
}

int zeus__pfo_breakdown_copy(const zeus_pfo_breakdown *s, zeus_pfo_breakdown *d) {
  zeus_pfo_breakdown v = {.n_iters = s->n_iters};
  size_t nv = s->offsets[s->n_iters];
  v.instruction = zeus__strdup(s->instruction);
  v.offsets = malloc((s->n_iters + 1) * sizeof(size_t));
  v.values = malloc((nv ? nv : 1) * sizeof(double));
  if (!v.instruction || !v.offsets || !v.values) {
    zeus__pfo_breakdown_clear(&v);
    return zeus__oom("copying a breakdown");
  }
  memcpy(v.offsets, s->offsets, (s->n_iters + 1) * sizeof(size_t));
  if (nv) memcpy(v.values, s->values, nv * sizeof(double));
  *d = v;
  return ZEUS_OK;
}

/* An object instruction -> list (per iteration) of lists of numbers. `budget` is how many more
 * numbers the whole result may hold (ZEUS_PFO_MAX_RESULT_VALUES); it is charged before copying. */
static int breakdowns_from_jt(const json_t *o, const char *ctx, const char *field,
                              zeus_pfo_breakdown **out, size_t *nout, size_t *budget) {
  if (!json_is_object(o))
    return zeus__error(ZEUS_EINVAL, "%s: field '%s' must be an object of instruction -> list of "
                       "lists of numbers, got %s", ctx, field, zeus__json_type_name(o));
  size_t n = json_object_size(o), k = 0;
  int rc0 = check_len(n, ZEUS_PFO_MAX_INSTRUCTIONS, ctx, field, "instructions of one iteration");
  if (rc0) return rc0;
  zeus_pfo_breakdown *bd = calloc(n ? n : 1, sizeof *bd);
  if (!bd) return zeus__oom("parsing a breakdown");
  const char *key;
  json_t *val;
  int rc = ZEUS_OK;
  json_object_foreach((json_t *)o, key, val) {
    zeus_pfo_breakdown *b = &bd[k++];
    if (!json_is_array(val)) {
      rc = zeus__error(ZEUS_EINVAL, "%s: field '%s'['%s'] must be a list (per iteration) of lists "
                       "of numbers, got %s", ctx, field, key, zeus__json_type_name(val));
      break;
    }
    if (strlen(key) > ZEUS_PFO_MAX_NAME) {
      rc = zeus__error(ZEUS_EINVAL, "%s: field '%s': the instruction name '%.32s...' is %zu bytes long, more than "
                       "the %d allowed", ctx, field, key, strlen(key), ZEUS_PFO_MAX_NAME);
      break;
    }
    size_t ni = json_array_size(val), total = 0, widest = 0;
    if (ni > ZEUS_PFO_MAX_ITERS) {
      rc = zeus__error(ZEUS_EINVAL, "%s: field '%s'['%s'] has %zu iterations, more than the %d allowed", ctx, field,
                       key, ni, ZEUS_PFO_MAX_ITERS);
      break;
    }
    for (size_t i = 0; i < ni; i++) {
      size_t m = json_array_size(json_array_get(val, i));
      total += m;
      if (m > widest) widest = m;
    }
    if (widest > ZEUS_PFO_MAX_INSTRUCTIONS) {
      rc = zeus__error(ZEUS_EINVAL, "%s: field '%s'['%s'] has an iteration of %zu values, more than the %d "
                       "instructions of one iteration allowed", ctx, field, key, widest, ZEUS_PFO_MAX_INSTRUCTIONS);
      break;
    }
    if (total > *budget) {
      rc = zeus__error(ZEUS_EINVAL, "%s: field '%s' brings the result to more than %d numbers, the most one "
                       "ProfilingResult may hold", ctx, field, ZEUS_PFO_MAX_RESULT_VALUES);
      break;
    }
    *budget -= total;
    b->instruction = zeus__strdup(key);
    b->offsets = malloc((ni + 1) * sizeof(size_t));
    b->values = malloc((total ? total : 1) * sizeof(double));
    b->n_iters = ni;
    if (!b->instruction || !b->offsets || !b->values) { rc = zeus__oom("parsing a breakdown"); break; }
    size_t pos = 0;
    for (size_t i = 0; i < ni && !rc; i++) {
      const json_t *it = json_array_get(val, i);
      b->offsets[i] = pos;
      if (!json_is_array(it)) {
        rc = zeus__error(ZEUS_EINVAL, "%s: field '%s'['%s'][%zu] must be a list of numbers, got %s",
                         ctx, field, key, i, zeus__json_type_name(it));
        break;
      }
      for (size_t j = 0; j < json_array_size(it); j++) {
        const json_t *x = json_array_get(it, j);
        if (!json_is_number(x)) {
          rc = zeus__error(ZEUS_EINVAL, "%s: field '%s'['%s'][%zu][%zu] must be a number, got %s",
                           ctx, field, key, i, j, zeus__json_type_name(x));
          break;
        }
        b->values[pos++] = json_number_value(x);
      }
    }
    if (rc) break;
    b->offsets[ni] = pos;
  }
  if (rc) {
    for (size_t i = 0; i < k; i++) zeus__pfo_breakdown_clear(&bd[i]);
    free(bd);
    return rc;
  }
  *out = bd;
  *nout = n;
  return ZEUS_OK;
}

int zeus__pfo_prof_result_from_jt(const json_t *o, const char *ctx, zeus_pfo_prof_result *out) {
  zeus_pfo_prof_result v = {0};
  json_t *it, *ie, *tb, *eb;
  int rc;
  if (!json_is_object(o))
    return zeus__error(ZEUS_EINVAL, "%s: expected an object, got %s", ctx, zeus__json_type_name(o));
  if ((rc = req_int(o, "rank", ctx, 0, INT_MAX, &v.rank)) ||
      (rc = zeus__json_req_array(o, "iter_time", ctx, &it)) ||
      (rc = zeus__json_req_array(o, "iter_energy", ctx, &ie)) ||
      (rc = zeus__json_req_object(o, "time_breakdown", ctx, &tb)) ||
      (rc = zeus__json_req_object(o, "energy_breakdown", ctx, &eb)))
    return rc;
  /* iter_time and iter_energy hold at most ZEUS_PFO_MAX_ITERS each, far below the budget. */
  size_t budget = ZEUS_PFO_MAX_RESULT_VALUES;
  if (!(rc = num_list(it, ctx, "iter_time", &v.iter_time, &v.n_iter_time)) &&
      !(rc = num_list(ie, ctx, "iter_energy", &v.iter_energy, &v.n_iter_energy))) {
    budget -= v.n_iter_time + v.n_iter_energy;
    if (!(rc = breakdowns_from_jt(tb, ctx, "time_breakdown", &v.time_breakdown, &v.n_time_breakdown, &budget)))
      rc = breakdowns_from_jt(eb, ctx, "energy_breakdown", &v.energy_breakdown, &v.n_energy_breakdown, &budget);
  }
  if (rc) {
    zeus_pfo_prof_result_clear(&v);
    return rc;
  }
  *out = v;
  return ZEUS_OK;
}

static json_t *num_array(const double *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_real(v[i]));
  return a;
}

static json_t *breakdowns_to_jt(const zeus_pfo_breakdown *bd, size_t n) {
  json_t *o = json_object();
  for (size_t k = 0; o && k < n; k++) {
    json_t *iters = json_array();
    for (size_t i = 0; i < bd[k].n_iters; i++)
      json_array_append_new(iters, num_array(bd[k].values + bd[k].offsets[i],
                                              bd[k].offsets[i + 1] - bd[k].offsets[i]));
    json_object_set_new(o, bd[k].instruction, iters);
  }
  return o;
}

json_t *zeus__pfo_prof_result_to_jt(const zeus_pfo_prof_result *v) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "rank", json_integer(v->rank));
  json_object_set_new(o, "iter_time", num_array(v->iter_time, v->n_iter_time));
  json_object_set_new(o, "iter_energy", num_array(v->iter_energy, v->n_iter_energy));
  json_object_set_new(o, "time_breakdown", breakdowns_to_jt(v->time_breakdown, v->n_time_breakdown));
  json_object_set_new(o, "energy_breakdown", breakdowns_to_jt(v->energy_breakdown, v->n_energy_breakdown));
  return o;
}

void zeus_pfo_prof_result_clear(zeus_pfo_prof_result *v) {
  if (!v) return;
  free(v->iter_time);
  free(v->iter_energy);
  if (v->time_breakdown)
    for (size_t i = 0; i < v->n_time_breakdown; i++) zeus__pfo_breakdown_clear(&v->time_breakdown[i]);
  if (v->energy_breakdown)
    for (size_t i = 0; i < v->n_energy_breakdown; i++) zeus__pfo_breakdown_clear(&v->energy_breakdown[i]);
  free(v->time_breakdown);
  free(v->energy_breakdown);
  memset(v, 0, sizeof *v);
}

void zeus_pfo_prof_results_free(zeus_pfo_prof_result *v, size_t n) {
  if (!v) return;
  for (size_t i = 0; i < n; i++) zeus_pfo_prof_result_clear(&v[i]);
  free(v);
}

/* ---- OfflineProfilingResult ---- */

static int measures_from_jt(const json_t *o, const char *ctx, const char *inst,
                            zeus_pfo_freq_measure **out, size_t *nout) {
  char tkey[32], ekey[32];
  json_t *t, *e;
  int rc;
  snprintf(tkey, sizeof tkey, "%s_time", inst);
  snprintf(ekey, sizeof ekey, "%s_energy", inst);
  if ((rc = zeus__json_req_object(o, tkey, ctx, &t)) || (rc = zeus__json_req_object(o, ekey, ctx, &e)))
    return rc;
  size_t n = json_object_size(t), k = 0;
  if ((rc = check_len(n, ZEUS_PFO_MAX_FREQUENCIES, ctx, tkey, "the SM clocks NVML can report for one GPU")))
    return rc;
  zeus_pfo_freq_measure *m = calloc(n ? n : 1, sizeof *m);
  if (!m) return zeus__oom("parsing OfflineProfilingResult");
  const char *key;
  json_t *val;
  json_object_foreach(t, key, val) {
    char *end;
    long f = strtol(key, &end, 10);
    const json_t *ev = json_object_get(e, key);
    if (*end || end == key || f <= 0 || f > 1000000) {
      free(m);
      return zeus__error(ZEUS_EINVAL, "%s: field '%s' key '%s' must be a frequency in MHz", ctx, tkey, key);
    }
    if (!json_is_number(val) || !json_is_number(ev)) {
      free(m);
      return zeus__error(ZEUS_EINVAL, "%s: fields '%s' and '%s' must both hold a number for %s MHz",
                         ctx, tkey, ekey, key);
    }
    m[k].frequency_mhz = (int)f;
    m[k].time_s = json_number_value(val);
    m[k].energy_j = json_number_value(ev);
    k++;
  }
  *out = m;
  *nout = n;
  return ZEUS_OK;
}

int zeus__pfo_offline_result_from_jt(const json_t *o, const char *ctx, zeus_pfo_offline_result *out) {
  zeus_pfo_offline_result v = {0};
  int rc;
  if (!json_is_object(o))
    return zeus__error(ZEUS_EINVAL, "%s: expected an object, got %s", ctx, zeus__json_type_name(o));
  if ((rc = req_int(o, "rank", ctx, 0, INT_MAX, &v.rank)) ||
      (rc = req_int(o, "dp_rank", ctx, 0, INT_MAX, &v.dp_rank)) ||
      (rc = req_int(o, "pp_rank", ctx, 0, INT_MAX, &v.pp_rank)) ||
      (rc = req_int(o, "tp_rank", ctx, 0, INT_MAX, &v.tp_rank)))
    return rc;
  if ((rc = measures_from_jt(o, ctx, "forward", &v.forward, &v.n_forward))) return rc;
  if ((rc = measures_from_jt(o, ctx, "backward", &v.backward, &v.n_backward))) {
    zeus_pfo_offline_result_clear(&v);
    return rc;
  }
  *out = v;
  return ZEUS_OK;
}

json_t *zeus__pfo_offline_result_to_jt(const zeus_pfo_offline_result *v) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "rank", json_integer(v->rank));
  json_object_set_new(o, "dp_rank", json_integer(v->dp_rank));
  json_object_set_new(o, "pp_rank", json_integer(v->pp_rank));
  json_object_set_new(o, "tp_rank", json_integer(v->tp_rank));
  const struct { const char *name; const zeus_pfo_freq_measure *m; size_t n; } in[] = {
      {"forward", v->forward, v->n_forward}, {"backward", v->backward, v->n_backward}};
  for (size_t k = 0; k < 2; k++) {
    json_t *t = json_object(), *e = json_object();
    char key[32];
    for (size_t i = 0; i < in[k].n; i++) {
      snprintf(key, sizeof key, "%d", in[k].m[i].frequency_mhz);
      json_object_set_new(t, key, json_real(in[k].m[i].time_s));
      json_object_set_new(e, key, json_real(in[k].m[i].energy_j));
    }
    snprintf(key, sizeof key, "%s_time", in[k].name);
    json_object_set_new(o, key, t);
    snprintf(key, sizeof key, "%s_energy", in[k].name);
    json_object_set_new(o, key, e);
  }
  return o;
}

void zeus_pfo_offline_result_clear(zeus_pfo_offline_result *v) {
  if (!v) return;
  free(v->forward);
  free(v->backward);
  memset(v, 0, sizeof *v);
}

/* ---- public text entry points ---- */

#define PFO_FROM_JSON(fn, type, inner, name)                                           \
  int fn(const char *json, size_t len, const char *what, type *out) {                  \
    json_t *v;                                                                         \
    const char *w = what ? what : name;                                                \
    int rc = zeus__json_parse(json, len, w, &v);                                       \
    if (rc) return rc;                                                                 \
    rc = inner(v, w, out);                                                             \
    json_decref(v);                                                                    \
    return rc;                                                                         \
  }
PFO_FROM_JSON(zeus_pfo_job_info_from_json, zeus_pfo_job_info, zeus__pfo_job_info_from_jt, "JobInfo")
PFO_FROM_JSON(zeus_pfo_rank_info_from_json, zeus_pfo_rank_info, zeus__pfo_rank_info_from_jt, "RankInfo")
PFO_FROM_JSON(zeus_pfo_schedule_from_json, zeus_pfo_schedule, zeus__pfo_schedule_from_jt, "FrequencySchedule")
PFO_FROM_JSON(zeus__pfo_prof_result_from_json_tree, zeus_pfo_prof_result, zeus__pfo_prof_result_from_jt,
              "ProfilingResult")

/* The plain shape the original client sends is read without a JSON tree (prof_fast.c); anything
 * else, errors included, goes through jansson exactly as before. */
int zeus_pfo_prof_result_from_json(const char *json, size_t len, const char *what, zeus_pfo_prof_result *out) {
  if (zeus__pfo_prof_result_fast(json, len, out)) return ZEUS_OK;
  return zeus__pfo_prof_result_from_json_tree(json, len, what, out);
}
PFO_FROM_JSON(zeus_pfo_offline_result_from_json, zeus_pfo_offline_result, zeus__pfo_offline_result_from_jt,
              "OfflineProfilingResult")

static int dump_jt(json_t *v, char **out) {
  if (!v) return zeus__oom("serialising JSON");
  char *s = zeus_json_dumps(v, JSON_COMPACT);
  json_decref(v);
  if (!s) return zeus__oom("serialising JSON");
  *out = s;
  return ZEUS_OK;
}

int zeus_pfo_job_info_to_json(const zeus_pfo_job_info *v, char **out) {
  return dump_jt(zeus__pfo_job_info_to_jt(v), out);
}
int zeus_pfo_rank_info_to_json(const zeus_pfo_rank_info *v, char **out) {
  return dump_jt(zeus__pfo_rank_info_to_jt(v), out);
}
int zeus_pfo_schedule_to_json(const zeus_pfo_schedule *v, char **out) {
  return dump_jt(zeus__pfo_schedule_to_jt(v), out);
}
int zeus_pfo_prof_result_to_json(const zeus_pfo_prof_result *v, char **out) {
  return dump_jt(zeus__pfo_prof_result_to_jt(v), out);
}
int zeus_pfo_offline_result_to_json(const zeus_pfo_offline_result *v, char **out) {
  return dump_jt(zeus__pfo_offline_result_to_jt(v), out);
}
