/* The "sim" backend: the device vtable over a simulated node (zeus/sim.h). */
#include "device/backend.h"
#include "zeus/version.h"

static int sim_open(void **state, const zeus_devices_opts *opts) {
  zeus_sim_node *n;
  int rc = zeus_sim_node_open(&n, opts ? opts->sim : NULL);
  if (rc) return rc;
  *state = n;
  return ZEUS_OK;
}

static void sim_close(void *st) { zeus_sim_node_close(st); }
static unsigned sim_count(void *st) { return zeus_sim_node_gpu_count(st); }
static double sim_now(void *st) { return zeus_sim_now(st); }
static zeus_sim_node *sim_node(void *st) { return st; }
/* Thin wrappers: the vtable takes void *state, the engine a zeus_sim_node *. */
#define WRAP(name, fn, params, args) \
  static int name params { return fn args; }
WRAP(w_name, zeus_sim_gpu_name, (void *st, unsigned i, char *b, size_t l), (st, i, b, l))
WRAP(w_uuid, zeus_sim_gpu_uuid, (void *st, unsigned i, char *b, size_t l), (st, i, b, l))
WRAP(w_counter, zeus_sim_gpu_energy_counter_supported, (void *st, unsigned i, bool *o), (st, i, o))
WRAP(w_constraints, zeus_sim_gpu_power_limit_constraints, (void *st, unsigned i, unsigned *a, unsigned *b, unsigned *c),
     (st, i, a, b, c))
WRAP(w_get_pl, zeus_sim_gpu_get_power_limit, (void *st, unsigned i, unsigned *mw), (st, i, mw))
WRAP(w_set_pl, zeus_sim_gpu_set_power_limit, (void *st, unsigned i, unsigned mw), (st, i, mw))
WRAP(w_get_pm, zeus_sim_gpu_get_persistence_mode, (void *st, unsigned i, bool *e), (st, i, e))
WRAP(w_set_pm, zeus_sim_gpu_set_persistence_mode, (void *st, unsigned i, bool e), (st, i, e))
WRAP(w_energy, zeus_sim_gpu_total_energy, (void *st, unsigned i, uint64_t *mj), (st, i, mj))
WRAP(w_temperature, zeus_sim_gpu_temperature, (void *st, unsigned i, unsigned *c), (st, i, c))
WRAP(w_clocks, zeus_sim_gpu_current_clocks, (void *st, unsigned i, unsigned *sm, unsigned *mem), (st, i, sm, mem))
WRAP(w_arch, zeus_sim_gpu_architecture, (void *st, unsigned i, unsigned *a), (st, i, a))
WRAP(w_mem_clocks, zeus_sim_gpu_memory_clocks, (void *st, unsigned i, unsigned *m, size_t *c), (st, i, m, c))
WRAP(w_gr_clocks, zeus_sim_gpu_graphics_clocks, (void *st, unsigned i, unsigned mem, unsigned *m, size_t *c),
     (st, i, mem, m, c))
WRAP(w_lock, zeus_sim_gpu_set_locked_clocks, (void *st, unsigned i, unsigned lo, unsigned hi), (st, i, lo, hi))
WRAP(w_unlock, zeus_sim_gpu_reset_locked_clocks, (void *st, unsigned i), (st, i))
WRAP(w_mem_lock, zeus_sim_gpu_set_memory_locked_clocks, (void *st, unsigned i, unsigned lo, unsigned hi), (st, i, lo, hi))
WRAP(w_mem_unlock, zeus_sim_gpu_reset_memory_locked_clocks, (void *st, unsigned i), (st, i))
#undef WRAP

/* The simulated GPU knows its locks: hi == 0 is unlocked (a lock needs 0 < min <= max). */
static int w_get_lock(void *st, unsigned i, bool mem, zeus_clock_lock *out) {
  unsigned lo, hi, mlo, mhi;
  int rc = zeus_sim_gpu_get_locked_clocks(st, i, &lo, &hi, &mlo, &mhi);
  if (rc) return rc;
  if (mem) lo = mlo, hi = mhi;
  *out = hi ? (zeus_clock_lock){ZEUS_CLOCK_LOCKED, lo, hi, "device"} : (zeus_clock_lock){ZEUS_CLOCK_UNLOCKED, 0, 0, "device"};
  return ZEUS_OK;
}

/* The simulated GPU has no memory power of its own. */
static int w_power(void *st, unsigned i, zeus_power_domain domain, unsigned *mw) {
  switch (domain) {
    case ZEUS_POWER_INSTANT: return zeus_sim_gpu_instant_power(st, i, mw);
    case ZEUS_POWER_AVERAGE: return zeus_sim_gpu_average_power(st, i, mw);
    default: return zeus__error(ZEUS_ENOTSUP, "simulated GPU %u: no memory power reading", i);
  }
}

/* A simulated superchip module (the gh200 profile) reports the module's power. */
static int w_scope(void *st, unsigned i, zeus_power_scope *out) {
  zeus_sim_hardware hw;
  int rc = zeus_sim_gpu_hardware(st, i, &hw);
  if (rc) return rc;
  *out = hw.module_power_only ? ZEUS_POWER_SCOPE_MODULE : ZEUS_POWER_SCOPE_GPU;
  return ZEUS_OK;
}

/* A made-up bus per GPU, so that simulated GPUs look like lspci's. */
static int w_pci(void *st, unsigned i, char *buf, size_t len) {
  if (i >= zeus_sim_node_gpu_count(st)) return zeus__error(ZEUS_ENOENT, "simulated GPU %u does not exist", i);
  snprintf(buf, len, "0000:%02x:00.0", i + 1);
  return ZEUS_OK;
}

static int w_driver(void *st, char *buf, size_t len) {
  (void)st;
  snprintf(buf, len, "sim %s", zeus_version());
  return ZEUS_OK;
}

const zeus__gpu_backend zeus__backend_sim = {
    .name = "sim",
    .open = sim_open,
    .close = sim_close,
    .count = sim_count,
    .now = sim_now,
    .name_of = w_name,
    .uuid = w_uuid,
    .energy_counter_supported = w_counter,
    .power_limit_constraints = w_constraints,
    .get_power_limit = w_get_pl,
    .set_power_limit = w_set_pl,
    .get_persistence_mode = w_get_pm,
    .set_persistence_mode = w_set_pm,
    .total_energy = w_energy,
    .power = w_power,
    .power_scope = w_scope,
    .temperature = w_temperature,
    .current_clocks = w_clocks,
    .architecture = w_arch,
    .pci_address = w_pci,
    .driver_version = w_driver,
    .library_version = w_driver,
    .memory_clocks = w_mem_clocks,
    .graphics_clocks = w_gr_clocks,
    .set_locked_clocks = w_lock,
    .reset_locked_clocks = w_unlock,
    .set_memory_locked_clocks = w_mem_lock,
    .reset_memory_locked_clocks = w_mem_unlock,
    .get_locked_clocks = w_get_lock,
    .sim_node = sim_node,
};
