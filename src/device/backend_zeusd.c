/* GPUs through a zeus daemon (or the original zeusd), in three forms:
 *
 *   "nvml+zeusd" (hybrid): NVML is loaded in this process for what it may do unprivileged
 *       (names, energy, power, temperature, clocks); every setting (power limit, persistence
 *       mode, locked clocks), read or written, goes to the daemon, which holds the privilege and
 *       is the one authority on what is set (a daemon that serves no gpu-read, only gpu-control,
 *       or a token without the gpu-read scope, cannot say: the settings are then read here, so a
 *       control-only token can set caps). GPUs are matched to the daemon's by UUID (by index when
 *       the daemon does not say UUIDs, as the original zeusd does not).
 *   "amdsmi+zeusd" (hybrid, the original's ZeusdAMDGPU): the same over a local amdsmi; each GPU is
 *       matched to the daemon's by PCI address (amdsmi_get_gpu_device_bdf here, /discover's
 *       pci_address there), since HIP's numbering here need not be the daemon's. A GPU in use that
 *       matches none of the daemon's GPUs, or more than one, fails the open naming its address
 *       and the daemon's GPUs.
 *   "zeusd" (remote): no vendor library here (none installed, or ZEUS_GPU_BACKEND=zeusd): every
 *       reading comes from the daemon too; what its API cannot say (temperature, clocks, clock
 *       lists) is not supported.
 *
 * Changes are made under the handle's lease; restoring the handle releases it, and the daemon
 * puts back what the handle changed. If the process dies, the daemon does the same by itself. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "device/backend.h"
#include "device/zeusd_client.h"

#define NO_GPU 0xffffffffu

static const char *str_or(const json_t *v, const char *def) {
  const char *s = json_string_value(v);
  return s ? s : def;
}

typedef struct zd_gpu {
  unsigned daemon;       /* the daemon's index, NO_GPU when it has no such GPU */
  char name[ZEUS_NAME_LEN], uuid[ZEUS_NAME_LEN];
  bool energy_ok;
  bool have_limits;
  unsigned min_mw, max_mw, def_mw;
} zd_gpu;

typedef struct zd_state {
  zeus__zeusd *z;
  const zeus__gpu_backend *local; /* NULL: remote */
  void *lst;
  bool by_pci;       /* match local GPUs to the daemon's by PCI address (amdsmi+zeusd) */
  bool no_gpu_read;  /* the daemon does not serve gpu-read to us: the API group is off (a
                        control-only daemon) or our token lacks the scope; set at open only */
  const bool *used;  /* during the open: the local GPUs in use (NULL: all) */
  unsigned n;
  zd_gpu g[ZEUS_MAX_GPUS];
} zd_state;

static void zd_close(void *st) {
  zd_state *s = st;
  if (!s) return;
  if (s->local) s->local->close(s->lst);
  zeus__zeusd_close(s->z);
  free(s);
}

/* The daemon's id of its k-th /discover entry (an object with "id", or a bare id). */
static unsigned daemon_id(const json_t *o, size_t k) {
  json_t *id = json_is_object(o) ? json_object_get(o, "id") : (json_t *)o;
  return json_is_integer(id) ? (unsigned)json_integer_value(id) : (unsigned)k;
}

/* The daemon's GPUs as the original lists them in its errors: [(0, '0000:01:00.0'), ...]. */
static void daemon_gpu_list(const json_t *gpus, char *buf, size_t len) {
  size_t at = 0;
  at += (size_t)snprintf(buf, len, "[");
  for (size_t k = 0; k < json_array_size(gpus) && at < len; k++) {
    json_t *o = json_array_get(gpus, k);
    at += (size_t)snprintf(buf + at, len - at, "%s(%u, '%s')", k ? ", " : "", daemon_id(o, k),
                           str_or(json_object_get(o, "pci_address"), "?"));
  }
  if (at < len) snprintf(buf + at, len - at, "]");
}

/* amdsmi+zeusd: each local GPU to the one daemon GPU at the same PCI address (case aside). A GPU
 * in use (s->used) with none or several fails the open, as the original's ZeusdAMDGPU does;
 * one not in use is left without a daemon GPU. */
