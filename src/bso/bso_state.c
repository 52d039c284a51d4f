/* bso_state.c: the batch-size optimizer's whole state as JSON and back, exactly (17 significant
 * digits; infinities as strings; generator words as hex strings). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bso/bso_state.h"
#include "core/json.h"
#include "zeus/format.h"

#define STATE_VERSION 1

json_t *zeus__json_double(double v) {
  if (isinf(v)) return json_string(v > 0 ? "inf" : "-inf");
  if (isnan(v)) return json_null();
  return json_real(v);
}

int zeus__json_get_double(const json_t *v, const char *ctx, const char *key, double *out) {
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return ZEUS_OK;
  }
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (strcmp(s, "inf") == 0 || strcmp(s, "Infinity") == 0) { *out = INFINITY; return ZEUS_OK; }
    if (strcmp(s, "-inf") == 0 || strcmp(s, "-Infinity") == 0) { *out = -INFINITY; return ZEUS_OK; }
  }
  return zeus__error(ZEUS_EPARSE, "%s: field '%s' is %s, expected a number or \"inf\"", ctx, key,
                     zeus__json_type_name(v));
}

static json_t *longs(const long *v, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer(v[i]));
  return a;
}

static json_t *rng_json(const zeus_rng *r) {
  json_t *a = json_array();
  for (int i = 0; a && i < 4; i++) {
    char hex[24];
    snprintf(hex, sizeof hex, "0x%016" PRIx64, r->s[i]);
    json_array_append_new(a, json_string(hex));
  }
  return a;
}

int zeus_bso_save_state(const zeus_bso *b, char **out) {
  json_t *root = json_object();
  json_t *opts = json_object();
  json_t *hist = json_array();
  json_t *ex = json_object();
  if (!root || !opts || !hist || !ex) {
    json_decref(root);
    json_decref(opts);
    json_decref(hist);
    json_decref(ex);
    return zeus__oom("saving the batch-size optimizer");
  }
  json_object_set_new(root, "version", json_integer(STATE_VERSION));
  json_object_set_new(root, "batch_sizes", longs(b->bs, b->n));
  json_object_set_new(root, "default_batch_size", json_integer(b->default_bs));
  json_object_set_new(opts, "prior_mean", zeus__json_double(b->o.prior_mean));
  json_object_set_new(opts, "prior_precision", zeus__json_double(b->o.prior_precision));
  json_object_set_new(opts, "window_size", json_integer(b->o.window_size));
  json_object_set_new(opts, "num_pruning_rounds", json_integer(b->o.num_pruning_rounds));
  json_object_set_new(opts, "concurrency", json_boolean(b->o.concurrency));
  char seed[24];
  snprintf(seed, sizeof seed, "0x%016" PRIx64, b->o.seed);
  json_object_set_new(opts, "seed", json_string(seed));
  json_object_set_new(root, "options", opts);
  for (size_t i = 0; i < b->hist_n; i++) {
    json_t *pair = json_array();
    json_array_append_new(pair, json_integer(b->hist_bs[i]));
    json_array_append_new(pair, zeus__json_double(b->hist_reward[i]));
    json_array_append_new(hist, pair);
  }
  json_object_set_new(root, "history", hist);
  json_object_set_new(ex, "candidates", longs(b->ex.cands, b->ex.ncands));
  json_object_set_new(ex, "good", longs(b->ex.good, b->ex.ngood));
  json_object_set_new(ex, "default", json_integer(b->ex.default_bs));
  json_object_set_new(ex, "round", json_integer(b->ex.round));
  json_object_set_new(ex, "center", json_integer((json_int_t)b->ex.center));
  json_object_set_new(ex, "direction", json_string(b->ex.dir ? "up" : "down"));
  json_object_set_new(ex, "position", json_integer((json_int_t)b->ex.pos));
  json_object_set_new(ex, "best_cost", zeus__json_double(b->ex.best_cost));
  json_object_set_new(ex, "expecting", json_integer(b->ex.expecting));
  json_object_set_new(root, "explorer", ex);
  if (b->mab) {
    json_t *mab = json_object();
    json_t *arms = json_array();
    size_t n = zeus_gts_num_arms(b->mab);
    for (size_t i = 0; i < n; i++) {
      zeus_gts_arm a;
      zeus_gts_arm_at(b->mab, i, &a);
      json_t *o = json_object();
      json_object_set_new(o, "arm", json_integer(a.arm));
      json_object_set_new(o, "mean", zeus__json_double(a.mean));
      json_object_set_new(o, "precision", zeus__json_double(a.precision));
      json_object_set_new(o, "reward_precision", zeus__json_double(a.reward_precision));
      json_object_set_new(o, "num_observations", json_integer(a.num_observations));
      json_array_append_new(arms, o);
    }
    json_object_set_new(mab, "arms", arms);
    json_object_set_new(mab, "rng", rng_json(zeus__gts_rng_const(b->mab)));
    json_object_set_new(root, "bandit", mab);
  } else {
    json_object_set_new(root, "bandit", json_null());
  }
  char *s = zeus_json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!s) return zeus__oom("saving the batch-size optimizer");
  *out = s;
  return ZEUS_OK;
}

/* ---- loading ---- */

