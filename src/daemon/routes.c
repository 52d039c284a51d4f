/* zeusd's routes over the device layer, and /leases (ours).
 *
 * Parameters come from the query string, as zeusd reads them (the legacy POST /gpu/<n>/<op> form
 * carries them as a JSON body). Unknown parameters are refused, as zeusd refuses them; every bad
 * value is a 400 that names the parameter and what was expected. `gpu_ids` / `cpu_ids` are
 * required on writes and optional on reads (all devices). A request on several devices runs on
 * each; failures are collected as {"errors": {"<id>": "<message>"}} under the worst status, and
 * devices that succeeded keep their change (zeusd's aggregation).
 *
 * Who holds a change: the lease named by an X-Zeus-Lease header; else, on the Unix socket, the
 * peer process; else (TCP, a client of the original zeusd) the anonymous holder, or a per-address
 * lease when the daemon was started with a TTL for such changes. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#include "daemon/daemon_internal.h"
#include "device/rapl.h"
#include "metrics/metrics.h"

#define LEASE_HEADER "X-Zeus-Lease"
#define TCP_DEFAULT_TTL_S 60

static long long unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double mono_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- parameters ---- */

/* Refuses parameters the route does not take (NULL-terminated list). Returns true when one was
 * refused (the reply is queued in *mhd). */
static bool unknown_params(zeus__dreq *q, const char *const *names, int *mhd) {
  for (unsigned i = 0; i < q->np; i++) {
    bool ok = false;
    for (const char *const *n = names; *n && !ok; n++) ok = strcmp(*n, q->p[i].name) == 0;
    if (ok) continue;
    char list[256] = "";
    size_t o = 0;
    for (const char *const *n = names; *n; n++)
      o += (size_t)snprintf(list + o, o < sizeof list ? sizeof list - o : 0, "%s%s", o ? ", " : "", *n);
    *mhd = zeus__dreply_error(q, 400, "unknown parameter '%.64s' (%s takes %s)", q->p[i].name,
                              q->legacy_gpu >= 0 ? "this route" : q->path, o ? list : "no parameters");
    return true;
  }
  return false;
}

/* Parses a required (or optional) unsigned parameter within [lo, hi]. */
static bool param_u32(zeus__dreq *q, const char *name, bool required, unsigned lo, unsigned hi, const char *unit,
                      unsigned *out, bool *given, int *mhd) {
  const char *v = zeus__dparam(q, name);
  if (given) *given = v != NULL;
  if (!v) {
    if (!required) return true;
    *mhd = zeus__dreply_error(q, 400, "parameter '%s' is required (an integer in %s)", name, unit);
    return false;
  }
  char *end;
  unsigned long long x = strtoull(v, &end, 10);
  if (!*v || *end || v[0] == '-' || v[0] == '+' || v[0] == ' ') {
    *mhd = zeus__dreply_error(q, 400, "parameter '%s': expected an integer in %s, got '%.40s'", name, unit, v);
    return false;
  }
  if (x < lo || x > hi) {
    *mhd = zeus__dreply_error(q, 400, "parameter '%s': %llu is outside [%u, %u] %s", name, x, lo, hi, unit);
    return false;
  }
  *out = (unsigned)x;
  return true;
}

static bool param_bool(zeus__dreq *q, const char *name, bool required, bool def, bool *out, int *mhd) {
  const char *v = zeus__dparam(q, name);
  if (!v) {
    if (!required) { *out = def; return true; }
    *mhd = zeus__dreply_error(q, 400, "parameter '%s' is required (true or false)", name);
    return false;
  }
  if (strcmp(v, "true") == 0 || strcmp(v, "1") == 0) { *out = true; return true; }
  if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) { *out = false; return true; }
  *mhd = zeus__dreply_error(q, 400, "parameter '%s': expected true or false, got '%.40s'", name, v);
  return false;
}

/* A device id's position: a GPU's is its index, a CPU's is where its RAPL package number is;
 * (unsigned)-1 when no device has the id. */
static unsigned id_pos(const zeus_daemon *d, bool cpu, unsigned ndev, uint64_t x) {
  unsigned pos = (unsigned)-1;
  if (cpu) {
    for (unsigned i = 0; i < d->ncpus; i++)
      if (d->cpus[i].pkg == x) pos = i;
  } else if (x < ndev) {
    pos = (unsigned)x;
  }
  return pos;
}

/* "0,2" into device positions. For GPUs an id is the daemon's index; for CPUs the RAPL package
 * number, mapped to its position. Absent: every device (unless required). */
