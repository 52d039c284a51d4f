/* zeus gpus clock-latency: how long a locked SM clock takes to show up in the clock the GPU
 * reports, the physical limit of how fast the Perseus controller can change frequencies. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD "gpus clock-latency"
#define MAX_CHANGES 1000

static cli_index_list gpu_list;
static long changes = 10;
static double poll_ms = 1;
static double timeout_s = 2;
static double tol_mhz = 30;
static const char *low_arg = "mid";
static bool json_output;

static const cli_opt opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"changes", 'n', CLI_OPT_LONG, &changes, "N", "how many clock changes to time on each GPU",
     "10", 2, MAX_CHANGES},
    {"low", 0, CLI_OPT_STRING, &low_arg, "MHZ|min|mid",
     "the lower of the two clocks it alternates between (the higher is the highest supported)",
     "mid"},
    {"poll-ms", 0, CLI_OPT_DOUBLE, &poll_ms, "MS", "pause between two readings of the clock", "1",
     0, 1000},
    {"timeout-s", 0, CLI_OPT_DOUBLE, &timeout_s, "S",
     "give a change up (and count it as timed out) when the clock has not shown it by then", "2",
     0.01, 60},
    {"tolerance-mhz", 0, CLI_OPT_DOUBLE, &tol_mhz, "MHZ",
     "how close to the locked clock a reading must be to count as arrived", "30", 0, 10000},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL, "print one JSON document (see below)"},
    {0},
};

static const cli_command latency_cmd = {
    .name = "gpus clock-latency",
    .usage =
        "zeus gpus clock-latency [--gpus LIST] [--changes N] [--low MHZ|min|mid]\n"
        "                        [--poll-ms MS] [--timeout-s S] [--json]",
    .about =
        "Locks each listed GPU's SM clock alternately to its highest supported clock and to a\n"
        "lower one, N times, and after each change reads the SM clock every --poll-ms until it\n"
        "lies within --tolerance-mhz of the new lock. The time from the call to that reading is\n"
        "the change's latency: how soon a frequency the Perseus controller sets takes effect.\n"
        "Run it while the GPU works (an idle GPU may sit below any lock, and every change then\n"
        "times out). The call's own duration is reported too. Unlocks the clocks at the end,\n"
        "and on SIGINT or SIGTERM (exit code 128 + the signal).\n"
        "\n"
        "Exits with 1 when a change cannot be made or any change times out. Needs root or\n"
        "CAP_SYS_ADMIN on real GPUs.",
    .opts = opts,
    .more =
        "JSON: {\"changes\", \"poll_s\", \"timeout_s\", \"tolerance_mhz\", \"interrupted\",\n"
        "\"gpus\": [{\"index\", \"high_mhz\", \"low_mhz\", \"latencies_s\" (null for a change\n"
        "that timed out), \"median_latency_s\", \"max_latency_s\", \"min_latency_s\",\n"
        "\"median_call_s\", \"max_call_s\", \"timeouts\", \"error\", \"ok\"}], \"ok\"}.\n"
        "\n"
        "Example:\n"
        "  python train.py & sudo zeus gpus clock-latency --gpus 0 --changes 20\n"
        "\n"
        "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*,\n"
        "ZEUS_LOG_LEVEL (see 'zeus --help').\n",
    .args = CLI_ARGS_NONE,
};

typedef struct gpu_lat {
  unsigned index, high, low;
  double lat[MAX_CHANGES], call[MAX_CHANGES];
  size_t n, timeouts;
  char error[512];
} gpu_lat;

/* Times the changes on one GPU. */
static void measure(zeus_devices *d, gpu_lat *g) {
  unsigned mhz[1024];
  size_t n = 1024;
  if (cli_gpu_sm_clocks(d, g->index, NULL, mhz, &n)) {
    snprintf(g->error, sizeof g->error, "%s", zeus_errmsg());
    return;
  }
  g->high = mhz[0];
  if (strcmp(low_arg, "min") == 0)
    g->low = mhz[n - 1];
  else if (strcmp(low_arg, "mid") == 0)
    g->low = mhz[n / 2];
  else
    g->low = cli_nearest_clock(mhz, n, strtod(low_arg, NULL));
  if (g->low == g->high) {
    snprintf(g->error, sizeof g->error, "the GPU supports one SM clock (%u MHz): nothing to change",
             g->high);
    return;
  }
  /* Start from the high clock and let it settle. */
  if (zeus_gpu_set_locked_clocks(d, g->index, g->high, g->high)) {
    snprintf(g->error, sizeof g->error, "%s", zeus_errmsg());
    return;
  }
  cli_sleep_s(0.2);
  for (long k = 0; k < changes && !cli_stop_signal; k++) {
    unsigned target = k % 2 == 0 ? g->low : g->high;
    double t0 = zeus_monotonic_s();
    if (zeus_gpu_set_locked_clocks(d, g->index, target, target)) {
      snprintf(g->error, sizeof g->error, "%s", zeus_errmsg());
      return;
    }
    double t1 = zeus_monotonic_s();
    g->call[g->n] = t1 - t0;
    g->lat[g->n] = NAN;
    for (;;) {
      unsigned sm;
      if (zeus_gpu_current_clocks(d, g->index, &sm, NULL)) {
        snprintf(g->error, sizeof g->error, "%s", zeus_errmsg());
        return;
      }
      double t = zeus_monotonic_s();
      if (fabs((double)sm - target) <= tol_mhz) {
        g->lat[g->n] = t - t0;
        break;
      }
      if (t - t0 > timeout_s) {
        g->timeouts++;
        break;
      }
      if (!cli_sleep_s(poll_ms / 1000.0)) break;
    }
    g->n++;
  }
}

