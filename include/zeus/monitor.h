/* zeus/monitor.h: time and energy of named measurement windows.
 *
 * A monitor measures a set of GPUs (and CPU packages through RAPL where the machine exposes
 * them, and on an NVIDIA Jetson its power rails: zeus/soc.h). Windows are named; many may be open at once and they may overlap or nest.
 *
 *   zeus_monitor *m;
 *   zeus_monitor_open(&m, NULL);                  // every visible GPU, CPUs if readable
 *   zeus_monitor_begin_window(m, "epoch", false);
 *   ...                                           // the work to measure
 *   zeus_measurement r;
 *   zeus_monitor_end_window(m, "epoch", false, &r);
 *   printf("%.2f s, %.1f J\n", r.time_s, r.total_energy_j);
 *   zeus_monitor_close(m);
 *
 * Energy comes from each GPU's total-energy counter where it has one; otherwise a background
 * thread samples the GPU's power draw every poll interval and integrates it (trapezoids), and
 * the window bounds take a sample of their own, so the window's energy is the integral between
 * its bounds. Time is the device backend's clock (the simulated clock on the "sim" backend).
 *
 * Where a GPU's counter is slow to read and moves on a coarse tick (an H100: 3.3 ms a read, a
 * 100 ms tick, so a window pair cost ~6.6 ms of the caller's thread and a 50 ms window read 0 J),
 * the "sampled" energy source puts a thread per GPU under the monitor that follows the counter's
 * ticks and the power (src/monitor/sampler.h): a window bound then reads no device at all (well
 * under a microsecond), and its energy is the counter at the last tick plus the power since,
 * corrected after the fact between the ticks around it. See docs/real-gpus.md for the figures.
 *
 * Thread safety: a monitor may be used from several threads; calls are serialised internally.
 */
#ifndef ZEUS_MONITOR_H
#define ZEUS_MONITOR_H

#include "zeus/common.h"
#include "zeus/device.h"
#include "zeus/soc.h"

ZEUS_BEGIN_DECLS

typedef struct zeus_monitor zeus_monitor;
typedef struct zeus_measurement zeus_measurement;

/* Where a GPU's window energy comes from. */
typedef enum zeus_energy_source {
  /* Option only: "sampled" for GPUs whose counter read takes 100 us or more (measured at open)
   * on a backend clock that moves with real time, "raw" for the others. */
  ZEUS_ENERGY_AUTO = 0,
  ZEUS_ENERGY_RAW = 1,     /* the counter read at both bounds, its difference (the original's way) */
  ZEUS_ENERGY_SAMPLED = 2, /* the tick follower's tick-phase-corrected estimate */
  ZEUS_ENERGY_POLLED = 3,  /* result only: integrated power (no counter, or force_power_polling) */
} zeus_energy_source;

/* Zero-initialised (or NULL) means defaults. */
typedef struct zeus_monitor_opts {
  /* The GPUs to read; NULL: the process default (zeus_devices_default()). Borrowed: it must
   * outlive the monitor. */
  zeus_devices *devices;
  /* Visible GPU indices to measure. NULL: every visible GPU. A non-NULL pointer with
   * num_gpu_indices == 0 measures no GPU. */
  const unsigned *gpu_indices;
  size_t num_gpu_indices;
  /* CPU package indices. NULL: every package whose RAPL counter is readable (none on machines
   * without RAPL). Non-NULL: exactly these, and an unreadable one is an error. */
  const unsigned *cpu_indices;
  size_t num_cpu_indices;
  /* When a GPU's energy counter did not move during a window (too short for its update
   * period), report instant power x time instead of 0 J. */
  bool approx_instant_energy;
  /* Append one CSV row per ended window: start_time,window_name,elapsed_time,gpu<i>_energy...
   * (module<i>_energy for a GPU whose energy is its superchip module's: zeus_gpu_power_scope)
   * (then cpu<i>_energy... when CPUs are measured). The header is written to a new or empty
   * file. */
  const char *log_file;
  /* Power sampling period for GPUs without an energy counter; 0: 0.05 s. */
  double poll_interval_s;
  /* Integrate sampled power even on GPUs that have an energy counter. */
  bool force_power_polling;
  /* Do not log the warning about a window too short for a GPU's energy counter to move (a
   * caller that reports it in its own way, as the Python binding does with warnings.warn). */
  bool no_short_window_warning;
  /* Called at every end_window that is not cancelled, with the measurement just taken, which it
   * may replace (tests replay recorded windows this way). Runs with the monitor's lock held: it
   * must not call the monitor. A negative return is end_window's error (the window is closed
   * all the same, nothing is logged). NULL: none. */
  int (*end_hook)(void *ctx, const char *key, zeus_measurement *m);
  void *end_hook_ctx;
  /* Where counter GPUs' energy comes from: AUTO (default), RAW or SAMPLED. AUTO takes
   * ZEUS_MONITOR_ENERGY=auto|raw|sampled from the environment when set. SAMPLED on a clock that
   * does not move with real time (the virtual simulated clock) is ZEUS_EINVAL. */
  zeus_energy_source energy_source;
  /* Do not measure a Jetson's power rails (zeus/soc.h), which a monitor otherwise measures by
   * itself on a Jetson (and only there). */
  bool no_soc;
} zeus_monitor_opts;