static bool param_ids(zeus__dreq *q, bool cpu, bool required, unsigned *idx, unsigned *n, int *mhd) {
  zeus_daemon *d = q->d;
  const char *name = cpu ? "cpu_ids" : "gpu_ids", *kind = cpu ? "CPU" : "GPU";
  unsigned ndev = cpu ? d->ncpus : d->ngpus;
  *n = 0;
  if (!cpu && q->legacy_gpu >= 0) {
    if ((unsigned)q->legacy_gpu >= ndev) {
      *mhd = zeus__dreply_error(q, 400, "GPU index %d does not exist (%u GPU%s).", q->legacy_gpu, ndev,
                                ndev == 1 ? "" : "s");
      return false;
    }
    idx[(*n)++] = (unsigned)q->legacy_gpu;
    return true;
  }
  const char *v = zeus__dparam(q, name);
  if (!v) {
    if (required) {
      *mhd = zeus__dreply_error(q, 400, "parameter '%s' is required (comma-separated %s indices such as 0,1)", name,
                                kind);
      return false;
    }
    for (unsigned i = 0; i < ndev; i++) idx[(*n)++] = i;
    return true;
  }
  const char *p = v;
  if (!*p) {
    *mhd = zeus__dreply_error(q, 400, "%s must contain at least one %s index", name, kind);
    return false;
  }
  while (*p) {
    char *end;
    unsigned long x = strtoul(p, &end, 10);
    if (end == p || *p == '-' || *p == '+' || *p == ' ' || (*end && *end != ',') || end - p > 6) {
      *mhd = zeus__dreply_error(q, 400, "parameter '%s': '%.40s' is not a list of %s indices (expected e.g. 0,1)", name,
                                v, kind);
      return false;
    }
    unsigned pos = id_pos(d, cpu, ndev, x);
    if (pos == (unsigned)-1) {
      *mhd = zeus__dreply_error(q, 400, "parameter '%s': %s index %lu does not exist (%u %s%s here)", name, kind, x,
                                ndev, kind, ndev == 1 ? "" : "s");
      return false;
    }
    for (unsigned k = 0; k < *n; k++)
      if (idx[k] == pos) {
        *mhd = zeus__dreply_error(q, 400, "parameter '%s' lists %s %lu twice", name, kind, x);
        return false;
      }
    if (*n == ZEUS_MAX_GPUS) break;
    idx[(*n)++] = pos;
    p = *end ? end + 1 : end;
    if (*end && !*p) {
      *mhd = zeus__dreply_error(q, 400, "parameter '%s': '%.40s' ends with a comma", name, v);
      return false;
    }
  }
  return true;
}

/* ---- per-device error aggregation ---- */

typedef struct errs {
  json_t *map;
  int worst;
} errs;

static void err_add(errs *e, unsigned id, int status, const char *msg) {
  if (!e->map) e->map = json_object();
  char key[16];
  snprintf(key, sizeof key, "%u", id);
  json_object_set_new(e->map, key, json_string(msg));
  if (status > e->worst) e->worst = status;
}

static int reply_result(zeus__dreq *q, errs *e, json_t *ok_body) {
  if (e->map) {
    json_decref(ok_body);
    return zeus__dreply(q, e->worst, json_pack("{s:o}", "errors", e->map));
  }
  return zeus__dreply(q, 200, ok_body);
}

/* ---- always-available routes ---- */

static int h_discover(zeus__dreq *q) {
  int mhd;
  static const char *const none[] = {NULL};
  if (unknown_params(q, none, &mhd)) return mhd;
  zeus_daemon *d = q->d;
  json_t *gpus = json_array(), *cpus = json_array(), *gids = json_array(), *cids = json_array(), *dram = json_array();
  for (unsigned g = 0; g < d->ngpus; g++) {
    json_array_append_new(gpus, json_pack("{s:I,s:s,s:s,s:b,s:s}", "id", (json_int_t)g, "name", d->gpus[g].name,
                                          "pci_address", d->gpus[g].pci, "cumulative_energy_available",
                                          d->gpus[g].energy_ok, "uuid", d->gpus[g].uuid));
    json_array_append_new(gids, json_integer(g));
  }
  for (unsigned i = 0; i < d->ncpus; i++) {
    json_t *c = json_pack("{s:I,s:b}", "id", (json_int_t)d->cpus[i].pkg, "dram_available", d->cpus[i].dram);
    /* Ours: where the counters wrap, so clients reading through us can handle it. */
    if (d->cpus[i].range_uj != UINT64_MAX)
      json_object_set_new(c, "energy_range_uj", json_integer((json_int_t)d->cpus[i].range_uj));
    if (d->cpus[i].dram && d->cpus[i].dram_range_uj != UINT64_MAX)
      json_object_set_new(c, "dram_energy_range_uj", json_integer((json_int_t)d->cpus[i].dram_range_uj));
    json_array_append_new(cpus, c);
    json_array_append_new(cids, json_integer(d->cpus[i].pkg));
    json_array_append_new(dram, json_boolean(d->cpus[i].dram));
  }
  json_t *groups = json_array();
  for (unsigned b = ZEUS_DAEMON_GPU_CONTROL; b <= ZEUS_DAEMON_CPU_READ; b <<= 1)
    if (d->o.groups & b) json_array_append_new(groups, json_string(zeus__daemon_group_name(b)));
  json_t *ours = json_pack("{s:s,s:s,s:b,s:s}", "server", "zeus daemon", "version", zeus_version(), "leases", 1,
                           "lease_header", LEASE_HEADER);
  return zeus__dreply(q, 200,
                      json_pack("{s:o,s:o,s:o,s:b,s:o,s:o,s:o,s:o}", "gpus", gpus, "cpus", cpus, "enabled_api_groups",
                                groups, "auth_required", d->key != NULL, "gpu_ids", gids, "cpu_ids", cids,
                                "dram_available", dram, "zeus", ours));
}

static int h_time(zeus__dreq *q) {
  int mhd;
  static const char *const none[] = {NULL};
  if (unknown_params(q, none, &mhd)) return mhd;
  return zeus__dreply(q, 200, json_pack("{s:I}", "timestamp_ms", (json_int_t)unix_ms()));
}

static int h_whoami(zeus__dreq *q) {
  int mhd;
  static const char *const none[] = {NULL};
  if (unknown_params(q, none, &mhd)) return mhd;
  json_t *scopes = json_array();
  for (unsigned b = 1; b <= ZEUS_DAEMON_CPU_CONTROL; b <<= 1)
    if (q->claims.scopes & b) json_array_append_new(scopes, json_string(zeus__daemon_group_name(b)));
  json_t *o = json_pack("{s:s,s:o}", "sub", q->claims.sub, "scopes", scopes);
  if (q->claims.has_exp) json_object_set_new(o, "exp", json_integer(q->claims.exp));
  return zeus__dreply(q, 200, o);
}

/* ---- holders ---- */