static int map_by_pci(zd_state *s, const json_t *gpus) {
  size_t nd = json_array_size(gpus);
  char list[1024];
  daemon_gpu_list(gpus, list, sizeof list);
  for (unsigned i = 0; i < s->n; i++) {
    zd_gpu *g = &s->g[i];
    g->daemon = NO_GPU;
    bool used = !s->used || s->used[i];
    char pci[64] = "";
    int rc = s->local->pci_address ? s->local->pci_address(s->lst, i, pci, sizeof pci)
                                   : zeus__error(ZEUS_ENOTSUP, "the %s backend cannot say PCI addresses", s->local->name);
    if (rc) {
      if (!used) continue;
      return zeus__error_ctx(rc, "matching HIP GPU %u to a GPU of the zeus daemon at %s by PCI address", i,
                             zeus__zeusd_endpoint(s->z));
    }
    unsigned matches = 0;
    for (size_t k = 0; k < nd; k++) {
      json_t *o = json_array_get(gpus, k);
      const char *dp = json_string_value(json_object_get(o, "pci_address"));
      if (dp && strcasecmp(dp, pci) == 0) {
        matches++;
        g->daemon = daemon_id(o, k);
      }
    }
    if (matches == 1) continue;
    g->daemon = NO_GPU;
    if (!used) {
      zeus__log(ZEUS_LOG_DEBUG, "device", "HIP GPU %u (%s, not in use) matches %u GPUs of the daemon at %s", i, pci,
                matches, zeus__zeusd_endpoint(s->z));
      continue;
    }
    if (matches == 0)
      return zeus__error(ZEUS_ENOENT,
                         "HIP GPU %u has PCI address %s, which is not present on the zeus daemon at %s. Daemon "
                         "GPUs: %s",
                         i, pci, zeus__zeusd_endpoint(s->z), list);
    return zeus__error(ZEUS_ESTATE,
                       "HIP GPU %u has PCI address %s, which matches more than one GPU on the zeus daemon at %s. "
                       "Daemon GPUs: %s",
                       i, pci, zeus__zeusd_endpoint(s->z), list);
  }
  return ZEUS_OK;
}

/* Whether the daemon's /auth/whoami grants our token the gpu-read scope. A daemon without the route
 * (an older zeusd), or any failure, says yes: the reads then try the daemon and, refused, fall back
 * to the local library (local_after). */
static bool token_reads(zd_state *s) {
  json_t *who = NULL;
  if (zeus__zeusd_get(s->z, "/auth/whoami", -1, &who) != ZEUS_OK) return true;
  json_t *scopes = json_object_get(who, "scopes");
  bool read = !json_is_array(scopes);
  for (size_t k = 0; !read && k < json_array_size(scopes); k++)
    read = strcmp(str_or(json_array_get(scopes, k), ""), "gpu-read") == 0;
  json_decref(who);
  if (!read)
    zeus__log(ZEUS_LOG_INFO, "device",
              "the token for the zeus daemon at %s lacks the gpu-read scope: GPU settings are read here, "
              "changes still go to the daemon",
              zeus__zeusd_endpoint(s->z));
  return read;
}

