/* zeus gpus check: the readings checked against each other over an interval: the energy counter
 * is monotonic and agrees with integrated power, power stays under the limit, and how often the
 * counter moves. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD "gpus check"
#define MAX_SAMPLES 4000000

static cli_index_list gpu_list;
static double duration_s = 5;
static int interval_ms = 5;
static double tolerance_pct = 5;
static bool json_output;

static const cli_opt opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"duration-s", 0, CLI_OPT_DOUBLE, &duration_s, "S", "how long to sample", "5", 0.2, 3600},
    {"interval-ms", 0, CLI_OPT_INT, &interval_ms, "N",
     "pause between two rounds of readings (0: read as fast as the GPU answers); it bounds how "
     "finely the counter's update period is measured",
     "5", 0, 1000},
    {"tolerance-pct", 0, CLI_OPT_DOUBLE, &tolerance_pct, "P",
     "how far the counter's energy may lie from integrated power, and power above the limit", "5",
     0, 100},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL, "print one JSON document (see below)"},
    {0},
};

static const cli_command check_cmd = {
    .name = "gpus check",
    .usage =
        "zeus gpus check [--gpus LIST] [--duration-s S] [--interval-ms N] [--tolerance-pct P]\n"
        "                [--json]",
    .about =
        "Reads every listed GPU's total-energy counter and instant power as often as\n"
        "--interval-ms allows for --duration-s seconds (and its 1 s average power and power\n"
        "limit every 100 ms), then checks the readings against each other:\n"
        "  counter_monotonic   the energy counter never goes back;\n"
        "  energy_agrees       between the counter's first and last change, its energy lies\n"
        "                      within P % of the trapezoidal integral of instant power;\n"
        "  power_within_limit  no 1 s average power (instant power where the GPU has no\n"
        "                      average) lies more than P % above the power limit.\n"
        "It also reports how often the counter moves (the median time between changes: NVIDIA\n"
        "GPUs update it every 10 to 100 ms), power's range and the samples taken. Run it while\n"
        "the GPU is busy (a training job, or a load started beside it): an idle GPU makes a weak\n"
        "test. A check a GPU cannot make (no energy counter) is null and does not fail.\n"
        "\n"
        "Exits with 1 when a check fails.",
    .opts = opts,
    .more =
        "JSON: {\"duration_s\", \"interval_s\", \"tolerance_pct\", \"gpus\": [{\"index\",\n"
        "\"samples\", \"power_limit_w\", \"counter\": {\"supported\", \"decreases\", \"updates\",\n"
        "\"update_period_s\", \"span_s\", \"energy_j\"}, \"power\": {\"energy_j\",\n"
        "\"instant_mean_w\", \"instant_min_w\", \"instant_max_w\", \"average_max_w\",\n"
        "\"zero_readings\"}, \"agreement_pct\" (counter against power, signed), \"checks\":\n"
        "{\"counter_monotonic\", \"energy_agrees\", \"power_within_limit\"} (true, false, or null\n"
        "when not possible), \"ok\", \"power_scope\": \"gpu\" or \"module\" (a Grace Hopper\n"
        "superchip: power and the counter are the module's, CPU + memory + GPU, and\n"
        "power_within_limit is null: the GPU's limit does not bound them)}], \"ok\"}.\n"
        "\n"
        "Examples:\n"
        "  zeus gpus check --duration-s 10\n"
        "  python train.py & zeus gpus check --gpus 0 --json\n"
        "\n"
        "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*,\n"
        "ZEUS_LOG_LEVEL (see 'zeus --help').\n",
    .args = CLI_ARGS_NONE,
};

typedef struct sample {
  double t;
  uint64_t mj;
  unsigned mw;
} sample;

typedef struct gpu_series {
  unsigned index;
  bool counter; /* the GPU has an energy counter */
  bool average; /* it reads a 1 s average */
  bool module;  /* its power is the superchip module's (Grace Hopper): no GPU limit bounds it */
  sample *s;
  size_t n, cap;
  double avg_max_w;
  unsigned limit_mw;
  bool have_limit, limit_changed;
  char error[512];
} gpu_series;