/* The lease a change is made under (lease lock held), or NULL with the reply queued. */
static zeus__lease *holder(zeus__dreq *q, int *mhd) {
  zeus_daemon *d = q->d;
  const char *tok = MHD_lookup_connection_value(q->c, MHD_HEADER_KIND, LEASE_HEADER);
  zeus__lease *l;
  if (tok) {
    if (!(l = zeus__leases_find(d->L, tok))) {
      *mhd = zeus__dreply_error(q, 410,
                                LEASE_HEADER ": no such lease (it lapsed or was released, and what it held was given "
                                "back); create a new one with POST /leases");
      return NULL;
    }
    zeus__leases_renew(d->L, l);
    return l;
  }
  if (q->uds) {
    if (q->pid <= 0) {
      *mhd = zeus__dreply_error(q, 500, "the peer process of this connection is unknown (SO_PEERCRED failed)");
      return NULL;
    }
    l = zeus__leases_peer(d->L, q->pid, q->uid);
  } else if (d->o.tcp_anonymous_ttl_s) {
    /* One lease per client, renewed by every request from it: a token's subject, or without a
     * token the connecting uid on loopback (every alias of loopback is that one user), else the
     * address (so two users never share one lease). */
    char host[64], owner[192];
    snprintf(host, sizeof host, "%s", q->addr);
    zeus__lease probe = {.kind = ZEUS__LEASE_TTL, .pid = q->tcp_uid ? -1 : 0, .uid = q->uid};
    snprintf(probe.user, sizeof probe.user, "%s", q->authed ? q->claims.sub : "");
    snprintf(probe.addr, sizeof probe.addr, "%s", host);
    zeus__lease_owner(&probe, owner, sizeof owner);
    char *colon = strrchr(host, ':');
    if (colon) *colon = '\0'; /* "127.0.0.1", "[::1]" */
    l = NULL;
    zeus__lease *found = zeus__leases_find_implicit(d->L, owner);
    if (found) {
      zeus__leases_renew(d->L, found);
      l = found;
    } else if ((l = zeus__leases_create(d->L, q->tcp_uid ? -1 : 0, q->tcp_uid ? q->uid : 0,
                                        q->authed ? q->claims.sub : NULL, host, d->o.tcp_anonymous_ttl_s))) {
      l->implicit = true;
    }
  } else {
    l = zeus__leases_anonymous(d->L);
  }
  if (!l) {
    int code = zeus_errcode();
    *mhd = zeus__dreply_error(q, code == ZEUS_EPERM ? 403 : 503, "%s", zeus_errmsg());
    return NULL;
  }
  if (q->authed && !l->user[0]) snprintf(l->user, sizeof l->user, "%s", q->claims.sub);
  return l;
}

/* ---- GPU writes ---- */

static int h_gpu_write(zeus__dreq *q) {
  zeus_daemon *d = q->d;
  int mhd;
  const char *names[8] = {NULL};
  unsigned nn = 0;
  if (q->legacy_gpu < 0) names[nn++] = "gpu_ids"; /* the legacy form names the GPU in its path */
  names[nn++] = "block";
  names[nn++] = "override";
  names[nn++] = "persist";
  zeus__setting set[2];
  zeus__dval val[2] = {{0}};
  unsigned nset = 1;
  switch (q->route) {
    case ZEUS__R_GPU_SET_POWER_LIMIT: names[nn++] = "power_limit_mw"; set[0] = ZEUS__SET_POWER_LIMIT; break;
    case ZEUS__R_GPU_SET_PERSISTENCE: names[nn++] = "enabled"; set[0] = ZEUS__SET_PERSISTENCE; break;
    case ZEUS__R_GPU_SET_GPU_LOCK:
    case ZEUS__R_GPU_SET_MEM_LOCK:
      names[nn++] = "min_clock_mhz";
      names[nn++] = "max_clock_mhz";
      set[0] = q->route == ZEUS__R_GPU_SET_GPU_LOCK ? ZEUS__SET_GPU_LOCK : ZEUS__SET_MEM_LOCK;
      break;
    case ZEUS__R_GPU_RESET_GPU_LOCK: set[0] = ZEUS__SET_GPU_LOCK; break;
    case ZEUS__R_GPU_RESET_MEM_LOCK: set[0] = ZEUS__SET_MEM_LOCK; break;
    default: set[0] = ZEUS__SET_GPU_LOCK; set[1] = ZEUS__SET_MEM_LOCK; nset = 2; break;
  }
  if (unknown_params(q, names, &mhd)) return mhd;
  unsigned ids[ZEUS_MAX_GPUS], n;
  if (!param_ids(q, false, true, ids, &n, &mhd)) return mhd;
  switch (q->route) {
    case ZEUS__R_GPU_SET_POWER_LIMIT:
      if (!param_u32(q, "power_limit_mw", true, 1, UINT32_MAX, "mW", &val[0].a, NULL, &mhd)) return mhd;
      break;
    case ZEUS__R_GPU_SET_PERSISTENCE:
      if (!param_bool(q, "enabled", true, false, &val[0].on, &mhd)) return mhd;
      break;
    case ZEUS__R_GPU_SET_GPU_LOCK:
    case ZEUS__R_GPU_SET_MEM_LOCK:
      if (!param_u32(q, "min_clock_mhz", true, 0, 100000, "MHz", &val[0].a, NULL, &mhd) ||
          !param_u32(q, "max_clock_mhz", true, 0, 100000, "MHz", &val[0].b, NULL, &mhd))
        return mhd;
      if (val[0].a > val[0].b)
        return zeus__dreply_error(q, 400,
                                  "parameters 'min_clock_mhz' (%u) and 'max_clock_mhz' (%u): min must not exceed max",
                                  val[0].a, val[0].b);
      val[0].on = true;
      break;
    default: break; /* resets: unlocked */
  }
  bool block, override, persist;
  if (!param_bool(q, "block", false, true, &block, &mhd) || !param_bool(q, "override", false, false, &override, &mhd) ||
      !param_bool(q, "persist", false, false, &persist, &mhd))
    return mhd;
  zeus__change_mode mode = persist ? (override ? ZEUS__CHANGE_PERSIST_OVERRIDE : ZEUS__CHANGE_PERSIST)
                           : override ? ZEUS__CHANGE_OVERRIDE : ZEUS__CHANGE_NORMAL;
  errs e = {0};
  zeus__leases_lock(d->L);
  zeus__lease *who = holder(q, &mhd);
  if (!who) {
    zeus__leases_unlock(d->L);
    return mhd;
  }
  d->async_now = !block;
  for (unsigned k = 0; k < n; k++) {
    /* Both locks: one reset of both (zeus__leases_reset_locks), refused as a whole on a conflict. */
    int rc = nset == 2 ? zeus__leases_reset_locks(d->L, who, ids[k], mode)
                       : zeus__leases_change(d->L, who, ids[k], set[0], &val[0], mode);
    if (rc) err_add(&e, ids[k], zeus__dstatus_of(rc), zeus_errmsg());
  }
  d->async_now = false;
  zeus__leases_unlock(d->L);
  zeus__daemon_wake(d); /* a new lease has a pidfd to watch */
  return reply_result(q, &e, NULL);
}

