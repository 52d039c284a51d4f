/* zeus gpus probe: every device call of the library, N times per GPU: supported or not, the
 * value, median and worst latency, and whether the answers agree with each other. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define CMD "gpus probe"
#define MAX_LIST 1024

static cli_index_list gpu_list;
static long ncalls = 100;
static bool json_output;

static const cli_opt opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"calls", 'n', CLI_OPT_LONG, &ncalls, "N", "how many times each function is called", "100", 1,
     100000},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL, "print one JSON document (see below)"},
    {0},
};

static const cli_command probe_cmd = {
    .name = "gpus probe",
    .usage = "zeus gpus probe [--gpus LIST] [--calls N] [--json]",
    .about =
        "Calls every function of the library that reads a GPU (each one or two NVML calls on\n"
        "the nvml backend: see docs/gpu-check.md) N times on each listed GPU,\n"
        "and reports for each: whether the GPU supports it, the value it returned, the median\n"
        "and the worst latency of the N calls, and whether the answers agree (a name, a limit\n"
        "or a clock list must not change between calls; the energy counter must not go back).\n"
        "It also lists what it found: backend, driver and NVML versions, and each GPU's name,\n"
        "UUID, architecture, power limits, persistence mode and clocks. It changes nothing.\n"
        "\n"
        "Exits with 1 when a call fails other than with 'not supported', or when answers\n"
        "disagree.",
    .opts = opts,
    .more =
        "JSON: {\"backend\", \"driver_version\", \"library_version\", \"calls_per_function\",\n"
        "\"system_calls\": [CALL...], \"gpus\": [{\"index\", \"name\", \"uuid\", "
        "\"architecture\",\n"
        "\"architecture_name\", \"power_limit_w\", \"power_limit_min_w\", \"power_limit_max_w\",\n"
        "\"power_limit_default_w\", \"persistence_mode\", \"energy_counter\", \"sm_clock_mhz\",\n"
        "\"memory_clock_mhz\", \"memory_clocks_mhz\", \"graphics_clocks_mhz\", \"power_scope\" (\"gpu\",\n"
        "or \"module\" on a Grace Hopper superchip, whose readings cover CPU + memory + GPU), \"calls\":\n"
        "[CALL...]}], \"ok\"}; CALL is {\"call\", \"function\", \"status\" (ok, not_supported,\n"
        "error, inconsistent), \"supported\", \"error\" (the first failure's message, or null),\n"
        "\"calls\", \"failures\", \"median_latency_s\", \"max_latency_s\", \"value\" (an object "
        "whose\n"
        "keys carry units, from the first successful call; null when none), \"consistent\"}.\n"
        "A value a GPU cannot report is null. Where power_scope is \"module\", the values of\n"
        "total_energy, power_instant and power_average are named module_energy_j and\n"
        "module_power_w instead of energy_j and power_w.\n"
        "\n"
        "Examples:\n"
        "  zeus gpus probe\n"
        "  zeus gpus probe --gpus 0 --calls 1000 --json\n"
        "\n"
        "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*,\n"
        "ZEUS_LOG_LEVEL (see 'zeus --help').\n",
    .args = CLI_ARGS_NONE,
};

/* What one call returned. */
typedef struct pv {
  unsigned u[3];
  uint64_t u64;
  bool b;
  bool module; /* a power or energy reading that covers the superchip module (Grace Hopper) */
  char s[ZEUS_NAME_LEN];
  unsigned list[MAX_LIST];
  size_t nlist;
} pv;

typedef enum { STATIC, MONOTONIC, DYNAMIC } pv_kind;

typedef struct probe_ctx {
  zeus_devices *d;
  unsigned gpu;
  unsigned mem_mhz; /* highest memory clock, 0 when unknown */
  bool module;      /* the GPU's power and energy readings are its module's (zeus_gpu_power_scope) */
} probe_ctx;

typedef struct probe_call {
  const char *name;
  const char *function;
  pv_kind kind;
  int (*call)(probe_ctx *c, pv *v);
  json_t *(*to_json)(const pv *v);
} probe_call;

