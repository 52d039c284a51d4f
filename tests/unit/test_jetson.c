/* NVIDIA Jetson power rails (zeus/soc.h) on fake sysfs trees under ZEUS_JETSON_ROOT: the two
 * layouts the original reads (rail_name_<N> under ina3221x on older kernels; in<N>_label under
 * ina3221/<dev>/hwmon/hwmon<M> on newer ones), the two strategies (a power file; voltage x
 * current), the errors, and the monitor's energy windows against the integral of the power a
 * writer thread puts in the files while the windows run. */
#include "test_util.h"

#include <math.h>
#include <pthread.h>
#include <fcntl.h>

#include <zeus.h>
#include <zeus/config.h>

static char root[512];

static void mkdirs(const char *path) {
  char p[1024];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = '\0';
    mkdir(p, 0755);
    *s = '/';
  }
  mkdir(p, 0755);
}

/* Writes `text` to <dir>/<name>. */
static void put(const char *dir, const char *name, const char *text) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  zeus_test_write_file(p, text);
}

/* A fresh root with ZEUS_JETSON_ROOT pointing at it; returns the folder of the rails of the
 * given layout: old: <root>/bus/i2c/drivers/ina3221x/1-0040/iio:device0; new:
 * <root>/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3. */
static const char *fresh_tree(bool new_layout, char *dir, size_t len) {
  zeus_test_tmpdir(root, sizeof root);
  setenv("ZEUS_JETSON_ROOT", root, 1);
  snprintf(dir, len, "%s/bus/i2c/drivers/%s", root,
           new_layout ? "ina3221/1-0040/hwmon/hwmon3" : "ina3221x/1-0040/iio:device0");
  mkdirs(dir);
  /* what else sits in a driver's folder: files, which are not devices */
  char drv[1024];
  snprintf(drv, sizeof drv, "%s/bus/i2c/drivers/%s", root, new_layout ? "ina3221" : "ina3221x");
  put(drv, "uevent", "");
  return dir;
}

static void expect_power(zeus_soc *s, zeus_soc_rail r, double mw) {
  double got = -1;
  assert_zeus_ok(zeus_soc_power(s, r, &got));
  assert_near(got, mw, 1e-9);
}

static void jetson_is_never_detected_without_root_off_a_jetson(void **state) {
  (void)state;
  unsetenv("ZEUS_JETSON_ROOT");
  bool real = access("/etc/nv_tegra_release", F_OK) == 0 || access("/usr/lib/aarch64-linux-gnu/tegra", F_OK) == 0;
#if !(defined(__linux__) && defined(__aarch64__))
  real = false;
#endif
  if (real) {
    print_message("SKIPPED: this machine is a Jetson\n");
    return;
  }
  assert_false(zeus_soc_jetson_available());
  assert_string_equal(zeus_soc_jetson_root(), "/sys");
  zeus_soc *s = NULL;
  assert_zeus_err(zeus_soc_open(&s), ZEUS_ENOENT, "no NVIDIA Jetson here");
  assert_null(s);
  /* and a monitor measures no SoC */
  zeus_devices_opts dopts;
  zeus_devices_opts_init(&dopts);
  dopts.backend = "none";
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &dopts));
  zeus_monitor_opts o;
  zeus_monitor_opts_init(&o);
  o.devices = d;
  unsigned none = 0;
  o.cpu_indices = &none;
  zeus_monitor *m;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  assert_null(zeus_monitor_soc(m));
  assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
  assert_false(r.soc_valid);
  assert_false(r.soc_rail_valid[ZEUS_SOC_RAIL_TOTAL]);
  double j;
  assert_zeus_err(zeus_monitor_soc_energy_now(m, ZEUS_SOC_RAIL_TOTAL, &j), ZEUS_ENOTSUP, "no Jetson here");
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

/* Older kernels: rail_name_<N>, in_power<N>_input (mW), or in_voltage<N>_input (mV) x
 * in_current<N>_input (mA). */
