/* spec.c: the job spec of `zeus run`: defaults, JSON files, deep copies, validation, the command
 * template and the learning-rate choice. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "run/run_internal.h"

/* ---- arena ---- */

void *zeus__arena_alloc(zeus__arena *a, size_t size) {
  const size_t align = _Alignof(max_align_t);
  size_t need = (size ? size : 1) + align - 1;
  need -= need % align;
  if (a->block) {
    if (need > a->size - a->used) return NULL;
    void *m = a->block + a->used;
    memset(m, 0, need);
    a->used += need;
    return m;
  }
  if (zeus__grow(&a->p, &a->cap, a->n + 1, sizeof *a->p, "reading a job spec")) return NULL;
  void *m = calloc(1, size ? size : 1);
  if (m) {
    a->p[a->n++] = m;
    a->used += need;
  }
  return m;
}

char *zeus__arena_strdup(zeus__arena *a, const char *s) {
  if (!s) return NULL;
  size_t n = strlen(s) + 1;
  char *d = zeus__arena_alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

void zeus__arena_free(zeus__arena *a) {
  for (size_t i = 0; i < a->n; i++) free(a->p[i]);
  free(a->p);
  a->p = NULL;
  a->n = a->cap = a->used = 0;
}

/* ---- defaults, copies, checks ---- */

void zeus_run_spec_init(zeus_run_spec *s) {
  memset(s, 0, sizeof *s);
  s->default_lr = NAN;
  s->target_metric = NAN;
  s->eta = 0.5;
  s->beta = 2.0;
  s->seed = 123456;
  s->profile_warmup_iters = 10;
  s->profile_measure_iters = 40;
  s->max_tries = 20;
}

int zeus__run_spec_copy(zeus__arena *a, const zeus_run_spec *in, zeus_run_spec *out) {
  *out = *in;
  size_t n = 0;
  while (in->command && in->command[n]) n++;
  const char **cmd = zeus__arena_alloc(a, (n + 1) * sizeof *cmd);
  if (!cmd) return zeus__oom("copying the job spec");
  for (size_t i = 0; i < n; i++)
    if (!(cmd[i] = zeus__arena_strdup(a, in->command[i]))) return zeus__oom("copying the job spec");
  out->command = in->command ? cmd : NULL;
#define DUP(f)                                                                     \
  do {                                                                             \
    if (in->f && !(out->f = zeus__arena_strdup(a, in->f))) return zeus__oom("copying the job spec"); \
  } while (0)
  DUP(workdir);
  DUP(dataset);
  DUP(network);
  DUP(optimizer);
  DUP(log_base);
  DUP(state_path);
#undef DUP
  long *bs = zeus__arena_alloc(a, (in->num_batch_sizes + 1) * sizeof *bs);
  long *lb = zeus__arena_alloc(a, (in->num_lrs + 1) * sizeof *lb);
  double *lv = zeus__arena_alloc(a, (in->num_lrs + 1) * sizeof *lv);
  if (!bs || !lb || !lv) return zeus__oom("copying the job spec");
  if (in->num_batch_sizes) memcpy(bs, in->batch_sizes, in->num_batch_sizes * sizeof *bs);
  if (in->num_lrs) {
    memcpy(lb, in->lr_batch_sizes, in->num_lrs * sizeof *lb);
    memcpy(lv, in->lr_values, in->num_lrs * sizeof *lv);
  }
  out->batch_sizes = bs;
  out->lr_batch_sizes = lb;
  out->lr_values = lv;
  return ZEUS_OK;
}

int zeus__run_spec_check(const zeus_run_spec *s) {
  if (!s->command || !s->command[0] || !*s->command[0])
    return zeus__error(ZEUS_EINVAL, "job spec: the command is empty (give the training command after --)");
  if (!s->batch_sizes || s->num_batch_sizes == 0)
    return zeus__error(ZEUS_EINVAL, "job spec: batch sizes are missing (--batch-sizes 32,64,128)");
  bool has_default = false;
  for (size_t i = 0; i < s->num_batch_sizes; i++) {
    if (s->batch_sizes[i] <= 0)
      return zeus__error(ZEUS_EINVAL, "job spec: batch size %ld, expected a positive integer", s->batch_sizes[i]);
    for (size_t k = 0; k < i; k++)
      if (s->batch_sizes[k] == s->batch_sizes[i])
        return zeus__error(ZEUS_EINVAL, "job spec: batch size %ld is listed twice", s->batch_sizes[i]);
    has_default = has_default || s->batch_sizes[i] == s->default_bs;
  }
  if (!has_default)
    return zeus__error(ZEUS_EINVAL, "job spec: the default batch size %ld is not among the batch sizes", s->default_bs);
  if (!isfinite(s->target_metric))
    return zeus__error(ZEUS_EINVAL, "job spec: the target metric is missing or not a finite number (--target-metric)");
  if (s->max_epochs <= 0)
    return zeus__error(ZEUS_EINVAL, "job spec: max epochs %ld, expected > 0 (--max-epochs)", s->max_epochs);
  if (!(s->eta >= 0 && s->eta <= 1))
    return zeus__error(ZEUS_EINVAL, "job spec: eta %g, expected a number in [0, 1]", s->eta);
  if (!(s->beta > 0)) return zeus__error(ZEUS_EINVAL, "job spec: beta %g, expected a number > 0 (or inf)", s->beta);
  if (s->window_size < 0) return zeus__error(ZEUS_EINVAL, "job spec: window size %ld, expected >= 0", s->window_size);
  if (s->profile_warmup_iters < 0)
    return zeus__error(ZEUS_EINVAL, "job spec: profile warm-up iterations %ld, expected >= 0", s->profile_warmup_iters);
  if (s->profile_measure_iters < 1)
    return zeus__error(ZEUS_EINVAL, "job spec: profile measure iterations %ld, expected >= 1",
                       s->profile_measure_iters);
  if (s->max_tries < 1) return zeus__error(ZEUS_EINVAL, "job spec: max tries %ld, expected >= 1", s->max_tries);
  if (!(s->max_power_w >= 0) || !isfinite(s->max_power_w))
    return zeus__error(ZEUS_EINVAL, "job spec: max power %g W, expected a finite number >= 0 (0: from the GPUs)",
                       s->max_power_w);
  if (!(s->timeout_s >= 0)) return zeus__error(ZEUS_EINVAL, "job spec: timeout %g s, expected >= 0", s->timeout_s);
  if (!isnan(s->default_lr) && !(isfinite(s->default_lr) && s->default_lr >= 0))
    return zeus__error(ZEUS_EINVAL, "job spec: learning rate %g, expected a finite number >= 0", s->default_lr);
  for (size_t i = 0; i < s->num_lrs; i++)
    if (!(isfinite(s->lr_values[i]) && s->lr_values[i] >= 0) || s->lr_batch_sizes[i] <= 0)
      return zeus__error(ZEUS_EINVAL, "job spec: learning rate %g for batch size %ld, expected a finite rate >= 0",
                         s->lr_values[i], s->lr_batch_sizes[i]);
  static const char *const names[] = {"dataset", "network", "optimizer"};
  const char *vals[] = {s->dataset, s->network, s->optimizer};
  for (size_t i = 0; i < 3; i++)
    if (vals[i] && (!*vals[i] || strchr(vals[i], '/')))
      return zeus__error(ZEUS_EINVAL,
                         "job spec: %s '%s' is part of a folder name: expected a non-empty name without '/'", names[i],
                         vals[i]);
  return ZEUS_OK;
}

/* ---- numbers and templates ---- */

void zeus__py_repr(double v, char *buf, size_t len) {
  if (isnan(v)) {
    snprintf(buf, len, "nan");
    return;
  }
  if (isinf(v)) {
    snprintf(buf, len, v > 0 ? "inf" : "-inf");
    return;
  }
  /* The fewest significant digits that read back exactly, then Python's layout: positional for
   * 1e-4 <= |v| < 1e16, else scientific. */
  char e[40];
  int digits = 17;
  for (int p = 1; p <= 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, v);
    if (strtod(e, NULL) == v) {
      digits = p;
      break;
    }
  }
  snprintf(e, sizeof e, "%.*e", digits - 1, v);
  int exp10 = atoi(strchr(e, 'e') + 1);
  if (v != 0 && (exp10 < -4 || exp10 >= 16)) {
    snprintf(buf, len, "%s", e);
    return;
  }
  int decimals = digits - 1 - exp10;
  if (decimals < 0) decimals = 0;
  snprintf(buf, len, "%.*f", decimals, v);
  if (!strchr(buf, '.')) {
    size_t n = strlen(buf);
    if (n + 2 < len) memcpy(buf + n, ".0", 3);
  }
}