/* Per GPU of a window, how its energy was found (zeus_monitor_end_window_detail). */
typedef struct zeus_window_detail {
  unsigned num_gpus;
  zeus_energy_source source[ZEUS_MAX_GPUS];  /* RAW, SAMPLED or POLLED */
  double raw_energy_j[ZEUS_MAX_GPUS];        /* the counter's difference between the bounds (SAMPLED:
                                                as reads at the bounds would have shown it) */
  double corrected_energy_j[ZEUS_MAX_GPUS];  /* SAMPLED: the estimate; otherwise = raw_energy_j */
  double error_bound_j[ZEUS_MAX_GPUS];       /* SAMPLED: an estimate of the estimate's error bound;
                                                RAW: one tick's worth is possible, 0 given */
} zeus_window_detail;

struct zeus_measurement {
  double time_s;                           /* window length on the backend's clock */
  unsigned num_gpus;
  unsigned gpu_indices[ZEUS_MAX_GPUS];     /* visible GPU index of each entry */
  double gpu_energy_j[ZEUS_MAX_GPUS];
  unsigned num_cpus;
  unsigned cpu_indices[ZEUS_MAX_CPUS];
  double cpu_energy_j[ZEUS_MAX_CPUS];      /* package energy */
  bool dram_valid[ZEUS_MAX_CPUS];          /* the package has a DRAM zone */
  double dram_energy_j[ZEUS_MAX_CPUS];
  double total_energy_j;                   /* every GPU + every CPU package (DRAM not included) */
  double start_time_s;                     /* when the window began, on the backend's clock */
  /* A Jetson's power rails (zeus/soc.h), the original's soc_energy (JetsonMeasurement): the
   * integral of each rail's sampled power on the monotonic clock, indexed by zeus_soc_rail (cpu,
   * gpu, total). soc_valid: an SoC was measured; soc_rail_valid[r]: the board has rail r. Not in
   * total_energy_j (the total rail is the board's own total). */
  bool soc_valid;
  bool soc_rail_valid[ZEUS_SOC_NUM_RAILS];
  double soc_energy_j[ZEUS_SOC_NUM_RAILS];
};

/* Fills *o with the defaults: every visible GPU, every readable CPU package, polling every
 * 0.05 s where needed. */
ZEUS_EXTERN void zeus_monitor_opts_init(zeus_monitor_opts *o /* out */);

/* Opens a monitor. opts may be NULL (defaults). Errors: ZEUS_ENOENT for a GPU or CPU index
 * that does not exist (named), ZEUS_EINVAL for a duplicate index or bad option, ZEUS_EIO when
 * the log file cannot be opened, errors of zeus_devices_default(). */
ZEUS_EXTERN int zeus_monitor_open(zeus_monitor **out /* out */, const zeus_monitor_opts *opts);
/* Stops the polling thread and frees the monitor; open windows are discarded. */
ZEUS_EXTERN void zeus_monitor_close(zeus_monitor *m);

/* Begins window `key` (any non-empty string, copied). An open key begun again is ZEUS_EEXIST
 * unless `restart`, which starts it over. */
ZEUS_EXTERN int zeus_monitor_begin_window(zeus_monitor *m, const char *key, bool restart);

