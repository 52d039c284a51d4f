/* The device layer: backend selection, visible-device mapping, settings bookkeeping and restore. */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "device/backend.h"
#include "device/counter_ticks.h"
#include "device/zeusd_client.h"

typedef struct saved_state {
  bool lost;             /* GPU_IS_LOST seen: never call it again */
  bool pl_saved;         /* pl_mw holds the limit before our first change */
  unsigned pl_mw;
  bool pm_saved;
  bool pm;
  bool clocks_locked;    /* we locked the SM clock */
  bool mem_locked;       /* we locked the memory clock */
  /* What this handle last did to each lock ([0] SM, [1] memory), for zeus_gpu_get_locked_clocks
   * where the backend cannot read a lock back; kept after zeus_devices_keep(). */
  zeus_clock_lock known[2];
} saved_state;

struct zeus_devices {
  const zeus__gpu_backend *be;
  void *st;
  unsigned n;
  unsigned map[ZEUS_MAX_GPUS]; /* visible index -> backend index */
  pthread_mutex_t mu;          /* guards saved[] */
  saved_state saved[ZEUS_MAX_GPUS];
  bool keep;
  char nvml_error[512]; /* why auto-selection did not use nvml ("" when it did, or was not tried) */
};

/* Open handles, for zeus_devices_restore_all() from a signal handler: lock-free slots. */
#define MAX_OPEN_HANDLES 64
static zeus_devices *open_handles[MAX_OPEN_HANDLES];

