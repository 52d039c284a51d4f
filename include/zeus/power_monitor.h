/* zeus/power_monitor.h: power and temperature timelines, sampled by a thread of the library.
 *
 * A power monitor samples a set of GPUs every `period_s` in a background thread: one series per
 * (GPU, power domain) it reads (ZEUS_POWER_INSTANT, ZEUS_POWER_AVERAGE,
 * ZEUS_POWER_MEMORY_AVERAGE; see zeus/device.h) and, optionally, one temperature series per GPU
 * at its own period. The samples stay in memory (bounded per series) and can be queried while
 * sampling goes on: the timeline over a time range, the energy and mean power over a range, the
 * sample nearest to a time. It is the engine of the original's PowerMonitor and
 * TemperatureMonitor, of `zeus monitor power` and of a metrics exporter.
 *
 *   zeus_power_monitor_opts o = {.period_s = 0.1, .temperature_period_s = 1.0};
 *   zeus_power_monitor *pm;
 *   if (zeus_power_monitor_open(&pm, &o)) { fprintf(stderr, "%s\n", zeus_errmsg()); ... }
 *   double t0 = zeus_power_monitor_now(pm);
 *   run_the_work();
 *   double t1 = zeus_power_monitor_now(pm);
 *   zeus_power_energy e;
 *   zeus_power_monitor_energy(pm, ZEUS_POWER_INSTANT, 0, t0, t1, &e);   // e.energy_j, e.mean_power_w
 *   zeus_power_sample *tl; size_t n;
 *   zeus_power_monitor_timeline(pm, ZEUS_POWER_INSTANT, 0, t0, t1, &tl, &n);
 *   ...
 *   zeus_free(tl);
 *   zeus_power_monitor_close(pm);
 *
 * Time: every timestamp is on the monitor's time base: the device backend's clock
 * (zeus_devices_now: CLOCK_MONOTONIC, or the simulated clock on the "sim" backend), or, with
 * `epoch_time`, seconds since the Unix epoch (the wall clock when the monitor opened plus the
 * backend clock's progress since, so that timestamps never go back). zeus_power_monitor_now()
 * reads the same base. A series' timestamps strictly increase: a poll at the same time as the
 * series' newest sample (a simulated clock that did not move) is not stored.
 *
 * Units: power in mW, temperature in degrees Celsius, energy in J, time in s.
 *
 * Integration: energy over [start, end] is the trapezoidal integral of the series' samples, with
 * the series linearly interpolated at `start` and `end` where samples exist on both sides of
 * them; nothing is extrapolated beyond the first or last sample.
 *
 * Thread safety: every function may be called from any thread while the sampling thread runs,
 * except zeus_power_monitor_close(), which must not race with other calls on the same monitor.
 */
#ifndef ZEUS_POWER_MONITOR_H
#define ZEUS_POWER_MONITOR_H

#include "zeus/common.h"
#include "zeus/device.h"

ZEUS_BEGIN_DECLS

typedef struct zeus_power_monitor zeus_power_monitor;

/* The bit of a power domain in zeus_power_monitor_opts.domains and zeus_power_monitor_domains(). */
#define ZEUS_POWER_MONITOR_DOMAIN(d) (1u << (unsigned)(d))
/* Every power domain zeus/device.h defines. */
#define ZEUS_POWER_MONITOR_ALL_DOMAINS                                                     \
  (ZEUS_POWER_MONITOR_DOMAIN(ZEUS_POWER_INSTANT) | ZEUS_POWER_MONITOR_DOMAIN(ZEUS_POWER_AVERAGE) | \
   ZEUS_POWER_MONITOR_DOMAIN(ZEUS_POWER_MEMORY_AVERAGE))
/* zeus_power_monitor_opts.domains: sample no power at all (temperature only). */
#define ZEUS_POWER_MONITOR_NO_POWER (1u << 31)

/* Default bound of one series (samples kept per GPU, domain or temperature): about 29 hours at
 * 10 Hz. Storage grows on demand up to the bound; then the oldest samples are dropped. */
#define ZEUS_POWER_MONITOR_DEFAULT_MAX_SAMPLES ((size_t)1 << 20)

