/* Frequency plan files: lowtime's Python-literal output, parsed without evaluating anything.
 *
 *   plan  := '[' [ stage { ',' stage } [','] ] ']'
 *   stage := ('[' | '(') [ pair { ',' pair } [','] ] (']' | ')')
 *   pair  := ('(' | '[') string ',' integer [','] (')' | ']')
 * Strings are '...' or "..." without escapes and must be "forward" or "backward"; '#' starts a
 * comment that runs to the end of the line. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "pfo/pfo_internal.h"

typedef struct {
  const char *s, *end, *name;
  int line, col;
} lexer;

static void skip_space(lexer *L) {
  while (L->s < L->end) {
    char c = *L->s;
    if (c == '#') {
      while (L->s < L->end && *L->s != '\n') L->s++, L->col++;
    } else if (c == '\n') {
      L->s++, L->line++, L->col = 1;
    } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
      L->s++, L->col++;
    } else {
      break;
    }
  }
}

static int expected(lexer *L, const char *what) {
  char got[24];
  if (L->s >= L->end) snprintf(got, sizeof got, "the end of the file");
  else if (isprint((unsigned char)*L->s)) snprintf(got, sizeof got, "'%c'", *L->s);
  else snprintf(got, sizeof got, "byte 0x%02x", (unsigned char)*L->s);
  return zeus__error(ZEUS_EPARSE, "%s:%d:%d: expected %s, got %s", L->name, L->line, L->col, what, got);
}

/* Consumes one of the characters in `set`; returns it, or 0 after setting an error. */
static char take(lexer *L, const char *set, const char *what) {
  skip_space(L);
  if (L->s < L->end && *L->s && strchr(set, *L->s)) {
    char c = *L->s;
    L->s++, L->col++;
    return c;
  }
  expected(L, what);
  return 0;
}

static bool peek(lexer *L, char c) {
  skip_space(L);
  return L->s < L->end && *L->s == c;
}

static int parse_pair(lexer *L, zeus_pfo_freq *out) {
  char open = take(L, "([", "'(' or '[' opening an (instruction, MHz) pair");
  if (!open) return ZEUS_EPARSE;
  skip_space(L);
  int sline = L->line, scol = L->col;
  char q = take(L, "'\"", "a quoted instruction name (\"forward\" or \"backward\")");
  if (!q) return ZEUS_EPARSE;
  const char *start = L->s;
  while (L->s < L->end && *L->s != q && *L->s != '\n' && *L->s != '\\') L->s++, L->col++;
  if (L->s >= L->end || *L->s != q) return expected(L, "the closing quote of the instruction name");
  size_t len = (size_t)(L->s - start);
  L->s++, L->col++;
  if (!((len == 7 && !memcmp(start, "forward", 7)) || (len == 8 && !memcmp(start, "backward", 8))))
    return zeus__error(ZEUS_EPARSE, "%s:%d:%d: expected the instruction \"forward\" or \"backward\", "
                       "got \"%.*s\"", L->name, sline, scol, (int)(len > 40 ? 40 : len), start);
  if (!take(L, ",", "',' after the instruction name")) return ZEUS_EPARSE;
  skip_space(L);
  if (L->s >= L->end || !isdigit((unsigned char)*L->s)) return expected(L, "a frequency in MHz (a positive integer)");
  long v = 0;
  int fline = L->line, fcol = L->col;
  while (L->s < L->end && isdigit((unsigned char)*L->s)) {
    if (v < 10000000) v = v * 10 + (*L->s - '0');
    L->s++, L->col++;
  }
  if (L->s < L->end && (isalpha((unsigned char)*L->s) || *L->s == '.' || *L->s == '_'))
    return expected(L, "a frequency in MHz (a positive integer)");
  if (v <= 0 || v > 1000000)
    return zeus__error(ZEUS_EPARSE, "%s:%d:%d: expected a frequency in MHz within 1..1000000, got %ld",
                       L->name, fline, fcol, v);
  if (peek(L, ',')) take(L, ",", ",");
  if (!take(L, open == '(' ? ")" : "]", open == '(' ? "')' closing the pair" : "']' closing the pair"))
    return ZEUS_EPARSE;
  out->frequency_mhz = (int)v;
  out->instruction = zeus__strdup(len == 7 ? "forward" : "backward");
  return out->instruction ? ZEUS_OK : zeus__oom("parsing a plan");
}

static int parse_stage(lexer *L, zeus_pfo_schedule *out) {
  char open = take(L, "([", "'[' opening one rank's list of (instruction, MHz) pairs");
  if (!open) return ZEUS_EPARSE;
  char close = open == '(' ? ')' : ']';
  size_t cap = 0;
  int rc = zeus__grow(&out->frequencies, &cap, 1, sizeof *out->frequencies, "parsing a plan");
  if (rc) return rc;
  while (!peek(L, close)) {
    if ((rc = zeus__grow(&out->frequencies, &cap, out->n_frequencies + 1, sizeof *out->frequencies, "parsing a plan")))
      return rc;
    rc = parse_pair(L, &out->frequencies[out->n_frequencies]);
    if (rc) return rc;
    out->n_frequencies++;
    if (peek(L, ',')) take(L, ",", ",");
    else if (!peek(L, close)) return expected(L, close == ']' ? "',' or ']'" : "',' or ')'");
  }
  take(L, close == ']' ? "]" : ")", "");
  return ZEUS_OK;
}

