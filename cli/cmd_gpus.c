/* zeus gpus: list GPUs and CPU packages (RAPL); zeus gpus reset: put power limits and clocks back
 * to their defaults. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static bool json_output;
static cli_index_list reset_gpus_list;
static bool reset_force;
static const char *const persistence_modes[] = {"off", "on", "keep", NULL};
enum { PERSISTENCE_OFF, PERSISTENCE_ON, PERSISTENCE_KEEP };
static int persistence = PERSISTENCE_OFF;

static const cli_opt list_opts[] = {
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL, "print one JSON document (see below)"},
    {0},
};

static const cli_opt reset_opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &reset_gpus_list, "LIST", "comma-separated visible GPU indices",
     "all", .parse = cli_opt_index_list},
    {"force", 0, CLI_OPT_FLAG, &reset_force, NULL,
     "through a zeus daemon: also reset settings another running client\n"
     "holds (without it the daemon refuses, naming the holder)"},
    {"persistence", 0, CLI_OPT_CHOICE, &persistence, NULL,
     "persistence mode afterwards: off (the driver's default, what the power-limit\n"
     "optimizer found before it turned it on), on, or keep (leave it as it is)",
     "off", .choices = persistence_modes},
    {0},
};

#define ENVIRONMENT                                                                          \
  "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, ZEUS_AMDSMI_LIBRARY,\n"                    \
  "CUDA_VISIBLE_DEVICES, ZEUS_SIM_*, ZEUS_RAPL_ROOT (where the RAPL zones are, default\n"       \
  "/sys/class/powercap), ZEUS_JETSON_ROOT (the folder standing for /sys where a Jetson's\n"     \
  "rails are: docs/jetson.md), ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT, ZEUSD_TOKEN (a zeus\n"         \
  "daemon), ZEUS_LOG_LEVEL (see 'zeus --help').\n"

static const cli_command list_cmd = {
    .name = "gpus",
    .usage = "zeus gpus [--json]\n"
             "zeus gpus probe|check|set|clock-latency|report|reset [OPTIONS]   (each has --help)",
    .about =
        "List what zeus can measure: the visible GPUs (index, name, UUID, power-limit range and\n"
        "current value, supported SM clocks at the highest memory clock, whether the GPU has a\n"
        "total-energy counter) and the CPU packages and DRAM zones readable through RAPL, with\n"
        "the files they are read from, and on an NVIDIA Jetson its power rails and their power.\n"
        "A value a GPU cannot report shows as n/a (null in JSON).\n"
        "\n"
        "GPUs come from the first backend that works: NVIDIA's NVML, else AMD's amdsmi\n"
        "(libamd_smi.so, docs/amd.md), or the one ZEUS_GPU_BACKEND names (nvml, amdsmi, sim,\n"
        "none, zeusd). When no GPU is found because neither library loaded, it says why and\n"
        "exits with 1; set ZEUS_GPU_BACKEND=sim to try zeus on simulated GPUs.\n"
        "\n"
        "Subcommands (see 'zeus gpus <subcommand> --help'):\n"
        "  probe          call every reading N times: supported, value, median and worst latency\n"
        "  check          check the readings against each other: energy counter against\n"
        "                 integrated power, power against the limit, the counter's update period\n"
        "  set            set a power limit, locked clocks or persistence mode, read them back,\n"
        "                 hold them (for a time or while a command runs) and put them back\n"
        "  clock-latency  how long a locked SM clock takes to show up (run it under load)\n"
        "  report         the Markdown and JSON report of scripts/gpu-check.sh (make gpu-check)\n"
        "  reset          every listed GPU's power limit to its default, its SM and memory\n"
        "                 clocks unlocked and persistence mode off: the manual way back after\n"
        "                 a crash left a GPU changed",
    .opts = list_opts,
    .more =
        "JSON: {\"backend\", \"gpu_error\" (why no GPU, or null), \"gpus\": [{\"index\",\n"
        "\"name\", \"uuid\", \"power_limit_w\", \"power_limit_min_w\", \"power_limit_max_w\",\n"
        "\"power_limit_default_w\", \"graphics_clocks_mhz\": [...], \"total_energy_supported\",\n"
        "\"power_scope\": \"gpu\" or \"module\" (a Grace Hopper superchip: power and energy are the\n"
        "module's, CPU + memory + GPU)}],\n"
        "\"cpu_error\" (why no CPU package, or null), \"cpus\": [{\"index\", \"zone\", \"name\",\n"
        "\"energy_path\", \"dram\", \"dram_energy_path\"}],\n"
        "\"soc\": null, or on an NVIDIA Jetson {\"kind\": \"jetson\", \"error\", \"rails\": [{\"rail\"\n"
        "(cpu, gpu, total), \"label\", \"direct\", \"power_path\", \"voltage_path\",\n"
        "\"current_path\", \"power_w\"}]} (docs/jetson.md)}.\n"
        "\n"
        "Examples:\n"
        "  zeus gpus\n"
        "  ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 zeus gpus --json\n\n" ENVIRONMENT,
    .args = CLI_ARGS_NONE,
};

static const cli_command reset_cmd = {
    .name = "gpus reset",
    .usage = "zeus gpus reset [--gpus LIST] [--persistence off|on|keep] [--force]",
    .about =
        "Sets every listed GPU's power limit to its default, unlocks its SM and memory\n"
        "clocks and turns persistence mode off (--persistence): the manual way back after a\n"
        "crash left a GPU changed. Needs root or CAP_SYS_ADMIN on real GPUs.",
    .opts = reset_opts,
    .more =
        "Example:\n"
        "  sudo zeus gpus reset --gpus 0\n"
        "  sudo zeus gpus reset --persistence on   # where nvidia-persistenced keeps it "
        "on\n\n" ENVIRONMENT,
    .args = CLI_ARGS_NONE,
};

typedef struct gpu_info {
  char name[ZEUS_NAME_LEN], uuid[ZEUS_NAME_LEN];
  bool have_limits, have_current, have_counter, counter;
  zeus_power_scope scope; /* what power and energy readings cover (module on Grace Hopper) */
  unsigned min_mw, max_mw, def_mw, cur_mw;
  unsigned clocks[1024];
  size_t nclocks;
} gpu_info;