typedef struct zeus_power_monitor_opts {
  /* The GPUs to read; NULL: the process default (zeus_devices_default()). Borrowed: it must
   * outlive the monitor. */
  zeus_devices *devices;
  /* Visible GPU indices to sample. NULL: every visible GPU. A non-NULL pointer with
   * num_gpu_indices == 0 samples no GPU (ZEUS_EINVAL: a monitor needs at least one GPU). */
  const unsigned *gpu_indices;
  size_t num_gpu_indices;
  /* Power domains, a mask of ZEUS_POWER_MONITOR_DOMAIN(d). 0: every domain that all the GPUs
   * can read (probed at open; at least one must be). An explicit domain some GPU cannot read is
   * ZEUS_ENOTSUP naming both. ZEUS_POWER_MONITOR_NO_POWER: no power series. */
  unsigned domains;
  /* Power sampling period in s, in [0.001, 3600]; 0: 0.1. */
  double period_s;
  /* > 0: also sample each GPU's temperature at this period (s, in [0.001, 3600]); 0: no
   * temperature series. A GPU that cannot read its temperature is ZEUS_ENOTSUP. */
  double temperature_period_s;
  /* Samples kept per series; 0: ZEUS_POWER_MONITOR_DEFAULT_MAX_SAMPLES. At least 2. */
  size_t max_samples;
  /* Store a run of equal readings as its first and its last sample only. Timelines then hold
   * fewer points; integrals are unchanged (a constant run is a straight line). */
  bool dedup;
  /* Timestamps in seconds since the Unix epoch instead of the backend's clock. */
  bool epoch_time;
  /* No sampling thread: samples are taken only by zeus_power_monitor_sample() (tests,
   * simulations on a virtual clock, callers with their own schedule). */
  bool no_thread;
} zeus_power_monitor_opts;

/* One power sample: time on the monitor's time base, power in mW. */
typedef struct zeus_power_sample {
  double time_s;
  unsigned power_mw;
} zeus_power_sample;

/* One temperature sample. */
typedef struct zeus_temperature_sample {
  double time_s;
  unsigned celsius;
} zeus_temperature_sample;

/* What zeus_power_monitor_energy() found over a range. */
typedef struct zeus_power_energy {
  double energy_j;      /* trapezoidal integral over the covered span */
  double mean_power_w;  /* energy_j / covered_s; the one sample's power when covered_s is 0 */
  double start_s;       /* the covered span: the part of [start, end] the samples reach */
  double end_s;
  double covered_s;     /* end_s - start_s */
  size_t samples;       /* stored samples inside [start, end] */
} zeus_power_energy;

/* Counters of a monitor's work so far. */
typedef struct zeus_power_monitor_stats {
  uint64_t polls;       /* sampling passes (thread and zeus_power_monitor_sample) */
  uint64_t errors;      /* readings that failed (logged at WARN, at most once per series) */
  uint64_t zero_readings; /* power readings of 0 mW, skipped (NVML answers 0 when polled too fast) */
  uint64_t dropped;     /* samples dropped from full series (oldest first) */
} zeus_power_monitor_stats;

/* Opens a monitor over `opts` (NULL: every visible GPU, every readable domain, 0.1 s, no
 * temperature), takes one sample of every series at once, and starts the sampling thread
 * (unless no_thread). Errors: ZEUS_EINVAL for a bad option (named) or no GPU to sample,
 * ZEUS_ENOENT for a GPU index that does not exist, ZEUS_ENOTSUP for a domain or temperature a
 * GPU cannot read, device errors of the first sample, ZEUS_ENOMEM, ZEUS_EINTERNAL when the
 * thread cannot start. */
ZEUS_EXTERN int zeus_power_monitor_open(zeus_power_monitor **out /* out */, const zeus_power_monitor_opts *opts);

/* Stops the sampling thread (if running) and frees the monitor and its samples. NULL: nothing. */
ZEUS_EXTERN void zeus_power_monitor_close(zeus_power_monitor *pm);

