/* tests/pfo_client_testutil.h: what the Perseus client's tests share (header-only, as
 * tests/pfo_http.h): a fresh folder per test, simulated GPUs, the fake NVML's call log, and (with
 * PFO_CLIENT_TESTUTIL_SERVER defined first) an in-process server, fast client options, plan and
 * model files, and the harness that runs a pipeline job as threads, each rank on its own copy of
 * the fake libnvidia-ml.so.1 (examples/pipeline_sim.h), with the check of every clock it ran at.
 *
 * Pipeline jobs run as threads. Where the clocks must be observed, each rank's GPU sits behind its
 * own copy of the fake NVML (as each rank of a real job is a process with its own NVML): the copy's
 * simulated node then moves only with that rank's work, and the FAKE_NVML_LOG lines of GPU r come
 * from rank r's frequency controller alone. check_clocks() checks, instruction by instruction, the
 * clock each simulated GPU ran at (read through nvmlDeviceGetClockInfo when the work starts)
 * against the schedules the server dumped, and the SetGpuLockedClocks calls in the log against the
 * changes those schedules call for. */
#ifndef ZEUS_TEST_PFO_CLIENT_TESTUTIL_H
#define ZEUS_TEST_PFO_CLIENT_TESTUTIL_H

#include "test_util.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include <zeus.h>

#define MAXW 8
#define SM_CLOCK 1 /* NVML_CLOCK_SM */

static char g_dir[256];

