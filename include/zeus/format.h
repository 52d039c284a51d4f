/* zeus/format.h: how every zeus output writes numbers and JSON documents.
 *
 * One convention for the CLI, the servers and the files they write: reals in their shortest
 * form that reads back to the same double (0.1, never 0.10000000000000001), numbers as numbers,
 * and no value that JSON cannot carry (a non-finite real becomes null).
 */
#ifndef ZEUS_FORMAT_H
#define ZEUS_FORMAT_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

struct json_t; /* jansson's value type; include <jansson.h> to build one */

/* Frees what the library allocated for the caller (strings, arrays, buffers). NULL is a no-op.
 * Use it rather than the C library's free(): libzeus may be linked against another C runtime
 * than its caller (a Python interpreter, a static build). */
ZEUS_EXTERN void zeus_free(void *p);

/* Writes `v` into buf[0..len) in the shortest decimal form that strtod() reads back as exactly
 * `v`: the fewest significant digits, in fixed notation for decimal exponents -4 to 15 and with
 * an exponent outside them, as Python's repr() does ("0.1", "175", "300", "0.0001", "1e+20",
 * "-3.25e-07"); non-finite values as "NaN",
 * "+Inf" and "-Inf" (the Prometheus spellings). Independent of the locale's decimal point only
 * while LC_NUMERIC is "C" (the library never calls setlocale). Returns the length written
 * (without the NUL), or ZEUS_ERANGE when `len` is too small (26 bytes always suffice).
 * Thread-safe. */
ZEUS_EXTERN int zeus_format_double(double v, char *buf /* out */, size_t len);
#define ZEUS_FORMAT_DOUBLE_MAX 26

/* jansson's json_dumps() with our number convention: every real in its shortest round-trip form
 * with a ".0" kept where it would otherwise read back as an integer, a non-finite real as null.
 * `flags` takes jansson's JSON_INDENT(n), JSON_COMPACT and JSON_SORT_KEYS; any value may be the
 * root. Returns a NUL-terminated string to release with zeus_free(), or NULL when `value` is NULL
 * or memory runs out (then zeus_errmsg() says so). Thread-safe for values no other thread
 * changes. */
ZEUS_EXTERN char *zeus_json_dumps(const struct json_t *value, size_t flags);

ZEUS_END_DECLS

#endif