static void collect(zeus_devices *d, unsigned i, gpu_info *g) {
  memset(g, 0, sizeof *g);
  if (zeus_gpu_name(d, i, g->name, sizeof g->name)) snprintf(g->name, sizeof g->name, "n/a");
  if (zeus_gpu_uuid(d, i, g->uuid, sizeof g->uuid)) snprintf(g->uuid, sizeof g->uuid, "n/a");
  g->have_limits =
      zeus_gpu_power_limit_constraints(d, i, &g->min_mw, &g->max_mw, &g->def_mw) == ZEUS_OK;
  g->have_current = zeus_gpu_get_power_limit(d, i, &g->cur_mw) == ZEUS_OK;
  g->have_counter = zeus_gpu_energy_counter_supported(d, i, &g->counter) == ZEUS_OK;
  if (zeus_gpu_power_scope(d, i, &g->scope)) g->scope = ZEUS_POWER_SCOPE_GPU;
  unsigned mem[64];
  size_t nmem = 64;
  if (zeus_gpu_supported_memory_clocks(d, i, mem, &nmem) == ZEUS_OK && nmem > 0) {
    g->nclocks = sizeof g->clocks / sizeof g->clocks[0];
    if (zeus_gpu_supported_graphics_clocks(d, i, mem[0], g->clocks, &g->nclocks) != ZEUS_OK)
      g->nclocks = 0;
  }
}

/* mW as W, or null. */
static json_t *watts(bool ok, unsigned mw) { return ok ? json_real(mw / 1000.0) : json_null(); }

