/* The power-limit optimizer: selectors, profile files, the state machine against the fake NVML
 * (every set-power-limit call checked through FAKE_NVML_LOG), restoring GPUs on close and on
 * SIGTERM/SIGINT, and agreement across ranks through a collective.
 *
 * The acceptance tests replay every measured profile of ../shared/data/plo-profiles on simulated
 * GPUs whose table model is that profile, for every eta and four patterns of epoch ends, and
 * compare against a reference computed here from the CSV on its own (its own CSV reader, its own
 * cost function and its own model of which limits the GPUs must go through). */
#include "test_util.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>

#include <zeus.h>

#include "device/nvml_types.h"

/* ================================================================================================
 * Reference: the profile CSV read here, and each selector's optimum computed here
 * ============================================================================================== */

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
static size_t split_commas(char *line, char **f, size_t cap) {
  size_t n = 0;
  char *save = NULL;
  for (char *t = strtok_r(line, ",\r\n", &save); t && n < cap; t = strtok_r(NULL, ",\r\n", &save)) f[n++] = t;
  return n;
}

static void ref_load(const char *path, ref_profile *r) {
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
static unsigned ref_optimum(const ref_profile *r, int kind, double param, unsigned world) {
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
static size_t list_profiles(char paths[][1024], size_t cap) {
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

/* ================================================================================================
 * The fake NVML and its setter log
 * ============================================================================================== */

typedef struct fake {
  void *lib;
  int (*RunWorkAll)(const double *);
  nvmlReturn_t (*Init)(void);
  nvmlReturn_t (*Shutdown)(void);
  nvmlReturn_t (*GetHandleByIndex)(unsigned, nvmlDevice_t *);
  nvmlReturn_t (*SetPowerManagementLimit)(nvmlDevice_t, unsigned);
  nvmlReturn_t (*GetPowerManagementLimit)(nvmlDevice_t, unsigned *);
} fake;

static void fake_load(fake *f) {
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

static void fake_unload(fake *f) {
  if (f->lib) dlclose(f->lib);
  f->lib = NULL;
}

static void reset_env(void) {
  static const char *const vars[] = {
      "ZEUS_SIM_GPUS",  "ZEUS_SIM_MODEL_FILE", "ZEUS_SIM_UNITS_PER_ROW", "ZEUS_SIM_ENERGY_COUNTER",
      "ZEUS_SIM_COUNTER_PERIOD_MS", "ZEUS_SIM_VARIATION", "FAKE_NVML_LOG", "FAKE_NVML_INJECT",
      "FAKE_NVML_INIT_ERROR", "CUDA_VISIBLE_DEVICES", "ZEUS_GPU_BACKEND", "ZEUS_NVML_LIBRARY",
  };
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
}

static zeus_devices *open_fake_nvml(void) {
  zeus_devices_opts o = {0};
  o.backend = "nvml";
  o.nvml_library = FAKE_NVML_PATH;
  zeus_devices *d = NULL;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

static zeus_monitor *open_monitor(zeus_devices *d) {
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
static size_t read_set_calls(const char *log, set_call *out, size_t cap) {
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
static long last_logged(const char *log, const char *fn, int gpu) {
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

/* The calls a sequence of targets must produce: each change is one call per GPU, in GPU order,
 * at the target's point; a target equal to the current limit calls nothing, except the first
 * (the limit set at open), which calls every GPU whatever its limit (initial_mw 0). */
static size_t expected_calls(unsigned initial_mw, const target *t, size_t nt, unsigned ngpu, set_call *out,
                             size_t cap) {
  size_t n = 0;
  unsigned cur = initial_mw;
  for (size_t i = 0; i < nt; i++) {
    if (t[i].mw == cur) continue;
    for (unsigned g = 0; g < ngpu; g++) {
      assert_true(n < cap);
      out[n++] = (set_call){(int)g, t[i].mw, t[i].epoch, t[i].step};
    }
    cur = t[i].mw;
  }
  return n;
}

static void assert_calls_equal(const char *what, const set_call *got, size_t ngot, const set_call *want, size_t nwant,
                               bool check_when) {
  for (size_t i = 0; i < ngot || i < nwant; i++) {
    if (i >= ngot || i >= nwant || got[i].gpu != want[i].gpu || got[i].mw != want[i].mw ||
        (check_when && (got[i].epoch != want[i].epoch || got[i].step != want[i].step))) {
      fprintf(stderr, "%s: set-power-limit calls differ at #%zu (got %zu calls, expected %zu)\n", what, i, ngot, nwant);
      for (size_t k = 0; k < ngot || k < nwant; k++) {
        if (k < ngot) fprintf(stderr, "  #%zu got GPU %d %u mW at epoch %d step %ld", k, got[k].gpu, got[k].mw,
                              got[k].epoch, got[k].step);
        else fprintf(stderr, "  #%zu got nothing", k);
        if (k < nwant) fprintf(stderr, "   expected GPU %d %u mW at epoch %d step %ld\n", want[k].gpu, want[k].mw,
                               want[k].epoch, want[k].step);
        else fprintf(stderr, "   expected nothing\n");
      }
      fail_msg("%s: set-power-limit calls differ", what);
    }
  }
}

/* Attributes the calls that appear in the log to the point of the training loop reached. */
typedef struct recorder {
  const char *log;
  size_t seen;
  int epoch;
  long step;
  set_call calls[MAX_CALLS];
} recorder;

static void record(recorder *r) {
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

/* ================================================================================================
 * A training loop
 * ============================================================================================== */

typedef enum pattern {
  PAT_NEVER = 0,             /* one epoch long enough for everything */
  PAT_IN_WARMUP,             /* the first attempt at every limit ends during its warmup */
  PAT_IN_PROFILING,          /* ... in the middle of its profiling window */
  PAT_LAST_PROFILING_STEP,   /* ... right after the last step of its profiling window */
} pattern;

static const char *const pattern_names[] = {"never", "in warmup", "in profiling", "on the last profiling step"};

typedef struct work {
  fake *f;              /* work through the fake NVML, or */
  zeus_sim_node *node;  /* through a sim node */
  unsigned ngpu;
  recorder *rec;        /* optional */
} work;

static void one_step(zeus_plo *p, const work *w) {
  if (w->rec) w->rec->step++;
  assert_zeus_ok(zeus_plo_on_step_begin(p));
  record(w->rec);
  double units[ZEUS_MAX_GPUS];
  for (unsigned g = 0; g < w->ngpu; g++) units[g] = 1.0;
  if (w->f) assert_int_equal(w->f->RunWorkAll(units), 0);
  else assert_zeus_ok(zeus_sim_work_all(w->node, units, NULL));
  assert_zeus_ok(zeus_plo_on_step_end(p));
}

static void one_epoch(zeus_plo *p, const work *w, long steps) {
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

/* Drives the loop with epoch lengths chosen from the pattern alone (W wait, K warmup, P profile
 * steps, n limits), and appends to `targets` the limits the GPUs must go through and where, from
 * the specification: the first limit is set at step begin W + 1; an attempt at a limit starts at
 * the step begin that sets it, its window begins K step begins later and ends P after that, at
 * the step begin that sets the next limit (or the optimum after the last one). An epoch end
 * during an attempt puts the maximum back; the next step begin starts the same limit again.
 * Interrupted patterns end the epoch `off` steps after an attempt starts. */
static void drive(zeus_plo *p, const work *w, pattern pat, long W, long K, long P, const unsigned *grid_mw, size_t n,
                  unsigned opt_mw, target *targets, size_t *nt) {
  unsigned max_mw = grid_mw[0];
  T(max_mw, 0, 0); /* at open */
  if (pat == PAT_NEVER) {
    for (size_t i = 0; i < n; i++) T(grid_mw[i], 1, W + 1 + (long)i * (K + P));
    T(opt_mw, 1, W + 1 + (long)n * (K + P));
    one_epoch(p, w, W + 1 + (long)n * (K + P) + 5);
    one_epoch(p, w, 7);
    return;
  }
  long off = pat == PAT_IN_WARMUP ? K / 2 : pat == PAT_IN_PROFILING ? K + P / 2 : K + P - 1;
  one_epoch(p, w, W + 1 + off); /* the first attempt at limit 0 is interrupted */
  T(grid_mw[0], 1, W + 1);
  T(max_mw, 1, AT_EPOCH_END);
  for (size_t i = 0; i < n; i++) {
    int e = (int)i + 2;
    T(grid_mw[i], e, 1); /* the same limit again, from the next step begin */
    if (i + 1 < n) {
      one_epoch(p, w, 1 + K + P + off); /* the retry completes; limit i+1 starts and is interrupted */
      T(grid_mw[i + 1], e, 1 + K + P);
      T(max_mw, e, AT_EPOCH_END);
    } else {
      one_epoch(p, w, 1 + K + P + 5); /* the last retry completes: DONE */
      T(opt_mw, e, 1 + K + P);
    }
  }
}
#undef T

/* ================================================================================================
 * Acceptance: every profile x every eta x every pattern, through the fake NVML
 * ============================================================================================== */

static const double etas[] = {0, 0.25, 0.5, 0.75, 1};

typedef struct scratch {
  char dir[512];
  char log[600];
  char profile[600];
} scratch;

static void scratch_init(scratch *s) {
  zeus_test_tmpdir(s->dir, sizeof s->dir);
  snprintf(s->log, sizeof s->log, "%s/nvml.log", s->dir);
  snprintf(s->profile, sizeof s->profile, "%s/profile.json", s->dir);
}

static void scratch_free(scratch *s) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", s->dir);
}

/* One replay of profile r through the fake NVML; checks the calls, the measurements and the
 * optimum. With `save_to`, the optimizer writes its profile there. */
static void replay_case(fake *f, const ref_profile *r, const zeus_selector *sel, unsigned want_opt_w, pattern pat,
                        long W, long K, long P, const char *log, const char *save_to) {
  char what[1400];
  snprintf(what, sizeof what, "%s, %s selector (eta %g), epoch ends %s, wait %ld warmup %ld profile %ld", r->path,
           sel ? (sel->kind == ZEUS_SELECTOR_ZEUS_COST ? "ZeusCost" : "other") : "default", sel ? sel->eta : 0.5,
           pattern_names[pat], W, K, P);
  reset_env();
  setenv("ZEUS_SIM_MODEL_FILE", r->path, 1);
  setenv("FAKE_NVML_LOG", log, 1);
  unlink(log);
  zeus_devices *d = open_fake_nvml();
  assert_int_equal(zeus_gpu_count(d), r->ngpu);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.selector = sel;
  o.wait_steps = W;
  o.warmup_steps = K;
  o.profile_steps = P;
  o.profile_path = save_to;
  zeus_plo *p = NULL;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_READY);

  /* The grid is the profile's limits (300 down to 100 W in 25 W steps). */
  const unsigned *grid_w;
  size_t n = zeus_plo_power_limits(p, &grid_w);
  assert_int_equal(n, r->n);
  unsigned grid_mw[REF_MAX_ROWS] = {0};
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(grid_w[i], r->limit_w[i]);
    grid_mw[i] = r->limit_w[i] * 1000;
  }

  static recorder rec;
  memset(&rec, 0, sizeof rec);
  rec.log = log;
  record(&rec); /* calls made by open: epoch 0 */
  target targets[4 * REF_MAX_ROWS + 8];
  size_t nt = 0;
  work w = {.f = f, .ngpu = r->ngpu, .rec = &rec};
  drive(p, &w, pat, W, K, P, grid_mw, n, want_opt_w * 1000, targets, &nt);
  if (zeus_plo_get_state(p) != ZEUS_PLO_DONE) fail_msg("%s: not DONE at the end", what);
  if (zeus_plo_optimal_power_limit_w(p) != want_opt_w)
    fail_msg("%s: optimum %u W, expected %u W", what, zeus_plo_optimal_power_limit_w(p), want_opt_w);
  assert_int_equal(zeus_plo_current_power_limit_w(p), want_opt_w);

  /* Each measurement is exactly P steps at its limit: P/40 of the CSV row. */
  const zeus_plo_measurement *meas;
  assert_int_equal(zeus_plo_measurements(p, &meas), n);
  double scale = (double)P / 40.0;
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(meas[i].power_limit_w, r->limit_w[i]);
    assert_near(meas[i].time_s, r->time_s[i] * scale, 1e-9 * r->time_s[i] + 1e-12);
    assert_near(meas[i].energy_j, r->energy_j[i] * scale, 0.002 * r->ngpu + 1e-9 * r->energy_j[i]);
  }
  /* The GPUs hold the optimum now. */
  for (unsigned g = 0; g < r->ngpu; g++) {
    unsigned mw = 0;
    assert_zeus_ok(zeus_gpu_get_power_limit(d, g, &mw));
    assert_int_equal(mw, want_opt_w * 1000);
  }
  rec.epoch = CLOSE_EPOCH;
  rec.step = 0;
  zeus_plo_close(p);
  record(&rec);
  targets[nt++] = (target){grid_mw[0], CLOSE_EPOCH, 0}; /* close: the limit from before (the default, the maximum) */
  zeus_monitor_close(m);
  zeus_devices_close(d);

  set_call got[MAX_CALLS], want[MAX_CALLS];
  size_t ngot = read_set_calls(log, got, MAX_CALLS);
  assert_int_equal(ngot, rec.seen); /* closing the devices called nothing more */
  size_t nwant = expected_calls(0, targets, nt, r->ngpu, want, MAX_CALLS);
  assert_calls_equal(what, rec.calls, rec.seen, want, nwant, true);
  /* The grid never goes below the device minimum. */
  for (size_t i = 0; i < ngot; i++) assert_true(got[i].mw >= r->limit_w[r->n - 1] * 1000);
}

static void acceptance(pattern pat) {
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t nfiles = list_profiles(paths, 16);
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  size_t cases = 0;
  for (size_t fi = 0; fi < nfiles; fi++) {
    ref_profile r;
    ref_load(paths[fi], &r);
    for (size_t e = 0; e < sizeof etas / sizeof etas[0]; e++) {
      unsigned want = ref_optimum(&r, REF_COST, etas[e], r.ngpu);
      zeus_selector sel;
      assert_zeus_ok(zeus_selector_zeus_cost(&sel, etas[e], r.ngpu));
      /* eta 0.5 goes through the default selector (NULL): ZeusCost(0.5, number of GPUs). */
      replay_case(&f, &r, etas[e] == 0.5 ? NULL : &sel, want, pat, 1, 3, 6, s.log, NULL);
      cases++;
    }
  }
  print_message("%zu profiles x %zu etas, epoch ends %s: %zu cases\n", nfiles, sizeof etas / sizeof etas[0],
                pattern_names[pat], cases);
  scratch_free(&s);
  fake_unload(&f);
}

static void plo_acceptance_epoch_never_ends_early(void **state) {
  (void)state;
  acceptance(PAT_NEVER);
}
static void plo_acceptance_epoch_ends_during_warmup(void **state) {
  (void)state;
  acceptance(PAT_IN_WARMUP);
}
static void plo_acceptance_epoch_ends_during_profiling(void **state) {
  (void)state;
  acceptance(PAT_IN_PROFILING);
}
static void plo_acceptance_epoch_ends_on_last_profiling_step(void **state) {
  (void)state;
  acceptance(PAT_LAST_PROFILING_STEP);
}

/* warmup_steps 0 goes straight to profiling; wait_steps 0 starts at the first step; the
 * defaults (1, 10, 40) work too. */
static void plo_zero_warmup_and_zero_wait_profile_straight_away(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  list_profiles(paths, 16);
  ref_profile r;
  ref_load(paths[0], &r);
  unsigned want = ref_optimum(&r, REF_COST, 0.5, r.ngpu);
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  static const long params[][3] = {{0, 0, 4}, {1, 0, 3}, {0, 2, 1}, {3, 0, 1}, {1, 10, 40}};
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
    for (int pat = 0; pat < 4; pat++) {
      if (pat == PAT_IN_WARMUP && params[i][1] == 0) continue; /* no warmup to interrupt */
      replay_case(&f, &r, NULL, want, (pattern)pat, params[i][0], params[i][1], params[i][2], s.log, NULL);
    }
  scratch_free(&s);
  fake_unload(&f);
}

/* A saved profile, reloaded, starts DONE at each selector's optimum with one change at most. */
static void plo_reloaded_profile_gives_each_selectors_optimum(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t nfiles = list_profiles(paths, 16);
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  static const double factors[] = {1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 100.0};
  for (size_t fi = 0; fi < nfiles; fi++) {
    ref_profile r;
    ref_load(paths[fi], &r);
    unlink(s.profile);
    replay_case(&f, &r, NULL, ref_optimum(&r, REF_COST, 0.5, r.ngpu), PAT_NEVER, 1, 2, 40, s.log, s.profile);
    zeus_plo_measurement *saved;
    size_t nsaved;
    assert_zeus_ok(zeus_plo_profile_load(s.profile, &saved, &nsaved));
    assert_int_equal(nsaved, r.n);

    for (size_t k = 0; k < 3 + sizeof factors / sizeof factors[0]; k++) {
      zeus_selector sel;
      unsigned want;
      if (k == 0) {
        assert_zeus_ok(zeus_selector_energy(&sel));
        want = ref_optimum(&r, REF_ENERGY, 0, 1);
      } else if (k == 1) {
        assert_zeus_ok(zeus_selector_time(&sel));
        want = ref_optimum(&r, REF_TIME, 0, 1);
      } else if (k == 2) {
        assert_zeus_ok(zeus_selector_zeus_cost(&sel, 0.5, r.ngpu));
        want = ref_optimum(&r, REF_COST, 0.5, r.ngpu);
      } else {
        assert_zeus_ok(zeus_selector_max_slowdown(&sel, factors[k - 3]));
        want = ref_optimum(&r, REF_SLOWDOWN, factors[k - 3], 1);
      }
      reset_env();
      setenv("ZEUS_SIM_MODEL_FILE", r.path, 1);
      setenv("FAKE_NVML_LOG", s.log, 1);
      unlink(s.log);
      zeus_devices *d = open_fake_nvml();
      zeus_monitor *m = open_monitor(d);
      zeus_plo_opts o;
      zeus_plo_opts_init(&o);
      o.selector = &sel;
      o.profile_path = s.profile;
      zeus_plo *p;
      assert_zeus_ok(zeus_plo_open(&p, m, &o));
      assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
      if (zeus_plo_optimal_power_limit_w(p) != want)
        fail_msg("%s: selector %zu: optimum %u W, expected %u W", r.path, k, zeus_plo_optimal_power_limit_w(p), want);
      const zeus_plo_measurement *meas;
      assert_int_equal(zeus_plo_measurements(p, &meas), nsaved);
      for (size_t i = 0; i < nsaved; i++)
        assert_true(meas[i].power_limit_w == saved[i].power_limit_w && meas[i].energy_j == saved[i].energy_j &&
                    meas[i].time_s == saved[i].time_s);
      work w = {.f = &f, .ngpu = r.ngpu};
      one_epoch(p, &w, 20);
      assert_int_equal(zeus_plo_current_power_limit_w(p), want);
      zeus_plo_close(p);
      zeus_monitor_close(m);
      zeus_devices_close(d);
      const target targets[] = {{want * 1000, 0, 0}, {r.limit_w[0] * 1000, CLOSE_EPOCH, 0}};
      set_call got[MAX_CALLS], exp[MAX_CALLS];
      size_t ngot = read_set_calls(s.log, got, MAX_CALLS);
      size_t nexp = expected_calls(0, targets, 2, r.ngpu, exp, MAX_CALLS);
      assert_calls_equal(r.path, got, ngot, exp, nexp, false);
    }
    free(saved);
  }
  scratch_free(&s);
  fake_unload(&f);
}

/* ================================================================================================
 * The grid and the GPUs' ranges
 * ============================================================================================== */

/* A device minimum that is not on the stride: the original's range(max, min - step, -step) went
 * below it; ours stops at the last limit >= the minimum. */
static void plo_grid_never_goes_below_the_device_minimum(void **state) {
  (void)state;
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  char model[700];
  snprintf(model, sizeof model, "%s/model.json", s.dir);
  zeus_test_write_file(model, "{\"gpus\": [{\"min_power_limit_w\": 110}, {\"min_power_limit_w\": 110}]}");
  static const struct { unsigned step; size_t n; unsigned last; } cases[] = {
      {25, 8, 125}, {30, 7, 120}, {100, 2, 200}, {190, 2, 110}, {191, 1, 300}, {1000, 1, 300}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    reset_env();
    setenv("ZEUS_SIM_MODEL_FILE", model, 1);
    setenv("FAKE_NVML_LOG", s.log, 1);
    unlink(s.log);
    zeus_devices *d = open_fake_nvml();
    zeus_monitor *m = open_monitor(d);
    zeus_plo_opts o;
    zeus_plo_opts_init(&o);
    o.pl_step_w = cases[c].step;
    o.warmup_steps = 1;
    o.profile_steps = 2;
    zeus_plo *p;
    assert_zeus_ok(zeus_plo_open(&p, m, &o));
    const unsigned *grid;
    size_t n = zeus_plo_power_limits(p, &grid);
    assert_int_equal(n, cases[c].n);
    assert_int_equal(grid[0], 300);
    assert_int_equal(grid[n - 1], cases[c].last);
    for (size_t i = 0; i < n; i++) assert_true(grid[i] >= 110 && grid[i] == 300 - i * cases[c].step);
    work w = {.f = &f, .ngpu = 2};
    one_epoch(p, &w, 2 + (long)n * 3 + 2);
    assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
    zeus_plo_close(p);
    zeus_monitor_close(m);
    zeus_devices_close(d);
    set_call got[MAX_CALLS];
    size_t ngot = read_set_calls(s.log, got, MAX_CALLS);
    for (size_t i = 0; i < ngot; i++) assert_true(got[i].mw >= 110000);
    /* every grid limit below the maximum was set on both GPUs */
    assert_true(ngot >= 2 * (n - 1));
  }
  scratch_free(&s);
  fake_unload(&f);
}

/* ---- sim-backend helpers for the remaining tests ---- */

static zeus_devices *open_sim_cfg(zeus_sim_config *cfg) {
  cfg->clock = ZEUS_SIM_CLOCK_VIRTUAL;
  zeus_devices_opts o = {.backend = "sim", .sim = cfg, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

static zeus_devices *open_sim_dvfs(unsigned ngpu) {
  zeus_sim_gpu_config g[ZEUS_MAX_GPUS];
  memset(g, 0, sizeof g);
  zeus_sim_config cfg = {.num_gpus = ngpu, .gpus = g};
  return open_sim_cfg(&cfg);
}

static void plo_nonuniform_power_limit_ranges_are_einval_naming_the_gpus(void **state) {
  (void)state;
  zeus_sim_gpu_config g[2];
  memset(g, 0, sizeof g);
  g[1].dvfs.max_power_limit_w = 250;
  zeus_sim_config cfg = {.num_gpus = 2, .gpus = g};
  zeus_devices *d = open_sim_cfg(&cfg);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  zeus_plo *p = (zeus_plo *)1;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "ranges differ across GPUs: GPU 0 has [100000, 300000] mW but GPU 1 has [100000, 250000] mW");
  assert_null(p);
  /* One of them alone is fine. */
  unsigned one = 1;
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = d, .gpu_indices = &one, .num_gpu_indices = 1, .cpu_indices = no_cpu};
  zeus_monitor *m1;
  assert_zeus_ok(zeus_monitor_open(&m1, &mo));
  assert_zeus_ok(zeus_plo_open(&p, m1, &o));
  const unsigned *grid;
  assert_int_equal(zeus_plo_power_limits(p, &grid), 7);
  assert_int_equal(grid[0], 250);
  zeus_plo_close(p);
  zeus_monitor_close(m1);
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

/* ================================================================================================
 * Bad input
 * ============================================================================================== */

static void plo_bad_options_are_einval_naming_the_option(void **state) {
  (void)state;
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo *p = NULL;
  zeus_plo_opts o;
#define BAD(field, value, needle)                                  \
  do {                                                             \
    zeus_plo_opts_init(&o);                                        \
    o.field = value;                                               \
    assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, needle); \
    assert_null(p);                                                \
  } while (0)
  BAD(wait_steps, -1, "wait_steps -1 is outside the allowed range [0,");
  BAD(warmup_steps, -5, "warmup_steps -5 is outside the allowed range [0,");
  BAD(profile_steps, 0, "profile_steps 0 is outside the allowed range [1,");
  BAD(profile_steps, -3, "profile_steps -3 is outside the allowed range [1,");
  BAD(pl_step_w, 0, "pl_step_w 0 is outside the allowed range [1,");
  BAD(profile_path, "", "profile_path is empty");
#undef BAD
  /* A zeroed struct is rejected: profile_steps 0. */
  memset(&o, 0, sizeof o);
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "profile_steps 0");
  /* A selector whose fields were set by hand is checked too. */
  zeus_plo_opts_init(&o);
  zeus_selector sel = {.kind = ZEUS_SELECTOR_ZEUS_COST, .eta = 1.5, .world_size = 1};
  o.selector = &sel;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "eta 1.5 is outside the allowed range [0, 1]");
  sel = (zeus_selector){.kind = ZEUS_SELECTOR_MAX_SLOWDOWN, .factor = 0.5};
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "factor 0.5 is outside the allowed range");
  sel = (zeus_selector){.kind = (zeus_selector_kind)42};
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "selector kind 42");
  assert_zeus_err(zeus_plo_open(&p, NULL, &o), ZEUS_EINVAL, "monitor");
  assert_zeus_err(zeus_plo_open(&p, m, NULL), ZEUS_EINVAL, "zeus_plo_opts_init");
  /* A bad collective is named. */
  zeus_plo_opts_init(&o);
  zeus_collective c = {.world_size = 2, .rank = 0};
  o.collective = &c;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "allreduce callback is NULL");
  /* No GPU to optimize. */
  static const unsigned none[1];
  zeus_monitor_opts mo = {.devices = d, .gpu_indices = none, .num_gpu_indices = 0, .cpu_indices = none};
  zeus_monitor *m0;
  assert_zeus_ok(zeus_monitor_open(&m0, &mo));
  zeus_plo_opts_init(&o);
  assert_zeus_err(zeus_plo_open(&p, m0, &o), ZEUS_EINVAL, "measures no GPU");
  zeus_monitor_close(m0);
  /* Nothing was changed by the failed opens. */
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 300000);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  /* NULL handles. */
  assert_int_equal(zeus_plo_on_step_begin(NULL), ZEUS_EINVAL);
  assert_int_equal(zeus_plo_on_epoch_end(NULL), ZEUS_EINVAL);
  zeus_plo_close(NULL);
}

