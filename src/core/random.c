/* Unguessable bytes from the kernel (getrandom), for ids and credentials that other local users
 * must not be able to predict. Never a userspace PRNG: a seeded generator is guessable. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/core.h"

int zeus__random_bytes(void *buf, size_t n) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno != ENOSYS) return zeus__error(ZEUS_EIO, "cannot read random bytes: getrandom: %s", strerror(errno));
      /* A kernel older than 3.17: the device gives the same bytes. */
      int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
      if (fd < 0) return zeus__error(ZEUS_EIO, "cannot read random bytes: /dev/urandom: %s", strerror(errno));
      while (n > 0) {
        ssize_t k = read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
          close(fd);
          return zeus__error(ZEUS_EIO, "cannot read random bytes from /dev/urandom");
        }
        p += k;
        n -= (size_t)k;
      }
      close(fd);
      return ZEUS_OK;
    }
    p += r;
    n -= (size_t)r;
  }
  return ZEUS_OK;
}

int zeus__random_token(char *out, size_t chars) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567"; /* RFC 4648 base32, lower case */
  unsigned char raw[128];
  if (chars == 0 || chars > sizeof raw) return zeus__error(ZEUS_EINVAL, "random token: %zu characters, expected 1..%zu",
                                                           chars, sizeof raw);
  int rc = zeus__random_bytes(raw, chars);
  if (rc) return rc;
  /* 32 divides 256: taking 5 bits of each byte keeps every character uniform. */
  for (size_t i = 0; i < chars; i++) out[i] = alphabet[raw[i] & 31];
  out[chars] = '\0';
  memset(raw, 0, sizeof raw);
  return ZEUS_OK;
}

bool zeus__secret_equal(const char *a, const char *b) {
  if (!a || !b) return false;
  size_t n = strlen(a), m = strlen(b);
  /* The length is not secret (tokens have a fixed shape); the bytes are compared in constant time. */
  unsigned char diff = (unsigned char)(n != m);
  for (size_t i = 0; i < n && i < m; i++) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}