/* ---- GPU reads ---- */

/* A lock as the daemon's device handle knows it: every lock made through the daemon (NVML cannot
 * read one back), "locked": null when nobody can say. */
static json_t *lock_json(const zeus_clock_lock *l) {
  if (l->state == ZEUS_CLOCK_LOCKED)
    return json_pack("{s:b,s:I,s:I}", "locked", 1, "min_clock_mhz", (json_int_t)l->min_mhz, "max_clock_mhz",
                     (json_int_t)l->max_mhz);
  return json_pack("{s:o}", "locked", l->state == ZEUS_CLOCK_UNLOCKED ? json_false() : json_null());
}

static int h_gpu_read(zeus__dreq *q) {
  zeus_daemon *d = q->d;
  int mhd;
  static const char *const names[] = {"gpu_ids", NULL};
  if (unknown_params(q, names, &mhd)) return mhd;
  unsigned ids[ZEUS_MAX_GPUS], n;
  if (!param_ids(q, false, false, ids, &n, &mhd)) return mhd;
  zeus__daemon_sync(d); /* a block=false write made before this read is in place first */
  errs e = {0};
  json_t *out = json_object(), *power = q->route == ZEUS__R_GPU_POWER ? json_object() : NULL;
  for (unsigned k = 0; k < n; k++) {
    unsigned g = ids[k], a = 0, b = 0, c = 0;
    bool on = false;
    uint64_t mj = 0;
    int rc;
    json_t *v = NULL;
    char key[16];
    snprintf(key, sizeof key, "%u", g);
    switch (q->route) {
      case ZEUS__R_GPU_ENERGY:
        if (!d->gpus[g].energy_ok) {
          err_add(&e, g, 400, "this GPU has no trustworthy cumulative energy counter (Volta or newer has one)");
          continue;
        }
        if (!(rc = zeus_gpu_total_energy(d->dev, g, &mj))) v = json_pack("{s:I}", "energy_mj", (json_int_t)mj);
        break;
      case ZEUS__R_GPU_POWER:
        if (!(rc = zeus_gpu_power(d->dev, g, ZEUS_POWER_INSTANT, &a))) json_object_set_new(power, key, json_integer(a));
        break;
      case ZEUS__R_GPU_GET_PL:
        if (!(rc = zeus_gpu_get_power_limit(d->dev, g, &a))) v = json_pack("{s:I}", "power_limit_mw", (json_int_t)a);
        break;
      case ZEUS__R_GPU_GET_PLC:
        if (!(rc = zeus_gpu_power_limit_constraints(d->dev, g, &a, &b, &c)))
          v = json_pack("{s:I,s:I,s:I}", "min_power_limit_mw", (json_int_t)a, "max_power_limit_mw", (json_int_t)b,
                        "default_power_limit_mw", (json_int_t)c);
        break;
      case ZEUS__R_GPU_GET_LOCKS: {
        zeus_clock_lock sm, mem;
        if (!(rc = zeus_gpu_get_locked_clocks(d->dev, g, false, &sm)) &&
            !(rc = zeus_gpu_get_locked_clocks(d->dev, g, true, &mem)))
          v = json_pack("{s:o,s:o}", "gpu_locked_clocks", lock_json(&sm), "mem_locked_clocks", lock_json(&mem));
        break;
      }
      default:
        if (!(rc = zeus_gpu_get_persistence_mode(d->dev, g, &on))) v = json_pack("{s:b}", "enabled", on);
        break;
    }
    if (rc) err_add(&e, g, zeus__dstatus_of(rc), zeus_errmsg());
    else if (v) json_object_set_new(out, key, v);
  }
  if (power) {
    json_decref(out);
    out = json_pack("{s:I,s:o}", "timestamp_ms", (json_int_t)unix_ms(), "power_mw", power);
  }
  return reply_result(q, &e, out);
}

/* ---- CPU reads ---- */

typedef struct cpu_sample {
  bool ok, dram;
  uint64_t pkg_uj, dram_uj, pkg_max, dram_max;
  double t;
} cpu_sample;