static json_t *gpu_json(unsigned i, const gpu_info *g) {
  json_t *clocks = json_array();
  for (size_t k = 0; clocks && k < g->nclocks; k++)
    json_array_append_new(clocks, json_real(g->clocks[k]));
  return json_pack(
      "{s:i,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:s}", "index", (int)i, "name", g->name, "uuid", g->uuid,
      "power_limit_w", watts(g->have_current, g->cur_mw), "power_limit_min_w",
      watts(g->have_limits, g->min_mw), "power_limit_max_w", watts(g->have_limits, g->max_mw),
      "power_limit_default_w", watts(g->have_limits, g->def_mw), "graphics_clocks_mhz", clocks,
      "total_energy_supported", g->have_counter ? json_boolean(g->counter) : json_null(), "power_scope",
      zeus_power_scope_name(g->scope));
}

static void gpu_text(unsigned i, const gpu_info *g) {
  printf("\nGPU %u: %s\n  uuid:           %s\n", i, g->name, g->uuid);
  if (g->have_limits)
    printf("  power limit:    %.1f W (range %.1f-%.1f W, default %.1f W)\n",
           g->have_current ? g->cur_mw / 1000.0 : 0.0, g->min_mw / 1000.0, g->max_mw / 1000.0,
           g->def_mw / 1000.0);
  else printf("  power limit:    n/a\n");
  if (g->nclocks)
    printf("  SM clocks:      %u-%u MHz (%zu steps)\n", g->clocks[g->nclocks - 1], g->clocks[0],
           g->nclocks);
  else printf("  SM clocks:      n/a\n");
  printf("  energy counter: %s\n", !g->have_counter ? "n/a"
                                   : g->counter     ? "yes"
                                                    : "no (power is polled)");
  if (g->scope == ZEUS_POWER_SCOPE_MODULE)
    printf("  power scope:    module (NVML refuses GPU-scope power here, as on Grace Hopper: power and\n"
           "                  energy are the whole superchip module's, CPU + memory + GPU)\n");
  else printf("  power scope:    gpu\n");
}

/* The CPU packages as the original's environment check shows them: each package's counter and
 * whether its DRAM can be measured, with the files. *why is set when there is none. */
static json_t *cpus_json(bool text, char *why, size_t whylen) {
  json_t *arr = json_array();
  unsigned n = zeus_cpu_count();
  why[0] = '\0';
  if (text) printf("\nCPU packages (RAPL):\n");
  for (unsigned c = 0; c < n; c++) {
    zeus_cpu_zone z;
    if (zeus_cpu_zone_info(c, &z) != ZEUS_OK) break; /* the zones changed meanwhile */
    if (text) {
      printf("  CPU %u: %s (%s)\n", c, z.name[0] ? z.name : "package", z.energy_path);
      if (z.has_dram) printf("    DRAM: measured (%s)\n", z.dram_path);
      else printf("    DRAM: not measured (no dram zone)\n");
    }
    json_array_append_new(
        arr, json_pack("{s:i,s:i,s:s,s:s,s:b,s:o}", "index", (int)c, "zone", (int)z.zone, "name",
                       z.name, "energy_path", z.energy_path, "dram", z.has_dram, "dram_energy_path",
                       z.has_dram ? json_string(z.dram_path) : json_null()));
  }
  if (n == 0) {
    zeus_cpu_zone z;
    if (zeus_cpu_zone_info(0, &z) != ZEUS_OK) snprintf(why, whylen, "%s", zeus_errmsg());
    if (text) printf("  none: %s\n", why);
  }
  return arr;
}

/* A Jetson's power rails (zeus/soc.h): JSON null off a Jetson; else {"kind", "error", "rails":
 * [{"rail", "label", "direct", "power_path", "voltage_path", "current_path", "power_w"}]}.
 * *have says whether a rail can be read. */