static void track(zeus_devices *d, bool add) {
  for (int i = 0; i < MAX_OPEN_HANDLES; i++) {
    zeus_devices *expect = add ? NULL : d;
    if (__atomic_compare_exchange_n(&open_handles[i], &expect, add ? d : NULL, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      return;
  }
}

static const zeus__gpu_backend *find_backend(const char *name) {
  for (int i = 0; zeus__gpu_backends[i]; i++)
    if (strcasecmp(zeus__gpu_backends[i]->name, name) == 0) return zeus__gpu_backends[i];
  return NULL;
}

static bool starts_with_ci(const char *s, const char *prefix) {
  return strncasecmp(s, prefix, strlen(prefix)) == 0;
}

int zeus__parse_visible_devices(const char *value, const char *const *uuids, unsigned count, unsigned *map,
                                unsigned *n) {
  *n = 0;
  if (!value) {
    for (unsigned i = 0; i < count && i < ZEUS_MAX_GPUS; i++) map[(*n)++] = i;
    return ZEUS_OK;
  }
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", value);
  int mode = -1; /* 0 integers, 1 uuids */
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (isspace((unsigned char)*tok)) tok++;
    size_t tl = strlen(tok);
    while (tl && isspace((unsigned char)tok[tl - 1])) tok[--tl] = '\0';
    if (starts_with_ci(tok, "MIG-"))
      return zeus__error(ZEUS_ENOTSUP,
                         "CUDA_VISIBLE_DEVICES entry '%s' is a MIG device: MIG is not supported, because NVML "
                         "cannot measure the power or energy of one MIG slice; list whole GPUs instead",
                         tok);
    bool is_uuid = starts_with_ci(tok, "GPU-");
    if (mode < 0) mode = is_uuid ? 1 : 0;
    unsigned idx = 0;
    if (mode == 0) {
      const char *p = tok;
      if (*p == '+') p++;
      if (!isdigit((unsigned char)*p)) {
        zeus__log(ZEUS_LOG_WARN, "device", "CUDA_VISIBLE_DEVICES: entry '%s' is not a GPU index; ignoring it and every later entry", tok);
        break;
      }
      /* Overflow-checked: 99999999999999999999 once showed as GPU 18446744073709551615. */
      errno = 0;
      unsigned long v = strtoul(p, NULL, 10);
      if (errno == ERANGE || v >= count) {
        zeus__log(ZEUS_LOG_WARN, "device",
                  "CUDA_VISIBLE_DEVICES: GPU %s does not exist (%u GPUs); ignoring it and every later entry", tok,
                  count);
        break;
      }
      idx = (unsigned)v;
    } else {
      if (!is_uuid) {
        zeus__log(ZEUS_LOG_WARN, "device", "CUDA_VISIBLE_DEVICES: entry '%s' is not a GPU-<uuid>; ignoring it and every later entry", tok);
        break;
      }
      unsigned matches = 0;
      for (unsigned i = 0; i < count; i++) {
        if (uuids[i] && starts_with_ci(uuids[i], tok)) { idx = i; matches++; }
      }
      if (matches != 1) {
        zeus__log(ZEUS_LOG_WARN, "device", "CUDA_VISIBLE_DEVICES: '%s' matches %s GPU; ignoring it and every later entry", tok,
                  matches ? "more than one" : "no");
        break;
      }
    }
    for (unsigned k = 0; k < *n; k++) {
      if (map[k] == idx) {
        zeus__log(ZEUS_LOG_WARN, "device", "CUDA_VISIBLE_DEVICES lists GPU %u twice ('%s'); as CUDA does, no GPU is visible", idx, value);
        *n = 0;
        return ZEUS_OK;
      }
    }
    if (*n == ZEUS_MAX_GPUS) break;
    map[(*n)++] = idx;
  }
  return ZEUS_OK;
}

static int map_visible(zeus_devices *d, const zeus_devices_opts *opts) {
  unsigned count = d->be->count(d->st);
  if (count > ZEUS_MAX_GPUS) count = ZEUS_MAX_GPUS;
  const char *value = NULL;
  if (!opts || !opts->all_devices) {
    value = opts && opts->visible_devices ? opts->visible_devices : getenv("CUDA_VISIBLE_DEVICES");
    /* AMD GPUs: HIP_VISIBLE_DEVICES first, as HIP and the original (zeus/device/gpu/amd.py) read it. */
    const char *hip = getenv("HIP_VISIBLE_DEVICES");
    if (!(opts && opts->visible_devices) && d->be == &zeus__backend_amdsmi && hip) value = hip;
  }
  char uuidbuf[ZEUS_MAX_GPUS][ZEUS_NAME_LEN];
  const char *uuids[ZEUS_MAX_GPUS];
  for (unsigned i = 0; i < count; i++) {
    uuids[i] = NULL;
    if (value && d->be->uuid && d->be->uuid(d->st, i, uuidbuf[i], sizeof uuidbuf[i]) == ZEUS_OK) uuids[i] = uuidbuf[i];
  }
  return zeus__parse_visible_devices(value, uuids, count, d->map, &d->n);
}

void zeus_devices_opts_init(zeus_devices_opts *o) { memset(o, 0, sizeof *o); }

/* Wraps the opened nvml or amdsmi backend so that settings go to the daemon (nvml+zeusd,
 * amdsmi+zeusd), after the visible GPUs are known: only those must match one of the daemon's. */
static int wrap_daemon(zeus_devices *d, const zeus_devices_opts *opts) {
  const zeus__gpu_backend *hybrid = d->be == &zeus__backend_amdsmi ? &zeus__backend_amdsmi_zeusd
                                                                   : &zeus__backend_nvml_zeusd;
  bool used[ZEUS_MAX_GPUS] = {false};
  for (unsigned v = 0; v < d->n; v++) used[d->map[v]] = true;
  void *w;
  int rc = zeus__zeusd_hybrid_open(&w, d->be, d->st, used, opts);
  d->st = NULL; /* owned (and closed on failure) by the wrapper */
  if (rc) return rc;
  d->be = hybrid;
  d->st = w;
  return ZEUS_OK;
}

int zeus_devices_open(zeus_devices **out, const zeus_devices_opts *opts) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_devices_open: out is required");
  const char *name = opts && opts->backend ? opts->backend : zeus__env_str("ZEUS_GPU_BACKEND");
  const zeus__gpu_backend *be = NULL;
  if (name && !(be = find_backend(name)))
    return zeus__error(ZEUS_EINVAL, "%s '%s' is not a GPU backend (expected nvml, amdsmi, sim, none or zeusd)",
                       opts && opts->backend ? "backend" : "ZEUS_GPU_BACKEND", name);
  bool daemon = zeus__zeusd_configured(opts ? opts->daemon : NULL);
  zeus_devices *d = calloc(1, sizeof *d);
  if (!d) return zeus__oom("opening the GPUs");
  pthread_mutex_init(&d->mu, NULL);
  d->keep = opts && opts->keep_settings_on_close;
  int rc;
  bool fell_back = false, wrap = false; /* wrap: the vendor backend's settings go to the daemon */
  if (be) {
    d->be = be;
    rc = be->open(&d->st, opts);
    wrap = daemon && (be == &zeus__backend_nvml || be == &zeus__backend_amdsmi);
  } else {
    d->be = &zeus__backend_nvml;
    rc = d->be->open(&d->st, opts);
    wrap = daemon;
    if (rc == ZEUS_ENOLIB) {
      snprintf(d->nvml_error, sizeof d->nvml_error, "%s", zeus_errmsg());
      /* NVML first; then amdsmi where it loads and lists GPUs; else the daemon's GPUs where one is
       * configured; else none. */
      d->be = &zeus__backend_amdsmi;
      d->st = NULL;
      rc = d->be->open(&d->st, opts);
      if (rc == ZEUS_OK && d->be->count(d->st) == 0) {
        d->be->close(d->st);
        d->st = NULL;
        rc = zeus__error(ZEUS_ENOLIB, "amdsmi lists no GPUs");
      }
      if (rc != ZEUS_OK) {
        /* Why neither vendor library gave GPUs (zeus_devices_nvml_error, what zeus gpus prints). */
        size_t used = strlen(d->nvml_error);
        snprintf(d->nvml_error + used, sizeof d->nvml_error - used, "; no AMD GPU: %s", zeus_errmsg());
        wrap = false;
        d->st = NULL;
        if (daemon) {
          zeus__log(ZEUS_LOG_DEBUG, "device", "no GPU library here (%s); every GPU reading goes to the daemon",
                    d->nvml_error);
          d->be = &zeus__backend_zeusd;
        } else {
          zeus__log(ZEUS_LOG_DEBUG, "device", "no NVIDIA GPUs: %s; using the 'none' backend", d->nvml_error);
          d->be = &zeus__backend_none;
          fell_back = true;
        }
        rc = d->be->open(&d->st, opts);
      }
    }
  }
  if (!rc) rc = map_visible(d, opts);
  if (!rc && wrap) rc = wrap_daemon(d, opts);
  if (rc) {
    if (d->st) d->be->close(d->st);
    pthread_mutex_destroy(&d->mu);
    free(d);
    return rc;
  }
  track(d, true);
  if (!fell_back) /* the fallback already said why in its one line */
    zeus__log(ZEUS_LOG_DEBUG, "device", "backend %s: %u visible GPU(s)", d->be->name, d->n);
  *out = d;
  return ZEUS_OK;
}