static void cpu_read(zeus_daemon *d, unsigned i, cpu_sample *s) {
  s->t = mono_now();
  s->dram = d->cpus[i].dram;
  s->ok = zeus__rapl_read(d->rapl, i, &s->pkg_uj, &s->dram_uj) == ZEUS_OK;
  s->pkg_max = d->cpus[i].range_uj;
  s->dram_max = d->cpus[i].dram_range_uj;
}

/* Power in mW between two counter readings, the wrap-around included. */
static unsigned long long delta_mw(uint64_t a, uint64_t b, uint64_t range, double dt) {
  uint64_t de = b >= a ? b - a : (range > a ? range - a + b : 0);
  return dt > 0 ? (unsigned long long)llround((double)de / 1000.0 / dt) : 0;
}

static json_t *cpu_power_json(const cpu_sample *a, const cpu_sample *b) {
  double dt = b->t - a->t;
  return json_pack("{s:I,s:o}", "cpu_mw", (json_int_t)delta_mw(a->pkg_uj, b->pkg_uj, a->pkg_max, dt), "dram_mw",
                   a->dram && b->dram ? json_integer((json_int_t)delta_mw(a->dram_uj, b->dram_uj, a->dram_max, dt))
                                      : json_null());
}

static int h_cpu(zeus__dreq *q) {
  zeus_daemon *d = q->d;
  int mhd;
  static const char *const energy_names[] = {"cpu_ids", "cpu", "dram", NULL}, *const power_names[] = {"cpu_ids", NULL};
  if (unknown_params(q, q->route == ZEUS__R_CPU_ENERGY ? energy_names : power_names, &mhd)) return mhd;
  unsigned ids[ZEUS_MAX_CPUS], n;
  if (!param_ids(q, true, false, ids, &n, &mhd)) return mhd;
  errs e = {0};
  json_t *out = json_object();
  char key[16];
  if (q->route == ZEUS__R_CPU_ENERGY) {
    bool want_cpu, want_dram;
    if (!param_bool(q, "cpu", true, false, &want_cpu, &mhd) || !param_bool(q, "dram", true, false, &want_dram, &mhd)) {
      json_decref(out);
      return mhd;
    }
    for (unsigned k = 0; k < n; k++) {
      cpu_sample s = {0};
      cpu_read(d, ids[k], &s);
      snprintf(key, sizeof key, "%u", d->cpus[ids[k]].pkg);
      if (!s.ok) { err_add(&e, d->cpus[ids[k]].pkg, 500, zeus_errmsg()); continue; }
      json_object_set_new(
          out, key,
          json_pack("{s:o,s:o}", "cpu_energy_uj", want_cpu ? json_integer((json_int_t)s.pkg_uj) : json_null(),
                    "dram_energy_uj", want_dram && s.dram ? json_integer((json_int_t)s.dram_uj) : json_null()));
    }
    return reply_result(q, &e, out);
  }
  /* get_power: two readings one sampling period apart. */
  cpu_sample a[ZEUS_MAX_CPUS] = {{0}}, b[ZEUS_MAX_CPUS] = {{0}};
  for (unsigned k = 0; k < n; k++) cpu_read(d, ids[k], &a[k]);
  struct timespec ts = {0, (long)(1e9 / d->o.cpu_poll_hz)};
  if (ts.tv_nsec >= 1000000000L) { ts.tv_sec = ts.tv_nsec / 1000000000L; ts.tv_nsec %= 1000000000L; }
  nanosleep(&ts, NULL);
  for (unsigned k = 0; k < n; k++) {
    b[k].pkg_max = a[k].pkg_max;
    b[k].dram_max = a[k].dram_max;
    cpu_read(d, ids[k], &b[k]);
    snprintf(key, sizeof key, "%u", d->cpus[ids[k]].pkg);
    if (!a[k].ok || !b[k].ok) {
      err_add(&e, d->cpus[ids[k]].pkg, 500, "CPU did not return the energy data required for power measurement.");
      continue;
    }
    json_object_set_new(out, key, cpu_power_json(&a[k], &b[k]));
  }
  return reply_result(q, &e, json_pack("{s:I,s:o}", "timestamp_ms", (json_int_t)unix_ms(), "power_mw", out));
}

/* ---- power streams (server-sent events) ----
 *
 * zeusd's per-device streams (ml-energy/zeus master since c001bd84, "Split power streaming by
 * device ID"): one event per device and reading, `data: {"timestamp_ms":N,"gpu_id":N,"power_mw":N}`
 * or `data: {"timestamp_ms":N,"cpu_id":N,"cpu_mw":N,"dram_mw":N|null}`, each followed by a blank
 * line. Each device is read once per period; as zeusd, an event goes out when a device's reading
 * differs from the last one sent (the first always goes out: GPUs at once, CPUs one period later,
 * when two counter readings give a power). zeusd's pollers are shared by all subscribers, so a
 * late subscriber of a device whose power stands still hears nothing; ours are per stream, so every
 * stream starts with each device's reading. Ours too: after a second with nothing to send, an SSE
 * comment line (": keepalive"), which SSE parsers skip; without it a client that went away from a
 * device whose power stands still would hold its thread and stream slot until the power changed. */

#define STREAM_KEEPALIVE_S 1.0
#define STREAM_EVENT_MAX 160 /* the longest event below, with room to spare */

typedef struct stream {
  zeus_daemon *d;
  bool cpu, started;
  unsigned ids[ZEUS_MAX_GPUS], n; /* device positions, ascending by id */
  double period, next, last_out;  /* monotonic s */
  bool sent[ZEUS_MAX_GPUS];       /* a reading of ids[k] went out */
  /* The last reading sent: package (or GPU) and DRAM power, DRAM absent. */
  unsigned long long last_mw[ZEUS_MAX_GPUS], last_dram_mw[ZEUS_MAX_GPUS];
  bool last_dram_null[ZEUS_MAX_GPUS];
  cpu_sample prev[ZEUS_MAX_CPUS];
  /* One tick's events, handed to MHD in as many calls as its buffer needs (bounded: one event per
   * device). */
  char out[ZEUS_MAX_GPUS * STREAM_EVENT_MAX];
  size_t len, off;
} stream;