/* Ends window `key` and writes its measurement to *out (may be NULL). With `cancel` the window
 * is discarded: nothing is measured or logged. An unknown key is ZEUS_ENOENT naming it. */
ZEUS_EXTERN int zeus_monitor_end_window(zeus_monitor *m, const char *key, bool cancel,
                                        zeus_measurement *out /* out */);

/* zeus_monitor_end_window, and per GPU the raw and corrected energy and the error bound in
 * *detail (may be NULL). The measurement carries the corrected energy. */
ZEUS_EXTERN int zeus_monitor_end_window_detail(zeus_monitor *m, const char *key, bool cancel,
                                               zeus_measurement *out /* out */,
                                               zeus_window_detail *detail /* out */);

/* Where entry k's energy comes from: RAW, SAMPLED or POLLED. */
ZEUS_EXTERN zeus_energy_source zeus_monitor_gpu_energy_source(const zeus_monitor *m, unsigned k);
/* Entry k's energy reading now, in J, from an arbitrary origin, the way its windows take it: the
 * sampled estimate (no device call), the counter, or the integral of sampled power. For a
 * running total outside windows (the exporter's counter). */
ZEUS_EXTERN int zeus_monitor_gpu_energy_now(zeus_monitor *m, unsigned k, double *joules /* out */);
/* CPU time the monitor's tick followers have used so far, in s (0 without them). */
ZEUS_EXTERN double zeus_monitor_sampler_cpu_s(const zeus_monitor *m);

/* Whether window `key` is open. */
ZEUS_EXTERN bool zeus_monitor_is_open(zeus_monitor *m, const char *key);

/* The readings window `key` began with: start_time_s (backend clock), time_s (elapsed since, no
 * device read), gpu_energy_j[k] (GPU k's energy reading at the start in J: its counter, or the
 * integral of sampled power for a polled GPU, both from an arbitrary origin), cpu_energy_j and
 * dram_energy_j likewise (dram_valid says which packages have a DRAM zone), soc_energy_j the
 * SoC rails' integrals likewise; total_energy_j is 0.
 * ZEUS_ENOENT when no such window is open. */
ZEUS_EXTERN int zeus_monitor_window_state(zeus_monitor *m, const char *key, zeus_measurement *out /* out */);

/* The open windows, in the order they were begun: their number, and the key of the i-th copied
 * into buf (NUL-terminated; ZEUS_ERANGE when it does not fit, ZEUS_ENOENT for i out of range).
 * Each call is a snapshot: windows begun or ended by other threads in between shift the order. */
ZEUS_EXTERN size_t zeus_monitor_num_windows(zeus_monitor *m);
ZEUS_EXTERN int zeus_monitor_window_key(zeus_monitor *m, size_t i, char *buf /* out */, size_t len);

/* Discards every open window (as cancelling each). */
ZEUS_EXTERN void zeus_monitor_reset_windows(zeus_monitor *m);

/* The measured GPUs: their number, and the visible index of entry k. */
ZEUS_EXTERN unsigned zeus_monitor_num_gpus(const zeus_monitor *m);
ZEUS_EXTERN unsigned zeus_monitor_gpu_index(const zeus_monitor *m, unsigned k);
ZEUS_EXTERN unsigned zeus_monitor_num_cpus(const zeus_monitor *m);
/* Whether entry k is measured by power polling (no energy counter, or forced). */
ZEUS_EXTERN bool zeus_monitor_gpu_polled(const zeus_monitor *m, unsigned k);
/* The device set the monitor reads (borrowed). */
ZEUS_EXTERN zeus_devices *zeus_monitor_devices(const zeus_monitor *m);
/* The SoC whose rails the monitor measures (borrowed), or NULL (no Jetson, or opts->no_soc). */
ZEUS_EXTERN zeus_soc *zeus_monitor_soc(const zeus_monitor *m);
/* Rail `rail`'s energy now in J from an arbitrary origin (the integral of its sampled power,
 * sampled again now), for a running total outside windows (the exporter's counter).
 * ZEUS_ENOTSUP when the monitor measures no such rail; the errors of zeus_soc_power. */
ZEUS_EXTERN int zeus_monitor_soc_energy_now(zeus_monitor *m, zeus_soc_rail rail, double *joules /* out */);

ZEUS_END_DECLS
#endif
