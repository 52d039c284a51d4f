/* zeus gpus set: changes a GPU's power limit, locked SM clock and locked memory clock, reads each
 * back (the clocks while the GPU works), holds them for a time or while a command runs, puts
 * everything back and reads again that it is back. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD "gpus set"
#define MAX_HOLD_SAMPLES 100000

static cli_index_list gpu_list;
static const char *power_limit_arg, *sm_clock_arg, *mem_clock_arg;
static double hold_s = 1;
static double sample_ms = 20;
static double clock_tol_mhz = 30;
static bool json_output;

static const cli_opt opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"power-limit", 0, CLI_OPT_STRING, &power_limit_arg, "W|min|max|default",
     "set the power limit to W watts, or to the GPU's minimum, maximum or default", "unchanged"},
    {"sm-clock", 0, CLI_OPT_STRING, &sm_clock_arg, "MHZ|min|mid|max",
     "lock the SM clock to the supported clock nearest MHZ (or the lowest, middle or highest)",
     "unchanged"},
    {"memory-clock", 0, CLI_OPT_STRING, &mem_clock_arg, "MHZ|min|max",
     "lock the memory clock to the supported clock nearest MHZ (Ampere and newer)", "unchanged"},
    {"hold-s", 0, CLI_OPT_DOUBLE, &hold_s, "S",
     "how long to hold the settings while reading clocks and power (without a command)", "1", 0,
     86400},
    {"sample-ms", 0, CLI_OPT_DOUBLE, &sample_ms, "MS", "pause between two readings while holding",
     "20", 1, 10000},
    {"clock-tolerance-mhz", 0, CLI_OPT_DOUBLE, &clock_tol_mhz, "MHZ",
     "how far the median clock read while holding may lie from the locked clock", "30", 0, 10000},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL, "print one JSON document (see below)"},
    {0},
};

static const cli_command set_cmd = {
    .name = "gpus set",
    .usage =
        "zeus gpus set [--gpus LIST] [--power-limit W|min|max|default]\n"
        "              [--sm-clock MHZ|min|mid|max] [--memory-clock MHZ|min|max]\n"
        "              [--hold-s S] [--json] [-- COMMAND...]",
    .about =
        "Changes the settings given on every listed GPU and verifies each by reading it back:\n"
        "the power limit at once, the locked SM and memory clocks as the median clock read every\n"
        "--sample-ms while the settings are held (for --hold-s seconds, or while COMMAND runs:\n"
        "start a load there, since an idle GPU lowers its clocks below any lock). Then it puts\n"
        "back everything it changed (power limit to its earlier value, clocks unlocked) and reads\n"
        "again that the power limit is back. SIGINT and SIGTERM end the hold early; the settings\n"
        "are put back all the same and the exit code is 128 + the signal.\n"
        "\n"
        "A setting the GPU does not support (memory clocks before Ampere) is reported as not\n"
        "supported and does not fail. Exits with 1 when a setting cannot be made, reads back\n"
        "wrong, or is not back afterwards. Needs root or CAP_SYS_ADMIN on real GPUs.",
    .opts = opts,
    .more =
        "JSON: {\"hold_s\", \"command_exit_code\" (null without a command), \"interrupted\",\n"
        "\"gpus\": [{\"index\", \"before\": {\"power_limit_w\", \"sm_clock_mhz\",\n"
        "\"memory_clock_mhz\"}, \"settings\": [{\"setting\" (power_limit, sm_clock,\n"
        "memory_clock), \"requested_w\" | \"requested_mhz\", \"supported\", \"error\",\n"
        "\"read_back_w\" | \"read_back_mhz\" (the limit read, or the median clock while holding),\n"
        "\"read_min_w\" | \"read_min_mhz\", \"read_max_w\" | \"read_max_mhz\", \"ok\"\n"
        "(true, false, or null when not supported)}], \"hold\": {\"samples\", \"power_mean_w\",\n"
        "\"power_max_w\"}, \"after\": {\"power_limit_w\", \"sm_clock_mhz\", \"memory_clock_mhz\",\n"
        "\"restore_error\", \"restored\"}, \"ok\"}], \"ok\"}.\n"
        "\n"
        "Examples:\n"
        "  sudo zeus gpus set --gpus 0 --power-limit min --hold-s 2\n"
        "  sudo zeus gpus set --gpus 0 --sm-clock mid --json -- python train.py\n"
        "\n"
        "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*,\n"
        "ZEUS_LOG_LEVEL (see 'zeus --help').\n",
    .args = CLI_ARGS_COMMAND,
};

enum { S_LIMIT, S_SM, S_MEM, NSET };
static const char *const set_names[NSET] = {"power_limit", "sm_clock", "memory_clock"};

typedef struct setting {
  bool asked, supported, set_ok;
  double requested; /* W or MHz */
  unsigned value;   /* mW or MHz as given to the library */
  char error[512];
  double *reads;
  size_t nreads;
  double read_back, read_min, read_max;
} setting;

