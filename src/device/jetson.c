/* NVIDIA Jetson power rails: the INA3221 monitors in sysfs (zeus/soc.h says where and how).
 *
 * One scan at open finds the rails and opens their files; a reading is then one pread() per file
 * at offset 0, which sysfs answers afresh each time. The scan lists folders in name order, so
 * that which file wins when two name the same rail does not depend on the order of a directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"
#include "zeus/soc.h"

typedef struct soc_rail {
  zeus_soc_rail_desc info;
  int pfd, vfd, cfd; /* power, voltage, current; -1 when unused */
} soc_rail;

struct zeus_soc {
  soc_rail r[ZEUS_SOC_NUM_RAILS];
};

const char *zeus_soc_rail_name(zeus_soc_rail rail) {
  switch (rail) {
  case ZEUS_SOC_RAIL_CPU: return "cpu";
  case ZEUS_SOC_RAIL_GPU: return "gpu";
  case ZEUS_SOC_RAIL_TOTAL: return "total";
  }
  return "unknown";
}

const char *zeus_soc_jetson_root(void) {
  const char *r = zeus__env_str("ZEUS_JETSON_ROOT");
  return r ? r : "/sys";
}

bool zeus_soc_jetson_available(void) {
  if (zeus__env_str("ZEUS_JETSON_ROOT")) return true;
#if defined(__linux__) && defined(__aarch64__)
  return access("/usr/lib/aarch64-linux-gnu/tegra", F_OK) == 0 || access("/etc/nv_tegra_release", F_OK) == 0;
#else
  return false;
#endif
}

const char *zeus_soc_kind(const zeus_soc *s) { return s ? "jetson" : "none"; }

/* Reads a decimal number (an optional sign, digits, an optional fraction, then only white space)
 * at offset 0 of an open file; ZEUS_EIO naming `path` otherwise. */
static int pread_number(int fd, const char *path, double *out) {
  char buf[64];
  ssize_t n;
  do n = pread(fd, buf, sizeof buf - 1, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0) return zeus__error(ZEUS_EIO, "cannot read the Jetson rail file '%s': %s", path, strerror(errno));
  buf[n] = '\0';
  const char *p = buf + strspn(buf, " \t");
  if (*p == '-' || *p == '+') p++;
  bool starts = (*p >= '0' && *p <= '9') || (*p == '.' && p[1] >= '0' && p[1] <= '9');
  char *end = buf;
  errno = 0;
  double v = starts && !strpbrk(buf, "xX") ? strtod(buf, &end) : 0;
  end += strspn(end, " \t\r\n");
  if (!starts || end == buf || *end || errno == ERANGE || !isfinite(v)) {
    buf[strcspn(buf, "\n")] = '\0';
    return zeus__error(ZEUS_EIO, "the Jetson rail file '%s' holds '%.40s': expected a decimal number", path, buf);
  }
  *out = v;
  return ZEUS_OK;
}

/* Opens a rail file without following a link in its last component. -1 with *missing set when
 * it does not exist (the rail is then skipped, as the original skips it); an error naming the
 * file for anything else. */
static int open_rail_file(const char *path, int *fd, bool *missing) {
  *missing = false;
  *fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (*fd >= 0) {
    struct stat st;
    if (fstat(*fd, &st) == 0 && S_ISREG(st.st_mode)) return ZEUS_OK;
    close(*fd);
    *fd = -1;
    return zeus__error(ZEUS_EIO, "the Jetson rail file '%s' is not a regular file", path);
  }
  if (errno == ENOENT || errno == ENOTDIR) {
    *missing = true;
    return ZEUS_OK;
  }
  if (errno == ELOOP)
    return zeus__error(ZEUS_EIO, "the Jetson rail file '%s' is a symbolic link: refused (sysfs links folders, "
                                 "never attribute files)", path);
  return zeus__error(ZEUS_EIO, "cannot open the Jetson rail file '%s': %s%s", path, strerror(errno),
                     errno == EACCES ? " (needs read permission on the INA3221 files)" : "");
}

