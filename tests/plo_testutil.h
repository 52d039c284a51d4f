/* tests/plo_testutil.h: what the power-limit optimizer's tests share (header-only, as
 * tests/pfo_http.h): the reference computed from a profile CSV on its own (its own CSV reader, its
 * own cost function), the fake NVML with its log of every set-power-limit call, a training loop,
 * and simulated GPUs. */
#ifndef ZEUS_TEST_PLO_TESTUTIL_H
#define ZEUS_TEST_PLO_TESTUTIL_H

#include "test_util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <zeus.h>

#include "device/nvml_types.h"

#define REF_MAX_ROWS 64

typedef struct ref_profile {
  char path[1024];
  unsigned ngpu;
  size_t n;
  unsigned limit_w[REF_MAX_ROWS]; /* in file order (highest first) */
  double energy_j[REF_MAX_ROWS];  /* summed over the GPUs */
  double time_s[REF_MAX_ROWS];
} ref_profile;

/* Splits a CSV line (no quoting in these files) into at most `cap` fields, in place. */
static inline size_t split_commas(char *line, char **f, size_t cap) {
  size_t n = 0;
  char *save = NULL;
  for (char *t = strtok_r(line, ",\r\n", &save); t && n < cap; t = strtok_r(NULL, ",\r\n", &save)) f[n++] = t;
  return n;
}

static inline void ref_load(const char *path, ref_profile *r) {
  memset(r, 0, sizeof *r);
  snprintf(r->path, sizeof r->path, "%s", path);
  FILE *fp = fopen(path, "r");
  if (!fp) fail_msg("cannot open %s", path);
  char line[4096], *f[80];
  if (!fgets(line, sizeof line, fp)) fail_msg("%s: no header", path);
  size_t nf = split_commas(line, f, 80);
  int c_name = -1, c_time = -1, c_gpu[64];
  for (size_t i = 0; i < nf; i++) {
    unsigned g;
    char tail[32];
    if (strcmp(f[i], "window_name") == 0) c_name = (int)i;
    else if (strcmp(f[i], "elapsed_time") == 0) c_time = (int)i;
    else if (sscanf(f[i], "gpu%u_energy%31s", &g, tail) == 1 && g < 64) {
      c_gpu[g] = (int)i;
      if (g + 1 > r->ngpu) r->ngpu = g + 1;
    }
  }
  assert_true(c_name >= 0 && c_time >= 0 && r->ngpu > 0);
  while (fgets(line, sizeof line, fp)) {
    if (line[0] == '\n') continue;
    assert_true(r->n < REF_MAX_ROWS);
    assert_int_equal(split_commas(line, f, 80), nf);
    const char *us = strrchr(f[c_name], '_');
    assert_non_null(us);
    r->limit_w[r->n] = (unsigned)atoi(us + 1);
    r->time_s[r->n] = atof(f[c_time]);
    for (unsigned g = 0; g < r->ngpu; g++) r->energy_j[r->n] += atof(f[c_gpu[g]]);
    r->n++;
  }
  fclose(fp);
  assert_true(r->n > 0);
}

enum { REF_ENERGY, REF_TIME, REF_COST, REF_SLOWDOWN };

/* The optimum by definition: least energy / least time / least eta*E + (1-eta)*maxW*world*T /
 * the lowest limit whose time is within factor x the time at the highest limit. Ties: lower limit. */
static inline unsigned ref_optimum(const ref_profile *r, int kind, double param, unsigned world) {
  unsigned top = 0;
  double t_top = 0;
  for (size_t i = 0; i < r->n; i++)
    if (r->limit_w[i] > top) { top = r->limit_w[i]; t_top = r->time_s[i]; }
  unsigned best = 0;
  double best_v = INFINITY;
  for (size_t i = 0; i < r->n; i++) {
    double v;
    if (kind == REF_ENERGY) v = r->energy_j[i];
    else if (kind == REF_TIME) v = r->time_s[i];
    else if (kind == REF_COST) v = param * r->energy_j[i] + (1 - param) * (double)top * world * r->time_s[i];
    else v = r->time_s[i] <= param * t_top ? (double)r->limit_w[i] : INFINITY;
    if (v < best_v || (v == best_v && r->limit_w[i] < best)) { best_v = v; best = r->limit_w[i]; }
  }
  return best;
}