/* Appends one event for position k (ids[k]) if its reading changed; returns bytes added. */
static size_t stream_sample(stream *s, unsigned k) {
  zeus_daemon *d = s->d;
  char *o = s->out + s->len;
  size_t room = sizeof s->out - s->len;
  int w = 0;
  if (s->cpu) {
    cpu_sample now = {.pkg_max = s->prev[k].pkg_max, .dram_max = s->prev[k].dram_max};
    cpu_read(d, s->ids[k], &now);
    cpu_sample before = s->prev[k];
    if (now.ok || !before.ok) s->prev[k] = now; /* a failed reading keeps the last good one */
    if (!s->started || !now.ok || !before.ok) return 0;
    double dt = now.t - before.t;
    unsigned long long mw = delta_mw(before.pkg_uj, now.pkg_uj, before.pkg_max, dt);
    bool dram = before.dram && now.dram;
    unsigned long long dmw = dram ? delta_mw(before.dram_uj, now.dram_uj, before.dram_max, dt) : 0;
    if (s->sent[k] && s->last_mw[k] == mw && s->last_dram_null[k] == !dram && (!dram || s->last_dram_mw[k] == dmw))
      return 0;
    s->sent[k] = true;
    s->last_mw[k] = mw;
    s->last_dram_mw[k] = dmw;
    s->last_dram_null[k] = !dram;
    char dtext[24] = "null";
    if (dram) snprintf(dtext, sizeof dtext, "%llu", dmw);
    w = snprintf(o, room, "data: {\"timestamp_ms\":%lld,\"cpu_id\":%u,\"cpu_mw\":%llu,\"dram_mw\":%s}\n\n", unix_ms(),
                 d->cpus[s->ids[k]].pkg, mw, dtext);
  } else {
    unsigned mw;
    if (zeus_gpu_power(d->dev, s->ids[k], ZEUS_POWER_INSTANT, &mw) != ZEUS_OK) return 0; /* zeusd skips it too */
    if (s->sent[k] && s->last_mw[k] == mw) return 0;
    s->sent[k] = true;
    s->last_mw[k] = mw;
    w = snprintf(o, room, "data: {\"timestamp_ms\":%lld,\"gpu_id\":%u,\"power_mw\":%u}\n\n", unix_ms(), s->ids[k], mw);
  }
  if (w < 0 || (size_t)w >= room) return 0; /* cannot happen: room for every device's event */
  s->len += (size_t)w;
  return (size_t)w;
}

static long stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream *s = cls;
  zeus_daemon *d = s->d;
  while (s->off >= s->len) {
    s->off = s->len = 0;
    if (s->started) {
      /* Sleep to the next sample in short slices, so a stopping daemon ends the stream quickly. */
      for (;;) {
        if (atomic_load(&d->stopping)) return MHD_CONTENT_READER_END_OF_STREAM;
        double wait = s->next - mono_now();
        if (wait <= 0) break;
        if (wait > 0.05) wait = 0.05;
        struct timespec ts = {0, (long)(wait * 1e9)};
        nanosleep(&ts, NULL);
      }
    }
    if (atomic_load(&d->stopping)) return MHD_CONTENT_READER_END_OF_STREAM;
    for (unsigned k = 0; k < s->n; k++) stream_sample(s, k);
    double now = mono_now();
    s->next = s->started && s->next + s->period > now ? s->next + s->period : now + s->period;
    if (!s->started) s->last_out = now;
    s->started = true;
    if (!s->len && now - s->last_out >= STREAM_KEEPALIVE_S)
      s->len = (size_t)snprintf(s->out, sizeof s->out, ": keepalive\n\n");
  }
  size_t k = s->len - s->off < max ? s->len - s->off : max;
  if (!k) return 0;
  memcpy(buf, s->out + s->off, k);
  s->off += k;
  s->last_out = mono_now();
  return (long)k;
}

static int ids_cmp(const void *a, const void *b) {
  unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
  return x < y ? -1 : x > y;
}

/* zeusd's `gpu_ids` / `cpu_ids` of a stream: absent, every device; otherwise comma-separated
 * indices, each trimmed, duplicates dropped, sorted. Errors are 400 {"error"} in zeusd's words:
 * "gpu_ids must contain at least one GPU index", "gpu_ids contains an empty GPU index", "Invalid
 * GPU index: x", "Unknown GPU indices: [7, 9]. Available: [0, 1]". For CPUs an index is the
 * RAPL package number, as on our other CPU routes (zeusd numbers its packages 0.. in the same
 * order). */
