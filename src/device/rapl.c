/* CPU package energy through Intel RAPL (/sys/class/powercap/intel-rapl:<pkg>[:<sub>]).
 * The root is ZEUS_RAPL_ROOT when set (tests point it at a fake tree). Energy files are in uJ.
 *
 * The counters are readable by root only on current kernels (CVE-2020-8694). When this process
 * can read none of them and a daemon is configured (ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT), the
 * public zeus_cpu_* functions ask the daemon's /cpu routes instead. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "device/rapl.h"
#include "device/zeusd_client.h"
#include "zeus/device.h"

const char *zeus__rapl_root(void) {
  const char *r = zeus__env_str("ZEUS_RAPL_ROOT");
  return r ? r : "/sys/class/powercap";
}

/* 0 on success; -1 when the file is missing or malformed; -2 when it exists but may not be read. */
static int read_u64(const char *path, uint64_t *out) {
  FILE *f = fopen(path, "r");
  if (!f) return errno == EACCES || errno == EPERM ? -2 : -1;
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

unsigned zeus__rapl_packages(unsigned *ids, unsigned cap, unsigned *unreadable) {
  unsigned n = 0;
  if (unreadable) *unreadable = 0;
  for (unsigned pkg = 0; pkg < 256 && n < cap; pkg++) {
    char path[512];
    uint64_t v;
    snprintf(path, sizeof path, "%s/intel-rapl:%u/energy_uj", zeus__rapl_root(), pkg);
    int r = read_u64(path, &v);
    if (r == -2 && unreadable) (*unreadable)++;
    if (r != 0) continue;
    ids[n++] = pkg;
  }
  return n;
}

/* Finds the dram sub-zone of a package, if any. */
static bool find_dram(unsigned pkg, char *dir, size_t len) {
  for (unsigned sub = 0; sub < 16; sub++) {
    char name[64], path[512];
    snprintf(path, sizeof path, "%s/intel-rapl:%u:%u/name", zeus__rapl_root(), pkg, sub);
    if (read_line(path, name, sizeof name) != 0) continue;
    if (strcmp(name, "dram") == 0) {
      snprintf(dir, len, "%s/intel-rapl:%u:%u", zeus__rapl_root(), pkg, sub);
      return true;
    }
  }
  return false;
}

int zeus__rapl_read_uj(unsigned pkg, uint64_t *pkg_uj, bool *has_dram, uint64_t *dram_uj) {
  char path[600], dir[512];
  snprintf(path, sizeof path, "%s/intel-rapl:%u/energy_uj", zeus__rapl_root(), pkg);
  int r = read_u64(path, pkg_uj);
  if (r) return zeus__error(r == -2 ? ZEUS_EPERM : ZEUS_EIO, "cannot read '%s'%s", path,
                            r == -2 ? ": root only (or CAP_DAC_READ_SEARCH); a zeus daemon can read it for you" : "");
  bool dram = find_dram(pkg, dir, sizeof dir);
  if (has_dram) *has_dram = dram;
  if (dram && dram_uj) {
    snprintf(path, sizeof path, "%s/energy_uj", dir);
    if (read_u64(path, dram_uj) != 0) return zeus__error(ZEUS_EIO, "cannot read '%s'", path);
  }
  return ZEUS_OK;
}

int zeus__rapl_range_uj(unsigned pkg, uint64_t *pkg_max, uint64_t *dram_max) {
  char path[600], dir[512];
  uint64_t uj;
  snprintf(path, sizeof path, "%s/intel-rapl:%u/max_energy_range_uj", zeus__rapl_root(), pkg);
  if (pkg_max) *pkg_max = read_u64(path, &uj) == 0 ? uj : UINT64_MAX;
  if (dram_max) {
    *dram_max = UINT64_MAX;
    if (find_dram(pkg, dir, sizeof dir)) {
      snprintf(path, sizeof path, "%s/max_energy_range_uj", dir);
      if (read_u64(path, &uj) == 0) *dram_max = uj;
    }
  }
  return ZEUS_OK;
}

/* ---- through the daemon ---- */

/* The daemon's CPU list when this process reads no counter itself, else NULL (borrowed). */
static json_t *daemon_cpus(zeus__zeusd **zout) {
  unsigned ids[1];
  if (zeus__rapl_packages(ids, 1, NULL) > 0) return NULL;
  zeus__zeusd *z = zeus__zeusd_shared();
  if (!z) return NULL;
  json_t *disc = zeus__zeusd_discover(z);
  json_t *cpus = json_object_get(disc, "cpus");
  if (!json_is_array(cpus)) return NULL;
  *zout = z;
  return cpus;
}

static json_t *daemon_cpu(unsigned cpu, zeus__zeusd **z) {
  json_t *cpus = daemon_cpus(z);
  return cpus ? json_array_get(cpus, cpu) : NULL;
}

unsigned zeus_cpu_count(void) {
  unsigned ids[ZEUS_MAX_CPUS];
  unsigned n = zeus__rapl_packages(ids, ZEUS_MAX_CPUS, NULL);
  if (n) return n;
  zeus__zeusd *z;
  json_t *cpus = daemon_cpus(&z);
  size_t m = cpus ? json_array_size(cpus) : 0;
  return m > ZEUS_MAX_CPUS ? ZEUS_MAX_CPUS : (unsigned)m;
}

static int package_id(unsigned cpu, unsigned *pkg) {
  unsigned ids[ZEUS_MAX_CPUS];
  unsigned n = zeus__rapl_packages(ids, ZEUS_MAX_CPUS, NULL);
  if (cpu >= n)
    return zeus__error(ZEUS_ENOENT, "CPU package %u has no readable RAPL energy counter under %s (%u readable)", cpu,
                       zeus__rapl_root(), n);
  *pkg = ids[cpu];
  return ZEUS_OK;
}

static int daemon_energy(unsigned cpu, uint64_t *pkg_mj, bool *has_dram, uint64_t *dram_mj, bool *used) {
  zeus__zeusd *z;
  json_t *c = daemon_cpu(cpu, &z);
  *used = c != NULL;
  if (!c) return ZEUS_ENOENT;
  json_int_t id = json_integer_value(json_object_get(c, "id"));
  char path[128], key[24];
  snprintf(path, sizeof path, "/cpu/get_cumulative_energy?cpu_ids=%lld&cpu=true&dram=true", (long long)id);
  snprintf(key, sizeof key, "%lld", (long long)id);
  json_t *root;
  int rc = zeus__zeusd_get(z, path, (int)id, &root);
  if (rc) return rc;
  json_t *o = json_object_get(root, key), *e = json_object_get(o, "cpu_energy_uj"), *de = json_object_get(o, "dram_energy_uj");
  if (!json_is_integer(e)) {
    json_decref(root);
    return zeus__error(ZEUS_EHTTP, "zeus daemon at %s: no cpu_energy_uj for CPU %lld", zeus__zeusd_endpoint(z), (long long)id);
  }
  *pkg_mj = (uint64_t)json_integer_value(e) / 1000;
  if (has_dram) *has_dram = json_is_integer(de);
  if (dram_mj && json_is_integer(de)) *dram_mj = (uint64_t)json_integer_value(de) / 1000;
  json_decref(root);
  return ZEUS_OK;
}

int zeus_cpu_energy(unsigned cpu, uint64_t *pkg_mj, bool *has_dram, uint64_t *dram_mj) {
  unsigned pkg;
  int rc = package_id(cpu, &pkg);
  if (rc) {
    bool used;
    int drc = daemon_energy(cpu, pkg_mj, has_dram, dram_mj, &used);
    return used ? drc : rc;
  }
  uint64_t uj, duj = 0;
  bool dram = false;
  if ((rc = zeus__rapl_read_uj(pkg, &uj, &dram, &duj))) return rc;
  *pkg_mj = uj / 1000;
  if (has_dram) *has_dram = dram;
  if (dram && dram_mj) *dram_mj = duj / 1000;
  return ZEUS_OK;
}

int zeus_cpu_energy_range(unsigned cpu, uint64_t *pkg_max_mj, uint64_t *dram_max_mj) {
  unsigned pkg;
  uint64_t a, b;
  if (package_id(cpu, &pkg) != ZEUS_OK) {
    zeus__zeusd *z;
    json_t *c = daemon_cpu(cpu, &z);
    if (!c) return zeus_errcode();
    json_t *r = json_object_get(c, "energy_range_uj"), *dr = json_object_get(c, "dram_energy_range_uj");
    a = json_is_integer(r) ? (uint64_t)json_integer_value(r) : UINT64_MAX;
    b = json_is_integer(dr) ? (uint64_t)json_integer_value(dr) : UINT64_MAX;
  } else {
    zeus__rapl_range_uj(pkg, &a, &b);
  }
  if (pkg_max_mj) *pkg_max_mj = a / 1000;
  if (dram_max_mj) *dram_max_mj = b / 1000;
  return ZEUS_OK;
}