static json_t *soc_json(bool text, bool *have) {
  *have = false;
  if (!zeus_soc_jetson_available()) return json_null();
  zeus_soc *s = NULL;
  json_t *rails = json_array();
  const char *err = NULL;
  if (text) printf("\nNVIDIA Jetson power rails (under %s):\n", zeus_soc_jetson_root());
  if (zeus_soc_open(&s) != ZEUS_OK) {
    err = zeus_errmsg();
    if (text) printf("  none: %s\n", err);
  }
  for (int k = 0; s && k < ZEUS_SOC_NUM_RAILS; k++) {
    zeus_soc_rail_desc rd;
    double mw = 0;
    if (zeus_soc_rail_info(s, (zeus_soc_rail)k, &rd) != ZEUS_OK || !rd.present) continue;
    bool ok = zeus_soc_power(s, (zeus_soc_rail)k, &mw) == ZEUS_OK;
    *have = true;
    const char *name = zeus_soc_rail_name((zeus_soc_rail)k);
    if (text) {
      printf("  %-5s %s: ", name, rd.label);
      if (ok) printf("%.3f W", mw / 1000.0);
      else printf("n/a (%s)", zeus_errmsg());
      if (rd.direct) printf(" (%s)\n", rd.power_path);
      else printf(" (%s x %s)\n", rd.voltage_path, rd.current_path);
    }
    json_array_append_new(rails, json_pack("{s:s,s:s,s:b,s:o,s:o,s:o,s:o}", "rail", name, "label", rd.label, "direct",
                                           rd.direct, "power_path", rd.direct ? json_string(rd.power_path) : json_null(),
                                           "voltage_path", rd.direct ? json_null() : json_string(rd.voltage_path),
                                           "current_path", rd.direct ? json_null() : json_string(rd.current_path),
                                           "power_w", ok ? json_real(mw / 1000.0) : json_null()));
  }
  json_t *o = json_pack("{s:s,s:o,s:o}", "kind", "jetson", "error", err ? json_string(err) : json_null(), "rails", rails);
  zeus_soc_close(s);
  return o;
}

static int list_gpus(zeus_devices *d, bool as_json) {
  unsigned n = zeus_gpu_count(d);
  const char *nvml_error = zeus_devices_nvml_error(d);
  gpu_info *g = malloc(sizeof *g);
  if (!g) return CLI_EXIT_FAIL;
  char why_cpu[1024];
  int status = CLI_EXIT_OK;
  bool have_soc = false;
  if (as_json) {
    json_t *gpus = json_array();
    for (unsigned i = 0; i < n; i++) {
      collect(d, i, g);
      json_array_append_new(gpus, gpu_json(i, g));
    }
    json_t *cpus = cpus_json(false, why_cpu, sizeof why_cpu);
    json_t *doc =
        json_pack("{s:s,s:o,s:o,s:o,s:o}", "backend", zeus_devices_backend(d), "gpu_error",
                  nvml_error && n == 0 ? json_string(nvml_error) : json_null(), "gpus", gpus,
                  "cpu_error", why_cpu[0] ? json_string(why_cpu) : json_null(), "cpus", cpus);
    if (doc) json_object_set_new(doc, "soc", soc_json(false, &have_soc));
    zeus_json_round_by_unit(doc); /* each number at its resolution (docs/output.md) */
    char *s = zeus_json_dumps(doc, JSON_INDENT(2));
    if (s) printf("%s\n", s);
    else status = CLI_EXIT_FAIL;
    zeus_free(s);
    json_decref(doc);
  } else {
    printf("backend: %s, %u visible GPU%s\n", zeus_devices_backend(d), n, n == 1 ? "" : "s");
    if (n == 0 && nvml_error)
      printf("  no NVIDIA GPU: %s\n  (to try zeus without a GPU: ZEUS_GPU_BACKEND=sim zeus gpus)\n",
             nvml_error);
    for (unsigned i = 0; i < n; i++) {
      collect(d, i, g);
      gpu_text(i, g);
    }
    json_decref(cpus_json(true, why_cpu, sizeof why_cpu));
    json_decref(soc_json(true, &have_soc));
  }
  if (n == 0 && nvml_error && !have_soc) { /* a Jetson's rails are something to measure */
    cli_error("gpus", false, "no GPU found: %s (ZEUS_GPU_BACKEND=sim selects simulated GPUs)",
              nvml_error);
    status = CLI_EXIT_FAIL;
  }
  free(g);
  return status;
}