static void jetson_old_layout_reads_power_files_and_voltage_times_current(void **state) {
  (void)state;
  char dir[1024];
  fresh_tree(false, dir, sizeof dir);
  assert_true(zeus_soc_jetson_available());
  put(dir, "rail_name_0", "VDD_IN\n");
  put(dir, "in_power0_input", "5123\n");
  put(dir, "in_voltage0_input", "1\n"); /* the power file wins over voltage x current */
  put(dir, "in_current0_input", "1\n");
  put(dir, "rail_name_1", "VDD_SYS_CPU\n");
  put(dir, "in_voltage1_input", "5000\n");
  put(dir, "in_current1_input", "240\n");
  put(dir, "rail_name_2", "VDD_SYS_GPU\n");
  put(dir, "in_power2_input", "777.5\n");
  put(dir, "rail_name_3", "VDD_SYS_SOC\n"); /* not a rail the original measures */
  put(dir, "in_power3_input", "999\n");
  zeus_soc *s;
  assert_zeus_ok(zeus_soc_open(&s));
  assert_string_equal(zeus_soc_kind(s), "jetson");
  expect_power(s, ZEUS_SOC_RAIL_TOTAL, 5123);
  expect_power(s, ZEUS_SOC_RAIL_CPU, 5000.0 * 240 / 1000); /* 1200 mW */
  expect_power(s, ZEUS_SOC_RAIL_GPU, 777.5);
  zeus_soc_rail_desc ri;
  assert_zeus_ok(zeus_soc_rail_info(s, ZEUS_SOC_RAIL_CPU, &ri));
  assert_true(ri.present);
  assert_false(ri.direct);
  assert_string_equal(ri.label, "VDD_SYS_CPU");
  char want[1100];
  snprintf(want, sizeof want, "%s/in_voltage1_input", dir);
  assert_string_equal(ri.voltage_path, want);
  snprintf(want, sizeof want, "%s/in_current1_input", dir);
  assert_string_equal(ri.current_path, want);
  assert_string_equal(ri.power_path, "");
  assert_zeus_ok(zeus_soc_rail_info(s, ZEUS_SOC_RAIL_TOTAL, &ri));
  assert_true(ri.direct);
  snprintf(want, sizeof want, "%s/in_power0_input", dir);
  assert_string_equal(ri.power_path, want);
  /* the files are read afresh: a new value is the new power */
  put(dir, "in_power0_input", "6000\n");
  put(dir, "in_current1_input", "500\n");
  expect_power(s, ZEUS_SOC_RAIL_TOTAL, 6000);
  expect_power(s, ZEUS_SOC_RAIL_CPU, 2500);
  zeus_soc_close(s);
}

/* Newer kernels: ina3221/<dev>/hwmon/hwmon<M>/in<N>_label, in<N>_input (mV) x curr<N>_input
 * (mA), or power<N>_input (mW); Orin's names. A rail with neither is skipped. */
static void jetson_new_hwmon_layout_reads_labels_and_both_strategies(void **state) {
  (void)state;
  char dir[1024];
  fresh_tree(true, dir, sizeof dir);
  put(dir, "in1_label", "VDD_GPU_SOC\n");
  put(dir, "in1_input", "5080\n");
  put(dir, "curr1_input", "1200\n");
  put(dir, "in2_label", "VDD_CPU_CV\n");
  put(dir, "power2_input", "2345\n");
  put(dir, "in3_label", "VIN_SYS_5V0\n"); /* "_in"? no: "vin_sys": neither; "sys" is not "system" */
  put(dir, "in3_input", "5000\n");
  put(dir, "curr3_input", "100\n");
  /* a second chip, its device folder a link as in real sysfs (drivers/ina3221/1-0041 ->
   * devices/...): the total rail, without its current file (skipped), then a full one */
  char dev[1024], link[1024], dir2[1100];
  snprintf(dev, sizeof dev, "%s/devices/platform/i2c/1-0041", root);
  snprintf(dir2, sizeof dir2, "%s/hwmon/hwmon4", dev);
  mkdirs(dir2);
  snprintf(link, sizeof link, "%s/bus/i2c/drivers/ina3221/1-0041", root);
  assert_int_equal(symlink(dev, link), 0);
  put(dir2, "in1_label", "VDD_IN\n");
  put(dir2, "in1_input", "5000\n");
  zeus_soc *s;
  assert_zeus_ok(zeus_soc_open(&s));
  expect_power(s, ZEUS_SOC_RAIL_GPU, 5080.0 * 1200 / 1000);
  expect_power(s, ZEUS_SOC_RAIL_CPU, 2345);
  assert_false(zeus_soc_has_rail(s, ZEUS_SOC_RAIL_TOTAL));
  double mw;
  assert_zeus_err(zeus_soc_power(s, ZEUS_SOC_RAIL_TOTAL, &mw), ZEUS_ENOTSUP, "no total rail");
  zeus_soc_rail_desc ri;
  assert_zeus_ok(zeus_soc_rail_info(s, ZEUS_SOC_RAIL_TOTAL, &ri));
  assert_false(ri.present);
  assert_zeus_ok(zeus_soc_rail_info(s, ZEUS_SOC_RAIL_GPU, &ri));
  assert_string_equal(ri.label, "VDD_GPU_SOC");
  zeus_soc_close(s);
  put(dir2, "curr1_input", "2000\n");
  assert_zeus_ok(zeus_soc_open(&s));
  expect_power(s, ZEUS_SOC_RAIL_TOTAL, 10000);
  zeus_soc_close(s);
}