#define CTX "batch-size optimizer state"

static int get_longs(const json_t *obj, const char *key, long **out, size_t *n) {
  json_t *a;
  int rc = zeus__json_req_array(obj, key, CTX, &a);
  if (rc) return zeus__error_recode(ZEUS_EPARSE);
  size_t m = json_array_size(a);
  long *v = malloc((m ? m : 1) * sizeof *v);
  if (!v) return zeus__oom("loading the batch-size optimizer");
  for (size_t i = 0; i < m; i++) {
    json_t *x = json_array_get(a, i);
    if (!json_is_integer(x)) {
      free(v);
      return zeus__error(ZEUS_EPARSE, "%s: '%s'[%zu] is %s, expected an integer", CTX, key, i, zeus__json_type_name(x));
    }
    v[i] = (long)json_integer_value(x);
  }
  *out = v;
  *n = m;
  return ZEUS_OK;
}

static int get_long(const json_t *obj, const char *key, long *out) {
  long long v;
  int rc = zeus__json_req_int(obj, key, CTX, &v);
  if (rc) return zeus__error_recode(ZEUS_EPARSE);
  *out = (long)v;
  return ZEUS_OK;
}

static int get_dbl(const json_t *obj, const char *key, double *out) {
  json_t *v = json_object_get(obj, key);
  if (!v) return zeus__error(ZEUS_EPARSE, "%s: missing field '%s'", CTX, key);
  return zeus__json_get_double(v, CTX, key, out);
}

static int get_hex(const json_t *v, const char *what, uint64_t *out) {
  const char *s = json_string_value(v);
  char *end;
  if (!s || strncmp(s, "0x", 2) != 0) return zeus__error(ZEUS_EPARSE, "%s: %s is not a hex string", CTX, what);
  unsigned long long x = strtoull(s + 2, &end, 16);
  if (end == s + 2 || *end) return zeus__error(ZEUS_EPARSE, "%s: %s '%s' is not a hex number", CTX, what, s);
  *out = (uint64_t)x;
  return ZEUS_OK;
}

static bool subset(const long *a, size_t na, const long *of, size_t nof) {
  for (size_t i = 0; i < na; i++) {
    bool found = false;
    for (size_t k = 0; k < nof; k++) found = found || a[i] == of[k];
    if (!found) return false;
  }
  return true;
}