static inline void fresh_dir(void) {
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  static const char *const vars[] = {"FAKE_NVML_LOG", "FAKE_NVML_INJECT", "ZEUS_SIM_MODEL_FILE", "ZEUS_SIM_GPUS",
                                     "ZEUS_SIM_CLOCK", "ZEUS_PFO_ITERS_PER_ROUND", "PERSEUS_ITERS_PER_ROUND",
                                     "ZEUS_PFO_SERVER_URL", "PERSEUS_RETRIES", "ZEUS_PFO_RETRIES"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

static inline zeus_devices *open_sim(void) {
  zeus_sim_config cfg = {.num_gpus = 1, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts o = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

static inline void assert_unlocked(zeus_devices *d) {
  unsigned lo, hi, mlo, mhi;
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(zeus_devices_sim_node(d), 0, &lo, &hi, &mlo, &mhi));
  assert_int_equal(hi, 0);
  assert_int_equal(mhi, 0);
}

/* The SetGpuLockedClocks minimums logged for GPU `gpu` (successful calls), and whether a successful
 * ResetGpuLockedClocks / SetMemoryLockedClocks / ResetMemoryLockedClocks of that GPU came after. */
typedef struct gpu_log {
  unsigned sets[4096];
  size_t nsets;
  bool reset_after_last_set, mem_locked, mem_reset;
} gpu_log;

static inline void read_log(int gpu, gpu_log *out) {
  char path[512], line[512];
  snprintf(path, sizeof path, "%s/nvml.log", g_dir);
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    char fn[128];
    int g, rc;
    unsigned a, b;
    if (sscanf(line, "%127s %d", fn, &g) != 2 || g != gpu) continue;
    if (!strstr(line, "-> 0")) continue;
    if (!strcmp(fn, "nvmlDeviceSetGpuLockedClocks") && sscanf(line, "%*s %*d %u %u -> %d", &a, &b, &rc) == 3) {
      if (out->nsets < 4096) out->sets[out->nsets++] = a;
      assert_int_equal(a, b);
      out->reset_after_last_set = false;
    } else if (!strcmp(fn, "nvmlDeviceResetGpuLockedClocks")) {
      out->reset_after_last_set = true;
    } else if (!strcmp(fn, "nvmlDeviceSetMemoryLockedClocks")) {
      out->mem_locked = true;
    } else if (!strcmp(fn, "nvmlDeviceResetMemoryLockedClocks")) {
      out->mem_reset = true;
    }
  }
  fclose(f);
}

#ifdef PFO_CLIENT_TESTUTIL_SERVER
#include "../examples/pipeline_sim.h"

/* ---- the server, client options, plan files ---- */

static inline zeus_pfo_server *start_server(const char *sched, const char *args, int port, const char *token) {
  static char dump[400];
  snprintf(dump, sizeof dump, "%s/dump", g_dir);
  zeus_pfo_server_opts o = {.port = port, .scheduler = sched, .scheduler_args = args, .dump_data = true,
                            .dump_dir = dump, .token = token};
  zeus_pfo_server *s;
  assert_zeus_ok(zeus_pfo_server_open(&s, &o));
  return s;
}

static inline void url_of(int port, char *buf, size_t n) { snprintf(buf, n, "http://127.0.0.1:%d/", port); }

/* Options with a fast failure path: few quick retries, short timeouts. */
static inline void fast_opts(zeus_pfo_optimizer_opts *o, const char *url, long k) {
  zeus_pfo_optimizer_opts_init(o);
  o->server_url = url;
  o->retries = 2;
  o->retry_backoff_s = 0.05;
  o->connect_timeout_s = 2;
  o->request_timeout_s = 10;
  o->schedule_timeout_s = 30;
  o->iters_per_round = k;
}

/* fast_opts for a job of one rank on `d`'s GPU 0. */
static inline void solo_opts(zeus_pfo_optimizer_opts *o, const char *url, long k, zeus_devices *d) {
  fast_opts(o, url, k);
  o->pp_degree = o->dp_degree = o->tp_degree = o->world_size = 1;
  o->devices = d;
}

/* A PointSolution server serving `plan` (a plan file's text, written to <g_dir>/plan.py); its URL
 * in url[len]. */
static inline zeus_pfo_server *start_plan_server(const char *plan, char *url, size_t len) {
  char path[512], args[700];
  snprintf(path, sizeof path, "%s/plan.py", g_dir);
  zeus_test_write_file(path, plan);
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", path);
  zeus_pfo_server *s = start_server("PointSolution", args, -1, NULL);
  url_of(zeus_pfo_server_port(s), url, len);
  return s;
}

/* A plan file (lowtime's Python literal): entry s = names[s][i] at freqs[s][i]. */
static inline void write_plan(const char *path, int n, const char *const *const *names, const int *const *freqs,
                       const size_t *len) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("# written by test_pfo_client\n[\n", f);
  for (int s = 0; s < n; s++) {
    fputs("  [", f);
    for (size_t i = 0; i < len[s]; i++) fprintf(f, "%s(\"%s\", %d)", i ? ", " : "", names[s][i], freqs[s][i]);
    fputs("],\n", f);
  }
  fputs("]\n", f);
  fclose(f);
}

/* A PointSolution plan for a pp-stage 1F1B pipeline of mb microbatches, written to
 * <g_dir>/<name>: instruction i of stage s runs at freq(s, i, its microbatch, its name). Fills
 * freqs[s][i] (MAXW stages of at most 2 * PLAN_MAX_MB instructions) with the planned clocks and
 * args with the scheduler arguments naming the file. */
#define PLAN_MAX_MB 8
typedef int (*plan_freq_fn)(int stage, size_t i, int microbatch, const char *instruction);
static inline void write_1f1b_plan(const char *name, int pp, int mb, plan_freq_fn freq,
                                   int freqs[][2 * PLAN_MAX_MB], char *args, size_t args_len) {
  assert_true(pp <= MAXW && mb <= PLAN_MAX_MB);
  const char *names[MAXW][2 * PLAN_MAX_MB], *const *np[MAXW];
  int mbs[2 * PLAN_MAX_MB];
  const int *fp[MAXW];
  size_t len[MAXW];
  for (int st = 0; st < pp; st++) {
    len[st] = psim_order(pp, st, mb, names[st], mbs);
    for (size_t i = 0; i < len[st]; i++) freqs[st][i] = freq(st, i, mbs[i], names[st][i]);
    np[st] = names[st];
    fp[st] = freqs[st];
  }
  char plan[512];
  snprintf(plan, sizeof plan, "%s/%s", g_dir, name);
  write_plan(plan, pp, np, fp, len);
  snprintf(args, args_len, "{\"solution_path\": \"%s\"}", plan);
}

/* ---- per-stage simulated GPU models (DVFS, default power curve) ---- */

static inline double stage_tpu(int stage, int pp) { return stage == pp - 1 ? 0.015 : stage == 0 ? 0.013 : 0.010; }
static inline double stage_mbf(int stage, int pp) { return stage == pp - 1 ? 0.15 : stage == 0 ? 0.35 : 0.25; }

/* A JSON model file with one GPU per rank, each with its stage's model. */
static inline void write_model(const char *path, int world, const int *stage_of, int pp) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("{\"clock\": \"virtual\", \"gpus\": [", f);
  for (int g = 0; g < world; g++)
    fprintf(f, "%s{\"model\": \"dvfs\", \"time_per_unit_s\": %.17g, \"mem_bound_fraction\": %.17g}", g ? ", " : "",
            stage_tpu(stage_of[g], pp), stage_mbf(stage_of[g], pp));
  fputs("]}\n", f);
  fclose(f);
}

