/* src/core/json.h: jansson helpers whose errors name the file, line, column and field. */
#ifndef ZEUS_CORE_JSON_H
#define ZEUS_CORE_JSON_H

#include <jansson.h>

#include "core/core.h"

/* Parses `len` bytes; `what` names the input in errors ("request body", a path). ZEUS_EPARSE
 * with "<what>:<line>:<column>: <reason>" on malformed JSON. */
int zeus__json_parse(const char *data, size_t len, const char *what, json_t **out /* out */);
/* Loads a file through zeus__read_file_max (a regular file of at most `max` bytes; `what` names
 * the kind of file in errors); ZEUS_ENOENT/ZEUS_EIO/ZEUS_EINVAL/ZEUS_ERANGE/ZEUS_EPARSE naming the
 * path. */
int zeus__json_load_file_max(const char *path, size_t max, const char *what, json_t **out /* out */);
/* zeus__json_load_file_max(path, ZEUS__READ_MAX, "JSON file", out). */
int zeus__json_load_file(const char *path, json_t **out /* out */);
/* Serialises (compact unless `indent` > 0) and writes atomically. */
int zeus__json_write_file_atomic(const char *path, const json_t *value, int indent);

/* Reals for output documents (the convention of zeus/format.h), null for NaN and the
 * infinities: a measured figure rounded to the resolution it was measured at (3 decimals for J
 * from mJ, 9 for s from ns), and a derived one (an average, a cost) to ZEUS_DERIVED_DIGITS
 * significant digits. */
json_t *zeus__json_measured(double v, int decimals);
json_t *zeus__json_derived(double v);

/* Typed field access. `ctx` names the object in errors ("profile 'p.json'", "JobInfo").
 * A missing field is ZEUS_EINVAL "<ctx>: missing field 'key'"; a wrong type names the expected one. */
int zeus__json_req_number(const json_t *obj, const char *key, const char *ctx, double *out);
int zeus__json_req_int(const json_t *obj, const char *key, const char *ctx, long long *out);
int zeus__json_req_string(const json_t *obj, const char *key, const char *ctx, const char **out /* borrowed */);
int zeus__json_req_array(const json_t *obj, const char *key, const char *ctx, json_t **out /* borrowed */);
int zeus__json_req_object(const json_t *obj, const char *key, const char *ctx, json_t **out /* borrowed */);
/* "number", "string", ... for messages. */
const char *zeus__json_type_name(const json_t *v);

#endif
