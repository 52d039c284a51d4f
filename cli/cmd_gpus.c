/* zeus gpus: list GPUs; zeus gpus reset: put power limits and clocks back to their defaults. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void help(FILE *out) {
  fprintf(out,
          "usage: zeus gpus [--json]\n"
          "       zeus gpus reset [--gpus 0,1]\n\n"
          "List the visible GPUs: index, name, UUID, power-limit range and current value, supported\n"
          "SM clocks (at the highest memory clock) and whether the GPU has a total-energy counter.\n"
          "A value the GPU cannot report shows as n/a (null in JSON).\n\n"
          "'reset' sets every listed GPU's power limit to its default and unlocks its SM and memory\n"
          "clocks: the manual way back after a crash left a GPU changed. Needs root or CAP_SYS_ADMIN\n"
          "on real GPUs.\n\n"
          "Options:\n"
          "  --json        print a JSON list of objects with keys index, name, uuid,\n"
          "                power_limit_mw {min,max,default,current}, graphics_clocks_mhz,\n"
          "                total_energy_supported\n"
          "  --gpus LIST   (reset) comma-separated visible GPU indices; default: all\n"
          "  -h, --help    this help\n\n"
          "Examples:\n"
          "  zeus gpus\n"
          "  ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 zeus gpus --json\n"
          "  sudo zeus gpus reset --gpus 0\n\n"
          "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_*,\n"
          "ZEUS_LOG_LEVEL (see 'zeus --help').\n");
}

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
    char *s = json_dumps(arr, JSON_INDENT(2));
    printf("%s\n", s);
    free(s);
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

static int reset_gpus(zeus_devices *d, int argc, char **argv) {
  unsigned idx[ZEUS_MAX_GPUS];
  size_t n = 0;
  bool listed = false;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--gpus") == 0 && i + 1 < argc) {
      if (!cli_parse_index_list("gpus reset", "--gpus", argv[++i], idx, ZEUS_MAX_GPUS, &n)) return CLI_EXIT_USAGE;
      listed = true;
    } else {
      cli_error("gpus reset", false, "unknown option '%s' (see 'zeus gpus --help')", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  if (!listed)
    for (unsigned i = 0; i < zeus_gpu_count(d); i++) idx[n++] = i;
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
  if (cli_wants_help(argc, argv)) {
    help(stdout);
    return CLI_EXIT_OK;
  }
  bool reset = argc > 1 && strcmp(argv[1], "reset") == 0;
  bool as_json = false;
  if (!reset) {
    for (int i = 1; i < argc; i++) {
      if (strcmp(argv[i], "--json") == 0) {
        as_json = true;
      } else {
        cli_error("gpus", false, "unknown option '%s' (see 'zeus gpus --help')", argv[i]);
        return CLI_EXIT_USAGE;
      }
    }
  }
  /* Settings changed by 'reset' are the point: keep them on close. */
  zeus_devices_opts o = {.keep_settings_on_close = reset};
  zeus_devices *d;
  if (zeus_devices_open(&d, &o) != ZEUS_OK) {
    cli_error("gpus", true, "cannot open the GPUs");
    return CLI_EXIT_FAIL;
  }
  int rc = reset ? reset_gpus(d, argc - 1, argv + 1) : list_gpus(d, as_json);
  zeus_devices_close(d);
  return rc;
}