static void selector_parameters_out_of_range_are_einval_naming_them(void **state) {
  (void)state;
  zeus_selector s;
  assert_zeus_err(zeus_selector_zeus_cost(&s, -0.1, 1), ZEUS_EINVAL, "eta -0.1 is outside the allowed range [0, 1]");
  assert_zeus_err(zeus_selector_zeus_cost(&s, 1.01, 1), ZEUS_EINVAL, "eta 1.01 is outside the allowed range [0, 1]");
  assert_zeus_err(zeus_selector_zeus_cost(&s, NAN, 1), ZEUS_EINVAL, "eta nan is outside");
  assert_zeus_err(zeus_selector_zeus_cost(&s, 0.5, 0), ZEUS_EINVAL, "world_size 0 is outside the allowed range [1,");
  assert_zeus_err(zeus_selector_max_slowdown(&s, 0.99), ZEUS_EINVAL, "factor 0.99 is outside the allowed range [1,");
  assert_zeus_err(zeus_selector_max_slowdown(&s, NAN), ZEUS_EINVAL, "factor nan");
  assert_zeus_err(zeus_selector_max_slowdown(&s, INFINITY), ZEUS_EINVAL, "factor inf");
  assert_zeus_err(zeus_selector_custom(&s, NULL, NULL), ZEUS_EINVAL, "fn is NULL");
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0, 1));
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 1, 8));
  assert_zeus_ok(zeus_selector_max_slowdown(&s, 1.0));
  unsigned w;
  assert_zeus_err(zeus_selector_select(&s, (zeus_plo_measurement[1]){{300, 1, 1}}, 0, &w), ZEUS_EINVAL, "no measurements");
}

