/* zeus monitor energy -- CMD: measure a command; zeus monitor power: sample power as CSV. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <zeus/config.h>

#include "cli.h"
#include "grid_util.h"

#define ENVIRONMENT                                                                              \
  "Environment: ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY, CUDA_VISIBLE_DEVICES, ZEUS_SIM_* (the\n" \
  "simulated GPU follows the wall clock here and draws idle power; simulated GPUs belong to\n" \
  "one process, so a program's own simulated work is not seen here: docs/sim.md),\n" \
  "ZEUS_RAPL_ROOT (where the RAPL zones are, default /sys/class/powercap), ZEUS_JETSON_ROOT\n" \
  "(the folder standing for /sys where a Jetson's power rails are; setting it makes any machine\n" \
  "a Jetson: docs/jetson.md), ZEUS_LOG_LEVEL.\n"

static cli_index_list gpu_list;
static bool json_output;
static const char *out_path;
static int interval_ms = 100;
static double duration_s = -1;

static const char *push_url, *push_job = "zeus", *push_labels, *push_window;

static const cli_opt energy_opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"json", 0, CLI_OPT_FLAG, &json_output, NULL,
     "print the report as one JSON document (docs/output.md); CMD's standard\n"
     "output then goes to standard error, so that standard output is only JSON"},
    {"output", 'o', CLI_OPT_STRING, &out_path, "FILE",
     "write the report to FILE (replaced whole when CMD ends) instead of standard\n"
     "error; CMD keeps standard output"},
    {"pushgateway", 0, CLI_OPT_STRING, &push_url, "URL",
     "also push the window to the Prometheus Pushgateway at URL (http://HOST:PORT) as the\n"
     "histograms of zeus/metric.h (energy_monitor_gpu_energy_joules, ...,\n"
     "energy_monitor_window_duration_seconds; a Grace Hopper module's energy as\n"
     "energy_monitor_module_energy_joules) after the report is written; a bad URL, job or\n"
     "label is refused before CMD starts; a failed push is reported and exits 1 when CMD\n"
     "succeeded. The gateway keeps the last push per job\n"
     "and labels: runs that must all stay visible need labels of their own (run=...)",
     .heading = "Pushing to a Prometheus Pushgateway (docs/metrics-push.md):"},
    {"push-job", 0, CLI_OPT_STRING, &push_job, "NAME", "the job the window is pushed under",
     "zeus"},
    {"push-labels", 0, CLI_OPT_STRING, &push_labels, "K=V,...",
     "grouping labels added to every series (instance=node3,rank=0)", "none"},
    {"push-window", 0, CLI_OPT_STRING, &push_window, "NAME", "the window label", "CMD's file name"},
    CLI_GRID_OPTS,
    {0},
};

static const cli_command monitor_cmd = {
    .name = "monitor",
    .usage =
        "zeus monitor energy [--gpus LIST] [--json] [-o FILE] [--] CMD [ARGS...]\n"
        "zeus monitor power [--gpus LIST] [--interval-ms N] [--duration-s S]\n"
        "                   [--time relative|epoch] [--domains LIST] [--temperature] [-o FILE]\n"
        "                   [[--] CMD [ARGS...]]\n"
        "zeus monitor power --from unix:PATH,tcp:HOST:PORT,... [--gpus LIST] [--duration-s S]\n"
        "                   [--json] [--stall-timeout-s S] [--reconnect-max-s S] [-o FILE]\n"
        "                   [[--] CMD [ARGS...]]",
    .about =
        "'energy' runs CMD and reports its time and the energy of every GPU, CPU package and\n"
        "DRAM zone meanwhile. 'power' prints a CSV of power (and temperature) samples, for a\n"
        "duration or while CMD runs. See 'zeus monitor energy --help' and 'zeus monitor power\n"
        "--help'.",
    .more =
        "Examples:\n"
        "  zeus monitor energy -- python train.py --epochs 1\n"
        "  zeus monitor energy --json -- ./my_benchmark > report.json\n"
        "  ZEUS_GPU_BACKEND=sim zeus monitor power --interval-ms 50 --duration-s 2\n\n" ENVIRONMENT,
    .args = CLI_ARGS_NONE,
};

static const cli_command energy_cmd = {
    .name = "monitor energy",
    .usage =
        "zeus monitor energy [--gpus LIST] [--json] [-o FILE]\n"
        "                    [--pushgateway URL [--push-job NAME] [--push-labels K=V,...]\n"
        "                    [--push-window NAME]] [--carbon latlon:LAT,LON]\n"
        "                    [--price latlon:LAT,LON --price-label LABEL] [--] CMD [ARGS...]",
    .about =
        "Runs CMD, then reports its elapsed time and the energy each GPU, each CPU package and\n"
        "each DRAM zone (RAPL, where readable) used meanwhile, and the total of GPUs and CPU\n"
        "packages (DRAM is part of no total: it is listed apart). On an NVIDIA Jetson it also\n"
        "reports the energy of the board's CPU, GPU and total (input) power rails, integrated from\n"
        "their power (docs/jetson.md); they are part of no total either. Exits with CMD's exit code\n"
        "(128+N when CMD was killed by signal N; 127 when CMD cannot be started).\n"
        "\n"
        "Standard output belongs to CMD: the text report goes to standard error, or to FILE with\n"
        "-o. With --json the JSON document is the only thing on standard output (CMD's output\n"
        "goes to standard error), so the report can be piped into jq or python3 -m json.tool.",
    .opts = energy_opts,
    .more =
        "JSON report: {\"command\": [argv...], \"exit_code\", \"time_s\", \"gpu_energy_j\":\n"
        "{\"<index>\": J}, \"cpu_energy_j\": {\"<index>\": J}, \"dram_energy_j\": {\"<index>\":\n"
        "J} (packages with a DRAM zone), \"total_energy_j\"}, and \"module_energy_j\":\n"
        "{\"<index>\": J} for GPUs whose power NVML gives only for their superchip module\n"
        "(Grace Hopper: CPU + memory + GPU), which are then not in gpu_energy_j. On a Jetson:\n"
        "\"soc_energy_j\": {\"cpu\": J, \"gpu\": J, \"total\": J} (the rails the board has).\n"
        "With --carbon: \"carbon_emission_g\" (GPUs + CPU packages, g CO2eq), \"gpu_carbon_emission_g\",\n"
        "\"cpu_carbon_emission_g\", \"dram_carbon_emission_g\": {\"<index>\": g}, \"carbon_intensity_url\".\n"
        "With --price: \"energy_cost\", \"gpu_energy_cost\", \"cpu_energy_cost\", \"dram_energy_cost\" in\n"
        "\"energy_cost_currency\", \"energy_price_url\". A figure the provider could not give is null,\n"
        "with \"carbon_emission_error\" or \"energy_cost_error\" saying why, and the exit code is 1\n"
        "when CMD succeeded; the energy is reported all the same.\n"
        "\n"
        "Examples:\n"
        "  zeus monitor energy -- python train.py --epochs 1\n"
        "  zeus monitor energy --gpus 0,1 --json -- ./my_benchmark | jq .total_energy_j\n"
        "  zeus monitor energy -o energy.txt -- make -j8\n"
        "  zeus monitor energy --pushgateway http://127.0.0.1:9091 --push-job train \\\n"
        "      --push-labels instance=node3 --push-window epoch -- python train.py\n"
        "  ZEUS_ELECTRICITYMAPS_API_KEY_FILE=~/.em-key zeus monitor energy --json \\\n"
        "      --carbon latlon:42.2776,-83.7409 -- python train.py | jq .carbon_emission_g\n\n" ENVIRONMENT
        "Carbon and cost: ZEUS_ELECTRICITYMAPS_URL, ZEUS_ELECTRICITYMAPS_API_KEY(_FILE),\n"
        "ZEUS_OPENEI_URL, ZEUS_OPENEI_API_KEY(_FILE) (keys are never printed).\n",
    .args = CLI_ARGS_COMMAND,
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

/* Which measured GPUs are superchip modules whose power and energy NVML gives only for the whole
 * module (Grace Hopper), as the measurement says: module[k] for r->gpu_indices[k]. Returns whether
 * any is. */
