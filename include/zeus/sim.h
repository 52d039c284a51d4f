/* zeus/sim.h: the simulated GPU.
 *
 * A simulated node holds one or more GPUs on one clock. Each GPU has a workload model that
 * maps its knobs (power limit, locked SM clock) to the time and power of one unit of work:
 *   - DVFS (built in, parametric): at SM clock f (MHz),
 *       time per unit  t(f) = time_per_unit_s * (m + (1 - m) * f_max / f)   m = mem_bound_fraction
 *       working power  P(f) = static_power_w + dynamic_power_w * (f / f_max)^3
 *     The power limit caps the clock: the GPU runs at the highest supported clock not above the
 *     locked maximum whose P(f) fits under the limit. Energy per unit P*t falls and then rises as
 *     the clock drops.
 *   - TABLE: rows of (power limit, time per unit, energy per unit), e.g. from a power-limit
 *     profile CSV (start_time,window_name,elapsed_time,gpu<i>_energy; window names end in the limit
 *     in W). The GPU runs at the row with the largest limit not above its own limit.
 * Between pieces of work a GPU draws idle_power_w.
 *
 * Clocks: VIRTUAL (time moves only through zeus_sim_work* and zeus_sim_idle; deterministic, for
 * tests and simulations) or WALL (time is CLOCK_MONOTONIC since the node opened; work sleeps for
 * its duration; the CLI's default, so that measuring a real command gives sensible figures).
 *
 * Settings read by zeus_sim_config_from_env() (the "sim" device backend and the fake NVML):
 *   ZEUS_SIM_GPUS            number of GPUs, 1..64 (default 1, or the model file's count)
 *   ZEUS_SIM_MODEL_FILE      a profile CSV (table model, one GPU per gpu<i>_energy column) or a
 *                            JSON model file (see zeus_sim_config_load)
 *   ZEUS_SIM_UNITS_PER_ROW   units of work one CSV row measured (default 40, the profile window)
 *   ZEUS_SIM_CLOCK           virtual | wall (default virtual; the CLI defaults to wall)
 *   ZEUS_SIM_ENERGY_COUNTER  1 | 0: whether GPUs have a total-energy counter (default 1)
 *   ZEUS_SIM_HARDWARE        how the GPUs' sensors and actuators behave: "ideal" (default: every
 *                            reading current and free, every setting at once), "h100" (measured
 *                            on an H100, ../shared/gpu/H100.md: readings move on a ~100 ms tick,
 *                            a counter read costs 3.3 ms, a clock lock takes 8 ms, ...), "h200"
 *                            (../shared/gpu/H200.md: the counter on a 100.0 ms clock, the power on
 *                            its own ~101.6 ms one, 2.3 ms counter reads, 200-700 W, 345-1980 MHz),
 *                            or the path of a JSON file with the fields of zeus_sim_hardware
 *   ZEUS_SIM_COUNTER_PERIOD_MS  the sensor tick period (zeus_sim_hardware.tick_s), overriding the
 *                            profile's; with the ideal profile only the energy counter ticks
 *                            (default 0: the profile's)
 *   ZEUS_SIM_VARIATION       GPU i's time per unit is scaled by 1 + i*variation (default 0)
 *
 * Thread safety: all functions may be called from several threads on one node.
 */
#ifndef ZEUS_SIM_H
#define ZEUS_SIM_H

#include "zeus/common.h"
#include "zeus/device.h"

ZEUS_BEGIN_DECLS

typedef enum zeus_sim_model_kind { ZEUS_SIM_DVFS = 0, ZEUS_SIM_TABLE = 1 } zeus_sim_model_kind;
typedef enum zeus_sim_clock_kind { ZEUS_SIM_CLOCK_VIRTUAL = 0, ZEUS_SIM_CLOCK_WALL = 1 } zeus_sim_clock_kind;

/* DVFS parameters; a zero field takes the default shown (an A40-like GPU). */
typedef struct zeus_sim_dvfs {
  unsigned max_clock_mhz;      /* 1740 */
  unsigned min_clock_mhz;      /* 210 */
  unsigned clock_step_mhz;     /* 15 */
  unsigned mem_clock_mhz;      /* 7251 */
  double min_power_limit_w;    /* 100 */
  double max_power_limit_w;    /* 300 */
  double default_power_limit_w;/* max_power_limit_w */
  double idle_power_w;         /* 30 */
  double static_power_w;       /* 120 */
  double dynamic_power_w;      /* 170 */
  double time_per_unit_s;      /* 0.05 at max_clock_mhz */
  double mem_bound_fraction;   /* 0.25 (exactly 0 is taken as the default; use 1e-9 for none) */
} zeus_sim_dvfs;