static int c_name(probe_ctx *c, pv *v) { return zeus_gpu_name(c->d, c->gpu, v->s, sizeof v->s); }
static int c_uuid(probe_ctx *c, pv *v) { return zeus_gpu_uuid(c->d, c->gpu, v->s, sizeof v->s); }
static int c_arch(probe_ctx *c, pv *v) { return zeus_gpu_architecture(c->d, c->gpu, &v->u[0]); }
static int c_counter_supported(probe_ctx *c, pv *v) {
  return zeus_gpu_energy_counter_supported(c->d, c->gpu, &v->b);
}
static int c_constraints(probe_ctx *c, pv *v) {
  return zeus_gpu_power_limit_constraints(c->d, c->gpu, &v->u[0], &v->u[1], &v->u[2]);
}
static int c_limit(probe_ctx *c, pv *v) { return zeus_gpu_get_power_limit(c->d, c->gpu, &v->u[0]); }
static int c_persistence(probe_ctx *c, pv *v) {
  return zeus_gpu_get_persistence_mode(c->d, c->gpu, &v->b);
}
/* The counter and the instant and average power cover the module where the GPU's do (the memory's
 * average power stays the memory's). */
static int c_energy(probe_ctx *c, pv *v) {
  v->module = c->module;
  return zeus_gpu_total_energy(c->d, c->gpu, &v->u64);
}
static int c_instant(probe_ctx *c, pv *v) {
  v->module = c->module;
  return zeus_gpu_power(c->d, c->gpu, ZEUS_POWER_INSTANT, &v->u[0]);
}
static int c_average(probe_ctx *c, pv *v) {
  v->module = c->module;
  return zeus_gpu_power(c->d, c->gpu, ZEUS_POWER_AVERAGE, &v->u[0]);
}
static int c_mem_average(probe_ctx *c, pv *v) {
  return zeus_gpu_power(c->d, c->gpu, ZEUS_POWER_MEMORY_AVERAGE, &v->u[0]);
}
static int c_temperature(probe_ctx *c, pv *v) {
  return zeus_gpu_temperature(c->d, c->gpu, &v->u[0]);
}
static int c_clocks(probe_ctx *c, pv *v) {
  return zeus_gpu_current_clocks(c->d, c->gpu, &v->u[0], &v->u[1]);
}
static int c_mem_clocks(probe_ctx *c, pv *v) {
  v->nlist = MAX_LIST;
  return zeus_gpu_supported_memory_clocks(c->d, c->gpu, v->list, &v->nlist);
}
static int c_gr_clocks(probe_ctx *c, pv *v) {
  if (!c->mem_mhz)
    return zeus_set_errmsg(ZEUS_ENOTSUP, "GPU %u: no memory clock to list SM clocks for", c->gpu);
  v->u[0] = c->mem_mhz;
  v->nlist = MAX_LIST;
  return zeus_gpu_supported_graphics_clocks(c->d, c->gpu, c->mem_mhz, v->list, &v->nlist);
}
static int c_driver(probe_ctx *c, pv *v) {
  return zeus_devices_driver_version(c->d, v->s, sizeof v->s);
}
static int c_library(probe_ctx *c, pv *v) {
  return zeus_devices_library_version(c->d, v->s, sizeof v->s);
}

