/* Example: measure the time and energy of the same work at several GPU power limits.
 *
 *   measure_power_limits [UNITS]
 *
 * Runs on whatever backend the environment selects (ZEUS_GPU_BACKEND); on the simulated GPU
 * (ZEUS_GPU_BACKEND=sim) the work is simulated, elsewhere it only measures idle time. Setting
 * power limits on real GPUs needs root or CAP_SYS_ADMIN; the original limit is restored at exit. */
#include <stdio.h>
#include <stdlib.h>

#include <zeus.h>

int main(int argc, char **argv) {
  double units = argc > 1 ? atof(argv[1]) : 200;
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
