/* CPU package and DRAM energy through Intel RAPL (/sys/class/powercap/intel-rapl:<pkg>[:<sub>]).
 * The root is ZEUS_RAPL_ROOT when set (tests and benchmarks point it at a fake tree). Energy files
 * are in µJ.
 *
 * One scan of the root finds the zones: the folder is listed once (no probing of numbered paths)
 * and each energy file is opened once, so that a reading is one pread() per zone. A sysfs
 * attribute is produced afresh by every read at offset 0, which is what pread(fd, .., 0) does. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/rapl.h"
#include "device/zeusd_client.h"

typedef struct zone {
  unsigned id;           /* N of intel-rapl:N */
  int fd, dram_fd;       /* energy_uj, open; dram_fd -1 without a DRAM zone */
  uint64_t range_uj, dram_range_uj;
  zeus_cpu_zone info;
} zone;

struct zeus__rapl {
  unsigned n, unreadable;
  zone z[ZEUS_MAX_CPUS];
  char why[640];
  zeus__zeusd *remote; /* the daemon's packages (borrowed shared client), or NULL */
};

static const char *rapl_root(void);
const char *zeus__rapl_root(void) { return rapl_root(); }

static const char *rapl_root(void) {
  const char *r = zeus__env_str("ZEUS_RAPL_ROOT");
  return r ? r : "/sys/class/powercap";
}