/* The exact time and energy the model gives one unit of work at f MHz. */
static inline double model_time(int stage, int pp, double units, unsigned f) {
  double m = stage_mbf(stage, pp);
  return units * stage_tpu(stage, pp) * (m + (1 - m) * 1740.0 / f);
}
static inline double model_power(unsigned f) {
  double x = f / 1740.0;
  return 120 + 170 * x * x * x;
}

/* ---- ranks on fake NVML copies ---- */

typedef struct fake_rank {
  struct harness *h;
  int rank;
  char lib[512];
  zeus_devices *dev;
  void *so;
  int (*run)(unsigned, double);
  int (*idle)(double);
  double (*now)(void);
  int (*clock_info)(void *, int, unsigned *);
  void *nvdev;
  psim_rank pr;
  unsigned *seen; /* the SM clock at the start of each instruction's work */
  size_t nseen, capseen;
  char job_dir[600];
  int rc;
  char err[1024];
} fake_rank;

typedef struct harness {
  int dp, pp, tp, world, mb;
  long iters, k;
  char url[64];
  psim_job *job;
  zeus_thread_group *tg;
  fake_rank r[MAXW];
} harness;

static inline int fake_work(void *ctx, double units) {
  fake_rank *f = ctx;
  unsigned mhz = 0;
  if (f->clock_info(f->nvdev, SM_CLOCK, &mhz) != 0) return zeus_set_errmsg(ZEUS_EDEVICE, "GetClockInfo failed");
  if (f->nseen == f->capseen) {
    f->capseen = f->capseen ? 2 * f->capseen : 64;
    f->seen = realloc(f->seen, f->capseen * sizeof *f->seen);
  }
  f->seen[f->nseen++] = mhz;
  return f->run((unsigned)f->rank, units) == 0 ? ZEUS_OK : zeus_set_errmsg(ZEUS_EDEVICE, "fakeNvmlRunWork failed");
}
static inline int fake_idle(void *ctx, double s) {
  return ((fake_rank *)ctx)->idle(s) == 0 ? ZEUS_OK : zeus_set_errmsg(ZEUS_EDEVICE, "fakeNvmlIdle failed");
}
static inline double fake_now(void *ctx) { return ((fake_rank *)ctx)->now(); }

static inline void *need(void *so, const char *name) {
  void *p = dlsym(so, name);
  if (!p) fail_msg("the fake NVML lacks %s", name);
  return p;
}