/* Every CSV of the plo-profiles folder, sorted. */
static inline size_t list_profiles(char paths[][1024], size_t cap) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/plo-profiles", zeus_test_data_dir());
  DIR *d = opendir(dir);
  if (!d) fail_msg("cannot open %s", dir);
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l > 4 && strcmp(e->d_name + l - 4, ".csv") == 0 && n < cap) snprintf(paths[n++], 1024, "%s/%s", dir, e->d_name);
  }
  closedir(d);
  qsort(paths, n, 1024, (int (*)(const void *, const void *))strcmp);
  assert_true(n >= 1);
  return n;
}

typedef struct fake {
  void *lib;
  int (*RunWorkAll)(const double *);
  nvmlReturn_t (*Init)(void);
  nvmlReturn_t (*Shutdown)(void);
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t *);
  nvmlReturn_t (*SetPowerManagementLimit)(nvmlDevice_t, unsigned);
  nvmlReturn_t (*GetPowerManagementLimit)(nvmlDevice_t, unsigned *);
} fake;

static inline void fake_load(fake *f) {
  memset(f, 0, sizeof *f);
  f->lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!f->lib) fail_msg("dlopen %s: %s", FAKE_NVML_PATH, dlerror());
#define S(field, name) \
  if (!(*(void **)&f->field = dlsym(f->lib, name))) fail_msg("the fake NVML lacks %s", name)
  S(RunWorkAll, "fakeNvmlRunWorkAll");
  S(Init, "nvmlInit_v2");
  S(Shutdown, "nvmlShutdown");
  S(GetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2");
  S(SetPowerManagementLimit, "nvmlDeviceSetPowerManagementLimit");
  S(GetPowerManagementLimit, "nvmlDeviceGetPowerManagementLimit");
#undef S
}

static inline void fake_unload(fake *f) {
  if (f->lib) dlclose(f->lib);
  f->lib = NULL;
}

static inline void reset_env(void) {
  static const char *const vars[] = {
      "ZEUS_SIM_GPUS",  "ZEUS_SIM_MODEL_FILE", "ZEUS_SIM_UNITS_PER_ROW", "ZEUS_SIM_ENERGY_COUNTER",
      "ZEUS_SIM_COUNTER_PERIOD_MS", "ZEUS_SIM_HARDWARE", "ZEUS_SIM_VARIATION", "FAKE_NVML_LOG", "FAKE_NVML_INJECT",
      "FAKE_NVML_INIT_ERROR", "CUDA_VISIBLE_DEVICES", "ZEUS_GPU_BACKEND", "ZEUS_NVML_LIBRARY",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
}

static inline zeus_monitor *open_monitor(zeus_devices *d) {
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = no_cpu, .num_cpu_indices = 0};
  zeus_monitor *m = NULL;
  assert_zeus_ok(zeus_monitor_open(&m, &mo));
  return m;
}

typedef struct set_call {
  int gpu;
  unsigned mw;
  int epoch;  /* where in the training loop it happened (0 at open, CLOSE_EPOCH at close) */
  long step;  /* step begin number within the epoch, AT_EPOCH_END for the epoch end */
} set_call;

#define MAX_CALLS 4096
#define AT_EPOCH_END (-1L)
#define CLOSE_EPOCH 1000

/* The successful nvmlDeviceSetPowerManagementLimit calls of the log, in order. */
static inline size_t read_set_calls(const char *log, set_call *out, size_t cap) {
  FILE *fp = fopen(log, "r");
  if (!fp) return 0;
  char line[512];
  size_t n = 0;
  while (fgets(line, sizeof line, fp)) {
    int gpu, code;
    unsigned mw;
    if (sscanf(line, "nvmlDeviceSetPowerManagementLimit %d %u -> %d", &gpu, &mw, &code) == 3 && code == 0) {
      assert_true(n < cap);
      out[n++] = (set_call){gpu, mw, 0, 0};
    }
  }
  fclose(fp);
  return n;
}