static bool push(gpu_series *g, double t, uint64_t mj, unsigned mw) {
  if (g->n == g->cap) {
    if (g->cap >= MAX_SAMPLES) return false;
    size_t cap = g->cap ? g->cap * 2 : 4096;
    sample *p = realloc(g->s, cap * sizeof *p);
    if (!p) return false;
    g->s = p;
    g->cap = cap;
  }
  g->s[g->n++] = (sample){t, mj, mw};
  return true;
}

/* The checks of one GPU's series, as JSON; *ok false when one fails. */
static json_t *analyse(const gpu_series *g, bool *ok) {
  size_t n = g->n;
  /* Counter: decreases, the times it changed. */
  long decreases = 0;
  size_t first = 0, last = 0, updates = 0;
  double *gaps = malloc((n ? n : 1) * sizeof *gaps);
  size_t ngaps = 0;
  double prev_change = NAN;
  for (size_t k = 1; g->counter && k < n; k++) {
    if (g->s[k].mj < g->s[k - 1].mj) decreases++;
    if (g->s[k].mj != g->s[k - 1].mj) {
      if (!updates) first = k;
      last = k;
      updates++;
      if (!isnan(prev_change) && gaps) gaps[ngaps++] = g->s[k].t - prev_change;
      prev_change = g->s[k].t;
    }
  }
  double period = gaps && ngaps ? cli_median(gaps, ngaps) : NAN;
  free(gaps);
  /* Power: instant range and the integral over the counter's span. */
  double sum = 0, pmin = NAN, pmax = NAN, e_power = 0;
  long zeros = 0;
  for (size_t k = 0; k < n; k++) {
    double w = g->s[k].mw / 1000.0;
    if (g->s[k].mw == 0) zeros++;
    sum += w;
    if (isnan(pmin) || w < pmin) pmin = w;
    if (isnan(pmax) || w > pmax) pmax = w;
    if (k > first && k <= last)
      e_power += (g->s[k].t - g->s[k - 1].t) * (w + g->s[k - 1].mw / 1000.0) / 2;
  }
  bool have_span = g->counter && updates >= 2 && last > first;
  double e_counter = have_span ? (g->s[last].mj - g->s[first].mj) / 1000.0 : NAN;
  double span = have_span ? g->s[last].t - g->s[first].t : NAN;
  double agree = have_span && e_power > 0 ? 100.0 * (e_counter - e_power) / e_power : NAN;
  if (!have_span) e_power = NAN;
  double tol = tolerance_pct / 100.0;
  double limit_w = g->limit_mw / 1000.0;
  double judged_max = g->average ? g->avg_max_w : pmax;
  json_t *monotonic = g->counter ? json_boolean(decreases == 0) : json_null();
  json_t *agrees = g->counter ? json_boolean(have_span && fabs(agree) <= tolerance_pct)
                              : json_null();
  /* A module's power (CPU + memory + GPU) is not bounded by the GPU's limit: not checked. */
  json_t *within = g->have_limit && !g->module && !isnan(judged_max)
                       ? json_boolean(judged_max <= limit_w * (1 + tol))
                       : json_null();
  *ok = !json_is_false(monotonic) && !json_is_false(agrees) && !json_is_false(within) &&
        !g->error[0];
  json_t *counter = json_pack(
      "{s:b,s:I,s:I,s:o,s:o,s:o}", "supported", g->counter, "decreases", (json_int_t)decreases,
      "updates", (json_int_t)updates, "update_period_s", cli_json_real_or_null(period), "span_s",
      cli_json_real_or_null(span), "energy_j", cli_json_real_or_null(e_counter));
  json_t *power = json_pack(
      "{s:o,s:o,s:o,s:o,s:o,s:I}", "energy_j", cli_json_real_or_null(e_power), "instant_mean_w",
      cli_json_real_or_null(n ? sum / n : NAN), "instant_min_w", cli_json_real_or_null(pmin),
      "instant_max_w", cli_json_real_or_null(pmax), "average_max_w",
      cli_json_real_or_null(g->average ? g->avg_max_w : NAN), "zero_readings", (json_int_t)zeros);
  json_t *checks = json_pack("{s:o,s:o,s:o}", "counter_monotonic", monotonic, "energy_agrees",
                             agrees, "power_within_limit", within);
  return json_pack("{s:I,s:I,s:o,s:b,s:o,s:o,s:o,s:o,s:o,s:b,s:s}", "index", (json_int_t)g->index,
                   "samples", (json_int_t)n, "power_limit_w",
                   g->have_limit ? json_real(limit_w) : json_null(), "power_limit_changed",
                   g->limit_changed, "counter", counter, "power", power, "agreement_pct",
                   cli_json_real_or_null(agree), "checks", checks, "error",
                   g->error[0] ? json_string(g->error) : json_null(), "ok", *ok, "power_scope",
                   g->module ? "module" : "gpu");
}