static void jetson_missing_and_malformed_files_give_errors_naming_them(void **state) {
  (void)state;
  zeus_soc *s = NULL;
  char dir[1024], path[1100];
  /* no driver folder */
  zeus_test_tmpdir(root, sizeof root);
  setenv("ZEUS_JETSON_ROOT", root, 1);
  assert_zeus_err(zeus_soc_open(&s), ZEUS_ENOENT, "bus/i2c/drivers/ina3221x nor");
  /* a driver folder without rails */
  fresh_tree(false, dir, sizeof dir);
  assert_zeus_err(zeus_soc_open(&s), ZEUS_ENOENT, "no measurable rail under");
  /* only a rail with a voltage file and no current file: skipped, so none */
  put(dir, "rail_name_0", "VDD_IN\n");
  put(dir, "in_voltage0_input", "5000\n");
  assert_zeus_err(zeus_soc_open(&s), ZEUS_ENOENT, "no measurable rail");
  /* a power file that is no number */
  put(dir, "in_power0_input", "n/a\n");
  snprintf(path, sizeof path, "%s/in_power0_input", dir);
  assert_zeus_err(zeus_soc_open(&s), ZEUS_EIO, path);
  assert_non_null(strstr(zeus_errmsg(), "holds 'n/a': expected a decimal number"));
  put(dir, "in_power0_input", "");
  assert_zeus_err(zeus_soc_open(&s), ZEUS_EIO, "holds '': expected a decimal number");
  put(dir, "in_power0_input", "12 mW\n");
  assert_zeus_err(zeus_soc_open(&s), ZEUS_EIO, "holds '12 mW'");
  put(dir, "in_power0_input", "0x10\n");
  assert_zeus_err(zeus_soc_open(&s), ZEUS_EIO, "holds '0x10'");
  /* a power file that is a link (another user's planted file): refused */
  char target[1100];
  snprintf(target, sizeof target, "%s/elsewhere", root);
  zeus_test_write_file(target, "5000\n");
  unlink(path);
  assert_int_equal(symlink(target, path), 0);
  assert_zeus_err(zeus_soc_open(&s), ZEUS_EIO, "is a symbolic link");
  /* a good file that turns bad after open: the reading names it */
  unlink(path);
  put(dir, "in_power0_input", "5000\n");
  assert_zeus_ok(zeus_soc_open(&s));
  expect_power(s, ZEUS_SOC_RAIL_TOTAL, 5000);
  put(dir, "in_power0_input", "garbage\n");
  double mw;
  assert_zeus_err(zeus_soc_power(s, ZEUS_SOC_RAIL_TOTAL, &mw), ZEUS_EIO, path);
  assert_non_null(strstr(zeus_errmsg(), "holds 'garbage'"));
  /* an unreadable power file (not for root, who reads anything) */
  if (geteuid() != 0) {
    put(dir, "in_power0_input", "5000\n");
    chmod(path, 0);
    assert_zeus_err(zeus_soc_open(&s), ZEUS_EIO, "cannot open the Jetson rail file");
  }
  zeus_soc_close(s);
}

/* ---- energy windows against a writer that changes the rails while they run ---- */

#define MAX_WRITES 4000

typedef struct writer {
  char total_path[1100], cur_path[1100];
  double dur_s, t_start;
  volatile bool stop;
  unsigned n;
  double t[MAX_WRITES], total_mw[MAX_WRITES], cpu_mw[MAX_WRITES]; /* value in force from t[i] */
} writer;

#define CPU_MV 5000.0

/* Rewrites a file in place (the reader keeps it open) with a fixed width, so that no reader ever
 * sees a shorter, torn number. */
static void rewrite(const char *path, double v) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%012.3f\n", v);
  int fd = open(path, O_WRONLY);
  if (fd < 0 || pwrite(fd, buf, (size_t)n, 0) != n) abort();
  close(fd);
}