static json_t *mhz_list(const pv *v) {
  json_t *a = json_array();
  for (size_t k = 0; a && k < v->nlist; k++) json_array_append_new(a, json_real(v->list[k]));
  return a;
}
static json_t *j_name(const pv *v) { return json_pack("{s:s}", "name", v->s); }
static json_t *j_uuid(const pv *v) { return json_pack("{s:s}", "uuid", v->s); }
static json_t *j_version(const pv *v) { return json_pack("{s:s}", "version", v->s); }
static json_t *j_arch(const pv *v) {
  return json_pack("{s:I,s:s}", "architecture", (json_int_t)v->u[0], "architecture_name",
                   zeus_gpu_architecture_name(v->u[0]));
}
static json_t *j_supported(const pv *v) { return json_pack("{s:b}", "supported", v->b); }
static json_t *j_constraints(const pv *v) {
  return json_pack("{s:f,s:f,s:f}", "min_w", v->u[0] / 1000.0, "max_w", v->u[1] / 1000.0,
                   "default_w", v->u[2] / 1000.0);
}
static json_t *j_limit(const pv *v) {
  return json_pack("{s:f}", "power_limit_w", v->u[0] / 1000.0);
}
static json_t *j_enabled(const pv *v) { return json_pack("{s:b}", "enabled", v->b); }
static json_t *j_energy(const pv *v) {
  return json_pack("{s:f}", v->module ? "module_energy_j" : "energy_j", v->u64 / 1000.0);
}
static json_t *j_power(const pv *v) {
  return json_pack("{s:f}", v->module ? "module_power_w" : "power_w", v->u[0] / 1000.0);
}
static json_t *j_temperature(const pv *v) {
  return json_pack("{s:f}", "temperature_c", (double)v->u[0]);
}
static json_t *j_clocks(const pv *v) {
  return json_pack("{s:f,s:f}", "sm_clock_mhz", (double)v->u[0], "memory_clock_mhz",
                   (double)v->u[1]);
}
static json_t *j_mem_clocks(const pv *v) {
  return json_pack("{s:o}", "memory_clocks_mhz", mhz_list(v));
}
static json_t *j_gr_clocks(const pv *v) {
  return json_pack("{s:f,s:o}", "memory_clock_mhz", (double)v->u[0], "graphics_clocks_mhz",
                   mhz_list(v));
}

/* Every reading of the device layer, in the order a user reads them. */
static const probe_call gpu_calls[] = {
    {"name", "zeus_gpu_name", STATIC, c_name, j_name},
    {"uuid", "zeus_gpu_uuid", STATIC, c_uuid, j_uuid},
    {"architecture", "zeus_gpu_architecture", STATIC, c_arch, j_arch},
    {"energy_counter_supported", "zeus_gpu_energy_counter_supported", STATIC, c_counter_supported,
     j_supported},
    {"power_limit_constraints", "zeus_gpu_power_limit_constraints", STATIC, c_constraints,
     j_constraints},
    {"power_limit", "zeus_gpu_get_power_limit", STATIC, c_limit, j_limit},
    {"persistence_mode", "zeus_gpu_get_persistence_mode", STATIC, c_persistence, j_enabled},
    {"total_energy", "zeus_gpu_total_energy", MONOTONIC, c_energy, j_energy},
    {"power_instant", "zeus_gpu_power(ZEUS_POWER_INSTANT)", DYNAMIC, c_instant, j_power},
    {"power_average", "zeus_gpu_power(ZEUS_POWER_AVERAGE)", DYNAMIC, c_average, j_power},
    {"power_memory_average", "zeus_gpu_power(ZEUS_POWER_MEMORY_AVERAGE)", DYNAMIC, c_mem_average,
     j_power},
    {"temperature", "zeus_gpu_temperature", DYNAMIC, c_temperature, j_temperature},
    {"current_clocks", "zeus_gpu_current_clocks", DYNAMIC, c_clocks, j_clocks},
    {"supported_memory_clocks", "zeus_gpu_supported_memory_clocks", STATIC, c_mem_clocks,
     j_mem_clocks},
    {"supported_graphics_clocks", "zeus_gpu_supported_graphics_clocks", STATIC, c_gr_clocks,
     j_gr_clocks},
};
#define NGPU_CALLS (sizeof gpu_calls / sizeof gpu_calls[0])

static const probe_call system_calls[] = {
    {"driver_version", "zeus_devices_driver_version", STATIC, c_driver, j_version},
    {"library_version", "zeus_devices_library_version", STATIC, c_library, j_version},
};
#define NSYS_CALLS (sizeof system_calls / sizeof system_calls[0])

/* One function's outcome over N calls. */
typedef struct call_result {
  const probe_call *pc;
  long ok, notsup, failures;
  char error[512];
  double median_s, max_s;
  bool have_value, consistent;
  char inconsistency[256];
  pv first; /* first successful value */
} call_result;

static bool same_value(const pv *a, const pv *b) {
  return memcmp(a->u, b->u, sizeof a->u) == 0 && a->u64 == b->u64 && a->b == b->b &&
         strcmp(a->s, b->s) == 0 && a->nlist == b->nlist &&
         memcmp(a->list, b->list, a->nlist * sizeof a->list[0]) == 0;
}