/* Copies the fake NVML once per rank, writes the per-stage model, opens every rank's devices. */
static inline void harness_setup(harness *h, int dp, int pp, int tp, int mb, long iters, long k, int port) {
  memset(h, 0, sizeof *h);
  h->dp = dp, h->pp = pp, h->tp = tp, h->world = dp * pp * tp, h->mb = mb, h->iters = iters, h->k = k;
  assert_true(h->world <= MAXW);
  url_of(port, h->url, sizeof h->url);
  assert_zeus_ok(psim_job_open(&h->job, dp, pp, tp, mb));
  assert_zeus_ok(zeus_thread_group_open(&h->tg, h->world));
  char path[512], log[512];
  int stage_of[MAXW];
  for (int r = 0; r < h->world; r++) {
    int d, p, t;
    psim_coords(h->job, r, &d, &p, &t);
    stage_of[r] = p;
  }
  snprintf(path, sizeof path, "%s/model.json", g_dir);
  write_model(path, h->world, stage_of, pp);
  setenv("ZEUS_SIM_MODEL_FILE", path, 1);
  snprintf(log, sizeof log, "%s/nvml.log", g_dir);
  setenv("FAKE_NVML_LOG", log, 1);
  for (int r = 0; r < h->world; r++) {
    fake_rank *f = &h->r[r];
    f->h = h;
    f->rank = r;
    snprintf(path, sizeof path, "%s/nvml%d", g_dir, r);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(f->lib, sizeof f->lib, "%s/libnvidia-ml.so.1", path);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", FAKE_NVML_PATH, f->lib);
    assert_int_equal(system(cmd), 0);
    zeus_devices_opts o = {.backend = "nvml", .nvml_library = f->lib, .all_devices = true};
    assert_zeus_ok(zeus_devices_open(&f->dev, &o));
    assert_int_equal(zeus_gpu_count(f->dev), h->world);
    f->so = dlopen(f->lib, RTLD_NOW | RTLD_LOCAL); /* the instance the backend uses */
    assert_non_null(f->so);
    *(void **)&f->run = need(f->so, "fakeNvmlRunWork");
    *(void **)&f->idle = need(f->so, "fakeNvmlIdle");
    *(void **)&f->now = need(f->so, "zeusSimClockNow");
    *(void **)&f->clock_info = need(f->so, "nvmlDeviceGetClockInfo");
    int (*init)(void) = need(f->so, "nvmlInit_v2");
    int (*handle)(unsigned, void **) = need(f->so, "nvmlDeviceGetHandleByIndex_v2");
    assert_int_equal(init(), 0);
    assert_int_equal(handle((unsigned)r, &f->nvdev), 0);
    assert_zeus_ok(psim_rank_init(&f->pr, h->job, r));
    f->pr.gpu = (psim_gpu){f, fake_work, fake_idle, fake_now, NULL};
  }
}

static inline void harness_teardown(harness *h) {
  for (int r = 0; r < h->world; r++) {
    fake_rank *f = &h->r[r];
    int (*shutdown)(void) = need(f->so, "nvmlShutdown");
    shutdown();
    dlclose(f->so);
    zeus_devices_close(f->dev);
    psim_rank_free(&f->pr);
    free(f->seen);
  }
  zeus_thread_group_close(h->tg);
  psim_job_close(h->job);
}

static inline void *fake_rank_main(void *p) {
  fake_rank *f = p;
  harness *h = f->h;
  zeus_collective coll;
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer *opt = NULL;
  zeus_pfo_optimizer_opts_init(&o);
  int rc = zeus_thread_group_collective(h->tg, f->rank, &coll);
  if (!rc) {
    o.server_url = h->url;
    o.rank = f->rank, o.dp_rank = f->pr.dp, o.pp_rank = f->pr.pp, o.tp_rank = f->pr.tp;
    o.dp_degree = h->dp, o.pp_degree = h->pp, o.tp_degree = h->tp, o.world_size = h->world;
    o.devices = f->dev;
    o.device_id = (unsigned)f->rank;
    o.collective = &coll;
    o.pipe_schedule = f->pr.names;
    o.n_pipe_schedule = f->pr.n;
    o.iters_per_round = h->k;
    o.retries = 2, o.retry_backoff_s = 0.05, o.schedule_timeout_s = 30;
    rc = zeus_pfo_optimizer_open(&opt, &o);
  }
  if (!rc) {
    snprintf(f->job_dir, sizeof f->job_dir, "%s/dump/%s", g_dir, zeus_pfo_job_id(opt));
    f->pr.opt = opt;
    for (long i = 0; i < h->iters && !rc; i++) rc = psim_iteration(&f->pr);
  } else {
    psim_job_abort(h->job);
  }
  if (rc) snprintf(f->err, sizeof f->err, "%s", zeus_errmsg());
  f->rc = rc;
  zeus_pfo_optimizer_close(opt);
  return NULL;
}

static inline void harness_run(harness *h) {
  pthread_t th[MAXW];
  for (int r = 0; r < h->world; r++) assert_int_equal(pthread_create(&th[r], NULL, fake_rank_main, &h->r[r]), 0);
  for (int r = 0; r < h->world; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < h->world; r++)
    if (h->r[r].rc) fail_msg("rank %d: %s", r, h->r[r].err);
}