void zeus_devices_close(zeus_devices *d) {
  if (!d) return;
  track(d, false);
  if (!d->keep) zeus_devices_restore(d);
  d->be->close(d->st);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static zeus_devices *default_devices;
static int default_rc;
static char default_err[512];

static void close_default(void) {
  zeus_devices_close(default_devices);
  default_devices = NULL;
}

static void open_default(void) {
  default_rc = zeus_devices_open(&default_devices, NULL);
  if (default_rc)
    snprintf(default_err, sizeof default_err, "%s", zeus_errmsg());
  else
    atexit(close_default);
}

int zeus_devices_default(zeus_devices **out) {
  pthread_once(&default_once, open_default);
  if (default_rc) return zeus__error(default_rc, "%s", default_err);
  *out = default_devices;
  return ZEUS_OK;
}

const char *zeus_devices_backend(const zeus_devices *d) { return d ? d->be->name : "none"; }
const char *zeus_devices_nvml_error(const zeus_devices *d) {
  return d && d->nvml_error[0] ? d->nvml_error : NULL;
}
double zeus_devices_now(const zeus_devices *d) { return d->be->now(d->st); }
unsigned zeus_gpu_count(const zeus_devices *d) { return d ? d->n : 0; }

/* Resolves a visible index and refuses lost GPUs. */
static int resolve(zeus_devices *d, unsigned gpu, unsigned *phys) {
  if (!d) return zeus__error(ZEUS_EINVAL, "no device handle given");
  if (gpu >= d->n)
    return zeus__error(ZEUS_ENOENT, "GPU %u is not visible (%u visible GPU%s, backend %s)", gpu, d->n,
                       d->n == 1 ? "" : "s", d->be->name);
  if (__atomic_load_n(&d->saved[gpu].lost, __ATOMIC_RELAXED))
    return zeus__error(ZEUS_EGPULOST, "GPU %u was lost earlier (fallen off the bus or needs a reset); it is no longer used", gpu);
  *phys = d->map[gpu];
  return ZEUS_OK;
}

static int note(zeus_devices *d, unsigned gpu, int rc) {
  if (rc == ZEUS_EGPULOST) __atomic_store_n(&d->saved[gpu].lost, true, __ATOMIC_RELAXED);
  return rc;
}

static int unsupported(zeus_devices *d, unsigned gpu, const char *what) {
  return zeus__error(ZEUS_ENOTSUP, "GPU %u (backend %s): %s is not supported", gpu, d->be->name, what);
}

#define CALL(d, gpu, slot, what, ...)                                 \
  do {                                                                \
    unsigned phys_;                                                   \
    int rc_ = resolve((d), (gpu), &phys_);                            \
    if (rc_) return rc_;                                              \
    if (!(d)->be->slot) return unsupported((d), (gpu), (what));       \
    return note((d), (gpu), (d)->be->slot((d)->st, phys_, __VA_ARGS__)); \
  } while (0)

int zeus_gpu_name(zeus_devices *d, unsigned gpu, char *buf, size_t len) { CALL(d, gpu, name_of, "reading the name", buf, len); }
int zeus_gpu_uuid(zeus_devices *d, unsigned gpu, char *buf, size_t len) { CALL(d, gpu, uuid, "reading the UUID", buf, len); }
int zeus_gpu_pci_address(zeus_devices *d, unsigned gpu, char *buf, size_t len) {
  if (!buf || !len) return zeus__error(ZEUS_EINVAL, "no buffer for the PCI address");
  CALL(d, gpu, pci_address, "reading the PCI address", buf, len);
}
int zeus_gpu_energy_counter_supported(zeus_devices *d, unsigned gpu, bool *out) {
  CALL(d, gpu, energy_counter_supported, "the energy counter query", out);
}
int zeus_gpu_power_limit_constraints(zeus_devices *d, unsigned gpu, unsigned *min_mw, unsigned *max_mw,
                                     unsigned *default_mw) {
  CALL(d, gpu, power_limit_constraints, "reading the power-limit range", min_mw, max_mw, default_mw);
}
int zeus_gpu_get_power_limit(zeus_devices *d, unsigned gpu, unsigned *mw) {
  CALL(d, gpu, get_power_limit, "reading the power limit", mw);
}
int zeus_gpu_get_persistence_mode(zeus_devices *d, unsigned gpu, bool *enabled) {
  CALL(d, gpu, get_persistence_mode, "reading persistence mode", enabled);
}
int zeus_gpu_total_energy(zeus_devices *d, unsigned gpu, uint64_t *mj) {
  CALL(d, gpu, total_energy, "the total-energy counter", mj);
}
int zeus_gpu_power(zeus_devices *d, unsigned gpu, zeus_power_domain domain, unsigned *mw) {
  if ((unsigned)domain > ZEUS_POWER_MEMORY_AVERAGE)
    return zeus__error(ZEUS_EINVAL, "unknown power domain %d (expected 0 instant, 1 average or 2 memory average)",
                       (int)domain);
  CALL(d, gpu, power, "reading the power draw", domain, mw);
}
int zeus_gpu_power_scope(zeus_devices *d, unsigned gpu, zeus_power_scope *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "no place for the power scope");
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  *out = ZEUS_POWER_SCOPE_GPU;
  if (!d->be->power_scope) return ZEUS_OK;
  return note(d, gpu, d->be->power_scope(d->st, phys, out));
}
const char *zeus_power_scope_name(zeus_power_scope scope) {
  switch (scope) {
    case ZEUS_POWER_SCOPE_GPU: return "gpu";
    case ZEUS_POWER_SCOPE_MODULE: return "module";
  }
  return "unknown";
}
int zeus_gpu_instant_power(zeus_devices *d, unsigned gpu, unsigned *mw) {
  return zeus_gpu_power(d, gpu, ZEUS_POWER_INSTANT, mw);
}
int zeus_gpu_temperature(zeus_devices *d, unsigned gpu, unsigned *celsius) {
  CALL(d, gpu, temperature, "reading the temperature", celsius);
}
int zeus_gpu_current_clocks(zeus_devices *d, unsigned gpu, unsigned *sm_mhz, unsigned *mem_mhz) {
  CALL(d, gpu, current_clocks, "reading the current clocks", sm_mhz, mem_mhz);
}
int zeus_gpu_architecture(zeus_devices *d, unsigned gpu, unsigned *arch) {
  CALL(d, gpu, architecture, "reading the architecture", arch);
}

