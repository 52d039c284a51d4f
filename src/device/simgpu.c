/* The simulated GPU engine: workload models, a virtual or wall clock, exact energy accounting,
 * and a hardware profile (zeus_sim_hardware) for sensors that tick and calls that take time.
 *
 * Energy bookkeeping: each GPU keeps the energy used up to t_last and at most one piece of work
 * [.., busy_until) at busy_power; idle power fills the rest. Every reading first advances the
 * GPU to "now", so the energy at any instant is exact (piecewise-constant power). Advancing stops
 * at every event on the way (a sensor tick, a setting taking effect), in time order, so that the
 * readings frozen at a tick and the power after a delayed setting are exact too. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "zeus/sim.h"

#define SIM_MAX_CLOCKS 512
/* Energy checkpoints for the 1-second average power (NVML's POWER_AVERAGE window): at most one
 * every SIM_CK_SPACING seconds, enough of them to reach a second back. */
#define SIM_CK 128
#define SIM_CK_SPACING 0.01
#define SIM_AVG_WINDOW_S 1.0

#define SIM_TICK_RING 256 /* ticks a GPU remembers, of each clock: 25.6 s at 100 ms */

typedef struct simgpu {
  zeus_sim_dvfs p; /* defaults applied */
  zeus_sim_model_kind model;
  zeus_sim_table_row *table; /* sorted by power limit, highest first */
  size_t ntable;
  char name[ZEUS_NAME_LEN];
  bool has_counter;
  zeus_sim_hardware hw;
  bool power_ticks;   /* readings other than the counter refresh at ticks */
  bool power_clock;   /* ... on a clock of their own (hw.power_tick_s), not the counter's */
  bool power_locked;  /* ... power_phase_s after each counter tick (one clock, another phase) */
  uint64_t rng;       /* tick jitter and power noise */
  uint64_t ntick;     /* counter ticks so far */
  double next_tick;   /* time of the next counter tick; 0: no ticks */
  double last_tick;   /* -1 before the first */
  uint64_t nptick;    /* power ticks so far (power_clock) */
  double next_ptick;  /* time of the next power tick (power_clock) */
  double tick_power_w, tick_avg_w; /* readings frozen at the last (power) tick */
  zeus_sim_tick ticks[SIM_TICK_RING];  /* the last counter ticks, for a virtual-clock follower */
  zeus_sim_tick pticks[SIM_TICK_RING]; /* the last power ticks (power_clock) */
  unsigned tick_clock_mhz;
  /* settings that have been called but not yet taken effect; at < 0: none */
  double pend_limit_at, pend_lock_at;
  unsigned pend_limit_mw, pend_lock_min, pend_lock_max;
  unsigned set_limit_mw, set_lock_min, set_lock_max; /* what the getters show */
  double time_scale;
  unsigned gclocks[SIM_MAX_CLOCKS]; /* highest first */
  size_t ngclocks;
  unsigned min_mw, max_mw, default_mw, limit_mw;
  bool persistence;
  unsigned lock_min, lock_max, mem_lock_min, mem_lock_max;
  bool loaded; /* kept busy by a load outside the simulation (zeus_sim_gpu_set_load) */
  double t_last, energy_j, busy_until, busy_power;
  double counter_j;
  double ck_t[SIM_CK], ck_e[SIM_CK]; /* ring of (time, exact energy) checkpoints */
  unsigned ck_head, ck_n;            /* next slot to write; entries held */
} simgpu;

struct zeus_sim_node {
  pthread_mutex_t mu;
  unsigned n;
  simgpu *g;
  zeus_sim_clock_kind clock;
  double t_virtual;
  double t0_wall;
};

static void dvfs_defaults(zeus_sim_dvfs *p) {
  if (!p->max_clock_mhz) p->max_clock_mhz = 1740;
  if (!p->min_clock_mhz) p->min_clock_mhz = 210;
  if (!p->clock_step_mhz) p->clock_step_mhz = 15;
  if (!p->mem_clock_mhz) p->mem_clock_mhz = 7251;
  if (p->min_power_limit_w <= 0) p->min_power_limit_w = 100;
  if (p->max_power_limit_w <= 0) p->max_power_limit_w = 300;
  if (p->default_power_limit_w <= 0) p->default_power_limit_w = p->max_power_limit_w;
  if (p->idle_power_w <= 0) p->idle_power_w = 30;
  if (p->static_power_w <= 0) p->static_power_w = 120;
  if (p->dynamic_power_w <= 0) p->dynamic_power_w = 170;
  if (p->time_per_unit_s <= 0) p->time_per_unit_s = 0.05;
  if (p->mem_bound_fraction <= 0) p->mem_bound_fraction = 0.25;
}

/* The highest power (W) a simulated GPU may be given anywhere (limits, model powers, a table row's
 * energy over time): far above any GPU, and low enough that every value in mW fits the unsigned
 * 32-bit readings NVML gives (a limit of 99,999,999,999 W once wrapped to 276,446.2 W). */
#define SIM_MAX_POWER_W 100000.0

/* W to mW for a reading, within what an unsigned reading holds (configs are bounded above, so
 * this only guards against arithmetic at the edges). */
static unsigned to_mw(double w) {
  if (!(w > 0)) return 0;
  double mw = w * 1000;
  return mw >= 4294967295.0 ? 4294967295u : (unsigned)lround(mw);
}

static int check_power(unsigned i, const char *field, double w) {
  if (!(w > 0 && w <= SIM_MAX_POWER_W))
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: %s %g W is outside (0, %g] W", i, field, w, SIM_MAX_POWER_W);
  return ZEUS_OK;
}