/* Small tables worked out by hand. */
static void selectors_pick_each_optimum_and_break_ties_to_the_first(void **state) {
  (void)state;
  const zeus_plo_measurement m[] = {
      {300, 1000, 10.0}, {250, 900, 10.5}, {200, 850, 12.0}, {150, 880, 16.0}, {100, 1200, 30.0},
  };
  zeus_selector s;
  unsigned w;
  assert_zeus_ok(zeus_selector_energy(&s));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 200);
  assert_zeus_ok(zeus_selector_time(&s));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 300);
  /* eta 1: energy; eta 0: time; eta 0.5, world 1: 0.5*E + 150*T: 300->2000, 250->2025, 200->2225 */
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 1, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 200);
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 300);
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.5, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 300);
  /* An exact tie (0.5E + 150T = 2000 for both): the one listed first wins, as in the original. */
  const zeus_plo_measurement cost_tie[] = {{300, 1000, 10}, {200, 1300, 9}, {250, 1200, 10}};
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.5, 1));
  assert_zeus_ok(zeus_selector_select(&s, cost_tie, 3, &w));
  assert_int_equal(w, 300);
  const zeus_plo_measurement cost_tie_rev[] = {{200, 1300, 9}, {300, 1000, 10}, {250, 1200, 10}};
  assert_zeus_ok(zeus_selector_select(&s, cost_tie_rev, 3, &w));
  assert_int_equal(w, 200);
  /* world_size scales max power: eta 0.95, world 1: 950+15*10=1100, 855+157.5=1012.5, 807.5+180=987.5, 836+240=1076
   * -> 200; world 4: 950+600=1550, 855+630=1485, 807.5+720=1527.5 -> 250 */
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.95, 1));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 200);
  assert_zeus_ok(zeus_selector_zeus_cost(&s, 0.95, 4));
  assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
  assert_int_equal(w, 250);
  assert_near(zeus_cost(807.5 / 0.95, 12.0, 0.95, 1200), 807.5 + 720, 1e-9);
  /* max slowdown against 10 s at 300 W: 1.0 -> 300, 1.06 -> 250, 1.25 -> 200, 1.625 -> 150, 3 -> 100 */
  static const struct { double f; unsigned w; } sl[] = {{1.0, 300}, {1.04, 300}, {1.06, 250}, {1.25, 200},
                                                         {1.625, 150}, {2.99, 150}, {3.0, 100}, {100, 100}};
  for (size_t i = 0; i < sizeof sl / sizeof sl[0]; i++) {
    assert_zeus_ok(zeus_selector_max_slowdown(&s, sl[i].f));
    assert_zeus_ok(zeus_selector_select(&s, m, 5, &w));
    if (w != sl[i].w) fail_msg("factor %g: %u W, expected %u W", sl[i].f, w, sl[i].w);
  }
  /* Ties go to the measurement listed first; max slowdown takes the lowest qualifying limit. */
  const zeus_plo_measurement tie[] = {{150, 500, 2}, {300, 500, 1}, {200, 500, 1}};
  assert_zeus_ok(zeus_selector_energy(&s));
  assert_zeus_ok(zeus_selector_select(&s, tie, 3, &w));
  assert_int_equal(w, 150);
  assert_zeus_ok(zeus_selector_time(&s));
  assert_zeus_ok(zeus_selector_select(&s, tie, 3, &w));
  assert_int_equal(w, 300);
  assert_zeus_ok(zeus_selector_max_slowdown(&s, 1.0));
  assert_zeus_ok(zeus_selector_select(&s, tie, 3, &w));
  assert_int_equal(w, 200);
}