static bool module_gpus(const zeus_measurement *r, bool *module) {
  bool any = false;
  for (unsigned k = 0; k < r->num_gpus; k++) {
    module[k] = r->gpu_power_scope[k] == ZEUS_POWER_SCOPE_MODULE;
    any = any || module[k];
  }
  return any;
}

static bool write_json(FILE *out, int argc, char **argv, int exit_code, const zeus_measurement *r,
                       const cli_grid *grid) {
  json_t *cmd = json_array();
  for (int i = 0; cmd && i < argc; i++) json_array_append_new(cmd, json_string(argv[i]));
  /* A module's energy is "module_energy_j", never "gpu_energy_j" (which then leaves it out). */
  bool module[ZEUS_MAX_GPUS] = {false}, not_module[ZEUS_MAX_GPUS] = {false};
  bool any_module = module_gpus(r, module);
  for (unsigned k = 0; k < r->num_gpus; k++) not_module[k] = !module[k];
  json_t *doc = json_pack(
      "{s:o,s:i,s:f,s:o,s:o,s:o,s:f}", "command", cmd, "exit_code", exit_code, "time_s", r->time_s,
      "gpu_energy_j", energy_map(r->num_gpus, r->gpu_indices, r->gpu_energy_j, not_module),
      "cpu_energy_j", energy_map(r->num_cpus, r->cpu_indices, r->cpu_energy_j, NULL),
      "dram_energy_j", energy_map(r->num_cpus, r->cpu_indices, r->dram_energy_j, r->dram_valid),
      "total_energy_j", r->total_energy_j);
  if (doc && any_module)
    json_object_set_new(doc, "module_energy_j", energy_map(r->num_gpus, r->gpu_indices, r->gpu_energy_j, module));
  if (doc && r->soc_valid) { /* a Jetson's rails, by the names the original gives them */
    json_t *soc = json_object();
    for (int x = 0; soc && x < ZEUS_SOC_NUM_RAILS; x++)
      if (r->soc_rail_valid[x])
        json_object_set_new(soc, zeus_soc_rail_name((zeus_soc_rail)x), json_real(r->soc_energy_j[x]));
    json_object_set_new(doc, "soc_energy_j", soc);
  }
  cli_grid_json(grid, doc);
  char *s = zeus_json_dumps(doc, JSON_INDENT(2));
  json_decref(doc);
  if (!s) return false;
  fprintf(out, "%s\n", s);
  zeus_free(s);
  return true;
}

