/* zeus/metric.h: measurement windows pushed to a Prometheus Pushgateway (the original's
 * zeus.metric: EnergyHistogram, EnergyCumulativeCounter, PowerGauge).
 *
 * Optional component ZEUS_WITH_METRICS_PUSH (it links libcurl; zeus/config.h says whether this
 * libzeus has it: ZEUS_HAVE_METRICS_PUSH).
 *
 * A zeus_metric is one of three kinds, each measuring named windows on a zeus_monitor and pushing
 * what it measured to a Pushgateway under a job and grouping labels of the caller's choosing
 * (POST <url>/metrics/job/<job>/<label>/<value>..., so the gateway attaches job and labels to
 * every series, and replaces only the metric families this handle pushes):
 *
 *   ZEUS_METRIC_ENERGY_HISTOGRAM  end_window observes the window's energy per GPU, CPU package and
 *     DRAM zone, and its duration, into histograms labelled {window, index}, then pushes:
 *       energy_monitor_gpu_energy_joules, energy_monitor_cpu_energy_joules,
 *       energy_monitor_dram_energy_joules (histograms, label index), and
 *       energy_monitor_window_duration_seconds (histogram, label window only).
 *   ZEUS_METRIC_ENERGY_COUNTER  begin_window starts a thread that, every update_period_s until
 *     end_window, adds the energy used since its last tick to counters and pushes:
 *       energy_monitor_gpu_energy_joules_total, ..._cpu_..., ..._dram_... {window, index}.
 *     end_window adds the last partial period and pushes once more before returning.
 *   ZEUS_METRIC_POWER_GAUGE  begin_window starts a thread that, every update_period_s until
 *     end_window, sets power_monitor_gpu_power_watts {window, index} to each GPU's instant power
 *     and pushes.
 *
 * A GPU whose energy and power cover its Grace Hopper superchip module (CPU + memory + GPU:
 * zeus_gpu_power_scope, zeus_measurement's gpu_power_scope) goes into the same families named for
 * the module instead: energy_monitor_module_energy_joules (with the GPU buckets),
 * energy_monitor_module_energy_joules_total and power_monitor_module_power_watts, same labels. A
 * family without a series is not pushed, so discrete GPUs push exactly the names above.
 *
 * The metric names are the original's, except that the counters end in _total and the duration
 * histogram is ours (the original pushes no time). Values accumulate in the handle for as long as
 * it is open (a histogram counts every window of that name since open); each push sends all of
 * them. Two processes that push the same families under the same job and labels overwrite each
 * other: give each its own grouping label (instance, rank).
 *
 *   zeus_metric_opts o;
 *   zeus_metric_opts_init(&o);
 *   o.url = "http://127.0.0.1:9091";  o.job = "training";
 *   const char *names[] = {"instance"}, *values[] = {"node3"};
 *   o.label_names = names;  o.label_values = values;  o.num_labels = 1;
 *   zeus_metric *h;
 *   if (zeus_metric_open(&h, ZEUS_METRIC_ENERGY_HISTOGRAM, &o)) ... zeus_errmsg() ...
 *   zeus_metric_begin_window(h, "epoch");
 *   ...
 *   zeus_metric_end_window(h, "epoch");   // observed, then pushed
 *   zeus_metric_close(h);
 *
 * A push that fails (gateway down, an HTTP error) loses nothing: the values stay in the handle and
 * go with the next push. end_window returns the push's error (ZEUS_ENET, ZEUS_ETIMEDOUT,
 * ZEUS_EHTTP naming the gateway's answer) after it has recorded the window; the threads of
 * counters and gauges log a failed push at WARN (once per run of failures) and carry on.
 *
 * Thread safety: every function may be called from several threads on one handle, except close.
 */
#ifndef ZEUS_METRIC_H
#define ZEUS_METRIC_H

#include "zeus/common.h"
#include "zeus/monitor.h"

ZEUS_BEGIN_DECLS

typedef struct zeus_metric zeus_metric;

typedef enum zeus_metric_kind {
  ZEUS_METRIC_ENERGY_HISTOGRAM = 0,
  ZEUS_METRIC_ENERGY_COUNTER = 1,
  ZEUS_METRIC_POWER_GAUGE = 2,
} zeus_metric_kind;