static int pick_second(void *ctx, const zeus_plo_measurement *m, size_t n, unsigned *out) {
  int *calls = ctx;
  (*calls)++;
  if (n < 2) return zeus_set_errmsg(ZEUS_EINVAL, "pick_second: need two measurements, got %zu", n);
  *out = m[1].power_limit_w;
  return ZEUS_OK;
}

static int pick_bogus(void *ctx, const zeus_plo_measurement *m, size_t n, unsigned *out) {
  (void)ctx, (void)m, (void)n;
  *out = 123;
  return ZEUS_OK;
}

static void custom_selector_is_called_and_its_answer_checked(void **state) {
  (void)state;
  const zeus_plo_measurement m[] = {{300, 10, 1}, {275, 9, 1.1}, {250, 8, 1.3}};
  int calls = 0;
  zeus_selector s;
  unsigned w;
  assert_zeus_ok(zeus_selector_custom(&s, pick_second, &calls));
  assert_zeus_ok(zeus_selector_select(&s, m, 3, &w));
  assert_int_equal(w, 275);
  assert_int_equal(calls, 1);
  assert_zeus_err(zeus_selector_select(&s, m, 1, &w), ZEUS_EINVAL, "pick_second: need two measurements, got 1");
  assert_zeus_ok(zeus_selector_custom(&s, pick_bogus, NULL));
  assert_zeus_err(zeus_selector_select(&s, m, 3, &w), ZEUS_EINVAL, "custom selector chose 123 W, which is not one of");

  /* Through the optimizer. */
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m1 = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.warmup_steps = 1;
  o.profile_steps = 2;
  o.pl_step_w = 100;
  assert_zeus_ok(zeus_selector_custom(&s, pick_second, &calls));
  o.selector = &s;
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m1, &o));
  work w1 = {.node = zeus_devices_sim_node(d), .ngpu = 1};
  one_epoch(p, &w1, 2 + 3 * 3);
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
  assert_int_equal(zeus_plo_optimal_power_limit_w(p), 200);
  zeus_plo_close(p);
  zeus_monitor_close(m1);
  zeus_devices_close(d);
}

