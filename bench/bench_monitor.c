/* Benchmark: the cost of a begin+end window pair, on the sim backend and through the fake NVML,
 * against the cost of the backend calls the pair itself makes (two energy reads and two clock
 * reads per GPU), measured in the same run. Prints ns per pair.
 *
 * Then the same pair with RAPL zones, on a fake powercap tree (ZEUS_RAPL_ROOT): the pair with
 * every package (and its DRAM zone) against the pair without CPUs and against the reads
 * themselves (a pread of each zone's energy file per bound, the least any reading can cost); what
 * is left is the monitor's own cost of the zones (target: at most 5 us per pair). For contrast,
 * the cost of reading the zones through zeus_cpu_energy(), which scans the folder every call. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zeus.h>

static double now_ns(void) { return (double)zeus_monotonic_ns(); }

/* ns per call of the device reads a window pair performs: per bound, now() + energy of each GPU. */
static double backend_ns(zeus_devices *d, unsigned ngpu, int iters) {
  uint64_t mj, sink = 0;
  double t0 = now_ns();
  for (int i = 0; i < iters; i++) {
    for (int b = 0; b < 2; b++) {
      sink += (uint64_t)zeus_devices_now(d);
      for (unsigned g = 0; g < ngpu; g++) {
        zeus_gpu_total_energy(d, g, &mj);
        sink += mj;
      }
    }
  }
  double ns = (now_ns() - t0) / iters;
  if (sink == 42) puts("");
  return ns;
}

static double pair_ns(zeus_monitor *m, int iters) {
  zeus_measurement r;
  double t0 = now_ns();
  for (int i = 0; i < iters; i++) {
    zeus_monitor_begin_window(m, "bench", false);
    zeus_monitor_end_window(m, "bench", false, &r);
  }
  return (now_ns() - t0) / iters;
}

static int run(const char *label, zeus_devices_opts *o, int iters) {
  zeus_devices *d;
  if (zeus_devices_open(&d, o) != ZEUS_OK) {
    printf("%-28s skipped: %s\n", label, zeus_errmsg());
    return 0;
  }
  static const unsigned none[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = none, .num_cpu_indices = 0};
  zeus_monitor *m;
  if (zeus_monitor_open(&m, &mo) != ZEUS_OK) {
    printf("%-28s failed: %s\n", label, zeus_errmsg());
    zeus_devices_close(d);
    return 1;
  }
  unsigned n = zeus_gpu_count(d);
  pair_ns(m, iters / 10); /* warm up */
  double best_pair = 1e18, best_be = 1e18;
  for (int rep = 0; rep < 5; rep++) {
    double p = pair_ns(m, iters), b = backend_ns(d, n, iters);
    if (p < best_pair) best_pair = p;
    if (b < best_be) best_be = b;
  }
  printf("%-28s GPUs %u  pair %8.1f ns  backend calls %8.1f ns  overhead %7.1f ns per pair (target < 1000)\n", label,
         n, best_pair, best_be, best_pair - best_be);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  return 0;
}

/* A fake powercap tree: npkg packages, each with a core and a dram sub-zone. */
static int make_rapl_tree(const char *root, unsigned npkg) {
  char path[512];
  for (unsigned p = 0; p < npkg; p++) {
    for (int sub = -1; sub < 2; sub++) {
      if (sub < 0) snprintf(path, sizeof path, "%s/intel-rapl:%u", root, p);
      else snprintf(path, sizeof path, "%s/intel-rapl:%u:%d", root, p, sub);
      if (mkdir(path, 0755) != 0) return -1;
      static const char *const files[][2] = {{"energy_uj", "123456789012\n"}, {"max_energy_range_uj", "262143328850\n"}};
      for (int f = 0; f < 2; f++) {
        char fp[600];
        snprintf(fp, sizeof fp, "%s/%s", path, files[f][0]);
        FILE *out = fopen(fp, "w");
        if (!out) return -1;
        fputs(files[f][1], out);
        fclose(out);
      }
      char fp[600];
      snprintf(fp, sizeof fp, "%s/name", path);
      FILE *out = fopen(fp, "w");
      if (!out) return -1;
      if (sub < 0) fprintf(out, "package-%u\n", p);
      else fputs(sub == 0 ? "core\n" : "dram\n", out);
      fclose(out);
    }
  }
  return 0;
}

/* ns per window pair of the reads themselves: every package's and DRAM zone's energy file read
 * with pread() and parsed, twice (one per bound), through files opened beforehand. */
static double rapl_reads_ns(const char *root, unsigned npkg, int iters) {
  int fds[32];
  unsigned n = 0;
  for (unsigned p = 0; p < npkg; p++) {
    char path[600];
    snprintf(path, sizeof path, "%s/intel-rapl:%u/energy_uj", root, p);
    fds[n++] = open(path, O_RDONLY);
    snprintf(path, sizeof path, "%s/intel-rapl:%u:1/energy_uj", root, p);
    fds[n++] = open(path, O_RDONLY);
  }
  unsigned long long sink = 0;
  double t0 = now_ns();
  for (int i = 0; i < iters; i++) {
    for (int b = 0; b < 2; b++) {
      for (unsigned k = 0; k < n; k++) {
        char buf[32];
        ssize_t got = pread(fds[k], buf, sizeof buf - 1, 0);
        if (got > 0) {
          buf[got] = '\0';
          sink += strtoull(buf, NULL, 10);
        }
      }
    }
  }
  double ns = (now_ns() - t0) / iters;
  for (unsigned k = 0; k < n; k++) close(fds[k]);
  if (sink == 42) puts("");
  return ns;
}