static void write_text(FILE *out, const char *cmd0, int exit_code, const zeus_measurement *r) {
  bool module[ZEUS_MAX_GPUS] = {false};
  module_gpus(r, module);
  fprintf(out, "zeus monitor energy: '%s' exited with code %d\n", cmd0, exit_code);
  fprintf(out, "  time:    %.3f s\n", r->time_s);
  for (unsigned k = 0; k < r->num_gpus; k++)
    if (module[k])
      fprintf(out, "  module of GPU %u:   %.3f J (the whole superchip: CPU + memory + GPU)\n", r->gpu_indices[k],
              r->gpu_energy_j[k]);
    else
      fprintf(out, "  GPU %u:   %.3f J\n", r->gpu_indices[k], r->gpu_energy_j[k]);
  for (unsigned k = 0; k < r->num_cpus; k++)
    fprintf(out, "  CPU %u:   %.3f J\n", r->cpu_indices[k], r->cpu_energy_j[k]);
  for (unsigned k = 0; k < r->num_cpus; k++)
    if (r->dram_valid[k])
      fprintf(out, "  DRAM %u:  %.3f J (not in the total)\n", r->cpu_indices[k],
              r->dram_energy_j[k]);
  static const char *const rail_text[ZEUS_SOC_NUM_RAILS] = {"Jetson CPU rail", "Jetson GPU rail",
                                                            "Jetson total rail (board input)"};
  for (int x = 0; r->soc_valid && x < ZEUS_SOC_NUM_RAILS; x++)
    if (r->soc_rail_valid[x])
      fprintf(out, "  %s:   %.3f J (not in the total)\n", rail_text[x], r->soc_energy_j[x]);
  if (r->num_gpus == 0 && r->num_cpus == 0 && !r->soc_valid)
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

#if ZEUS_HAVE_METRICS_PUSH
/* --push-labels "k=v,k2=v2" into names and values (pointers into `buf`). */
static bool split_labels(const char *cmd, char *buf, const char **names, const char **values,
                         size_t cap, size_t *n) {
  *n = 0;
  char *save = NULL;
  for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq || eq == kv || *n == cap) {
      cli_error(cmd, false,
                "--push-labels: expected NAME=VALUE[,NAME=VALUE...] (at most %zu), got '%s'", cap,
                kv);
      return false;
    }
    *eq = '\0';
    names[*n] = kv;
    values[(*n)++] = eq + 1;
  }
  return true;
}

#endif

/* --pushgateway: a zeus_metric histogram on the command's monitor, opened before CMD starts so
 * that a bad URL, job or label fails before the run rather than after it. */
#if ZEUS_HAVE_METRICS_PUSH
typedef zeus_metric push_handle;
#else
typedef void push_handle;
#endif

static bool push_open(zeus_monitor *m, push_handle **out) {
  const char *cmd = "monitor energy";
  *out = NULL;
#if ZEUS_HAVE_METRICS_PUSH
  char buf[1024];
  const char *names[16], *values[16];
  size_t n = 0;
  if (push_labels) {
    if (strlen(push_labels) >= sizeof buf) {
      cli_error(cmd, false, "--push-labels: longer than %zu bytes", sizeof buf - 1);
      return false;
    }
    strcpy(buf, push_labels);
    if (!split_labels(cmd, buf, names, values, 16, &n)) return false;
  }
  zeus_metric_opts o;
  zeus_metric_opts_init(&o);
  o.url = push_url;
  o.job = push_job;
  o.label_names = names;
  o.label_values = values;
  o.num_labels = n;
  o.monitor = m;
  if (zeus_metric_open(out, ZEUS_METRIC_ENERGY_HISTOGRAM, &o) != ZEUS_OK) {
    cli_error(cmd, true, "--pushgateway");
    return false;
  }
  return true;
#else
  (void)m;
  cli_error(cmd, false,
            "--pushgateway: this zeus was built without ZEUS_WITH_METRICS_PUSH (libcurl)");
  return false;
#endif
}

/* Pushes the measured window as one histogram observation and closes the handle; false after an
 * error message. */
static bool push_window_now(push_handle *h, const char *cmd0, const zeus_measurement *r) {
#if ZEUS_HAVE_METRICS_PUSH
  const char *slash = strrchr(cmd0, '/');
  const char *win = push_window ? push_window : slash ? slash + 1 : cmd0;
  int rc = zeus_metric_record(h, win, r);
  if (rc != ZEUS_OK) cli_error("monitor energy", true, "cannot push window '%s'", win);
  zeus_metric_close(h);
  return rc == ZEUS_OK;
#else
  (void)h;
  (void)cmd0;
  (void)r;
  return false;
#endif
}