/* Stops the sampling thread and keeps the samples for queries; later polls happen only through
 * zeus_power_monitor_sample(). Idempotent. Returns after the thread has exited. */
ZEUS_EXTERN void zeus_power_monitor_stop(zeus_power_monitor *pm);

/* Whether the sampling thread is running. */
ZEUS_EXTERN bool zeus_power_monitor_running(const zeus_power_monitor *pm);

/* Takes one sample of every power series (and of every temperature series) now, from the
 * calling thread. Returns the first reading error (the other readings are still taken). */
ZEUS_EXTERN int zeus_power_monitor_sample(zeus_power_monitor *pm);

/* Now, on the monitor's time base. */
ZEUS_EXTERN double zeus_power_monitor_now(const zeus_power_monitor *pm);

/* The sampled GPUs: their number and the visible index of entry k (0 for k out of range). */
ZEUS_EXTERN unsigned zeus_power_monitor_num_gpus(const zeus_power_monitor *pm);
ZEUS_EXTERN unsigned zeus_power_monitor_gpu_index(const zeus_power_monitor *pm, unsigned k);
/* The sampled power domains (mask of ZEUS_POWER_MONITOR_DOMAIN bits; 0 with NO_POWER). */
ZEUS_EXTERN unsigned zeus_power_monitor_domains(const zeus_power_monitor *pm);
/* Whether temperature is sampled. */
ZEUS_EXTERN bool zeus_power_monitor_has_temperature(const zeus_power_monitor *pm);
/* The power sampling period and the temperature period (0 without temperature), in s. */
ZEUS_EXTERN double zeus_power_monitor_period(const zeus_power_monitor *pm);
ZEUS_EXTERN double zeus_power_monitor_temperature_period(const zeus_power_monitor *pm);
ZEUS_EXTERN void zeus_power_monitor_get_stats(zeus_power_monitor *pm, zeus_power_monitor_stats *out /* out */);

/* The samples of GPU `gpu` (a visible index the monitor samples) in `domain` whose time lies in
 * [start_s, end_s] (either bound may be -INFINITY / INFINITY), oldest first. *out is allocated
 * (release with zeus_free(); NULL when *n is 0). Errors: ZEUS_ENOENT for a GPU the monitor does
 * not sample, ZEUS_ENOTSUP for a domain it does not sample, ZEUS_EINVAL for a range with
 * start_s > end_s or a NaN bound, ZEUS_ENOMEM. */
ZEUS_EXTERN int zeus_power_monitor_timeline(zeus_power_monitor *pm, zeus_power_domain domain, unsigned gpu,
                                            double start_s, double end_s, zeus_power_sample **out /* out */,
                                            size_t *n /* out */);
/* The same for the temperature series (ZEUS_ENOTSUP when temperature is not sampled). */
ZEUS_EXTERN int zeus_power_monitor_temperature_timeline(zeus_power_monitor *pm, unsigned gpu, double start_s,
                                                        double end_s, zeus_temperature_sample **out /* out */,
                                                        size_t *n /* out */);

/* Energy and mean power of GPU `gpu` in `domain` over [start_s, end_s] (see Integration above).
 * ZEUS_ENOENT when the series has no sample inside or on both sides of the range (nothing to
 * integrate), besides the errors of zeus_power_monitor_timeline(). */
ZEUS_EXTERN int zeus_power_monitor_energy(zeus_power_monitor *pm, zeus_power_domain domain, unsigned gpu,
                                          double start_s, double end_s, zeus_power_energy *out /* out */);

/* The sample of GPU `gpu` in `domain` nearest to `time_s` (the earlier one on a tie); NaN: the
 * latest sample. ZEUS_ENOENT when the series is empty. */
ZEUS_EXTERN int zeus_power_monitor_power_at(zeus_power_monitor *pm, zeus_power_domain domain, unsigned gpu,
                                            double time_s, zeus_power_sample *out /* out */);
/* The same for temperature. */
ZEUS_EXTERN int zeus_power_monitor_temperature_at(zeus_power_monitor *pm, unsigned gpu, double time_s,
                                                  zeus_temperature_sample *out /* out */);

ZEUS_END_DECLS
#endif