static int check_gpu_config(const zeus_sim_gpu_config *c, unsigned i) {
  const zeus_sim_dvfs *p = &c->dvfs;
  int rc;
  if ((rc = check_power(i, "min_power_limit_w", p->min_power_limit_w)) ||
      (rc = check_power(i, "max_power_limit_w", p->max_power_limit_w)) ||
      (rc = check_power(i, "default_power_limit_w", p->default_power_limit_w)) ||
      (rc = check_power(i, "idle_power_w", p->idle_power_w)) ||
      (rc = check_power(i, "static_power_w", p->static_power_w)) ||
      (rc = check_power(i, "dynamic_power_w", p->dynamic_power_w)))
    return rc;
  if (!(p->time_per_unit_s > 0 && p->time_per_unit_s <= 1e6))
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: time_per_unit_s %g is outside (0, 1e6] s", i,
                       p->time_per_unit_s);
  if (!(c->time_scale >= 0 && c->time_scale <= 1e6))
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: time_scale %g is outside [0, 1e6]", i, c->time_scale);
  if (p->min_clock_mhz > p->max_clock_mhz)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: min_clock_mhz %u is above max_clock_mhz %u", i,
                       p->min_clock_mhz, p->max_clock_mhz);
  if (p->min_power_limit_w > p->max_power_limit_w)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: min_power_limit_w %g is above max_power_limit_w %g",
                       i, p->min_power_limit_w, p->max_power_limit_w);
  if (p->default_power_limit_w < p->min_power_limit_w || p->default_power_limit_w > p->max_power_limit_w)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: default_power_limit_w %g is outside [%g, %g]", i,
                       p->default_power_limit_w, p->min_power_limit_w, p->max_power_limit_w);
  if (p->mem_bound_fraction > 1)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: mem_bound_fraction %g is above 1", i,
                       p->mem_bound_fraction);
  if ((p->max_clock_mhz - p->min_clock_mhz) / p->clock_step_mhz + 1 > SIM_MAX_CLOCKS)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: more than %d SM clocks between %u and %u MHz", i,
                       SIM_MAX_CLOCKS, p->min_clock_mhz, p->max_clock_mhz);
  if (c->counter_period_s < 0 || c->counter_period_s > 10)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: counter_period_s %g is outside [0, 10]", i,
                       c->counter_period_s);
  if (c->model == ZEUS_SIM_TABLE) {
    if (!c->table || c->table_len == 0)
      return zeus__error(ZEUS_EINVAL, "simulated GPU %u: the table model has no rows", i);
    for (size_t r = 0; r < c->table_len; r++) {
      const zeus_sim_table_row *row = &c->table[r];
      if (!(row->power_limit_w > 0) || !(row->time_per_unit_s > 0) || !(row->energy_per_unit_j > 0))
        return zeus__error(ZEUS_EINVAL,
                           "simulated GPU %u: table row %zu must have a positive power limit, time and "
                           "energy (got %g W, %g s, %g J)",
                           i, r + 1, row->power_limit_w, row->time_per_unit_s, row->energy_per_unit_j);
      if (row->power_limit_w > SIM_MAX_POWER_W || !(row->time_per_unit_s <= 1e6) ||
          !(row->energy_per_unit_j / row->time_per_unit_s <= SIM_MAX_POWER_W))
        return zeus__error(ZEUS_EINVAL,
                           "simulated GPU %u: table row %zu is out of range (%g W, %g s, %g J): a power limit "
                           "and an energy over time of at most %g W, a time of at most 1e6 s",
                           i, r + 1, row->power_limit_w, row->time_per_unit_s, row->energy_per_unit_j, SIM_MAX_POWER_W);
    }
    /* Duplicates are found after sorting (init_gpu): comparing every pair made a table of 100,000
     * rows take seconds. */
  } else if (c->model != ZEUS_SIM_DVFS) {
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: unknown model %d", i, (int)c->model);
  }
  return ZEUS_OK;
}

static void checkpoint(simgpu *g, double t, double e);
static void operating_point(const simgpu *g, unsigned *clock, double *t_unit, double *power);

/* splitmix64: a uniform draw in [0, 1). */
static double draw(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0;
}

static double next_interval(simgpu *g, double period, double jitter) {
  return period + (jitter > 0 ? jitter * (2 * draw(&g->rng) - 1) : 0);
}

static int check_hw(const zeus_sim_hardware *h, unsigned i) {
  const struct { const char *name; double v, max; } f[] = {
      {"tick_s", h->tick_s, 10},
      {"tick_jitter_s", h->tick_jitter_s, 10},
      {"power_tick_s", h->power_tick_s, 10},
      {"power_tick_jitter_s", h->power_tick_jitter_s, 10},
      {"power_phase_s", h->power_phase_s, 10},
      {"power_noise", h->power_noise, 0.5},
      {"energy_read_s", h->energy_read_s, 1},
      {"power_read_s", h->power_read_s, 1},
      {"average_power_read_s", h->average_power_read_s, 1},
      {"clock_read_s", h->clock_read_s, 1},
      {"power_limit_read_s", h->power_limit_read_s, 1},
      {"clock_lock_call_s", h->clock_lock_call_s, 10},
      {"clock_lock_effect_s", h->clock_lock_effect_s, 10},
      {"power_limit_call_s", h->power_limit_call_s, 10},
      {"power_limit_down_effect_s", h->power_limit_down_effect_s, 10},
      {"power_limit_up_effect_s", h->power_limit_up_effect_s, 10},
      {"module_other_w", h->module_other_w, 10000},
  };
  for (size_t k = 0; k < ZEUS__ARRAY_LEN(f); k++)
    if (!(f[k].v >= 0 && f[k].v <= f[k].max))
      return zeus__error(ZEUS_EINVAL, "simulated GPU %u: hardware %s %g is outside [0, %g]", i, f[k].name, f[k].v,
                         f[k].max);
  if (h->tick_s > 0 && h->tick_jitter_s >= h->tick_s / 2)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: hardware tick_jitter_s %g must be below half of tick_s %g", i,
                       h->tick_jitter_s, h->tick_s);
  if (h->power_tick_s > 0 && h->power_tick_jitter_s >= h->power_tick_s / 2)
    return zeus__error(ZEUS_EINVAL,
                       "simulated GPU %u: hardware power_tick_jitter_s %g must be below half of power_tick_s %g", i,
                       h->power_tick_jitter_s, h->power_tick_s);
  if (h->power_tick_s > 0 && !(h->tick_s > 0 && h->power_at_ticks))
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: hardware power_tick_s needs tick_s and power_at_ticks (the power "
                       "readings tick on a clock of their own beside the counter's)", i);
  if (h->power_phase_s > 0 && h->power_phase_s >= (h->power_tick_s > 0 ? h->power_tick_s : h->tick_s))
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: hardware power_phase_s %g must be below the power's tick period",
                       i, h->power_phase_s);
  return ZEUS_OK;
}