/* ================================================================================================
 * Profile files
 * ============================================================================================== */

static void profile_save_then_load_round_trips_exactly(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  const zeus_plo_measurement m[] = {{300, 2924.4619999974966, 10.554417284205556}, {275, 2758.486, 10.3122528},
                                    {100, 0.1, 1e-9}};
  assert_zeus_ok(zeus_plo_profile_save(s.profile, m, 3));
  zeus_plo_measurement *back;
  size_t n;
  assert_zeus_ok(zeus_plo_profile_load(s.profile, &back, &n));
  assert_int_equal(n, 3);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(back[i].power_limit_w, m[i].power_limit_w);
    assert_true(back[i].energy_j == m[i].energy_j && back[i].time_s == m[i].time_s); /* bit for bit */
  }
  free(back);
  /* The original's shape, readable by the original. */
  FILE *fp = fopen(s.profile, "r");
  char buf[2048] = {0};
  assert_true(fread(buf, 1, sizeof buf - 1, fp) > 0);
  fclose(fp);
  assert_non_null(strstr(buf, "\"measurements\""));
  assert_non_null(strstr(buf, "\"power_limit\": 300"));
  assert_non_null(strstr(buf, "\"energy\": 2924.4619999974966"));
  /* No temporary file left behind. */
  DIR *dir = opendir(s.dir);
  struct dirent *e;
  int files = 0;
  while ((e = readdir(dir)))
    if (e->d_name[0] != '.') files++;
  closedir(dir);
  assert_int_equal(files, 1);
  /* A profile written by the original (extra fields ignored, integer energy accepted). */
  zeus_test_write_file(s.profile, "{\n    \"measurements\": [\n        {\"power_limit\": 250, \"energy\": 100, \"time\": 2.5, "
                                  "\"note\": 1}\n    ],\n    \"optimal\": 250\n}\n");
  assert_zeus_ok(zeus_plo_profile_load(s.profile, &back, &n));
  assert_int_equal(n, 1);
  assert_int_equal(back[0].power_limit_w, 250);
  assert_near(back[0].energy_j, 100, 0);
  free(back);
  assert_zeus_err(zeus_plo_profile_save(s.profile, m, 0), ZEUS_EINVAL, "nothing to save");
  char nodir[700];
  snprintf(nodir, sizeof nodir, "%s/no/such/dir/p.json", s.dir);
  assert_zeus_err(zeus_plo_profile_save(nodir, m, 3), ZEUS_EIO, nodir);
  scratch_free(&s);
}

static void profile_bad_files_are_eparse_naming_the_file_and_the_problem(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  static const struct { const char *text; const char *needle; } bad[] = {
      {"", "is empty"},
      {"  \n\t\n", "is empty"},
      {"{\"measurements\": [", "invalid JSON"},
      {"not json", "invalid JSON"},
      {"[1, 2]", "expected an object"},
      {"{}", "missing the field 'measurements'"},
      {"{\"measurements\": {}}", "'measurements' must be a list, got an object"},
      {"{\"measurements\": []}", "'measurements' is empty"},
      {"{\"measurements\": [3]}", "measurements[0] must be an object, got an integer"},
      {"{\"measurements\": [{\"power_limit\": 300, \"time\": 1}]}", "measurements[0] lacks the field 'energy'"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": 1, \"time\": 1}, {\"energy\": 1, \"time\": 1}]}",
       "measurements[1] lacks the field 'power_limit'"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": 1}]}", "lacks the field 'time'"},
      {"{\"measurements\": [{\"power_limit\": \"300\", \"energy\": 1, \"time\": 1}]}",
       "measurements[0].power_limit must be a number, got a string"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": -1, \"time\": 1}]}",
       "measurements[0].energy is -1, expected a number >= 0"},
      {"{\"measurements\": [{\"power_limit\": 300, \"energy\": 1, \"time\": 0}]}",
       "measurements[0].time is 0, expected a number > 0"},
      {"{\"measurements\": [{\"power_limit\": 0, \"energy\": 1, \"time\": 1}]}", "power_limit is 0, expected a number > 0"},
      {"{\"measurements\": [{\"power_limit\": 250.5, \"energy\": 1, \"time\": 1}]}", "whole number of watts"},
      {"{\"measurements\": [{\"power_limit\": 250, \"energy\": 1, \"time\": 1}, {\"power_limit\": 250, \"energy\": 2, "
       "\"time\": 1}]}",
       "power limit 250 W appears twice"},
      {"{\"measurements\": [], \"measurements\": []}", "invalid JSON"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    zeus_test_write_file(s.profile, bad[i].text);
    zeus_plo_measurement *m = (zeus_plo_measurement *)1;
    size_t n = 99;
    int rc = zeus_plo_profile_load(s.profile, &m, &n);
    if (rc != ZEUS_EPARSE || !strstr(zeus_errmsg(), bad[i].needle) || !strstr(zeus_errmsg(), s.profile))
      fail_msg("case %zu (%s): rc %d, message '%s', expected EPARSE naming the file and '%s'", i, bad[i].text, rc,
               zeus_errmsg(), bad[i].needle);
    assert_ptr_equal(m, (zeus_plo_measurement *)1); /* untouched */
  }
  char missing[700];
  snprintf(missing, sizeof missing, "%s/missing.json", s.dir);
  zeus_plo_measurement *m;
  size_t n;
  assert_zeus_err(zeus_plo_profile_load(missing, &m, &n), ZEUS_ENOENT, missing);
  scratch_free(&s);
}

/* A corrupt profile file makes open fail, changes no GPU and is never overwritten. */
static void plo_corrupt_profile_fails_open_and_is_left_alone(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  const char *text = "{\"measurements\": [{\"power_limit\": 300, \"energy\": 1}]}";
  zeus_test_write_file(s.profile, text);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.profile_path = s.profile;
  zeus_plo *p = NULL;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EPARSE, "lacks the field 'time'");
  assert_non_null(strstr(zeus_errmsg(), s.profile));
  assert_null(p);
  bool pm = true;
  assert_zeus_ok(zeus_gpu_get_persistence_mode(d, 0, &pm));
  assert_false(pm);
  /* A profile whose optimum is outside the GPUs' range. */
  zeus_test_write_file(s.profile, "{\"measurements\": [{\"power_limit\": 350, \"energy\": 1, \"time\": 1}]}");
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_ERANGE, "350 W is outside the GPUs' power-limit range");
  assert_non_null(strstr(zeus_errmsg(), s.profile));
  zeus_test_write_file(s.profile, text);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  char buf[256] = {0};
  FILE *fp = fopen(s.profile, "r");
  assert_true(fread(buf, 1, sizeof buf - 1, fp) > 0);
  fclose(fp);
  assert_string_equal(buf, text);
  scratch_free(&s);
}