typedef struct gpu_state {
  unsigned index;
  bool have_limit;
  unsigned limit_before_mw, sm_before, mem_before;
  bool have_clocks_before;
  setting s[NSET];
  double power_sum_w, power_max_w;
  size_t power_n;
  unsigned limit_after_mw, sm_after, mem_after;
  bool have_limit_after, have_clocks_after;
  char restore_error[512];
} gpu_state;

/* Parses W|min|max|default into mW for one GPU; false with *err set. */
static bool resolve_limit(zeus_devices *d, unsigned gpu, const char *arg, unsigned *mw, char *err,
                          size_t len) {
  unsigned lo, hi, def;
  if (zeus_gpu_power_limit_constraints(d, gpu, &lo, &hi, &def)) {
    snprintf(err, len, "%s", zeus_errmsg());
    return false;
  }
  if (strcmp(arg, "min") == 0)
    *mw = lo;
  else if (strcmp(arg, "max") == 0)
    *mw = hi;
  else if (strcmp(arg, "default") == 0)
    *mw = def;
  else {
    char *end;
    double w = strtod(arg, &end);
    if (*end || !(w > 0) || w > 1e6) {
      snprintf(err, len, "--power-limit '%s' is not a number of W, min, max or default", arg);
      return false;
    }
    *mw = (unsigned)lround(w * 1000);
  }
  return true;
}

/* Parses MHZ|min|mid|max against a list of supported clocks (highest first). */
static bool resolve_clock(const char *arg, const unsigned *mhz, size_t n, bool allow_mid,
                          unsigned *out, char *err, size_t len, const char *opt) {
  if (n == 0) {
    snprintf(err, len, "the GPU lists no clock for %s", opt);
    return false;
  }
  if (strcmp(arg, "max") == 0)
    *out = mhz[0];
  else if (strcmp(arg, "min") == 0)
    *out = mhz[n - 1];
  else if (allow_mid && strcmp(arg, "mid") == 0)
    *out = mhz[n / 2];
  else {
    char *end;
    double f = strtod(arg, &end);
    if (*end || !(f > 0) || f > 1e6) {
      snprintf(err, len, "%s '%s' is not a number of MHz%s", opt, arg,
               allow_mid ? ", min, mid or max" : ", min or max");
      return false;
    }
    *out = cli_nearest_clock(mhz, n, f);
  }
  return true;
}

static void apply(zeus_devices *d, gpu_state *g) {
  char err[512] = "";
  for (int k = 0; k < NSET; k++) g->s[k].supported = true;
  if (power_limit_arg) {
    setting *s = &g->s[S_LIMIT];
    s->asked = true;
    if (resolve_limit(d, g->index, power_limit_arg, &s->value, err, sizeof err)) {
      s->requested = s->value / 1000.0;
      int rc = zeus_gpu_set_power_limit(d, g->index, s->value);
      s->set_ok = rc == ZEUS_OK;
      s->supported = rc != ZEUS_ENOTSUP;
      if (rc) snprintf(s->error, sizeof s->error, "%s", zeus_errmsg());
      unsigned mw;
      if (s->set_ok && zeus_gpu_get_power_limit(d, g->index, &mw) == ZEUS_OK)
        s->read_back = s->read_min = s->read_max = mw / 1000.0;
    } else {
      snprintf(s->error, sizeof s->error, "%s", err);
    }
  }
  if (sm_clock_arg) {
    setting *s = &g->s[S_SM];
    s->asked = true;
    unsigned mem, mhz[1024];
    size_t n = 1024;
    int rc = cli_gpu_sm_clocks(d, g->index, &mem, mhz, &n);
    if (rc) {
      s->supported = rc != ZEUS_ENOTSUP;
      snprintf(s->error, sizeof s->error, "%s", zeus_errmsg());
    } else if (resolve_clock(sm_clock_arg, mhz, n, true, &s->value, s->error, sizeof s->error,
                             "--sm-clock")) {
      s->requested = s->value;
      rc = zeus_gpu_set_locked_clocks(d, g->index, s->value, s->value);
      s->set_ok = rc == ZEUS_OK;
      s->supported = rc != ZEUS_ENOTSUP;
      if (rc) snprintf(s->error, sizeof s->error, "%s", zeus_errmsg());
    }
  }
  if (mem_clock_arg) {
    setting *s = &g->s[S_MEM];
    s->asked = true;
    unsigned mhz[64];
    size_t n = 64;
    int rc = zeus_gpu_supported_memory_clocks(d, g->index, mhz, &n);
    if (rc) {
      s->supported = rc != ZEUS_ENOTSUP;
      snprintf(s->error, sizeof s->error, "%s", zeus_errmsg());
    } else if (resolve_clock(mem_clock_arg, mhz, n, false, &s->value, s->error, sizeof s->error,
                             "--memory-clock")) {
      s->requested = s->value;
      rc = zeus_gpu_set_memory_locked_clocks(d, g->index, s->value, s->value);
      s->set_ok = rc == ZEUS_OK;
      s->supported = rc != ZEUS_ENOTSUP;
      if (rc) snprintf(s->error, sizeof s->error, "%s", zeus_errmsg());
    }
  }
}

