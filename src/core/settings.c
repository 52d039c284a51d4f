/* Parsing numbers, booleans and environment settings with errors that name the setting. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/core.h"

static const char *skip_blank(const char *s) {
  while (*s && isspace((unsigned char)*s)) s++;
  return s;
}

static bool only_blank(const char *s) { return *skip_blank(s) == '\0'; }

int zeus__parse_long(const char *text, long min, long max, const char *what, long *out) {
  if (!text || only_blank(text)) return zeus__error(ZEUS_EINVAL, "%s: expected an integer, got nothing", what);
  errno = 0;
  char *end;
  long v = strtol(text, &end, 10);
  if (end == text || !only_blank(end))
    return zeus__error(ZEUS_EINVAL, "%s: expected an integer, got '%s'", what, text);
  if (errno == ERANGE || v < min || v > max)
    return zeus__error(ZEUS_ERANGE, "%s: %s is outside the allowed range [%ld, %ld]", what,
                       text, min, max);
  *out = v;
  return ZEUS_OK;
}

int zeus__parse_double(const char *text, double min, double max, const char *what, double *out) {
  if (!text || only_blank(text)) return zeus__error(ZEUS_EINVAL, "%s: expected a number, got nothing", what);
  errno = 0;
  char *end;
  double v = strtod(text, &end);
  if (end == text || !only_blank(end) || isnan(v))
    return zeus__error(ZEUS_EINVAL, "%s: expected a number, got '%s'", what, text);
  if (errno == ERANGE || !(v >= min && v <= max))
    return zeus__error(ZEUS_ERANGE, "%s: %s is outside the allowed range [%g, %g]", what, text,
                       min, max);
  *out = v;
  return ZEUS_OK;
}

int zeus__parse_bool(const char *text, const char *what, bool *out) {
  static const char *const yes[] = {"1", "true", "yes", "on"};
  static const char *const no[] = {"0", "false", "no", "off"};
  if (text) {
    const char *t = skip_blank(text);
    for (size_t i = 0; i < ZEUS__ARRAY_LEN(yes); i++) {
      if (strcasecmp(t, yes[i]) == 0) { *out = true; return ZEUS_OK; }
      if (strcasecmp(t, no[i]) == 0) { *out = false; return ZEUS_OK; }
    }
  }
  return zeus__error(ZEUS_EINVAL, "%s: expected a boolean (1/0, true/false, yes/no, on/off), got '%s'",
                     what, text ? text : "");
}

const char *zeus__env_str(const char *name) {
  const char *v = getenv(name);
  return (v && *v) ? v : NULL;
}

int zeus__env_long(const char *name, long min, long max, long def, long *out) {
  const char *v = zeus__env_str(name);
  if (!v) { *out = def; return ZEUS_OK; }
  return zeus__parse_long(v, min, max, name, out);
}

int zeus__env_double(const char *name, double min, double max, double def, double *out) {
  const char *v = zeus__env_str(name);
  if (!v) { *out = def; return ZEUS_OK; }
  return zeus__parse_double(v, min, max, name, out);
}

int zeus__env_bool(const char *name, bool def, bool *out) {
  const char *v = zeus__env_str(name);
  if (!v) { *out = def; return ZEUS_OK; }
  return zeus__parse_bool(v, name, out);
}

int zeus__env_choice(const char *name, const char *const *choices, int def, int *out) {
  const char *v = zeus__env_str(name);
  if (!v) { *out = def; return ZEUS_OK; }
  zeus__buf expected = {0};
  for (int i = 0; choices[i]; i++) {
    if (strcasecmp(v, choices[i]) == 0) {
      zeus__buf_free(&expected);
      *out = i;
      return ZEUS_OK;
    }
    zeus__buf_printf(&expected, "%s%s", i ? ", " : "", choices[i]);
  }
  int rc = zeus__error(ZEUS_EINVAL, "%s='%s': expected one of %s", name, v,
                       expected.data ? expected.data : "");
  zeus__buf_free(&expected);
  return rc;
}