static int cmp_row_desc(const void *a, const void *b) {
  double x = ((const zeus_sim_table_row *)a)->power_limit_w;
  double y = ((const zeus_sim_table_row *)b)->power_limit_w;
  return (x < y) - (x > y);
}

/* The limits, clocks and powers a hardware profile measured (nonzero fields) over the GPU model's;
 * a table model keeps its own limits and working powers. */
static void apply_measured(zeus_sim_dvfs *p, const zeus_sim_dvfs *m, bool table) {
  if (m->max_clock_mhz) p->max_clock_mhz = m->max_clock_mhz;
  if (m->min_clock_mhz) p->min_clock_mhz = m->min_clock_mhz;
  if (m->clock_step_mhz) p->clock_step_mhz = m->clock_step_mhz;
  if (m->mem_clock_mhz) p->mem_clock_mhz = m->mem_clock_mhz;
  if (m->idle_power_w > 0) p->idle_power_w = m->idle_power_w;
  if (table) return;
  if (m->min_power_limit_w > 0) p->min_power_limit_w = m->min_power_limit_w;
  if (m->max_power_limit_w > 0) p->max_power_limit_w = m->max_power_limit_w;
  if (m->default_power_limit_w > 0) p->default_power_limit_w = m->default_power_limit_w;
  if (m->static_power_w > 0) p->static_power_w = m->static_power_w;
  if (m->dynamic_power_w > 0) p->dynamic_power_w = m->dynamic_power_w;
}

static int init_gpu(simgpu *g, const zeus_sim_gpu_config *c, unsigned i) {
  memset(g, 0, sizeof *g);
  g->p = c ? c->dvfs : (zeus_sim_dvfs){0};
  if (c) apply_measured(&g->p, &c->hw.gpu, c->model == ZEUS_SIM_TABLE);
  dvfs_defaults(&g->p);
  zeus_sim_gpu_config tmp = {0};
  if (c) tmp = *c;
  tmp.dvfs = g->p;
  int rc = check_gpu_config(&tmp, i);
  if (rc) return rc;
  g->model = tmp.model;
  g->has_counter = !tmp.no_energy_counter;
  g->hw = tmp.hw;
  if ((rc = check_hw(&g->hw, i))) return rc;
  g->power_ticks = g->hw.power_at_ticks;
  if (!(g->hw.tick_s > 0) && tmp.counter_period_s > 0) { /* the counter alone ticks, at phase 0 */
    g->hw.tick_s = tmp.counter_period_s;
    g->hw.tick_jitter_s = 0;
    g->power_ticks = false;
    g->next_tick = g->hw.tick_s;
  }
  g->rng = (g->hw.seed ? g->hw.seed : 0x5a1a5eedull) * 0x100000001B3ull + i;
  if (g->hw.tick_s > 0 && !g->next_tick) g->next_tick = g->hw.tick_s * (1 - draw(&g->rng)); /* (0, tick] */
  g->last_tick = -1;
  if (g->power_ticks && g->hw.power_tick_s > 0) { /* the power's own clock, power_phase_s after the counter's */
    g->power_clock = true;
    g->next_ptick = g->next_tick + g->hw.power_phase_s;
    while (g->next_ptick - g->hw.power_tick_s > 0) g->next_ptick -= g->hw.power_tick_s;
  } else if (g->power_ticks && g->hw.power_phase_s > 0) { /* one clock: a fixed phase after the counter's tick */
    g->power_clock = g->power_locked = true;
    g->next_ptick = g->next_tick + g->hw.power_phase_s;
  }
  g->pend_limit_at = g->pend_lock_at = -1;
  g->time_scale = tmp.time_scale > 0 ? tmp.time_scale : 1.0;
  for (unsigned f = g->p.max_clock_mhz;; f -= g->p.clock_step_mhz) {
    g->gclocks[g->ngclocks++] = f;
    if (f < g->p.min_clock_mhz + g->p.clock_step_mhz) break;
  }
  if (g->model == ZEUS_SIM_TABLE) {
    g->table = malloc(tmp.table_len * sizeof *g->table);
    if (!g->table) return zeus__oom("creating a simulated GPU");
    memcpy(g->table, tmp.table, tmp.table_len * sizeof *g->table);
    g->ntable = tmp.table_len;
    qsort(g->table, g->ntable, sizeof *g->table, cmp_row_desc);
    for (size_t r = 1; r < g->ntable; r++)
      if (g->table[r].power_limit_w == g->table[r - 1].power_limit_w) {
        double w = g->table[r].power_limit_w;
        free(g->table);
        g->table = NULL;
        return zeus__error(ZEUS_EINVAL, "simulated GPU %u: power limit %g W appears twice in the table", i, w);
      }
    g->min_mw = to_mw(g->table[g->ntable - 1].power_limit_w);
    g->max_mw = to_mw(g->table[0].power_limit_w);
    g->default_mw = g->max_mw;
  } else {
    g->min_mw = to_mw(g->p.min_power_limit_w);
    g->max_mw = to_mw(g->p.max_power_limit_w);
    g->default_mw = to_mw(g->p.default_power_limit_w);
  }
  g->limit_mw = g->set_limit_mw = g->default_mw;
  checkpoint(g, 0, 0);
  g->tick_power_w = g->tick_avg_w = g->p.idle_power_w + g->hw.module_other_w; /* the readings before the first tick */
  {
    double tu, p;
    operating_point(g, &g->tick_clock_mhz, &tu, &p);
  }
  if (tmp.name[0])
    snprintf(g->name, sizeof g->name, "%s", tmp.name);
  else
    snprintf(g->name, sizeof g->name, "Zeus Simulated GPU (%s)", g->model == ZEUS_SIM_TABLE ? "table" : "DVFS");
  return ZEUS_OK;
}

static double sim_now_locked(const zeus_sim_node *n) {
  return n->clock == ZEUS_SIM_CLOCK_VIRTUAL ? n->t_virtual : zeus_monotonic_s() - n->t0_wall;
}

static double rest_power(const simgpu *g);

/* Energy of g at time t >= t_last, from its bookkeeping; on a superchip module (hw.module_other_w)
 * the rest of the module's constant draw is part of it, so the counter and the ground truth count
 * the module as GH200's counter does. */