static void close_rail(soc_rail *r) {
  if (r->pfd >= 0) close(r->pfd);
  if (r->vfd >= 0) close(r->vfd);
  if (r->cfd >= 0) close(r->cfd);
  r->pfd = r->vfd = r->cfd = -1;
}

void zeus_soc_close(zeus_soc *s) {
  if (!s) return;
  for (int k = 0; k < ZEUS_SOC_NUM_RAILS; k++) close_rail(&s->r[k]);
  free(s);
}

/* Which rail a name means, as the original maps it; -1 for a rail not measured. */
static int classify(const char *name) {
  char low[64];
  size_t i = 0;
  for (; name[i] && i < sizeof low - 1; i++) low[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
  low[i] = '\0';
  if (strstr(low, "cpu")) return ZEUS_SOC_RAIL_CPU;
  if (strstr(low, "gpu")) return ZEUS_SOC_RAIL_GPU;
  if (strstr(low, "system") || strstr(low, "_in") || strstr(low, "total")) return ZEUS_SOC_RAIL_TOTAL;
  return -1;
}

/* The first line of a small text file, trimmed; "" when unreadable. */
static void read_label(const char *path, char *buf, size_t len) {
  buf[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  ssize_t n = pread(fd, buf, len - 1, 0);
  close(fd);
  if (n <= 0) {
    buf[0] = '\0';
    return;
  }
  buf[n] = '\0';
  buf[strcspn(buf, "\r\n")] = '\0';
  size_t e = strlen(buf);
  while (e && (buf[e - 1] == ' ' || buf[e - 1] == '\t')) buf[--e] = '\0';
  size_t b = strspn(buf, " \t");
  memmove(buf, buf + b, e - b + 1);
}

/* Rail `idx` (its index as text) named `label` in folder `dir`: the label layout (in<N>_label)
 * or the rail_name layout. Fills r when its files are there; leaves it alone when they are not. */
static int try_rail(zeus_soc *s, const char *dir, const char *label, const char *idx, bool label_layout) {
  int which = classify(label);
  if (which < 0) {
    zeus__log(ZEUS_LOG_DEBUG, "jetson", "rail '%s' in %s is not measured (neither CPU, GPU nor total)", label, dir);
    return ZEUS_OK;
  }
  soc_rail *r = &s->r[which];
  if (r->info.present) {
    zeus__log(ZEUS_LOG_DEBUG, "jetson", "rail '%s' in %s: the %s rail is already '%s'", label, dir,
              zeus_soc_rail_name((zeus_soc_rail)which), r->info.label);
    return ZEUS_OK;
  }
  soc_rail c = {.pfd = -1, .vfd = -1, .cfd = -1};
  snprintf(c.info.label, sizeof c.info.label, "%s", label);
  const char *pf = label_layout ? "power%s_input" : "in_power%s_input";
  const char *vf = label_layout ? "in%s_input" : "in_voltage%s_input";
  const char *cf = label_layout ? "curr%s_input" : "in_current%s_input";
  char name[64];
  bool missing;
  int rc;
  snprintf(name, sizeof name, pf, idx);
  if (snprintf(c.info.power_path, sizeof c.info.power_path, "%s/%s", dir, name) >= (int)sizeof c.info.power_path)
    return zeus__error(ZEUS_EIO, "Jetson rail folder path too long: %s", dir);
  if ((rc = open_rail_file(c.info.power_path, &c.pfd, &missing))) return rc;
  if (!missing) {
    double mw;
    if ((rc = pread_number(c.pfd, c.info.power_path, &mw))) {
      close_rail(&c);
      return rc;
    }
    c.info.direct = true;
  } else {
    c.info.power_path[0] = '\0';
    snprintf(name, sizeof name, vf, idx);
    snprintf(c.info.voltage_path, sizeof c.info.voltage_path, "%s/%s", dir, name);
    snprintf(name, sizeof name, cf, idx);
    snprintf(c.info.current_path, sizeof c.info.current_path, "%s/%s", dir, name);
    bool vmissing = false, cmissing = false;
    double x;
    if ((rc = open_rail_file(c.info.voltage_path, &c.vfd, &vmissing)) ||
        (rc = open_rail_file(c.info.current_path, &c.cfd, &cmissing))) {
      close_rail(&c);
      return rc;
    }
    if (vmissing || cmissing) {
      close_rail(&c);
      zeus__log(ZEUS_LOG_DEBUG, "jetson", "rail '%s' in %s has neither a power file nor voltage and current", label,
                dir);
      return ZEUS_OK;
    }
    if ((rc = pread_number(c.vfd, c.info.voltage_path, &x)) || (rc = pread_number(c.cfd, c.info.current_path, &x))) {
      close_rail(&c);
      return rc;
    }
  }
  c.info.present = true;
  *r = c;
  return ZEUS_OK;
}

static int not_hidden(const struct dirent *e) { return e->d_name[0] != '.'; }

/* Rails in one folder: in<N>_label and rail_name_<N> files, in name order. */
static int scan_folder(zeus_soc *s, const char *dir) {
  struct dirent **list;
  int n = scandir(dir, &list, not_hidden, alphasort);
  if (n < 0) return ZEUS_OK; /* not a folder */
  int rc = ZEUS_OK;
  for (int i = 0; i < n; i++) {
    const char *f = list[i]->d_name;
    size_t len = strlen(f);
    char idx[32] = "", path[1024], label[64];
    bool label_layout = false;
    if (strncmp(f, "in", 2) == 0 && len > 8 && strcmp(f + len - 6, "_label") == 0 && len - 8 < sizeof idx) {
      memcpy(idx, f + 2, len - 8);
      idx[len - 8] = '\0';
      label_layout = true;
    } else if (strncmp(f, "rail_name_", 10) == 0 && f[10] && len - 10 < sizeof idx) {
      snprintf(idx, sizeof idx, "%s", f + 10);
    } else {
      continue;
    }
    if (strspn(idx, "0123456789") != strlen(idx)) continue;
    snprintf(path, sizeof path, "%s/%s", dir, f);
    read_label(path, label, sizeof label);
    if (!label[0]) continue;
    if (!rc) rc = try_rail(s, dir, label, idx, label_layout);
  }
  for (int i = 0; i < n; i++) free(list[i]);
  free(list);
  return rc;
}

/* <driver>/<device>/<sub> and <driver>/<device>/<sub>/hwmon*, in name order. */
static int scan_driver(zeus_soc *s, const char *driver) {
  struct dirent **devs;
  int nd = scandir(driver, &devs, not_hidden, alphasort), rc = ZEUS_OK;
  for (int i = 0; i < nd; i++) {
    char dev[1024];
    snprintf(dev, sizeof dev, "%s/%s", driver, devs[i]->d_name);
    struct dirent **subs;
    int ns = rc ? -1 : scandir(dev, &subs, not_hidden, alphasort);
    for (int j = 0; j < ns; j++) {
      char sub[1024];
      snprintf(sub, sizeof sub, "%s/%s", dev, subs[j]->d_name);
      if (!rc) rc = scan_folder(s, sub);
      struct dirent **hw;
      int nh = rc ? -1 : scandir(sub, &hw, not_hidden, alphasort);
      for (int h = 0; h < nh; h++) {
        if (!rc && strncmp(hw[h]->d_name, "hwmon", 5) == 0) {
          char hp[1024];
          snprintf(hp, sizeof hp, "%s/%s", sub, hw[h]->d_name);
          rc = scan_folder(s, hp);
        }
        free(hw[h]);
      }
      if (nh >= 0) free(hw);
      free(subs[j]);
    }
    if (ns >= 0) free(subs);
    free(devs[i]);
  }
  if (nd >= 0) free(devs);
  return rc;
}

int zeus_soc_open(zeus_soc **out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_soc_open: out is required");
  if (!zeus_soc_jetson_available())
    return zeus__error(ZEUS_ENOENT,
                       "no NVIDIA Jetson here (not Linux on aarch64 with /usr/lib/aarch64-linux-gnu/tegra or "
                       "/etc/nv_tegra_release, and ZEUS_JETSON_ROOT is not set)");
  zeus_soc *s = calloc(1, sizeof *s);
  if (!s) return zeus__oom("opening the Jetson rails");
  for (int k = 0; k < ZEUS_SOC_NUM_RAILS; k++) s->r[k].pfd = s->r[k].vfd = s->r[k].cfd = -1;
  const char *root = zeus_soc_jetson_root();
  char driver[1024] = "";
  struct stat st;
  static const char *const names[] = {"ina3221x", "ina3221"}; /* older kernels, newer kernels */
  for (int i = 0; i < 2 && !driver[0]; i++) {
    char p[1024];
    snprintf(p, sizeof p, "%s/bus/i2c/drivers/%s", root, names[i]);
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(driver, sizeof driver, "%s", p);
  }
  if (!driver[0]) {
    zeus_soc_close(s);
    return zeus__error(ZEUS_ENOENT,
                       "no INA3221 power monitor on this Jetson: neither %s/bus/i2c/drivers/ina3221x nor "
                       "%s/bus/i2c/drivers/ina3221 is a folder",
                       root, root);
  }
  int rc = scan_driver(s, driver);
  if (rc) {
    zeus_soc_close(s);
    return rc;
  }
  if (!s->r[0].info.present && !s->r[1].info.present && !s->r[2].info.present) {
    zeus_soc_close(s);
    return zeus__error(ZEUS_ENOENT,
                       "no measurable rail under %s: expected rail_name_<N> or in<N>_label files naming a CPU, GPU "
                       "or total (VDD_IN, system) rail, with a power file or voltage and current files",
                       driver);
  }
  for (int k = 0; k < ZEUS_SOC_NUM_RAILS; k++)
    if (s->r[k].info.present)
      zeus__log(ZEUS_LOG_DEBUG, "jetson", "%s rail: '%s' from %s", zeus_soc_rail_name((zeus_soc_rail)k),
                s->r[k].info.label, s->r[k].info.direct ? s->r[k].info.power_path : s->r[k].info.voltage_path);
  *out = s;
  return ZEUS_OK;
}

bool zeus_soc_has_rail(const zeus_soc *s, zeus_soc_rail rail) {
  return s && (unsigned)rail < ZEUS_SOC_NUM_RAILS && s->r[rail].info.present;
}

int zeus_soc_rail_info(const zeus_soc *s, zeus_soc_rail rail, zeus_soc_rail_desc *out) {
  if (!s || !out || (unsigned)rail >= ZEUS_SOC_NUM_RAILS)
    return zeus__error(ZEUS_EINVAL, "zeus_soc_rail_info: a handle, a rail 0..%d and out are required",
                       ZEUS_SOC_NUM_RAILS - 1);
  *out = s->r[rail].info;
  return ZEUS_OK;
}

int zeus_soc_power(zeus_soc *s, zeus_soc_rail rail, double *mw) {
  if (!s || !mw || (unsigned)rail >= ZEUS_SOC_NUM_RAILS)
    return zeus__error(ZEUS_EINVAL, "zeus_soc_power: a handle, a rail 0..%d and out are required",
                       ZEUS_SOC_NUM_RAILS - 1);
  soc_rail *r = &s->r[rail];
  if (!r->info.present)
    return zeus__error(ZEUS_ENOTSUP, "this Jetson has no %s rail", zeus_soc_rail_name(rail));
  int rc;
  if (r->info.direct) return pread_number(r->pfd, r->info.power_path, mw);
  double mv, ma;
  if ((rc = pread_number(r->vfd, r->info.voltage_path, &mv)) || (rc = pread_number(r->cfd, r->info.current_path, &ma)))
    return rc;
  *mw = mv * ma / 1000.0;
  return ZEUS_OK;
}