const char *zeus_gpu_architecture_name(unsigned arch) {
  static const char *const names[] = {NULL,    NULL,     "Kepler", "Maxwell", "Pascal",    "Volta", "Turing",
                                      "Ampere", "Ada",    "Hopper", "Blackwell", NULL,     NULL,    "Rubin"};
  return arch < ZEUS__ARRAY_LEN(names) && names[arch] ? names[arch] : "unknown";
}

static int version_of(zeus_devices *d, int (*fn)(void *, char *, size_t), char *buf, size_t len, const char *what) {
  if (!d) return zeus__error(ZEUS_EINVAL, "no devices handle given");
  if (!buf || !len) return zeus__error(ZEUS_EINVAL, "no buffer for the %s", what);
  if (!fn) return zeus__error(ZEUS_ENOTSUP, "backend %s: the %s is not known", d->be->name, what);
  return fn(d->st, buf, len);
}
int zeus_devices_driver_version(zeus_devices *d, char *buf, size_t len) {
  return version_of(d, d ? d->be->driver_version : NULL, buf, len, "driver version");
}
int zeus_devices_library_version(zeus_devices *d, char *buf, size_t len) {
  return version_of(d, d ? d->be->library_version : NULL, buf, len, "library version");
}
int zeus_gpu_supported_memory_clocks(zeus_devices *d, unsigned gpu, unsigned *mhz, size_t *count) {
  CALL(d, gpu, memory_clocks, "listing memory clocks", mhz, count);
}
int zeus_gpu_supported_graphics_clocks(zeus_devices *d, unsigned gpu, unsigned mem_mhz, unsigned *mhz,
                                       size_t *count) {
  CALL(d, gpu, graphics_clocks, "listing SM clocks", mem_mhz, mhz, count);
}