static void run_call(probe_ctx *ctx, const probe_call *pc, long n, double *lat, pv *scratch,
                     call_result *r) {
  memset(r, 0, sizeof *r);
  r->pc = pc;
  r->consistent = true;
  uint64_t last_energy = 0;
  for (long k = 0; k < n; k++) {
    memset(scratch, 0, offsetof(pv, list));
    scratch->nlist = 0;
    double t0 = zeus_monotonic_s();
    int rc = pc->call(ctx, scratch);
    lat[k] = zeus_monotonic_s() - t0;
    if (rc == ZEUS_OK) {
      r->ok++;
      if (!r->have_value) {
        r->first = *scratch;
        r->have_value = true;
      } else if (r->consistent && pc->kind == STATIC && !same_value(&r->first, scratch)) {
        r->consistent = false;
        snprintf(r->inconsistency, sizeof r->inconsistency,
                 "call %ld answered differently from the first", k + 1);
      } else if (r->consistent && pc->kind == MONOTONIC && scratch->u64 < last_energy) {
        r->consistent = false;
        snprintf(r->inconsistency, sizeof r->inconsistency,
                 "the counter went back from %llu to %llu mJ at call %ld",
                 (unsigned long long)last_energy, (unsigned long long)scratch->u64, k + 1);
      }
      last_energy = scratch->u64;
    } else {
      if (rc == ZEUS_ENOTSUP)
        r->notsup++;
      else
        r->failures++;
      if (!r->error[0]) snprintf(r->error, sizeof r->error, "%s", zeus_errmsg());
    }
  }
  r->max_s = cli_max(lat, (size_t)n);
  r->median_s = cli_median(lat, (size_t)n);
}

static const char *status_of(const call_result *r) {
  if (r->failures || (r->notsup && r->ok)) return "error";
  if (!r->ok) return "not_supported";
  return r->consistent ? "ok" : "inconsistent";
}

static bool result_bad(const call_result *r) {
  const char *s = status_of(r);
  return strcmp(s, "error") == 0 || strcmp(s, "inconsistent") == 0;
}

static json_t *result_json(const call_result *r, long n) {
  const char *err = r->error[0] ? r->error : r->consistent ? NULL : r->inconsistency;
  return json_pack(
      "{s:s,s:s,s:s,s:b,s:o,s:I,s:I,s:f,s:f,s:o,s:o}", "call", r->pc->name, "function",
      r->pc->function, "status", status_of(r), "supported", r->ok > 0, "error",
      err ? json_string(err) : json_null(), "calls", (json_int_t)n, "failures",
      (json_int_t)(r->failures + r->notsup), "median_latency_s", r->median_s, "max_latency_s",
      r->max_s, "value", r->have_value ? r->pc->to_json(&r->first) : json_null(), "consistent",
      r->have_value && r->pc->kind != DYNAMIC ? json_boolean(r->consistent) : json_null());
}

static const call_result *find(const call_result *rs, const char *name) {
  for (size_t k = 0; k < NGPU_CALLS; k++)
    if (strcmp(rs[k].pc->name, name) == 0 && rs[k].have_value) return &rs[k];
  return NULL;
}

/* The GPU's summary from the first values of its calls. */
static json_t *gpu_summary(unsigned index, const call_result *rs, const char *scope) {
  const call_result *r;
  json_t *g = json_pack("{s:I}", "index", (json_int_t)index);
  r = find(rs, "name");
  json_object_set_new(g, "name", r ? json_string(r->first.s) : json_null());
  r = find(rs, "uuid");
  json_object_set_new(g, "uuid", r ? json_string(r->first.s) : json_null());
  r = find(rs, "architecture");
  json_object_set_new(g, "architecture", r ? json_integer(r->first.u[0]) : json_null());
  json_object_set_new(g, "architecture_name",
                      r ? json_string(zeus_gpu_architecture_name(r->first.u[0])) : json_null());
  r = find(rs, "power_limit");
  json_object_set_new(g, "power_limit_w", r ? json_real(r->first.u[0] / 1000.0) : json_null());
  r = find(rs, "power_limit_constraints");
  json_object_set_new(g, "power_limit_min_w", r ? json_real(r->first.u[0] / 1000.0) : json_null());
  json_object_set_new(g, "power_limit_max_w", r ? json_real(r->first.u[1] / 1000.0) : json_null());
  json_object_set_new(g, "power_limit_default_w",
                      r ? json_real(r->first.u[2] / 1000.0) : json_null());
  r = find(rs, "persistence_mode");
  json_object_set_new(g, "persistence_mode", r ? json_boolean(r->first.b) : json_null());
  r = find(rs, "energy_counter_supported");
  json_object_set_new(g, "energy_counter", r ? json_boolean(r->first.b) : json_null());
  r = find(rs, "current_clocks");
  json_object_set_new(g, "sm_clock_mhz", r ? json_real(r->first.u[0]) : json_null());
  json_object_set_new(g, "memory_clock_mhz", r ? json_real(r->first.u[1]) : json_null());
  r = find(rs, "supported_memory_clocks");
  json_object_set_new(g, "memory_clocks_mhz", r ? mhz_list(&r->first) : json_array());
  r = find(rs, "supported_graphics_clocks");
  json_object_set_new(g, "graphics_clocks_mhz", r ? mhz_list(&r->first) : json_array());
  json_object_set_new(g, "power_scope", scope ? json_string(scope) : json_null());
  return g;
}

