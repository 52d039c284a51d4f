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

/* Numbers at the resolution they were measured at.
 *
 * Arithmetic on doubles leaves binary noise: 0.051 + 0.05 is 0.10099999999999999, and the
 * shortest round-trip form of that double is still those 17 digits. Every figure an output
 * writes is therefore made one of three ways before it is written:
 *
 *  - from an integer count, when the source counts in integers: an energy counter counts mJ, a
 *    RAPL zone uJ, a clock ns. Subtract the counts as integers, then convert once with
 *    zeus_joules_from_mj(), zeus_joules_from_uj() or zeus_seconds_from_ns(): 50 mJ gives the
 *    double nearest 0.05, which prints as "0.05".
 *  - zeus_round_decimals(v, n), for a measured quantity already in a double (a difference of two
 *    readings, a sum of measured parts, a trapezoidal integral of mW samples): round to the
 *    resolution of the instrument (3 decimals for J from mJ, 9 for s from ns, 6 for J from uJ).
 *  - zeus_round_significant(v, n), for derived figures whose size is not known in advance
 *    (averages, ratios, costs, fitted model values): keep n significant digits (the CLI and the
 *    servers use ZEUS_DERIVED_DIGITS).
 *
 * zeus_json_dumps() and zeus_format_double() then write the shortest form of the result
 * (docs/output.md states the whole convention). */

/* The significant digits the CLI and the servers keep in derived figures (averages, costs). */
#define ZEUS_DERIVED_DIGITS 6

/* `v` rounded to `decimals` places after the decimal point (0 to 17; a value outside that range
 * is clamped to it): the double nearest to the decimal number, so that zeus_format_double()
 * writes at most `decimals` decimals ("0.05" for 0.049999999999999996 and 3). Halfway cases of
 * the exact binary value round to even. Values too large to carry that many decimals, NaN and
 * the infinities come back unchanged; -0 comes back as 0. Thread-safe. */
ZEUS_EXTERN double zeus_round_decimals(double v, int decimals);

/* `v` rounded to `digits` significant decimal digits (1 to 17, clamped): 1234.5678 with 3 gives
 * 1230, 0.00123456 with 3 gives 0.00123. NaN and the infinities come back unchanged; -0 comes
 * back as 0. Thread-safe. */
ZEUS_EXTERN double zeus_round_significant(double v, int digits);

/* An integer count converted once, exactly where the count is below 2^53 (always, for real
 * counters): the double nearest count/1000, count/1e6 and count/1e9. Use them on a difference
 * of two counts, never on the counts before subtracting. */
ZEUS_EXTERN double zeus_joules_from_mj(int64_t mj);
ZEUS_EXTERN double zeus_joules_from_uj(int64_t uj);
ZEUS_EXTERN double zeus_seconds_from_ns(int64_t ns);

/* Rounds every real in the document `v` in place by the unit its key names (a real in a list
 * takes the list's key): _s at the ns (9 decimals), _j and _w at the mJ and mW (3 decimals), _mhz
 * and _c left as they are, any other real (a ratio, a percentage, a count's average) to
 * ZEUS_DERIVED_DIGITS significant digits. For report documents whose figures all follow the
 * naming convention (docs/output.md); never for state that is read back exactly. NULL is a
 * no-op. */
ZEUS_EXTERN void zeus_json_round_by_unit(struct json_t *v);

/* jansson's json_dumps() with our number convention: every real in its shortest round-trip form
 * with a ".0" kept where it would otherwise read back as an integer, a non-finite real as null.
 * `flags` takes jansson's JSON_INDENT(n), JSON_COMPACT and JSON_SORT_KEYS; any value may be the
 * root. Returns a NUL-terminated string to release with zeus_free(), or NULL when `value` is NULL
 * or memory runs out (then zeus_errmsg() says so). Thread-safe for values no other thread
 * changes. */
ZEUS_EXTERN char *zeus_json_dumps(const struct json_t *value, size_t flags);

ZEUS_END_DECLS

#endif