/* Reads the daemon's GPU list; maps local GPUs to it (hybrid) or adopts it (remote). */
static int zd_map(zd_state *s) {
  json_t *disc = zeus__zeusd_discover(s->z);
  if (!disc) return zeus_errcode();
  json_t *gpus = json_object_get(disc, "gpus");
  if (!json_is_array(gpus)) {
    /* zeusd before /discover listed GPUs by object: only gpu_ids. */
    gpus = json_object_get(disc, "gpu_ids");
    if (!json_is_array(gpus))
      return zeus__error(ZEUS_EHTTP, "zeus daemon at %s: /discover lists no GPUs", zeus__zeusd_endpoint(s->z));
  }
  size_t nd = json_array_size(gpus);
  /* A daemon that lists its groups and leaves gpu-read out answers no GET /gpu/...: the hybrids then
   * read the settings here, as the original's ZeusdAMDGPU always does (it needs gpu-control only). */
  json_t *groups = json_object_get(disc, "enabled_api_groups");
  if (json_is_array(groups)) {
    bool read = false;
    for (size_t k = 0; k < json_array_size(groups); k++)
      read = read || strcmp(str_or(json_array_get(groups, k), ""), "gpu-read") == 0;
    s->no_gpu_read = !read;
  }
  if (s->local && !s->no_gpu_read && json_is_true(json_object_get(disc, "auth_required")))
    s->no_gpu_read = !token_reads(s);
  if (!s->local) {
    s->n = nd < ZEUS_MAX_GPUS ? (unsigned)nd : ZEUS_MAX_GPUS;
    for (unsigned i = 0; i < s->n; i++) {
      json_t *o = json_array_get(gpus, i);
      zd_gpu *g = &s->g[i];
      g->daemon = daemon_id(o, i);
      snprintf(g->name, sizeof g->name, "%s", str_or(json_object_get(o, "name"), "GPU via zeusd"));
      snprintf(g->uuid, sizeof g->uuid, "%s", str_or(json_object_get(o, "uuid"), ""));
      g->energy_ok = json_is_true(json_object_get(o, "cumulative_energy_available"));
    }
    return ZEUS_OK;
  }
  s->n = s->local->count(s->lst);
  if (s->n > ZEUS_MAX_GPUS) s->n = ZEUS_MAX_GPUS;
  if (s->by_pci) return map_by_pci(s, gpus);
  bool by_uuid = nd > 0 && json_is_string(json_object_get(json_array_get(gpus, 0), "uuid"));
  for (unsigned i = 0; i < s->n; i++) {
    zd_gpu *g = &s->g[i];
    g->daemon = NO_GPU;
    char uuid[ZEUS_NAME_LEN] = "";
    if (s->local->uuid) s->local->uuid(s->lst, i, uuid, sizeof uuid);
    for (size_t k = 0; k < nd; k++) {
      json_t *o = json_array_get(gpus, k);
      unsigned did = daemon_id(o, k);
      const char *du = json_string_value(json_object_get(o, "uuid"));
      if (by_uuid ? (du && strcasecmp(du, uuid) == 0) : did == i) g->daemon = did;
    }
    if (g->daemon == NO_GPU)
      zeus__log(ZEUS_LOG_WARN, "device",
                "GPU %s (NVML index %u) is not among the GPUs of the daemon at %s: its settings "
                "cannot be changed",
                uuid, i, zeus__zeusd_endpoint(s->z));
  }
  return ZEUS_OK;
}

static int open_common(zd_state *s, const zeus_devices_opts *opts) {
  int rc = zeus__zeusd_open(&s->z, opts ? opts->daemon : NULL, opts ? opts->daemon_token : NULL,
                            opts && opts->keep_settings_on_close,
                            opts && opts->daemon_override);
  if (!rc && !s->z)
    rc = zeus__error(ZEUS_ENOLIB, "backend zeusd: no daemon configured (set ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT)");
  if (!rc) rc = zd_map(s);
  return rc;
}

static int zd_open(void **state, const zeus_devices_opts *opts) {
  zd_state *s = calloc(1, sizeof *s);
  if (!s) return zeus__oom("opening the daemon's GPUs");
  int rc = open_common(s, opts);
  if (rc) { zd_close(s); return rc; }
  *state = s;
  return ZEUS_OK;
}

int zeus__zeusd_hybrid_open(void **state, const zeus__gpu_backend *local, void *lst, const bool *used,
                            const zeus_devices_opts *opts) {
  zd_state *s = calloc(1, sizeof *s);
  if (!s) { local->close(lst); return zeus__oom("opening the GPUs"); }
  s->local = local;
  s->lst = lst;
  s->by_pci = local == &zeus__backend_amdsmi;
  s->used = used;
  int rc = open_common(s, opts);
  s->used = NULL;
  if (rc) { zd_close(s); return rc; }
  *state = s;
  return ZEUS_OK;
}