static int reset_gpus(zeus_devices *d) {
  unsigned idx[ZEUS_MAX_GPUS];
  size_t n = 0;
  if (reset_gpus_list.given) {
    n = reset_gpus_list.n;
    memcpy(idx, reset_gpus_list.idx, n * sizeof idx[0]);
  } else {
    for (unsigned i = 0; i < zeus_gpu_count(d) && n < ZEUS_MAX_GPUS; i++) idx[n++] = i;
  }
  int status = CLI_EXIT_OK;
  for (size_t k = 0; k < n; k++) {
    unsigned g = idx[k], lo, hi, def;
    if (zeus_gpu_power_limit_constraints(d, g, &lo, &hi, &def) ||
        zeus_gpu_set_power_limit(d, g, def)) {
      cli_error("gpus reset", true, "GPU %u: power limit not reset", g);
      status = CLI_EXIT_FAIL;
    } else {
      printf("GPU %u: power limit reset to %.1f W\n", g, def / 1000.0);
    }
    /* Both locks in one reset: one performance-level reset on AMD, one request to a daemon. */
    int rc = zeus_gpu_reset_all_clocks(d, g);
    if (rc && rc != ZEUS_ENOTSUP) {
      cli_error("gpus reset", true, "GPU %u: locked clocks not reset", g);
      status = CLI_EXIT_FAIL;
    }
    if (persistence != PERSISTENCE_KEEP) {
      bool on = persistence == PERSISTENCE_ON;
      rc = zeus_gpu_set_persistence_mode(d, g, on);
      if (rc && rc != ZEUS_ENOTSUP) {
        cli_error("gpus reset", true, "GPU %u: persistence mode not turned %s", g,
                  on ? "on" : "off");
        status = CLI_EXIT_FAIL;
      } else if (!rc) {
        printf("GPU %u: persistence mode %s\n", g, on ? "on" : "off");
      }
    }
  }
  return status;
}

int cmd_gpus(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "probe") == 0) return cmd_gpus_probe(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "check") == 0) return cmd_gpus_check(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "set") == 0) return cmd_gpus_set(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "clock-latency") == 0) return cmd_gpus_clock_latency(argc - 1, argv + 1);
  if (argc > 1 && strcmp(argv[1], "report") == 0) return cmd_gpus_report(argc - 1, argv + 1);
  if (argc > 1 && argv[1][0] != '-' && strcmp(argv[1], "reset") != 0) {
    static const char *const subs[] = {"probe", "check", "set", "clock-latency", "report", "reset", NULL};
    cli_pick("gpus", "subcommand", argv[1], subs);
    return CLI_EXIT_USAGE;
  }
  bool reset = argc > 1 && strcmp(argv[1], "reset") == 0;
  int rc = reset ? cli_parse(&reset_cmd, argc - 1, argv + 1, NULL, NULL)
                 : cli_parse(&list_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  /* Settings changed by 'reset' are the point: keep them on close. */
  zeus_devices_opts o = {.keep_settings_on_close = reset, .daemon_override = reset && reset_force};
  zeus_devices *d;
  if (zeus_devices_open(&d, &o) != ZEUS_OK) {
    cli_error(reset ? "gpus reset" : "gpus", true, "cannot open the GPUs");
    return CLI_EXIT_FAIL;
  }
  rc = reset ? reset_gpus(d) : list_gpus(d, json_output);
  zeus_devices_close(d);
  return rc;
}