static json_t *gpu_json(gpu_lat *g, bool *ok) {
  double got[MAX_CHANGES], calls[MAX_CHANGES];
  size_t ngot = 0;
  json_t *lats = json_array();
  for (size_t k = 0; k < g->n; k++) {
    json_array_append_new(lats, cli_json_real_or_null(g->lat[k]));
    if (isfinite(g->lat[k])) got[ngot++] = g->lat[k];
    calls[k] = g->call[k];
  }
  *ok = !g->error[0] && g->timeouts == 0 && g->n > 0;
  double mx = cli_max(got, ngot), mn = cli_min(got, ngot), md = cli_median(got, ngot);
  double cmax = cli_max(calls, g->n), cmed = cli_median(calls, g->n);
  return json_pack("{s:I,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:o,s:b}", "index",
                   (json_int_t)g->index, "high_mhz", g->high ? json_real(g->high) : json_null(),
                   "low_mhz", g->low ? json_real(g->low) : json_null(), "latencies_s", lats,
                   "median_latency_s", cli_json_real_or_null(md), "max_latency_s",
                   cli_json_real_or_null(mx), "min_latency_s", cli_json_real_or_null(mn),
                   "median_call_s", cli_json_real_or_null(cmed), "max_call_s",
                   cli_json_real_or_null(cmax), "timeouts", (json_int_t)g->timeouts, "error",
                   g->error[0] ? json_string(g->error) : json_null(), "ok", *ok);
}

int cmd_gpus_clock_latency(int argc, char **argv) {
  int rc = cli_parse(&latency_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  if (strcmp(low_arg, "min") != 0 && strcmp(low_arg, "mid") != 0) {
    char *end;
    double f = strtod(low_arg, &end);
    if (*end || !(f > 0)) {
      cli_error(CMD, false, "--low '%s' is not a number of MHz, min or mid", low_arg);
      return CLI_EXIT_USAGE;
    }
  }
  unsigned idx[ZEUS_MAX_GPUS];
  size_t ng;
  zeus_devices *d = cli_open_gpu_selection(CMD, &gpu_list, idx, &ng);
  if (!d) return CLI_EXIT_FAIL;
  gpu_lat *gs = calloc(ng, sizeof *gs);
  if (!gs) {
    zeus_devices_close(d);
    return CLI_EXIT_FAIL;
  }
  cli_catch_stop_signals();
  for (size_t k = 0; k < ng && !cli_stop_signal; k++) {
    gs[k].index = idx[k];
    measure(d, &gs[k]);
    if (zeus_gpu_reset_locked_clocks(d, gs[k].index) && !gs[k].error[0])
      snprintf(gs[k].error, sizeof gs[k].error, "unlocking: %s", zeus_errmsg());
  }
  zeus_devices_restore(d);
  int sig = cli_stop_signal;
  cli_release_stop_signals();
  bool all_ok = true;
  json_t *arr = json_array();
  for (size_t k = 0; k < ng; k++) {
    bool ok;
    gs[k].index = idx[k];
    json_t *j = gpu_json(&gs[k], &ok);
    all_ok &= ok;
    if (!json_output) {
      printf("GPU %u: %u <-> %u MHz, %zu changes", gs[k].index, gs[k].high, gs[k].low, gs[k].n);
      const json_t *md = json_object_get(j, "median_latency_s");
      if (json_is_real(md))
        printf(": shows after %.1f ms median, %.1f ms worst (the call itself %.2f ms median)",
               json_real_value(md) * 1e3,
               json_real_value(json_object_get(j, "max_latency_s")) * 1e3,
               json_real_value(json_object_get(j, "median_call_s")) * 1e3);
      printf("; %zu timed out%s%s\n", gs[k].timeouts, gs[k].error[0] ? "; error: " : "",
             gs[k].error);
    }
    json_array_append_new(arr, j);
  }
  int status = all_ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  if (json_output) {
    json_t *doc = json_pack("{s:I,s:f,s:f,s:f,s:b,s:o,s:b}", "changes", (json_int_t)changes,
                            "poll_s", poll_ms / 1000.0, "timeout_s", timeout_s, "tolerance_mhz",
                            tol_mhz, "interrupted", sig != 0, "gpus", arr, "ok", all_ok);
    if (!cli_write_json(stdout, doc)) status = CLI_EXIT_FAIL;
    json_decref(doc);
  } else {
    json_decref(arr);
    printf("%s\n", all_ok ? "every clock change showed up" : "FAILED: see above");
  }
  free(gs);
  zeus_devices_close(d);
  return sig ? 128 + sig : status;
}
