/* zeus exporter: serve the GPUs' and CPU packages' energy, power, limits, clocks and temperature
 * to Prometheus (GET /metrics). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "grid_util.h"

static const char *host_opt = "127.0.0.1";
static int port_opt = 9401;
static bool port_given, once_opt, no_cpus_opt;
static double interval_opt = 0.1, request_timeout_opt = 5;
static int max_conn_opt = 64;
static cli_index_list sim_work;

static const cli_opt exporter_opts[] = {
    {"host", 0, CLI_OPT_STRING, &host_opt, "ADDR",
     "address to listen on; anything but loopback exposes the readings to the network", "127.0.0.1"},
    {"port", 0, CLI_OPT_INT, &port_opt, "N", "port; 0 picks a free one (printed at start)", "9401", 0, 65535,
     .seen = &port_given},
    {"interval", 0, CLI_OPT_DOUBLE, &interval_opt, "S",
     "sampling period between scrapes: integrates the power of GPUs without an energy counter and catches "
     "RAPL wrap-arounds",
     "0.1", 0.001, 10},
    {"max-connections", 0, CLI_OPT_INT, &max_conn_opt, "N",
     "connections served at once; when all are held, a new one takes the slot of the oldest that has "
     "not sent a whole request",
     "64", 1, 100000},
    {"request-timeout", 0, CLI_OPT_DOUBLE, &request_timeout_opt, "S",
     "a request's headers must arrive within S s of the connection opening or of its last reply", "5", 0.1, 3600},
    {"no-cpus", 0, CLI_OPT_FLAG, &no_cpus_opt, NULL, "leave the RAPL CPU packages out"},
    {"once", 0, CLI_OPT_FLAG, &once_opt, NULL,
     "print one scrape on standard output and exit (no server; for a look, or promtool check metrics)"},
    {"sim-work", 0, CLI_OPT_CUSTOM, &sim_work, "LIST",
     "simulated GPUs only (ZEUS_GPU_BACKEND=sim): keep these visible GPUs busy with simulated work while "
     "serving, so that a dashboard or a test sees working power; the others idle",
     NULL, .parse = cli_opt_index_list},
    CLI_GRID_EXPORTER_OPTS,
    {0},
};

static const cli_command exporter_cmd = {
    .name = "exporter",
    .usage = "zeus exporter [--host ADDR] [--port N] [--interval S] [--no-cpus] [--once] [--sim-work LIST]\n"
             "              [--carbon latlon:LAT,LON] [--price latlon:LAT,LON --price-label LABEL]",
    .about =
        "Serve the readings of every visible GPU and RAPL CPU package to Prometheus: GET /metrics\n"
        "answers in the Prometheus text format with, per GPU (labels gpu, uuid, name), the energy\n"
        "used as a counter in joules (zeus_gpu_energy_joules_total: the GPU's energy counter, or its\n"
        "power integrated where it has none; it never decreases), power now and averaged, power limit\n"
        "and its range, SM and memory clocks and temperature, and whether each clock is locked\n"
        "(zeus_gpu_clock_locked: only where known, since NVML cannot read a lock back: the simulated\n"
        "GPU, or GPUs read through zeus daemon, which knows the locks made through it); per CPU\n"
        "package the package and DRAM energy in joules. A scrape reads the devices again, so values\n"
        "are current. docs/metrics.md lists every series and the dcgm-exporter fields they match.\n"
        "\n"
        "Listens on loopback unless --host says otherwise. Runs until SIGINT or SIGTERM.",
    .opts = exporter_opts,
    .more =
        "Examples:\n"
        "  zeus exporter --port 9401                    # then scrape http://127.0.0.1:9401/metrics\n"
        "  ZEUS_GPU_BACKEND=sim ZEUS_SIM_GPUS=2 zeus exporter --sim-work 0 --port 0\n"
        "  zeus exporter --once | promtool check metrics\n"
        "\n"
        "Prometheus scrape configuration (see packaging/grafana-zeus.json for a dashboard):\n"
        "  scrape_configs:\n"
        "    - job_name: zeus\n"
        "      static_configs: [{targets: ['127.0.0.1:9401']}]\n"
        "\n"
        "Environment: ZEUS_EXPORTER_TOKEN (a bearer token every scrape must send; Prometheus:\n"
        "authorization: {credentials: ...}), ZEUS_GPU_BACKEND, ZEUS_NVML_LIBRARY,\n"
        "CUDA_VISIBLE_DEVICES, ZEUS_SIM_*, ZEUS_RAPL_ROOT, ZEUS_LOG_LEVEL (see 'zeus --help');\n"
        "with --carbon/--price: ZEUS_ELECTRICITYMAPS_URL, ZEUS_ELECTRICITYMAPS_API_KEY(_FILE),\n"
        "ZEUS_OPENEI_URL, ZEUS_OPENEI_API_KEY(_FILE) (keys are never printed).\n",
    .args = CLI_ARGS_NONE,
};

typedef struct sim_worker {
  zeus_sim_node *node;
  double units[ZEUS_MAX_GPUS];
  volatile sig_atomic_t stop;
} sim_worker;

/* Keeps the chosen simulated GPUs busy in pieces of a few units (a fraction of a second each). */
static void *sim_work_main(void *arg) {
  sim_worker *w = arg;
  while (!w->stop)
    if (zeus_sim_work_all(w->node, w->units, NULL) != ZEUS_OK) break;
  return NULL;
}

