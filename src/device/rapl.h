/* src/device/rapl.h: CPU packages through Intel RAPL (powercap), internal side.
 *
 * Packages are named by the N of intel-rapl:N (zeusd's cpu ids). These functions read the files
 * themselves and never ask a daemon: the daemon uses them, and zeus_cpu_* use them before
 * falling back to the daemon. */
#ifndef ZEUS_DEVICE_RAPL_H
#define ZEUS_DEVICE_RAPL_H

#include <stdbool.h>
#include <stdint.h>

/* The powercap root: ZEUS_RAPL_ROOT, else /sys/class/powercap. */
const char *zeus__rapl_root(void);
/* Packages whose energy counter this process can read, in order (at most `cap`); *unreadable
 * (may be NULL) counts packages whose counter exists but cannot be read (root only). */
unsigned zeus__rapl_packages(unsigned *pkgs, unsigned cap, unsigned *unreadable);
/* Energy counters of package `pkg` in uJ; the DRAM sub-zone's when it has one. */
int zeus__rapl_read_uj(unsigned pkg, uint64_t *pkg_uj, bool *has_dram, uint64_t *dram_uj);
/* The values at which they wrap around, in uJ. */
int zeus__rapl_range_uj(unsigned pkg, uint64_t *pkg_max_uj, uint64_t *dram_max_uj);

#endif