/* ns per window pair when every bound reads the zones through zeus_cpu_energy() (one scan of the
 * folder per call, as every read did before the monitor kept its zones). */
static double rapl_scan_ns(unsigned npkg, int iters) {
  uint64_t pkg, dram, sink = 0;
  bool has;
  double t0 = now_ns();
  for (int i = 0; i < iters; i++)
    for (int b = 0; b < 2; b++)
      for (unsigned p = 0; p < npkg; p++) {
        zeus_cpu_energy(p, &pkg, &has, &dram);
        sink += pkg + dram;
      }
  double ns = (now_ns() - t0) / iters;
  if (sink == 42) puts("");
  return ns;
}

static int run_rapl(int iters) {
  char root[] = "/tmp/zeus-bench-rapl.XXXXXX";
  if (!mkdtemp(root)) {
    printf("RAPL: skipped: cannot make a temporary folder\n");
    return 1;
  }
  printf("\nwindow pair with RAPL zones on a fake powercap tree (%s), sim backend, 1 GPU\n", root);
  int rc = 0;
  for (unsigned npkg = 1; npkg <= 2; npkg++) {
    char sub[64];
    snprintf(sub, sizeof sub, "%s/%u", root, npkg);
    if (mkdir(sub, 0755) != 0 || make_rapl_tree(sub, npkg) != 0) {
      printf("RAPL: skipped: cannot write the fake tree\n");
      return 1;
    }
    setenv("ZEUS_RAPL_ROOT", sub, 1);
    setenv("ZEUS_SIM_GPUS", "1", 1);
    zeus_devices_opts so = {.backend = "sim", .all_devices = true};
    zeus_devices *d;
    if (zeus_devices_open(&d, &so) != ZEUS_OK) return 1;
    static const unsigned none[1];
    zeus_monitor_opts without = {.devices = d, .cpu_indices = none, .num_cpu_indices = 0};
    zeus_monitor_opts with = {.devices = d};
    zeus_monitor *m0, *m1;
    if (zeus_monitor_open(&m0, &without) != ZEUS_OK || zeus_monitor_open(&m1, &with) != ZEUS_OK) {
      printf("RAPL: failed: %s\n", zeus_errmsg());
      zeus_devices_close(d);
      return 1;
    }
    pair_ns(m1, iters / 10);
    double best0 = 1e18, best1 = 1e18, reads = 1e18;
    for (int rep = 0; rep < 5; rep++) {
      double a = pair_ns(m0, iters), b = pair_ns(m1, iters), r = rapl_reads_ns(sub, npkg, iters);
      if (a < best0) best0 = a;
      if (b < best1) best1 = b;
      if (r < reads) reads = r;
    }
    double scan = rapl_scan_ns(npkg, iters / 100 > 100 ? iters / 100 : 100);
    double over = best1 - best0 - reads;
    printf("%u package%s + DRAM (%u zones)  pair without RAPL %8.1f ns  with RAPL %8.1f ns  reads alone %8.1f ns\n"
           "                               RAPL cost beyond the reads %7.1f ns per pair (target <= 5000)%s\n"
           "                               for contrast, reading through zeus_cpu_energy() (a folder scan per "
           "read): %.0f ns per pair\n",
           npkg, npkg == 1 ? " " : "s", 2 * npkg, best0, best1, reads, over, over <= 5000 ? "" : "  OVER TARGET", scan);
    if (over > 5000) rc = 1;
    zeus_monitor_close(m1);
    zeus_monitor_close(m0);
    zeus_devices_close(d);
  }
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("(could not remove %s)\n", root);
  setenv("ZEUS_RAPL_ROOT", "/nonexistent", 1);
  return rc;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 200000;
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  setenv("ZEUS_RAPL_ROOT", "/nonexistent", 1);
  printf("monitor begin+end window pair (best of 5 runs of %d pairs)\n", iters);
  int rc = 0;
  for (unsigned g = 1; g <= 4; g *= 4) {
    char label[64];
    char ngpu[8];
    snprintf(ngpu, sizeof ngpu, "%u", g);
    setenv("ZEUS_SIM_GPUS", ngpu, 1);
    zeus_devices_opts sim = {.backend = "sim", .all_devices = true};
    snprintf(label, sizeof label, "sim backend");
    rc |= run(label, &sim, iters);
    zeus_devices_opts nv = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH, .all_devices = true};
    snprintf(label, sizeof label, "nvml backend (fake NVML)");
    rc |= run(label, &nv, iters);
  }
  rc |= run_rapl(iters);
  return rc;
}