static double energy_at(const simgpu *g, double t) {
  double e = g->energy_j;
  if (g->busy_until > g->t_last) e += g->busy_power * (fmin(t, g->busy_until) - g->t_last);
  double idle_from = fmax(g->t_last, g->busy_until);
  if (t > idle_from) e += rest_power(g) * (t - idle_from);
  if (t > g->t_last) e += g->hw.module_other_w * (t - g->t_last);
  return e;
}

static void checkpoint(simgpu *g, double t, double e) {
  if (g->ck_n) {
    unsigned last = (g->ck_head + SIM_CK - 1) % SIM_CK;
    if (t - g->ck_t[last] < SIM_CK_SPACING) return;
  }
  g->ck_t[g->ck_head] = t;
  g->ck_e[g->ck_head] = e;
  g->ck_head = (g->ck_head + 1) % SIM_CK;
  if (g->ck_n < SIM_CK) g->ck_n++;
}

/* Moves the bookkeeping to t >= t_last (no events in between). */
static void move_to(simgpu *g, double t) {
  if (t <= g->t_last) return;
  g->energy_j = energy_at(g, t);
  g->t_last = t;
  checkpoint(g, t, g->energy_j);
}

static double average_power_at(simgpu *g, double t);

/* The power drawn at t == t_last (the module's on a superchip). */
static double power_now(const simgpu *g, double t) {
  return (g->busy_until > t ? g->busy_power : rest_power(g)) + g->hw.module_other_w;
}

/* The power readings' tick at t == t_last: instant and average power and the SM clock read-back
 * take their values of now. */
static void power_tick(simgpu *g, double t) {
  double noise = g->hw.power_noise > 0 ? g->hw.power_noise * (2 * draw(&g->rng) - 1) : 0;
  g->tick_power_w = power_now(g, t) * (1 + noise);
  g->tick_avg_w = average_power_at(g, t);
  double tu, p;
  operating_point(g, &g->tick_clock_mhz, &tu, &p);
  if (!g->power_clock) return;
  g->nptick++;
  g->pticks[(g->nptick - 1) % SIM_TICK_RING] = (zeus_sim_tick){t, g->counter_j, g->tick_power_w};
  g->next_ptick = g->power_locked ? INFINITY /* the counter's next tick sets it */
                                  : t + next_interval(g, g->hw.power_tick_s, g->hw.power_tick_jitter_s);
}

/* The energy counter's tick at t == t_last (and the power readings' too, where they share it). */
static void tick(simgpu *g, double t) {
  g->counter_j = g->energy_j;
  g->last_tick = t;
  g->ntick++;
  if (g->power_ticks && !g->power_clock) power_tick(g, t);
  g->ticks[(g->ntick - 1) % SIM_TICK_RING] =
      (zeus_sim_tick){t, g->counter_j, g->power_ticks ? g->tick_power_w : power_now(g, t)};
  g->next_tick = t + next_interval(g, g->hw.tick_s, g->hw.tick_jitter_s);
  if (g->power_locked) g->next_ptick = t + g->hw.power_phase_s;
}

/* Advances g to t, stopping at every event on the way in time order: a setting taking effect,
 * a sensor tick. */
static void advance(simgpu *g, double t) {
  for (;;) {
    double ev = INFINITY;
    int which = 0;
    if (g->pend_lock_at >= 0 && g->pend_lock_at < ev) ev = g->pend_lock_at, which = 1;
    if (g->pend_limit_at >= 0 && g->pend_limit_at < ev) ev = g->pend_limit_at, which = 2;
    if (g->next_tick > 0 && g->next_tick < ev) ev = g->next_tick, which = 3;
    if (g->power_clock && g->next_ptick < ev) ev = g->next_ptick, which = 4;
    if (ev > t) break;
    move_to(g, ev);
    if (which == 1) {
      g->lock_min = g->pend_lock_min;
      g->lock_max = g->pend_lock_max;
      g->pend_lock_at = -1;
    } else if (which == 2) {
      g->limit_mw = g->pend_limit_mw;
      g->pend_limit_at = -1;
    } else if (which == 3) {
      tick(g, ev);
    } else {
      power_tick(g, ev);
    }
  }
  move_to(g, t);
}

/* Energy at a past instant t <= t_last: exact between bookkeeping events, otherwise linear
 * between the checkpoints around t (exact while power was constant between them). Before the
 * oldest checkpoint it answers the oldest, and *from is moved there. */
static double energy_before(const simgpu *g, double *from) {
  double t = *from;
  if (t >= g->t_last) return energy_at(g, t);
  double prev_t = g->t_last, prev_e = g->energy_j; /* the checkpoint after t, walking back */
  for (unsigned k = 0; k < g->ck_n; k++) {
    unsigned i = (g->ck_head + SIM_CK - 1 - k) % SIM_CK;
    if (g->ck_t[i] <= t) {
      double span = prev_t - g->ck_t[i];
      return span > 0 ? g->ck_e[i] + (prev_e - g->ck_e[i]) * (t - g->ck_t[i]) / span : g->ck_e[i];
    }
    prev_t = g->ck_t[i];
    prev_e = g->ck_e[i];
  }
  *from = prev_t;
  return prev_e;
}

static void advance_all(zeus_sim_node *n, double t) {
  for (unsigned i = 0; i < n->n; i++) advance(&n->g[i], t);
}

/* The operating point of the DVFS model: the highest allowed clock whose power fits the limit.
 * As on hardware, the power limit wins over a locked minimum: when no clock of the locked range
 * fits, the GPU drops to the highest clock below the range that does. */
static void dvfs_point(const simgpu *g, unsigned *clock, double *t_unit, double *power) {
  const zeus_sim_dvfs *p = &g->p;
  double limit_w = g->limit_mw / 1000.0;
  unsigned lo = g->lock_max ? g->lock_min : 0, hi = g->lock_max ? g->lock_max : ~0u;
  unsigned best = 0, below = 0, lowest_allowed = 0;
  for (size_t k = 0; k < g->ngclocks; k++) {
    unsigned f = g->gclocks[k];
    if (f > hi) continue;
    double x = (double)f / p->max_clock_mhz;
    bool fits = p->static_power_w + p->dynamic_power_w * x * x * x <= limit_w + 1e-9;
    if (f < lo) {
      if (!below && fits) below = f;
      continue;
    }
    lowest_allowed = f;
    if (!best && fits) best = f;
  }
  if (!lowest_allowed) { /* lock range between two supported clocks: nearest below the maximum */
    lowest_allowed = g->gclocks[g->ngclocks - 1];
    for (size_t k = 0; k < g->ngclocks; k++)
      if (g->gclocks[k] <= hi) { lowest_allowed = g->gclocks[k]; break; }
  }
  if (!best) best = below ? below : lowest_allowed;
  double x = (double)best / p->max_clock_mhz;
  *clock = best;
  *power = p->static_power_w + p->dynamic_power_w * x * x * x;
  *t_unit = g->time_scale * p->time_per_unit_s * (p->mem_bound_fraction + (1 - p->mem_bound_fraction) / x);
}

