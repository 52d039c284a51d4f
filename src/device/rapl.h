/* src/device/rapl.h: the RAPL zones of this machine, scanned once (internal).
 *
 * A zeus__rapl is the list of readable CPU package zones (intel-rapl:N under /sys/class/powercap
 * or ZEUS_RAPL_ROOT) with their DRAM sub-zones, found by one scan of the folder, each energy file
 * kept open: a reading is one pread() per zone, with no path built and no folder looked at. The
 * monitor opens one per monitor. Not thread-safe by itself (the monitor serialises its calls).
 *
 * When this process can read no package and a daemon is configured (ZEUSD_SOCK_PATH or
 * ZEUSD_HOST_PORT), zeus__rapl_open gives the daemon's packages instead: a reading is then a
 * round trip to its GET /cpu/get_cumulative_energy. zeus__rapl_open_local never does (the daemon
 * itself uses it).
 */
#ifndef ZEUS_DEVICE_RAPL_H
#define ZEUS_DEVICE_RAPL_H

#include "core/core.h"
#include "zeus/device.h"

typedef struct zeus__rapl zeus__rapl;

/* Scans the zones. No readable zone is not an error (count 0; zeus__rapl_why() says why).
 * ZEUS_ENOMEM only. */
int zeus__rapl_open(zeus__rapl **out /* out */);
int zeus__rapl_open_local(zeus__rapl **out /* out */);
/* Packages whose counter exists but could not be read (permission), in the local scan. */
unsigned zeus__rapl_unreadable(const zeus__rapl *r);
/* Whether the packages are a daemon's. */
bool zeus__rapl_remote(const zeus__rapl *r);
/* The folder scanned: ZEUS_RAPL_ROOT, else /sys/class/powercap. */
const char *zeus__rapl_root(void);
void zeus__rapl_close(zeus__rapl *r);
/* Readable packages, in zone order (index 0 is the lowest N). */
unsigned zeus__rapl_count(const zeus__rapl *r);
/* Why no package is readable, in words a user can act on ("" when some are). */
const char *zeus__rapl_why(const zeus__rapl *r);
/* Paths and names of package `cpu` (< count). */
void zeus__rapl_info(const zeus__rapl *r, unsigned cpu, zeus_cpu_zone *out /* out */);
/* The counters' wrap-around values in µJ (UINT64_MAX when the zone does not say). */
void zeus__rapl_range(const zeus__rapl *r, unsigned cpu, uint64_t *pkg_max_uj, uint64_t *dram_max_uj);
/* Energy counters in µJ; *dram_uj only when the package has a DRAM zone (else left alone).
 * ZEUS_EIO naming the file when a read fails. */
int zeus__rapl_read(zeus__rapl *r, unsigned cpu, uint64_t *pkg_uj /* out */, uint64_t *dram_uj /* out */);
bool zeus__rapl_has_dram(const zeus__rapl *r, unsigned cpu);

#endif