int zeus_gpu_set_power_limit(zeus_devices *d, unsigned gpu, unsigned mw) {
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  if (!d->be->set_power_limit || !d->be->get_power_limit || !d->be->power_limit_constraints)
    return unsupported(d, gpu, "setting the power limit");
  unsigned lo, hi, def;
  if ((rc = note(d, gpu, d->be->power_limit_constraints(d->st, phys, &lo, &hi, &def)))) return rc;
  if (mw < lo || mw > hi)
    return zeus__error(ZEUS_ERANGE, "GPU %u: power limit %u mW is outside the allowed range [%u, %u] mW", gpu, mw, lo, hi);
  pthread_mutex_lock(&d->mu);
  saved_state *s = &d->saved[gpu];
  if (!s->pl_saved) {
    unsigned cur;
    if ((rc = note(d, gpu, d->be->get_power_limit(d->st, phys, &cur)))) goto out;
    s->pl_mw = cur;
    s->pl_saved = true;
  }
  rc = note(d, gpu, d->be->set_power_limit(d->st, phys, mw));
out:
  pthread_mutex_unlock(&d->mu);
  return rc;
}

int zeus_gpu_set_persistence_mode(zeus_devices *d, unsigned gpu, bool enabled) {
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  if (!d->be->set_persistence_mode) return unsupported(d, gpu, "setting persistence mode");
  pthread_mutex_lock(&d->mu);
  saved_state *s = &d->saved[gpu];
  if (!s->pm_saved && d->be->get_persistence_mode) {
    bool cur;
    if (d->be->get_persistence_mode(d->st, phys, &cur) == ZEUS_OK) {
      s->pm = cur;
      s->pm_saved = true;
    }
  }
  rc = note(d, gpu, d->be->set_persistence_mode(d->st, phys, enabled));
  pthread_mutex_unlock(&d->mu);
  return rc;
}

static int set_lock(zeus_devices *d, unsigned gpu, unsigned lo, unsigned hi, bool mem) {
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  if (lo > hi)
    return zeus__error(ZEUS_EINVAL, "GPU %u: locked %s clock range needs min <= max, got [%u, %u] MHz", gpu,
                       mem ? "memory" : "SM", lo, hi);
  int (*fn)(void *, unsigned, unsigned, unsigned) = mem ? d->be->set_memory_locked_clocks : d->be->set_locked_clocks;
  if (!fn) return unsupported(d, gpu, mem ? "locking the memory clock" : "locking the SM clock");
  pthread_mutex_lock(&d->mu);
  rc = note(d, gpu, fn(d->st, phys, lo, hi));
  if (!rc) {
    *(mem ? &d->saved[gpu].mem_locked : &d->saved[gpu].clocks_locked) = true;
    d->saved[gpu].known[mem] = (zeus_clock_lock){ZEUS_CLOCK_LOCKED, lo, hi, "handle"};
  }
  pthread_mutex_unlock(&d->mu);
  return rc;
}

