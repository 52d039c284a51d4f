/* A tree-free reader for ProfilingResult bodies (POST /result), the server's hot path.
 *
 * Every rank posts one result per round; with jansson, building the tree of ~400 values and
 * walking it was most of the server's work per round (docs/pfo-server.md, "Where the time goes").
 * This reader walks the text once and fills the model directly. It accepts only the plain shape
 * the original client sends (the five fields, each at most once, keys without escapes, plain
 * ASCII, numbers jansson reads exactly as strtod does) and declines everything else, allocating
 * nothing then: the caller parses such a body with jansson, which answers the same values or
 * the same error as before. So a body read here gives exactly the model the jansson path gives
 * (same numbers bit for bit, same order of instructions), and a body it declines is no
 * different from before (the fuzz target fuzz_pfo_bodies compares both paths). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pfo/pfo_internal.h"

typedef struct {
  const char *p, *end;
} cur;

static void ws(cur *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

/* Skips white space and the character `ch`; false when something else comes. */
static bool eat(cur *c, char ch) {
  ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  return false;
}

/* A string without escapes, control characters or non-ASCII bytes (anything else: declined). */
static bool plain_string(cur *c, const char **s, size_t *n) {
  if (!eat(c, '"')) return false;
  const char *b = c->p;
  while (c->p < c->end) {
    unsigned char ch = (unsigned char)*c->p;
    if (ch == '"') {
      *s = b;
      *n = (size_t)(c->p - b);
      c->p++;
      return true;
    }
    if (ch == '\\' || ch < 0x20 || ch >= 0x80) return false;
    c->p++;
  }
  return false;
}

static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A JSON number as jansson reads it: an integer (no fraction, no exponent) through strtoll,
 * converted to double by json_number_value; a real through strtod. *is_int says which; *iv holds
 * the integer. Declines integers jansson would call too big and reals strtod overflows. */