/* The daemon's index of GPU i, or an error naming it. */
static int dix(zd_state *s, unsigned i, unsigned *d) {
  if (s->g[i].daemon == NO_GPU)
    return zeus__error(ZEUS_ENOENT, "GPU %u is not among the GPUs of the zeus daemon at %s", i,
                       zeus__zeusd_endpoint(s->z));
  *d = s->g[i].daemon;
  return ZEUS_OK;
}

/* GET /gpu/<what>?gpu_ids=<d> and the object of that GPU. */
static int get_gpu(zd_state *s, unsigned i, const char *what, json_t **root, json_t **obj) {
  unsigned d = NO_GPU;
  int rc = dix(s, i, &d);
  if (rc) return rc;
  char path[128];
  snprintf(path, sizeof path, "/gpu/%s?gpu_ids=%u", what, d);
  if ((rc = zeus__zeusd_get(s->z, path, (int)d, root))) {
    if (rc != ZEUS_EPERM || s->local) return rc;
    /* Remote: every reading, and the limits a change reads first, come from the daemon. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", zeus_errmsg());
    return zeus__error(ZEUS_EPERM,
                       "%s (with no GPU library in this process, readings and the settings a change reads first "
                       "come from the daemon: they need its gpu-read API group and, with tokens, the 'gpu-read' "
                       "scope)",
                       msg);
  }
  char key[16];
  snprintf(key, sizeof key, "%u", d);
  json_t *o = json_object_get(strcmp(what, "get_power") == 0 ? json_object_get(*root, "power_mw") : *root, key);
  if (!o) {
    json_decref(*root);
    return zeus__error(ZEUS_EHTTP, "zeus daemon at %s: %s has no entry for GPU %u", zeus__zeusd_endpoint(s->z), what,
                       d);
  }
  *obj = o;
  return ZEUS_OK;
}

static int get_u(zd_state *s, unsigned i, const char *what, const char *field, unsigned long long *out) {
  json_t *root, *o;
  int rc = get_gpu(s, i, what, &root, &o);
  if (rc) return rc;
  json_t *v = field ? json_object_get(o, field) : o;
  if (!json_is_integer(v) || json_integer_value(v) < 0)
    rc = zeus__error(ZEUS_EHTTP, "zeus daemon: %s: '%s' is not a count", what, field ? field : "value");
  else *out = (unsigned long long)json_integer_value(v);
  json_decref(root);
  return rc;
}

static unsigned zd_count(void *st) { return ((zd_state *)st)->n; }

static double zd_now(void *st) {
  zd_state *s = st;
  if (s->local) return s->local->now(s->lst);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int zd_name(void *st, unsigned i, char *buf, size_t len) {
  zd_state *s = st;
  if (s->local) return s->local->name_of(s->lst, i, buf, len);
  snprintf(buf, len, "%s", s->g[i].name);
  return ZEUS_OK;
}

static int zd_uuid(void *st, unsigned i, char *buf, size_t len) {
  zd_state *s = st;
  if (s->local) return s->local->uuid(s->lst, i, buf, len);
  if (!s->g[i].uuid[0])
    return zeus__error(ZEUS_ENOTSUP, "the daemon at %s does not say GPU UUIDs", zeus__zeusd_endpoint(s->z));
  snprintf(buf, len, "%s", s->g[i].uuid);
  return ZEUS_OK;
}

static int zd_counter(void *st, unsigned i, bool *out) {
  zd_state *s = st;
  if (s->local) return s->local->energy_counter_supported(s->lst, i, out);
  *out = s->g[i].energy_ok;
  return ZEUS_OK;
}

static int zd_constraints(void *st, unsigned i, unsigned *lo, unsigned *hi, unsigned *def) {
  zd_state *s = st;
  if (s->local && s->local->power_limit_constraints) return s->local->power_limit_constraints(s->lst, i, lo, hi, def);
  zd_gpu *g = &s->g[i];
  if (!g->have_limits) {
    json_t *root, *o;
    int rc = get_gpu(s, i, "get_power_limit_constraints", &root, &o);
    if (rc) return rc;
    json_t *a = json_object_get(o, "min_power_limit_mw"), *b = json_object_get(o, "max_power_limit_mw");
    json_t *c = json_object_get(o, "default_power_limit_mw");
    if (!json_is_integer(a) || !json_is_integer(b)) {
      json_decref(root);
      return zeus__error(ZEUS_EHTTP, "zeus daemon: get_power_limit_constraints lacks min/max_power_limit_mw");
    }
    g->min_mw = (unsigned)json_integer_value(a);
    g->max_mw = (unsigned)json_integer_value(b);
    /* The original zeusd does not say the default: the maximum is the usual one. */
    g->def_mw = json_is_integer(c) ? (unsigned)json_integer_value(c) : g->max_mw;
    g->have_limits = true;
    json_decref(root);
  }
  *lo = g->min_mw;
  *hi = g->max_mw;
  *def = g->def_mw;
  return ZEUS_OK;
}