static void operating_point(const simgpu *g, unsigned *clock, double *t_unit, double *power) {
  if (g->model == ZEUS_SIM_DVFS) {
    dvfs_point(g, clock, t_unit, power);
    return;
  }
  const zeus_sim_table_row *row = &g->table[g->ntable - 1];
  for (size_t r = 0; r < g->ntable; r++) {
    if (g->table[r].power_limit_w * 1000 <= g->limit_mw + 0.5) { row = &g->table[r]; break; }
  }
  *clock = g->gclocks[0];
  *t_unit = row->time_per_unit_s * g->time_scale;
  *power = row->energy_per_unit_j / row->time_per_unit_s;
}

/* The power between pieces of work: idle power, or the working power at the current knobs while
 * an outside load keeps the GPU busy. Knob changes advance the GPU first, so this is exact. */
static double rest_power(const simgpu *g) {
  if (!g->loaded) return g->p.idle_power_w;
  unsigned clock;
  double t_unit, power;
  operating_point(g, &clock, &t_unit, &power);
  return power;
}

int zeus_sim_node_open(zeus_sim_node **out, const zeus_sim_config *cfg) {
  zeus_sim_config *envcfg = NULL;
  if (!cfg) {
    int rc = zeus_sim_config_from_env(&envcfg);
    if (rc) return rc;
    cfg = envcfg;
  }
  int rc = ZEUS_OK;
  zeus_sim_node *n = calloc(1, sizeof *n);
  if (!n) { rc = zeus__oom("opening a simulated node"); goto done; }
  if (cfg->num_gpus < 1 || cfg->num_gpus > ZEUS_MAX_GPUS) {
    rc = zeus__error(ZEUS_EINVAL, "simulated node: %u GPUs is outside [1, %d]", cfg->num_gpus, ZEUS_MAX_GPUS);
    goto done;
  }
  if (cfg->clock != ZEUS_SIM_CLOCK_VIRTUAL && cfg->clock != ZEUS_SIM_CLOCK_WALL) {
    rc = zeus__error(ZEUS_EINVAL, "simulated node: unknown clock kind %d", (int)cfg->clock);
    goto done;
  }
  n->g = calloc(cfg->num_gpus, sizeof *n->g);
  if (!n->g) { rc = zeus__oom("opening a simulated node"); goto done; }
  for (unsigned i = 0; i < cfg->num_gpus; i++) {
    if ((rc = init_gpu(&n->g[i], cfg->gpus ? &cfg->gpus[i] : NULL, i))) goto done;
    n->n = i + 1;
  }
  pthread_mutex_init(&n->mu, NULL);
  n->clock = cfg->clock;
  n->t0_wall = zeus_monotonic_s();
  *out = n;
  n = NULL;
done:
  if (n) {
    for (unsigned i = 0; i < n->n; i++) free(n->g[i].table);
    free(n->g);
    free(n);
  }
  zeus_sim_config_free(envcfg);
  return rc;
}

void zeus_sim_node_close(zeus_sim_node *n) {
  if (!n) return;
  for (unsigned i = 0; i < n->n; i++) free(n->g[i].table);
  free(n->g);
  pthread_mutex_destroy(&n->mu);
  free(n);
}

unsigned zeus_sim_node_gpu_count(const zeus_sim_node *n) { return n ? n->n : 0; }

double zeus_sim_now(zeus_sim_node *n) {
  pthread_mutex_lock(&n->mu);
  double t = sim_now_locked(n);
  pthread_mutex_unlock(&n->mu);
  return t;
}

#define SIM_GPU(n, i)                                                                          \
  do {                                                                                         \
    if (!(n)) return zeus__error(ZEUS_EINVAL, "simulated GPU: no node given");                 \
    if ((i) >= (n)->n)                                                                         \
      return zeus__error(ZEUS_ENOENT, "simulated GPU %u does not exist (the node has %u)", (i), (n)->n); \
  } while (0)

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

/* The cost of a call, paid after it took its value and let go of the node: on the wall clock a
 * real wait (spun below 200 us, where a sleep would oversleep by tens of microseconds), on the
 * virtual clock the node's time moves on. */
static _Thread_local bool tl_background;

void zeus_sim_thread_background(bool on) { tl_background = on; }

zeus_sim_clock_kind zeus_sim_node_clock(const zeus_sim_node *n) { return n->clock; }

static void pay(zeus_sim_node *n, double cost) {
  if (!(cost > 0)) return;
  if (tl_background && n->clock != ZEUS_SIM_CLOCK_WALL) return; /* spent beside the work, not before it */
  if (n->clock == ZEUS_SIM_CLOCK_WALL) {
    if (cost >= 200e-6) {
      sleep_s(cost);
      return;
    }
    double end = zeus_monotonic_s() + cost;
    while (zeus_monotonic_s() < end) {
    }
    return;
  }
  pthread_mutex_lock(&n->mu);
  n->t_virtual += cost;
  advance_all(n, n->t_virtual);
  pthread_mutex_unlock(&n->mu);
}

/* Runs units[i] of work on GPU i at its operating point, or, with `measured` (one GPU), the
 * given duration and energy on GPU measured->gpu. */
typedef struct {
  unsigned gpu;
  double seconds, joules;
} measured_work;