typedef struct zeus_metric_opts {
  /* The Pushgateway's base URL, http:// or https:// ("http://127.0.0.1:9091"). Required. */
  const char *url;
  /* The job every series is pushed under. Required, non-empty. */
  const char *job;
  /* Grouping labels added to every series: names ([a-zA-Z_][a-zA-Z0-9_]*, not "job", "window",
   * "index" or "le", each at most once) and their values (any UTF-8, "" allowed). */
  const char *const *label_names;
  const char *const *label_values;
  size_t num_labels;
  /* The monitor whose windows are measured (borrowed; it must outlive the handle). NULL: the
   * handle opens its own on gpu_indices and cpu_indices (NULL: all, as zeus_monitor_opts). */
  zeus_monitor *monitor;
  const unsigned *gpu_indices;
  size_t num_gpu_indices;
  const unsigned *cpu_indices;
  size_t num_cpu_indices;
  /* Histogram bucket upper bounds (strictly increasing, finite; +Inf is implied); NULL: the
   * original's defaults, GPU {50, 100, 200, 500, 1000} J, CPU {10, 50, 100, 500, 1000} J, DRAM
   * {5, 10, 20, 50, 150} J, and duration {0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600} s. */
  const double *gpu_buckets_j;
  size_t num_gpu_buckets;
  const double *cpu_buckets_j;
  size_t num_cpu_buckets;
  const double *dram_buckets_j;
  size_t num_dram_buckets;
  const double *time_buckets_s;
  size_t num_time_buckets;
  /* Counter and gauge: seconds between updates (and pushes), in [0.01, 86400]; 0: 1 s. */
  double update_period_s;
  /* Limit of one push (connect and transfer); 0: 5 s. */
  double timeout_s;
} zeus_metric_opts;

/* Fills *o with the defaults (every field NULL or 0). url and job must still be set. */
ZEUS_EXTERN void zeus_metric_opts_init(zeus_metric_opts *o /* out */);

/* Opens a handle of `kind`. Nothing is pushed yet. Errors: ZEUS_EINVAL naming the bad option
 * (URL, job, label, bucket bounds, period), errors of zeus_monitor_open(), ZEUS_ENOMEM. */
ZEUS_EXTERN int zeus_metric_open(zeus_metric **out /* out */, zeus_metric_kind kind,
                                 const zeus_metric_opts *opts);

/* Ends the threads of windows still open (without a last update) and releases the handle (and
 * its own monitor). Pushes nothing. NULL does nothing. */
ZEUS_EXTERN void zeus_metric_close(zeus_metric *m);

/* Begins window `name` (non-empty, at most 255 bytes; the label window's value). ZEUS_EEXIST when
 * a window of that name is open on this handle. Counter and gauge: starts its thread. */
ZEUS_EXTERN int zeus_metric_begin_window(zeus_metric *m, const char *name);

/* Ends window `name`: histogram: measures and observes it; counter: adds the last partial
 * period; gauge: stops updating. Then pushes (counter, histogram; the gauge's thread pushed
 * already). ZEUS_ENOENT for a window not open; a failed push returns its error after the window
 * was recorded and closed. */
ZEUS_EXTERN int zeus_metric_end_window(zeus_metric *m, const char *name);

/* Records a window measured elsewhere (a zeus_monitor window of the caller's) under window label
 * `name`, then pushes: histogram: observes it as end_window would; counter: adds its energies.
 * ZEUS_EINVAL for a gauge (it has no energy). A failed push returns its error after recording. */
ZEUS_EXTERN int zeus_metric_record(zeus_metric *m, const char *name, const zeus_measurement *r);

/* Pushes every value the handle holds now. Errors: ZEUS_ENET (no connection), ZEUS_ETIMEDOUT,
 * ZEUS_EHTTP (the gateway's status and its answer, e.g. a family pushed with another type). */
ZEUS_EXTERN int zeus_metric_push(zeus_metric *m);

/* The body a push sends now: the Prometheus text exposition format (version 0.0.4), with the
 * HELP and TYPE lines of every family that has a series. *text is NUL-terminated, released with
 * zeus_free(). */
ZEUS_EXTERN int zeus_metric_text(zeus_metric *m, char **text /* out */);

/* The URL a push goes to: <url>/metrics/job/<job>/<label>/<value>..., values that are not plain
 * [A-Za-z0-9._~-] (or empty) sent as <label>@base64/<base64url> as the Pushgateway expects.
 * Released with zeus_free(). */
ZEUS_EXTERN int zeus_metric_push_url(zeus_metric *m, char **url /* out */);

ZEUS_END_DECLS
#endif