typedef struct zeus_sim_table_row {
  double power_limit_w;
  double time_per_unit_s;
  double energy_per_unit_j;
} zeus_sim_table_row;

/* How a GPU's sensors and actuators behave (ZEUS_SIM_HARDWARE). All zero is the ideal GPU: every
 * reading is current and costs nothing, every setting takes effect when called.
 *
 * Sensor clocks: the energy counter is refreshed at ticks, tick_s apart (each interval drawn
 * uniformly within tick_s +- tick_jitter_s), the first at a phase drawn per GPU in (0, tick_s]; it
 * then shows the exact energy at its last tick. With power_at_ticks the instant power (the power at
 * its tick, times 1 + a uniform draw within +-power_noise), the average power (the mean over the
 * second before its tick) and the SM clock read-back keep their values of their last tick too: by
 * default the counter's, or, as on an H200 (../shared/gpu/H200.md), ticks of a clock of their own,
 * power_tick_s apart (+- power_tick_jitter_s), the first power_phase_s after the counter's first.
 * Two periods that differ make the phase between the clocks drift by their difference every tick
 * (H200: 100.0 against ~101.6 ms, a whole period every ~6 s). power_phase_s alone (power_tick_s 0)
 * is one clock at another phase: the power ticks that long after each counter tick.
 * Read costs: each call takes that long on the caller's thread after taking its value (wall
 * clock: a real wait, spun below 200 us; virtual clock: the node's clock moves on, every GPU idling
 * or working as before). Actuation: a locked-clock change returns after clock_lock_call_s and takes
 * effect clock_lock_effect_s after the call started; a power limit returns after
 * power_limit_call_s and takes effect power_limit_down_effect_s (lower limit) or
 * power_limit_up_effect_s (higher) after the call started. The getters show the setting at once;
 * the work (and the power drawn) follows at the effect time. A piece of work keeps the operating
 * point it started at. The ground truth (zeus_sim_true_energy) is always exact.
 * Measured limits, clocks and powers (gpu): a nonzero field replaces the GPU model's (a table
 * model keeps its own limits and working powers), so that a profile stands for one GPU whole. */
typedef struct zeus_sim_hardware {
  char name[32];                    /* "ideal", "h100", "h200", "gh200", "mi300x", or the file the profile came from */
  double tick_s;                    /* energy counter tick period; 0: readings always current */
  double tick_jitter_s;             /* each tick interval within tick_s +- this */
  bool power_at_ticks;              /* power, average power and SM clock read-back refresh at ticks */
  double power_tick_s;              /* ... at ticks of their own clock, this far apart; 0: the counter's */
  double power_tick_jitter_s;       /* each power tick interval within power_tick_s +- this */
  double power_phase_s;             /* the first power tick this long after the counter's first */
  double power_noise;               /* relative noise of an instant power reading (+-) */
  double energy_read_s;             /* cost of one energy counter read */
  double power_read_s;              /* instant power */
  double average_power_read_s;      /* average power */
  double clock_read_s;              /* current clocks */
  double power_limit_read_s;        /* power limit */
  double clock_lock_call_s;         /* a locked-clock set or reset returns after this */
  double clock_lock_effect_s;       /* ... and takes effect this long after it started */
  double power_limit_call_s;        /* a power-limit set returns after this */
  double power_limit_down_effect_s; /* a lower limit takes effect this long after the call started */
  double power_limit_up_effect_s;   /* a higher one this long */
  unsigned seed;                    /* tick phases, jitter and noise (0: a fixed default) */
  /* A superchip module (Grace Hopper): the power of the rest of the module (CPU and its memory),
   * drawn all the time on top of the GPU's, so every power and energy reading and the ground truth
   * are the module's (docs/grace-hopper.md). 0: a discrete GPU. */
  double module_other_w;
  /* The fake NVML refuses GPU-scope power (NOT_SUPPORTED) and answers only the module scope, as
   * NVML does on GH200; the "sim" backend reports its power scope as the module. */
  bool module_power_only;
  zeus_sim_dvfs gpu;                /* measured limits, clocks and powers; zero fields: the model's */
} zeus_sim_hardware;