/* "12.3 us" */
static const char *dur(double s, char *buf, size_t n) {
  if (!isfinite(s))
    snprintf(buf, n, "n/a");
  else if (s < 1e-3)
    snprintf(buf, n, "%.1f us", s * 1e6);
  else if (s < 1)
    snprintf(buf, n, "%.2f ms", s * 1e3);
  else
    snprintf(buf, n, "%.3f s", s);
  return buf;
}

static void text_call(const call_result *r) {
  char a[32], b[32];
  const char *status = status_of(r);
  char value[64] = "";
  if (r->have_value) {
    json_t *v = r->pc->to_json(&r->first);
    char *s = zeus_json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (s && strlen(s) < sizeof value) {
      snprintf(value, sizeof value, "%s", s);
    } else if (s) {
      memcpy(value, s, sizeof value - 4);
      memcpy(value + sizeof value - 4, "...", 4);
    }
    zeus_free(s);
  }
  printf("  %-27s %-13s %10s %10s  %s\n", r->pc->name, status, dur(r->median_s, a, sizeof a),
         dur(r->max_s, b, sizeof b), value);
  if (strcmp(status, "ok") != 0 && strcmp(status, "not_supported") != 0)
    printf("  %-27s   %s\n", "", r->error[0] ? r->error : r->inconsistency);
}

