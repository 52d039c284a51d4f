/* zeus monitor energy -- CMD: measure a command; zeus monitor power: sample power as CSV. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define ENVIRONMENT                                                                              \
  "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_* (the\n" \
  "simulated GPU follows the wall clock here and draws idle power), ZEUS_RAPL_ROOT (where the\n" \
  "RAPL zones are, default /sys/class/powercap), ZEUS_LOG_LEVEL.\n"

static cli_index_list gpu_list;
static bool json_output;
static const char *out_path;
static int interval_ms = 100;
static double duration_s = -1;

static const cli_opt energy_opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL,
     "print the report as one JSON document (README, \"Output\"); CMD's standard\n"
     "output then goes to standard error, so that standard output is only JSON"},
    {"output", 'o', CLI_OPT_STRING, &out_path, "FILE",
     "write the report to FILE (replaced whole when CMD ends) instead of standard\n"
     "error; CMD keeps standard output"},
    {0},
};

static const cli_opt power_opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"interval-ms", 0, CLI_OPT_INT, &interval_ms, "N", "sampling period in milliseconds", "100", 1,
     60000},
    {"duration-s", 0, CLI_OPT_DOUBLE, &duration_s, "S", "stop after S seconds", "until SIGINT", 0,
     1e9},
    {0},
};

static const cli_command monitor_cmd = {
    .name = "monitor",
    .usage =
        "zeus monitor energy [--gpus LIST] [--json] [-o FILE] [--] CMD [ARGS...]\n"
        "zeus monitor power [--gpus LIST] [--interval-ms N] [--duration-s S]",
    .about =
        "'energy' runs CMD and reports its time and the energy of every GPU, CPU package and\n"
        "DRAM zone meanwhile. 'power' prints a CSV of power samples. See 'zeus monitor energy\n"
        "--help' and 'zeus monitor power --help'.",
    .more =
        "Examples:\n"
        "  zeus monitor energy -- python train.py --epochs 1\n"
        "  zeus monitor energy --json -- ./my_benchmark > report.json\n"
        "  ZEUS_GPU_BACKEND=sim zeus monitor power --interval-ms 50 --duration-s 2\n\n" ENVIRONMENT,
    .args = CLI_ARGS_NONE,
};

static const cli_command energy_cmd = {
    .name = "monitor energy",
    .usage = "zeus monitor energy [--gpus LIST] [--json] [-o FILE] [--] CMD [ARGS...]",
    .about =
        "Runs CMD, then reports its elapsed time and the energy each GPU, each CPU package and\n"
        "each DRAM zone (RAPL, where readable) used meanwhile, and the total of GPUs and CPU\n"
        "packages (DRAM is part of no total: it is listed apart). Exits with CMD's exit code\n"
        "(128+N when CMD was killed by signal N; 127 when CMD cannot be started).\n"
        "\n"
        "Standard output belongs to CMD: the text report goes to standard error, or to FILE with\n"
        "-o. With --json the JSON document is the only thing on standard output (CMD's output\n"
        "goes to standard error), so the report can be piped into jq or python3 -m json.tool.",
    .opts = energy_opts,
    .more =
        "JSON report: {\"command\": [argv...], \"exit_code\", \"time_s\", \"gpu_energy_j\":\n"
        "{\"<index>\": J}, \"cpu_energy_j\": {\"<index>\": J}, \"dram_energy_j\": {\"<index>\":\n"
        "J} (packages with a DRAM zone), \"total_energy_j\"}.\n"
        "\n"
        "Examples:\n"
        "  zeus monitor energy -- python train.py --epochs 1\n"
        "  zeus monitor energy --gpus 0,1 --json -- ./my_benchmark | jq .total_energy_j\n"
        "  zeus monitor energy -o energy.txt -- make -j8\n\n" ENVIRONMENT,
    .args = CLI_ARGS_COMMAND,
};

static const cli_command power_cmd = {
    .name = "monitor power",
    .usage = "zeus monitor power [--gpus LIST] [--interval-ms N] [--duration-s S]",
    .about =
        "Prints a CSV of power samples on standard output (time_s,gpu<i>_power_w,...; time from\n"
        "the first sample) until the duration ends or SIGINT (Ctrl-C).",
    .opts = power_opts,
    .more =
        "Example:\n"
        "  ZEUS_GPU_BACKEND=sim zeus monitor power --interval-ms 50 --duration-s 2\n\n" ENVIRONMENT,
    .args = CLI_ARGS_NONE,
};

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static json_t *energy_map(unsigned n, const unsigned *idx, const double *j, const bool *valid) {
  json_t *o = json_object();
  char key[16];
  for (unsigned k = 0; o && k < n; k++) {
    if (valid && !valid[k]) continue;
    snprintf(key, sizeof key, "%u", idx[k]);
    json_object_set_new(o, key, json_real(j[k]));
  }
  return o;
}

static bool write_json(FILE *out, int argc, char **argv, int exit_code, const zeus_measurement *r) {
  json_t *cmd = json_array();
  for (int i = 0; cmd && i < argc; i++) json_array_append_new(cmd, json_string(argv[i]));
  json_t *doc = json_pack(
      "{s:o,s:i,s:f,s:o,s:o,s:o,s:f}", "command", cmd, "exit_code", exit_code, "time_s", r->time_s,
      "gpu_energy_j", energy_map(r->num_gpus, r->gpu_indices, r->gpu_energy_j, NULL),
      "cpu_energy_j", energy_map(r->num_cpus, r->cpu_indices, r->cpu_energy_j, NULL),
      "dram_energy_j", energy_map(r->num_cpus, r->cpu_indices, r->dram_energy_j, r->dram_valid),
      "total_energy_j", r->total_energy_j);
  char *s = zeus_json_dumps(doc, JSON_INDENT(2));
  json_decref(doc);
  if (!s) return false;
  fprintf(out, "%s\n", s);
  zeus_free(s);
  return true;
}

static void write_text(FILE *out, const char *cmd0, int exit_code, const zeus_measurement *r) {
  fprintf(out, "zeus monitor energy: '%s' exited with code %d\n", cmd0, exit_code);
  fprintf(out, "  time:    %.3f s\n", r->time_s);
  for (unsigned k = 0; k < r->num_gpus; k++)
    fprintf(out, "  GPU %u:   %.3f J\n", r->gpu_indices[k], r->gpu_energy_j[k]);
  for (unsigned k = 0; k < r->num_cpus; k++)
    fprintf(out, "  CPU %u:   %.3f J\n", r->cpu_indices[k], r->cpu_energy_j[k]);
  for (unsigned k = 0; k < r->num_cpus; k++)
    if (r->dram_valid[k])
      fprintf(out, "  DRAM %u:  %.3f J (not in the total)\n", r->cpu_indices[k],
              r->dram_energy_j[k]);
  if (r->num_gpus == 0 && r->num_cpus == 0)
    fprintf(out, "  (no GPU or CPU package to measure: see 'zeus gpus')\n");
  fprintf(out, "  total:   %.3f J\n", r->total_energy_j);
}

/* Runs argv, its standard output on ours or (to_stderr) on our standard error. Returns its exit
 * code as a shell reports it. */