/* The named profile (`ideal`, `h100`, `h200`, `gh200` or `mi300x`) or, for a name containing '/' or ending in .json,
 * the profile in that JSON file ({"tick_s": 0.1, ...}, the fields above, the gpu ones flat:
 * "max_power_limit_w": 700, ...; absent ones are 0 or, with "base": "h200", that profile's), such
 * as the hardware-model.json that gpu-check writes of a real GPU. Errors name the profile or the
 * file and field. */
ZEUS_EXTERN int zeus_sim_hardware_profile(const char *name_or_path, zeus_sim_hardware *out /* out */);

typedef struct zeus_sim_gpu_config {
  zeus_sim_model_kind model;
  zeus_sim_dvfs dvfs;               /* DVFS parameters; for TABLE only the clocks and idle power */
  const zeus_sim_table_row *table;  /* TABLE rows (any order); copied at open */
  size_t table_len;
  char name[ZEUS_NAME_LEN];         /* "" gives "Zeus Simulated GPU (<model>)" */
  bool no_energy_counter;           /* the GPU lacks a total-energy counter */
  double counter_period_s;          /* the energy counter's tick when hw.tick_s is 0 (only the counter ticks) */
  double time_scale;                /* every piece of work takes this many times longer; 0 means 1 */
  zeus_sim_hardware hw;             /* sensors and actuators; all zero: ideal */
} zeus_sim_gpu_config;

typedef struct zeus_sim_config {
  unsigned num_gpus;                /* 1..ZEUS_MAX_GPUS */
  zeus_sim_gpu_config *gpus;        /* num_gpus entries; NULL: every GPU default DVFS */
  zeus_sim_clock_kind clock;
} zeus_sim_config;

/* Builds a config from the ZEUS_SIM_* settings above. Free with zeus_sim_config_free. */
ZEUS_EXTERN int zeus_sim_config_from_env(zeus_sim_config **out /* out */);
/* Loads a model file: a power-limit profile CSV (table model; `units_per_row` units per row,
 * 0 means 40) or a JSON file {"clock": "virtual"|"wall", "gpus": [{"model": "dvfs"|"table",
 * "name": ..., "<dvfs field>": ..., "table": [[limit_w, time_per_unit_s, energy_per_unit_j], ...],
 * "energy_counter": true, "counter_period_s": 0}, ...]}. Errors name the file, line and field. */
ZEUS_EXTERN int zeus_sim_config_load(zeus_sim_config **out /* out */, const char *path,
                                     unsigned units_per_row);
ZEUS_EXTERN void zeus_sim_config_free(zeus_sim_config *cfg);

typedef struct zeus_sim_node zeus_sim_node;

/* Opens a node; cfg NULL reads the environment. GPU uuids are GPU-5a1a0000-0000-4000-8000-<index>. */
ZEUS_EXTERN int zeus_sim_node_open(zeus_sim_node **out /* out */, const zeus_sim_config *cfg);
ZEUS_EXTERN void zeus_sim_node_close(zeus_sim_node *n);
ZEUS_EXTERN unsigned zeus_sim_node_gpu_count(const zeus_sim_node *n);
/* The node's clock in seconds. */
ZEUS_EXTERN double zeus_sim_now(zeus_sim_node *n);

/* Runs `units` of work on one GPU at its current knobs; the other GPUs idle meanwhile. Advances
 * the clock (virtual) or sleeps (wall) for the work's duration, returned in *elapsed_s (may be NULL). */
ZEUS_EXTERN int zeus_sim_work(zeus_sim_node *n, unsigned gpu, double units, double *elapsed_s /* out */);
/* Runs units[i] of work on every GPU i at once; the clock advances by the longest, and GPUs that
 * finish earlier idle until then. */
ZEUS_EXTERN int zeus_sim_work_all(zeus_sim_node *n, const double *units, double *elapsed_s /* out */);
/* Runs one piece of work on one GPU that lasts `seconds` and uses `joules`, whatever the GPU's
 * knobs: for callers that model the workload themselves (examples/pipeline_sim.c replays a
 * measured per-clock stage profile, looking up the row of the clock zeus_sim_gpu_current_clocks()
 * reports). The other GPUs idle meanwhile; the clock advances (virtual) or sleeps (wall) by
 * `seconds`, returned in *elapsed_s (may be NULL). ZEUS_EINVAL for a negative or non-finite
 * duration or energy, ZEUS_ENOENT for a GPU the node lacks. */
