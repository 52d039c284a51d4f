/* Shortest round-trip numbers and a JSON writer that uses them (the output convention of
 * zeus/format.h). jansson builds and parses our documents; only the writing is ours, because
 * jansson prints every real with a fixed precision (17 digits by default). */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "zeus/format.h"

ZEUS_EXTERN void zeus_free(void *p) { free(p); }

ZEUS_EXTERN int zeus_format_double(double v, char *buf, size_t len) {
  char tmp[ZEUS_FORMAT_DOUBLE_MAX + 8];
  int n;
  if (isnan(v)) n = snprintf(tmp, sizeof tmp, "NaN");
  else if (isinf(v)) n = snprintf(tmp, sizeof tmp, "%s", v > 0 ? "+Inf" : "-Inf");
  else {
    /* 17 significant digits always round-trip; most values need far fewer, and the first
     * precision that reads back exactly is the shortest (more digits of a correctly rounded
     * value never leave the rounding interval). */
    n = 0;
    int p = 1;
    for (; p <= 17; p++) {
      n = snprintf(tmp, sizeof tmp, "%.*g", p, v);
      if (strtod(tmp, NULL) == v) break;
    }
    /* %g writes 300 as "3e+02" at one digit; like Python's repr, keep the exponent form only for
     * decimal exponents outside [-4, 16), and write the same digits in fixed notation inside. */
    const char *e = strchr(tmp, 'e');
    if (e) {
      int x = atoi(e + 1);
      if (x >= -4 && x < 16) n = snprintf(tmp, sizeof tmp, "%.*f", p - 1 - x > 0 ? p - 1 - x : 0, v);
    }
  }
  if (n < 0 || (size_t)n >= len)
    return zeus__error(ZEUS_ERANGE, "a %zu-byte buffer cannot hold the number %s", len, tmp);
  memcpy(buf, tmp, (size_t)n + 1);
  return n;
}

ZEUS_EXTERN double zeus_round_decimals(double v, int decimals) {
  if (!isfinite(v)) return v;
  if (decimals < 0) decimals = 0;
  if (decimals > 17) decimals = 17;
  /* From 2^53 / 10^decimals up, a double's spacing is at least 10^-decimals: the nearest double
   * to the rounded decimal is v itself (and "%.*f" would need hundreds of characters). */
  static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,
                                 1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17};
  if (fabs(v) >= 9007199254740992.0 / pow10[decimals]) return v;
  /* The fast path (hooks round every measured instruction): scale, round to an integer, divide.
   * The product carries at most half an ulp of error, so the integer is the right one unless the
   * product lies within a few ulps of a half; k / 10^decimals is then the double nearest the
   * decimal (both operands exact, one correctly rounded division). */
  double scaled = v * pow10[decimals];
  double k = nearbyint(scaled);
  if (fabs(scaled - k) < 0.5 - 4 * (fabs(scaled) * DBL_EPSILON + DBL_MIN)) {
    double r = k / pow10[decimals];
    return r == 0 ? 0.0 : r;
  }
  /* printf rounds the exact binary value to the decimal, strtod takes the nearest double back:
   * both correctly rounded, and both in the same locale, so the pair is exact whatever
   * LC_NUMERIC says. */
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.*f", decimals, v);
  double r = strtod(tmp, NULL);
  return r == 0 ? 0.0 : r;
}

ZEUS_EXTERN double zeus_round_significant(double v, int digits) {
  if (!isfinite(v)) return v;
  if (digits < 1) digits = 1;
  if (digits > 17) digits = 17;
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.*e", digits - 1, v);
  double r = strtod(tmp, NULL);
  return r == 0 ? 0.0 : r;
}

ZEUS_EXTERN double zeus_joules_from_mj(int64_t mj) { return (double)mj / 1e3; }
ZEUS_EXTERN double zeus_joules_from_uj(int64_t uj) { return (double)uj / 1e6; }
ZEUS_EXTERN double zeus_seconds_from_ns(int64_t ns) { return (double)ns / 1e9; }

/* The resolution a real under `key` is written at, by its unit suffix (zeus/format.h). */
static double round_for_key(const char *key, double v) {
  size_t n = key ? strlen(key) : 0;
#define ENDS(suf) (n >= sizeof(suf) - 1 && strcmp(key + n - (sizeof(suf) - 1), suf) == 0)
  if (ENDS("_mhz") || ENDS("_c")) return v;                      /* whole units as read */
  if (ENDS("_s")) return zeus_round_decimals(v, 9);               /* clocks count ns */
  if (ENDS("_j") || ENDS("_w")) return zeus_round_decimals(v, 3); /* counters count mJ, mW */
#undef ENDS
  return zeus_round_significant(v, ZEUS_DERIVED_DIGITS); /* ratios, percentages, averages */
}

