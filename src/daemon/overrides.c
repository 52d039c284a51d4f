/* overrides.c: zeusd's GPU command overrides (`--gpu-command-overrides FILE`).
 *
 * On machines that never grant root, privileged GPU writes go to whitelisted external commands
 * (a sudoers entry for nvidia-smi, a vendor script) instead of NVML. The file is TOML, as zeusd's
 * (ml-energy/zeus zeusd/src/devices/gpu/command_override.rs and docs/zeusd/command_overrides.md,
 * master of August 2026): one table per operation, each with
 *
 *   commands      = ["cmd {gpu_id} {power_limit_w}", ...]  non-empty; run in order, stop at the first failure
 *   error_pattern = "(?i)error|fail"                       optional; a match in stdout+stderr fails a zero exit
 *   timeout_s     = 60                                     optional, > 0; per command
 *
 * Commands are split into words as a POSIX shell would (quotes, backslashes) and executed
 * directly, never through a shell. Placeholders are checked at load against the operation's own
 * list. The file must be a regular file (not a symlink) owned by root or by the daemon's user and
 * not writable by others, because it decides what the daemon executes.
 *
 * What this reads of TOML is what the format needs: tables ([name]), keys, basic and literal
 * strings, integers, arrays of strings (over several lines, with comments and a trailing comma).
 * Anything else is refused with the line it is on. error_pattern is a POSIX extended regular
 * expression; a leading "(?i)" (Rust's regex, as zeusd's examples use) makes it case-insensitive.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon_internal.h"

#define MAX_FILE_BYTES (64u * 1024)
#define MAX_COMMANDS 16
#define MAX_WORDS 64
#define DEFAULT_TIMEOUT_S 60
/* How much of a command's stdout and of its stderr error_pattern sees, and how much of each an
 * error message carries (messages are at most 1 KiB in all). */
#define OUTPUT_KEEP (64u * 1024)
#define OUTPUT_SHOW 320
/* How long output is still read after the command exited (a leftover child may hold the pipes). */
#define DRAIN_GRACE_S 1.0

static const char *const OP_NAMES[ZEUS__OP_COUNT] = {
    "set_persistence_mode",  "set_power_limit",         "set_gpu_locked_clocks", "reset_gpu_locked_clocks",
    "set_mem_locked_clocks", "reset_mem_locked_clocks", "reset_locked_clocks"};

/* Placeholders each operation may use ({gpu_id} is allowed everywhere). */
static const char *const OP_PLACEHOLDERS[ZEUS__OP_COUNT][3] = {
    {"enabled"}, {"power_limit_mw", "power_limit_w"}, {"min_clock_mhz", "max_clock_mhz"}, {0},
    {"min_clock_mhz", "max_clock_mhz"}, {0}, {0}};

typedef struct spec {
  bool set;
  unsigned ncmd;
  char **argv[MAX_COMMANDS]; /* each NULL-terminated, words malloc'd */
  char *pattern;             /* as written; NULL: none */
  regex_t re;
  unsigned timeout_s;
} spec;

struct zeus__overrides {
  spec ops[ZEUS__OP_COUNT];
};

const char *zeus__gpu_op_name(zeus__gpu_op op) { return op < ZEUS__OP_COUNT ? OP_NAMES[op] : "?"; }

static void spec_free(spec *s) {
  for (unsigned c = 0; c < s->ncmd; c++) {
    for (char **w = s->argv[c]; w && *w; w++) free(*w);
    free(s->argv[c]);
  }
  if (s->pattern) regfree(&s->re);
  free(s->pattern);
  memset(s, 0, sizeof *s);
}

void zeus__overrides_free(zeus__overrides *o) {
  if (!o) return;
  for (int i = 0; i < ZEUS__OP_COUNT; i++) spec_free(&o->ops[i]);
  free(o);
}

bool zeus__overrides_has(const zeus__overrides *o, zeus__gpu_op op) {
  return o && op < ZEUS__OP_COUNT && o->ops[op].set;
}

unsigned zeus__overrides_count(const zeus__overrides *o) {
  unsigned n = 0;
  for (int i = 0; o && i < ZEUS__OP_COUNT; i++) n += o->ops[i].set;
  return n;
}

void zeus__overrides_names(const zeus__overrides *o, char *buf, size_t len) {
  size_t at = 0;
  if (len) buf[0] = '\0';
  for (int i = 0; o && i < ZEUS__OP_COUNT; i++)
    if (o->ops[i].set && at < len) at += (size_t)snprintf(buf + at, len - at, "%s%s", at ? ", " : "", OP_NAMES[i]);
}

/* ---- words: a command split as a POSIX shell splits it, without expansions ---- */

/* Appends one byte to a growing word. */
static int word_put(char **w, size_t *n, size_t *cap, char c) {
  if (*n + 2 > *cap) {
    size_t nc = *cap ? *cap * 2 : 32;
    char *p = realloc(*w, nc);
    if (!p) return -1;
    *w = p;
    *cap = nc;
  }
  (*w)[(*n)++] = c;
  (*w)[*n] = '\0';
  return 0;
}