static int load_explorer(zeus_bso *b, const json_t *ex) {
  long *cands = NULL, *good = NULL;
  size_t nc = 0, ng = 0;
  int rc = get_longs(ex, "candidates", &cands, &nc);
  if (!rc) rc = get_longs(ex, "good", &good, &ng);
  if (rc) {
    free(cands);
    return rc;
  }
  if (!subset(cands, nc, b->bs, b->n) || !subset(good, ng, b->bs, b->n) || ng > nc) {
    free(cands);
    free(good);
    return zeus__error(ZEUS_EPARSE, "%s: the explorer's batch sizes are not the job's", CTX);
  }
  rc = zeus__explorer_init(&b->ex, cands, nc, b->default_bs, b->o.num_pruning_rounds);
  free(cands);
  if (rc) {
    free(good);
    return rc;
  }
  memcpy(b->ex.good, good, ng * sizeof *good);
  b->ex.ngood = ng;
  free(good);
  long round = 0, center = 0, pos = 0, expecting = 0, def = 0;
  const char *dir = "down";
  rc = get_long(ex, "round", &round);
  if (!rc) rc = get_long(ex, "center", &center);
  if (!rc) rc = get_long(ex, "position", &pos);
  if (!rc) rc = get_long(ex, "expecting", &expecting);
  if (!rc) rc = get_long(ex, "default", &def);
  if (!rc) rc = get_dbl(ex, "best_cost", &b->ex.best_cost);
  if (!rc && zeus__json_req_string(ex, "direction", CTX, &dir)) rc = zeus__error_recode(ZEUS_EPARSE);
  if (rc) return rc;
  if (round < 0 || round > b->o.num_pruning_rounds || center < 0 || pos < 0 ||
      (strcmp(dir, "up") != 0 && strcmp(dir, "down") != 0) || (expecting != 0 && !zeus__bso_has(b, expecting)) ||
      !zeus__bso_has(b, def) || (nc > 0 && (size_t)center >= nc))
    return zeus__error(ZEUS_EPARSE, "%s: the explorer's position is inconsistent", CTX);
  b->ex.round = round;
  b->ex.center = (size_t)center;
  b->ex.pos = (size_t)pos;
  b->ex.dir = strcmp(dir, "up") == 0;
  b->ex.expecting = expecting;
  b->ex.default_bs = def;
  return ZEUS_OK;
}

static int load_bandit(zeus_bso *b, const json_t *mab) {
  json_t *arms, *rng;
  if (zeus__json_req_array(mab, "arms", CTX, &arms) || zeus__json_req_array(mab, "rng", CTX, &rng))
    return zeus__error_recode(ZEUS_EPARSE);
  size_t n = json_array_size(arms);
  if (n == 0 || json_array_size(rng) != 4)
    return zeus__error(ZEUS_EPARSE, "%s: the bandit needs arms and 4 generator words", CTX);
  long *ids = malloc(n * sizeof *ids);
  if (!ids) return zeus__oom("loading the batch-size optimizer");
  int rc = ZEUS_OK;
  for (size_t i = 0; i < n && !rc; i++) rc = get_long(json_array_get(arms, i), "arm", &ids[i]);
  if (!rc && !subset(ids, n, b->bs, b->n))
    rc = zeus__error(ZEUS_EPARSE, "%s: the bandit's arms are not the job's batch sizes", CTX);
  zeus_gts_opts go;
  zeus_gts_opts_init(&go);
  go.prior_mean = b->o.prior_mean;
  go.prior_precision = b->o.prior_precision;
  go.num_exploration = 2;
  go.seed = b->o.seed;
  if (!rc) rc = zeus_gts_open(&b->mab, ids, n, &go);
  free(ids);
  for (size_t i = 0; i < n && !rc; i++) {
    json_t *o = json_array_get(arms, i);
    zeus_gts_arm a;
    rc = get_long(o, "arm", &a.arm);
    if (!rc) rc = get_dbl(o, "mean", &a.mean);
    if (!rc) rc = get_dbl(o, "precision", &a.precision);
    if (!rc) rc = get_dbl(o, "reward_precision", &a.reward_precision);
    if (!rc) rc = get_long(o, "num_observations", &a.num_observations);
    if (!rc && (!isfinite(a.mean) || !(a.precision >= 0) || !(a.reward_precision >= 0) || a.num_observations < 0))
      rc = zeus__error(ZEUS_EPARSE, "%s: arm %ld has an impossible belief", CTX, a.arm);
    if (!rc) rc = zeus__gts_set_arm_state(b->mab, &a);
  }
  zeus_rng *r = b->mab ? zeus__gts_rng(b->mab) : NULL;
  for (int i = 0; i < 4 && !rc; i++) rc = get_hex(json_array_get(rng, (size_t)i), "generator word", &r->s[i]);
  if (!rc && !(r->s[0] | r->s[1] | r->s[2] | r->s[3]))
    rc = zeus__error(ZEUS_EPARSE, "%s: the generator state is all zero", CTX);
  return rc;
}

