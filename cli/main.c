/* zeus: the command-line tool. Dispatches to one subcommand per file. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"gpus", cmd_gpus, "list GPUs, their power limits, clocks and energy counters"},
    {"monitor", cmd_monitor, "measure the energy of a command, or sample power"},
    {"frontier", cmd_frontier, "time–energy frontier of a pipeline (Perseus optimizer) from a profile"},
    {"pfo-server", cmd_pfo_server, "serve Perseus per-instruction GPU frequency schedules"},
    {"plo", cmd_plo, "power-limit optimizer: replay a measured profile, or a demo on the simulated GPU"},
    {"run", cmd_run, "run a recurring training job under the batch-size optimizer (SQLite state)"},
    {"simulate", cmd_simulate, "replay the NSDI'23 traces through the batch-size and power-limit optimizers"},
#if ZEUS_WITH_DAEMON
    {"daemon", cmd_daemon, "the privileged daemon (zeusd's API) that gives GPU settings back when clients die"},
#endif
};

static void usage(FILE *out) {
  fprintf(out,
          "usage: zeus <command> [options]\n"
          "       zeus --version | --help | help <command>\n\n"
          "GPU energy measurement and optimization for deep-learning training.\n\n"
          "Commands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fprintf(out,
          "\nRun 'zeus <command> --help' for a command's options and examples.\n\n"
          "Environment (every command):\n"
          "  ZEUS_GPU_BACKEND   nvml | sim | none (default: nvml when libnvidia-ml.so.1 loads, else none)\n"
          "  ZEUS_NVML_LIBRARY  path of the NVML library to load (default libnvidia-ml.so.1)\n"
          "  CUDA_VISIBLE_DEVICES  which GPUs are visible, as CUDA reads it\n"
          "  ZEUS_SIM_*         the simulated GPU (see README); the CLI runs it on the wall clock\n"
          "  ZEUS_LOG_LEVEL     error | warn | info | debug | off (default warn)\n"
          "  ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT, ZEUSD_TOKEN  send privileged GPU calls (and RAPL reads this\n"
          "                     process cannot make) to a zeus daemon or zeusd (see 'zeus daemon serve --help')\n");
#if !ZEUS_WITH_DAEMON
  fprintf(out, "\nNot in this build: 'zeus daemon' (configured with -DZEUS_WITH_DAEMON=OFF).\n");
#endif
}

void cli_error(const char *cmd, bool with_zeus_error, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "zeus %s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  if (with_zeus_error && zeus_errmsg()[0]) fprintf(stderr, ": %s", zeus_errmsg());
  fputc('\n', stderr);
}

bool cli_wants_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0) return false;
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) return true;
  }
  return false;
}

bool cli_parse_long(const char *cmd, const char *opt, const char *text, long min, long max, long *out) {
  char *end;
  if (!text) { cli_error(cmd, false, "%s needs a value", opt); return false; }
  long v = strtol(text, &end, 10);
  if (end == text || *end) {
    cli_error(cmd, false, "%s: expected an integer, got '%s'", opt, text);
    return false;
  }
  if (v < min || v > max) {
    cli_error(cmd, false, "%s: %ld is outside [%ld, %ld]", opt, v, min, max);
    return false;
  }
  *out = v;
  return true;
}

bool cli_parse_double(const char *cmd, const char *opt, const char *text, double min, double max,
                      double *out) {
  char *end;
  if (!text) { cli_error(cmd, false, "%s needs a value", opt); return false; }
  double v = strtod(text, &end);
  if (end == text || *end || v != v) {
    cli_error(cmd, false, "%s: expected a number, got '%s'", opt, text);
    return false;
  }
  if (v < min || v > max) {
    cli_error(cmd, false, "%s: %g is outside [%g, %g]", opt, v, min, max);
    return false;
  }
  *out = v;
  return true;
}

bool cli_parse_index_list(const char *cmd, const char *opt, const char *text, unsigned *out,
                          size_t cap, size_t *n) {
  *n = 0;
  if (!text || !*text) { cli_error(cmd, false, "%s needs a list such as 0,1", opt); return false; }
  const char *p = text;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > 1000000 || (*end && *end != ',')) {
      cli_error(cmd, false, "%s: expected comma-separated GPU indices such as 0,1, got '%s'", opt, text);
      return false;
    }
    if (*n == cap) { cli_error(cmd, false, "%s: more than %zu entries", opt, cap); return false; }
    for (size_t i = 0; i < *n; i++) {
      if (out[i] == (unsigned)v) {
        cli_error(cmd, false, "%s: index %ld is listed twice", opt, v);
        return false;
      }
    }
    out[(*n)++] = (unsigned)v;
    p = *end ? end + 1 : end;
  }
  return true;
}

bool cli_opt_index_list(const char *cmd, const char *opt, const char *value, void *dest) {
  cli_index_list *l = dest;
  if (!cli_parse_index_list(cmd, opt, value, l->idx, sizeof l->idx / sizeof l->idx[0], &l->n)) return false;
  l->given = true;
  return true;
}

int main(int argc, char **argv) {
  if (zeus_log_init_stderr(NULL) != ZEUS_OK) {
    fprintf(stderr, "zeus: %s\n", zeus_errmsg());
    return CLI_EXIT_USAGE;
  }
  /* The simulated GPU follows the wall clock in the CLI unless told otherwise. */
  setenv("ZEUS_SIM_CLOCK", "wall", 0);
  if (argc < 2) { usage(stderr); return CLI_EXIT_USAGE; }
  const char *name = argv[1];
  if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
    printf("zeus %s\n", zeus_version());
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) { usage(stdout); return CLI_EXIT_OK; }
  bool help = false;
  if (strcmp(name, "help") == 0) {
    if (argc < 3) { usage(stdout); return CLI_EXIT_OK; }
    name = argv[2];
    help = true;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
    if (strcmp(commands[i].name, name) == 0) {
      if (help) {
        char *hargv[] = {(char *)name, (char *)"--help", NULL};
        return commands[i].fn(2, hargv);
      }
      return commands[i].fn(argc - 1, argv + 1);
    }
  }
  fprintf(stderr, "zeus: unknown command '%s' (run 'zeus --help' for the list)\n", name);
  return CLI_EXIT_USAGE;
}