static void words_free(char **words, unsigned n) {
  for (unsigned i = 0; i < n; i++) free(words[i]);
}

/* Splits `cmd` into words[] (malloc'd each; at most MAX_WORDS). ZEUS_EPARSE with why in `why`. */
static int split_words(const char *cmd, char **words, unsigned *nwords, char *why, size_t whylen) {
  unsigned n = 0;
  const char *p = cmd;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (!*p) break;
    if (*p == '#') break; /* a comment, as in a shell: to the end */
    if (n == MAX_WORDS) {
      snprintf(why, whylen, "it has more than %d words", MAX_WORDS);
      goto fail;
    }
    char *w = NULL;
    size_t wn = 0, cap = 0;
    bool started = false;
    while (*p && !(*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) {
      started = true;
      if (*p == '\'') {
        const char *end = strchr(p + 1, '\'');
        if (!end) {
          free(w);
          snprintf(why, whylen, "a single quote is not closed");
          goto fail;
        }
        for (const char *c = p + 1; c < end; c++)
          if (word_put(&w, &wn, &cap, *c)) goto oom;
        if (!w && word_put(&w, &wn, &cap, 'x') == 0) w[wn = 0] = '\0'; /* '' is an empty word */
        p = end + 1;
      } else if (*p == '"') {
        p++;
        if (!w && word_put(&w, &wn, &cap, 'x') == 0) w[wn = 0] = '\0';
        if (!w) goto oom;
        while (*p && *p != '"') {
          if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$' || p[1] == '`')) p++;
          else if (*p == '\\' && p[1] == '\n') {
            p += 2;
            continue;
          }
          if (word_put(&w, &wn, &cap, *p++)) goto oom;
        }
        if (*p != '"') {
          free(w);
          snprintf(why, whylen, "a double quote is not closed");
          goto fail;
        }
        p++;
      } else if (*p == '\\') {
        if (!p[1]) {
          free(w);
          snprintf(why, whylen, "it ends with a backslash");
          goto fail;
        }
        if (p[1] != '\n' && word_put(&w, &wn, &cap, p[1])) goto oom;
        p += 2;
      } else if (word_put(&w, &wn, &cap, *p++)) {
        goto oom;
      }
      continue;
    oom:
      free(w);
      words_free(words, n);
      return zeus__oom("splitting a command override");
    }
    if (started) {
      if (!w && !(w = calloc(1, 1))) {
        words_free(words, n);
        return zeus__oom("splitting a command override");
      }
      words[n++] = w;
    }
  }
  *nwords = n;
  return ZEUS_OK;
fail:
  words_free(words, n);
  return ZEUS_EPARSE;
}

/* Checks every {name} of one word against the operation's placeholders. */
static int check_placeholders(zeus__gpu_op op, const char *word, const char *what) {
  for (const char *p = word; *p; p++) {
    if (*p == '}')
      return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has an invalid placeholder in word '%s' (a '}' without '{')",
                         what, OP_NAMES[op], word);
    if (*p != '{') continue;
    const char *end = p + 1;
    while (*end && *end != '{' && *end != '}') end++;
    if (*end != '}' || end == p + 1)
      return zeus__error(ZEUS_EPARSE,
                         "%s: operation '%s' has an invalid placeholder in word '%s' (expected {name} with no braces "
                         "inside)",
                         what, OP_NAMES[op], word);
    size_t len = (size_t)(end - p - 1);
    bool ok = len == 6 && strncmp(p + 1, "gpu_id", 6) == 0;
    for (int i = 0; !ok && i < 3 && OP_PLACEHOLDERS[op][i]; i++)
      ok = strlen(OP_PLACEHOLDERS[op][i]) == len && strncmp(p + 1, OP_PLACEHOLDERS[op][i], len) == 0;
    if (!ok) {
      char allowed[128] = "{gpu_id}";
      for (int i = 0; i < 3 && OP_PLACEHOLDERS[op][i]; i++)
        snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), ", {%s}", OP_PLACEHOLDERS[op][i]);
      return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has an unknown placeholder '{%.*s}' in word '%s' (it takes %s)",
                         what, OP_NAMES[op], (int)len, p + 1, word, allowed);
    }
    p = end;
  }
  return ZEUS_OK;
}

/* ---- the TOML subset ---- */

typedef struct toml {
  const char *p, *end;
  unsigned line;
  const char *what; /* "GPU command override file 'PATH'" */
} toml;

static int terr(const toml *t, const char *fmt, const char *arg) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, arg ? arg : "");
  return zeus__error(ZEUS_EPARSE, "%s, line %u: %s", t->what, t->line, msg);
}

/* Skips spaces and tabs, and a comment to the end of its line. */
static void skip_blank(toml *t) {
  while (t->p < t->end && (*t->p == ' ' || *t->p == '\t')) t->p++;
  if (t->p < t->end && *t->p == '#')
    while (t->p < t->end && *t->p != '\n') t->p++;
}

/* Skips blanks, comments and line ends (inside arrays, between statements). */
static void skip_space(toml *t) {
  for (;;) {
    skip_blank(t);
    if (t->p < t->end && *t->p == '\r' && t->p + 1 < t->end && t->p[1] == '\n') t->p++;
    if (t->p < t->end && *t->p == '\n') {
      t->p++;
      t->line++;
      continue;
    }
    return;
  }
}

/* The rest of the line must be blank or a comment. */
static int end_of_line(toml *t) {
  skip_blank(t);
  if (t->p < t->end && *t->p == '\r') t->p++;
  if (t->p < t->end && *t->p != '\n') return terr(t, "unexpected text after a value (expected the end of the line)", NULL);
  return ZEUS_OK;
}

static bool bare_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

static int put_utf8(char **s, size_t *n, size_t *cap, unsigned long cp) {
  char b[4];
  int k;
  if (cp < 0x80) b[0] = (char)cp, k = 1;
  else if (cp < 0x800) b[0] = (char)(0xC0 | (cp >> 6)), b[1] = (char)(0x80 | (cp & 0x3F)), k = 2;
  else if (cp < 0x10000)
    b[0] = (char)(0xE0 | (cp >> 12)), b[1] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[2] = (char)(0x80 | (cp & 0x3F)), k = 3;
  else
    b[0] = (char)(0xF0 | (cp >> 18)), b[1] = (char)(0x80 | ((cp >> 12) & 0x3F)),
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (char)(0x80 | (cp & 0x3F)), k = 4;
  for (int i = 0; i < k; i++)
    if (word_put(s, n, cap, b[i])) return -1;
  return 0;
}

/* A basic ("...") or literal ('...') string on one line. *out is malloc'd. */
static int parse_string(toml *t, char **out) {
  char q = *t->p;
  if (t->p + 2 < t->end && t->p[1] == q && t->p[2] == q) return terr(t, "multi-line strings are not supported", NULL);
  t->p++;
  char *s = calloc(1, 1);
  size_t n = 0, cap = 1;
  if (!s) return zeus__oom("reading a command override file");
  while (t->p < t->end && *t->p != q) {
    unsigned char c = (unsigned char)*t->p;
    if (c == '\n' || (c < 0x20 && c != '\t') || c == 0x7F) {
      free(s);
      return terr(t, c == '\n' ? "a string is not closed on its line" : "a control character inside a string", NULL);
    }
    if (q == '"' && c == '\\') {
      char e = t->p + 1 < t->end ? t->p[1] : '\0';
      const char *map = "b\bt\tn\nf\fr\r\"\"\\\\";
      const char *m = strchr(map, e);
      if (e && m && (m - map) % 2 == 0) {
        if (word_put(&s, &n, &cap, m[1])) goto oom;
        t->p += 2;
        continue;
      }
      if (e == 'u' || e == 'U') {
        int digits = e == 'u' ? 4 : 8;
        unsigned long cp = 0;
        for (int i = 0; i < digits; i++) {
          char h = t->p + 2 + i < t->end ? t->p[2 + i] : '\0';
          int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
          if (v < 0) {
            free(s);
            return terr(t, "a \\u escape needs hexadecimal digits", NULL);
          }
          cp = cp * 16 + (unsigned long)v;
        }
        if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
          free(s);
          return terr(t, "a \\u escape names no usable Unicode scalar value (NUL is refused too)", NULL);
        }
        if (put_utf8(&s, &n, &cap, cp)) goto oom;
        t->p += 2 + digits;
        continue;
      }
      free(s);
      return terr(t, "an unknown escape in a string (expected \\b \\t \\n \\f \\r \\\" \\\\ \\uXXXX \\UXXXXXXXX)", NULL);
    }
    if (word_put(&s, &n, &cap, (char)c)) goto oom;
    t->p++;
  }
  if (t->p >= t->end) {
    free(s);
    return terr(t, "a string is not closed", NULL);
  }
  t->p++;
  *out = s;
  return ZEUS_OK;
oom:
  free(s);
  return zeus__oom("reading a command override file");
}

/* A key: bare (A-Za-z0-9_-) or quoted. Written to buf. */
static int parse_key(toml *t, char *buf, size_t len) {
  if (*t->p == '"' || *t->p == '\'') {
    char *s;
    int rc = parse_string(t, &s);
    if (rc) return rc;
    snprintf(buf, len, "%s", s);
    free(s);
    return ZEUS_OK;
  }
  size_t n = 0;
  while (t->p < t->end && bare_char(*t->p)) {
    if (n + 1 < len) buf[n++] = *t->p;
    t->p++;
  }
  buf[n] = '\0';
  if (!n) return terr(t, "expected a key (letters, digits, '_' or '-') or a [table]", NULL);
  skip_blank(t);
  if (t->p < t->end && *t->p == '.') return terr(t, "dotted keys are not part of this file's format ('%s.')", buf);
  return ZEUS_OK;
}

static int parse_integer(toml *t, long long *out) {
  const char *s = t->p;
  bool neg = false;
  if (*t->p == '+' || *t->p == '-') neg = *t->p++ == '-';
  long long v = 0;
  bool digit = false, prev_digit = false;
  while (t->p < t->end && ((*t->p >= '0' && *t->p <= '9') || (*t->p == '_' && prev_digit))) {
    if (*t->p != '_') {
      if (v > (LLONG_MAX - 9) / 10) return terr(t, "an integer out of range", NULL);
      v = v * 10 + (*t->p - '0');
      digit = prev_digit = true;
    } else {
      prev_digit = false;
    }
    t->p++;
  }
  if (!digit || !prev_digit || (t->p < t->end && (bare_char(*t->p) || *t->p == '.'))) {
    t->p = s;
    return terr(t, "expected a decimal integer", NULL);
  }
  *out = neg ? -v : v;
  return ZEUS_OK;
}

/* [ "a", 'b', ... ] over any number of lines. */
static int parse_string_array(toml *t, char ***out, unsigned *count) {
  t->p++; /* [ */
  char **v = NULL;
  unsigned n = 0;
  int rc = ZEUS_OK;
  for (;;) {
    skip_space(t);
    if (t->p >= t->end) {
      rc = terr(t, "an array is not closed (expected ']')", NULL);
      break;
    }
    if (*t->p == ']') {
      t->p++;
      break;
    }
    if (*t->p != '"' && *t->p != '\'') {
      rc = terr(t, "expected a string in the array", NULL);
      break;
    }
    if (n == MAX_COMMANDS) {
      char lim[16];
      snprintf(lim, sizeof lim, "%d", MAX_COMMANDS);
      rc = terr(t, "more than %s commands for one operation", lim);
      break;
    }
    char **nv = realloc(v, (n + 1) * sizeof *v);
    if (!nv) {
      rc = zeus__oom("reading a command override file");
      break;
    }
    v = nv;
    if ((rc = parse_string(t, &v[n]))) break;
    n++;
    skip_space(t);
    if (t->p >= t->end) continue; /* "not closed" at the top */
    if (*t->p == ',') {
      t->p++;
      continue;
    }
    if (*t->p == ']') continue;
    rc = terr(t, "expected ',' or ']' after a string in the array", NULL);
    break;
  }
  if (rc) {
    for (unsigned i = 0; i < n; i++) free(v[i]);
    free(v);
    return rc;
  }
  *out = v;
  *count = n;
  return ZEUS_OK;
}

static int compile_pattern(spec *s, zeus__gpu_op op, const char *pattern, const char *what) {
  const char *body = pattern;
  int flags = REG_EXTENDED | REG_NOSUB;
  if (strncmp(body, "(?i)", 4) == 0) {
    flags |= REG_ICASE;
    body += 4;
  }
  if (strstr(body, "(?"))
    return zeus__error(ZEUS_EPARSE,
                       "%s: operation '%s' has error_pattern '%s', which uses an inline flag POSIX extended regular "
                       "expressions lack (only a leading (?i) is understood)",
                       what, OP_NAMES[op], pattern);
  int rc = regcomp(&s->re, body, flags);
  if (rc) {
    char msg[128];
    regerror(rc, &s->re, msg, sizeof msg);
    return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has an invalid error_pattern '%s': %s", what, OP_NAMES[op],
                       pattern, msg);
  }
  if (!(s->pattern = strdup(pattern))) {
    regfree(&s->re);
    return zeus__oom("reading a command override file");
  }
  return ZEUS_OK;
}

/* Turns one table's raw values into a checked spec. */
static int finish_spec(spec *s, zeus__gpu_op op, char **cmds, unsigned ncmds, bool have_cmds, const char *pattern,
                       long long timeout, bool have_timeout, const char *what) {
  if (!have_cmds)
    return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has no 'commands' (expected commands = [\"...\"])", what,
                       OP_NAMES[op]);
  if (!ncmds) return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has an empty commands array", what, OP_NAMES[op]);
  if (have_timeout && timeout <= 0)
    return zeus__error(ZEUS_EPARSE,
                       "%s: operation '%s' has timeout_s = %lld, which would kill every command at once (expected "
                       "seconds > 0)",
                       what, OP_NAMES[op], timeout);
  if (have_timeout && timeout > 86400)
    return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has timeout_s = %lld (expected at most 86400 s)", what,
                       OP_NAMES[op], timeout);
  s->timeout_s = have_timeout ? (unsigned)timeout : DEFAULT_TIMEOUT_S;
  for (unsigned c = 0; c < ncmds; c++) {
    char *words[MAX_WORDS];
    unsigned nw = 0;
    char why[96];
    int rc = split_words(cmds[c], words, &nw, why, sizeof why);
    if (rc == ZEUS_EPARSE)
      return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has a command that cannot be split (%s): %s", what,
                         OP_NAMES[op], why, cmds[c]);
    if (rc) return rc;
    if (!nw)
      return zeus__error(ZEUS_EPARSE, "%s: operation '%s' has a command that splits to zero words: '%s'", what,
                         OP_NAMES[op], cmds[c]);
    for (unsigned w = 0; w < nw; w++)
      if ((rc = check_placeholders(op, words[w], what))) {
        words_free(words, nw);
        return rc;
      }
    char **argv = calloc(nw + 1, sizeof *argv);
    if (!argv) {
      words_free(words, nw);
      return zeus__oom("reading a command override file");
    }
    memcpy(argv, words, nw * sizeof *argv);
    s->argv[s->ncmd++] = argv;
  }
  if (pattern) {
    int rc = compile_pattern(s, op, pattern, what);
    if (rc) return rc;
  }
  s->set = true;
  return ZEUS_OK;
}

/* One table's raw values while it is read. */
typedef struct raw_table {
  int op; /* -1: none yet */
  char **cmds;
  unsigned ncmds;
  bool have_cmds, have_pattern, have_timeout;
  char *pattern;
  long long timeout;
} raw_table;

static void raw_clear(raw_table *r) {
  for (unsigned i = 0; i < r->ncmds; i++) free(r->cmds[i]);
  free(r->cmds);
  free(r->pattern);
  memset(r, 0, sizeof *r);
  r->op = -1;
}

static int raw_flush(zeus__overrides *o, raw_table *r, const char *what) {
  if (r->op < 0) return ZEUS_OK;
  int rc = finish_spec(&o->ops[r->op], (zeus__gpu_op)r->op, r->cmds, r->ncmds, r->have_cmds, r->pattern, r->timeout,
                       r->have_timeout, what);
  raw_clear(r);
  return rc;
}

int zeus__overrides_parse(const char *text, size_t len, const char *what, zeus__overrides **out) {
  *out = NULL;
  zeus__overrides *o = calloc(1, sizeof *o);
  if (!o) return zeus__oom("reading a command override file");
  toml t = {text, text + len, 1, what};
  raw_table r = {.op = -1};
  int rc = ZEUS_OK;
  if (memchr(text, '\0', len)) rc = zeus__error(ZEUS_EPARSE, "%s: a NUL byte (expected UTF-8 text)", what);
  while (!rc) {
    skip_space(&t);
    if (t.p >= t.end) break;
    if (*t.p == '[') {
      if (t.p + 1 < t.end && t.p[1] == '[') {
        rc = terr(&t, "arrays of tables ([[...]]) are not part of this file's format", NULL);
        break;
      }
      t.p++;
      skip_blank(&t);
      char name[64];
      if ((rc = parse_key(&t, name, sizeof name))) break;
      skip_blank(&t);
      if (t.p >= t.end || *t.p != ']') {
        rc = terr(&t, "a table header is not closed (expected ']')", NULL);
        break;
      }
      t.p++;
      if ((rc = end_of_line(&t)) || (rc = raw_flush(o, &r, what))) break;
      int op = -1;
      for (int i = 0; i < ZEUS__OP_COUNT; i++)
        if (strcmp(name, OP_NAMES[i]) == 0) op = i;
      if (op < 0) {
        rc = zeus__error(ZEUS_EPARSE,
                         "%s, line %u: unknown operation '%s' (expected set_persistence_mode, set_power_limit, "
                         "set_gpu_locked_clocks, reset_gpu_locked_clocks, set_mem_locked_clocks, "
                         "reset_mem_locked_clocks or reset_locked_clocks)",
                         what, t.line, name);
        break;
      }
      if (o->ops[op].set) {
        rc = terr(&t, "operation '%s' is given twice", name);
        break;
      }
      r.op = op;
      continue;
    }
    char key[64];
    if ((rc = parse_key(&t, key, sizeof key))) break;
    skip_blank(&t);
    if (t.p >= t.end || *t.p != '=') {
      rc = terr(&t, "expected '=' after the key '%s'", key);
      break;
    }
    t.p++;
    skip_blank(&t);
    if (r.op < 0) {
      rc = terr(&t, "the key '%s' comes before any [operation] table", key);
      break;
    }
    if (t.p >= t.end) {
      rc = terr(&t, "the key '%s' has no value", key);
      break;
    }
    if (strcmp(key, "commands") == 0) {
      if (r.have_cmds) rc = terr(&t, "the key '%s' is given twice", key);
      else if (*t.p != '[') rc = terr(&t, "'commands' must be an array of strings", NULL);
      else if (!(rc = parse_string_array(&t, &r.cmds, &r.ncmds))) r.have_cmds = true;
    } else if (strcmp(key, "error_pattern") == 0) {
      if (r.have_pattern) rc = terr(&t, "the key '%s' is given twice", key);
      else if (*t.p != '"' && *t.p != '\'') rc = terr(&t, "'error_pattern' must be a string", NULL);
      else if (!(rc = parse_string(&t, &r.pattern))) r.have_pattern = true;
    } else if (strcmp(key, "timeout_s") == 0) {
      if (r.have_timeout) rc = terr(&t, "the key '%s' is given twice", key);
      else if (!(rc = parse_integer(&t, &r.timeout))) r.have_timeout = true;
    } else {
      char msg[160];
      snprintf(msg, sizeof msg, "%s", OP_NAMES[r.op]);
      rc = zeus__error(ZEUS_EPARSE,
                       "%s, line %u: operation '%s' has an unknown field '%s' (expected commands, error_pattern, "
                       "timeout_s)",
                       what, t.line, msg, key);
    }
    if (!rc) rc = end_of_line(&t);
  }
  if (!rc) rc = raw_flush(o, &r, what);
  raw_clear(&r);
  if (rc) {
    zeus__overrides_free(o);
    return rc;
  }
  *out = o;
  return ZEUS_OK;
}

int zeus__overrides_load(const char *path, zeus__overrides **out) {
  *out = NULL;
  char what[PATH_MAX + 64];
  snprintf(what, sizeof what, "GPU command override file '%s'", path);
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return zeus__error(errno == ENOENT ? ZEUS_ENOENT : errno == ELOOP ? ZEUS_EPERM : ZEUS_EIO, "%s: %s", what,
                       errno == ELOOP ? "a symbolic link (name the file itself: the daemon executes what it says)"
                                      : strerror(errno));
  struct stat st;
  int rc = ZEUS_OK;
  if (fstat(fd, &st) != 0) rc = zeus__error(ZEUS_EIO, "%s: %s", what, strerror(errno));
  else if (!S_ISREG(st.st_mode)) rc = zeus__error(ZEUS_EINVAL, "%s: not a regular file", what);
  else if (st.st_uid != 0 && st.st_uid != geteuid())
    rc = zeus__error(ZEUS_EPERM,
                     "%s is owned by uid %u; it must be owned by root or by the user running the daemon (uid %u), "
                     "because the daemon executes the commands it names",
                     what, (unsigned)st.st_uid, (unsigned)geteuid());
  else if (st.st_mode & S_IWOTH)
    rc = zeus__error(ZEUS_EPERM,
                     "%s is world-writable (mode %03o); tighten it (chmod 644), because the daemon executes the "
                     "commands it names",
                     what, (unsigned)(st.st_mode & 0777));
  else if (st.st_size > (off_t)MAX_FILE_BYTES)
    rc = zeus__error(ZEUS_EINVAL, "%s is %lld bytes (expected at most %u)", what, (long long)st.st_size,
                     MAX_FILE_BYTES);
  char *text = NULL;
  size_t n = 0;
  if (!rc && !(text = malloc((size_t)st.st_size + 1))) rc = zeus__oom("reading a command override file");
  while (!rc && n < (size_t)st.st_size) {
    ssize_t got = read(fd, text + n, (size_t)st.st_size - n);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) rc = zeus__error(ZEUS_EIO, "%s: %s", what, strerror(errno));
    if (got <= 0) break;
    n += (size_t)got;
  }
  close(fd);
  if (!rc && (st.st_mode & S_IWGRP))
    zeus__log(ZEUS_LOG_WARN, "daemon",
              "%s is group-writable (mode %03o): anyone in its group can change what the daemon executes", what,
              (unsigned)(st.st_mode & 0777));
  if (!rc) rc = zeus__overrides_parse(text, n, what, out);
  free(text);
  return rc;
}

/* ---- running an operation ---- */

/* `word` with its placeholders replaced; malloc'd. */
static char *substitute(const char *word, const zeus__override_values *v) {
  char *s = NULL;
  size_t n = 0, cap = 0;
  if (word_put(&s, &n, &cap, 'x')) return NULL;
  n = 0;
  s[0] = '\0';
  for (const char *p = word; *p;) {
    char val[24] = "";
    const char *end = *p == '{' ? strchr(p, '}') : NULL;
    if (end) {
      size_t len = (size_t)(end - p - 1);
#define IS(name) (len == sizeof name - 1 && strncmp(p + 1, name, len) == 0)
      if (IS("gpu_id")) snprintf(val, sizeof val, "%u", v->gpu);
      else if (IS("enabled")) snprintf(val, sizeof val, "%d", v->enabled ? 1 : 0);
      else if (IS("power_limit_mw")) snprintf(val, sizeof val, "%u", v->power_limit_mw);
      else if (IS("power_limit_w")) snprintf(val, sizeof val, "%u", v->power_limit_mw / 1000);
      else if (IS("min_clock_mhz")) snprintf(val, sizeof val, "%u", v->min_clock_mhz);
      else if (IS("max_clock_mhz")) snprintf(val, sizeof val, "%u", v->max_clock_mhz);
#undef IS
      for (const char *c = val; *c; c++)
        if (word_put(&s, &n, &cap, *c)) goto oom;
      p = end + 1;
      continue;
    }
    if (word_put(&s, &n, &cap, *p++)) goto oom;
  }
  return s;
oom:
  free(s);
  return NULL;
}

/* The words joined for messages, each quoted where a shell would need it. */
static void join_words(char *const *argv, char *buf, size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  for (unsigned i = 0; argv[i] && at + 1 < len; i++) {
    bool plain = argv[i][0] != '\0' && strspn(argv[i], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                       "0123456789_-+=/.,:@%") == strlen(argv[i]);
    at += (size_t)snprintf(buf + at, len - at, plain ? "%s%s" : "%s'%s'", i ? " " : "", argv[i]);
  }
  if (at >= len && len > 4) memcpy(buf + len - 4, "...", 4);
}

/* The executable for argv[0]: as given when it has a '/', else the first match on PATH (resolved
 * here, before fork, so the child only calls execv). */
static int resolve_exe(const char *name, char *out, size_t len) {
  if (strchr(name, '/')) {
    snprintf(out, len, "%s", name);
    return 0;
  }
  const char *path = getenv("PATH");
  if (!path || !*path) path = "/usr/local/bin:/usr/bin:/bin";
  while (*path) {
    const char *colon = strchr(path, ':');
    size_t dl = colon ? (size_t)(colon - path) : strlen(path);
    snprintf(out, len, "%.*s%s%s", (int)dl, dl ? path : ".", "/", name);
    if (access(out, X_OK) == 0) return 0;
    path += dl + (colon ? 1 : 0);
    if (!colon) break;
  }
  return ENOENT;
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct capture {
  char *keep; /* OUTPUT_KEEP + 1 bytes; NULs read are kept as spaces */
  size_t kept;
  unsigned long long total;
} capture;

static void capture_add(capture *c, const char *p, size_t n) {
  c->total += n;
  size_t room = OUTPUT_KEEP - c->kept;
  if (n > room) n = room;
  for (size_t i = 0; i < n; i++) c->keep[c->kept + i] = p[i] ? p[i] : ' ';
  c->kept += n;
  c->keep[c->kept] = '\0';
}

/* At most OUTPUT_SHOW bytes of the output for a message, trailing line ends dropped, the rest
 * counted. */
static const char *capture_text(const capture *c, char *buf, size_t len) {
  size_t k = c->kept;
  while (k && (c->keep[k - 1] == '\n' || c->keep[k - 1] == '\r')) k--;
  size_t show = k < OUTPUT_SHOW ? k : OUTPUT_SHOW;
  if (c->total > show && k > show)
    snprintf(buf, len, "%.*s [... %llu more bytes]", (int)show, c->keep, c->total - show);
  else
    snprintf(buf, len, "%.*s", (int)show, c->keep);
  return buf;
}

/* In the child: only async-signal-safe calls until execv. */
static void child_exec(const char *exe, char *const *argv, int out_w, int err_w, int status_w, pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* child processes die with the daemon */
  if (getppid() != parent) _exit(127);
  dup2(out_w, STDOUT_FILENO);
  dup2(err_w, STDERR_FILENO);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  for (int s = 1; s < NSIG; s++) sigaction(s, &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execv(exe, argv);
  int e = errno;
  ssize_t w = write(status_w, &e, sizeof e);
  (void)w;
  _exit(127);
}

/* Runs one command to its end or its timeout. ZEUS_OK, or an error saying what happened with its
 * output. */
static int run_command(const spec *s, char *const *argv, const char *opname, unsigned gpu) {
  char line[512];
  join_words(argv, line, sizeof line);
  char exe[PATH_MAX];
  if (resolve_exe(argv[0], exe, sizeof exe))
    return zeus__error(ZEUS_EDEVICE, "GPU %u: %s override: command '%s' could not be spawned: '%s' is not on PATH", gpu,
                       opname, line, argv[0]);
  int out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC) || pipe2(status, O_CLOEXEC)) {
    int e = errno;
    for (int i = 0; i < 2; i++) {
      if (out[i] >= 0) close(out[i]);
      if (err[i] >= 0) close(err[i]);
      if (status[i] >= 0) close(status[i]);
    }
    return zeus__error(ZEUS_EIO, "GPU %u: %s override: pipe: %s", gpu, opname, strerror(e));
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) child_exec(exe, argv, out[1], err[1], status[1], parent);
  close(out[1]);
  close(err[1]);
  close(status[1]);
  if (pid < 0) {
    int e = errno;
    close(out[0]);
    close(err[0]);
    close(status[0]);
    return zeus__error(ZEUS_EIO, "GPU %u: %s override: command '%s' could not be spawned: fork: %s", gpu, opname, line,
                       strerror(e));
  }
  setpgid(pid, pid); /* both sides, whichever runs first */
  int exec_errno = 0;
  ssize_t got;
  while ((got = read(status[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
  close(status[0]);
  if (got != (ssize_t)sizeof exec_errno) exec_errno = 0;

  capture cap[2] = {{malloc(OUTPUT_KEEP + 1), 0, 0}, {malloc(OUTPUT_KEEP + 1), 0, 0}};
  char *both = malloc(2 * OUTPUT_KEEP + 2);
  if (!cap[0].keep || !cap[1].keep || !both) {
    free(cap[0].keep);
    free(cap[1].keep);
    free(both);
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    close(out[0]);
    close(err[0]);
    return zeus__oom("running a command override");
  }
  cap[0].keep[0] = cap[1].keep[0] = '\0';
  struct pollfd pf[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  bool open_fd[2] = {true, true}, exited = false, timed_out = false, drained_late = false;
  int wstatus = 0;
  double start = mono_now(), exited_at = 0;
  while (open_fd[0] || open_fd[1] || !exited) {
    if (!exited) {
      pid_t w = waitpid(pid, &wstatus, WNOHANG);
      if (w == pid) exited = true, exited_at = mono_now();
    }
    double now = mono_now();
    if (!exited && now - start >= s->timeout_s) {
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {}
      exited = timed_out = true;
      exited_at = mono_now();
    }
    if (exited && now - exited_at >= DRAIN_GRACE_S && (open_fd[0] || open_fd[1])) {
      drained_late = true; /* a leftover of the command holds the pipes: stop reading */
      break;
    }
    if (!open_fd[0] && !open_fd[1]) {
      if (!exited) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
      }
      continue;
    }
    int r = poll(pf, 2, 10);
    if (r < 0 && errno != EINTR) break;
    for (int i = 0; r > 0 && i < 2; i++) {
      if (!open_fd[i] || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t k = read(pf[i].fd, buf, sizeof buf);
      if (k > 0) capture_add(&cap[i], buf, (size_t)k);
      else if (k == 0 || errno != EINTR) open_fd[i] = false, pf[i].fd = -1;
    }
  }
  kill(-pid, SIGKILL); /* nothing of the command's process group outlives it */
  close(out[0]);
  close(err[0]);
  char why[160] = "";
  if (exec_errno) snprintf(why, sizeof why, "could not be spawned: %s", strerror(exec_errno));
  else if (timed_out) snprintf(why, sizeof why, "timed out after %u s and was killed", s->timeout_s);
  else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0) snprintf(why, sizeof why, "exited with code %d", WEXITSTATUS(wstatus));
  else if (WIFSIGNALED(wstatus)) snprintf(why, sizeof why, "was killed by signal %d", WTERMSIG(wstatus));
  else if (s->pattern) {
    if (drained_late) {
      snprintf(why, sizeof why,
               "succeeded, but its output was still open %.0f s after it ended (held by a leftover child), so "
               "error_pattern could not be checked",
               DRAIN_GRACE_S);
    } else {
      snprintf(both, 2 * OUTPUT_KEEP + 2, "%s\n%s", cap[0].keep, cap[1].keep);
      if (regexec(&s->re, both, 0, NULL, 0) == 0)
        snprintf(why, sizeof why, "succeeded but its output matched error_pattern '%.100s'", s->pattern);
    }
  }
  free(both);
  int rc = ZEUS_OK;
  if (!why[0]) {
    zeus__log(ZEUS_LOG_INFO, "daemon", "GPU %u: %s override: '%s' succeeded", gpu, opname, line);
  } else {
    char o[OUTPUT_SHOW + 64], e[OUTPUT_SHOW + 64];
    zeus__log(ZEUS_LOG_WARN, "daemon", "GPU %u: %s override: '%s' %s", gpu, opname, line, why);
    rc = zeus__error(timed_out ? ZEUS_ETIMEDOUT : ZEUS_EDEVICE, "GPU %u: %s override: command '%s' %s; stdout: %s; stderr: %s",
                     gpu, opname, line, why, capture_text(&cap[0], o, sizeof o), capture_text(&cap[1], e, sizeof e));
  }
  free(cap[0].keep);
  free(cap[1].keep);
  return rc;
}

int zeus__overrides_run(const zeus__overrides *o, zeus__gpu_op op, const zeus__override_values *v) {
  if (!zeus__overrides_has(o, op)) return ZEUS_ENOENT;
  const spec *s = &o->ops[op];
  for (unsigned c = 0; c < s->ncmd; c++) {
    unsigned nw = 0;
    while (s->argv[c][nw]) nw++;
    char **argv = calloc(nw + 1, sizeof *argv);
    int rc = argv ? ZEUS_OK : zeus__oom("running a command override");
    for (unsigned w = 0; !rc && w < nw; w++)
      if (!(argv[w] = substitute(s->argv[c][w], v))) rc = zeus__oom("running a command override");
    if (!rc) rc = run_command(s, argv, OP_NAMES[op], v->gpu);
    for (unsigned w = 0; argv && w < nw; w++) free(argv[w]);
    free(argv);
    if (rc) return rc; /* later commands do not run; earlier ones are not rolled back */
  }
  return ZEUS_OK;
}
