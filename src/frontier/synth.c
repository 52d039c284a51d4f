/* A synthetic instruction profile from a simple DVFS model, for tests and benchmarks. */
#include <math.h>

#include "frontier/frontier.h"

/* A small deterministic generator (xorshift32) so every platform builds the same profile. */
static double jitter(unsigned *state) {
  unsigned x = *state;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  *state = x;
  return (double)(x % 20001u) / 20000.0 * 2.0 - 1.0; /* [-1, 1] */
}

int zeus__frontier_synth(zeus_frontier_profile *p, int stages, int nclocks, double fwd_s, unsigned seed) {
  if (stages < 1 || nclocks < 1 || !(fwd_s > 0))
    return zeus__error(ZEUS_EINVAL, "synthetic profile: bad shape (%d stages, %d clocks, %g s)", stages,
                       nclocks, fwd_s);
  const double fmax = 1410, fmin = 0.45 * fmax;
  unsigned state = seed * 2654435761u + 1u;
  for (int s = 0; s < stages; s++) {
    double imbalance = 1.0 + 0.08 * (double)((s * 7 + (int)(seed % 5)) % 5);
    for (int k = 0; k < 2; k++) {
      double t = fwd_s * imbalance * (k ? 2.05 : 1.0);
      for (int c = 0; c < nclocks; c++) {
        double f = nclocks == 1 ? fmax : fmax - (fmax - fmin) * c / (nclocks - 1);
        int mhz = (int)lround(f);
        double x = (double)mhz / fmax;
        double time = t * (0.35 + 0.65 / x);
        double power = 70.0 + 230.0 * pow(x, 2.6);
        double energy = power * time * (1.0 + 0.005 * jitter(&state));
        int rc = zeus_frontier_profile_add(p, s, (zeus_frontier_instr)k, mhz, time, energy);
        if (rc) return rc;
      }
    }
  }
  return ZEUS_OK;
}