/* Reads a decimal counter at offset 0 of an open file. */
static int pread_u64(int fd, uint64_t *out) {
  char buf[32];
  ssize_t n;
  do n = pread(fd, buf, sizeof buf - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return -1;
  buf[n] = '\0';
  uint64_t v = 0;
  const char *p = buf;
  if (*p < '0' || *p > '9') return -1;
  for (; *p >= '0' && *p <= '9'; p++) v = v * 10 + (uint64_t)(*p - '0');
  *out = v;
  return 0;
}

/* Opens an energy file (a regular file: sysfs links the zone folders, never the files) and
 * reads it once to see that it can be read; -1 with errno set when not. */
static int open_counter(const char *path, uint64_t *first) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  errno = 0;
  if (pread_u64(fd, first) != 0) {
    int err = errno ? errno : EIO;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

static void read_text(const char *path, char *buf, size_t len) {
  buf[0] = '\0';
  FILE *f = fopen(path, "re");
  if (!f) return;
  if (fgets(buf, (int)len, f)) buf[strcspn(buf, "\n")] = '\0';
  else buf[0] = '\0';
  fclose(f);
}

static uint64_t read_range(const char *dir_path) {
  char path[600];
  snprintf(path, sizeof path, "%s/max_energy_range_uj", dir_path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  uint64_t v = UINT64_MAX;
  if (fd >= 0) {
    if (pread_u64(fd, &v) != 0 || v == 0) v = UINT64_MAX;
    close(fd);
  }
  return v;
}

/* "intel-rapl:N" (sub < 0) or "intel-rapl:N:M". */
static bool parse_zone_name(const char *name, unsigned *pkg, int *sub) {
  if (strncmp(name, "intel-rapl:", 11) != 0) return false;
  const char *p = name + 11;
  char *end;
  if (*p < '0' || *p > '9') return false;
  unsigned long a = strtoul(p, &end, 10);
  if (a > 1000000) return false;
  *pkg = (unsigned)a;
  *sub = -1;
  if (*end == '\0') return true;
  if (*end != ':' || end[1] < '0' || end[1] > '9') return false;
  unsigned long b = strtoul(end + 1, &end, 10);
  if (*end != '\0' || b > 1000) return false;
  *sub = (int)b;
  return true;
}

static int cmp_zone(const void *a, const void *b) {
  unsigned x = ((const zone *)a)->id, y = ((const zone *)b)->id;
  return x < y ? -1 : x > y;
}

int zeus__rapl_open_local(zeus__rapl **out) {
  zeus__rapl *r = calloc(1, sizeof *r);
  if (!r) return zeus__oom("scanning the RAPL zones");
  const char *root = rapl_root();
  DIR *dir = opendir(root);
  if (!dir) {
    snprintf(r->why, sizeof r->why, "no RAPL: cannot read the folder %s: %s", root, strerror(errno));
    *out = r;
    return ZEUS_OK;
  }
  /* Packages first; their DRAM sub-zones in a second pass over the names seen. */
  unsigned seen = 0, unreadable = 0;
  int unreadable_errno = 0;
  char first_unreadable[560] = "";
  struct sub_zone {
    unsigned pkg;
    int sub;
  } subs[256];
  unsigned nsubs = 0;
  struct dirent *e;
  while ((e = readdir(dir))) {
    unsigned pkg;
    int sub;
    if (!parse_zone_name(e->d_name, &pkg, &sub)) continue;
    if (sub >= 0) {
      if (nsubs < sizeof subs / sizeof subs[0]) subs[nsubs++] = (struct sub_zone){pkg, sub};
      continue;
    }
    seen++;
    char path[560];
    snprintf(path, sizeof path, "%s/%s/energy_uj", root, e->d_name);
    uint64_t v;
    errno = 0;
    int fd = open_counter(path, &v);
    if (fd < 0) {
      if (!unreadable++) {
        unreadable_errno = errno;
        snprintf(first_unreadable, sizeof first_unreadable, "%s", path);
      }
      continue;
    }
    if (r->n == ZEUS_MAX_CPUS) {
      close(fd);
      zeus__log(ZEUS_LOG_WARN, "rapl", "more than %d RAPL packages under %s; measuring the first %d", ZEUS_MAX_CPUS,
                root, ZEUS_MAX_CPUS);
      continue;
    }
    zone *z = &r->z[r->n++];
    memset(z, 0, sizeof *z);
    z->id = pkg;
    z->fd = fd;
    z->dram_fd = -1;
    z->info.zone = pkg;
    snprintf(z->info.energy_path, sizeof z->info.energy_path, "%s", path);
    snprintf(path, sizeof path, "%s/%s", root, e->d_name);
    z->range_uj = read_range(path);
    z->dram_range_uj = UINT64_MAX;
    char name_path[600];
    snprintf(name_path, sizeof name_path, "%s/name", path);
    read_text(name_path, z->info.name, sizeof z->info.name);
  }
  closedir(dir);
  r->unreadable = unreadable;
  qsort(r->z, r->n, sizeof r->z[0], cmp_zone);
  for (unsigned k = 0; k < nsubs; k++) {
    zone *z = NULL;
    for (unsigned c = 0; c < r->n && !z; c++)
      if (r->z[c].id == subs[k].pkg) z = &r->z[c];
    if (!z || z->dram_fd >= 0) continue;
    char dir_path[560], text[64], path[600];
    snprintf(dir_path, sizeof dir_path, "%s/intel-rapl:%u:%d", root, subs[k].pkg, subs[k].sub);
    snprintf(path, sizeof path, "%s/name", dir_path);
    read_text(path, text, sizeof text);
    if (strcmp(text, "dram") != 0) continue;
    snprintf(path, sizeof path, "%s/energy_uj", dir_path);
    uint64_t v;
    int fd = open_counter(path, &v);
    if (fd < 0) continue;
    z->dram_fd = fd;
    z->dram_range_uj = read_range(dir_path);
    z->info.has_dram = true;
    snprintf(z->info.dram_path, sizeof z->info.dram_path, "%s", path);
  }
  if (r->n == 0) {
    if (seen == 0)
      snprintf(r->why, sizeof r->why,
               "no RAPL zone (intel-rapl:N) in %s: this CPU or kernel exposes no RAPL energy counters", root);
    else
      snprintf(r->why, sizeof r->why,
               "%u RAPL zone%s in %s but no readable energy counter: %s: %s%s", seen, seen == 1 ? "" : "s", root,
               first_unreadable, strerror(unreadable_errno ? unreadable_errno : EIO),
               unreadable_errno == EACCES || unreadable_errno == EPERM
                   ? " (since Linux 5.10 only root can read RAPL energy)"
                   : "");
  }
  *out = r;
  return ZEUS_OK;
}

/* The daemon's packages, when this process reads none itself. */
static void open_remote(zeus__rapl *r) {
  zeus__zeusd *z = zeus__zeusd_shared();
  if (!z) return;
  json_t *cpus = json_object_get(zeus__zeusd_discover(z), "cpus");
  if (!json_is_array(cpus) || json_array_size(cpus) == 0) return;
  size_t i;
  json_t *c;
  json_array_foreach(cpus, i, c) {
    if (r->n == ZEUS_MAX_CPUS || !json_is_integer(json_object_get(c, "id"))) break;
    zone *x = &r->z[r->n++];
    memset(x, 0, sizeof *x);
    x->id = (unsigned)json_integer_value(json_object_get(c, "id"));
    x->fd = x->dram_fd = -1;
    json_t *rg = json_object_get(c, "energy_range_uj"), *drg = json_object_get(c, "dram_energy_range_uj");
    x->range_uj = json_is_integer(rg) ? (uint64_t)json_integer_value(rg) : UINT64_MAX;
    x->dram_range_uj = json_is_integer(drg) ? (uint64_t)json_integer_value(drg) : UINT64_MAX;
    x->info.zone = x->id;
    x->info.has_dram = json_is_true(json_object_get(c, "dram_available"));
    snprintf(x->info.energy_path, sizeof x->info.energy_path, "zeusd:%s/cpu/%u", zeus__zeusd_endpoint(z), x->id);
    if (x->info.has_dram)
      snprintf(x->info.dram_path, sizeof x->info.dram_path, "zeusd:%s/cpu/%u/dram", zeus__zeusd_endpoint(z), x->id);
  }
  r->remote = z;
  zeus__log(ZEUS_LOG_DEBUG, "rapl", "%s; reading %u CPU package%s through the daemon at %s", r->why, r->n,
            r->n == 1 ? "" : "s", zeus__zeusd_endpoint(z));
  r->why[0] = '\0';
}

int zeus__rapl_open(zeus__rapl **out) {
  int rc = zeus__rapl_open_local(out);
  if (!rc && (*out)->n == 0) open_remote(*out);
  return rc;
}

unsigned zeus__rapl_unreadable(const zeus__rapl *r) { return r ? r->unreadable : 0; }
bool zeus__rapl_remote(const zeus__rapl *r) { return r && r->remote; }

static int read_remote(zeus__rapl *r, unsigned cpu, uint64_t *pkg_uj, uint64_t *dram_uj) {
  zone *z = &r->z[cpu];
  char path[128], key[16];
  snprintf(path, sizeof path, "/cpu/get_cumulative_energy?cpu_ids=%u&cpu=true&dram=%s", z->id,
           z->info.has_dram ? "true" : "false");
  snprintf(key, sizeof key, "%u", z->id);
  json_t *root;
  int rc = zeus__zeusd_get(r->remote, path, (int)z->id, &root);
  if (rc) return rc;
  json_t *o = json_object_get(root, key), *e = json_object_get(o, "cpu_energy_uj"),
         *d = json_object_get(o, "dram_energy_uj");
  if (!json_is_integer(e)) rc = zeus__error(ZEUS_EHTTP, "zeus daemon at %s: no cpu_energy_uj for CPU %u",
                                            zeus__zeusd_endpoint(r->remote), z->id);
  else {
    *pkg_uj = (uint64_t)json_integer_value(e);
    if (z->info.has_dram && json_is_integer(d)) *dram_uj = (uint64_t)json_integer_value(d);
  }
  json_decref(root);
  return rc;
}

void zeus__rapl_close(zeus__rapl *r) {
  if (!r) return;
  for (unsigned c = 0; c < r->n && !r->remote; c++) {
    close(r->z[c].fd);
    if (r->z[c].dram_fd >= 0) close(r->z[c].dram_fd);
  }
  free(r);
}

unsigned zeus__rapl_count(const zeus__rapl *r) { return r ? r->n : 0; }
const char *zeus__rapl_why(const zeus__rapl *r) { return r ? r->why : ""; }
bool zeus__rapl_has_dram(const zeus__rapl *r, unsigned cpu) { return cpu < r->n && r->z[cpu].info.has_dram; }

void zeus__rapl_info(const zeus__rapl *r, unsigned cpu, zeus_cpu_zone *out) { *out = r->z[cpu].info; }

void zeus__rapl_range(const zeus__rapl *r, unsigned cpu, uint64_t *pkg_max_uj, uint64_t *dram_max_uj) {
  if (pkg_max_uj) *pkg_max_uj = r->z[cpu].range_uj;
  if (dram_max_uj) *dram_max_uj = r->z[cpu].dram_range_uj;
}

int zeus__rapl_read(zeus__rapl *r, unsigned cpu, uint64_t *pkg_uj, uint64_t *dram_uj) {
  if (r->remote) return read_remote(r, cpu, pkg_uj, dram_uj);
  zone *z = &r->z[cpu];
  if (pread_u64(z->fd, pkg_uj) != 0)
    return zeus__error(ZEUS_EIO, "cannot read the RAPL counter '%s': %s", z->info.energy_path,
                       errno ? strerror(errno) : "not a number");
  if (z->dram_fd >= 0 && pread_u64(z->dram_fd, dram_uj) != 0)
    return zeus__error(ZEUS_EIO, "cannot read the RAPL counter '%s': %s", z->info.dram_path,
                       errno ? strerror(errno) : "not a number");
  return ZEUS_OK;
}

/* ---- the one-shot public functions: one scan each ---- */

static int scan_for(unsigned cpu, zeus__rapl **out) {
  int rc = zeus__rapl_open(out);
  if (rc) return rc;
  if (cpu < (*out)->n) return ZEUS_OK;
  zeus__rapl *r = *out;
  if (r->n == 0) rc = zeus__error(ZEUS_ENOENT, "%s", r->why);
  else
    rc = zeus__error(ZEUS_ENOENT, "CPU package %u has no readable RAPL energy counter under %s (%u readable)", cpu,
                     rapl_root(), r->n);
  zeus__rapl_close(r);
  *out = NULL;
  return rc;
}

unsigned zeus_cpu_count(void) {
  zeus__rapl *r;
  if (zeus__rapl_open(&r)) return 0;
  unsigned n = r->n;
  zeus__rapl_close(r);
  return n;
}

int zeus_cpu_zone_info(unsigned cpu, zeus_cpu_zone *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_cpu_zone_info: out is required");
  zeus__rapl *r;
  int rc = scan_for(cpu, &r);
  if (rc) return rc;
  zeus__rapl_info(r, cpu, out);
  zeus__rapl_close(r);
  return ZEUS_OK;
}

int zeus_cpu_energy(unsigned cpu, uint64_t *pkg_mj, bool *has_dram, uint64_t *dram_mj) {
  if (!pkg_mj) return zeus__error(ZEUS_EINVAL, "zeus_cpu_energy: pkg_mj is required");
  zeus__rapl *r;
  int rc = scan_for(cpu, &r);
  if (rc) return rc;
  uint64_t pkg = 0, dram = 0;
  rc = zeus__rapl_read(r, cpu, &pkg, &dram);
  if (!rc) {
    *pkg_mj = pkg / 1000;
    if (has_dram) *has_dram = zeus__rapl_has_dram(r, cpu);
    if (dram_mj && zeus__rapl_has_dram(r, cpu)) *dram_mj = dram / 1000;
  }
  zeus__rapl_close(r);
  return rc;
}

int zeus_cpu_energy_range(unsigned cpu, uint64_t *pkg_max_mj, uint64_t *dram_max_mj) {
  zeus__rapl *r;
  int rc = scan_for(cpu, &r);
  if (rc) return rc;
  uint64_t p, d;
  zeus__rapl_range(r, cpu, &p, &d);
  if (pkg_max_mj) *pkg_max_mj = p / 1000;
  if (dram_max_mj) *dram_max_mj = d / 1000;
  zeus__rapl_close(r);
  return ZEUS_OK;
}