/* The last logged value of one setter for one GPU, or -1. */
static inline long last_logged(const char *log, const char *fn, int gpu) {
  FILE *fp = fopen(log, "r");
  if (!fp) return -1;
  char line[512], name[128];
  long last = -1;
  while (fgets(line, sizeof line, fp)) {
    int g, code;
    long v;
    if (sscanf(line, "%127s %d %ld -> %d", name, &g, &v, &code) == 4 && strcmp(name, fn) == 0 && g == gpu && code == 0)
      last = v;
  }
  fclose(fp);
  return last;
}

/* A limit the GPUs must be at from a point of the training loop on. */
typedef struct target {
  unsigned mw;
  int epoch;
  long step;
} target;

/* Attributes the calls that appear in the log to the point of the training loop reached. */
typedef struct recorder {
  const char *log;
  size_t seen;
  int epoch;
  long step;
  set_call calls[MAX_CALLS];
} recorder;

static inline void record(recorder *r) {
  if (!r) return;
  static set_call now[MAX_CALLS];
  size_t n = read_set_calls(r->log, now, MAX_CALLS);
  for (size_t k = r->seen; k < n; k++) {
    r->calls[k] = now[k];
    r->calls[k].epoch = r->epoch;
    r->calls[k].step = r->step;
  }
  r->seen = n;
}

typedef struct work {
  fake *f;              /* work through the fake NVML, or */
  zeus_sim_node *node;  /* through a sim node */
  unsigned ngpu;
  recorder *rec;        /* optional */
} work;

static inline void one_step(zeus_plo *p, const work *w) {
  if (w->rec) w->rec->step++;
  assert_zeus_ok(zeus_plo_on_step_begin(p));
  record(w->rec);
  double units[ZEUS_MAX_GPUS];
  for (unsigned g = 0; g < w->ngpu; g++) units[g] = 1.0;
  if (w->f) assert_int_equal(w->f->RunWorkAll(units), 0);
  else assert_zeus_ok(zeus_sim_work_all(w->node, units, NULL));
  assert_zeus_ok(zeus_plo_on_step_end(p));
}

static inline void one_epoch(zeus_plo *p, const work *w, long steps) {
  if (w->rec) {
    w->rec->epoch++;
    w->rec->step = 0;
  }
  assert_zeus_ok(zeus_plo_on_epoch_begin(p));
  for (long s = 0; s < steps; s++) one_step(p, w);
  assert_zeus_ok(zeus_plo_on_epoch_end(p));
  if (w->rec) w->rec->step = AT_EPOCH_END;
  record(w->rec);
}

#define T(mw_, epoch_, step_) (targets[(*nt)++] = (target){(mw_), (epoch_), (step_)})

typedef struct scratch {
  char dir[512];
  char log[600];
  char profile[600];
} scratch;

static inline void scratch_init(scratch *s) {
  zeus_test_tmpdir(s->dir, sizeof s->dir);
  snprintf(s->log, sizeof s->log, "%s/nvml.log", s->dir);
  snprintf(s->profile, sizeof s->profile, "%s/profile.json", s->dir);
}

static inline void scratch_free(scratch *s) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", s->dir);
}

static inline zeus_devices *open_sim_cfg(zeus_sim_config *cfg) {
  cfg->clock = ZEUS_SIM_CLOCK_VIRTUAL;
  zeus_devices_opts o = {.backend = "sim", .sim = cfg, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

static inline zeus_devices *open_sim_dvfs(unsigned ngpu) {
  zeus_sim_gpu_config g[ZEUS_MAX_GPUS];
  memset(g, 0, sizeof g);
  zeus_sim_config cfg = {.num_gpus = ngpu, .gpus = g};
  return open_sim_cfg(&cfg);
}

#endif