static int run_work(zeus_sim_node *n, const double *units, const measured_work *measured, double *elapsed) {
  pthread_mutex_lock(&n->mu);
  double t = sim_now_locked(n);
  advance_all(n, t);
  double longest = 0;
  for (unsigned i = 0; i < n->n && !measured; i++) {
    double u = units[i];
    if (!(u > 0)) continue;
    simgpu *g = &n->g[i];
    unsigned clock;
    double t_unit, power;
    operating_point(g, &clock, &t_unit, &power);
    double d = u * t_unit;
    g->busy_until = t + d;
    g->busy_power = power;
    if (d > longest) longest = d;
  }
  if (measured && measured->seconds > 0) {
    simgpu *g = &n->g[measured->gpu];
    g->busy_until = t + measured->seconds;
    g->busy_power = measured->joules / measured->seconds;
    longest = measured->seconds;
  }
  if (n->clock == ZEUS_SIM_CLOCK_VIRTUAL) {
    n->t_virtual = t + longest;
    advance_all(n, n->t_virtual);
    pthread_mutex_unlock(&n->mu);
  } else {
    pthread_mutex_unlock(&n->mu);
    sleep_s(longest);
  }
  if (elapsed) *elapsed = longest;
  return ZEUS_OK;
}

int zeus_sim_work(zeus_sim_node *n, unsigned gpu, double units, double *elapsed_s) {
  SIM_GPU(n, gpu);
  if (!(units >= 0) || isinf(units))
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: units of work must be a finite number >= 0, got %g", gpu,
                       units);
  double u[ZEUS_MAX_GPUS] = {0};
  u[gpu] = units;
  return run_work(n, u, NULL, elapsed_s);
}

int zeus_sim_work_all(zeus_sim_node *n, const double *units, double *elapsed_s) {
  if (!n || !units) return zeus__error(ZEUS_EINVAL, "zeus_sim_work_all: node and units are required");
  for (unsigned i = 0; i < n->n; i++)
    if (!(units[i] >= 0) || isinf(units[i]))
      return zeus__error(ZEUS_EINVAL, "simulated GPU %u: units of work must be a finite number >= 0, got %g", i,
                         units[i]);
  return run_work(n, units, NULL, elapsed_s);
}

int zeus_sim_work_measured(zeus_sim_node *n, unsigned gpu, double seconds, double joules, double *elapsed_s) {
  SIM_GPU(n, gpu);
  if (!(seconds >= 0) || isinf(seconds) || !(joules >= 0) || isinf(joules))
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: a measured piece of work needs a finite duration and "
                       "energy >= 0, got %g s and %g J", gpu, seconds, joules);
  measured_work m = {gpu, seconds, joules};
  return run_work(n, NULL, &m, elapsed_s);
}

int zeus_sim_idle(zeus_sim_node *n, double seconds) {
  if (!n) return zeus__error(ZEUS_EINVAL, "zeus_sim_idle: no node given");
  if (!(seconds >= 0) || isinf(seconds))
    return zeus__error(ZEUS_EINVAL, "zeus_sim_idle: seconds must be a finite number >= 0, got %g", seconds);
  if (n->clock == ZEUS_SIM_CLOCK_WALL) {
    sleep_s(seconds);
    return ZEUS_OK;
  }
  pthread_mutex_lock(&n->mu);
  n->t_virtual += seconds;
  advance_all(n, n->t_virtual);
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

int zeus_sim_true_energy(zeus_sim_node *n, unsigned gpu, double *joules) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  advance(&n->g[gpu], sim_now_locked(n));
  *joules = n->g[gpu].energy_j;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

int zeus_sim_gpu_hardware(zeus_sim_node *n, unsigned gpu, zeus_sim_hardware *out) {
  SIM_GPU(n, gpu);
  *out = n->g[gpu].hw;
  return ZEUS_OK;
}

int zeus_sim_gpu_last_tick(zeus_sim_node *n, unsigned gpu, double *t) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  simgpu *g = &n->g[gpu];
  double now = sim_now_locked(n);
  advance(g, now);
  *t = g->hw.tick_s > 0 ? g->last_tick : now;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

/* The entries of a tick ring newer than after_s, oldest first, at most max of the newest. */
static size_t ring_since(const zeus_sim_tick *ring, uint64_t count, double after_s, zeus_sim_tick *out, size_t max) {
  size_t have = count < SIM_TICK_RING ? (size_t)count : SIM_TICK_RING, k = 0;
  while (k < have && ring[(count - 1 - k) % SIM_TICK_RING].t_s > after_s) k++;
  if (k > max) k = max;
  for (size_t i = 0; i < k; i++) out[i] = ring[(count - k + i) % SIM_TICK_RING];
  return k;
}

size_t zeus_sim_gpu_ticks_since(zeus_sim_node *n, unsigned gpu, double after_s, zeus_sim_tick *out, size_t max) {
  if (!n || gpu >= n->n || !out) return 0;
  pthread_mutex_lock(&n->mu);
  simgpu *g = &n->g[gpu];
  advance(g, sim_now_locked(n));
  size_t k = ring_since(g->ticks, g->ntick, after_s, out, max);
  pthread_mutex_unlock(&n->mu);
  return k;
}

size_t zeus_sim_gpu_power_ticks_since(zeus_sim_node *n, unsigned gpu, double after_s, zeus_sim_tick *out,
                                      size_t max) {
  if (!n || gpu >= n->n || !out) return 0;
  pthread_mutex_lock(&n->mu);
  simgpu *g = &n->g[gpu];
  advance(g, sim_now_locked(n));
  size_t k = g->power_clock ? ring_since(g->pticks, g->nptick, after_s, out, max)
                            : ring_since(g->ticks, g->ntick, after_s, out, max);
  pthread_mutex_unlock(&n->mu);
  return k;
}

int zeus_sim_operating_point(zeus_sim_node *n, unsigned gpu, unsigned *clock_mhz, double *power_w) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  unsigned c;
  double t, p;
  advance(&n->g[gpu], sim_now_locked(n));
  operating_point(&n->g[gpu], &c, &t, &p);
  pthread_mutex_unlock(&n->mu);
  if (clock_mhz) *clock_mhz = c;
  if (power_w) *power_w = p;
  return ZEUS_OK;
}

int zeus_sim_gpu_name(zeus_sim_node *n, unsigned gpu, char *buf, size_t len) {
  SIM_GPU(n, gpu);
  snprintf(buf, len, "%s", n->g[gpu].name);
  return ZEUS_OK;
}