/* A profile that cannot be saved: the optimizer still applies the optimum, and says why. */
static void plo_unsaveable_profile_still_applies_the_optimum(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  char path[700];
  snprintf(path, sizeof path, "%s/no-such-dir/profile.json", s.dir);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.profile_path = path;
  o.wait_steps = 0;
  o.warmup_steps = 0;
  o.profile_steps = 1;
  o.pl_step_w = 100;
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  zeus_sim_node *node = zeus_devices_sim_node(d);
  int rc = ZEUS_OK;
  for (int i = 0; i < 4; i++) {
    rc = zeus_plo_on_step_begin(p);
    if (rc) break;
    assert_zeus_ok(zeus_sim_work(node, 0, 1, NULL));
  }
  assert_int_equal(rc, ZEUS_EIO);
  assert_non_null(strstr(zeus_errmsg(), path));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
  assert_true(zeus_plo_optimal_power_limit_w(p) > 0);
  assert_zeus_ok(zeus_plo_on_step_begin(p));
  zeus_plo_close(p);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  scratch_free(&s);
}

/* ================================================================================================
 * State machine details, restore on close
 * ============================================================================================== */

static void plo_states_follow_the_step_counts_and_hooks_are_noops_elsewhere(void **state) {
  (void)state;
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.wait_steps = 2;
  o.warmup_steps = 3;
  o.profile_steps = 4;
  o.pl_step_w = 100; /* 300, 200, 100 */
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  zeus_sim_node *node = zeus_devices_sim_node(d);
  /* step begins 1, 2: READY; 3: WARMUP (300); 3+3=6: PROFILING; 6+4=10: WARMUP at 200 */
  static const zeus_plo_state want[] = {ZEUS_PLO_READY,     ZEUS_PLO_READY,     ZEUS_PLO_WARMUP,    ZEUS_PLO_WARMUP,
                                        ZEUS_PLO_WARMUP,    ZEUS_PLO_PROFILING, ZEUS_PLO_PROFILING, ZEUS_PLO_PROFILING,
                                        ZEUS_PLO_PROFILING, ZEUS_PLO_WARMUP};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    assert_zeus_ok(zeus_plo_on_step_begin(p));
    if (zeus_plo_get_state(p) != want[i]) fail_msg("after step begin %zu: state %d, expected %d", i + 1, zeus_plo_get_state(p), want[i]);
    assert_zeus_ok(zeus_sim_work(node, 0, 1, NULL));
    /* step end and epoch begin do nothing */
    assert_zeus_ok(zeus_plo_on_step_end(p));
    assert_zeus_ok(zeus_plo_on_epoch_begin(p));
    assert_int_equal(zeus_plo_get_state(p), want[i]);
  }
  assert_int_equal(zeus_plo_current_power_limit_w(p), 200);
  assert_true(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_300") == false);
  const zeus_plo_measurement *meas;
  assert_int_equal(zeus_plo_measurements(p, &meas), 1);
  assert_int_equal(meas[0].power_limit_w, 300);
  assert_near(meas[0].time_s, 4 * 0.05, 1e-9); /* 4 steps of 0.05 s at the top clock */
  assert_int_equal(zeus_plo_optimal_power_limit_w(p), 0);
  /* Through to PROFILING at 200 W: the window's name carries the limit. */
  for (int i = 0; i < 3; i++) assert_zeus_ok(zeus_plo_on_step_begin(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_PROFILING);
  assert_true(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  /* An epoch end cancels it and puts the maximum back. */
  assert_zeus_ok(zeus_plo_on_epoch_end(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_READY);
  assert_false(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  assert_int_equal(zeus_plo_current_power_limit_w(p), 300);
  /* An epoch end in READY does nothing. */
  assert_zeus_ok(zeus_plo_on_epoch_end(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_READY);
  assert_zeus_ok(zeus_plo_on_step_begin(p));
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_WARMUP);
  assert_int_equal(zeus_plo_current_power_limit_w(p), 200);
  /* Closing mid-window discards the window. */
  for (int i = 0; i < 3; i++) assert_zeus_ok(zeus_plo_on_step_begin(p));
  assert_true(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  zeus_plo_close(p);
  assert_false(zeus_monitor_is_open(m, "__GlobalPowerLimitOptimizer_200"));
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

/* GPUs that were not at the maximum get back what they had, persistence mode included. */
static void plo_close_restores_the_limits_from_before_the_optimizer(void **state) {
  (void)state;
  fake f;
  fake_load(&f);
  scratch s;
  scratch_init(&s);
  reset_env();
  setenv("ZEUS_SIM_GPUS", "3", 1);
  setenv("FAKE_NVML_LOG", s.log, 1);
  /* Someone else set GPU 1 to 175 W and GPU 2 to 250 W before (a handle of our own, kept open). */
  assert_int_equal(f.Init(), NVML_SUCCESS);
  nvmlDevice_t h;
  assert_int_equal(f.GetHandleByIndex(1, &h), NVML_SUCCESS);
  assert_int_equal(f.SetPowerManagementLimit(h, 175000), NVML_SUCCESS);
  assert_int_equal(f.GetHandleByIndex(2, &h), NVML_SUCCESS);
  assert_int_equal(f.SetPowerManagementLimit(h, 250000), NVML_SUCCESS);
  zeus_devices *d = open_fake_nvml();
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.warmup_steps = 1;
  o.profile_steps = 1;
  o.pl_step_w = 50;
  zeus_plo *p;
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  work w = {.f = &f, .ngpu = 3};
  one_epoch(p, &w, 2 + 5 * 2 + 1);
  assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
  unsigned opt = zeus_plo_optimal_power_limit_w(p);
  zeus_plo_close(p);
  static const unsigned before[] = {300000, 175000, 250000};
  for (unsigned g = 0; g < 3; g++) {
    unsigned mw;
    assert_zeus_ok(zeus_gpu_get_power_limit(d, g, &mw));
    assert_int_equal(mw, before[g]);
    assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", (int)g), (long)before[g]);
    assert_int_equal(last_logged(s.log, "nvmlDeviceSetPersistenceMode", (int)g), 0);
    bool pm = true;
    assert_zeus_ok(zeus_gpu_get_persistence_mode(d, g, &pm));
    assert_false(pm);
  }
  /* At open, every GPU went to the maximum first, GPU 0 too although it was there already (as
   * the original, which starts with an unknown current limit). */
  set_call got[MAX_CALLS];
  size_t n = read_set_calls(s.log, got, MAX_CALLS);
  assert_true(n >= 5);
  for (int g = 0; g < 3; g++) {
    assert_int_equal(got[2 + g].gpu, g);
    assert_int_equal(got[2 + g].mw, 300000);
  }
  (void)opt;
  zeus_monitor_close(m);
  zeus_devices_close(d);
  f.Shutdown();
  scratch_free(&s);
  fake_unload(&f);
}

/* ================================================================================================
 * Signals
 * ============================================================================================== */

static bool is_our_handler(int sig) {
  struct sigaction cur;
  sigaction(sig, NULL, &cur);
  return (cur.sa_flags & SA_SIGINFO) != 0;
}

static void plo_installs_signal_handlers_unless_told_not_to(void **state) {
  (void)state;
  struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN}, cur;
  sigaction(SIGINT, &dfl, NULL);
  sigaction(SIGTERM, &dfl, NULL);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.no_signal_handlers = true;
  zeus_plo *p1, *p2;
  assert_zeus_ok(zeus_plo_open(&p1, m, &o));
  assert_false(is_our_handler(SIGINT));
  assert_false(is_our_handler(SIGTERM));
  zeus_plo_close(p1);
  o.no_signal_handlers = false;
  assert_zeus_ok(zeus_plo_open(&p1, m, &o));
  assert_true(is_our_handler(SIGINT));
  assert_true(is_our_handler(SIGTERM));
  assert_zeus_ok(zeus_plo_open(&p2, m, &o));
  zeus_plo_close(p1);
  assert_true(is_our_handler(SIGTERM)); /* p2 still needs them */
  zeus_plo_close(p2);
  sigaction(SIGTERM, NULL, &cur);
  assert_true(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL);
  /* An ignored signal stays ignored. */
  sigaction(SIGINT, &ign, NULL);
  assert_zeus_ok(zeus_plo_open(&p1, m, &o));
  sigaction(SIGINT, NULL, &cur);
  assert_true(cur.sa_handler == SIG_IGN);
  assert_true(is_our_handler(SIGTERM));
  zeus_plo_close(p1);
  sigaction(SIGINT, &dfl, NULL);
  zeus_monitor_close(m);
  zeus_devices_close(d);
}

/* The child of the signal tests: 2 fake-NVML GPUs preset to 200 W and 225 W, an optimizer
 * profiling, stopped at 250 W; it tells the parent through `ready_fd` and waits for the signal.
 * With `chain`, a previous handler reports GPU 0's limit at the time it runs and exits 42.
 * Exit codes other than by the signal mean a setup failure. */
static fake child_fake;
static int child_report_fd = -1;

static void previous_handler(int sig) {
  (void)sig;
  nvmlDevice_t h;
  unsigned mw = 0;
  child_fake.GetHandleByIndex(0, &h);
  child_fake.GetPowerManagementLimit(h, &mw);
  if (write(child_report_fd, &mw, sizeof mw) != (ssize_t)sizeof mw) _exit(43);
  _exit(42);
}

static void signal_child(int ready_fd, bool chain) {
  memset(&child_fake, 0, sizeof child_fake);
  child_fake.lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!child_fake.lib) _exit(10);
  *(void **)&child_fake.Init = dlsym(child_fake.lib, "nvmlInit_v2");
  *(void **)&child_fake.GetHandleByIndex = dlsym(child_fake.lib, "nvmlDeviceGetHandleByIndex_v2");
  *(void **)&child_fake.SetPowerManagementLimit = dlsym(child_fake.lib, "nvmlDeviceSetPowerManagementLimit");
  *(void **)&child_fake.GetPowerManagementLimit = dlsym(child_fake.lib, "nvmlDeviceGetPowerManagementLimit");
  *(void **)&child_fake.RunWorkAll = dlsym(child_fake.lib, "fakeNvmlRunWorkAll");
  if (!child_fake.Init || !child_fake.GetHandleByIndex || !child_fake.SetPowerManagementLimit ||
      !child_fake.GetPowerManagementLimit || !child_fake.RunWorkAll || child_fake.Init() != NVML_SUCCESS)
    _exit(11);
  nvmlDevice_t h;
  for (unsigned g = 0; g < 2; g++)
    if (child_fake.GetHandleByIndex(g, &h) || child_fake.SetPowerManagementLimit(h, 200000 + 25000 * g)) _exit(12);
  if (chain) {
    child_report_fd = ready_fd;
    struct sigaction sa = {.sa_handler = previous_handler};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
  }
  zeus_devices_opts dopts = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH};
  zeus_devices *d;
  if (zeus_devices_open(&d, &dopts)) _exit(13);
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = no_cpu};
  zeus_monitor *m;
  if (zeus_monitor_open(&m, &mo)) _exit(14);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.warmup_steps = 1;
  o.profile_steps = 2;
  zeus_plo *p;
  if (zeus_plo_open(&p, m, &o)) _exit(15);
  double units[2] = {1, 1};
  /* 300 W (already there), 275 W, then 250 W: stop once its window is open. */
  for (int i = 0; i < 100; i++) {
    if (zeus_plo_on_step_begin(p)) _exit(16);
    if (zeus_plo_get_state(p) == ZEUS_PLO_PROFILING && zeus_plo_current_power_limit_w(p) == 250) break;
    child_fake.RunWorkAll(units);
  }
  if (zeus_plo_current_power_limit_w(p) != 250 || zeus_plo_get_state(p) != ZEUS_PLO_PROFILING) _exit(19);
  if (!chain && write(ready_fd, "r", 1) != 1) _exit(20);
  if (chain) {
    unsigned ready = 1;
    if (write(ready_fd, &ready, sizeof ready) != (ssize_t)sizeof ready) _exit(20);
  }
  for (;;) pause();
}

static void killed_while_profiling_restores_every_gpu(int sig, bool chain) {
  fake f;
  fake_load(&f); /* only to check that the library is there */
  fake_unload(&f);
  scratch s;
  scratch_init(&s);
  reset_env();
  setenv("ZEUS_SIM_GPUS", "2", 1);
  setenv("FAKE_NVML_LOG", s.log, 1);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    signal_child(fds[1], chain);
    _exit(99);
  }
  close(fds[1]);
  struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
  if (poll(&pfd, 1, 60000) != 1) {
    kill(pid, SIGKILL);
    fail_msg("the child did not reach profiling at 250 W");
  }
  unsigned msg = 0;
  ssize_t got = read(fds[0], &msg, chain ? sizeof msg : 1);
  if (got <= 0) {
    int st;
    waitpid(pid, &st, 0);
    fail_msg("the child failed before profiling (exit %d)", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  /* The optimizer really was at 250 W on both GPUs. */
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 0), 250000);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 1), 250000);
  assert_int_equal(kill(pid, sig), 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  if (chain) {
    /* The previous handler ran, after the GPUs were restored. */
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 42) fail_msg("child status %#x, expected exit 42 from the previous handler", st);
    unsigned mw = 0;
    assert_int_equal(read(fds[0], &mw, sizeof mw), (ssize_t)sizeof mw);
    assert_int_equal(mw, 200000);
  } else {
    /* The default action happened: the process died of the signal. */
    if (!WIFSIGNALED(st) || WTERMSIG(st) != sig) fail_msg("child status %#x, expected death by signal %d", st, sig);
  }
  close(fds[0]);
  /* Every GPU is back at its limit from before the optimizer, persistence mode off again. */
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 0), 200000);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPowerManagementLimit", 1), 225000);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPersistenceMode", 0), 0);
  assert_int_equal(last_logged(s.log, "nvmlDeviceSetPersistenceMode", 1), 0);
  scratch_free(&s);
}