ZEUS_EXTERN int zeus_sim_work_measured(zeus_sim_node *n, unsigned gpu, double seconds,
                                       double joules, double *elapsed_s /* out */);
/* Lets every GPU idle for `seconds`. */
ZEUS_EXTERN int zeus_sim_idle(zeus_sim_node *n, double seconds);
/* Marks a GPU as kept busy (or no longer busy) by a load outside the simulation, from now on:
 * such as another process's kernels, which the fake NVML learns of through FAKE_NVML_BUSY_FILE.
 * While busy, the time between pieces of work draws the working power of the current knobs
 * (following power-limit and clock changes) instead of idle power. Default: not busy. */
ZEUS_EXTERN int zeus_sim_gpu_set_load(zeus_sim_node *n, unsigned gpu, bool busy);
ZEUS_EXTERN int zeus_sim_gpu_get_load(zeus_sim_node *n, unsigned gpu, bool *busy /* out */);

/* Ground truth: exact energy used by a GPU since the node opened, in J (costs nothing, whatever the
 * hardware profile). */
ZEUS_EXTERN int zeus_sim_true_energy(zeus_sim_node *n, unsigned gpu, double *joules /* out */);
/* Marks the calling thread as a background thread (or no longer): on the virtual clock, the cost
 * of its calls (the hardware profile's read and call latencies) does not move the node's clock,
 * since on a real machine it is spent on that thread while the work goes on (a frequency
 * controller's clock locks, a counter follower's reads). The latencies of effect still apply. On
 * the wall clock the thread waits as any other. */
ZEUS_EXTERN void zeus_sim_thread_background(bool on);
/* The node's clock: virtual or wall. */
ZEUS_EXTERN zeus_sim_clock_kind zeus_sim_node_clock(const zeus_sim_node *n);
/* The hardware profile a GPU runs with. */
ZEUS_EXTERN int zeus_sim_gpu_hardware(zeus_sim_node *n, unsigned gpu, zeus_sim_hardware *out /* out */);
/* The node time of a GPU's last sensor tick (-1 before the first; the node's time when it has no
 * tick), for tests that check a tick follower. */
ZEUS_EXTERN int zeus_sim_gpu_last_tick(zeus_sim_node *n, unsigned gpu, double *t /* out */);
/* One sensor tick of a simulated GPU: its time, the energy counter after it (J) and the power the
 * GPU drew then (W; with a hardware profile whose power reading refreshes at ticks, that reading). */
typedef struct zeus_sim_tick {
  double t_s;
  double counter_j;
  double power_w;
} zeus_sim_tick;
/* The GPU's ticks after node time after_s, oldest first, at most max (the newest ones) of the last
 * 64; the count. What a tick follower on a real GPU finds by polling, for one on the virtual clock,
 * where time moves only with the work and nothing can poll. 0 for a GPU without ticks. */
ZEUS_EXTERN size_t zeus_sim_gpu_ticks_since(zeus_sim_node *n, unsigned gpu, double after_s, zeus_sim_tick *out,
                                            size_t max);
/* The same for the power readings' ticks, on their own clock (power_tick_s, power_phase_s): power_w
 * the reading from then on, counter_j the counter as it read then. Where the power shares the
 * counter's clock or does not tick, the counter's ticks (as zeus_sim_gpu_ticks_since). */
ZEUS_EXTERN size_t zeus_sim_gpu_power_ticks_since(zeus_sim_node *n, unsigned gpu, double after_s,
                                                  zeus_sim_tick *out, size_t max);
/* The SM clock a unit of work would run at now, and its working power in W. */
ZEUS_EXTERN int zeus_sim_operating_point(zeus_sim_node *n, unsigned gpu, unsigned *clock_mhz /* out */,
                                         double *power_w /* out */);

/* The same knobs and readings as zeus/device.h, by node-local GPU index (the fake NVML and the
 * "sim" backend are built on these). */