static void push_close(push_handle *h) {
#if ZEUS_HAVE_METRICS_PUSH
  zeus_metric_close(h);
#else
  (void)h;
#endif
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
  const char *no_gpu = zeus_devices_nvml_error(zeus_monitor_devices(m));
  if (zeus_monitor_num_gpus(m) == 0 && no_gpu)
    cli_error(cmd, false,
              "measuring no GPU: %s (see 'zeus gpus'; ZEUS_GPU_BACKEND=sim simulates one)",
              no_gpu);
  push_handle *ph = NULL;
  if (push_url && !push_open(m, &ph)) {
    zeus_monitor_close(m);
    return CLI_EXIT_USAGE;
  }
  cli_grid *grid = NULL;
  if (!cli_grid_begin(cmd, m, &grid)) {
    push_close(ph);
    zeus_monitor_close(m);
    return CLI_EXIT_USAGE;
  }
  cli_report rf = {0};
  if (out_path && !cli_report_open(cmd, &rf, out_path)) {
    cli_grid_close(grid);
    push_close(ph);
    zeus_monitor_close(m);
    return CLI_EXIT_FAIL;
  }
  if (zeus_monitor_begin_window(m, "zeus.monitor.energy", false) != ZEUS_OK) {
    cli_error(cmd, true, "cannot begin measuring");
    cli_report_discard(&rf);
    cli_grid_close(grid);
    push_close(ph);
    zeus_monitor_close(m);
    return CLI_EXIT_FAIL;
  }
  /* Standard output is CMD's, except under --json without -o, where it is the report's. */
  int exit_code = run_child(argv, json_output && !out_path);
  zeus_measurement r;
  cli_grid_end(grid);
  if (zeus_monitor_end_window(m, "zeus.monitor.energy", false, &r) != ZEUS_OK) {
    cli_error(cmd, true, "cannot finish measuring");
    cli_report_discard(&rf);
    cli_grid_close(grid);
    push_close(ph);
    zeus_monitor_close(m);
    return exit_code ? exit_code : CLI_EXIT_FAIL;
  }
  FILE *out = rf.f ? rf.f : json_output ? stdout : stderr;
  bool ok = true;
  if (json_output) ok = write_json(out, argc, argv, exit_code, &r, grid);
  else {
    write_text(out, argv[0], exit_code, &r);
    cli_grid_text(grid, out);
  }
  if (!ok) cli_error(cmd, true, "cannot write the JSON report");
  if (rf.f) {
    if (!ok) cli_report_discard(&rf);
    else ok = cli_report_commit(cmd, &rf, out_path);
  }
  fflush(out);
  /* The report first: a slow or dead gateway does not hold it back. */
  bool pushed = !ph || push_window_now(ph, argv[0], &r);
  /* A grams or cost figure that could not be measured is in the report; the exit says so too. */
  bool grid_ok = cli_grid_ok(grid);
  if (!grid_ok) cli_error(cmd, false, "the report lacks a carbon or cost figure: its provider failed (the reason is in the report)");
  cli_grid_close(grid);
  zeus_monitor_close(m);
  if (!ok || !pushed || !grid_ok) return exit_code ? exit_code : CLI_EXIT_FAIL;
  return exit_code;
}

/* ---- zeus monitor power --------------------------------------------------------------------- */

/* The power domains a column can show, in column order, and their names on the command line and
 * in the CSV header. */
#define NUM_DOMAINS 3
static const char *const domain_names[] = {"instant", "average", "memory-average", NULL};
static const char *const domain_columns[] = {"power_w", "average_power_w",
                                             "memory_average_power_w"};
static const zeus_power_domain domain_codes[] = {ZEUS_POWER_INSTANT, ZEUS_POWER_AVERAGE,
                                                 ZEUS_POWER_MEMORY_AVERAGE};

/* --domains: a set of domains; "all" is every domain a GPU reads. */
typedef struct domain_set {
  bool want[NUM_DOMAINS];
  bool all;
} domain_set;
static domain_set domains = {{true, false, false}, false};

static bool parse_domains(const char *cmd, const char *opt, const char *value, void *dest) {
  domain_set *d = dest;
  domain_set got = {{false, false, false}, false};
  char buf[256];
  if (strlen(value) >= sizeof buf || !*value) {
    fprintf(stderr, "zeus %s: %s: expected a comma-separated list of %s, %s, %s or all\n", cmd, opt,
            domain_names[0], domain_names[1], domain_names[2]);
    return false;
  }
  strcpy(buf, value);
  char *save = NULL;
  for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    if (strcmp(w, "all") == 0) {
      got.all = true;
      continue;
    }
    int k = 0;
    while (domain_names[k] && strcmp(domain_names[k], w) != 0) k++;
    if (!domain_names[k]) {
      fprintf(stderr,
              "zeus %s: %s: unknown power domain '%s' (expected instant, average, "
              "memory-average or all)\n",
              cmd, opt, w);
      return false;
    }
    got.want[k] = true;
  }
  *d = got;
  return true;
}

static const char *const time_names[] = {"relative", "epoch", NULL};
static int time_mode; /* 0 relative, 1 epoch */
static bool with_temperature;
static const char *power_out_path;
static const char *power_from;
static bool power_json;
static double stall_timeout_s = 10, reconnect_max_s = 30;