/* Every rank ran every instruction of every iteration at the frequency the server's schedule of
 * that round gave it, and the controller changed the clock exactly where the schedule changes. */
static inline void check_clocks(harness *h) {
  for (int r = 0; r < h->world; r++) {
    fake_rank *f = &h->r[r];
    size_t want_n = (size_t)h->iters * f->pr.n;
    assert_int_equal(f->nseen, want_n);
    unsigned prev = 1740;
    gpu_log lg;
    read_log(r, &lg);
    size_t changes = 0;
    unsigned first_of_last = 0; /* the last iteration's first planned clock */
    assert_true(lg.nsets >= 1);
    assert_int_equal(lg.sets[0], 1740); /* start-up: the highest clock */
    for (long it = 0; it < h->iters; it++) {
      zeus_pfo_schedule *s;
      size_t ns;
      assert_zeus_ok(zeus_pfo_load_schedules(f->job_dir, (int)(it / h->k), &s, &ns));
      assert_int_equal(ns, h->world);
      assert_int_equal(s[r].n_frequencies, f->pr.n);
      for (size_t i = 0; i < f->pr.n; i++) {
        unsigned want = (unsigned)s[r].frequencies[i].frequency_mhz;
        if (i == 0) first_of_last = want;
        if (strcmp(s[r].frequencies[i].instruction, f->pr.names[i]))
          fail_msg("rank %d iteration %ld instruction %zu: schedule says %s, pipeline ran %s", r, it, i,
                   s[r].frequencies[i].instruction, f->pr.names[i]);
        unsigned got = f->seen[it * f->pr.n + i];
        if (got != want) fail_msg("rank %d iteration %ld instruction %zu (%s): GPU ran at %u MHz, schedule says %u", r,
                                  it, i, f->pr.names[i], got, want);
        if (want != prev) {
          changes++;
          if (changes >= lg.nsets || lg.sets[changes] != want)
            fail_msg("rank %d: clock change %zu should be SetGpuLockedClocks %u, the log has %s%u", r, changes, want,
                     changes >= lg.nsets ? "nothing (" : "", changes >= lg.nsets ? 0 : lg.sets[changes]);
          prev = want;
        }
      }
      zeus_pfo_schedules_free(s, ns);
    }
    /* No other clock change, but one: clocks are issued ahead of their instructions (by the lock
     * latency), so the controller may have set the first clock of an iteration that never came
     * (the plan repeats) before the optimizer closed. */
    if (lg.nsets == changes + 2 && first_of_last != prev) assert_int_equal(lg.sets[changes + 1], first_of_last);
    else assert_int_equal(lg.nsets, changes + 1);
    assert_true(lg.reset_after_last_set);    /* reset at close */
    assert_true(lg.mem_locked);
    assert_true(lg.mem_reset);
  }
}

/* One rank whose plan is forward @1740, backward @1500. */
static inline zeus_pfo_optimizer *one_rank(zeus_pfo_server **s, zeus_devices **d) {
  char url[64];
  *s = start_plan_server("[[(\"forward\", 1740), (\"backward\", 1500)]]\n", url, sizeof url);
  *d = open_sim();
  zeus_pfo_optimizer_opts o;
  solo_opts(&o, url, 100, *d);
  zeus_pfo_optimizer *opt;
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  assert_int_equal(zeus_pfo_current_schedule(opt)->n_frequencies, 2);
  return opt;
}

/* One iteration of a forward and a backward through the hooks. */
static inline int one_iteration(zeus_pfo_optimizer *opt) {
  int rc = zeus_pfo_on_step_begin(opt);
  static const char *const seq[] = {"forward", "backward"};
  for (int i = 0; i < 2 && !rc; i++) {
    rc = zeus_pfo_on_instruction_begin(opt, seq[i]);
    if (!rc) rc = zeus_pfo_on_instruction_end(opt, seq[i]);
  }
  return rc ? rc : zeus_pfo_on_step_end(opt);
}

#endif /* PFO_CLIENT_TESTUTIL_SERVER */

#endif
