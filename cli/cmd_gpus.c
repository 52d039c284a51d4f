/* zeus gpus: list GPUs; zeus gpus reset: put power limits and clocks back to their defaults. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static bool json_output;
static cli_index_list reset_gpus_list;
static bool reset_force;

static const cli_opt list_opts[] = {
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL,
     "print a JSON list of objects with keys index, name, uuid,\n"
     "power_limit_mw {min,max,default,current}, graphics_clocks_mhz, total_energy_supported"},
    {0},
};

static const cli_opt reset_opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &reset_gpus_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"force", 0, CLI_OPT_FLAG, &reset_force, NULL,
     "through a zeus daemon: also reset settings another running client\n"
     "holds (without it the daemon refuses, naming the holder)"},
    {0},
};

#define ENVIRONMENT                                                                    \
  "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*,\n" \
  "ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT, ZEUSD_TOKEN, ZEUS_LOG_LEVEL (see 'zeus --help').\n"

static const cli_command list_cmd = {
    .name = "gpus",
    .usage = "zeus gpus [--json]\nzeus gpus reset [--gpus LIST]",
    .about = "List the visible GPUs: index, name, UUID, power-limit range and current value, supported\n"
             "SM clocks (at the highest memory clock) and whether the GPU has a total-energy counter.\n"
             "A value the GPU cannot report shows as n/a (null in JSON).\n\n"
             "'zeus gpus reset' sets every listed GPU's power limit to its default and unlocks its SM and\n"
             "memory clocks: the manual way back after a crash left a GPU changed (see 'zeus gpus reset\n"
             "--help').",
    .opts = list_opts,
    .more = "Examples:\n"
            "  zeus gpus\n"
            "  ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 zeus gpus --json\n\n" ENVIRONMENT,
    .args = CLI_ARGS_NONE,
};

static const cli_command reset_cmd = {
    .name = "gpus reset",
    .usage = "zeus gpus reset [--gpus LIST]",
    .about = "Sets every listed GPU's power limit to its default and unlocks its SM and memory clocks:\n"
             "the manual way back after a crash left a GPU changed. Needs root or CAP_SYS_ADMIN on\n"
             "real GPUs.",
    .opts = reset_opts,
    .more = "Example:\n"
            "  sudo zeus gpus reset --gpus 0\n\n" ENVIRONMENT,
    .args = CLI_ARGS_NONE,
};

typedef struct gpu_info {
  char name[ZEUS_NAME_LEN], uuid[ZEUS_NAME_LEN];
  bool have_limits, have_current, have_counter, counter;
  unsigned min_mw, max_mw, def_mw, cur_mw;
  unsigned clocks[1024];
  size_t nclocks;
} gpu_info;

static void collect(zeus_devices *d, unsigned i, gpu_info *g) {
  memset(g, 0, sizeof *g);
  if (zeus_gpu_name(d, i, g->name, sizeof g->name)) snprintf(g->name, sizeof g->name, "n/a");
  if (zeus_gpu_uuid(d, i, g->uuid, sizeof g->uuid)) snprintf(g->uuid, sizeof g->uuid, "n/a");
  g->have_limits = zeus_gpu_power_limit_constraints(d, i, &g->min_mw, &g->max_mw, &g->def_mw) == ZEUS_OK;
  g->have_current = zeus_gpu_get_power_limit(d, i, &g->cur_mw) == ZEUS_OK;
  g->have_counter = zeus_gpu_energy_counter_supported(d, i, &g->counter) == ZEUS_OK;
  unsigned mem[64];
  size_t nmem = 64;
  if (zeus_gpu_supported_memory_clocks(d, i, mem, &nmem) == ZEUS_OK && nmem > 0) {
    g->nclocks = sizeof g->clocks / sizeof g->clocks[0];
    if (zeus_gpu_supported_graphics_clocks(d, i, mem[0], g->clocks, &g->nclocks) != ZEUS_OK) g->nclocks = 0;
  }
}

static json_t *mw_or_null(bool ok, unsigned v) { return ok ? json_integer(v) : json_null(); }

static int list_gpus(zeus_devices *d, bool as_json) {
  unsigned n = zeus_gpu_count(d);
  gpu_info *g = malloc(sizeof *g);
  if (!g) return CLI_EXIT_FAIL;
  if (as_json) {
    json_t *arr = json_array();
    for (unsigned i = 0; i < n; i++) {
      collect(d, i, g);
      json_t *clocks = json_array();
      for (size_t k = 0; k < g->nclocks; k++) json_array_append_new(clocks, json_integer(g->clocks[k]));
      json_t *pl = json_pack("{s:o,s:o,s:o,s:o}", "min", mw_or_null(g->have_limits, g->min_mw), "max",
                             mw_or_null(g->have_limits, g->max_mw), "default", mw_or_null(g->have_limits, g->def_mw),
                             "current", mw_or_null(g->have_current, g->cur_mw));
      json_array_append_new(arr, json_pack("{s:i,s:s,s:s,s:o,s:o,s:o}", "index", (int)i, "name", g->name, "uuid",
                                           g->uuid, "power_limit_mw", pl, "graphics_clocks_mhz", clocks,
                                           "total_energy_supported",
                                           g->have_counter ? json_boolean(g->counter) : json_null()));
    }
    char *s = zeus_json_dumps(arr, JSON_INDENT(2));
    if (s) printf("%s\n", s);
    zeus_free(s);
    json_decref(arr);
  } else {
    printf("backend: %s, %u visible GPU%s\n", zeus_devices_backend(d), n, n == 1 ? "" : "s");
    for (unsigned i = 0; i < n; i++) {
      collect(d, i, g);
      printf("\nGPU %u: %s\n  uuid:           %s\n", i, g->name, g->uuid);
      if (g->have_limits)
        printf("  power limit:    %.1f W (range %.1f-%.1f W, default %.1f W)\n",
               g->have_current ? g->cur_mw / 1000.0 : 0.0, g->min_mw / 1000.0, g->max_mw / 1000.0, g->def_mw / 1000.0);
      else
        printf("  power limit:    n/a\n");
      if (g->nclocks)
        printf("  SM clocks:      %u-%u MHz (%zu steps)\n", g->clocks[g->nclocks - 1], g->clocks[0], g->nclocks);
      else
        printf("  SM clocks:      n/a\n");
      printf("  energy counter: %s\n", !g->have_counter ? "n/a" : g->counter ? "yes" : "no (power is polled)");
    }
  }
  free(g);
  return CLI_EXIT_OK;
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
    if (zeus_gpu_power_limit_constraints(d, g, &lo, &hi, &def) || zeus_gpu_set_power_limit(d, g, def)) {
      cli_error("gpus reset", true, "GPU %u: power limit not reset", g);
      status = CLI_EXIT_FAIL;
    } else {
      printf("GPU %u: power limit reset to %.1f W\n", g, def / 1000.0);
    }
    int rc = zeus_gpu_reset_locked_clocks(d, g);
    if (rc && rc != ZEUS_ENOTSUP) {
      cli_error("gpus reset", true, "GPU %u: SM clock not unlocked", g);
      status = CLI_EXIT_FAIL;
    }
    rc = zeus_gpu_reset_memory_locked_clocks(d, g);
    if (rc && rc != ZEUS_ENOTSUP) {
      cli_error("gpus reset", true, "GPU %u: memory clock not unlocked", g);
      status = CLI_EXIT_FAIL;
    }
  }
  return status;
}

int cmd_gpus(int argc, char **argv) {
  bool reset = argc > 1 && strcmp(argv[1], "reset") == 0;
  int rc = reset ? cli_parse(&reset_cmd, argc - 1, argv + 1, NULL, NULL) : cli_parse(&list_cmd, argc, argv, NULL, NULL);
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
