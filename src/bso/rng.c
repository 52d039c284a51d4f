/* rng.c: the documented, machine-independent random numbers of the batch-size optimizer and
 * the trace simulator (xoshiro256** seeded by splitmix64; Marsaglia's polar normals over a
 * logarithm of our own, so that no libm function decides a single bit). */
#include <math.h>

#include "bso/bso_internal.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void zeus_rng_seed(zeus_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t zeus_rng_next(zeus_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double zeus_rng_uniform(zeus_rng *r) { return (double)(zeus_rng_next(r) >> 11) * 0x1.0p-53; }

uint64_t zeus_rng_below(zeus_rng *r, uint64_t n) {
  if (n == 0) return 0;
  /* Reject the lowest (2^64 mod n) values so that every residue is equally likely. */
  uint64_t threshold = (0 - n) % n;
  for (;;) {
    uint64_t x = zeus_rng_next(r);
    if (x >= threshold) return x % n;
  }
}

/* Natural logarithm of a positive finite x from IEEE basic operations only: x = m * 2^e with m in
 * [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by its series to
 * s^25 (truncation error < 1e-19 relative). frexp and ldexp are exact. */
double zeus__det_log(double x) {
  int e;
  double m = frexp(x, &e); /* [0.5, 1) */
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  double s = (m - 1.0) / (m + 1.0);
  double s2 = s * s;
  /* Horner over 1/(2k+1), k = 12..0. */
  static const double inv_odd[13] = {1.0,        1.0 / 3.0,  1.0 / 5.0,  1.0 / 7.0,  1.0 / 9.0,
                                     1.0 / 11.0, 1.0 / 13.0, 1.0 / 15.0, 1.0 / 17.0, 1.0 / 19.0,
                                     1.0 / 21.0, 1.0 / 23.0, 1.0 / 25.0};
  double p = inv_odd[12];
  for (int k = 11; k >= 0; k--) p = p * s2 + inv_odd[k];
  static const double ln2_hi = 6.93147180369123816490e-01; /* 0x3FE62E42FEE00000 */
  static const double ln2_lo = 1.90821492927058770002e-10; /* 0x3DEA39EF35793C76 */
  double de = (double)e;
  return de * ln2_hi + (de * ln2_lo + 2.0 * s * p);
}

double zeus_rng_normal(zeus_rng *r) {
  for (;;) {
    double u = 2.0 * zeus_rng_uniform(r) - 1.0;
    double v = 2.0 * zeus_rng_uniform(r) - 1.0;
    double s = u * u + v * v;
    if (s >= 1.0 || s == 0.0) continue;
    return u * sqrt(-2.0 * zeus__det_log(s) / s);
  }
}

void zeus__rng_shuffle(zeus_rng *r, size_t *idx, size_t n) {
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)zeus_rng_below(r, (uint64_t)i);
    size_t t = idx[i - 1];
    idx[i - 1] = idx[j];
    idx[j] = t;
  }
}
