/* zeus: the command-line tool. Dispatches to one subcommand per file. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv); /* NULL: its component was left out of this build */
  const char *option;               /* the component's CMake option, for commands of one */
  const char *deps;                 /* the libraries that component needs */
  const char *summary;
} command;

/* A command of an optional component (cmake/components.cmake, COMMANDS): the build defines
 * ZEUS_CLI_HAVE_<fn> (0 or 1), ZEUS_CLI_OPTION_<fn> and ZEUS_CLI_DEPS_<fn>. */
#define CLI_IF_0(fn) NULL
#define CLI_IF_1(fn) fn
#define CLI_IF(have, fn) CLI_IF_EXPAND(have, fn)
#define CLI_IF_EXPAND(have, fn) CLI_IF_##have(fn)
#define CLI_COMPONENT(fn) \
  CLI_IF(ZEUS_CLI_HAVE_##fn, fn), ZEUS_CLI_OPTION_##fn, ZEUS_CLI_DEPS_##fn

static const command commands[] = {
    {"gpus", cmd_gpus, NULL, NULL, "list GPUs, their power limits, clocks and energy counters"},
    {"monitor", cmd_monitor, NULL, NULL, "measure the energy of a command, or sample power"},
    {"exporter", CLI_COMPONENT(cmd_exporter),
     "serve GPU and CPU energy, power, limits and clocks to Prometheus (/metrics)"},
    {"frontier", cmd_frontier, NULL, NULL,
     "time–energy frontier of a pipeline (Perseus optimizer) from a profile"},
    {"pfo-server", CLI_COMPONENT(cmd_pfo_server),
     "serve Perseus per-instruction GPU frequency schedules"},
    {"bso-server", CLI_COMPONENT(cmd_bso_server),
     "serve the batch-size optimizer to recurring jobs on many nodes\n"
     "               (SQLite or PostgreSQL)"},
    {"plo", cmd_plo, NULL, NULL,
     "power-limit optimizer: replay a measured profile, or a demo on simulated GPUs"},
    {"run", CLI_COMPONENT(cmd_run),
     "run a recurring training job under the batch-size optimizer (SQLite state)"},
    {"simulate", cmd_simulate, NULL, NULL,
     "replay the NSDI'23 traces through the batch-size and power-limit\n"
     "               optimizers"},
    {"daemon", CLI_COMPONENT(cmd_daemon),
     "the privileged daemon (zeusd's API) that gives GPU settings back\n"
     "               when the client that changed them dies"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
  fprintf(out,
          "usage: zeus <command> [options]\n"
          "       zeus --version | --help | help <command>\n"
          "\n"
          "GPU energy measurement and optimization for deep-learning training.\n"
          "\n"
          "Commands:\n");
  bool left_out = false;
  for (size_t i = 0; i < NCOMMANDS; i++) {
    if (commands[i].fn)
      fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].summary);
    else
      left_out = true;
  }
  if (left_out) {
    fprintf(out, "\nNot in this build (their component was configured out):\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
      if (!commands[i].fn)
        fprintf(out, "  %-12s %s=ON, needs %s\n", commands[i].name, commands[i].option,
                commands[i].deps);
  }
  fprintf(
      out,
      "\n"
      "Run 'zeus <command> --help' for a command's options and examples.\n"
      "\n"
      "Environment (every command):\n"
      "  ZEUS_GPU_BACKEND   nvml | amdsmi | sim | none | zeusd (default: nvml when\n"
      "                     libnvidia-ml.so.1 loads, else amdsmi when libamd_smi.so loads and\n"
      "                     lists GPUs, else none; 'zeus gpus' says why it did not)\n"
      "  ZEUS_NVML_LIBRARY  path of the NVML library to load (default libnvidia-ml.so.1)\n"
      "  ZEUS_AMDSMI_LIBRARY  path of ROCm's amdsmi library to load (default libamd_smi.so;\n"
      "                     AMD GPUs: docs/amd.md)\n"
      "  CUDA_VISIBLE_DEVICES  which GPUs are visible, as CUDA reads it\n"
      "  ZEUS_SIM_*         the simulated GPU (see docs/sim.md); the CLI runs it on the wall clock\n"
      "  ZEUS_RAPL_ROOT     where the RAPL zones are (default /sys/class/powercap)\n"
      "  ZEUS_DATA_DIR      the measured data (traces, profiles): see docs/data.md\n"
      "  ZEUS_LOG_LEVEL     error | warn | info | debug | off (default warn)\n"
      "  ZEUSD_SOCK_PATH, ZEUSD_HOST_PORT, ZEUSD_TOKEN  send privileged GPU calls (and RAPL reads\n"
      "                     this process cannot make) to a zeus daemon or zeusd\n"
      "                     ('zeus daemon serve --help'; docs/privileges.md)\n"
      "\n"
      "Output: a --json report is one JSON document on standard output, its keys in SI units\n"
      "(_w, _j, _s, _mhz); a command that runs a child leaves standard output to the child and\n"
      "writes its text report to standard error, or to -o FILE (docs/output.md).\n");
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

bool cli_parse_long(const char *cmd, const char *opt, const char *text, long min, long max,
                    long *out) {
  char *end;
  if (!text) {
    cli_error(cmd, false, "%s needs a value", opt);
    return false;
  }
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
  if (!text) {
    cli_error(cmd, false, "%s needs a value", opt);
    return false;
  }
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
  if (!text || !*text) {
    cli_error(cmd, false, "%s needs a list such as 0,1", opt);
    return false;
  }
  const char *p = text;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > 1000000 || (*end && *end != ',')) {
      cli_error(cmd, false, "%s: expected comma-separated GPU indices such as 0,1, got '%s'", opt,
                text);
      return false;
    }
    if (*n == cap) {
      cli_error(cmd, false, "%s: more than %zu entries", opt, cap);
      return false;
    }
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
  if (!cli_parse_index_list(cmd, opt, value, l->idx, sizeof l->idx / sizeof l->idx[0], &l->n))
    return false;
  l->given = true;
  return true;
}

bool cli_report_open(const char *cmd, cli_report *r, const char *path) {
  r->f = NULL;
  int n = snprintf(r->tmp, sizeof r->tmp, "%s.XXXXXX", path);
  if (n < 0 || (size_t)n >= sizeof r->tmp) {
    cli_error(cmd, false, "-o: the path '%s' is too long", path);
    return false;
  }
  int fd = mkostemp(r->tmp, O_CLOEXEC);
  if (fd < 0 || !(r->f = fdopen(fd, "w"))) {
    cli_error(cmd, false, "-o: cannot write beside '%s': %s", path, strerror(errno));
    if (fd >= 0) {
      close(fd);
      unlink(r->tmp);
    }
    return false;
  }
  return true;
}

bool cli_report_commit(const char *cmd, cli_report *r, const char *path) {
  bool ok = fflush(r->f) == 0 && fsync(fileno(r->f)) == 0;
  ok = fclose(r->f) == 0 && ok;
  r->f = NULL;
  if (ok && rename(r->tmp, path) == 0) return true;
  cli_error(cmd, false, "-o: cannot write '%s': %s", path, strerror(errno));
  unlink(r->tmp);
  return false;
}

void cli_report_discard(cli_report *r) {
  if (!r->f) return;
  fclose(r->f);
  r->f = NULL;
  unlink(r->tmp);
}

int main(int argc, char **argv) {
  if (zeus_log_init_stderr(NULL) != ZEUS_OK) {
    fprintf(stderr, "zeus: %s\n", zeus_errmsg());
    return CLI_EXIT_USAGE;
  }
  /* The simulated GPU follows the wall clock in the CLI unless told otherwise. */
  setenv("ZEUS_SIM_CLOCK", "wall", 0);
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
    printf("zeus %s\n", zeus_version());
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  bool help = false;
  if (strcmp(name, "help") == 0) {
    if (argc < 3) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    name = argv[2];
    help = true;
  }
  for (size_t i = 0; i < NCOMMANDS; i++) {
    if (strcmp(commands[i].name, name) == 0) {
      if (!commands[i].fn) {
        fprintf(stderr, "zeus: '%s' is not part of this build: configure with -D%s=ON (needs %s)\n",
                name, commands[i].option, commands[i].deps);
        return CLI_EXIT_USAGE;
      }
      if (help) {
        char *hargv[] = {(char *)name, (char *)"--help", NULL};
        return commands[i].fn(2, hargv);
      }
      return commands[i].fn(argc - 1, argv + 1);
    }
  }
  if (name[0] == '-') { /* a misspelled --version or --help, or an option before the command */
    const char *opts[] = {"--version", "--help"};
    int near = -1, best = 99;
    for (int i = 0; i < 2; i++) {
      int d = cli_edit_distance(name, opts[i]);
      if (d < best) best = d, near = i;
    }
    if (best <= 2)
      fprintf(stderr, "zeus: unknown option '%s' (did you mean '%s'?)\n", name, opts[near]);
    else
      fprintf(stderr,
              "zeus: unknown option '%s' (options go after the command: zeus <command> --help)\n",
              name);
    return CLI_EXIT_USAGE;
  }
  const char *names[sizeof commands / sizeof commands[0] + 1];
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) names[i] = commands[i].name;
  names[sizeof commands / sizeof commands[0]] = NULL;
  int near = -1, best = 99;
  for (int i = 0; names[i]; i++) {
    int d = cli_edit_distance(name, names[i]);
    if (d < best) best = d, near = i;
  }
  if (near >= 0 && best <= 2)
    fprintf(stderr,
            "zeus: unknown command '%s' (did you mean '%s'? run 'zeus --help' for the list)\n",
            name, names[near]);
  else fprintf(stderr, "zeus: unknown command '%s' (run 'zeus --help' for the list)\n", name);
  return CLI_EXIT_USAGE;
}