int zeus__run_expand(const char *tmpl, const zeus__run_subst *v, zeus__buf *out, bool *uses_lr) {
  out->len = 0;
  int rc = zeus__buf_append(out, "", 0);
  for (const char *p = tmpl; *p && !rc;) {
    if (p[0] == '{' && p[1] == '{') {
      rc = zeus__buf_append(out, "{", 1);
      p += 2;
    } else if (p[0] == '}' && p[1] == '}') {
      rc = zeus__buf_append(out, "}", 1);
      p += 2;
    } else if (*p == '}') {
      return zeus__error(ZEUS_EINVAL, "command argument '%s': unmatched '}' (write '}}' for a literal brace)", tmpl);
    } else if (*p == '{') {
      const char *end = strchr(p, '}');
      if (!end)
        return zeus__error(ZEUS_EINVAL, "command argument '%s': unmatched '{' (write '{{' for a literal brace)", tmpl);
      size_t n = (size_t)(end - p - 1);
      const char *name = p + 1, *val = NULL;
#define IS(s) (n == strlen(s) && strncmp(name, s, n) == 0)
      if (IS("bs") || IS("batch_size")) val = v->bs;
      else if (IS("lr") || IS("learning_rate")) {
        val = v->lr;
        if (uses_lr) *uses_lr = true;
      } else if (IS("seed")) val = v->seed;
      else if (IS("epochs") || IS("epoch")) val = v->epochs;
      else if (IS("slice_number")) val = v->slice;
      else if (IS("target_metric")) val = v->target;
#undef IS
      if (!val)
        return zeus__error(ZEUS_EINVAL,
                           "command argument '%s': unknown placeholder {%.*s} (known: {bs} {batch_size} {lr} "
                           "{learning_rate} {seed} {epochs} {slice_number} {target_metric})",
                           tmpl, (int)n, name);
      rc = zeus__buf_puts(out, val);
      p = end + 1;
    } else {
      rc = zeus__buf_append(out, p, 1);
      p++;
    }
  }
  return rc;
}