int zeus_bso_load_state(zeus_bso **out, const char *text) {
  json_t *root;
  int rc = zeus__json_parse(text, strlen(text), CTX, &root);
  if (rc) return rc;
  zeus_bso *b = NULL;
  long *bs = NULL;
  size_t n = 0;
  long version = 0, def = 0;
  json_t *opts, *hist;
  zeus_bso_opts o;
  zeus_bso_opts_init(&o);
  rc = get_long(root, "version", &version);
  if (!rc && version != STATE_VERSION)
    rc = zeus__error(ZEUS_EPARSE, "%s: version %ld, this library reads version %d", CTX, version, STATE_VERSION);
  if (!rc) rc = get_longs(root, "batch_sizes", &bs, &n);
  if (!rc) rc = get_long(root, "default_batch_size", &def);
  if (!rc && (zeus__json_req_object(root, "options", CTX, &opts) || zeus__json_req_array(root, "history", CTX, &hist)))
    rc = zeus__error_recode(ZEUS_EPARSE);
  if (!rc) rc = get_dbl(opts, "prior_mean", &o.prior_mean);
  if (!rc) rc = get_dbl(opts, "prior_precision", &o.prior_precision);
  if (!rc) rc = get_long(opts, "window_size", &o.window_size);
  if (!rc) rc = get_long(opts, "num_pruning_rounds", &o.num_pruning_rounds);
  if (!rc) {
    json_t *c = json_object_get(opts, "concurrency");
    if (!json_is_boolean(c)) rc = zeus__error(ZEUS_EPARSE, "%s: options.concurrency must be a boolean", CTX);
    else o.concurrency = json_is_true(c);
  }
  if (!rc) rc = get_hex(json_object_get(opts, "seed"), "options.seed", &o.seed);
  if (!rc) rc = zeus__bso_new(&b, bs, n, def, &o);
  if (rc && rc != ZEUS_EPARSE && rc != ZEUS_ENOMEM) rc = zeus__error_ctx(ZEUS_EPARSE, CTX);
  free(bs);
  for (size_t i = 0; !rc && i < json_array_size(hist); i++) {
    json_t *pair = json_array_get(hist, i);
    double reward;
    if (!json_is_array(pair) || json_array_size(pair) != 2 || !json_is_integer(json_array_get(pair, 0))) {
      rc = zeus__error(ZEUS_EPARSE, "%s: history[%zu] must be [batch size, reward]", CTX, i);
      break;
    }
    long hbs = (long)json_integer_value(json_array_get(pair, 0));
    rc = zeus__json_get_double(json_array_get(pair, 1), CTX, "history", &reward);
    if (!rc && (!zeus__bso_has(b, hbs) || !isfinite(reward)))
      rc = zeus__error(ZEUS_EPARSE, "%s: history[%zu] is not an observation of the job", CTX, i);
    if (!rc && (rc = zeus__bso_hist_append(b, hbs, reward))) break;
  }
  json_t *ex = rc ? NULL : json_object_get(root, "explorer");
  if (!rc && !json_is_object(ex)) rc = zeus__error(ZEUS_EPARSE, "%s: missing object 'explorer'", CTX);
  if (!rc) rc = load_explorer(b, ex);
  json_t *mab = rc ? NULL : json_object_get(root, "bandit");
  if (!rc && mab && !json_is_null(mab)) {
    if (!json_is_object(mab)) rc = zeus__error(ZEUS_EPARSE, "%s: 'bandit' must be an object or null", CTX);
    else rc = load_bandit(b, mab);
  }
  json_decref(root);
  if (rc) {
    zeus_bso_close(b);
    return rc;
  }
  *out = b;
  return ZEUS_OK;
}
