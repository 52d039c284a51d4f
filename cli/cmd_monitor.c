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

static void help(FILE *out) {
  fprintf(out,
          "usage: zeus monitor energy [--gpus LIST] [--json] -- CMD [ARGS...]\n"
          "       zeus monitor power [--gpus LIST] [--interval-ms N] [--duration-s S]\n\n"
          "'energy' runs CMD, then prints its elapsed time and the energy each GPU (and each CPU\n"
          "package, where RAPL is readable) used meanwhile, and the total. It exits with CMD's exit\n"
          "code (128+N when CMD was killed by signal N; 127 when CMD cannot be started).\n"
          "'power' prints a CSV of power samples (time_s,gpu<i>_power_w,...) on stdout until the\n"
          "duration ends or SIGINT (Ctrl-C).\n\n"
          "Options:\n"
          "  --gpus LIST        comma-separated visible GPU indices (default: all)\n"
          "  --json             (energy) print {\"command\", \"exit_code\", \"time_s\", \"gpu_energy_j\":\n"
          "                     {\"<i>\": J}, \"cpu_energy_j\": {\"<i>\": J}, \"total_energy_j\"}\n"
          "  --interval-ms N    (power) sampling period, 1..60000 (default 100)\n"
          "  --duration-s S     (power) stop after S seconds (default: until SIGINT)\n"
          "  -h, --help         this help\n\n"
          "Examples:\n"
          "  zeus monitor energy -- python train.py --epochs 1\n"
          "  zeus monitor energy --gpus 0,1 --json -- ./my_benchmark\n"
          "  ZEUS_GPU_BACKEND=sim zeus monitor power --interval-ms 50 --duration-s 2\n\n"
          "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_* (the\n"
          "simulated GPU follows the wall clock here and draws idle power), ZEUS_RAPL_ROOT,\n"
          "ZEUS_LOG_LEVEL.\n");
}

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

static int open_monitor(const char *cmd, const unsigned *gpus, size_t ngpus, bool listed, zeus_monitor **m) {
  zeus_monitor_opts o = {0};
  if (listed) {
    o.gpu_indices = gpus;
    o.num_gpu_indices = ngpus;
  }
  if (zeus_monitor_open(m, &o) != ZEUS_OK) {
    cli_error(cmd, true, "cannot start measuring");
    return CLI_EXIT_FAIL;
  }
  return CLI_EXIT_OK;
}