int cmd_exporter(int argc, char **argv) {
  const char *cmd = "exporter";
  int rc = cli_parse(&exporter_cmd, argc, argv, NULL, NULL);
  if (rc != CLI_CONTINUE) return rc;
  zeus_devices *d;
  if (zeus_devices_open(&d, NULL) != ZEUS_OK) {
    cli_error(cmd, true, "cannot open the GPUs");
    return CLI_EXIT_FAIL;
  }
  sim_worker worker = {0};
  if (sim_work.given) {
    if (!(worker.node = zeus_devices_sim_node(d))) {
      cli_error(cmd, false, "--sim-work needs simulated GPUs (ZEUS_GPU_BACKEND=sim); the backend is %s",
                zeus_devices_backend(d));
      zeus_devices_close(d);
      return CLI_EXIT_USAGE;
    }
    for (size_t k = 0; k < sim_work.n; k++) {
      unsigned ng;
      if (zeus_devices_sim_index(d, sim_work.idx[k], &ng) != ZEUS_OK) {
        cli_error(cmd, false, "--sim-work: no visible GPU %u (%u visible)", sim_work.idx[k], zeus_gpu_count(d));
        zeus_devices_close(d);
        return CLI_EXIT_USAGE;
      }
      worker.units[ng] = 10; /* half a second per piece at the highest clock */
    }
  }
  zeus_exporter_opts o;
  zeus_exporter_opts_init(&o);
  o.devices = d;
  o.host = host_opt;
  o.port = port_given && port_opt == 0 ? -1 : port_opt;
  o.no_cpus = no_cpus_opt;
  o.no_http = once_opt;
  o.sample_interval_s = interval_opt;
  o.max_connections = (unsigned)max_conn_opt;
  o.request_timeout_s = request_timeout_opt;
  const char *token = getenv("ZEUS_EXPORTER_TOKEN");
  o.token = token && *token ? token : NULL;

  cli_serve_block_signals(); /* before any thread starts, the grid fetcher's included */
  struct zeus_grid *grids[2];
  cli_grid_fetcher *fetcher = NULL;
  if (!cli_grid_fetch_start(cmd, once_opt, grids, &o.num_grids, &fetcher)) {
    zeus_devices_close(d);
    return CLI_EXIT_USAGE;
  }
  o.grids = grids;
  zeus_exporter *e;
  rc = zeus_exporter_open(&e, &o);
  pthread_t worker_thread;
  bool worker_started = false;
  if (rc == ZEUS_OK && worker.node && !once_opt)
    worker_started = pthread_create(&worker_thread, NULL, sim_work_main, &worker) == 0;
  if (rc) {
    cli_error(cmd, true, "cannot start");
    cli_grid_fetch_stop(fetcher);
    zeus_devices_close(d);
    return CLI_EXIT_FAIL;
  }
  int status = CLI_EXIT_OK;
  if (once_opt) {
    char *text;
    size_t len;
    if (zeus_exporter_render(e, &text, &len) == ZEUS_OK) {
      fwrite(text, 1, len, stdout);
      zeus_free(text);
    } else {
      cli_error(cmd, true, "cannot read the devices");
      status = CLI_EXIT_FAIL;
    }
  } else {
    printf("zeus exporter: serving /metrics on %s port %d\n", host_opt, zeus_exporter_port(e));
    fflush(stdout);
    cli_serve_wait();
    fprintf(stderr, "zeus exporter: shutting down\n");
  }
  if (worker_started) {
    worker.stop = 1;
    pthread_join(worker_thread, NULL);
  }
  zeus_exporter_close(e);
  cli_grid_fetch_stop(fetcher);
  zeus_devices_close(d);
  return status;
}
