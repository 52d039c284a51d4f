/* src/core/core.h: internal helpers shared by every module (not API).
 *
 * Errors: every failing internal function calls zeus__error() once, at the place that knows
 * what went wrong, and returns its code; callers that add context use zeus__error_ctx().
 */
#ifndef ZEUS_CORE_INTERNAL_H
#define ZEUS_CORE_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>

#include "zeus/clock.h"
#include "zeus/error.h"
#include "zeus/log.h"

#define ZEUS__PRINTF(a, b) __attribute__((format(printf, a, b)))
#define ZEUS__ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors ---- */
/* Sets this thread's error code and message; returns `code`. */
int zeus__error(int code, const char *fmt, ...) ZEUS__PRINTF(2, 3);
/* Prefixes this thread's current message with "<context>: "; returns `code`. */
int zeus__error_ctx(int code, const char *fmt, ...) ZEUS__PRINTF(2, 3);
/* zeus__error(ZEUS_ENOMEM, "out of memory while <what>"). */
int zeus__oom(const char *what);

/* ---- logging ---- */
extern int zeus__log_level_cur; /* read without a lock: a stale level only mis-filters once */
void zeus__log_emit(int level, const char *module, const char *fmt, ...) ZEUS__PRINTF(3, 4);
#define zeus__log(level, module, ...)                                 \
  do {                                                                \
    if ((level) <= zeus__log_level_cur) zeus__log_emit((level), (module), __VA_ARGS__); \
  } while (0)

/* ---- parsing numbers and settings ---- */
/* Parse a whole string (surrounding blanks allowed) as a number within [min, max]. On failure:
 * ZEUS_EINVAL ("<what>: expected an integer, got 'x'") or ZEUS_ERANGE ("<what>: 500 is
 * outside [0, 100]"). */
int zeus__parse_long(const char *text, long min, long max, const char *what, long *out);
int zeus__parse_double(const char *text, double min, double max, const char *what, double *out);
int zeus__parse_bool(const char *text, const char *what, bool *out);

/* Environment settings. Unset (or empty) gives the default; a bad value is an error naming
 * the variable, its value and what was expected. */
const char *zeus__env_str(const char *name); /* NULL when unset or empty */
int zeus__env_long(const char *name, long min, long max, long def, long *out);
int zeus__env_double(const char *name, double min, double max, double def, double *out);
int zeus__env_bool(const char *name, bool def, bool *out);
/* `choices` is NULL-terminated; *out is the index of the match (case-insensitive). */
int zeus__env_choice(const char *name, const char *const *choices, int def, int *out);

/* ---- growable string buffer ---- */
typedef struct zeus__buf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len;
  size_t cap;
} zeus__buf;
int zeus__buf_append(zeus__buf *b, const char *s, size_t n);
int zeus__buf_puts(zeus__buf *b, const char *s);
int zeus__buf_printf(zeus__buf *b, const char *fmt, ...) ZEUS__PRINTF(2, 3);
void zeus__buf_free(zeus__buf *b);

/* ---- memory ---- */
/* A malloc()ed copy of s (free() it), or NULL when memory runs out (no error is set). */
char *zeus__strdup(const char *s);

/* ---- files ---- */
/* Reads a whole file (NUL-terminated; *len excludes the NUL). Errors name the path. */
int zeus__read_file(const char *path, char **data /* out, free() */, size_t *len /* out */);
/* Writes `data` to a temporary file beside `path`, fsyncs it, and renames it over `path`,
 * so readers see the old or the new file and never half of one. */
int zeus__write_file_atomic(const char *path, const void *data, size_t len);
/* mkdir -p (mode 0755); errors name the path (ZEUS_EPERM, ZEUS_EIO). */
int zeus__mkdirs(const char *path);

#endif