static int run_energy(int argc, char **argv, const unsigned *gpus, size_t ngpus, bool listed, bool as_json) {
  if (argc == 0) {
    cli_error("monitor energy", false, "no command given: put it after '--' (see 'zeus monitor --help')");
    return CLI_EXIT_USAGE;
  }
  zeus_monitor *m;
  int rc = open_monitor("monitor energy", gpus, ngpus, listed, &m);
  if (rc) return rc;
  if (zeus_monitor_begin_window(m, "zeus.monitor.energy", false) != ZEUS_OK) {
    cli_error("monitor energy", true, "cannot begin measuring");
    zeus_monitor_close(m);
    return CLI_EXIT_FAIL;
  }
  fflush(NULL);
  /* The child gets terminal signals; we wait for it and report whatever happens. */
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_int, old_term;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGTERM, &ign, &old_term);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
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
  zeus_measurement r;
  if (zeus_monitor_end_window(m, "zeus.monitor.energy", false, &r) != ZEUS_OK) {
    cli_error("monitor energy", true, "cannot finish measuring");
    zeus_monitor_close(m);
    return exit_code ? exit_code : CLI_EXIT_FAIL;
  }
  if (as_json) {
    json_t *cmd = json_array(), *g = json_object(), *c = json_object();
    for (int i = 0; i < argc; i++) json_array_append_new(cmd, json_string(argv[i]));
    char key[16];
    for (unsigned k = 0; k < r.num_gpus; k++) {
      snprintf(key, sizeof key, "%u", r.gpu_indices[k]);
      json_object_set_new(g, key, json_real(r.gpu_energy_j[k]));
    }
    for (unsigned k = 0; k < r.num_cpus; k++) {
      snprintf(key, sizeof key, "%u", r.cpu_indices[k]);
      json_object_set_new(c, key, json_real(r.cpu_energy_j[k]));
    }
    json_t *out = json_pack("{s:o,s:i,s:f,s:o,s:o,s:f}", "command", cmd, "exit_code", exit_code, "time_s", r.time_s,
                            "gpu_energy_j", g, "cpu_energy_j", c, "total_energy_j", r.total_energy_j);
    char *s = json_dumps(out, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    printf("%s\n", s);
    free(s);
    json_decref(out);
  } else {
    printf("zeus monitor energy: '%s' exited with code %d\n", argv[0], exit_code);
    printf("  time:   %.3f s\n", r.time_s);
    for (unsigned k = 0; k < r.num_gpus; k++) printf("  GPU %u:  %.3f J\n", r.gpu_indices[k], r.gpu_energy_j[k]);
    for (unsigned k = 0; k < r.num_cpus; k++) printf("  CPU %u:  %.3f J\n", r.cpu_indices[k], r.cpu_energy_j[k]);
    if (r.num_gpus == 0 && r.num_cpus == 0) printf("  (no GPU or CPU package to measure on this machine)\n");
    printf("  total:  %.3f J\n", r.total_energy_j);
  }
  fflush(stdout);
  zeus_monitor_close(m);
  return exit_code;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (!stop_flag && nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int run_power(const unsigned *gpus, size_t ngpus, bool listed, long interval_ms, double duration) {
  zeus_devices *d;
  if (zeus_devices_default(&d) != ZEUS_OK) {
    cli_error("monitor power", true, "cannot open the GPUs");
    return CLI_EXIT_FAIL;
  }
  unsigned all[ZEUS_MAX_GPUS];
  if (!listed) {
    ngpus = zeus_gpu_count(d);
    for (unsigned i = 0; i < ngpus; i++) all[i] = i;
    gpus = all;
  }
  for (size_t k = 0; k < ngpus; k++) {
    if (gpus[k] >= zeus_gpu_count(d)) {
      cli_error("monitor power", false, "GPU %u does not exist (%u visible)", gpus[k], zeus_gpu_count(d));
      return CLI_EXIT_USAGE;
    }
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
    if (duration >= 0 && t > duration + 1e-9) break;
    printf("%.3f", t);
    for (size_t k = 0; k < ngpus; k++) {
      unsigned mw;
      if (zeus_gpu_instant_power(d, gpus[k], &mw) == ZEUS_OK) {
        printf(",%.3f", mw / 1000.0);
      } else {
        printf(",");
        cli_error("monitor power", true, "GPU %u", gpus[k]);
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
  if (argc < 2 || cli_wants_help(argc, argv)) {
    help(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  const char *mode = argv[1];
  bool energy = strcmp(mode, "energy") == 0;
  if (!energy && strcmp(mode, "power") != 0) {
    cli_error("monitor", false, "unknown mode '%s': expected 'energy' or 'power'", mode);
    return CLI_EXIT_USAGE;
  }
  unsigned gpus[ZEUS_MAX_GPUS];
  size_t ngpus = 0;
  bool listed = false, as_json = false;
  long interval_ms = 100;
  double duration = -1;
  const char *cmd = energy ? "monitor energy" : "monitor power";
  int i = 2;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(a, "--gpus") == 0) {
      if (!cli_parse_index_list(cmd, a, i + 1 < argc ? argv[++i] : NULL, gpus, ZEUS_MAX_GPUS, &ngpus))
        return CLI_EXIT_USAGE;
      listed = true;
    } else if (energy && strcmp(a, "--json") == 0) {
      as_json = true;
    } else if (!energy && strcmp(a, "--interval-ms") == 0) {
      if (!cli_parse_long(cmd, a, i + 1 < argc ? argv[++i] : NULL, 1, 60000, &interval_ms)) return CLI_EXIT_USAGE;
    } else if (!energy && strcmp(a, "--duration-s") == 0) {
      if (!cli_parse_double(cmd, a, i + 1 < argc ? argv[++i] : NULL, 0, 1e9, &duration)) return CLI_EXIT_USAGE;
    } else if (energy && a[0] != '-') {
      break; /* the command itself, without '--' */
    } else {
      cli_error(cmd, false, "unknown option '%s' (see 'zeus monitor --help')", a);
      return CLI_EXIT_USAGE;
    }
  }
  if (!energy && i < argc) {
    cli_error(cmd, false, "unexpected argument '%s'", argv[i]);
    return CLI_EXIT_USAGE;
  }
  return energy ? run_energy(argc - i, argv + i, gpus, ngpus, listed, as_json)
                : run_power(gpus, ngpus, listed, interval_ms, duration);
}