/* A setting's read through the daemon was refused (`rc`, 401/403: a token without the gpu-read scope
 * that /auth/whoami did not reveal): true when the local library reads it instead (the hybrids). */
static bool local_after(zd_state *s, int rc, bool have_local, const char *what) {
  if (rc != ZEUS_EPERM || !s->local || !have_local) return false;
  zeus__log(ZEUS_LOG_DEBUG, "device", "the zeus daemon at %s refused reading %s (%s): read here instead",
            zeus__zeusd_endpoint(s->z), what, zeus_errmsg());
  return true;
}

static int zd_get_pl(void *st, unsigned i, unsigned *mw) {
  zd_state *s = st;
  bool local = s->local && s->local->get_power_limit;
  if (local && s->no_gpu_read) return s->local->get_power_limit(s->lst, i, mw);
  unsigned long long v;
  int rc = get_u(st, i, "get_power_limit", "power_limit_mw", &v);
  if (!rc) *mw = (unsigned)v;
  else if (local_after(s, rc, local, "the power limit")) rc = s->local->get_power_limit(s->lst, i, mw);
  return rc;
}

static int write_op(zd_state *s, unsigned i, const char *op, const char *extra) {
  unsigned d = NO_GPU;
  int rc = dix(s, i, &d);
  return rc ? rc : zeus__zeusd_write(s->z, op, d, extra);
}

static int zd_set_pl(void *st, unsigned i, unsigned mw) {
  char extra[48];
  snprintf(extra, sizeof extra, "power_limit_mw=%u", mw);
  return write_op(st, i, "set_power_limit", extra);
}

static int zd_get_pm(void *st, unsigned i, bool *on) {
  zd_state *s = st;
  bool local = s->local && s->local->get_persistence_mode;
  if (local && s->no_gpu_read) return s->local->get_persistence_mode(s->lst, i, on);
  json_t *root, *o;
  int rc = get_gpu(st, i, "get_persistence_mode", &root, &o);
  if (rc) return local_after(s, rc, local, "persistence mode") ? s->local->get_persistence_mode(s->lst, i, on) : rc;
  json_t *v = json_object_get(o, "enabled");
  if (!json_is_boolean(v))
    rc = zeus__error(ZEUS_EHTTP, "zeus daemon: get_persistence_mode: 'enabled' is not a boolean");
  else *on = json_is_true(v);
  json_decref(root);
  return rc;
}

static int zd_set_pm(void *st, unsigned i, bool on) {
  return write_op(st, i, "set_persistence_mode", on ? "enabled=true" : "enabled=false");
}

static int zd_energy(void *st, unsigned i, uint64_t *mj) {
  zd_state *s = st;
  if (s->local) return s->local->total_energy(s->lst, i, mj);
  unsigned long long v;
  int rc = get_u(s, i, "get_cumulative_energy", "energy_mj", &v);
  if (!rc) *mj = v;
  return rc;
}