int zeus_sim_gpu_uuid(zeus_sim_node *n, unsigned gpu, char *buf, size_t len) {
  SIM_GPU(n, gpu);
  snprintf(buf, len, "GPU-5a1a0000-0000-4000-8000-%012x", gpu);
  return ZEUS_OK;
}

int zeus_sim_gpu_energy_counter_supported(zeus_sim_node *n, unsigned gpu, bool *out) {
  SIM_GPU(n, gpu);
  *out = n->g[gpu].has_counter;
  return ZEUS_OK;
}

int zeus_sim_gpu_power_limit_constraints(zeus_sim_node *n, unsigned gpu, unsigned *min_mw, unsigned *max_mw,
                                         unsigned *default_mw) {
  SIM_GPU(n, gpu);
  if (min_mw) *min_mw = n->g[gpu].min_mw;
  if (max_mw) *max_mw = n->g[gpu].max_mw;
  if (default_mw) *default_mw = n->g[gpu].default_mw;
  return ZEUS_OK;
}

int zeus_sim_gpu_get_power_limit(zeus_sim_node *n, unsigned gpu, unsigned *mw) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  *mw = n->g[gpu].set_limit_mw;
  pthread_mutex_unlock(&n->mu);
  pay(n, n->g[gpu].hw.power_limit_read_s);
  return ZEUS_OK;
}

int zeus_sim_gpu_set_power_limit(zeus_sim_node *n, unsigned gpu, unsigned mw) {
  SIM_GPU(n, gpu);
  simgpu *g = &n->g[gpu];
  if (mw < g->min_mw || mw > g->max_mw)
    return zeus__error(ZEUS_ERANGE, "simulated GPU %u: power limit %u mW is outside [%u, %u] mW", gpu, mw,
                       g->min_mw, g->max_mw);
  pthread_mutex_lock(&n->mu);
  double t = sim_now_locked(n);
  advance(g, t);
  double delay = mw < g->set_limit_mw ? g->hw.power_limit_down_effect_s : g->hw.power_limit_up_effect_s;
  g->set_limit_mw = mw;
  if (delay > 0) {
    g->pend_limit_mw = mw;
    g->pend_limit_at = t + delay;
  } else {
    g->limit_mw = mw;
    g->pend_limit_at = -1;
  }
  pthread_mutex_unlock(&n->mu);
  pay(n, g->hw.power_limit_call_s);
  return ZEUS_OK;
}

int zeus_sim_gpu_set_load(zeus_sim_node *n, unsigned gpu, bool busy) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  simgpu *g = &n->g[gpu];
  advance(g, sim_now_locked(n));
  g->loaded = busy;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

int zeus_sim_gpu_get_load(zeus_sim_node *n, unsigned gpu, bool *busy) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  *busy = n->g[gpu].loaded;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

int zeus_sim_gpu_get_persistence_mode(zeus_sim_node *n, unsigned gpu, bool *enabled) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  *enabled = n->g[gpu].persistence;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

int zeus_sim_gpu_set_persistence_mode(zeus_sim_node *n, unsigned gpu, bool enabled) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  n->g[gpu].persistence = enabled;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

int zeus_sim_gpu_total_energy(zeus_sim_node *n, unsigned gpu, uint64_t *mj) {
  SIM_GPU(n, gpu);
  simgpu *g = &n->g[gpu];
  if (!g->has_counter)
    return zeus__error(ZEUS_ENOTSUP, "simulated GPU %u has no total-energy counter", gpu);
  pthread_mutex_lock(&n->mu);
  advance(g, sim_now_locked(n));
  double e = g->hw.tick_s > 0 ? g->counter_j : g->energy_j;
  pthread_mutex_unlock(&n->mu);
  *mj = (uint64_t)floor(e * 1000.0);
  pay(n, g->hw.energy_read_s);
  return ZEUS_OK;
}

int zeus_sim_gpu_instant_power(zeus_sim_node *n, unsigned gpu, unsigned *mw) {
  SIM_GPU(n, gpu);
  simgpu *g = &n->g[gpu];
  pthread_mutex_lock(&n->mu);
  double t = sim_now_locked(n);
  advance(g, t);
  double p = g->power_ticks ? g->tick_power_w : power_now(g, t);
  pthread_mutex_unlock(&n->mu);
  *mw = to_mw(p);
  pay(n, g->hw.power_read_s);
  return ZEUS_OK;
}

/* Mean power over the SIM_AVG_WINDOW_S seconds before t == t_last (less while the node is
 * younger), in W; the power now at t = 0. */
static double average_power_at(simgpu *g, double t) {
  double from = t - SIM_AVG_WINDOW_S;
  if (from < 0) from = 0;
  double e_from = energy_before(g, &from);
  if (t - from <= 0) return power_now(g, t);
  return (g->energy_j - e_from) / (t - from);
}

/* The same, now. Called with the node locked. */
static double average_power_locked(zeus_sim_node *n, simgpu *g) {
  double t = sim_now_locked(n);
  advance(g, t);
  return average_power_at(g, t);
}

int zeus_sim_gpu_average_power(zeus_sim_node *n, unsigned gpu, unsigned *mw) {
  SIM_GPU(n, gpu);
  simgpu *g = &n->g[gpu];
  pthread_mutex_lock(&n->mu);
  double p = average_power_locked(n, g);
  if (g->power_ticks) p = g->tick_avg_w;
  pthread_mutex_unlock(&n->mu);
  *mw = to_mw(p);
  pay(n, g->hw.average_power_read_s);
  return ZEUS_OK;
}

/* A steady-state thermal model: 35 °C at idle power, 85 °C at the highest power limit, linear in
 * the last second's mean power (the second stands in for the die's thermal inertia). */
int zeus_sim_gpu_temperature(zeus_sim_node *n, unsigned gpu, unsigned *celsius) {
  SIM_GPU(n, gpu);
  simgpu *g = &n->g[gpu];
  pthread_mutex_lock(&n->mu);
  double p = average_power_locked(n, g) - g->hw.module_other_w; /* the GPU's own share heats its die */
  pthread_mutex_unlock(&n->mu);
  double span = g->max_mw / 1000.0 - g->p.idle_power_w;
  double c = 35.0 + (span > 0 ? 50.0 * (p - g->p.idle_power_w) / span : 0);
  *celsius = (unsigned)lround(fmin(fmax(c, 25.0), 95.0));
  return ZEUS_OK;
}