static int run_child(char **argv, bool to_stderr) {
  fflush(NULL);
  /* The child gets terminal signals; we wait for it and report whatever happens. */
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_term;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGTERM, &ign, &old_term);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0) _exit(127);
    execvp(argv[0], argv);
    fprintf(stderr, "zeus monitor energy: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int exit_code;
  if (pid < 0) {
    cli_error("monitor energy", false, "cannot start '%s': %s", argv[0], strerror(errno));
    exit_code = 127;
  } else {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  return exit_code;
}

static int run_energy(int argc, char **argv) {
  const char *cmd = "monitor energy";
  if (argc == 0) {
    cli_error(cmd, false, "no command given: put it after '--' (see 'zeus monitor energy --help')");
    return CLI_EXIT_USAGE;
  }
  zeus_monitor_opts o = {0};
  if (gpu_list.given) {
    o.gpu_indices = gpu_list.idx;
    o.num_gpu_indices = gpu_list.n;
  }
  zeus_monitor *m;
  if (zeus_monitor_open(&m, &o) != ZEUS_OK) {
    cli_error(cmd, true, "cannot start measuring");
    return CLI_EXIT_FAIL;
  }
  cli_report rf = {0};
  if (out_path && !cli_report_open(cmd, &rf, out_path)) {
    zeus_monitor_close(m);
    return CLI_EXIT_FAIL;
  }
  if (zeus_monitor_begin_window(m, "zeus.monitor.energy", false) != ZEUS_OK) {
    cli_error(cmd, true, "cannot begin measuring");
    cli_report_discard(&rf);
    zeus_monitor_close(m);
    return CLI_EXIT_FAIL;
  }
  /* Standard output is CMD's, except under --json without -o, where it is the report's. */
  int exit_code = run_child(argv, json_output && !out_path);
  zeus_measurement r;
  if (zeus_monitor_end_window(m, "zeus.monitor.energy", false, &r) != ZEUS_OK) {
    cli_error(cmd, true, "cannot finish measuring");
    cli_report_discard(&rf);
    zeus_monitor_close(m);
    return exit_code ? exit_code : CLI_EXIT_FAIL;
  }
  zeus_monitor_close(m);
  FILE *out = rf.f ? rf.f : json_output ? stdout : stderr;
  bool ok = true;
  if (json_output) ok = write_json(out, argc, argv, exit_code, &r);
  else write_text(out, argv[0], exit_code, &r);
  if (!ok) cli_error(cmd, true, "cannot write the JSON report");
  if (rf.f) {
    if (!ok) cli_report_discard(&rf);
    else ok = cli_report_commit(cmd, &rf, out_path);
  }
  fflush(out);
  if (!ok) return exit_code ? exit_code : CLI_EXIT_FAIL;
  return exit_code;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (!stop_flag && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int run_power(void) {
  const char *cmd = "monitor power";
  zeus_devices *d;
  if (zeus_devices_default(&d) != ZEUS_OK) {
    cli_error(cmd, true, "cannot open the GPUs");
    return CLI_EXIT_FAIL;
  }
  unsigned gpus[ZEUS_MAX_GPUS];
  size_t ngpus = 0;
  if (gpu_list.given) {
    ngpus = gpu_list.n;
    memcpy(gpus, gpu_list.idx, ngpus * sizeof gpus[0]);
  } else {
    for (unsigned i = 0; i < zeus_gpu_count(d); i++) gpus[ngpus++] = i;
  }
  for (size_t k = 0; k < ngpus; k++) {
    if (gpus[k] >= zeus_gpu_count(d)) {
      cli_error(cmd, false, "GPU %u does not exist (%u visible)", gpus[k], zeus_gpu_count(d));
      return CLI_EXIT_USAGE;
    }
  }
  if (ngpus == 0) {
    cli_error(cmd, false, "no GPU to sample (%u visible on backend %s; see 'zeus gpus')",
              zeus_gpu_count(d), zeus_devices_backend(d));
    return CLI_EXIT_FAIL;
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  printf("time_s");
  for (size_t k = 0; k < ngpus; k++) printf(",gpu%u_power_w", gpus[k]);
  printf("\n");
  double t0 = zeus_devices_now(d);
  int status = CLI_EXIT_OK;
  while (!stop_flag) {
    double t = zeus_devices_now(d) - t0;
    if (duration_s >= 0 && t > duration_s + 1e-9) break;
    printf("%.3f", t);
    for (size_t k = 0; k < ngpus; k++) {
      unsigned mw;
      if (zeus_gpu_instant_power(d, gpus[k], &mw) == ZEUS_OK) {
        printf(",%.3f", mw / 1000.0);
      } else {
        printf(",");
        cli_error(cmd, true, "GPU %u", gpus[k]);
        status = CLI_EXIT_FAIL;
      }
    }
    printf("\n");
    fflush(stdout);
    if (status) break;
    sleep_s(interval_ms / 1000.0);
  }
  return status;
}

int cmd_monitor(int argc, char **argv) {
  static const char *const modes[] = {"energy", "power", NULL};
  if (argc < 2 || argv[1][0] == '-') {
    int rc = cli_parse(&monitor_cmd, argc, argv, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    cli_pick("monitor", "mode", NULL, modes);
    fprintf(stderr, "(see 'zeus monitor --help')\n");
    return CLI_EXIT_USAGE;
  }
  int mode = cli_pick("monitor", "mode", argv[1], modes);
  if (mode < 0) return CLI_EXIT_USAGE;
  char **rest = NULL;
  int nrest = 0;
  int rc = cli_parse(mode == 0 ? &energy_cmd : &power_cmd, argc - 1, argv + 1, &rest, &nrest);
  if (rc != CLI_CONTINUE) return rc;
  return mode == 0 ? run_energy(nrest, rest) : run_power();
}