static void sample(zeus_devices *d, gpu_state *g) {
  unsigned sm, mem, mw;
  if (zeus_gpu_current_clocks(d, g->index, &sm, &mem) == ZEUS_OK) {
    setting *c[2] = {&g->s[S_SM], &g->s[S_MEM]};
    unsigned v[2] = {sm, mem};
    for (int k = 0; k < 2; k++)
      if (c[k]->set_ok && c[k]->nreads < MAX_HOLD_SAMPLES) c[k]->reads[c[k]->nreads++] = v[k];
  }
  if (zeus_gpu_instant_power(d, g->index, &mw) == ZEUS_OK) {
    g->power_sum_w += mw / 1000.0;
    if (mw / 1000.0 > g->power_max_w) g->power_max_w = mw / 1000.0;
    g->power_n++;
  }
}

/* true, false, or null (not asked, or not supported). */
static json_t *setting_ok(const setting *s, int kind) {
  if (!s->asked || !s->supported) return json_null();
  if (!s->set_ok) return json_false();
  double tol = kind == S_LIMIT ? 0.0005 : clock_tol_mhz; /* the limit reads back to the mW */
  return json_boolean(isfinite(s->read_back) && fabs(s->read_back - s->requested) <= tol);
}

static json_t *gpu_json(const gpu_state *g, bool *ok) {
  json_t *settings = json_array();
  *ok = true;
  for (int k = 0; k < NSET; k++) {
    const setting *s = &g->s[k];
    if (!s->asked) continue;
    json_t *sok = setting_ok(s, k);
    if (json_is_false(sok)) *ok = false;
    /* Keys carry the unit: _w for the power limit, _mhz for the clocks. */
    const char *u = k == S_LIMIT ? "w" : "mhz";
    char kr[32], kb[32], kmin[32], kmax[32];
    snprintf(kr, sizeof kr, "requested_%s", u);
    snprintf(kb, sizeof kb, "read_back_%s", u);
    snprintf(kmin, sizeof kmin, "read_min_%s", u);
    snprintf(kmax, sizeof kmax, "read_max_%s", u);
    json_array_append_new(
        settings,
        json_pack("{s:s,s:o,s:b,s:o,s:o,s:o,s:o,s:o}", "setting", set_names[k], kr,
                  s->value ? json_real(s->requested) : json_null(), "supported", s->supported,
                  "error", s->error[0] ? json_string(s->error) : json_null(), kb,
                  cli_json_real_or_null(s->read_back), kmin, cli_json_real_or_null(s->read_min),
                  kmax, cli_json_real_or_null(s->read_max), "ok", sok));
  }
  bool restored = !g->restore_error[0] &&
                  (!g->have_limit ||
                   (g->have_limit_after && g->limit_after_mw == g->limit_before_mw));
  if (!restored) *ok = false;
  json_t *before = json_pack(
      "{s:o,s:o,s:o}", "power_limit_w",
      g->have_limit ? json_real(g->limit_before_mw / 1000.0) : json_null(), "sm_clock_mhz",
      g->have_clocks_before ? json_real(g->sm_before) : json_null(), "memory_clock_mhz",
      g->have_clocks_before ? json_real(g->mem_before) : json_null());
  json_t *after = json_pack(
      "{s:o,s:o,s:o,s:o,s:b}", "power_limit_w",
      g->have_limit_after ? json_real(g->limit_after_mw / 1000.0) : json_null(), "sm_clock_mhz",
      g->have_clocks_after ? json_real(g->sm_after) : json_null(), "memory_clock_mhz",
      g->have_clocks_after ? json_real(g->mem_after) : json_null(), "restore_error",
      g->restore_error[0] ? json_string(g->restore_error) : json_null(), "restored", restored);
  json_t *hold = json_pack("{s:I,s:o,s:o}", "samples", (json_int_t)g->power_n, "power_mean_w",
                           cli_json_real_or_null(g->power_n ? g->power_sum_w / g->power_n : NAN),
                           "power_max_w", cli_json_real_or_null(g->power_n ? g->power_max_w : NAN));
  return json_pack("{s:I,s:o,s:o,s:o,s:o,s:b}", "index", (json_int_t)g->index, "before", before,
                   "settings", settings, "hold", hold, "after", after, "ok", *ok);
}