static int reset_lock(zeus_devices *d, unsigned gpu, bool mem) {
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  int (*fn)(void *, unsigned) = mem ? d->be->reset_memory_locked_clocks : d->be->reset_locked_clocks;
  if (!fn) return unsupported(d, gpu, mem ? "resetting the memory clock" : "resetting the SM clock");
  pthread_mutex_lock(&d->mu);
  rc = note(d, gpu, fn(d->st, phys));
  if (!rc) {
    *(mem ? &d->saved[gpu].mem_locked : &d->saved[gpu].clocks_locked) = false;
    d->saved[gpu].known[mem] = (zeus_clock_lock){ZEUS_CLOCK_UNLOCKED, 0, 0, "handle"};
  }
  pthread_mutex_unlock(&d->mu);
  return rc;
}

int zeus_gpu_set_locked_clocks(zeus_devices *d, unsigned gpu, unsigned min_mhz, unsigned max_mhz) {
  return set_lock(d, gpu, min_mhz, max_mhz, false);
}
int zeus_gpu_reset_locked_clocks(zeus_devices *d, unsigned gpu) { return reset_lock(d, gpu, false); }
int zeus_gpu_set_memory_locked_clocks(zeus_devices *d, unsigned gpu, unsigned min_mhz, unsigned max_mhz) {
  return set_lock(d, gpu, min_mhz, max_mhz, true);
}
int zeus_gpu_reset_memory_locked_clocks(zeus_devices *d, unsigned gpu) { return reset_lock(d, gpu, true); }

/* Forgets lock m (0 SM, 1 memory) of a GPU after the backend reset it (d->mu held). */
static void forget_lock(zeus_devices *d, unsigned gpu, int m) {
  *(m ? &d->saved[gpu].mem_locked : &d->saved[gpu].clocks_locked) = false;
  d->saved[gpu].known[m] = (zeus_clock_lock){ZEUS_CLOCK_UNLOCKED, 0, 0, "handle"};
}

/* Both locks in the backend's one operation where it has one (amdsmi: a single performance-level
 * reset; a daemon: one request), else the two resets one after the other, the second tried
 * whatever the first did; a memory reset the GPU does not support (NVML before Ampere) is no
 * failure. The first failure is returned with its own message. */
int zeus_gpu_reset_all_clocks(zeus_devices *d, unsigned gpu) {
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  const zeus__gpu_backend *be = d->be;
  if (be->reset_all_locked_clocks) {
    pthread_mutex_lock(&d->mu);
    rc = note(d, gpu, be->reset_all_locked_clocks(d->st, phys));
    if (!rc) {
      forget_lock(d, gpu, 0);
      forget_lock(d, gpu, 1);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
  }
  if (!be->reset_locked_clocks && !be->reset_memory_locked_clocks)
    return unsupported(d, gpu, "resetting the locked clocks");
  int first = ZEUS_OK;
  char msg[512] = "";
  pthread_mutex_lock(&d->mu);
  for (int m = 0; m < 2; m++) {
    int (*fn)(void *, unsigned) = m ? be->reset_memory_locked_clocks : be->reset_locked_clocks;
    rc = fn ? note(d, gpu, fn(d->st, phys))
            : unsupported(d, gpu, m ? "resetting the memory clock" : "resetting the SM clock");
    if (!rc) forget_lock(d, gpu, m);
    else if (m == 1 && rc == ZEUS_ENOTSUP) continue; /* no memory lock on this GPU: nothing to reset */
    else if (!first || (first == ZEUS_ENOTSUP && rc != ZEUS_ENOTSUP)) { /* a real failure outranks "not supported" */
      first = rc;
      snprintf(msg, sizeof msg, "%s", zeus_errmsg());
    }
    if (rc == ZEUS_EGPULOST) break;
  }
  pthread_mutex_unlock(&d->mu);
  return first ? zeus__error(first, "%s", msg) : ZEUS_OK;
}

int zeus_gpu_get_locked_clocks(zeus_devices *d, unsigned gpu, bool memory, zeus_clock_lock *out) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_gpu_get_locked_clocks: out is required");
  *out = (zeus_clock_lock){ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, ""};
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  if (d->be->get_locked_clocks) {
    rc = note(d, gpu, d->be->get_locked_clocks(d->st, phys, memory, out));
    if (rc == ZEUS_OK || rc == ZEUS_EGPULOST) return rc;
    /* The backend cannot say (NVML; a daemon without the route): what this handle did. */
  }
  pthread_mutex_lock(&d->mu);
  *out = d->saved[gpu].known[memory];
  pthread_mutex_unlock(&d->mu);
  if (!out->source) *out = (zeus_clock_lock){ZEUS_CLOCK_LOCK_UNKNOWN, 0, 0, ""};
  return ZEUS_OK;
}