static void plo_sigterm_while_profiling_restores_every_gpu(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGTERM, false);
}

static void plo_sigint_while_profiling_restores_every_gpu(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGINT, false);
}

static void plo_signal_chains_to_the_previous_handler_after_restoring(void **state) {
  (void)state;
  killed_while_profiling_restores_every_gpu(SIGTERM, true);
}

/* ================================================================================================
 * Several ranks through a collective (simulated in-process)
 * ============================================================================================== */

/* Pretends to be rank `rank` of 2 whose peer measured the same energy and 1.5x the time, and
 * whose peer (rank 0) chooses `bcast_w` when nonzero. */
typedef struct fake_peer {
  int sum_calls, max_calls, bcast_calls;
  double max_shift_mw;   /* added to the peer's maximum power limit in the range agreement */
  double peer_has_file;  /* the peer's answer to "does the profile file exist" */
  unsigned bcast_w;
  int fail_after;        /* > 0: the fail_after-th allreduce fails with ZEUS_ENET */
} fake_peer;

static int peer_allreduce(void *ctx, double *v, size_t n, zeus_reduce_op op) {
  fake_peer *fp = ctx;
  int call = fp->sum_calls + fp->max_calls + 1;
  if (fp->fail_after > 0 && call >= fp->fail_after) return zeus_set_errmsg(ZEUS_ENET, "peer unreachable");
  if (op == ZEUS_REDUCE_SUM) {
    fp->sum_calls++;
    if (n == 2) { /* open: GPUs and whether the profile file exists */
      v[0] *= 2;
      v[1] += fp->peer_has_file;
    } else {
      for (size_t i = 0; i < n; i++) v[i] *= 2;
    }
  } else {
    fp->max_calls++;
    if (n == 4) { /* open: max, -max, min, -min of the range */
      double peer[4] = {v[0] + fp->max_shift_mw, -(v[0] + fp->max_shift_mw), v[2], -v[2]};
      for (size_t i = 0; i < 4; i++) v[i] = fmax(v[i], peer[i]);
    } else {
      for (size_t i = 0; i < n; i++) v[i] = fmax(v[i], v[i] * 1.5);
    }
  }
  return ZEUS_OK;
}