int zeus__run_lr(const zeus_run_spec *s, long bs, double *lr) {
  for (size_t i = 0; i < s->num_lrs; i++)
    if (s->lr_batch_sizes[i] == bs) {
      *lr = s->lr_values[i];
      return ZEUS_OK;
    }
  if (isnan(s->default_lr))
    return zeus__error(ZEUS_EINVAL, "the command uses {lr} but no learning rate is known for batch size %ld "
                                    "(give --lr with --optimizer, or --lr-table)", bs);
  int rc = zeus_bso_scale_lr(s->optimizer, s->default_lr, s->default_bs, bs, lr);
  if (rc) return zeus__error_ctx(rc, "batch size %ld", bs);
  return ZEUS_OK;
}

/* ---- JSON spec files ---- */

typedef struct loader {
  const char *path;
  zeus__arena *a;
} loader;

static int bad(const loader *l, const char *key, const char *expected, const json_t *v) {
  return zeus__error(ZEUS_EPARSE, "%s: field '%s' is %s, expected %s", l->path, key, zeus__json_type_name(v), expected);
}

static int get_str(const loader *l, const char *key, const json_t *v, const char **out) {
  if (!json_is_string(v)) return bad(l, key, "a string", v);
  if (!(*out = zeus__arena_strdup(l->a, json_string_value(v)))) return zeus__oom("loading the job spec");
  return ZEUS_OK;
}

static int get_num(const loader *l, const char *key, const json_t *v, double *out) {
  if (json_is_string(v) && strcmp(json_string_value(v), "inf") == 0) {
    *out = INFINITY;
    return ZEUS_OK;
  }
  if (!json_is_number(v)) return bad(l, key, "a number", v);
  *out = json_number_value(v);
  return ZEUS_OK;
}