static void round_by_unit(json_t *v, const char *key, int depth) {
  if (depth > 64) return; /* documents we write are shallow; a cycle-free bound all the same */
  if (json_is_real(v)) {
    json_real_set(v, round_for_key(key, json_real_value(v)));
  } else if (json_is_array(v)) {
    for (size_t i = 0; i < json_array_size(v); i++) round_by_unit(json_array_get(v, i), key, depth + 1);
  } else if (json_is_object(v)) {
    const char *k;
    json_t *item;
    json_object_foreach(v, k, item) round_by_unit(item, k, depth + 1);
  }
}

ZEUS_EXTERN void zeus_json_round_by_unit(struct json_t *v) {
  if (v) round_by_unit(v, NULL, 0);
}

typedef struct writer {
  zeus__buf b;
  size_t flags;
  int rc;
} writer;

static void put(writer *w, const char *s, size_t n) {
  if (!w->rc) w->rc = zeus__buf_append(&w->b, s, n);
}
static void puts_(writer *w, const char *s) { put(w, s, strlen(s)); }

static void put_string(writer *w, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  put(w, "\"", 1);
  size_t run = 0; /* bytes copied as they are, flushed before each escape */
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char u[7];
    switch (c) {
      case '"': esc = "\\\""; break;
      case '\\': esc = "\\\\"; break;
      case '\b': esc = "\\b"; break;
      case '\f': esc = "\\f"; break;
      case '\n': esc = "\\n"; break;
      case '\r': esc = "\\r"; break;
      case '\t': esc = "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          memcpy(u, "\\u00", 4);
          u[4] = hex[c >> 4];
          u[5] = hex[c & 15];
          u[6] = '\0';
          esc = u;
        }
    }
    if (!esc) {
      run++;
      continue;
    }
    put(w, s + i - run, run);
    run = 0;
    puts_(w, esc);
  }
  put(w, s + n - run, run);
  put(w, "\"", 1);
}

static void newline(writer *w, int depth) {
  size_t indent = w->flags & 0x1F; /* JSON_INDENT(n) keeps n in the low five bits */
  if (!indent) return;
  put(w, "\n", 1);
  for (size_t i = 0; i < indent * (size_t)depth; i++) put(w, " ", 1);
}

static int cmp_keys(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void put_value(writer *w, const json_t *v, int depth) {
  const char *comma = (w->flags & 0x1F) ? "," : (w->flags & JSON_COMPACT) ? "," : ", ";
  const char *colon = (w->flags & JSON_COMPACT) ? ":" : ": ";
  char num[ZEUS_FORMAT_DOUBLE_MAX + 4];
  switch (json_typeof(v)) {
    case JSON_OBJECT: {
      size_t n = json_object_size(v), k = 0;
      if (n == 0) {
        puts_(w, "{}");
        break;
      }
      const char **keys = malloc(n * sizeof *keys);
      if (!keys) {
        if (!w->rc) w->rc = zeus__oom("writing a JSON object");
        break;
      }
      const char *key;
      json_t *item;
      json_object_foreach((json_t *)v, key, item) keys[k++] = key;
      if (w->flags & JSON_SORT_KEYS) qsort(keys, n, sizeof *keys, cmp_keys);
      puts_(w, "{");
      for (k = 0; k < n; k++) {
        if (k) puts_(w, comma);
        newline(w, depth + 1);
        put_string(w, keys[k], strlen(keys[k]));
        puts_(w, colon);
        put_value(w, json_object_get(v, keys[k]), depth + 1);
      }
      free(keys);
      newline(w, depth);
      puts_(w, "}");
      break;
    }
    case JSON_ARRAY: {
      size_t n = json_array_size(v);
      if (n == 0) {
        puts_(w, "[]");
        break;
      }
      puts_(w, "[");
      for (size_t i = 0; i < n; i++) {
        if (i) puts_(w, comma);
        newline(w, depth + 1);
        put_value(w, json_array_get(v, i), depth + 1);
      }
      newline(w, depth);
      puts_(w, "]");
      break;
    }
    case JSON_STRING: put_string(w, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
      snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
      puts_(w, num);
      break;
    case JSON_REAL: {
      double d = json_real_value(v);
      if (!isfinite(d)) {
        puts_(w, "null");
        break;
      }
      int n = zeus_format_double(d, num, sizeof num);
      if (n < 0) {
        if (!w->rc) w->rc = n;
        break;
      }
      /* Keep a real a real when read back: "175" would parse as an integer. */
      if (!strpbrk(num, ".eE")) memcpy(num + n, ".0", 3);
      puts_(w, num);
      break;
    }
    case JSON_TRUE: puts_(w, "true"); break;
    case JSON_FALSE: puts_(w, "false"); break;
    case JSON_NULL: puts_(w, "null"); break;
  }
}

ZEUS_EXTERN char *zeus_json_dumps(const struct json_t *value, size_t flags) {
  if (!value) {
    zeus__error(ZEUS_EINVAL, "zeus_json_dumps: no value to write");
    return NULL;
  }
  writer w = {.flags = flags};
  put_value(&w, value, 0);
  if (!w.rc && !w.b.data) w.rc = zeus__buf_append(&w.b, "", 0);
  if (w.rc) {
    zeus__buf_free(&w.b);
    return NULL;
  }
  return w.b.data;
}
