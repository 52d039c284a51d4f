/* Sanitizer builds only (ZEUS_SANITIZE: CMakeLists.txt links this file into the zeus executable
 * when libmicrohttpd is built in). Issue 36, finding 10.
 *
 * libmicrohttpd 0.9.75 (Debian 12's 0.9.75-6) appends an obs-fold line (a header or trailer line
 * continued on the next one, which starts with a space or a tab) to the previous line's field
 * name in place, in process_broken_line(): MHD_pool_reallocate() grows the name's block where it
 * is when the block ends in the same 16-byte slot as the connection's memory in use, that is when
 * the read buffer was full and the continuation line ends where the buffer ends, and then
 * memcpy() copies the continuation, which lies a few bytes after the name, onto the name's end:
 * overlapping ranges. One unauthenticated request whose header section fills the read buffer (half
 * the connection memory: 16 KiB for bso-server and the daemon, 8 KiB for the exporter, 4 KiB for
 * pfo-server) so arranged does it. AddressSanitizer's memcpy check then aborts the server; glibc's
 * memcpy on x86-64 is its memmove, so the release build copies the bytes right and answers. 0.9.75
 * has no option that refuses folded lines (its strict levels check spaces in the URI, the Host
 * header and whitespace before a colon) and no hook between reading and parsing, and the server
 * cannot size its connection memory out of the case (every size has a read buffer end some name
 * can end next to). libmicrohttpd fixed it in 0.9.77 ("connection.c: fixed processing of folded
 * headers", 4f6b67ec), which Debian 12 does not ship.
 *
 * So the sanitizer build's executable defines memcpy, which comes first in the process's symbol
 * lookup, ahead of the AddressSanitizer runtime's: a copy whose ranges overlap and whose caller is
 * libmicrohttpd becomes a memmove (AddressSanitizer still checks both ranges are addressable);
 * every other copy, ours and every other library's, goes to AddressSanitizer's memcpy unchanged,
 * its overlap check included. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The AddressSanitizer runtime's checked copies (what its memcpy and memmove interceptors do). */
void *__asan_memcpy(void *dst, const void *src, size_t n);
void *__asan_memmove(void *dst, const void *src, size_t n);

/* Whether the code at pc is libmicrohttpd's. */
static int in_libmicrohttpd(const void *pc) {
  Dl_info info;
  if (!dladdr(pc, &info) || !info.dli_fname) return 0;
  const char *slash = strrchr(info.dli_fname, '/');
  const char *name = slash ? slash + 1 : info.dli_fname;
  return strncmp(name, "libmicrohttpd.so", strlen("libmicrohttpd.so")) == 0;
}

/* Exported (default visibility, and --export-dynamic-symbol in CMakeLists.txt), so that
 * libmicrohttpd's calls reach it. */
__attribute__((visibility("default"))) void *memcpy(void *restrict dst, const void *restrict src, size_t n) {
  const uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
  /* The ranges [d, d + n) and [s, s + n) overlap when their starts are less than n apart. */
  if (n != 0 && d != s && (d < s ? s - d < n : d - s < n) && in_libmicrohttpd(__builtin_return_address(0)))
    return __asan_memmove(dst, src, n);
  return __asan_memcpy(dst, src, n);
}