static int get_int(const loader *l, const char *key, const json_t *v, long *out) {
  if (!json_is_integer(v)) return bad(l, key, "an integer", v);
  *out = (long)json_integer_value(v);
  return ZEUS_OK;
}

static int get_bool(const loader *l, const char *key, const json_t *v, bool *out) {
  if (!json_is_boolean(v)) return bad(l, key, "true or false", v);
  *out = json_is_true(v);
  return ZEUS_OK;
}

static int load_command(const loader *l, const json_t *v, zeus_run_spec *s) {
  if (json_is_string(v)) {
    const char **cmd = zeus__arena_alloc(l->a, 4 * sizeof *cmd);
    if (!cmd) return zeus__oom("loading the job spec");
    cmd[0] = "/bin/sh";
    cmd[1] = "-c";
    if (!(cmd[2] = zeus__arena_strdup(l->a, json_string_value(v)))) return zeus__oom("loading the job spec");
    s->command = cmd;
    return ZEUS_OK;
  }
  if (!json_is_array(v) || json_array_size(v) == 0)
    return bad(l, "command", "a non-empty list of strings or a string", v);
  size_t n = json_array_size(v);
  const char **cmd = zeus__arena_alloc(l->a, (n + 1) * sizeof *cmd);
  if (!cmd) return zeus__oom("loading the job spec");
  for (size_t i = 0; i < n; i++) {
    int rc = get_str(l, "command", json_array_get(v, i), &cmd[i]);
    if (rc) return rc;
  }
  s->command = cmd;
  return ZEUS_OK;
}

static int load_lrs(const loader *l, const json_t *v, zeus_run_spec *s) {
  if (!json_is_object(v)) return bad(l, "learning_rates", "an object {\"batch size\": rate}", v);
  size_t n = json_object_size(v);
  long *bs = zeus__arena_alloc(l->a, (n + 1) * sizeof *bs);
  double *lr = zeus__arena_alloc(l->a, (n + 1) * sizeof *lr);
  if (!bs || !lr) return zeus__oom("loading the job spec");
  size_t i = 0;
  const char *key;
  json_t *x;
  json_object_foreach((json_t *)v, key, x) {
    char *end;
    bs[i] = strtol(key, &end, 10);
    if (end == key || *end || bs[i] <= 0)
      return zeus__error(ZEUS_EPARSE, "%s: learning_rates key '%s' is not a batch size", l->path, key);
    if (!json_is_number(x)) return bad(l, "learning_rates", "a number per batch size", x);
    lr[i++] = json_number_value(x);
  }
  s->lr_batch_sizes = bs;
  s->lr_values = lr;
  s->num_lrs = n;
  return ZEUS_OK;
}