static const cli_opt power_opts[] = {
    {"gpus", 0, CLI_OPT_CUSTOM, &gpu_list, "LIST", "comma-separated visible GPU indices", "all",
     .parse = cli_opt_index_list},
    {"interval-ms", 0, CLI_OPT_INT, &interval_ms, "N", "sampling period in milliseconds", "100", 1,
     60000},
    {"duration-s", 0, CLI_OPT_DOUBLE, &duration_s, "S",
     "stop sampling after S seconds (with CMD: then wait for CMD to end)",
     "until SIGINT, or until CMD ends", 0, 1e9},
    {"time", 0, CLI_OPT_CHOICE, &time_mode, NULL,
     "first column: 'relative' is time_s, seconds since the first sample on the GPU\n"
     "backend's clock; 'epoch' is unix_time_s, seconds since the Unix epoch (wall clock,\n"
     "milliseconds), to line samples up with other logs",
     "relative", .choices = time_names},
    {"domains", 0, CLI_OPT_CUSTOM, &domains, "LIST",
     "power domains to sample, comma-separated: instant (gpu<i>_power_w), average\n"
     "(gpu<i>_average_power_w, the GPU's own ~1 s mean), memory-average\n"
     "(gpu<i>_memory_average_power_w, seen on H100), or all (every domain each GPU has). A\n"
     "domain a GPU cannot read gets no column for that GPU (a note on standard error says so);\n"
     "none readable at all is an error",
     "instant", .parse = parse_domains},
    {"temperature", 0, CLI_OPT_FLAG, &with_temperature, NULL,
     "add gpu<i>_temperature_c, the GPU die temperature in degrees Celsius"},
    {"output", 'o', CLI_OPT_STRING, &power_out_path, "FILE",
     "write the CSV to FILE (replaced whole when sampling ends) instead of standard output;\n"
     "CMD then keeps standard output"},
    {"from", 0, CLI_OPT_STRING, &power_from, "LIST",
     "follow the power streams of zeus daemons or zeusd instead of this machine's GPUs:\n"
     "comma-separated unix:PATH (a Unix socket) or tcp:HOST:PORT, each node's GPUs (--gpus\n"
     "picks them on every node) and CPU packages. One row per event, as they arrive:\n"
     "unix_time_s (the node's time aligned to this clock),node (the socket path or\n"
     "HOST:PORT),device (gpu<i> or cpu<i>),power_w,dram_w. A node that goes away is\n"
     "reconnected with backoff (1 s doubling to 30 s) while the others go on; ZEUSD_TOKEN is\n"
     "sent as bearer token to each. --interval-ms, --domains, --time and --temperature do not\n"
     "apply. Exit code 1 when a node sent no event at all",
     .heading = "Power of other nodes (docs/power-stream.md):"},
    {"stall-timeout-s", 0, CLI_OPT_DOUBLE, &stall_timeout_s, "S",
     "with --from: a node that sends nothing (no event, no keepalive) for S seconds is\n"
     "reconnected", "10", 0.01, 3600},
    {"reconnect-max-s", 0, CLI_OPT_DOUBLE, &reconnect_max_s, "S",
     "with --from: the longest wait between tries to reach a node (the wait starts at 1 s,\n"
     "or S when smaller, and doubles at each failure in a row)", "30", 0.01, 3600},
    {"json", 0, CLI_OPT_FLAG, &power_json, NULL,
     "with --from: one JSON object per line instead of CSV: {\"unix_time_s\", \"node\",\n"
     "\"kind\": \"gpu\"|\"cpu\", \"device\", \"power_w\", \"dram_w\" (null for GPUs and packages\n"
     "without DRAM)}"},
    {0},
};

static const cli_command power_cmd = {
    .name = "monitor power",
    .usage =
        "zeus monitor power [--gpus LIST] [--interval-ms N] [--duration-s S]\n"
        "                   [--time relative|epoch] [--domains LIST] [--temperature] [-o FILE]\n"
        "                   [[--] CMD [ARGS...]]\n"
        "zeus monitor power --from unix:PATH,tcp:HOST:PORT,... [--gpus LIST] [--duration-s S]\n"
        "                   [--json] [--stall-timeout-s S] [--reconnect-max-s S] [-o FILE]\n"
        "                   [[--] CMD [ARGS...]]",
    .about =
        "Samples the GPUs' power every interval and prints one CSV row per sample: the time,\n"
        "then one column per GPU and power domain (gpu<i>_power_w, ...; module<i>_power_w where\n"
        "NVML gives only the superchip module's power, as on Grace Hopper), then temperatures with\n"
        "--temperature. Without CMD it samples until the duration ends or SIGINT (Ctrl-C). With\n"
        "CMD it runs CMD and samples while it runs (the last row is taken when CMD ends), then\n"
        "exits with CMD's exit code (128+N when CMD was killed by signal N; 127 when CMD cannot "
        "be\n"
        "started). SIGTERM is passed on to CMD; SIGINT is left to CMD (zeus samples on until CMD\n"
        "ends).\n"
        "\n"
        "The CSV never shares a stream with CMD's output: it goes to standard output and CMD's\n"
        "standard output is sent to standard error, or, with -o FILE, it goes to FILE and CMD\n"
        "keeps standard output. A reading that fails leaves its cell empty and is reported on\n"
        "standard error; sampling goes on (exit code 1 at the end without CMD).",
    .opts = power_opts,
    .more =
        "Examples:\n"
        "  zeus monitor power --interval-ms 50 --duration-s 2\n"
        "  zeus monitor power --time epoch --domains instant,average --temperature -- python "
        "train.py\n"
        "  zeus monitor power -o power.csv --interval-ms 20 -- ./my_benchmark\n"
        "  ZEUS_GPU_BACKEND=sim zeus monitor power --interval-ms 50 --duration-s 2\n"
        "  zeus monitor power --from unix:/run/zeusd/zeusd.sock,tcp:node2:4938 --duration-s 60\n"
        "  ZEUSD_TOKEN=$(cat token) zeus monitor power --from tcp:node1:4938 --json -- ./train\n\n" ENVIRONMENT,
    .args = CLI_ARGS_COMMAND,
};

