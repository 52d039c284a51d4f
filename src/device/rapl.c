/* CPU package energy through Intel RAPL (/sys/class/powercap/intel-rapl:<pkg>[:<sub>]).
 * The root is ZEUS_RAPL_ROOT when set (tests point it at a fake tree). Energy files are in uJ. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "zeus/device.h"

static const char *rapl_root(void) {
  const char *r = zeus__env_str("ZEUS_RAPL_ROOT");
  return r ? r : "/sys/class/powercap";
}

static int read_u64(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  unsigned long long v;
  int ok = fscanf(f, "%llu", &v) == 1;
  fclose(f);
  if (!ok) return -1;
  *out = v;
  return 0;
}

static int read_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  if (!fgets(buf, (int)len, f)) { fclose(f); return -1; }
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
  return 0;
}

/* The readable package zones, in index order. */
static unsigned list_packages(unsigned *ids, unsigned cap) {
  unsigned n = 0;
  for (unsigned pkg = 0; pkg < 256 && n < cap; pkg++) {
    char path[512];
    uint64_t v;
    snprintf(path, sizeof path, "%s/intel-rapl:%u/energy_uj", rapl_root(), pkg);
    if (read_u64(path, &v) != 0) continue;
    ids[n++] = pkg;
  }
  return n;
}

unsigned zeus_cpu_count(void) {
  unsigned ids[ZEUS_MAX_CPUS];
  return list_packages(ids, ZEUS_MAX_CPUS);
}

/* Finds the dram sub-zone of a package, if any. */
static bool find_dram(unsigned pkg, char *dir, size_t len) {
  for (unsigned sub = 0; sub < 16; sub++) {
    char name[64], path[512];
    snprintf(path, sizeof path, "%s/intel-rapl:%u:%u/name", rapl_root(), pkg, sub);
    if (read_line(path, name, sizeof name) != 0) continue;
    if (strcmp(name, "dram") == 0) {
      snprintf(dir, len, "%s/intel-rapl:%u:%u", rapl_root(), pkg, sub);
      return true;
    }
  }
  return false;
}

static int package_id(unsigned cpu, unsigned *pkg) {
  unsigned ids[ZEUS_MAX_CPUS];
  unsigned n = list_packages(ids, ZEUS_MAX_CPUS);
  if (cpu >= n)
    return zeus__error(ZEUS_ENOENT, "CPU package %u has no readable RAPL energy counter under %s (%u readable)", cpu,
                       rapl_root(), n);
  *pkg = ids[cpu];
  return ZEUS_OK;
}

int zeus_cpu_energy(unsigned cpu, uint64_t *pkg_mj, bool *has_dram, uint64_t *dram_mj) {
  unsigned pkg;
  int rc = package_id(cpu, &pkg);
  if (rc) return rc;
  char path[600], dir[512];
  uint64_t uj;
  snprintf(path, sizeof path, "%s/intel-rapl:%u/energy_uj", rapl_root(), pkg);
  if (read_u64(path, &uj) != 0) return zeus__error(ZEUS_EIO, "cannot read '%s'", path);
  *pkg_mj = uj / 1000;
  bool dram = find_dram(pkg, dir, sizeof dir);
  if (has_dram) *has_dram = dram;
  if (dram && dram_mj) {
    snprintf(path, sizeof path, "%s/energy_uj", dir);
    if (read_u64(path, &uj) != 0) return zeus__error(ZEUS_EIO, "cannot read '%s'", path);
    *dram_mj = uj / 1000;
  }
  return ZEUS_OK;
}

int zeus_cpu_energy_range(unsigned cpu, uint64_t *pkg_max_mj, uint64_t *dram_max_mj) {
  unsigned pkg;
  int rc = package_id(cpu, &pkg);
  if (rc) return rc;
  char path[600], dir[512];
  uint64_t uj;
  snprintf(path, sizeof path, "%s/intel-rapl:%u/max_energy_range_uj", rapl_root(), pkg);
  if (pkg_max_mj) *pkg_max_mj = read_u64(path, &uj) == 0 ? uj / 1000 : UINT64_MAX / 1000;
  if (dram_max_mj) {
    *dram_max_mj = UINT64_MAX / 1000;
    if (find_dram(pkg, dir, sizeof dir)) {
      snprintf(path, sizeof path, "%s/max_energy_range_uj", dir);
      if (read_u64(path, &uj) == 0) *dram_max_mj = uj / 1000;
    }
  }
  return ZEUS_OK;
}