static bool stream_ids(zeus__dreq *q, bool cpu, stream *s, int *mhd) {
  zeus_daemon *d = q->d;
  const char *name = cpu ? "cpu_ids" : "gpu_ids", *kind = cpu ? "CPU" : "GPU";
  unsigned ndev = cpu ? d->ncpus : d->ngpus;
  bool want[ZEUS_MAX_GPUS] = {false};
  const char *v = zeus__dparam(q, name);
  unsigned long long unknown[64];
  unsigned nunknown = 0;
  bool more_unknown = false;
  if (!v) {
    for (unsigned i = 0; i < ndev; i++) want[i] = true;
  } else {
    const char *p = v;
    while (*p && isspace((unsigned char)*p)) p++;
    if (!*p) {
      *mhd = zeus__dreply_error(q, 400, "%s must contain at least one %s index", name, kind);
      return false;
    }
    for (p = v;;) {
      const char *comma = strchr(p, ','), *e = comma ? comma : p + strlen(p);
      while (p < e && isspace((unsigned char)*p)) p++;
      while (e > p && isspace((unsigned char)e[-1])) e--;
      if (p == e) {
        *mhd = zeus__dreply_error(q, 400, "%s contains an empty %s index", name, kind);
        return false;
      }
      /* As Rust parses a usize: an optional '+', then decimal digits, no overflow. */
      const char *digits = *p == '+' ? p + 1 : p;
      unsigned long long x = 0;
      bool ok = digits < e;
      for (const char *c = digits; ok && c < e; c++) {
        if (*c < '0' || *c > '9' || x > (UINT64_MAX - (unsigned)(*c - '0')) / 10)
          ok = false;
        else
          x = x * 10 + (unsigned)(*c - '0');
      }
      if (!ok) {
        *mhd = zeus__dreply_error(q, 400, "Invalid %s index: %.*s", kind, (int)(e - p > 40 ? 40 : e - p), p);
        return false;
      }
      unsigned pos = id_pos(d, cpu, ndev, x);
      if (pos != (unsigned)-1) {
        want[pos] = true;
      } else {
        bool seen = false;
        for (unsigned i = 0; i < nunknown; i++) seen = seen || unknown[i] == x;
        if (!seen && nunknown < sizeof unknown / sizeof *unknown)
          unknown[nunknown++] = x;
        else if (!seen)
          more_unknown = true;
      }
      if (!comma) break;
      p = comma + 1;
    }
  }
  /* Every device in id order (GPU ids are positions; CPU packages are listed in order of their
   * number, but sort anyway). */
  unsigned long long avail[ZEUS_MAX_GPUS];
  unsigned order[ZEUS_MAX_GPUS];
  for (unsigned i = 0; i < ndev; i++) avail[i] = cpu ? d->cpus[i].pkg : i;
  for (unsigned i = 0; i < ndev; i++) order[i] = i;
  for (unsigned i = 1; i < ndev; i++)
    for (unsigned j = i; j > 0 && avail[order[j]] < avail[order[j - 1]]; j--) {
      unsigned t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  if (nunknown) {
    char u[600], a[600];
    size_t uo = 0, ao = 0;
    qsort(unknown, nunknown, sizeof *unknown, ids_cmp);
    for (unsigned i = 0; i < nunknown && uo < sizeof u; i++)
      uo += (size_t)snprintf(u + uo, sizeof u - uo, "%s%llu", i ? ", " : "", unknown[i]);
    if (more_unknown && uo < sizeof u) snprintf(u + uo, sizeof u - uo, ", ...");
    a[0] = '\0';
    for (unsigned i = 0; i < ndev && ao < sizeof a; i++)
      ao += (size_t)snprintf(a + ao, sizeof a - ao, "%s%llu", i ? ", " : "", avail[order[i]]);
    *mhd = zeus__dreply_error(q, 400, "Unknown %s indices: [%s]. Available: [%s]", kind, u, a);
    return false;
  }
  s->n = 0;
  for (unsigned i = 0; i < ndev; i++)
    if (want[order[i]]) s->ids[s->n++] = order[i];
  return true;
}

static int h_stream(zeus__dreq *q) {
  zeus_daemon *d = q->d;
  int mhd;
  bool cpu = q->route == ZEUS__R_CPU_STREAM;
  static const char *const gnames[] = {"gpu_ids", NULL}, *const cnames[] = {"cpu_ids", NULL};
  if (unknown_params(q, cpu ? cnames : gnames, &mhd)) return mhd;
  stream *s = calloc(1, sizeof *s);
  if (!s) return MHD_NO;
  s->d = d;
  s->cpu = cpu;
  s->period = 1.0 / (cpu ? d->o.cpu_poll_hz : d->o.gpu_poll_hz);
  if (!stream_ids(q, cpu, s, &mhd) || !zeus__dstream_admit(q, &mhd)) {
    free(s);
    return mhd;
  }
  return zeus__dreply_stream(q, s, stream_read, free);
}

/* ---- /leases ---- */

static int h_leases(zeus__dreq *q) {
  zeus_daemon *d = q->d;
  int mhd;
  static const char *const none[] = {NULL}, *const create[] = {"ttl_s", NULL};
  bool get = strcmp(q->method, "GET") == 0;
  bool release = q->route == ZEUS__R_LEASES_RELEASE || strcmp(q->method, "DELETE") == 0;
  if (unknown_params(q, q->route == ZEUS__R_LEASES && !get && !release ? create : none, &mhd)) return mhd;
  if (get) {
    zeus__leases_lock(d->L);
    json_t *j = zeus__leases_json(d->L);
    zeus__leases_unlock(d->L);
    return zeus__dreply(q, 200, j);
  }
  char desc[192];
  if (q->route == ZEUS__R_LEASES && !release) {
    unsigned ttl = 0;
    bool given;
    if (!param_u32(q, "ttl_s", false, 0, d->o.max_lease_ttl_s, "s", &ttl, &given, &mhd)) return mhd;
    if (!given && !q->uds) ttl = TCP_DEFAULT_TTL_S;
    if (!q->uds && ttl == 0)
      return zeus__dreply_error(
          q, 400,
          "parameter 'ttl_s': a TCP lease needs a time to live > 0 (nothing else tells when a TCP "
          "client is gone)");
    zeus__leases_lock(d->L);
    zeus__lease *l = zeus__leases_create(d->L, q->uds ? q->pid : q->tcp_uid ? -1 : 0, q->uid,
                                         q->authed ? q->claims.sub : NULL, q->uds ? NULL : q->addr, ttl);
    if (!l) {
      int code = zeus_errcode();
      zeus__leases_unlock(d->L);
      return zeus__dreply_error(q, code == ZEUS_EPERM ? 403 : 503, "%s", zeus_errmsg());
    }
    zeus__lease_describe(l, desc, sizeof desc);
    char id[16];
    snprintf(id, sizeof id, "L%u", l->id);
    json_t *o = json_pack("{s:s,s:s,s:s,s:o}", "lease", l->token, "id", id, "holder", desc, "ttl_s",
                          ttl ? json_integer(ttl) : json_null());
    zeus__leases_unlock(d->L);
    zeus__daemon_wake(d);
    zeus__log(ZEUS_LOG_INFO, "daemon", "new lease %s%s", desc, ttl ? "" : " (until the process exits)");
    return zeus__dreply(q, 200, o);
  }
  const char *tok = MHD_lookup_connection_value(q->c, MHD_HEADER_KIND, LEASE_HEADER);
  if (!tok)
    return zeus__dreply_error(q, 400, "header '" LEASE_HEADER "' is required (the lease that POST /leases returned)");
  zeus__leases_lock(d->L);
  zeus__lease *l = zeus__leases_find(d->L, tok);
  if (!l) {
    zeus__leases_unlock(d->L);
    return zeus__dreply_error(q, 410, LEASE_HEADER ": no such lease (it lapsed or was released)");
  }
  zeus__lease_describe(l, desc, sizeof desc);
  char id[16];
  snprintf(id, sizeof id, "L%u", l->id);
  json_t *o;
  if (release) {
    zeus__leases_end(d->L, l, "released by its client");
    o = json_pack("{s:s,s:b}", "id", id, "released", 1);
  } else {
    zeus__leases_renew(d->L, l);
    o = json_pack("{s:s,s:o}", "id", id, "ttl_s", l->ttl_s ? json_integer(l->ttl_s) : json_null());
  }
  zeus__leases_unlock(d->L);
  return zeus__dreply(q, 200, o);
}

/* ---- GET /metrics: the Prometheus text format (docs/metrics.md) ---- */

typedef struct metrics_ctx {
  zeus__metrics_writer *w;
} metrics_ctx;

static void metrics_request_sample(const char *route, int status, unsigned long long n, void *u) {
  metrics_ctx *m = u;
  char code[16];
  if (status) snprintf(code, sizeof code, "%d", status);
  else snprintf(code, sizeof code, "other");
  /* Routes are the table's templates (a client's path never becomes a label). */
  zeus__metrics_label l[2] = {{"route", strcmp(route, "(unknown)") ? route : "other"}, {"code", code}};
  zeus__metrics_sample(m->w, "zeus_daemon_requests_total", NULL, l, 2, (double)n);
}

static int h_metrics(zeus__dreq *q) {
  int mhd;
  static const char *const none[] = {NULL};
  if (unknown_params(q, none, &mhd)) return mhd;
  zeus__metrics_writer w;
  zeus__metrics_writer_init(&w);
  metrics_ctx m = {&w};
  zeus__metrics_family(&w, "zeus_daemon_requests_total", "counter",
                       "Requests answered, by route template and status code.");
  zeus_daemon_counters(q->d, metrics_request_sample, &m);
  unsigned live = 0;
  unsigned long long restores = 0;
  zeus_daemon_lease_stats(q->d, &live, &restores);
  zeus__metrics_family(&w, "zeus_daemon_leases", "gauge", "Live leases (holders of changed settings).");
  zeus__metrics_sample(&w, "zeus_daemon_leases", NULL, NULL, 0, (double)live);
  zeus__metrics_family(&w, "zeus_daemon_restores_total", "counter",
                       "Settings given back (a holder died, released, lapsed, or the daemon stopped).");
  zeus__metrics_sample(&w, "zeus_daemon_restores_total", NULL, NULL, 0, (double)restores);
  unsigned open = 0;
  unsigned long long refused = 0, timed_out = 0;
  zeus__daemon_conn_stats(q->d, &open, &refused, &timed_out);
  zeus__metrics_family(&w, "zeus_daemon_connections", "gauge", "Connections open (both listeners).");
  zeus__metrics_sample(&w, "zeus_daemon_connections", NULL, NULL, 0, (double)open);
  zeus__metrics_family(&w, "zeus_daemon_connections_refused_total", "counter",
                       "Connections refused by a per-client limit or the root reserve.");
  zeus__metrics_sample(&w, "zeus_daemon_connections_refused_total", NULL, NULL, 0, (double)refused);
  zeus__metrics_family(&w, "zeus_daemon_connections_timed_out_total", "counter",
                       "Connections closed because no whole request arrived within --request-timeout.");
  zeus__metrics_sample(&w, "zeus_daemon_connections_timed_out_total", NULL, NULL, 0, (double)timed_out);
  int rc = w.rc ? zeus__dreply_error(q, 500, "writing the metrics: out of memory")
                : zeus__dreply_text(q, 200, ZEUS__METRICS_CONTENT_TYPE, w.buf.data ? w.buf.data : "", w.buf.len);
  zeus__metrics_writer_free(&w);
  return rc;
}

static int h_unknown(zeus__dreq *q) { return zeus__dreply_error(q, 404, "no route %.200s", q->path); }

#define ROUTE_DEF_(name, path, flags, group, get_scopes, write_scopes, handler) \
  [ZEUS__R_##name] = {path, flags, group, get_scopes, write_scopes, handler},
#define ROUTE_DEF(name, ...) ROUTE_DEF_(name, __VA_ARGS__)
const zeus__droute_def zeus__droute_table[ZEUS__R_COUNT] = {ZEUS__DAEMON_ROUTES(ROUTE_DEF)};
#undef ROUTE_DEF
#undef ROUTE_DEF_