static FILE *out;

/* A setting's value under its unit's key ("read_back" -> "read_back_w" or "read_back_mhz"). */
static const json_t *uget(const json_t *s, const char *base, bool limit) {
  char key[64];
  snprintf(key, sizeof key, "%s_%s", base, limit ? "w" : "mhz");
  return json_object_get(s, key);
}

static void text_gpu(const json_t *j) {
  fprintf(out, "GPU %lld:\n", (long long)json_integer_value(json_object_get(j, "index")));
  size_t k;
  const json_t *s;
  json_array_foreach(json_object_get(j, "settings"), k, s) {
    const char *name = json_string_value(json_object_get(s, "setting"));
    bool limit = strcmp(name, "power_limit") == 0;
    const json_t *ok = json_object_get(s, "ok"), *err = json_object_get(s, "error");
    const char *unit = limit ? "W" : "MHz";
    if (!json_is_true(json_object_get(s, "supported"))) {
      fprintf(out, "  %-13s not supported (%s)\n", name,
              json_is_string(err) ? json_string_value(err) : "");
      continue;
    }
    fprintf(out, "  %-13s %-4s set %.1f %s, read %s%.1f %s", name, json_is_true(ok) ? "ok" : "FAIL",
            json_real_value(uget(s, "requested", limit)), unit, limit ? "" : "median ",
            json_real_value(uget(s, "read_back", limit)), unit);
    if (!limit && json_is_real(uget(s, "read_min", limit)))
      fprintf(out, " (%.0f-%.0f)", json_real_value(uget(s, "read_min", limit)),
              json_real_value(uget(s, "read_max", limit)));
    fprintf(out, "\n");
    if (json_is_string(err)) fprintf(out, "  %-13s      %s\n", "", json_string_value(err));
  }
  const json_t *h = json_object_get(j, "hold"), *a = json_object_get(j, "after"),
               *b = json_object_get(j, "before");
  if (json_is_real(json_object_get(h, "power_mean_w")))
    fprintf(out, "  while held:   power %.1f W mean, %.1f W max (%lld readings)\n",
            json_real_value(json_object_get(h, "power_mean_w")),
            json_real_value(json_object_get(h, "power_max_w")),
            (long long)json_integer_value(json_object_get(h, "samples")));
  if (json_is_real(json_object_get(b, "power_limit_w")))
    fprintf(out, "  power limit:  %.1f W before, %s after: %s\n",
            json_real_value(json_object_get(b, "power_limit_w")),
            json_is_real(json_object_get(a, "power_limit_w")) ? "read" : "unreadable",
            json_is_true(json_object_get(a, "restored")) ? "restored" : "NOT RESTORED");
  if (json_is_string(json_object_get(a, "restore_error")))
    fprintf(out, "  restore:      %s\n", json_string_value(json_object_get(a, "restore_error")));
}