/* Restores one GPU without taking the handle's lock. From a signal handler `quiet` is true:
 * logging takes a lock the interrupted thread may hold. */
static int restore_gpu(zeus_devices *d, unsigned gpu, bool quiet) {
  saved_state *s = &d->saved[gpu];
  if (s->lost) return ZEUS_OK;
  unsigned phys = d->map[gpu];
  int first = ZEUS_OK, rc;
  bool both = s->clocks_locked && s->mem_locked && d->be->reset_all_locked_clocks;
  if (both) {
    /* Both locks in one operation where the backend has one (amdsmi: one performance-level reset
     * instead of one per domain and a lock put back between them). */
    if ((rc = d->be->reset_all_locked_clocks(d->st, phys)) == ZEUS_OK) {
      s->clocks_locked = s->mem_locked = false;
      s->known[0] = s->known[1] = (zeus_clock_lock){ZEUS_CLOCK_UNLOCKED, 0, 0, "handle"};
    } else {
      first = rc;
    }
  }
  if (!both && s->clocks_locked && d->be->reset_locked_clocks) {
    if ((rc = d->be->reset_locked_clocks(d->st, phys)) == ZEUS_OK) {
      s->clocks_locked = false;
      s->known[0] = (zeus_clock_lock){ZEUS_CLOCK_UNLOCKED, 0, 0, "handle"};
    } else if (!first) {
      first = rc;
    }
  }
  if (!both && s->mem_locked && d->be->reset_memory_locked_clocks) {
    if ((rc = d->be->reset_memory_locked_clocks(d->st, phys)) == ZEUS_OK) {
      s->mem_locked = false;
      s->known[1] = (zeus_clock_lock){ZEUS_CLOCK_UNLOCKED, 0, 0, "handle"};
    } else if (!first) {
      first = rc;
    }
  }
  if (s->pl_saved) {
    unsigned cur = 0;
    if (d->be->get_power_limit(d->st, phys, &cur) == ZEUS_OK && cur == s->pl_mw) {
      s->pl_saved = false;
    } else if ((rc = d->be->set_power_limit(d->st, phys, s->pl_mw)) == ZEUS_OK) {
      if (!quiet) zeus__log(ZEUS_LOG_INFO, "device", "GPU %u: power limit restored to %u mW", gpu, s->pl_mw);
      s->pl_saved = false;
    } else if (!first) {
      first = rc;
    }
  }
  if (s->pm_saved && d->be->set_persistence_mode) {
    if ((rc = d->be->set_persistence_mode(d->st, phys, s->pm)) == ZEUS_OK) s->pm_saved = false;
    else if (!first) first = rc;
  }
  if (first == ZEUS_EGPULOST) s->lost = true;
  return first;
}

/* Through a daemon: the daemon holds the values our changes replaced; releasing the handle's
 * lease has it put them back. Released whatever this handle still has set: a lock reset through
 * the daemon leaves its record ("unlocked", held by this lease) there, which would hold the clock
 * against other clients until this process exits (the backend sends nothing without a lease). */
static int release_all(zeus_devices *d) {
  bool any = false;
  for (unsigned g = 0; g < d->n; g++) {
    saved_state *s = &d->saved[g];
    any = any || s->pl_saved || s->pm_saved || s->clocks_locked || s->mem_locked;
  }
  int rc = d->be->release(d->st);
  if (rc) {
    zeus__log(ZEUS_LOG_WARN, "device",
              "the daemon did not give this process's GPU settings back now (%s); it does when "
              "the process exits",
              zeus_errmsg());
    return rc;
  }
  for (unsigned g = 0; g < d->n; g++) {
    saved_state *s = &d->saved[g];
    s->pl_saved = s->pm_saved = s->clocks_locked = s->mem_locked = false;
  }
  if (any) zeus__log(ZEUS_LOG_INFO, "device", "the daemon gave back the GPU settings this handle changed");
  return ZEUS_OK;
}