ZEUS_EXTERN int zeus_sim_gpu_name(zeus_sim_node *n, unsigned gpu, char *buf /* out */, size_t len);
ZEUS_EXTERN int zeus_sim_gpu_uuid(zeus_sim_node *n, unsigned gpu, char *buf /* out */, size_t len);
ZEUS_EXTERN int zeus_sim_gpu_energy_counter_supported(zeus_sim_node *n, unsigned gpu, bool *out /* out */);
ZEUS_EXTERN int zeus_sim_gpu_power_limit_constraints(zeus_sim_node *n, unsigned gpu,
                                                     unsigned *min_mw /* out */, unsigned *max_mw /* out */,
                                                     unsigned *default_mw /* out */);
ZEUS_EXTERN int zeus_sim_gpu_get_power_limit(zeus_sim_node *n, unsigned gpu, unsigned *mw /* out */);
ZEUS_EXTERN int zeus_sim_gpu_set_power_limit(zeus_sim_node *n, unsigned gpu, unsigned mw);
ZEUS_EXTERN int zeus_sim_gpu_get_persistence_mode(zeus_sim_node *n, unsigned gpu, bool *enabled /* out */);
ZEUS_EXTERN int zeus_sim_gpu_set_persistence_mode(zeus_sim_node *n, unsigned gpu, bool enabled);
ZEUS_EXTERN int zeus_sim_gpu_total_energy(zeus_sim_node *n, unsigned gpu, uint64_t *mj /* out */);
ZEUS_EXTERN int zeus_sim_gpu_instant_power(zeus_sim_node *n, unsigned gpu, unsigned *mw /* out */);
/* Mean power over the last second (less while the node is younger), as NVML's POWER_AVERAGE. */
ZEUS_EXTERN int zeus_sim_gpu_average_power(zeus_sim_node *n, unsigned gpu, unsigned *mw /* out */);
/* A steady-state model: 35 °C at idle power, 85 °C at the highest power limit, linear in the
 * last second's mean power. */
ZEUS_EXTERN int zeus_sim_gpu_temperature(zeus_sim_node *n, unsigned gpu, unsigned *celsius /* out */);
/* The SM clock work runs at now, and the memory clock (its lock where one is set). */
ZEUS_EXTERN int zeus_sim_gpu_current_clocks(zeus_sim_node *n, unsigned gpu, unsigned *sm_mhz /* out */,
                                            unsigned *mem_mhz /* out */);
/* NVML's architecture number: Ampere (7) for a GPU with an energy counter, Pascal (4) without. */
ZEUS_EXTERN int zeus_sim_gpu_architecture(zeus_sim_node *n, unsigned gpu, unsigned *arch /* out */);
ZEUS_EXTERN int zeus_sim_gpu_memory_clocks(zeus_sim_node *n, unsigned gpu, unsigned *mhz /* out */,
                                           size_t *count /* in, out */);
ZEUS_EXTERN int zeus_sim_gpu_graphics_clocks(zeus_sim_node *n, unsigned gpu, unsigned mem_mhz,
                                             unsigned *mhz /* out */, size_t *count /* in, out */);
/* Current locked ranges; 0,0 when not locked. */
ZEUS_EXTERN int zeus_sim_gpu_get_locked_clocks(zeus_sim_node *n, unsigned gpu, unsigned *min_mhz /* out */,
                                               unsigned *max_mhz /* out */, unsigned *mem_min_mhz /* out */,
                                               unsigned *mem_max_mhz /* out */);
ZEUS_EXTERN int zeus_sim_gpu_set_locked_clocks(zeus_sim_node *n, unsigned gpu, unsigned min_mhz, unsigned max_mhz);
ZEUS_EXTERN int zeus_sim_gpu_reset_locked_clocks(zeus_sim_node *n, unsigned gpu);
ZEUS_EXTERN int zeus_sim_gpu_set_memory_locked_clocks(zeus_sim_node *n, unsigned gpu, unsigned min_mhz,
                                                      unsigned max_mhz);
ZEUS_EXTERN int zeus_sim_gpu_reset_memory_locked_clocks(zeus_sim_node *n, unsigned gpu);

/* The node behind a "sim" devices handle (borrowed), or NULL for other backends. Visible index
 * i of the handle is node GPU zeus_devices_sim_index(d, i). */
ZEUS_EXTERN zeus_sim_node *zeus_devices_sim_node(zeus_devices *d);
ZEUS_EXTERN int zeus_devices_sim_index(zeus_devices *d, unsigned gpu, unsigned *node_gpu /* out */);

ZEUS_END_DECLS
#endif