static volatile sig_atomic_t term_flag;
static volatile sig_atomic_t child_flag;
static void on_term(int sig) {
  (void)sig;
  term_flag = 1;
}
static void on_child(int sig) {
  (void)sig;
  child_flag = 1;
}

/* Sleeps until `deadline` on the backend's clock, or until SIGINT, SIGTERM or SIGCHLD arrives.
 * Those signals are blocked outside this wait (ppoll unblocks them atomically), so a signal that
 * came before the wait ends it at once instead of being missed. */
/* Whether a GPU's power is its superchip module's (Grace Hopper). */
static bool is_module(zeus_devices *d, unsigned gpu) {
  zeus_power_scope sc = ZEUS_POWER_SCOPE_GPU;
  return zeus_gpu_power_scope(d, gpu, &sc) == ZEUS_OK && sc == ZEUS_POWER_SCOPE_MODULE;
}

static void sleep_until(zeus_devices *d, double deadline, const sigset_t *wait_mask) {
  double left = deadline - zeus_devices_now(d);
  if (left <= 0 || stop_flag || term_flag || child_flag) return;
  struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
  ppoll(NULL, 0, &ts, wait_mask);
}

/* One column of the CSV. */
typedef struct power_col {
  unsigned gpu;
  int domain; /* index in domain_codes; -1: temperature */
} power_col;

/* Starts CMD with its standard output on ours or (to_stderr) on our standard error; it dies
 * with us (PR_SET_PDEATHSIG). Returns its pid, or -1 when fork fails. */
static pid_t start_child(char **argv, bool to_stderr, const sigset_t *old_mask) {
  fflush(NULL);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    if (to_stderr && dup2(STDERR_FILENO, STDOUT_FILENO) < 0) _exit(127);
    execvp(argv[0], argv);
    fprintf(stderr, "zeus monitor power: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  return pid;
}

static int run_power(int argc, char **argv) {
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
  /* The columns: each GPU's domains that it can read (probed once), then temperatures. */
  static power_col cols[ZEUS_MAX_GPUS * (NUM_DOMAINS + 1)];
  size_t ncols = 0, npower = 0;
  for (size_t k = 0; k < ngpus; k++) {
    for (int dom = 0; dom < NUM_DOMAINS; dom++) {
      if (!domains.all && !domains.want[dom]) continue;
      unsigned mw;
      int rc = zeus_gpu_power(d, gpus[k], domain_codes[dom], &mw);
      if (rc == ZEUS_ENOTSUP) {
        if (!domains.all)
          fprintf(stderr, "zeus %s: GPU %u has no %s power reading: no column for it (%s)\n", cmd,
                  gpus[k], domain_names[dom], zeus_errmsg());
        continue;
      }
      cols[ncols++] = (power_col){gpus[k], dom};
      npower++;
    }
  }
  if (npower == 0) {
    cli_error(cmd, false, "no GPU can read the power domains asked for (see --domains)");
    return CLI_EXIT_FAIL;
  }
  if (with_temperature)
    for (size_t k = 0; k < ngpus; k++) cols[ncols++] = (power_col){gpus[k], -1};

  cli_report rf = {0};
  if (power_out_path && !cli_report_open(cmd, &rf, power_out_path)) return CLI_EXIT_FAIL;
  FILE *out = rf.f ? rf.f : stdout;

  /* SIGCHLD, SIGINT and SIGTERM wake the sampling loop; the child restores their defaults. */
  /* With CMD, SIGINT is CMD's (the terminal sends it to both): we wait for CMD to end, which a
   * CMD that handles SIGINT (saving a checkpoint) may take its time to do. */
  struct sigaction sa = {.sa_handler = argc > 0 ? SIG_IGN : on_signal},
                   st = {.sa_handler = on_term},
                   sc = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &st, NULL);
  sigaction(SIGCHLD, &sc, NULL);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGCHLD);
  sigprocmask(SIG_BLOCK, &block, &old_mask);

  fprintf(out, "%s", time_mode == 1 ? "unix_time_s" : "time_s");
  for (size_t c = 0; c < ncols; c++) {
    if (cols[c].domain < 0)
      fprintf(out, ",gpu%u_temperature_c", cols[c].gpu);
    else if (cols[c].domain != 2 && is_module(d, cols[c].gpu)) /* the module's power: module<i>_... */
      fprintf(out, ",module%u_%s", cols[c].gpu, domain_columns[cols[c].domain]);
    else
      fprintf(out, ",gpu%u_%s", cols[c].gpu, domain_columns[cols[c].domain]);
  }
  fprintf(out, "\n");
  fflush(out);

  pid_t child = -1;
  int exit_code = 0;
  bool child_done = argc == 0;
  if (argc > 0) {
    child = start_child(argv, !power_out_path, &old_mask);
    if (child < 0) {
      cli_error(cmd, false, "cannot start '%s': %s", argv[0], strerror(errno));
      child_done = true;
      exit_code = 127;
    }
  }

  double period = interval_ms / 1000.0;
  double t0 = zeus_devices_now(d);
  double next = t0;
  int status = CLI_EXIT_OK;
  bool failed_once[ZEUS_MAX_GPUS * (NUM_DOMAINS + 1)] = {false};
  for (;;) {
    if (!child_done) {
      int ws;
      child_flag = 0;
      if (waitpid(child, &ws, WNOHANG) == child) {
        child_done = true;
        exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
      } else if (term_flag) {
        kill(child, SIGTERM); /* SIGTERM is passed on; we go on until CMD ends */
        term_flag = 0;
      }
    }
    /* Without CMD, SIGINT and SIGTERM end sampling; with CMD, CMD's end does (SIGINT from the
     * terminal reaches CMD as well). */
    if (argc == 0 && (stop_flag || term_flag)) break;
    double now = zeus_devices_now(d);
    bool sampling = duration_s < 0 || now - t0 <= duration_s + 1e-9;
    if (argc == 0 && !sampling) break;
    bool last = argc > 0 && child_done; /* a row at CMD's end, then stop */
    if (sampling && (now >= next || last)) {
      fprintf(out, "%.3f", time_mode == 1 ? zeus_wall_s() : now - t0);
      for (size_t c = 0; c < ncols; c++) {
        unsigned v;
        int rc = cols[c].domain < 0
                     ? zeus_gpu_temperature(d, cols[c].gpu, &v)
                     : zeus_gpu_power(d, cols[c].gpu, domain_codes[cols[c].domain], &v);
        if (rc == ZEUS_OK && cols[c].domain < 0)
          fprintf(out, ",%u", v);
        else if (rc == ZEUS_OK)
          fprintf(out, ",%.3f", v / 1000.0);
        else {
          fprintf(out, ",");
          if (!failed_once[c])
            cli_error(cmd, true, "GPU %u: reading %s failed (cell left empty)", cols[c].gpu,
                      cols[c].domain < 0 ? "the temperature" : domain_names[cols[c].domain]);
          failed_once[c] = true;
          status = CLI_EXIT_FAIL;
        }
      }
      fprintf(out, "\n");
      fflush(out);
      /* The next deadline on the schedule t0 + k * period: a late sample skips missed ones. */
      while (next <= now) next += period;
    }
    if (last) break;
    /* After the duration, only CMD's end is waited for. */
    sleep_until(d, sampling ? next : now + 3600, &old_mask);
  }
  bool ok = !ferror(out);
  if (rf.f) {
    if (ok)
      ok = cli_report_commit(cmd, &rf, power_out_path);
    else
      cli_report_discard(&rf);
  }
  if (!ok && !rf.f) cli_error(cmd, false, "cannot write the CSV");
  sigprocmask(SIG_SETMASK, &old_mask, NULL);
  signal(SIGCHLD, SIG_DFL);
  if (argc > 0) return exit_code ? exit_code : ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  return ok ? status : CLI_EXIT_FAIL;
}