static int load_field(const loader *l, const char *key, const json_t *v, zeus_run_spec *s, long *recurrences) {
  long tmp = 0;
  int rc;
  if (strcmp(key, "command") == 0) return load_command(l, v, s);
  if (strcmp(key, "workdir") == 0) return get_str(l, key, v, &s->workdir);
  if (strcmp(key, "dataset") == 0) return get_str(l, key, v, &s->dataset);
  if (strcmp(key, "network") == 0) return get_str(l, key, v, &s->network);
  if (strcmp(key, "optimizer") == 0) return get_str(l, key, v, &s->optimizer);
  if (strcmp(key, "default_lr") == 0 || strcmp(key, "learning_rate") == 0) return get_num(l, key, v, &s->default_lr);
  if (strcmp(key, "learning_rates") == 0) return load_lrs(l, v, s);
  if (strcmp(key, "batch_sizes") == 0) {
    if (!json_is_array(v)) return bad(l, key, "a list of integers", v);
    size_t n = json_array_size(v);
    long *bs = zeus__arena_alloc(l->a, (n + 1) * sizeof *bs);
    if (!bs) return zeus__oom("loading the job spec");
    for (size_t i = 0; i < n; i++)
      if ((rc = get_int(l, key, json_array_get(v, i), &bs[i]))) return rc;
    s->batch_sizes = bs;
    s->num_batch_sizes = n;
    return ZEUS_OK;
  }
  if (strcmp(key, "default_batch_size") == 0 || strcmp(key, "default_bs") == 0)
    return get_int(l, key, v, &s->default_bs);
  if (strcmp(key, "target_metric") == 0) return get_num(l, key, v, &s->target_metric);
  if (strcmp(key, "max_epochs") == 0) return get_int(l, key, v, &s->max_epochs);
  if (strcmp(key, "eta") == 0) return get_num(l, key, v, &s->eta);
  if (strcmp(key, "beta") == 0) return get_num(l, key, v, &s->beta);
  if (strcmp(key, "seed") == 0) {
    if ((rc = get_int(l, key, v, &tmp))) return rc;
    if (tmp < 0) return bad(l, key, "an integer >= 0", v);
    s->seed = (uint64_t)tmp;
    return ZEUS_OK;
  }
  if (strcmp(key, "window_size") == 0) return get_int(l, key, v, &s->window_size);
  if (strcmp(key, "log_base") == 0) return get_str(l, key, v, &s->log_base);
  if (strcmp(key, "state") == 0) return get_str(l, key, v, &s->state_path);
  if (strcmp(key, "observer_mode") == 0) return get_bool(l, key, v, &s->observer_mode);
  if (strcmp(key, "profile_warmup_iters") == 0) return get_int(l, key, v, &s->profile_warmup_iters);
  if (strcmp(key, "profile_measure_iters") == 0) return get_int(l, key, v, &s->profile_measure_iters);
  if (strcmp(key, "max_power_w") == 0) return get_num(l, key, v, &s->max_power_w);
  if (strcmp(key, "max_tries") == 0) return get_int(l, key, v, &s->max_tries);
  if (strcmp(key, "timeout_s") == 0) return get_num(l, key, v, &s->timeout_s);
  if (strcmp(key, "keep_going") == 0) return get_bool(l, key, v, &s->keep_going);
  if (strcmp(key, "recurrences") == 0) {
    if ((rc = get_int(l, key, v, &tmp))) return rc;
    /* As --recurrences: a negative count once ran one recurrence. */
    if (tmp < 0 || tmp > 1000000) return bad(l, key, "an integer in [0, 1000000]", v);
    if (recurrences) *recurrences = tmp;
    return ZEUS_OK;
  }
  return zeus__error(ZEUS_EPARSE, "%s: unknown field '%s'", l->path, key);
}

/* The spec is parsed into a list arena, then copied into one block (measured by a second copy),
 * so that the caller releases everything with one zeus_free(). */
int zeus_run_spec_load(zeus_run_spec *s, const char *path, void **storage, long *recurrences) {
  if (!s || !path || !storage) return zeus__error(ZEUS_EINVAL, "zeus_run_spec_load: s, path and storage are required");
  json_t *root;
  int rc = zeus__json_load_file_max(path, ZEUS__RUN_SPEC_MAX, "job spec (JSON)", &root);
  if (rc) return rc;
  if (!json_is_object(root)) {
    json_decref(root);
    return zeus__error(ZEUS_EPARSE, "%s: expected a JSON object (the job spec)", path);
  }
  zeus__arena parsed = {0}, measure = {0};
  loader l = {path, &parsed};
  zeus_run_spec tmp = *s, copy;
  const char *key;
  json_t *v;
  json_object_foreach(root, key, v) {
    rc = load_field(&l, key, v, &tmp, recurrences);
    if (rc) break;
  }
  json_decref(root);
  if (!rc) rc = zeus__run_spec_copy(&measure, &tmp, &copy);
  zeus__arena block = {.size = measure.used, .block = rc ? NULL : malloc(measure.used ? measure.used : 1)};
  zeus__arena_free(&measure);
  if (!rc && !block.block) rc = zeus__oom("loading the job spec");
  if (!rc) rc = zeus__run_spec_copy(&block, &tmp, &copy);
  zeus__arena_free(&parsed);
  if (rc) {
    free(block.block);
    return rc;
  }
  *s = copy;
  *storage = block.block;
  return ZEUS_OK;
}
