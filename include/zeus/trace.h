/* zeus/trace.h: the trace-driven simulator of recurring jobs (`zeus simulate`).
 *
 * Replays the NSDI '23 Zeus traces: a train trace (summary_train.csv:
 * dataset,network,batch_size,optimizer,learning_rate,run,target_metric,target_epoch; several runs
 * per batch size, target_epoch "nan" where a run never reached the target) and one power trace per
 * GPU (summary_power_<gpu>.csv: dataset,network,batch_size,optimizer,power_limit,time_per_epoch,
 * average_power; one measured epoch per batch size and power limit).
 *
 * One simulation is one recurring job driven by the batch-size optimizer (zeus/bso.h) and a
 * just-in-time power-limit optimizer, as in the original simulator:
 *   - the job's batch sizes are those in both traces for its dataset, network and optimizer;
 *     a default batch size missing from them is replaced by the largest one below it;
 *   - each recurrence tries up to 20 times until a try reaches the target; each try asks the
 *     optimizer for a batch size and samples one training path (one `run` of that batch size at
 *     the target metric) uniformly;
 *   - the first try of a batch size profiles the power limits during its first epoch (that epoch
 *     costs the mean energy and time of all limits) and the limit of least epoch cost
 *     (eta * average_power + (1 - eta) * max_power) * time_per_epoch is used from then on;
 *   - early stopping: a try runs at most min(max_epochs, floor(beta * best_cost /
 *     epoch_cost)) epochs, best_cost being the least total cost of a finished recurrence (all its
 *     tries); a try that cannot run a single epoch is a failure without history, observed by
 *     the optimizer with cost 100 * beta * best_cost;
 *   - energy = epochs x time_per_epoch x average_power, time = epochs x time_per_epoch; the cost
 *     is the Zeus cost with max_power = the largest power limit of the GPU's power trace.
 * Summary: totals over every try (exploration included); the baseline (the default batch size at
 * its maximum power limit, energy and time expected over the runs that reach the target within
 * max_epochs); the oracle (the batch size and limit of least expected cost among the batch sizes
 * all of whose runs reach the target within max_epochs, or any that reach it when none does);
 * energy_savings_pct = 100 (1 - total energy / (recurrences x baseline energy)), and
 * time_change_pct the same for time (positive: faster than the baseline, negative: slower).
 *
 * Random numbers (zeus_rng): the optimizer is seeded with `seed`, the path sampler with
 * seed XOR 0x9e3779b97f4a7c15, so a seed gives the same result on every machine.
 * Thread safety: a loaded trace may be simulated from several threads at once.
 */
#ifndef ZEUS_TRACE_H
#define ZEUS_TRACE_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

typedef struct zeus_trace zeus_trace;

/* Loads DIR/summary_train.csv and DIR/summary_power_<gpu>.csv (gpu: a40, v100, p100, rtx6000 or
 * any name with such a file). Errors: ZEUS_ENOENT / ZEUS_EIO naming a missing or unreadable file,
 * ZEUS_EPARSE naming file, line and column of a malformed cell or missing column. */
ZEUS_EXTERN int zeus_trace_open(zeus_trace **out /* out */, const char *dir, const char *gpu);
/* The same from explicit paths. */
ZEUS_EXTERN int zeus_trace_open_files(zeus_trace **out /* out */, const char *train_csv,
                                      const char *power_csv);
ZEUS_EXTERN void zeus_trace_close(zeus_trace *t);

/* One recurring job. Strings are borrowed. */
typedef struct zeus_trace_workload {
  const char *dataset;
  const char *network;
  const char *optimizer;
  double target_metric;
  long max_epochs;     /* > 0 */
  long default_bs;     /* > 0 */
} zeus_trace_workload;

/* The six workloads of the paper (what `zeus simulate --all` runs); *out is static. */
ZEUS_EXTERN size_t zeus_trace_default_workloads(const zeus_trace_workload **out /* out */);

/* Start from zeus_simulate_opts_init(): zero is a value here (eta 0, seed 0); recurrences 0 means
 * the default. NULL means the defaults. */
typedef struct zeus_simulate_opts {
  double eta;          /* [0, 1]; default 0.5 */
  double beta;         /* > 0 or INFINITY (no early stopping); default 2 */
  uint64_t seed;       /* default 1 */
  long recurrences;    /* >= 1; 0 (default): 2 x batch sizes x power limits */
} zeus_simulate_opts;

ZEUS_EXTERN void zeus_simulate_opts_init(zeus_simulate_opts *o /* out */);

/* One try. */
typedef struct zeus_simulate_try {
  long recurrence;     /* 1-based */
  long try_index;      /* 1-based within the recurrence */
  long batch_size;
  unsigned power_limit_w;
  long epochs;
  double energy_j;
  double time_s;
  double cost;
  bool reached;
} zeus_simulate_try;

typedef struct zeus_simulate_result {
  zeus_simulate_try *history;
  size_t history_len;
  long recurrences;
  long default_bs;              /* the one used (after replacement) */
  long *batch_sizes;            /* the job's batch sizes, ascending */
  size_t num_batch_sizes;
  size_t num_power_limits;
  double max_power_w;
  double energy_j, time_s, cost;             /* totals over every try */
  double baseline_energy_j, baseline_time_s, baseline_cost; /* per recurrence, expected */
  long oracle_bs;
  unsigned oracle_power_limit_w;
  double oracle_energy_j, oracle_time_s, oracle_cost;       /* per recurrence, expected */
  double energy_savings_pct;
  double time_change_pct;
} zeus_simulate_result;

/* Simulates one workload. opts NULL: defaults. Errors: ZEUS_EINVAL for a bad option or a workload
 * with no batch size in both traces (named); ZEUS_ESTATE when the default batch size does not
 * reach the target on the first recurrence or a recurrence fails 20 times (as the original). */
ZEUS_EXTERN int zeus_simulate(const zeus_trace *t, const zeus_trace_workload *w,
                              const zeus_simulate_opts *opts, zeus_simulate_result **out /* out */);
ZEUS_EXTERN void zeus_simulate_result_free(zeus_simulate_result *r);
/* The result as one compact JSON object (docs/output.md: SI units in the keys, shortest reals):
 * {"history": [{"recurrence", "try", "batch_size", "power_limit_w", "epochs", "energy_j",
 * "time_s", "cost_j", "reached"}...], "summary": {"recurrences", "tries", "batch_sizes",
 * "default_batch_size", "num_power_limits", "max_power_w",
 * "total": {"energy_j", "time_s", "cost_j"} (every try of every recurrence),
 * "baseline_per_recurrence": {"batch_size", "power_limit_w", "energy_j", "time_s", "cost_j"},
 * "oracle_per_recurrence": {the same}, "energy_saved_pct", "time_saved_pct"}} (history left out
 * unless with_history; the baseline and oracle are expectations over the trace's runs; the
 * savings compare the total with recurrences x baseline). Release the text with zeus_free(). */
ZEUS_EXTERN int zeus_simulate_result_json(const zeus_simulate_result *r, bool with_history,
                                          char **json /* out */);

ZEUS_END_DECLS
#endif