/* ---- zeus monitor power --from: the power streams of other nodes --------------------------- */

/* One row (CSV) or object (JSON Lines) per event, in the order of arrival. */
static void print_event(FILE *out, zeus_power_stream *ps, const zeus_power_stream_event *e) {
  const char *node = zeus_power_stream_endpoint(ps, e->server);
  const char *kind = e->kind == ZEUS_POWER_STREAM_CPU ? "cpu" : "gpu";
  if (power_json) {
    json_t *o = json_pack("{s:f,s:s,s:s,s:i,s:f}", "unix_time_s", round(e->timestamp_s * 1000) / 1000, "node",
                          node, "kind", kind, "device", (int)e->device, "power_w", e->power_w);
    if (o) json_object_set_new(o, "dram_w", isnan(e->dram_w) ? json_null() : json_real(e->dram_w));
    char *t = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(16)) : NULL;
    if (t) fprintf(out, "%s\n", t);
    free(t);
    json_decref(o);
  } else {
    /* A node name with a comma or quote is quoted, as CSV wants. */
    bool quote = strpbrk(node, ",\"\n") != NULL;
    fprintf(out, "%.3f,", e->timestamp_s);
    if (quote) {
      fputc('"', out);
      for (const char *c = node; *c; c++) {
        if (*c == '"') fputc('"', out);
        fputc(*c, out);
      }
      fputc('"', out);
    } else {
      fputs(node, out);
    }
    fprintf(out, ",%s%u,%.3f,", kind, e->device, e->power_w);
    if (!isnan(e->dram_w)) fprintf(out, "%.3f", e->dram_w);
    fputc('\n', out);
  }
}

