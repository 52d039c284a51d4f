/* Helpers shared by the 'zeus gpus' tools that read and change GPUs (probe, check, set,
 * clock-latency): which GPUs a --gpus list names, medians, stop signals, supported clocks,
 * a child command run while the parent samples, and writing one JSON document. */
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

volatile sig_atomic_t cli_stop_signal;

static struct sigaction saved_int, saved_term;
static int stop_users;

static void on_stop(int sig) {
  if (!cli_stop_signal) cli_stop_signal = sig;
}

void cli_catch_stop_signals(void) {
  if (stop_users++) return;
  cli_stop_signal = 0;
  /* No SA_RESTART: a sleep or a wait returns at once, so the command gets on with restoring. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &saved_int);
  sigaction(SIGTERM, &sa, &saved_term);
}

void cli_release_stop_signals(void) {
  if (stop_users == 0 || --stop_users) return;
  sigaction(SIGINT, &saved_int, NULL);
  sigaction(SIGTERM, &saved_term, NULL);
}

bool cli_sleep_s(double s) {
  if (cli_stop_signal) return false;
  if (!(s > 0)) return true;
  struct timespec ts = {(time_t)s, (long)((s - floor(s)) * 1e9)};
  while (nanosleep(&ts, &ts) != 0) {
    if (errno != EINTR || cli_stop_signal) return !cli_stop_signal;
  }
  return !cli_stop_signal;
}

zeus_devices *cli_open_gpu_selection(const char *cmd, const cli_index_list *l, unsigned *out, size_t *n) {
  zeus_devices *d;
  if (zeus_devices_open(&d, NULL) != ZEUS_OK) {
    cli_error(cmd, true, "cannot open the GPUs");
    return NULL;
  }
  if (!cli_gpu_selection(cmd, d, l, out, n)) {
    zeus_devices_close(d);
    return NULL;
  }
  return d;
}

bool cli_gpu_selection(const char *cmd, zeus_devices *d, const cli_index_list *l, unsigned *out,
                       size_t *n) {
  unsigned count = zeus_gpu_count(d);
  *n = 0;
  if (l->given) {
    for (size_t k = 0; k < l->n; k++) {
      if (l->idx[k] >= count) {
        cli_error(cmd, false,
                  "--gpus: GPU %u does not exist (%u visible on backend %s; see 'zeus gpus')",
                  l->idx[k], count, zeus_devices_backend(d));
        return false;
      }
      out[(*n)++] = l->idx[k];
    }
  } else {
    for (unsigned i = 0; i < count && *n < ZEUS_MAX_GPUS; i++) out[(*n)++] = i;
  }
  if (*n == 0) {
    const char *why = zeus_devices_nvml_error(d);
    cli_error(cmd, false, "no GPU (backend %s%s%s); ZEUS_GPU_BACKEND=sim selects simulated GPUs",
              zeus_devices_backend(d), why ? ": " : "", why ? why : "");
    return false;
  }
  return true;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_median(double *v, size_t n) {
  if (n == 0) return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double cli_max(const double *v, size_t n) {
  double m = NAN;
  for (size_t k = 0; k < n; k++)
    if (isnan(m) || v[k] > m) m = v[k];
  return m;
}

double cli_min(const double *v, size_t n) {
  double m = NAN;
  for (size_t k = 0; k < n; k++)
    if (isnan(m) || v[k] < m) m = v[k];
  return m;
}

int cli_gpu_sm_clocks(zeus_devices *d, unsigned gpu, unsigned *mem_mhz, unsigned *mhz, size_t *n) {
  unsigned mem[64];
  size_t nmem = sizeof mem / sizeof mem[0];
  int rc = zeus_gpu_supported_memory_clocks(d, gpu, mem, &nmem);
  if (rc) return rc;
  if (nmem == 0) return zeus_set_errmsg(ZEUS_ENOTSUP, "GPU %u lists no memory clock", gpu);
  if (mem_mhz) *mem_mhz = mem[0];
  rc = zeus_gpu_supported_graphics_clocks(d, gpu, mem[0], mhz, n);
  if (rc) return rc;
  if (*n == 0) return zeus_set_errmsg(ZEUS_ENOTSUP, "GPU %u lists no SM clock", gpu);
  return ZEUS_OK;
}

unsigned cli_nearest_clock(const unsigned *mhz, size_t n, double want) {
  unsigned best = mhz[0];
  for (size_t k = 1; k < n; k++)
    if (fabs(mhz[k] - want) < fabs(best - want)) best = mhz[k];
  return best;
}

json_t *cli_json_real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

bool cli_write_json(FILE *out, json_t *doc) {
  zeus_json_round_by_unit(doc);
  char *s = zeus_json_dumps(doc, JSON_INDENT(2));
  if (!s) return false;
  bool ok = fprintf(out, "%s\n", s) > 0;
  zeus_free(s);
  return ok && fflush(out) == 0;
}

pid_t cli_child_start(const char *cmd, char **argv, bool stdout_to_stderr) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child gets the signal dispositions we started with. */
    sigaction(SIGINT, &saved_int, NULL);
    sigaction(SIGTERM, &saved_term, NULL);
    if (stdout_to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0) _exit(127);
    execvp(argv[0], argv);
    fprintf(stderr, "zeus %s: cannot run '%s': %s\n", cmd, argv[0], strerror(errno));
    _exit(127);
  }
  if (pid < 0) cli_error(cmd, false, "cannot start '%s': %s", argv[0], strerror(errno));
  return pid;
}

bool cli_child_poll(pid_t pid, int *exit_code) {
  int status;
  pid_t r;
  while ((r = waitpid(pid, &status, WNOHANG)) < 0 && errno == EINTR) {}
  if (r != pid) return false;
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

int cli_child_stop(pid_t pid, int sig, double grace_s) {
  int code;
  if (cli_child_poll(pid, &code)) return code;
  kill(pid, sig);
  for (double waited = 0; waited < grace_s; waited += 0.01) {
    if (cli_child_poll(pid, &code)) return code;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