int zeus_sim_gpu_current_clocks(zeus_sim_node *n, unsigned gpu, unsigned *sm_mhz, unsigned *mem_mhz) {
  SIM_GPU(n, gpu);
  simgpu *g = &n->g[gpu];
  pthread_mutex_lock(&n->mu);
  unsigned c;
  double t, p;
  advance(g, sim_now_locked(n));
  operating_point(g, &c, &t, &p);
  if (g->power_ticks) c = g->tick_clock_mhz;
  unsigned mem = g->mem_lock_max && g->mem_lock_max < g->p.mem_clock_mhz ? g->mem_lock_max : g->p.mem_clock_mhz;
  pthread_mutex_unlock(&n->mu);
  if (sm_mhz) *sm_mhz = c;
  if (mem_mhz) *mem_mhz = mem;
  pay(n, g->hw.clock_read_s);
  return ZEUS_OK;
}

int zeus_sim_gpu_architecture(zeus_sim_node *n, unsigned gpu, unsigned *arch) {
  SIM_GPU(n, gpu);
  *arch = n->g[gpu].has_counter ? 7u /* Ampere */ : 4u /* Pascal: no energy counter */;
  return ZEUS_OK;
}

static int copy_clocks(const unsigned *src, size_t nsrc, unsigned *mhz, size_t *count, const char *what,
                       unsigned gpu) {
  if (*count < nsrc) {
    size_t have = *count;
    *count = nsrc;
    return zeus__error(ZEUS_ERANGE, "simulated GPU %u: %zu %s clocks do not fit in %zu entries", gpu, nsrc, what,
                       have);
  }
  memcpy(mhz, src, nsrc * sizeof *src);
  *count = nsrc;
  return ZEUS_OK;
}

int zeus_sim_gpu_memory_clocks(zeus_sim_node *n, unsigned gpu, unsigned *mhz, size_t *count) {
  SIM_GPU(n, gpu);
  return copy_clocks(&n->g[gpu].p.mem_clock_mhz, 1, mhz, count, "memory", gpu);
}

int zeus_sim_gpu_graphics_clocks(zeus_sim_node *n, unsigned gpu, unsigned mem_mhz, unsigned *mhz, size_t *count) {
  SIM_GPU(n, gpu);
  simgpu *g = &n->g[gpu];
  if (mem_mhz != g->p.mem_clock_mhz)
    return zeus__error(ZEUS_ENOENT, "simulated GPU %u: memory clock %u MHz is not supported (supported: %u MHz)",
                       gpu, mem_mhz, g->p.mem_clock_mhz);
  return copy_clocks(g->gclocks, g->ngclocks, mhz, count, "graphics", gpu);
}

int zeus_sim_gpu_get_locked_clocks(zeus_sim_node *n, unsigned gpu, unsigned *min_mhz, unsigned *max_mhz,
                                   unsigned *mem_min_mhz, unsigned *mem_max_mhz) {
  SIM_GPU(n, gpu);
  pthread_mutex_lock(&n->mu);
  simgpu *g = &n->g[gpu];
  if (min_mhz) *min_mhz = g->set_lock_min;
  if (max_mhz) *max_mhz = g->set_lock_max;
  if (mem_min_mhz) *mem_min_mhz = g->mem_lock_min;
  if (mem_max_mhz) *mem_max_mhz = g->mem_lock_max;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

/* Sets (or with 0, 0 resets) the SM clock lock: shown at once, in effect after the profile's
 * effect latency, returning after its call latency. */
static int change_sm_lock(zeus_sim_node *n, unsigned gpu, unsigned lo, unsigned hi) {
  pthread_mutex_lock(&n->mu);
  simgpu *g = &n->g[gpu];
  double t = sim_now_locked(n);
  advance(g, t);
  g->set_lock_min = lo;
  g->set_lock_max = hi;
  if (g->hw.clock_lock_effect_s > 0) {
    g->pend_lock_min = lo;
    g->pend_lock_max = hi;
    g->pend_lock_at = t + g->hw.clock_lock_effect_s;
  } else {
    g->lock_min = lo;
    g->lock_max = hi;
    g->pend_lock_at = -1;
  }
  pthread_mutex_unlock(&n->mu);
  pay(n, g->hw.clock_lock_call_s);
  return ZEUS_OK;
}

static int set_lock(zeus_sim_node *n, unsigned gpu, unsigned lo, unsigned hi, bool mem) {
  SIM_GPU(n, gpu);
  if (lo > hi || hi == 0)
    return zeus__error(ZEUS_EINVAL, "simulated GPU %u: locked %s clock range [%u, %u] MHz needs 0 < min <= max",
                       gpu, mem ? "memory" : "SM", lo, hi);
  if (mem) {
    pthread_mutex_lock(&n->mu);
    simgpu *g = &n->g[gpu];
    advance(g, sim_now_locked(n));
    g->mem_lock_min = lo;
    g->mem_lock_max = hi;
    pthread_mutex_unlock(&n->mu);
    return ZEUS_OK;
  }
  return change_sm_lock(n, gpu, lo, hi);
}

int zeus_sim_gpu_set_locked_clocks(zeus_sim_node *n, unsigned gpu, unsigned min_mhz, unsigned max_mhz) {
  return set_lock(n, gpu, min_mhz, max_mhz, false);
}

int zeus_sim_gpu_set_memory_locked_clocks(zeus_sim_node *n, unsigned gpu, unsigned min_mhz, unsigned max_mhz) {
  return set_lock(n, gpu, min_mhz, max_mhz, true);
}

static int reset_lock(zeus_sim_node *n, unsigned gpu, bool mem) {
  SIM_GPU(n, gpu);
  if (!mem) return change_sm_lock(n, gpu, 0, 0);
  pthread_mutex_lock(&n->mu);
  simgpu *g = &n->g[gpu];
  advance(g, sim_now_locked(n));
  g->mem_lock_min = g->mem_lock_max = 0;
  pthread_mutex_unlock(&n->mu);
  return ZEUS_OK;
}

int zeus_sim_gpu_reset_locked_clocks(zeus_sim_node *n, unsigned gpu) { return reset_lock(n, gpu, false); }
int zeus_sim_gpu_reset_memory_locked_clocks(zeus_sim_node *n, unsigned gpu) { return reset_lock(n, gpu, true); }