int cmd_gpus_probe(int argc, char **argv) {
  int rc = cli_parse(&probe_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  unsigned gpus[ZEUS_MAX_GPUS];
  size_t ngpus;
  zeus_devices *d = cli_open_gpu_selection(CMD, &gpu_list, gpus, &ngpus);
  if (!d) return CLI_EXIT_FAIL;
  long n = ncalls;
  double *lat = malloc((size_t)n * sizeof *lat);
  pv *scratch = malloc(sizeof *scratch);
  call_result *sys = calloc(NSYS_CALLS, sizeof *sys);
  call_result *res = calloc(NGPU_CALLS, sizeof *res);
  if (!lat || !scratch || !sys || !res) {
    cli_error(CMD, false, "out of memory");
    free(lat), free(scratch), free(sys), free(res);
    zeus_devices_close(d);
    return CLI_EXIT_FAIL;
  }
  bool bad = false;
  probe_ctx ctx = {.d = d};
  for (size_t k = 0; k < NSYS_CALLS; k++) {
    run_call(&ctx, &system_calls[k], n, lat, scratch, &sys[k]);
    bad |= result_bad(&sys[k]);
  }
  json_t *doc = NULL, *jgpus = NULL;
  if (json_output) {
    json_t *jsys = json_array();
    for (size_t k = 0; k < NSYS_CALLS; k++) json_array_append_new(jsys, result_json(&sys[k], n));
    jgpus = json_array();
    doc = json_pack("{s:s,s:o,s:o,s:I,s:o,s:o}", "backend", zeus_devices_backend(d),
                    "driver_version", sys[0].have_value ? json_string(sys[0].first.s) : json_null(),
                    "library_version",
                    sys[1].have_value ? json_string(sys[1].first.s) : json_null(),
                    "calls_per_function", (json_int_t)n, "system_calls", jsys, "gpus", jgpus);
  } else {
    printf("backend %s: driver %s, NVML %s; %zu GPU%s, each function called %ld time%s\n",
           zeus_devices_backend(d), sys[0].have_value ? sys[0].first.s : "n/a",
           sys[1].have_value ? sys[1].first.s : "n/a", ngpus, ngpus == 1 ? "" : "s", n,
           n == 1 ? "" : "s");
    printf("  %-27s %-13s %10s %10s  %s\n", "call", "status", "median", "worst", "value");
    for (size_t k = 0; k < NSYS_CALLS; k++) text_call(&sys[k]);
  }
  for (size_t gi = 0; gi < ngpus; gi++) {
    ctx.gpu = gpus[gi];
    ctx.mem_mhz = 0;
    /* Resolved before the calls, so that each power and energy value is named for what it
     * covers from the first call on (on NVML this may probe the power fields and log the
     * fallback to the module scope once). */
    zeus_power_scope sc = ZEUS_POWER_SCOPE_GPU;
    bool have_scope = zeus_gpu_power_scope(d, gpus[gi], &sc) == ZEUS_OK;
    ctx.module = have_scope && sc == ZEUS_POWER_SCOPE_MODULE;
    const char *scope = have_scope ? zeus_power_scope_name(sc) : NULL;
    for (size_t k = 0; k < NGPU_CALLS; k++) {
      run_call(&ctx, &gpu_calls[k], n, lat, scratch, &res[k]);
      if (gpu_calls[k].call == c_mem_clocks && res[k].have_value && res[k].first.nlist > 0)
        ctx.mem_mhz = res[k].first.list[0]; /* highest first */
      bad |= result_bad(&res[k]);
    }
    if (json_output) {
      json_t *g = gpu_summary(gpus[gi], res, scope);
      json_t *calls = json_array();
      for (size_t k = 0; k < NGPU_CALLS; k++) json_array_append_new(calls, result_json(&res[k], n));
      json_object_set_new(g, "calls", calls);
      json_array_append_new(jgpus, g);
    } else {
      const call_result *r = find(res, "name"), *u = find(res, "uuid"),
                        *a = find(res, "architecture");
      printf("\nGPU %u: %s (%s), %s\n", gpus[gi], r ? r->first.s : "n/a", u ? u->first.s : "n/a",
             a ? zeus_gpu_architecture_name(a->first.u[0]) : "architecture n/a");
      const call_result *pl = find(res, "power_limit"), *pc = find(res, "power_limit_constraints");
      if (pl && pc)
        printf("  power limit %.1f W (range %.1f-%.1f W, default %.1f W)\n",
               pl->first.u[0] / 1000.0, pc->first.u[0] / 1000.0, pc->first.u[1] / 1000.0,
               pc->first.u[2] / 1000.0);
      const call_result *gr = find(res, "supported_graphics_clocks"),
                        *cc = find(res, "current_clocks");
      if (gr && gr->first.nlist)
        printf("  SM clocks %u-%u MHz (%zu steps) at memory clock %u MHz\n",
               gr->first.list[gr->first.nlist - 1], gr->first.list[0], gr->first.nlist,
               gr->first.u[0]);
      if (cc) printf("  now: SM %u MHz, memory %u MHz\n", cc->first.u[0], cc->first.u[1]);
      if (ctx.module)
        printf("  power scope: module (power and energy are the whole superchip's: CPU + memory + "
               "GPU; docs/grace-hopper.md)\n");
      printf("  %-27s %-13s %10s %10s  %s\n", "call", "status", "median", "worst", "value");
      for (size_t k = 0; k < NGPU_CALLS; k++) text_call(&res[k]);
    }
  }
  int status = bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
  if (json_output) {
    json_object_set_new(doc, "ok", json_boolean(!bad));
    if (!cli_write_json(stdout, doc)) {
      cli_error(CMD, true, "cannot write the JSON report");
      status = CLI_EXIT_FAIL;
    }
    json_decref(doc);
  } else {
    printf("\n%s\n", bad ? "FAILED: some calls failed or disagreed (see above)"
                         : "every call answered (or is not supported) and the answers agree");
  }
  free(lat), free(scratch), free(sys), free(res);
  zeus_devices_close(d);
  return status;
}