/* Total: a triangle 1 W -> 9 W -> 1 W over the run; CPU: 5 V x a current falling 600 -> 100 mA.
 * A new value every 2 ms; each is logged with the instant it was in place. */
static void *writer_main(void *arg) {
  writer *w = arg;
  while (!w->stop && w->n < MAX_WRITES) {
    double now = zeus_monotonic_s(), x = (now - w->t_start) / w->dur_s;
    if (x > 1) x = 1;
    double total = 1000 + 8000 * (x < 0.5 ? 2 * x : 2 * (1 - x));
    double ma = 600 - 500 * x;
    double before = zeus_monotonic_s();
    rewrite(w->total_path, total);
    rewrite(w->cur_path, ma);
    double after = zeus_monotonic_s();
    w->t[w->n] = 0.5 * (before + after);
    w->total_mw[w->n] = total;
    w->cpu_mw[w->n] = CPU_MV * ma / 1000;
    w->n++;
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* The integral in J over [a, b] of the values logged (each in force until the next). */
static double truth_j(const writer *w, const double *mw, double a, double b) {
  double e = 0;
  for (unsigned i = 0; i < w->n; i++) {
    double lo = fmax(w->t[i], a), hi = fmin(i + 1 < w->n ? w->t[i + 1] : INFINITY, b);
    if (hi > lo) e += mw[i] / 1000 * (hi - lo);
  }
  return e;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

static zeus_devices *no_gpus(void) {
  zeus_devices_opts dopts;
  zeus_devices_opts_init(&dopts);
  dopts.backend = "none";
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &dopts));
  return d;
}

static void monitor_jetson_window_energy_is_the_integral_of_the_power_written(void **state) {
  (void)state;
  for (int layout = 0; layout < 2; layout++) { /* old then new layout */
    char dir[1024];
    fresh_tree(layout == 1, dir, sizeof dir);
    static writer w;
    memset(&w, 0, sizeof w);
    if (layout == 0) {
      put(dir, "rail_name_0", "VDD_IN\n");
      put(dir, "in_power0_input", "000001000.000\n");
      put(dir, "rail_name_1", "VDD_CPU\n");
      put(dir, "in_voltage1_input", "5000\n");
      put(dir, "in_current1_input", "000000600.000\n");
      snprintf(w.total_path, sizeof w.total_path, "%s/in_power0_input", dir);
      snprintf(w.cur_path, sizeof w.cur_path, "%s/in_current1_input", dir);
    } else {
      put(dir, "in1_label", "VDD_IN\n");
      put(dir, "power1_input", "000001000.000\n");
      put(dir, "in2_label", "VDD_CPU_GPU_CV\n");
      put(dir, "in2_input", "5000\n");
      put(dir, "curr2_input", "000000600.000\n");
      snprintf(w.total_path, sizeof w.total_path, "%s/power1_input", dir);
      snprintf(w.cur_path, sizeof w.cur_path, "%s/curr2_input", dir);
    }
    zeus_devices *d = no_gpus();
    zeus_monitor_opts o;
    zeus_monitor_opts_init(&o);
    o.devices = d;
    unsigned none = 0;
    o.cpu_indices = &none;
    o.poll_interval_s = 0.01;
    zeus_monitor *m;
    assert_zeus_ok(zeus_monitor_open(&m, &o));
    assert_non_null(zeus_monitor_soc(m));
    assert_true(zeus_soc_has_rail(zeus_monitor_soc(m), ZEUS_SOC_RAIL_TOTAL));
    assert_true(zeus_soc_has_rail(zeus_monitor_soc(m), ZEUS_SOC_RAIL_CPU));
    assert_false(zeus_soc_has_rail(zeus_monitor_soc(m), ZEUS_SOC_RAIL_GPU));

    w.dur_s = 1.2;
    w.t_start = zeus_monotonic_s();
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
    sleep_s(0.1);
    double a_outer = zeus_monotonic_s();
    assert_zeus_ok(zeus_monitor_begin_window(m, "outer", false));
    sleep_s(0.3);
    double a_inner = zeus_monotonic_s();
    assert_zeus_ok(zeus_monitor_begin_window(m, "inner", false));
    sleep_s(0.4);
    zeus_measurement ri, ro;
    assert_zeus_ok(zeus_monitor_end_window(m, "inner", false, &ri));
    double b_inner = zeus_monotonic_s();
    sleep_s(0.3);
    assert_zeus_ok(zeus_monitor_end_window(m, "outer", false, &ro));
    double b_outer = zeus_monotonic_s();
    w.stop = true;
    pthread_join(th, NULL);
    zeus_monitor_close(m);
    zeus_devices_close(d);

    struct {
      const zeus_measurement *r;
      double a, b;
    } wins[2] = {{&ro, a_outer, b_outer}, {&ri, a_inner, b_inner}};
    for (int k = 0; k < 2; k++) {
      const zeus_measurement *r = wins[k].r;
      assert_true(r->soc_valid);
      assert_true(r->soc_rail_valid[ZEUS_SOC_RAIL_TOTAL]);
      assert_true(r->soc_rail_valid[ZEUS_SOC_RAIL_CPU]);
      assert_false(r->soc_rail_valid[ZEUS_SOC_RAIL_GPU]);
      assert_near(r->soc_energy_j[ZEUS_SOC_RAIL_GPU], 0, 0);
      double tt = truth_j(&w, w.total_mw, wins[k].a, wins[k].b);
      double tc = truth_j(&w, w.cpu_mw, wins[k].a, wins[k].b);
      print_message("layout %s window %s: total %.4f J (truth %.4f), cpu %.4f J (truth %.4f), %u writes\n",
                    layout ? "hwmon" : "iio", k ? "inner" : "outer", r->soc_energy_j[ZEUS_SOC_RAIL_TOTAL], tt,
                    r->soc_energy_j[ZEUS_SOC_RAIL_CPU], tc, w.n);
      /* The power is 1-9 W: ~3-6 J a window. Trapezoids between 10 ms samples of a 2 ms
       * staircase stay within a few mJ of the truth; 2% (+ 10 mJ for the window bounds' own
       * microseconds) fails any integration that is wrong in units, in time or in its ends. */
      assert_true(tt > 1.0 && tc > 0.5);
      assert_near(r->soc_energy_j[ZEUS_SOC_RAIL_TOTAL], tt, 0.02 * tt + 0.01);
      assert_near(r->soc_energy_j[ZEUS_SOC_RAIL_CPU], tc, 0.02 * tc + 0.01);
      /* the total of the window is the GPUs' and CPU packages' only: none here */
      assert_near(r->total_energy_j, 0, 0);
      assert_near(r->time_s, wins[k].b - wins[k].a, 0.05);
    }
    /* the outer window holds the inner one: more energy */
    assert_true(ro.soc_energy_j[ZEUS_SOC_RAIL_TOTAL] > ri.soc_energy_j[ZEUS_SOC_RAIL_TOTAL]);
  }
}

static void monitor_jetson_rail_turning_malformed_fails_the_window_naming_the_file(void **state) {
  (void)state;
  char dir[1024], path[1100];
  fresh_tree(true, dir, sizeof dir);
  put(dir, "in1_label", "VDD_IN\n");
  put(dir, "power1_input", "4000\n");
  snprintf(path, sizeof path, "%s/power1_input", dir);
  zeus_devices *d = no_gpus();
  zeus_monitor_opts o;
  zeus_monitor_opts_init(&o);
  o.devices = d;
  unsigned none = 0;
  o.cpu_indices = &none;
  o.poll_interval_s = 5; /* the bounds' own samples only */
  zeus_monitor *m;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  double j0, j1;
  assert_zeus_ok(zeus_monitor_soc_energy_now(m, ZEUS_SOC_RAIL_TOTAL, &j0));
  assert_zeus_ok(zeus_monitor_begin_window(m, "w", false));
  double t0 = zeus_monotonic_s();
  sleep_s(0.2);
  put(dir, "power1_input", "bad\n");
  assert_zeus_err(zeus_monitor_end_window(m, "w", false, NULL), ZEUS_EIO, path);
  assert_true(zeus_monitor_is_open(m, "w")); /* the window stays open: retry or cancel */
  put(dir, "power1_input", "4000\n");
  zeus_measurement r;
  assert_zeus_ok(zeus_monitor_end_window(m, "w", false, &r));
  double t1 = zeus_monotonic_s();
  /* constant 4 W: exactly 4 W x the window (whose bounds lie between t0 - and t1) */
  assert_true(r.soc_energy_j[ZEUS_SOC_RAIL_TOTAL] >= 4.0 * 0.2 - 1e-3);
  assert_true(r.soc_energy_j[ZEUS_SOC_RAIL_TOTAL] <= 4.0 * (t1 - t0) + 0.01);
  assert_zeus_ok(zeus_monitor_soc_energy_now(m, ZEUS_SOC_RAIL_TOTAL, &j1));
  assert_true(j1 - j0 >= r.soc_energy_j[ZEUS_SOC_RAIL_TOTAL] - 0.0005); /* the window's is rounded to the mJ */
  zeus_monitor_close(m);

  /* no_soc: not measured, even here */
  o.no_soc = true;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  assert_null(zeus_monitor_soc(m));
  zeus_monitor_close(m);
  /* a Jetson whose rails cannot be read: measured without them */
  put(dir, "power1_input", "bad\n");
  o.no_soc = false;
  assert_zeus_ok(zeus_monitor_open(&m, &o));
  assert_null(zeus_monitor_soc(m));
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

#if ZEUS_HAVE_EXPORTER /* an optional component (cmake/components.cmake) */
static double sample_value(const char *text, const char *prefix) {
  size_t n = strlen(prefix);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    if (strncmp(p, prefix, n) != 0) continue;
    const char *sp = strchr(p, '}');
    return sp ? strtod(sp + 1, NULL) : NAN;
  }
  return NAN;
}

/* The exporter publishes the rails as zeus_soc_* series labelled with the rail and its own name,
 * their energy the integral of the power since it started. */
static void exporter_publishes_jetson_rails_as_soc_series(void **state) {
  (void)state;
  char dir[1024];
  fresh_tree(false, dir, sizeof dir);
  put(dir, "rail_name_0", "VDD_IN\n");
  put(dir, "in_power0_input", "000005000.000\n");
  put(dir, "rail_name_1", "VDD_SYS_GPU\n");
  put(dir, "in_voltage1_input", "5000\n");
  put(dir, "in_current1_input", "400\n");
  zeus_devices *d = no_gpus();
  zeus_exporter_opts o;
  zeus_exporter_opts_init(&o);
  o.devices = d;
  o.no_http = true;
  o.no_cpus = true;
  o.sample_interval_s = 0.01;
  zeus_exporter *e;
  double t0 = zeus_monotonic_s();
  assert_zeus_ok(zeus_exporter_open(&e, &o));
  sleep_s(0.3);
  char path[1100];
  snprintf(path, sizeof path, "%s/in_power0_input", dir);
  rewrite(path, 9000); /* 5 W -> 9 W */
  double t1 = zeus_monotonic_s();
  sleep_s(0.3);
  char *text;
  assert_zeus_ok(zeus_exporter_render(e, &text, NULL));
  double t2 = zeus_monotonic_s();
  double ej = sample_value(text, "zeus_soc_energy_joules_total{rail=\"total\",label=\"VDD_IN\"");
  double truth = 5.0 * (t1 - t0) + 9.0 * (t2 - t1);
  print_message("exporter total rail: %.4f J, truth about %.4f J\n", ej, truth);
  assert_near(ej, truth, 0.03 * truth + 0.05); /* the open's own time is in t0's margin */
  assert_near(sample_value(text, "zeus_soc_power_watts{rail=\"total\",label=\"VDD_IN\""), 9.0, 1e-9);
  assert_near(sample_value(text, "zeus_soc_power_watts{rail=\"gpu\",label=\"VDD_SYS_GPU\""), 2.0, 1e-9);
  assert_near(sample_value(text, "zeus_soc_energy_joules_total{rail=\"gpu\",label=\"VDD_SYS_GPU\""),
              2.0 * (t2 - t0), 0.03 * 2.0 * (t2 - t0) + 0.02);
  assert_near(sample_value(text, "zeus_soc_read_errors_total{rail=\"gpu\""), 0, 0);
  assert_null(strstr(text, "rail=\"cpu\""));
  zeus_free(text);
  zeus_exporter_close(e);
  zeus_devices_close(d);
}
#endif

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(jetson_is_never_detected_without_root_off_a_jetson),
      cmocka_unit_test(jetson_old_layout_reads_power_files_and_voltage_times_current),
      cmocka_unit_test(jetson_new_hwmon_layout_reads_labels_and_both_strategies),
      cmocka_unit_test(jetson_missing_and_malformed_files_give_errors_naming_them),
      cmocka_unit_test(monitor_jetson_window_energy_is_the_integral_of_the_power_written),
      cmocka_unit_test(monitor_jetson_rail_turning_malformed_fails_the_window_naming_the_file),
#if ZEUS_HAVE_EXPORTER
      cmocka_unit_test(exporter_publishes_jetson_rails_as_soc_series),
#endif
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