static const char *tri(const json_t *v) {
  return json_is_null(v) ? "n/a" : json_is_true(v) ? "pass" : "FAIL";
}

static void text_gpu(const json_t *j) {
  const json_t *c = json_object_get(j, "counter"), *p = json_object_get(j, "power"),
               *k = json_object_get(j, "checks");
  printf("GPU %lld: %lld samples\n", (long long)json_integer_value(json_object_get(j, "index")),
         (long long)json_integer_value(json_object_get(j, "samples")));
  if (json_is_real(json_object_get(j, "power_limit_w")))
    printf("  power limit:          %.1f W\n",
           json_real_value(json_object_get(j, "power_limit_w")));
  else
    printf("  power limit:          n/a\n");
  if (json_is_true(json_object_get(c, "supported"))) {
    printf("  energy counter:       %lld updates, every %.1f ms (median), %lld decreases\n",
           (long long)json_integer_value(json_object_get(c, "updates")),
           json_real_value(json_object_get(c, "update_period_s")) * 1e3,
           (long long)json_integer_value(json_object_get(c, "decreases")));
    printf("  energy over %.3f s:  counter %.3f J, integrated power %.3f J (%+.2f %%)\n",
           json_real_value(json_object_get(c, "span_s")),
           json_real_value(json_object_get(c, "energy_j")),
           json_real_value(json_object_get(p, "energy_j")),
           json_real_value(json_object_get(j, "agreement_pct")));
  } else {
    printf("  energy counter:       not supported\n");
  }
  if (strcmp(json_string_value(json_object_get(j, "power_scope")), "module") == 0)
    printf("  power scope:          module (CPU + memory + GPU of the superchip)\n");
  printf("  instant power:        %.1f W mean, %.1f-%.1f W\n",
         json_real_value(json_object_get(p, "instant_mean_w")),
         json_real_value(json_object_get(p, "instant_min_w")),
         json_real_value(json_object_get(p, "instant_max_w")));
  if (json_is_real(json_object_get(p, "average_max_w")))
    printf("  1 s average power:    at most %.1f W\n",
           json_real_value(json_object_get(p, "average_max_w")));
  printf("  counter monotonic:    %s\n", tri(json_object_get(k, "counter_monotonic")));
  printf("  energy agrees:        %s\n", tri(json_object_get(k, "energy_agrees")));
  printf("  power within limit:   %s\n", tri(json_object_get(k, "power_within_limit")));
  const json_t *e = json_object_get(j, "error");
  if (json_is_string(e)) printf("  error:                %s\n", json_string_value(e));
}

