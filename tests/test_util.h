/* Shared test helpers (cmocka). CMake registers every cmocka_unit_test(name) of a test file as
 * its own CTest entry that runs `<exe> name`; main() passes argv[1] to cmocka_set_test_filter. */
#ifndef ZEUS_TEST_UTIL_H
#define ZEUS_TEST_UTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* Asserts that an int-returning zeus call succeeded, printing zeus_errmsg() otherwise. */
#define assert_zeus_ok(call)                                                         \
  do {                                                                               \
    int zeus__t_rc = (call);                                                         \
    if (zeus__t_rc != 0) fail_msg("%s -> %d: %s", #call, zeus__t_rc, zeus_errmsg()); \
  } while (0)

/* Asserts that a call failed with `code` and that the message contains `needle`. */
#define assert_zeus_err(call, code, needle)                                             \
  do {                                                                                  \
    int zeus__t_rc = (call);                                                            \
    if (zeus__t_rc != (code))                                                           \
      fail_msg("%s -> %d, expected %d (%s)", #call, zeus__t_rc, (int)(code), zeus_errmsg()); \
    const char *zeus__t_needle = (needle);                                              \
    if (zeus__t_needle && !strstr(zeus_errmsg(), zeus__t_needle))                       \
      fail_msg("%s: message '%s' lacks '%s'", #call, zeus_errmsg(), zeus__t_needle);    \
  } while (0)

/* Asserts what zeus_gpu_get_locked_clocks says of a GPU's SM (mem false) or memory clock lock. */
#define assert_clock_lock(d, gpu, mem, st, lo, hi, want_source)                   \
  do {                                                                             \
    zeus_clock_lock zeus__l;                                                       \
    assert_zeus_ok(zeus_gpu_get_locked_clocks((d), (gpu), (mem), &zeus__l));      \
    assert_int_equal(zeus__l.state, (st));                                         \
    assert_int_equal(zeus__l.min_mhz, (lo));                                       \
    assert_int_equal(zeus__l.max_mhz, (hi));                                       \
    assert_string_equal(zeus__l.source, (want_source));                            \
  } while (0)

/* |a - b| <= eps (this cmocka has no assert_double_equal). */
#define assert_near(a, b, eps)                                                             \
  do {                                                                                     \
    double zeus__a = (a), zeus__b = (b);                                                   \
    if (!(zeus__a - zeus__b <= (eps) && zeus__b - zeus__a <= (eps)))                       \
      fail_msg("%s = %.17g, expected %.17g (+- %g)", #a, zeus__a, zeus__b, (double)(eps)); \
  } while (0)

/* A fresh temporary directory (static buffer of the caller). */
static inline const char *zeus_test_tmpdir(char *buf, size_t len) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, len, "%s/zeus-test-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(buf)) { perror("mkdtemp"); abort(); }
  return buf;
}

static inline void zeus_test_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) { perror(path); abort(); }
  fputs(text, f);
  fclose(f);
}

/* The measured data folder (../shared/data beside the checkout, or $ZEUS_DATA_DIR), or NULL
 * when absent; tests that need it call ZEUS_SKIP_WITHOUT_DATA first. */
static inline const char *zeus_test_data_dir(void) {
  const char *d = getenv("ZEUS_DATA_DIR");
#ifdef ZEUS_TEST_DATA_DIR
  if (!d || !*d) d = ZEUS_TEST_DATA_DIR;
#endif
  struct stat st;
  if (d && stat(d, &st) == 0 && S_ISDIR(st.st_mode)) return d;
  return NULL;
}

#define ZEUS_SKIP_WITHOUT_DATA()                                                      \
  do {                                                                                \
    if (!zeus_test_data_dir()) {                                                      \
      print_message("SKIPPED: the measured data folder ../shared/data is absent "     \
                    "(set ZEUS_DATA_DIR to its path to run this test)\n");            \
      skip();                                                                         \
    }                                                                                 \
  } while (0)

#endif