static int zd_power(void *st, unsigned i, zeus_power_domain dom, unsigned *mw) {
  zd_state *s = st;
  if (s->local) return s->local->power(s->lst, i, dom, mw);
  if (dom != ZEUS_POWER_INSTANT) return zeus__error(ZEUS_ENOTSUP, "the daemon's API gives the instant power only");
  unsigned long long v;
  int rc = get_u(s, i, "get_power", NULL, &v);
  if (!rc) *mw = (unsigned)v;
  return rc;
}

static int lock_op(zd_state *s, unsigned i, const char *op, unsigned lo, unsigned hi) {
  char extra[64];
  snprintf(extra, sizeof extra, "min_clock_mhz=%u&max_clock_mhz=%u", lo, hi);
  return write_op(s, i, op, extra);
}
static int zd_lock(void *st, unsigned i, unsigned lo, unsigned hi) {
  return lock_op(st, i, "set_gpu_locked_clocks", lo, hi);
}
static int zd_unlock(void *st, unsigned i) { return write_op(st, i, "reset_gpu_locked_clocks", NULL); }
static int zd_mem_lock(void *st, unsigned i, unsigned lo, unsigned hi) {
  return lock_op(st, i, "set_mem_locked_clocks", lo, hi);
}
static int zd_mem_unlock(void *st, unsigned i) { return write_op(st, i, "reset_mem_locked_clocks", NULL); }
/* Both locks in one request (/gpu/reset_locked_clocks, which zeusd and ours serve). A daemon
 * without the route (an older zeusd answers 404, ZEUS_ENOTSUP) gets the two one-domain requests. */
static int zd_unlock_all(void *st, unsigned i) {
  int rc = write_op(st, i, "reset_locked_clocks", NULL);
  if (rc != ZEUS_ENOTSUP) return rc;
  zeus__log(ZEUS_LOG_DEBUG, "device", "GPU %u: the daemon has no /gpu/reset_locked_clocks (%s); resetting the SM "
            "and memory locks one by one", i, zeus_errmsg());
  if ((rc = zd_unlock(st, i))) return rc;
  return zd_mem_unlock(st, i);
}

/* GET /gpu/get_locked_clocks (ours; zeusd has none, so its 404 leaves the handle's own record):
 * {"<id>": {"gpu_locked_clocks": {"locked": true|false|null, "min_clock_mhz", "max_clock_mhz"},
 * "mem_locked_clocks": {...}}}. */
static int zd_get_lock(void *st, unsigned i, bool mem, zeus_clock_lock *out) {
  zd_state *s = st;
  /* A daemon that serves us no reads cannot say either: the handle's own record, as for a 404. */
  if (s->local && s->no_gpu_read)
    return zeus__error(ZEUS_ENOTSUP, "the zeus daemon at %s does not serve gpu-read to this client",
                       zeus__zeusd_endpoint(s->z));
  json_t *root, *o;
  int rc = get_gpu(st, i, "get_locked_clocks", &root, &o);
  if (rc) return rc;
  json_t *l = json_object_get(o, mem ? "mem_locked_clocks" : "gpu_locked_clocks");
  json_t *on = json_object_get(l, "locked");
  json_t *lo = json_object_get(l, "min_clock_mhz"), *hi = json_object_get(l, "max_clock_mhz");
  if (json_is_null(on)) {
    *out = (zeus_clock_lock){ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, ""};
  } else if (json_is_false(on)) {
    *out = (zeus_clock_lock){ZEUS_CLOCK_UNLOCKED, 0, 0, "daemon"};
  } else if (json_is_true(on) && json_is_integer(lo) && json_is_integer(hi) && json_integer_value(lo) >= 0 &&
             json_integer_value(hi) >= json_integer_value(lo) && json_integer_value(hi) <= UINT_MAX) {
    *out = (zeus_clock_lock){ZEUS_CLOCK_LOCKED, (unsigned)json_integer_value(lo), (unsigned)json_integer_value(hi),
                             "daemon"};
  } else {
    rc = zeus__error(ZEUS_EHTTP,
                     "zeus daemon: get_locked_clocks: '%s' needs \"locked\" (true, false or null) and, when "
                     "locked, min_clock_mhz <= max_clock_mhz",
                     mem ? "mem_locked_clocks" : "gpu_locked_clocks");
  }
  json_decref(root);
  return rc;
}