int cmd_gpus_check(int argc, char **argv) {
  int rc = cli_parse(&check_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  unsigned idx[ZEUS_MAX_GPUS];
  size_t ng;
  zeus_devices *d = cli_open_gpu_selection(CMD, &gpu_list, idx, &ng);
  if (!d) return CLI_EXIT_FAIL;
  gpu_series *gs = calloc(ng, sizeof *gs);
  if (!gs) {
    zeus_devices_close(d);
    return CLI_EXIT_FAIL;
  }
  for (size_t k = 0; k < ng; k++) {
    gpu_series *g = &gs[k];
    g->index = idx[k];
    bool has = false;
    g->counter = zeus_gpu_energy_counter_supported(d, g->index, &has) == ZEUS_OK && has;
    unsigned mw;
    g->average = zeus_gpu_power(d, g->index, ZEUS_POWER_AVERAGE, &mw) == ZEUS_OK;
    g->have_limit = zeus_gpu_get_power_limit(d, g->index, &g->limit_mw) == ZEUS_OK;
    zeus_power_scope scope = ZEUS_POWER_SCOPE_GPU;
    g->module = zeus_gpu_power_scope(d, g->index, &scope) == ZEUS_OK && scope == ZEUS_POWER_SCOPE_MODULE;
    g->avg_max_w = NAN;
  }
  cli_catch_stop_signals();
  double t_start = zeus_monotonic_s(), next_slow = t_start;
  bool full = false;
  while (!cli_stop_signal && !full && zeus_monotonic_s() - t_start < duration_s) {
    bool slow = zeus_monotonic_s() >= next_slow;
    if (slow) next_slow += 0.1;
    for (size_t k = 0; k < ng; k++) {
      gpu_series *g = &gs[k];
      if (g->error[0]) continue;
      uint64_t mj = 0;
      unsigned mw = 0;
      int r1 = g->counter ? zeus_gpu_total_energy(d, g->index, &mj) : ZEUS_OK;
      int r2 = zeus_gpu_instant_power(d, g->index, &mw);
      double t = zeus_devices_now(d);
      if (r1 || r2) {
        snprintf(g->error, sizeof g->error, "%s", zeus_errmsg());
        continue;
      }
      if (!push(g, t, mj, mw)) full = true;
      if (slow) {
        unsigned avg, lim;
        if (g->average && zeus_gpu_power(d, g->index, ZEUS_POWER_AVERAGE, &avg) == ZEUS_OK &&
            (isnan(g->avg_max_w) || avg / 1000.0 > g->avg_max_w))
          g->avg_max_w = avg / 1000.0;
        if (g->have_limit && zeus_gpu_get_power_limit(d, g->index, &lim) == ZEUS_OK &&
            lim != g->limit_mw) {
          g->limit_changed = true;
          if (lim > g->limit_mw) g->limit_mw = lim; /* judge against the highest limit seen */
        }
      }
    }
    if (interval_ms > 0) cli_sleep_s(interval_ms / 1000.0);
  }
  int sig = cli_stop_signal;
  cli_release_stop_signals();
  double elapsed = zeus_monotonic_s() - t_start;
  bool all_ok = true;
  json_t *arr = json_array();
  for (size_t k = 0; k < ng; k++) {
    bool ok;
    json_t *j = analyse(&gs[k], &ok);
    all_ok &= ok;
    if (!json_output) text_gpu(j);
    json_array_append_new(arr, j);
  }
  int status = all_ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  if (json_output) {
    json_t *doc = json_pack("{s:f,s:f,s:f,s:b,s:o,s:b}", "duration_s", elapsed, "interval_s",
                            interval_ms / 1000.0, "tolerance_pct", tolerance_pct, "interrupted",
                            sig != 0, "gpus", arr, "ok", all_ok);
    if (!cli_write_json(stdout, doc)) status = CLI_EXIT_FAIL;
    json_decref(doc);
  } else {
    json_decref(arr);
    printf("%s\n", all_ok ? "every check passed" : "FAILED: see above");
  }
  for (size_t k = 0; k < ng; k++) free(gs[k].s);
  free(gs);
  zeus_devices_close(d);
  return sig ? 128 + sig : status;
}