int cmd_gpus_set(int argc, char **argv) {
  char **child = NULL;
  int nchild = 0;
  int rc = cli_parse(&set_cmd, argc, argv, &child, &nchild);
  if (rc != CLI_CONTINUE) return rc;
  if (nchild <= 0) child = NULL;
  if (!power_limit_arg && !sm_clock_arg && !mem_clock_arg) {
    cli_error(CMD, false, "nothing to set: give --power-limit, --sm-clock or --memory-clock");
    return CLI_EXIT_USAGE;
  }
  unsigned idx[ZEUS_MAX_GPUS];
  size_t ng;
  zeus_devices *d = cli_open_gpu_selection(CMD, &gpu_list, idx, &ng);
  if (!d) return CLI_EXIT_FAIL;
  gpu_state *gs = calloc(ng, sizeof *gs);
  bool oom = !gs;
  for (size_t k = 0; !oom && k < ng; k++) {
    for (int s = 0; s < NSET; s++) {
      gs[k].s[s].read_back = gs[k].s[s].read_min = gs[k].s[s].read_max = NAN;
      if (s != S_LIMIT && !(gs[k].s[s].reads = malloc(MAX_HOLD_SAMPLES * sizeof(double))))
        oom = true;
    }
  }
  if (oom) {
    cli_error(CMD, false, "out of memory");
    for (size_t k = 0; gs && k < ng; k++)
      for (int s = 0; s < NSET; s++) free(gs[k].s[s].reads);
    free(gs);
    zeus_devices_close(d);
    return CLI_EXIT_FAIL;
  }
  cli_catch_stop_signals();
  for (size_t k = 0; k < ng; k++) {
    gpu_state *g = &gs[k];
    g->index = idx[k];
    g->have_limit = zeus_gpu_get_power_limit(d, g->index, &g->limit_before_mw) == ZEUS_OK;
    g->have_clocks_before = zeus_gpu_current_clocks(d, g->index, &g->sm_before, &g->mem_before) ==
                            ZEUS_OK;
    if (!cli_stop_signal) apply(d, g);
  }
  /* Hold: for hold_s, or while the command runs. */
  int child_code = -1;
  pid_t pid = -1;
  if (child && !cli_stop_signal) {
    pid = cli_child_start(CMD, child, json_output);
    if (pid < 0) child_code = 127;
  }
  double t0 = zeus_monotonic_s();
  while (!cli_stop_signal) {
    if (pid > 0) {
      if (cli_child_poll(pid, &child_code)) break;
    } else if (pid < 0 && zeus_monotonic_s() - t0 >= hold_s) {
      break;
    }
    if (pid < 0 && child) break; /* it could not start */
    for (size_t k = 0; k < ng; k++) sample(d, &gs[k]);
    cli_sleep_s(sample_ms / 1000.0);
  }
  if (pid > 0 && child_code < 0) child_code = cli_child_stop(pid, SIGTERM, 5);
  for (size_t k = 0; k < ng; k++) {
    for (int s = S_SM; s <= S_MEM; s++) {
      setting *st = &gs[k].s[s];
      if (st->nreads) {
        st->read_min = cli_min(st->reads, st->nreads);
        st->read_max = cli_max(st->reads, st->nreads);
        st->read_back = cli_median(st->reads, st->nreads);
      }
    }
  }
  /* Put everything back, then read that it is back. */
  if (zeus_devices_restore(d) != ZEUS_OK)
    for (size_t k = 0; k < ng; k++)
      snprintf(gs[k].restore_error, sizeof gs[k].restore_error, "%s", zeus_errmsg());
  for (size_t k = 0; k < ng; k++) {
    gpu_state *g = &gs[k];
    g->have_limit_after = zeus_gpu_get_power_limit(d, g->index, &g->limit_after_mw) == ZEUS_OK;
    g->have_clocks_after = zeus_gpu_current_clocks(d, g->index, &g->sm_after, &g->mem_after) ==
                           ZEUS_OK;
  }
  int sig = cli_stop_signal;
  cli_release_stop_signals();
  bool all_ok = true;
  out = child ? stderr : stdout; /* the output rule of opt.h: the child keeps stdout */
  json_t *arr = json_array();
  for (size_t k = 0; k < ng; k++) {
    bool ok;
    json_t *j = gpu_json(&gs[k], &ok);
    all_ok &= ok;
    if (!json_output) text_gpu(j);
    json_array_append_new(arr, j);
  }
  if (child && child_code != 0) all_ok = false;
  int status = all_ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  if (json_output) {
    json_t *doc = json_pack("{s:f,s:o,s:b,s:o,s:b}", "hold_s", zeus_monotonic_s() - t0,
                            "command_exit_code", child ? json_integer(child_code) : json_null(),
                            "interrupted", sig != 0, "gpus", arr, "ok", all_ok);
    if (!cli_write_json(stdout, doc)) status = CLI_EXIT_FAIL;
    json_decref(doc);
  } else {
    json_decref(arr);
    if (child) fprintf(out, "command exited with %d\n", child_code);
    fprintf(out, "%s\n",
            all_ok ? "every setting read back as set and is back as it was" : "FAILED: see above");
  }
  for (size_t k = 0; k < ng; k++)
    for (int s = 0; s < NSET; s++) free(gs[k].s[s].reads);
  free(gs);
  zeus_devices_close(d);
  return sig ? 128 + sig : status;
}