static int peer_broadcast(void *ctx, void *buf, size_t len, int root) {
  fake_peer *fp = ctx;
  fp->bcast_calls++;
  assert_int_equal(root, 0);
  assert_int_equal(len, sizeof(double));
  if (fp->bcast_w) {
    double w = fp->bcast_w;
    memcpy(buf, &w, sizeof w);
  }
  return ZEUS_OK;
}

static void plo_collective_sums_energy_maxes_time_and_agrees(void **state) {
  (void)state;
  ZEUS_SKIP_WITHOUT_DATA();
  char paths[16][1024];
  size_t nfiles = list_profiles(paths, 16);
  scratch s;
  scratch_init(&s);
  for (size_t fi = 0; fi < nfiles; fi++) {
    ref_profile r;
    ref_load(paths[fi], &r);
    zeus_sim_config *cfg;
    assert_zeus_ok(zeus_sim_config_load(&cfg, r.path, 0));
    zeus_devices *d = open_sim_cfg(cfg);
    zeus_sim_config_free(cfg);
    zeus_monitor *m = open_monitor(d);
    for (int rank = 0; rank < 2; rank++) {
      fake_peer fp = {0};
      zeus_collective c = {.ctx = &fp, .rank = rank, .world_size = 2, .allreduce = peer_allreduce,
                           .broadcast = peer_broadcast};
      zeus_plo_opts o;
      zeus_plo_opts_init(&o);
      o.collective = &c;
      o.warmup_steps = 2;
      o.profile_steps = 40;
      o.profile_path = s.profile;
      unlink(s.profile);
      zeus_plo *p;
      assert_zeus_ok(zeus_plo_open(&p, m, &o));
      work w = {.node = zeus_devices_sim_node(d), .ngpu = r.ngpu};
      one_epoch(p, &w, 2 + (long)r.n * 42 + 3);
      assert_int_equal(zeus_plo_get_state(p), ZEUS_PLO_DONE);
      /* Both ranks' figures: energy summed (x2), time the larger (x1.5). */
      ref_profile both = r;
      for (size_t i = 0; i < r.n; i++) {
        both.energy_j[i] *= 2;
        both.time_s[i] *= 1.5;
      }
      const zeus_plo_measurement *meas;
      assert_int_equal(zeus_plo_measurements(p, &meas), r.n);
      for (size_t i = 0; i < r.n; i++) {
        assert_near(meas[i].energy_j, both.energy_j[i], 0.004 * r.ngpu);
        assert_near(meas[i].time_s, both.time_s[i], 1e-9 * both.time_s[i]);
      }
      /* The default selector's world size counts the peer's GPUs too. */
      unsigned want = ref_optimum(&both, REF_COST, 0.5, 2 * r.ngpu);
      assert_int_equal(zeus_plo_optimal_power_limit_w(p), want);
      assert_int_equal(fp.sum_calls, 1 + (int)r.n);
      assert_int_equal(fp.max_calls, 1 + (int)r.n);
      assert_int_equal(fp.bcast_calls, 1);
      /* Only rank 0 writes the profile. */
      assert_int_equal(access(s.profile, F_OK) == 0, rank == 0);
      zeus_plo_close(p);
    }
    zeus_monitor_close(m);
    zeus_devices_close(d);
  }
  scratch_free(&s);
}

static void plo_collective_disagreements_and_failures_are_errors(void **state) {
  (void)state;
  scratch s;
  scratch_init(&s);
  zeus_devices *d = open_sim_dvfs(1);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  fake_peer fp = {0};
  zeus_collective c = {.ctx = &fp, .rank = 1, .world_size = 2, .allreduce = peer_allreduce, .broadcast = peer_broadcast};
  o.collective = &c;
  zeus_plo *p = NULL;
  /* The peer's GPUs have another range. */
  fp.max_shift_mw = 25000;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "power-limit ranges differ across ranks");
  /* The peer sees no profile file where this rank sees one. */
  fp = (fake_peer){0};
  const zeus_plo_measurement one[] = {{300, 10, 1}, {200, 5, 1.2}};
  assert_zeus_ok(zeus_plo_profile_save(s.profile, one, 2));
  o.profile_path = s.profile;
  assert_zeus_err(zeus_plo_open(&p, m, &o), ZEUS_EINVAL, "exists on 1 of 2 ranks");
  /* Rank 0's choice wins when loading too. */
  fp = (fake_peer){.peer_has_file = 1, .bcast_w = 200};
  zeus_selector time_sel;
  zeus_selector_time(&time_sel);
  o.selector = &time_sel; /* this rank alone would choose 300 W */
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  assert_int_equal(zeus_plo_optimal_power_limit_w(p), 200);
  assert_int_equal(zeus_plo_current_power_limit_w(p), 200);
  zeus_plo_close(p);
  /* A failing collective during profiling is returned, naming what was being combined. */
  o.profile_path = NULL;
  o.selector = NULL;
  o.wait_steps = 0;
  o.warmup_steps = 0;
  o.profile_steps = 1;
  fp = (fake_peer){.fail_after = 3};
  assert_zeus_ok(zeus_plo_open(&p, m, &o));
  assert_zeus_ok(zeus_plo_on_step_begin(p)); /* 300 W, window begins */
  assert_zeus_err(zeus_plo_on_step_begin(p), ZEUS_ENET, "peer unreachable");
  assert_non_null(strstr(zeus_errmsg(), "combining the measurement of 300 W across ranks"));
  zeus_plo_close(p);
  unsigned mw;
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 300000);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  scratch_free(&s);
}

int main(int argc, char **argv) {
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plo_acceptance_epoch_never_ends_early),
      cmocka_unit_test(plo_acceptance_epoch_ends_during_warmup),
      cmocka_unit_test(plo_acceptance_epoch_ends_during_profiling),
      cmocka_unit_test(plo_acceptance_epoch_ends_on_last_profiling_step),
      cmocka_unit_test(plo_zero_warmup_and_zero_wait_profile_straight_away),
      cmocka_unit_test(plo_reloaded_profile_gives_each_selectors_optimum),
      cmocka_unit_test(plo_grid_never_goes_below_the_device_minimum),
      cmocka_unit_test(plo_nonuniform_power_limit_ranges_are_einval_naming_the_gpus),
      cmocka_unit_test(plo_bad_options_are_einval_naming_the_option),
      cmocka_unit_test(selector_parameters_out_of_range_are_einval_naming_them),
      cmocka_unit_test(selectors_pick_each_optimum_and_break_ties_to_the_first),
      cmocka_unit_test(custom_selector_is_called_and_its_answer_checked),
      cmocka_unit_test(profile_save_then_load_round_trips_exactly),
      cmocka_unit_test(profile_bad_files_are_eparse_naming_the_file_and_the_problem),
      cmocka_unit_test(plo_corrupt_profile_fails_open_and_is_left_alone),
      cmocka_unit_test(plo_unsaveable_profile_still_applies_the_optimum),
      cmocka_unit_test(plo_states_follow_the_step_counts_and_hooks_are_noops_elsewhere),
      cmocka_unit_test(plo_close_restores_the_limits_from_before_the_optimizer),
      cmocka_unit_test(plo_installs_signal_handlers_unless_told_not_to),
      cmocka_unit_test(plo_sigterm_while_profiling_restores_every_gpu),
      cmocka_unit_test(plo_sigint_while_profiling_restores_every_gpu),
      cmocka_unit_test(plo_signal_chains_to_the_previous_handler_after_restoring),
      cmocka_unit_test(plo_collective_sums_energy_maxes_time_and_agrees),
      cmocka_unit_test(plo_collective_disagreements_and_failures_are_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
