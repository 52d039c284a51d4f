/* JSON helpers over jansson. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "zeus/format.h"

int zeus__json_parse(const char *data, size_t len, const char *what, json_t **out) {
  json_error_t err;
  json_t *v = json_loadb(data, len, JSON_REJECT_DUPLICATES, &err);
  if (!v)
    return zeus__error(ZEUS_EPARSE, "%s:%d:%d: invalid JSON: %s", what, err.line, err.column,
                       err.text);
  *out = v;
  return ZEUS_OK;
}

int zeus__json_load_file(const char *path, json_t **out) {
  return zeus__json_load_file_max(path, ZEUS__READ_MAX, "JSON file", out);
}

int zeus__json_load_file_max(const char *path, size_t max, const char *what, json_t **out) {
  char *data;
  size_t len;
  int rc = zeus__read_file_max(path, max, what, &data, &len);
  if (rc) return rc;
  if (len == 0) {
    free(data);
    return zeus__error(ZEUS_EPARSE, "%s: the file is empty, expected JSON", path);
  }
  rc = zeus__json_parse(data, len, path, out);
  free(data);
  return rc;
}

int zeus__json_write_file_atomic(const char *path, const json_t *value, int indent) {
  char *s = zeus_json_dumps(value, indent > 0 ? JSON_INDENT(indent) : JSON_COMPACT);
  if (!s) return zeus__oom("serialising JSON");
  size_t n = strlen(s);
  char *withnl = realloc(s, n + 2);
  if (!withnl) { free(s); return zeus__oom("serialising JSON"); }
  withnl[n] = '\n';
  withnl[n + 1] = '\0';
  int rc = zeus__write_file_atomic(path, withnl, n + 1);
  free(withnl);
  return rc;
}

const char *zeus__json_type_name(const json_t *v) {
  if (!v) return "nothing";
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "an unknown value";
}

static int get_field(const json_t *obj, const char *key, const char *ctx, json_t **out) {
  if (!json_is_object(obj))
    return zeus__error(ZEUS_EINVAL, "%s: expected an object, got %s", ctx, zeus__json_type_name(obj));
  json_t *v = json_object_get(obj, key);
  if (!v) return zeus__error(ZEUS_EINVAL, "%s: missing field '%s'", ctx, key);
  *out = v;
  return ZEUS_OK;
}

static int wrong_type(const char *ctx, const char *key, const char *want, const json_t *v) {
  return zeus__error(ZEUS_EINVAL, "%s: field '%s' must be %s, got %s", ctx, key, want,
                     zeus__json_type_name(v));
}

int zeus__json_req_number(const json_t *obj, const char *key, const char *ctx, double *out) {
  json_t *v = NULL;
  int rc = get_field(obj, key, ctx, &v);
  if (rc) return rc;
  if (!json_is_number(v)) return wrong_type(ctx, key, "a number", v);
  *out = json_number_value(v);
  return ZEUS_OK;
}

int zeus__json_req_int(const json_t *obj, const char *key, const char *ctx, long long *out) {
  json_t *v = NULL;
  int rc = get_field(obj, key, ctx, &v);
  if (rc) return rc;
  if (!json_is_integer(v)) return wrong_type(ctx, key, "an integer", v);
  *out = json_integer_value(v);
  return ZEUS_OK;
}

int zeus__json_req_string(const json_t *obj, const char *key, const char *ctx, const char **out) {
  json_t *v = NULL;
  int rc = get_field(obj, key, ctx, &v);
  if (rc) return rc;
  if (!json_is_string(v)) return wrong_type(ctx, key, "a string", v);
  *out = json_string_value(v);
  return ZEUS_OK;
}

int zeus__json_req_array(const json_t *obj, const char *key, const char *ctx, json_t **out) {
  json_t *v = NULL;
  int rc = get_field(obj, key, ctx, &v);
  if (rc) return rc;
  if (!json_is_array(v)) return wrong_type(ctx, key, "a list", v);
  *out = v;
  return ZEUS_OK;
}

int zeus__json_req_object(const json_t *obj, const char *key, const char *ctx, json_t **out) {
  json_t *v = NULL;
  int rc = get_field(obj, key, ctx, &v);
  if (rc) return rc;
  if (!json_is_object(v)) return wrong_type(ctx, key, "an object", v);
  *out = v;
  return ZEUS_OK;
}

json_t *zeus__json_measured(double v, int decimals) {
  return isfinite(v) ? json_real(zeus_round_decimals(v, decimals)) : json_null();
}

json_t *zeus__json_derived(double v) {
  return isfinite(v) ? json_real(zeus_round_significant(v, ZEUS_DERIVED_DIGITS)) : json_null();
}
