/* The table-driven option parser of the zeus CLI (see opt.h). Written for our tables rather
 * than over getopt_long: getopt_long accepts any unambiguous abbreviation (so adding an option
 * can break a user's script), permutes argv behind the caller's back, and cannot say "did you
 * mean". */
#include "opt.h"

#include <errno.h>
#include <stdint.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define HELP_COLUMN 26 /* where option help starts, after two spaces of indent */
#define HELP_WIDTH 100 /* no line of generated help is longer */

static void perr(const cli_command *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void perr(const cli_command *c, const char *fmt, ...) {
  va_list ap;
  if (c->program) fprintf(stderr, "%s: ", c->program);
  else fprintf(stderr, "zeus %s: ", c->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

int cli_edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n > 64 || m > 64) return 99;
  int row[65];
  for (size_t j = 0; j <= m; j++) row[j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= m; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[m];
}

/* The option nearest to a misspelled `name` (length `len`), or NULL when none is near: a unique
 * option it is a prefix of, else the closest by edit distance within a third of its length. */
static const cli_opt *nearest(const cli_command *c, const char *name, size_t len) {
  char buf[65];
  if (len >= sizeof buf) return NULL;
  memcpy(buf, name, len);
  buf[len] = '\0';
  const cli_opt *prefix = NULL, *best = NULL;
  int nprefix = 0, best_d = 99;
  for (const cli_opt *o = c->opts; o && o->name; o++) {
    if (len > 0 && strncmp(o->name, buf, len) == 0) {
      prefix = o;
      nprefix++;
    }
    int d = cli_edit_distance(buf, o->name);
    if (d < best_d) {
      best_d = d;
      best = o;
    }
  }
  if (nprefix == 1) return prefix;
  int limit = (int)len / 3 > 2 ? (int)len / 3 : 2;
  if (strcmp(buf, "help") != 0 && best_d <= limit) return best;
  return NULL;
}

/* The choices as "a|b|c". */
static const char *choice_list(const cli_opt *o, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = '\0';
  for (const char *const *ch = o->choices; ch && *ch; ch++) {
    int k = snprintf(buf + len, n - len, "%s%s", ch == o->choices ? "" : "|", *ch);
    if (k < 0 || (size_t)k >= n - len) break;
    len += (size_t)k;
  }
  return buf;
}

static const char *metavar(const cli_opt *o, char *buf, size_t n) {
  if (o->metavar) return o->metavar;
  if (o->kind != CLI_OPT_CHOICE || !o->choices) return "VALUE";
  return choice_list(o, buf, n);
}

static bool range_given(const cli_opt *o) { return o->min != 0 || o->max != 0; }

static bool store_integer(const cli_command *c, const cli_opt *o, const char *v) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  bool is_int = o->kind == CLI_OPT_INT;
  double lo = range_given(o) ? o->min : is_int ? (double)INT32_MIN : -9.2e18;
  double hi = range_given(o) ? o->max : is_int ? (double)INT32_MAX : 9.2e18;
  if (end == v || *end || strchr(v, ' ')) {
    perr(c, "--%s: expected an integer, got '%s'", o->name, v);
    return false;
  }
  if (errno == ERANGE || (double)x < lo || (double)x > hi) {
    perr(c, "--%s: %s is outside [%.0f, %.0f]", o->name, v, lo, hi);
    return false;
  }
  if (is_int) *(int *)o->dest = (int)x;
  else *(long *)o->dest = (long)x;
  return true;
}

static bool store_double(const cli_command *c, const cli_opt *o, const char *v) {
  char *end;
  errno = 0;
  double x = strtod(v, &end);
  if (end == v || *end || !isfinite(x)) {
    perr(c, "--%s: expected a number, got '%s'", o->name, v);
    return false;
  }
  if (errno == ERANGE || (range_given(o) && (x < o->min || x > o->max))) {
    if (range_given(o)) perr(c, "--%s: %s is outside [%g, %g]", o->name, v, o->min, o->max);
    else perr(c, "--%s: %s is out of range", o->name, v);
    return false;
  }
  *(double *)o->dest = x;
  return true;
}

static bool store_choice(const cli_command *c, const cli_opt *o, const char *v) {
  int n = 0;
  for (const char *const *ch = o->choices; ch && *ch; ch++, n++) {
    if (strcasecmp(*ch, v) == 0) {
      *(int *)o->dest = n;
      return true;
    }
  }
  char list[256];
  perr(c, "--%s: expected one of %s, got '%s'", o->name, choice_list(o, list, sizeof list), v);
  return false;
}

static bool store(const cli_command *c, const cli_opt *o, const char *v) {
  char optname[80];
  switch (o->kind) {
    case CLI_OPT_FLAG:
      *(bool *)o->dest = true;
      return true;
    case CLI_OPT_STRING:
      *(const char **)o->dest = v;
      return true;
    case CLI_OPT_INT:
    case CLI_OPT_LONG:
      return store_integer(c, o, v);
    case CLI_OPT_DOUBLE:
      return store_double(c, o, v);
    case CLI_OPT_CHOICE:
      return store_choice(c, o, v);
    case CLI_OPT_CUSTOM:
      snprintf(optname, sizeof optname, "--%s", o->name);
      return o->parse(c->name, optname, v, o->dest);
  }
  return false;
}

static int usage_error(const cli_command *c) {
  if (c->program) fprintf(stderr, "(see '%s --help')\n", c->program);
  else fprintf(stderr, "(see 'zeus %s --help')\n", c->name);
  return 2;
}

int cli_parse(const cli_command *c, int argc, char **argv, char ***rest_argv, int *rest_argc) {
  size_t nopts = 0;
  while (c->opts && c->opts[nopts].name) nopts++;
  bool given[128] = {false};
  if (nopts > sizeof given / sizeof given[0]) nopts = sizeof given / sizeof given[0];
  int w = 1; /* CLI_ARGS_ANY: where the next operand is moved to */
  char **rest = NULL;
  int nrest = 0;
  for (int i = 1; i < argc; i++) {
    char *a = argv[i];
    const cli_opt *o = NULL;
    const char *value = NULL;
    bool inline_value = false;
    if (strcmp(a, "--") == 0) {
      if (c->args == CLI_ARGS_COMMAND) {
        rest = argv + i + 1;
        nrest = argc - i - 1;
      } else if (c->args == CLI_ARGS_ANY) {
        for (int k = i + 1; k < argc; k++) argv[w++] = argv[k];
      } else if (i + 1 < argc) {
        perr(c, "unexpected argument '%s'", argv[i + 1]);
        return usage_error(c);
      }
      break;
    }
    if (a[0] == '-' && a[1] == '-') {
      const char *name = a + 2, *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      if (len == 4 && strncmp(name, "help", 4) == 0 && !eq) {
        cli_help(c, stdout);
        return 0;
      }
      for (size_t k = 0; k < nopts && !o; k++)
        if (strlen(c->opts[k].name) == len && strncmp(c->opts[k].name, name, len) == 0)
          o = &c->opts[k];
      if (!o) {
        const cli_opt *near = nearest(c, name, len);
        if (near)
          perr(c, "unknown option '--%.*s' (did you mean '--%s'?)", (int)len, name, near->name);
        else perr(c, "unknown option '--%.*s'", (int)len, name);
        return usage_error(c);
      }
      if (eq) {
        value = eq + 1;
        inline_value = true;
      }
    } else if (a[0] == '-' && a[1] != '\0') {
      if (a[1] == 'h' && a[2] == '\0') {
        cli_help(c, stdout);
        return 0;
      }
      for (size_t k = 0; k < nopts && !o; k++)
        if (c->opts[k].short_name && c->opts[k].short_name == a[1]) o = &c->opts[k];
      if (!o) {
        perr(c, "unknown option '%s'", a);
        return usage_error(c);
      }
      if (a[2]) {
        value = a + 2;
        inline_value = true;
      }
    } else {
      if (c->args == CLI_ARGS_ANY) {
        argv[w++] = a;
        continue;
      }
      if (c->args == CLI_ARGS_COMMAND) {
        rest = argv + i;
        nrest = argc - i;
        break;
      }
      perr(c, "unexpected argument '%s'", a);
      return usage_error(c);
    }
    if (o->kind == CLI_OPT_FLAG) {
      if (inline_value) {
        perr(c, "--%s takes no value (got '%s')", o->name, value);
        return usage_error(c);
      }
    } else if (!inline_value) {
      if (i + 1 >= argc) {
        char mv[256];
        perr(c, "--%s needs a value (%s)", o->name, metavar(o, mv, sizeof mv));
        return usage_error(c);
      }
      value = argv[++i];
    }
    if (!store(c, o, value)) return 2;
    given[o - c->opts] = true;
    if (o->seen) *o->seen = true;
  }
  for (size_t k = 0; k < nopts; k++) {
    if (c->opts[k].required && !given[k]) {
      perr(c, "--%s is required", c->opts[k].name);
      return usage_error(c);
    }
  }
  if (c->args == CLI_ARGS_ANY) {
    rest = argv + 1;
    nrest = w - 1;
    argv[w] = NULL;
    const char *what = c->args_name ? c->args_name : "argument";
    if (nrest < c->min_args) {
      perr(c, "missing %s", what);
      return usage_error(c);
    }
    if (c->max_args >= 0 && nrest > c->max_args) {
      perr(c, "unexpected argument '%s' (at most %d %s)", rest[c->max_args], c->max_args, what);
      return usage_error(c);
    }
  }
  if (rest_argv) *rest_argv = rest;
  if (rest_argc) *rest_argc = nrest;
  return CLI_CONTINUE;
}

/* Prints `text` with every line after the first indented by `indent` spaces. */
static void put_indented(FILE *out, const char *text, int indent) {
  for (const char *p = text; *p; p++) {
    fputc(*p, out);
    if (*p == '\n' && p[1]) fprintf(out, "%*s", indent, "");
  }
}

/* Prints `text` from column `indent` on (the cursor is there) as one paragraph, its words
 * separated by single spaces and its lines broken so that none passes `width` columns (a word
 * longer than a line gets a line of its own). A '\n' in `text` is a space like any other. */
static void put_wrapped(FILE *out, const char *text, int indent, int width) {
  int col = indent;
  for (const char *p = text; *p;) {
    p += strspn(p, " \n");
    size_t word = strcspn(p, " \n");
    if (!word) break;
    if (col > indent && col + 1 + (int)word > width) {
      fprintf(out, "\n%*s", indent, "");
      col = indent;
    } else if (col > indent) {
      fputc(' ', out);
      col++;
    }
    fwrite(p, 1, word, out);
    col += (int)word;
    p += word;
  }
}

void cli_help(const cli_command *c, FILE *out) {
  fputs("usage: ", out);
  put_indented(out, c->usage, 7);
  fputs("\n\n", out);
  if (c->about && *c->about) {
    fputs(c->about, out);
    if (c->about[strlen(c->about) - 1] != '\n') fputc('\n', out);
    fputc('\n', out);
  }
  fputs("Options:\n", out);
  for (const cli_opt *o = c->opts; o && o->name; o++) {
    char left[160], mv[256];
    if (o->heading) fprintf(out, "%s%s\n", o == c->opts ? "" : "\n", o->heading);
    int n = snprintf(left, sizeof left, "%c%c%s--%s%s%s", o->short_name ? '-' : ' ',
                     o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name,
                     o->kind == CLI_OPT_FLAG ? "" : " ",
                     o->kind == CLI_OPT_FLAG ? "" : metavar(o, mv, sizeof mv));
    fprintf(out, "  %s", left);
    if (n + 2 > HELP_COLUMN) fprintf(out, "\n%*s", HELP_COLUMN + 2, "");
    else fprintf(out, "%*s", HELP_COLUMN - n, "");
    char text[1024];
    snprintf(text, sizeof text, "%s%s%s%s%s", o->help ? o->help : "", o->def ? " (default: " : "",
             o->def ? o->def : "", o->def ? ")" : "", o->required ? " (required)" : "");
    put_wrapped(out, text, HELP_COLUMN + 2, HELP_WIDTH);
    fputc('\n', out);
  }
  fprintf(out, "  -h, --help%*sshow this help and exit\n", HELP_COLUMN - 10, "");
  if (c->more && *c->more) {
    fputc('\n', out);
    fputs(c->more, out);
    if (c->more[strlen(c->more) - 1] != '\n') fputc('\n', out);
  }
}

int cli_pick(const char *cmd, const char *what, const char *word, const char *const *names) {
  char list[256];
  size_t len = 0, n = 0;
  list[0] = '\0';
  while (names[n]) n++;
  for (size_t k = 0; k < n; k++) {
    int w = snprintf(list + len, sizeof list - len, "%s%s",
                     k == 0       ? ""
                     : k + 1 == n ? " or "
                                  : ", ",
                     names[k]);
    if (w < 0 || (size_t)w >= sizeof list - len) break;
    len += (size_t)w;
  }
  if (!word) {
    fprintf(stderr, "zeus %s: missing %s (expected %s)\n", cmd, what, list);
    return -1;
  }
  int best = -1, best_d = 99;
  for (size_t k = 0; k < n; k++) {
    if (strcmp(word, names[k]) == 0) return (int)k;
    int d = cli_edit_distance(word, names[k]);
    if (d < best_d) {
      best_d = d;
      best = (int)k;
    }
  }
  int limit = (int)strlen(word) / 3 > 2 ? (int)strlen(word) / 3 : 2;
  if (best >= 0 && best_d <= limit)
    fprintf(stderr, "zeus %s: unknown %s '%s' (did you mean '%s'?; expected %s)\n", cmd, what, word,
            names[best], list);
  else fprintf(stderr, "zeus %s: unknown %s '%s' (expected %s)\n", cmd, what, word, list);
  return -1;
}