static bool number(cur *c, double *out, bool *is_int, long long *iv) {
  ws(c);
  const char *b = c->p, *e = c->end, *p = b;
  bool neg = false;
  if (p < e && *p == '-') { neg = true; p++; }
  if (p >= e || *p < '0' || *p > '9') return false;
  /* m takes every significant digit (it wraps past 19, and then only the slow path uses the
   * text); sig counts them, dexp is the decimal exponent of m's last digit. */
  unsigned long long m = 0;
  int sig, dexp = 0;
  const char *d0 = p;
  if (*p == '0') {
    p++;
    d0 = p; /* no significant digit */
  } else {
    while (p < e && *p >= '0' && *p <= '9') m = m * 10 + (unsigned)(*p++ - '0');
  }
  sig = (int)(p - d0 < 1000 ? p - d0 : 1000);
  bool real = false;
  if (p < e && *p == '.') {
    real = true;
    p++;
    if (p >= e || *p < '0' || *p > '9') return false;
    if (m == 0) /* leading zeros of the fraction */
      while (p < e && *p == '0') { p++; dexp--; }
    const char *f0 = p;
    while (p < e && *p >= '0' && *p <= '9') m = m * 10 + (unsigned)(*p++ - '0');
    long nf = p - f0 < 1000 ? (long)(p - f0) : 1000;
    sig += (int)nf;
    dexp -= (int)nf;
  }
  if (p < e && (*p == 'e' || *p == 'E')) {
    real = true;
    p++;
    bool eneg = false;
    if (p < e && (*p == '+' || *p == '-')) eneg = *p++ == '-';
    if (p >= e || *p < '0' || *p > '9') return false;
    int x = 0;
    for (; p < e && *p >= '0' && *p <= '9'; p++)
      if (x < 100000) x = x * 10 + (*p - '0');
    dexp += eneg ? -x : x;
  }
  c->p = p;
  *is_int = !real;
  if (!real) {
    /* strtoll's range: 18 digits always fit; longer ones are left to jansson. */
    if (sig > 18) return false;
    long long v = (long long)m;
    *iv = neg ? -v : v;
    *out = (double)*iv;
    return true;
  }
  /* Exact when m < 2^53 and 10^|dexp| is exact: one correctly rounded operation, as strtod. */
  if (sig <= 15 && dexp >= -22 && dexp <= 22) {
    double v = (double)m;
    v = dexp < 0 ? v / pow10_exact[-dexp] : v * pow10_exact[dexp];
    *out = neg ? -v : v;
    return true;
  }
  char tmp[64];
  size_t n = (size_t)(p - b);
  if (n >= sizeof tmp) return false;
  memcpy(tmp, b, n);
  tmp[n] = '\0';
  char *end;
  errno = 0;
  double v = strtod(tmp, &end);
  if (end != tmp + n) return false; /* a locale whose decimal point is not '.' */
  if ((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE) return false; /* jansson: overflow */
  *out = v;
  return true;
}

/* Appends to a growing array of doubles. */
static bool push(double **v, size_t *n, size_t *cap, double x) {
  if (*n == *cap) {
    size_t nc = *cap ? 2 * *cap : 16;
    double *nv = realloc(*v, nc * sizeof *nv);
    if (!nv) return false;
    *v = nv;
    *cap = nc;
  }
  (*v)[(*n)++] = x;
  return true;
}

/* [number, ...] into a fresh array (at most `max` entries). */
static bool num_list(cur *c, size_t max, double **out, size_t *n) {
  if (!eat(c, '[')) return false;
  double *v = NULL;
  size_t k = 0, cap = 0;
  if (!eat(c, ']')) {
    do {
      double x;
      bool is_int;
      long long iv;
      if (k == max || !number(c, &x, &is_int, &iv) || !push(&v, &k, &cap, x)) { free(v); return false; }
    } while (eat(c, ','));
    if (!eat(c, ']')) { free(v); return false; }
  }
  if (!v && !(v = malloc(sizeof *v))) return false;
  *out = v;
  *n = k;
  return true;
}

/* {"instruction": [[numbers], ...], ...} within the jansson path's bounds; *budget is how many
 * more numbers the result may hold. */
static bool breakdowns(cur *c, zeus_pfo_breakdown **out, size_t *nout, size_t *budget) {
  if (!eat(c, '{')) return false;
  zeus_pfo_breakdown *bd = NULL;
  size_t n = 0, cap = 0;
  bool ok = true;
  if (!eat(c, '}')) {
    do {
      const char *key;
      size_t klen;
      if (n == ZEUS_PFO_MAX_INSTRUCTIONS || !plain_string(c, &key, &klen) || klen > ZEUS_PFO_MAX_NAME ||
          !eat(c, ':')) { ok = false; break; }
      for (size_t i = 0; i < n && ok; i++) /* jansson refuses duplicate keys */
        if (strlen(bd[i].instruction) == klen && !memcmp(bd[i].instruction, key, klen)) ok = false;
      if (!ok) break;
      if (n == cap) {
        size_t nc = cap ? 2 * cap : 4;
        zeus_pfo_breakdown *nb = realloc(bd, nc * sizeof *nb);
        if (!nb) { ok = false; break; }
        bd = nb;
        cap = nc;
      }
      zeus_pfo_breakdown *b = &bd[n++];
      memset(b, 0, sizeof *b);
      if (!(b->instruction = malloc(klen + 1))) { ok = false; break; }
      memcpy(b->instruction, key, klen);
      b->instruction[klen] = '\0';
      if (!eat(c, '[')) { ok = false; break; }
      size_t ocap = 0, nv = 0, vcap = 0;
      if (!eat(c, ']')) {
        do {
          if (b->n_iters == ZEUS_PFO_MAX_ITERS) { ok = false; break; }
          if (b->n_iters + 2 > ocap) {
            size_t nc = ocap ? 2 * ocap : 16;
            size_t *no = realloc(b->offsets, nc * sizeof *no);
            if (!no) { ok = false; break; }
            b->offsets = no;
            ocap = nc;
          }
          b->offsets[b->n_iters++] = nv;
          if (!eat(c, '[')) { ok = false; break; }
          size_t width = 0;
          if (!eat(c, ']')) {
            do {
              double x;
              bool is_int;
              long long iv;
              if (width == ZEUS_PFO_MAX_INSTRUCTIONS || nv == *budget || !number(c, &x, &is_int, &iv) ||
                  !push(&b->values, &nv, &vcap, x)) { ok = false; break; }
              width++;
            } while (eat(c, ','));
            if (ok && !eat(c, ']')) ok = false;
          }
        } while (ok && eat(c, ','));
        if (ok && !eat(c, ']')) ok = false;
      }
      if (!ok) break;
      if (!b->offsets && !(b->offsets = malloc(sizeof *b->offsets))) { ok = false; break; }
      b->offsets[b->n_iters] = nv;
      if (!b->values && !(b->values = malloc(sizeof *b->values))) { ok = false; break; }
      *budget -= nv;
    } while (eat(c, ','));
    if (ok && !eat(c, '}')) ok = false;
  }
  if (ok && !bd && !(bd = calloc(1, sizeof *bd))) ok = false;
  if (!ok) {
    for (size_t i = 0; i < n; i++) zeus__pfo_breakdown_clear(&bd[i]);
    free(bd);
    return false;
  }
  *out = bd;
  *nout = n;
  return true;
}

enum { F_RANK = 1, F_IT = 2, F_IE = 4, F_TB = 8, F_EB = 16, F_ALL = 31 };

bool zeus__pfo_prof_result_fast(const char *json, size_t len, zeus_pfo_prof_result *out) {
  if (!json) return false;
  cur c = {json, json + len};
  zeus_pfo_prof_result v = {0};
  unsigned seen = 0;
  /* The jansson path charges iter_time and iter_energy first, then the breakdowns in field
   * order; success only depends on the total, so the budget is shared here in text order. */
  size_t budget = ZEUS_PFO_MAX_RESULT_VALUES;
  bool ok = eat(&c, '{');
  if (ok && !eat(&c, '}')) {
    do {
      const char *key;
      size_t klen;
      if (!plain_string(&c, &key, &klen) || !eat(&c, ':')) { ok = false; break; }
      unsigned f = 0;
#define KEY_IS(s) (klen == sizeof(s) - 1 && !memcmp(key, s, klen))
      if (KEY_IS("rank")) f = F_RANK;
      else if (KEY_IS("iter_time")) f = F_IT;
      else if (KEY_IS("iter_energy")) f = F_IE;
      else if (KEY_IS("time_breakdown")) f = F_TB;
      else if (KEY_IS("energy_breakdown")) f = F_EB;
#undef KEY_IS
      if (!f || (seen & f)) { ok = false; break; } /* another field, or a duplicate: jansson's */
      seen |= f;
      switch (f) {
        case F_RANK: {
          double x;
          bool is_int;
          long long iv;
          ok = number(&c, &x, &is_int, &iv) && is_int && iv >= 0 && iv <= INT_MAX;
          if (ok) v.rank = (int)iv;
          break;
        }
        case F_IT: ok = num_list(&c, ZEUS_PFO_MAX_ITERS, &v.iter_time, &v.n_iter_time); break;
        case F_IE: ok = num_list(&c, ZEUS_PFO_MAX_ITERS, &v.iter_energy, &v.n_iter_energy); break;
        case F_TB: ok = breakdowns(&c, &v.time_breakdown, &v.n_time_breakdown, &budget); break;
        case F_EB: ok = breakdowns(&c, &v.energy_breakdown, &v.n_energy_breakdown, &budget); break;
      }
    } while (ok && eat(&c, ','));
    if (ok && !eat(&c, '}')) ok = false;
  }
  ws(&c);
  if (ok && (seen != F_ALL || c.p != c.end || v.n_iter_time + v.n_iter_energy > budget)) ok = false;
  if (!ok) {
    zeus_pfo_prof_result_clear(&v);
    return false;
  }
  *out = v;
  return true;
}