static int run_power_from(int argc, char **argv) {
  const char *cmd = "monitor power";
  char *list = strdup(power_from);
  size_t cap = 8, n = 0;
  zeus_power_stream_server *sv = calloc(cap, sizeof *sv);
  char gpu_ids[ZEUS_MAX_GPUS * 4 + 1] = "";
  if (gpu_list.given) {
    size_t o = 0;
    for (size_t k = 0; k < gpu_list.n; k++)
      o += (size_t)snprintf(gpu_ids + o, sizeof gpu_ids - o, "%s%u", k ? "," : "", gpu_list.idx[k]);
  }
  const char *token = getenv("ZEUSD_TOKEN");
  if (token && !*token) token = NULL;
  int status = CLI_EXIT_OK;
  zeus_power_stream *ps = NULL;
  if (!list || !sv) {
    cli_error(cmd, false, "out of memory");
    status = CLI_EXIT_FAIL;
    goto done;
  }
  char *save = NULL;
  for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
    if (strncmp(w, "unix:", 5) != 0 && strncmp(w, "tcp:", 4) != 0) {
      cli_error(cmd, false, "--from: '%s' is not unix:PATH or tcp:HOST:PORT", w);
      status = CLI_EXIT_USAGE;
      goto done;
    }
    if (n == cap) {
      zeus_power_stream_server *nv = realloc(sv, 2 * cap * sizeof *sv);
      if (!nv) { status = CLI_EXIT_FAIL; goto done; }
      sv = nv;
      cap *= 2;
    }
    sv[n++] = (zeus_power_stream_server){
        .address = w, .token = token, .gpu_ids = gpu_list.given ? gpu_ids : NULL};
  }
  if (n == 0) {
    cli_error(cmd, false, "--from: no node given (unix:PATH or tcp:HOST:PORT, comma-separated)");
    status = CLI_EXIT_USAGE;
    goto done;
  }
  zeus_power_stream_opts o;
  zeus_power_stream_opts_init(&o);
  o.servers = sv;
  o.num_servers = n;
  o.queue_max = 65536;
  o.stall_timeout_s = stall_timeout_s;
  o.max_reconnect_delay_s = reconnect_max_s;
  if (o.reconnect_delay_s > reconnect_max_s) o.reconnect_delay_s = reconnect_max_s;
  if (zeus_power_stream_open(&ps, &o) != ZEUS_OK) {
    cli_error(cmd, true, "--from");
    status = CLI_EXIT_USAGE;
    goto done;
  }
  cli_report rf = {0};
  if (power_out_path && !cli_report_open(cmd, &rf, power_out_path)) {
    status = CLI_EXIT_FAIL;
    goto done;
  }
  FILE *out = rf.f ? rf.f : stdout;
  if (!power_json) fprintf(out, "unix_time_s,node,device,power_w,dram_w\n");
  fflush(out);

  struct sigaction sa = {.sa_handler = argc > 0 ? SIG_IGN : on_signal}, st = {.sa_handler = on_term};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &st, NULL);
  sigset_t empty;
  sigemptyset(&empty);
  pid_t child = -1;
  int exit_code = 0;
  if (argc > 0) {
    child = start_child(argv, !power_out_path, &empty);
    if (child < 0) {
      cli_error(cmd, false, "cannot start '%s': %s", argv[0], strerror(errno));
      exit_code = 127;
    }
  }
  double t0 = zeus_wall_s();
  uint64_t dropped = 0;
  for (;;) {
    if (child > 0) {
      int ws;
      if (waitpid(child, &ws, WNOHANG) == child) {
        exit_code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        child = -1;
      } else if (term_flag) {
        kill(child, SIGTERM);
        term_flag = 0;
      }
    }
    if (argc > 0 && child <= 0) break;
    if (argc == 0 && (stop_flag || term_flag)) break;
    if (duration_s >= 0 && zeus_wall_s() - t0 >= duration_s && argc == 0) break;
    zeus_power_stream_event e;
    bool any = false;
    while (zeus_power_stream_next(ps, any ? 0 : 0.1, &e) == ZEUS_OK) {
      any = true;
      print_event(out, ps, &e);
    }
    if (any) fflush(out);
  }
  dropped = zeus_power_stream_dropped(ps);
  if (dropped) cli_error(cmd, false, "%llu events were dropped (the output could not keep up)",
                         (unsigned long long)dropped);
  for (size_t i = 0; i < n; i++) {
    zeus_power_stream_status s;
    if (zeus_power_stream_server_status(ps, i, &s) != ZEUS_OK) continue;
    if (s.events == 0) {
      cli_error(cmd, false, "node %s sent no power event%s%s", zeus_power_stream_endpoint(ps, i),
                s.last_error[0] ? ": " : "", s.last_error);
      status = CLI_EXIT_FAIL;
    } else if (s.failures) {
      fprintf(stderr, "zeus %s: node %s: %llu events, %llu connections, %llu lost (last: %s)\n", cmd,
              zeus_power_stream_endpoint(ps, i), (unsigned long long)s.events, (unsigned long long)s.connects,
              (unsigned long long)s.failures, s.last_error);
    }
  }
  bool ok = !ferror(out);
  if (rf.f) {
    if (ok) ok = cli_report_commit(cmd, &rf, power_out_path);
    else cli_report_discard(&rf);
  }
  if (!ok && !rf.f) cli_error(cmd, false, "cannot write the output");
  if (argc > 0) status = exit_code ? exit_code : ok ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  else if (!ok) status = CLI_EXIT_FAIL;
done:
  zeus_power_stream_close(ps);
  free(sv);
  free(list);
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
  if (mode == 1 && power_json && !power_from) {
    cli_error("monitor power", false, "--json goes with --from (the local CSV has no JSON form)");
    return CLI_EXIT_USAGE;
  }
  return mode == 0 ? run_energy(nrest, rest) : mode == 1 && power_from ? run_power_from(nrest, rest) : run_power(nrest, rest);
}