int zeus_devices_restore(zeus_devices *d) {
  if (!d) return ZEUS_OK;
  int first = ZEUS_OK;
  pthread_mutex_lock(&d->mu);
  if (d->be->release) {
    first = release_all(d);
    pthread_mutex_unlock(&d->mu);
    return first;
  }
  for (unsigned g = 0; g < d->n; g++) {
    int rc = restore_gpu(d, g, false);
    if (rc && !first) first = rc;
  }
  pthread_mutex_unlock(&d->mu);
  return first;
}

void zeus_devices_restore_all(void) {
  for (int i = 0; i < MAX_OPEN_HANDLES; i++) {
    zeus_devices *d = __atomic_load_n(&open_handles[i], __ATOMIC_SEQ_CST);
    /* Through a daemon, the daemon gives everything back when it sees this process exit. */
    if (!d || d->be->release) continue;
    /* A handler may interrupt a thread holding d->mu: try the lock, and restore anyway if it is
     * taken, since the process is about to exit. */
    bool locked = pthread_mutex_trylock(&d->mu) == 0;
    for (unsigned g = 0; g < d->n; g++) restore_gpu(d, g, true);
    if (locked) pthread_mutex_unlock(&d->mu);
  }
}

zeus_sim_node *zeus_devices_sim_node(zeus_devices *d) {
  return d && d->be->sim_node ? d->be->sim_node(d->st) : NULL;
}

/* The simulated GPU's record of one of its sensor clocks (power: the power readings'), as
 * device/counter_ticks.h says. */
static int sim_ticks_since(zeus_devices *d, unsigned gpu, bool power, double after_s, zeus__counter_tick *out,
                           size_t max, size_t *n) {
  *n = 0;
  zeus_sim_node *node = zeus_devices_sim_node(d);
  if (!node || zeus_sim_node_clock(node) != ZEUS_SIM_CLOCK_VIRTUAL)
    return zeus__error(ZEUS_ENOTSUP, "the %s backend keeps no record of its sensors' ticks", zeus_devices_backend(d));
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  zeus_sim_hardware hw;
  if ((rc = zeus_sim_gpu_hardware(node, phys, &hw))) return rc;
  if (!(hw.tick_s > 0)) /* a counter that moves continuously: nothing to follow */
    return zeus__error(ZEUS_ENOTSUP, "simulated GPU %u's energy counter does not tick", gpu);
  zeus_sim_tick tk[ZEUS__SENSOR_TICKS_MAX];
  if (max > ZEUS__SENSOR_TICKS_MAX) max = ZEUS__SENSOR_TICKS_MAX;
  size_t k = power ? zeus_sim_gpu_power_ticks_since(node, phys, after_s, tk, max)
                   : zeus_sim_gpu_ticks_since(node, phys, after_s, tk, max);
  for (size_t i = 0; i < k; i++) out[i] = (zeus__counter_tick){tk[i].t_s, tk[i].counter_j, tk[i].power_w};
  *n = k;
  return ZEUS_OK;
}

int zeus__gpu_counter_ticks_since(zeus_devices *d, unsigned gpu, double after_s, zeus__counter_tick *out, size_t max,
                                  size_t *n) {
  return sim_ticks_since(d, gpu, false, after_s, out, max, n);
}

int zeus__gpu_power_ticks_since(zeus_devices *d, unsigned gpu, double after_s, zeus__counter_tick *out, size_t max,
                                size_t *n) {
  return sim_ticks_since(d, gpu, true, after_s, out, max, n);
}

int zeus__gpu_sensor_read_costs(zeus_devices *d, unsigned gpu, double *counter_s, double *power_s) {
  zeus_sim_node *node = zeus_devices_sim_node(d);
  if (!node || zeus_sim_node_clock(node) != ZEUS_SIM_CLOCK_VIRTUAL)
    return zeus__error(ZEUS_ENOTSUP, "the %s backend keeps no record of its sensors' ticks", zeus_devices_backend(d));
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  zeus_sim_hardware hw;
  if (rc || (rc = zeus_sim_gpu_hardware(node, phys, &hw))) return rc;
  *counter_s = hw.energy_read_s;
  *power_s = hw.power_read_s;
  return ZEUS_OK;
}

int zeus_devices_sim_index(zeus_devices *d, unsigned gpu, unsigned *node_gpu) {
  if (!zeus_devices_sim_node(d)) return zeus__error(ZEUS_ENOTSUP, "the %s backend is not simulated", zeus_devices_backend(d));
  unsigned phys;
  int rc = resolve(d, gpu, &phys);
  if (rc) return rc;
  *node_gpu = phys;
  return ZEUS_OK;
}