static int zd_release(void *st) { return zeus__zeusd_release(((zd_state *)st)->z); }

/* What only a local library can say. */
#define LOCAL_ONLY(fn, slot, what, params, args)                                                     \
  static int fn params {                                                                             \
    zd_state *s = st;                                                                                \
    if (s->local && s->local->slot) return s->local->slot args;                                      \
    return zeus__error(ZEUS_ENOTSUP, "%s is not in the daemon's API (no GPU library in this process)", what); \
  }
LOCAL_ONLY(zd_temperature, temperature, "the temperature", (void *st, unsigned i, unsigned *c), (s->lst, i, c))
LOCAL_ONLY(zd_clocks, current_clocks, "the current clocks", (void *st, unsigned i, unsigned *a, unsigned *b),
           (s->lst, i, a, b))
LOCAL_ONLY(zd_arch, architecture, "the architecture", (void *st, unsigned i, unsigned *a), (s->lst, i, a))
LOCAL_ONLY(zd_pci, pci_address, "the PCI address", (void *st, unsigned i, char *b, size_t l), (s->lst, i, b, l))
LOCAL_ONLY(zd_mem_clocks, memory_clocks, "the list of memory clocks", (void *st, unsigned i, unsigned *m, size_t *c),
           (s->lst, i, m, c))
LOCAL_ONLY(zd_gr_clocks, graphics_clocks, "the list of SM clocks",
           (void *st, unsigned i, unsigned mem, unsigned *m, size_t *c), (s->lst, i, mem, m, c))
LOCAL_ONLY(zd_driver, driver_version, "the driver version", (void *st, char *b, size_t l), (s->lst, b, l))
LOCAL_ONLY(zd_library, library_version, "the library version", (void *st, char *b, size_t l), (s->lst, b, l))
#undef LOCAL_ONLY

/* The local NVML's scope where readings come from it ("nvml+zeusd"); the daemon's API does not
 * say, so a daemon alone reports the GPU scope (docs/grace-hopper.md: left to do). */
static int zd_power_scope(void *st, unsigned i, zeus_power_scope *out) {
  zd_state *s = st;
  *out = ZEUS_POWER_SCOPE_GPU;
  if (s->local && s->local->power_scope) return s->local->power_scope(s->lst, i, out);
  return ZEUS_OK;
}

#define ZD_SLOTS                                        \
  .open = zd_open, .close = zd_close, .count = zd_count, .now = zd_now, .name_of = zd_name, .uuid = zd_uuid, \
  .energy_counter_supported = zd_counter, .power_limit_constraints = zd_constraints, .get_power_limit = zd_get_pl, \
  .set_power_limit = zd_set_pl, .get_persistence_mode = zd_get_pm, .set_persistence_mode = zd_set_pm,          \
  .total_energy = zd_energy, .power = zd_power, .temperature = zd_temperature, .current_clocks = zd_clocks,    \
  .power_scope = zd_power_scope,                                                                               \
  .architecture = zd_arch, .pci_address = zd_pci, .driver_version = zd_driver, .library_version = zd_library,  \
  .memory_clocks = zd_mem_clocks, .graphics_clocks = zd_gr_clocks, .set_locked_clocks = zd_lock,               \
  .reset_locked_clocks = zd_unlock, .set_memory_locked_clocks = zd_mem_lock,                                   \
  .reset_memory_locked_clocks = zd_mem_unlock, .reset_all_locked_clocks = zd_unlock_all,                       \
  .get_locked_clocks = zd_get_lock, .release = zd_release

const zeus__gpu_backend zeus__backend_zeusd = {.name = "zeusd", ZD_SLOTS};
const zeus__gpu_backend zeus__backend_nvml_zeusd = {.name = "nvml+zeusd", ZD_SLOTS};
const zeus__gpu_backend zeus__backend_amdsmi_zeusd = {.name = "amdsmi+zeusd", ZD_SLOTS};