static int parse_literal(const char *text, size_t len, const char *name, zeus_pfo_schedule **out, size_t *n) {
  lexer L = {text, text + len, name, 1, 1};
  size_t cap = 0, cnt = 0;
  zeus_pfo_schedule *s = NULL;
  int rc = ZEUS_OK;
  if (!take(&L, "[", "'[' opening the list of ranks")) { rc = ZEUS_EPARSE; goto fail; }
  while (!peek(&L, ']')) {
    if ((rc = zeus__grow(&s, &cap, cnt + 1, sizeof *s, "parsing a plan"))) goto fail;
    s[cnt].rank = (int)cnt;
    rc = parse_stage(&L, &s[cnt]);
    cnt++;
    if (rc) goto fail;
    if (peek(&L, ',')) take(&L, ",", ",");
    else if (!peek(&L, ']')) { rc = expected(&L, "',' or ']' after a rank's list"); goto fail; }
  }
  take(&L, "]", "");
  skip_space(&L);
  if (L.s < L.end) { rc = expected(&L, "the end of the file after the closing ']'"); goto fail; }
  if (cnt == 0) { rc = zeus__error(ZEUS_EPARSE, "%s: the plan lists no ranks", name); goto fail; }
  *out = s;
  *n = cnt;
  return ZEUS_OK;
fail:
  zeus_pfo_schedules_free(s, cnt);
  return rc;
}

/* JSON: a list (one per rank) of lists of [instruction, MHz], or of FrequencySchedule objects. */
static int parse_json(const char *text, size_t len, const char *name, zeus_pfo_schedule **out, size_t *n) {
  json_t *v;
  int rc = zeus__json_parse(text, len, name, &v);
  if (rc) return rc;
  size_t cnt = json_array_size(v);
  if (!json_is_array(v) || cnt == 0) {
    json_decref(v);
    return zeus__error(ZEUS_EPARSE, "%s: expected a non-empty JSON list with one entry per rank", name);
  }
  zeus_pfo_schedule *s = calloc(cnt, sizeof *s);
  if (!s) { json_decref(v); return zeus__oom("parsing a plan"); }
  for (size_t i = 0; i < cnt && !rc; i++) {
    json_t *e = json_array_get(v, i);
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s: rank %zu", name, i);
    if (json_is_object(e)) {
      rc = zeus__pfo_schedule_from_jt(e, ctx, &s[i]);
    } else {
      json_t *o = json_pack("{sisO}", "rank", (json_int_t)i, "frequencies", e);
      rc = o ? zeus__pfo_schedule_from_jt(o, ctx, &s[i]) : zeus__oom("parsing a plan");
      json_decref(o);
    }
    if (!rc) s[i].rank = (int)i;
    for (size_t j = 0; !rc && j < s[i].n_frequencies; j++) {
      const char *in = s[i].frequencies[j].instruction;
      if (strcmp(in, "forward") && strcmp(in, "backward"))
        rc = zeus__error(ZEUS_EPARSE, "%s: pair %zu: expected the instruction \"forward\" or "
                         "\"backward\", got \"%.40s\"", ctx, j, in);
    }
    if (rc) rc = rc == ZEUS_EINVAL ? ZEUS_EPARSE : rc;
  }
  json_decref(v);
  if (rc) { zeus_pfo_schedules_free(s, cnt); return rc; }
  *out = s;
  *n = cnt;
  return ZEUS_OK;
}

int zeus_pfo_parse_plan(const char *text, size_t len, const char *name, bool json,
                        zeus_pfo_schedule **out, size_t *n) {
  if (!text || !out || !n) return zeus__error(ZEUS_EINVAL, "zeus_pfo_parse_plan: NULL argument");
  if (!name) name = "plan";
  if (memchr(text, '\0', len)) return zeus__error(ZEUS_EPARSE, "%s: the file holds a NUL byte", name);
  return json ? parse_json(text, len, name, out, n) : parse_literal(text, len, name, out, n);
}

int zeus_pfo_parse_plan_file(const char *path, zeus_pfo_schedule **out, size_t *n) {
  char *data;
  size_t len;
  int rc = zeus__read_file_max(path, ZEUS__READ_MAX, "frequency plan", &data, &len);
  if (rc) return rc;
  size_t pl = strlen(path);
  bool json = pl >= 5 && strcmp(path + pl - 5, ".json") == 0;
  rc = zeus_pfo_parse_plan(data, len, path, json, out, n);
  free(data);
  return rc;
}
