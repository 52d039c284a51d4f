/* Example: measure the time and energy of the same work at several GPU power limits.
 *
 *   measure_power_limits [UNITS]     (measure_power_limits --help says more)
 *
 * Runs on whatever backend the environment selects (ZEUS_GPU_BACKEND); on the simulated GPU
 * (ZEUS_GPU_BACKEND=sim) the work is simulated, elsewhere it only measures idle time. Setting
 * power limits on real GPUs needs root or CAP_SYS_ADMIN; the original limit is restored at exit. */
#include <stdio.h>
#include <stdlib.h>

#include <zeus.h>

#include "opt.h" /* the zeus CLI's option parser (cli/opt.h) */

static const cli_command cmd = {
    .name = "measure_power_limits",
    .program = "measure_power_limits",
    .usage = "measure_power_limits [UNITS]",
    .about = "Measures the time and energy of the same work (UNITS units of simulated work, default\n"
             "200) on GPU 0 at each power limit from the maximum down in 25 W steps, and prints one\n"
             "row per limit. On the simulated GPU (ZEUS_GPU_BACKEND=sim) the work is simulated;\n"
             "elsewhere it only measures idle time. Setting power limits on real GPUs needs root or\n"
             "CAP_SYS_ADMIN; the original limit is put back at exit.",
    .more = "Example:\n"
            "  ZEUS_GPU_BACKEND=sim ZEUS_SIM_CLOCK=virtual measure_power_limits 200\n\n"
            "Environment: ZEUS_GPU_BACKEND, ZEUS_SIM_* (ZEUS_SIM_CLOCK=virtual: simulated time),\n"
            "CUDA_VISIBLE_DEVICES, ZEUS_LOG_LEVEL.\n",
    .args = CLI_ARGS_ANY,
    .min_args = 0,
    .max_args = 1,
    .args_name = "UNITS",
};

int main(int argc, char **argv) {
  char **rest;
  int nrest;
  int rc = cli_parse(&cmd, argc, argv, &rest, &nrest);
  if (rc != CLI_CONTINUE) return rc;
  double units = 200;
  if (nrest == 1) {
    char *end;
    units = strtod(rest[0], &end);
    if (end == rest[0] || *end || !(units > 0 && units <= 1e9)) {
      fprintf(stderr, "measure_power_limits: UNITS must be a number in (0, 1e9], got '%s'\n", rest[0]);
      return 2;
    }
  }
  zeus_set_log_callback(zeus_log_stderr_sink, NULL);
  zeus_devices *dev;
  if (zeus_devices_open(&dev, NULL) != ZEUS_OK) {
    fprintf(stderr, "measure_power_limits: %s\n", zeus_errmsg());
    return 1;
  }
  if (zeus_gpu_count(dev) == 0) {
    fprintf(stderr, "measure_power_limits: no GPU (try ZEUS_GPU_BACKEND=sim)\n");
    zeus_devices_close(dev);
    return 1;
  }
  zeus_sim_node *sim = zeus_devices_sim_node(dev);
  unsigned gpu0 = 0, min_mw, max_mw, def_mw;
  zeus_monitor_opts mo = {.devices = dev, .gpu_indices = &gpu0, .num_gpu_indices = 1};
  zeus_monitor *mon;
  if (zeus_monitor_open(&mon, &mo) || zeus_gpu_power_limit_constraints(dev, 0, &min_mw, &max_mw, &def_mw)) {
    fprintf(stderr, "measure_power_limits: %s\n", zeus_errmsg());
    zeus_devices_close(dev);
    return 1;
  }
  printf("%-14s %10s %12s %12s\n", "power limit W", "time s", "energy J", "avg power W");
  for (unsigned mw = max_mw; mw >= min_mw && mw <= max_mw; mw -= 25000) {
    if (zeus_gpu_set_power_limit(dev, 0, mw) != ZEUS_OK) {
      fprintf(stderr, "measure_power_limits: %s\n", zeus_errmsg());
      break;
    }
    zeus_measurement r;
    zeus_monitor_begin_window(mon, "work", false);
    if (sim) {
      unsigned node_gpu;
      zeus_devices_sim_index(dev, 0, &node_gpu);
      zeus_sim_work(sim, node_gpu, units, NULL);
    }
    zeus_monitor_end_window(mon, "work", false, &r);
    printf("%-14.0f %10.3f %12.1f %12.1f\n", mw / 1000.0, r.time_s, r.gpu_energy_j[0],
           r.time_s > 0 ? r.gpu_energy_j[0] / r.time_s : 0.0);
  }
  zeus_monitor_close(mon);
  zeus_devices_close(dev); /* puts the original power limit back */
  return 0;
}
