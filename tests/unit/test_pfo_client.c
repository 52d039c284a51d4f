/* The Perseus client against a real server on loopback.
 *
 * Pipeline jobs run as threads (examples/pipeline_sim.h). Where the clocks must be observed, each
 * rank's GPU sits behind its own copy of the fake libnvidia-ml.so.1 (as each rank of a real job
 * is a process with its own NVML): the copy's simulated node then moves only with that rank's
 * work, and the FAKE_NVML_LOG lines of GPU r come from rank r's frequency controller alone. The
 * tests check, instruction by instruction, the clock each simulated GPU ran at (read through
 * nvmlDeviceGetClockInfo when the work starts) against the schedules the server dumped, and the
 * SetGpuLockedClocks calls in the log against the changes those schedules call for. */
#include "test_util.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include <zeus.h>

#include "../../examples/pipeline_sim.h"
#include "pfo_http.h"

#define MAXW 8
#define SM_CLOCK 1 /* NVML_CLOCK_SM */

static char g_dir[256];

static void fresh_dir(void) {
  zeus_test_tmpdir(g_dir, sizeof g_dir);
  static const char *const vars[] = {"FAKE_NVML_LOG", "FAKE_NVML_INJECT", "ZEUS_SIM_MODEL_FILE", "ZEUS_SIM_GPUS",
                                     "ZEUS_SIM_CLOCK", "ZEUS_PFO_ITERS_PER_ROUND", "PERSEUS_ITERS_PER_ROUND",
                                     "ZEUS_PFO_SERVER_URL", "PERSEUS_RETRIES", "ZEUS_PFO_RETRIES"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
}

/* ---- the server ---- */

static zeus_pfo_server *start_server(const char *sched, const char *args, int port, const char *token) {
  static char dump[400];
  snprintf(dump, sizeof dump, "%s/dump", g_dir);
  zeus_pfo_server_opts o = {.port = port, .scheduler = sched, .scheduler_args = args, .dump_data = true,
                            .dump_dir = dump, .token = token};
  zeus_pfo_server *s;
  assert_zeus_ok(zeus_pfo_server_open(&s, &o));
  return s;
}

static void url_of(int port, char *buf, size_t n) { snprintf(buf, n, "http://127.0.0.1:%d/", port); }

/* Options with a fast failure path: few quick retries, short timeouts. */
static void fast_opts(zeus_pfo_optimizer_opts *o, const char *url, long k) {
  zeus_pfo_optimizer_opts_init(o);
  o->server_url = url;
  o->retries = 2;
  o->retry_backoff_s = 0.05;
  o->connect_timeout_s = 2;
  o->request_timeout_s = 10;
  o->schedule_timeout_s = 30;
  o->iters_per_round = k;
}

/* A plan file (lowtime's Python literal): entry s = names[s][i] at freqs[s][i]. */
static void write_plan(const char *path, int n, const char *const *const *names, const int *const *freqs,
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

/* ---- per-stage simulated GPU models (DVFS, default power curve) ---- */

static double stage_tpu(int stage, int pp) { return stage == pp - 1 ? 0.015 : stage == 0 ? 0.013 : 0.010; }
static double stage_mbf(int stage, int pp) { return stage == pp - 1 ? 0.15 : stage == 0 ? 0.35 : 0.25; }

/* A JSON model file with one GPU per rank, each with its stage's model. */
static void write_model(const char *path, int world, const int *stage_of, int pp) {
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
static double model_time(int stage, int pp, double units, unsigned f) {
  double m = stage_mbf(stage, pp);
  return units * stage_tpu(stage, pp) * (m + (1 - m) * 1740.0 / f);
}
static double model_power(unsigned f) {
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

static int fake_work(void *ctx, double units) {
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
static int fake_idle(void *ctx, double s) {
  return ((fake_rank *)ctx)->idle(s) == 0 ? ZEUS_OK : zeus_set_errmsg(ZEUS_EDEVICE, "fakeNvmlIdle failed");
}
static double fake_now(void *ctx) { return ((fake_rank *)ctx)->now(); }

static void *need(void *so, const char *name) {
  void *p = dlsym(so, name);
  if (!p) fail_msg("the fake NVML lacks %s", name);
  return p;
}

/* Copies the fake NVML once per rank, writes the per-stage model, opens every rank's devices. */
static void harness_setup(harness *h, int dp, int pp, int tp, int mb, long iters, long k, int port) {
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
    f->pr.gpu = (psim_gpu){f, fake_work, fake_idle, fake_now};
  }
}

static void harness_teardown(harness *h) {
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

static void *fake_rank_main(void *p) {
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

static void harness_run(harness *h) {
  pthread_t th[MAXW];
  for (int r = 0; r < h->world; r++) assert_int_equal(pthread_create(&th[r], NULL, fake_rank_main, &h->r[r]), 0);
  for (int r = 0; r < h->world; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < h->world; r++)
    if (h->r[r].rc) fail_msg("rank %d: %s", r, h->r[r].err);
}

/* The SetGpuLockedClocks minimums logged for GPU `gpu` (successful calls), and whether a successful
 * ResetGpuLockedClocks / SetMemoryLockedClocks / ResetMemoryLockedClocks of that GPU came after. */
typedef struct gpu_log {
  unsigned sets[4096];
  size_t nsets;
  bool reset_after_last_set, mem_locked, mem_reset;
} gpu_log;

static void read_log(int gpu, gpu_log *out) {
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

/* Every rank ran every instruction of every iteration at the frequency the server's schedule of
 * that round gave it, and the controller changed the clock exactly where the schedule changes. */
static void check_clocks(harness *h) {
  for (int r = 0; r < h->world; r++) {
    fake_rank *f = &h->r[r];
    size_t want_n = (size_t)h->iters * f->pr.n;
    assert_int_equal(f->nseen, want_n);
    unsigned prev = 1740;
    gpu_log lg;
    read_log(r, &lg);
    size_t changes = 0;
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
    assert_int_equal(lg.nsets, changes + 1); /* no other clock change */
    assert_true(lg.reset_after_last_set);    /* reset at close */
    assert_true(lg.mem_locked);
    assert_true(lg.mem_reset);
  }
}

/* ---- the acceptance scenarios ---- */

static void client_pp4_all_max_frequency_clocks_match_schedule(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  harness h;
  harness_setup(&h, 1, 4, 1, 4, 6, 2, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  for (int r = 0; r < 4; r++) {
    gpu_log lg;
    read_log(r, &lg);
    assert_int_equal(lg.nsets, 1); /* locked at 1740 once, never changed */
  }
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

static void client_pp4_point_solution_clocks_match_plan(void **state) {
  (void)state;
  fresh_dir();
  enum { PP = 4, MB = 4 };
  const char *names[PP][2 * MB], *const *np[PP];
  int mbs[2 * MB], freqs[PP][2 * MB];
  const int *fp[PP];
  size_t len[PP];
  for (int st = 0; st < PP; st++) {
    len[st] = psim_order(PP, st, MB, names[st], mbs);
    for (size_t i = 0; i < len[st]; i++) /* supported clocks: 1740 - 15 k */
      freqs[st][i] = names[st][i][0] == 'f' ? 1500 - 60 * st + 15 * (mbs[i] % 2) : 1650 - 45 * st;
    np[st] = names[st];
    fp[st] = freqs[st];
  }
  char plan[512], args[700];
  snprintf(plan, sizeof plan, "%s/freqs_pipeline_00007.py", g_dir);
  write_plan(plan, PP, np, fp, len);
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
  zeus_pfo_server *s = start_server("PointSolution", args, -1, NULL);
  harness h;
  harness_setup(&h, 1, PP, 1, MB, 6, 3, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  /* The plan itself, read independently of the dumps. */
  for (int r = 0; r < PP; r++)
    for (size_t i = 0; i < h.r[r].pr.n; i++) assert_int_equal(h.r[r].seen[i], freqs[r][i]);
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

static void client_pp4_instruction_profiler_writes_csv_of_measured_instructions(void **state) {
  (void)state;
  fresh_dir();
  enum { PP = 4, MB = 3, K = 2, NF = 10 };
  /* Round 0 warms up at 1740; rounds 1..10 step down 1740..1605; then all stages at 1740. */
  zeus_pfo_server *s = start_server("InstructionProfiler",
                                    "{\"warmup_iters\": 0, \"min_frequency\": 1605, \"patience\": 100}", -1, NULL);
  harness h;
  harness_setup(&h, 1, PP, 1, MB, (NF + 2) * K, K, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  /* The rounds stepped down as the profiler says: round q (1..10) ran at 1755 - 15 q. */
  for (int r = 0; r < PP; r++)
    for (int q = 0; q < NF + 2; q++) {
      unsigned want = q == 0 || q == NF + 1 ? 1740 : (unsigned)(1755 - 15 * q);
      assert_int_equal(h.r[r].seen[(size_t)q * K * h.r[r].pr.n], want);
    }
  /* The instruction CSV: every (rank, instruction, frequency), with the model's exact time and
   * the energy to the counter's millijoule. */
  char csv[800];
  snprintf(csv, sizeof csv, "%s/instruction_profile.csv", h.r[0].job_dir);
  FILE *f = fopen(csv, "r");
  if (!f) fail_msg("no instruction CSV at %s", csv);
  char line[512];
  assert_non_null(fgets(line, sizeof line, f));
  assert_string_equal(line, "rank,dp_rank,pp_rank,tp_rank,stage,instruction,frequency,time,energy\n");
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    int rank, dp, pp, tp, stage;
    char inst[32];
    unsigned freq;
    double t, e;
    assert_int_equal(sscanf(line, "%d,%d,%d,%d,%d,%31[^,],%u,%lf,%lf", &rank, &dp, &pp, &tp, &stage, inst, &freq, &t, &e),
                     9);
    assert_int_equal(stage, pp);
    assert_int_equal(rank, pp);
    double units = strcmp(inst, "forward") == 0 ? 1 : 2;
    double want_t = model_time(stage, PP, units, freq);
    assert_near(t, want_t, 1e-9);
    assert_near(e, want_t * model_power(freq), 1.1e-3);
    rows++;
  }
  fclose(f);
  assert_int_equal(rows, PP * 2 * NF);
  /* A ProfilingResult as posted: K iterations, each instruction's values per iteration. */
  zeus_pfo_prof_result *pr;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_prof(h.r[0].job_dir, 3, &pr, &n));
  assert_int_equal(n, PP);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(pr[i].n_iter_time, K);
    assert_int_equal(pr[i].n_time_breakdown, 2);
    for (size_t b = 0; b < 2; b++) {
      assert_int_equal(pr[i].time_breakdown[b].n_iters, K);
      assert_int_equal(pr[i].time_breakdown[b].offsets[1], MB); /* MB forwards (backwards) per iteration */
    }
    /* Every rank's iteration lasts as long: the flush at the end of each iteration. */
    assert_near(pr[i].iter_time[0], pr[0].iter_time[0], 1e-12);
  }
  zeus_pfo_prof_results_free(pr, n);
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

static void client_3d_2x2x2_every_rank_of_a_stage_runs_the_stage_plan(void **state) {
  (void)state;
  fresh_dir();
  enum { PP = 2, MB = 2 };
  const char *names[PP][2 * MB], *const *np[PP];
  int mbs[2 * MB], freqs[PP][2 * MB];
  const int *fp[PP];
  size_t len[PP];
  for (int st = 0; st < PP; st++) {
    len[st] = psim_order(PP, st, MB, names[st], mbs);
    for (size_t i = 0; i < len[st]; i++) freqs[st][i] = st == 0 ? 1200 + 30 * (int)i : 1605 - 15 * (int)i;
    np[st] = names[st];
    fp[st] = freqs[st];
  }
  char plan[512], args[700];
  snprintf(plan, sizeof plan, "%s/stage_plan.py", g_dir);
  write_plan(plan, PP, np, fp, len);
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
  zeus_pfo_server *s = start_server("PointSolution3D", args, -1, NULL);
  harness h;
  harness_setup(&h, 2, PP, 2, MB, 4, 2, zeus_pfo_server_port(s));
  harness_run(&h);
  check_clocks(&h);
  for (int r = 0; r < h.world; r++) {
    fake_rank *f = &h.r[r];
    for (long it = 0; it < h.iters; it++)
      for (size_t i = 0; i < f->pr.n; i++)
        if (f->seen[it * f->pr.n + i] != (unsigned)freqs[f->pr.pp][i])
          fail_msg("rank %d (dp %d, pp %d, tp %d), iteration %ld, instruction %zu: %u MHz, the stage plan says %d", r,
                   f->pr.dp, f->pr.pp, f->pr.tp, it, i, f->seen[it * f->pr.n + i], freqs[f->pr.pp][i]);
  }
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

/* ---- errors ---- */

static zeus_devices *open_sim(void) {
  zeus_sim_config cfg = {.num_gpus = 1, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts o = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &o));
  return d;
}

static void assert_unlocked(zeus_devices *d) {
  unsigned lo, hi, mlo, mhi;
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(zeus_devices_sim_node(d), 0, &lo, &hi, &mlo, &mhi));
  assert_int_equal(hi, 0);
  assert_int_equal(mhi, 0);
}

static void client_server_down_at_start_fails_after_retries(void **state) {
  (void)state;
  fresh_dir();
  /* A port nobody listens on, held by a bound socket that never listens (so that no test running
   * beside this one can take it meanwhile): connecting is refused. */
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  assert_true(fd >= 0);
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
  int port = ntohs(sa.sin_port);
  char url[64];
  url_of(port, url, sizeof url);
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  fast_opts(&o, url, 1);
  o.pp_degree = o.dp_degree = o.tp_degree = o.world_size = 1;
  o.devices = d;
  zeus_pfo_optimizer *opt = NULL;
  double t0 = zeus_monotonic_s();
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_ENET, "after 3 tries");
  double spent = zeus_monotonic_s() - t0;
  url[strlen(url) - 1] = '\0'; /* the client drops the trailing '/' */
  assert_non_null(strstr(zeus_errmsg(), url));
  assert_non_null(strstr(zeus_errmsg(), "POST /register_job"));
  assert_true(spent >= 0.14); /* backed off 0.05 + 0.1 s */
  assert_true(spent < 5);
  assert_null(opt);
  assert_unlocked(d); /* the controller started and put everything back */
  zeus_devices_close(d);
  close(fd);
}

static void client_http_error_carries_the_servers_message(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", "{\"num_microbatches\": 1}", -1, "s3cret");
  char url[64];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  fast_opts(&o, url, 1);
  o.pp_degree = o.dp_degree = o.tp_degree = o.world_size = 1;
  o.devices = d;
  zeus_pfo_optimizer *opt = NULL;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EHTTP, "answered 401: missing or wrong bearer token");
  o.token = "s3cret";
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

/* Two ranks on their own simulated GPUs, driving the hooks directly (one forward, one backward). */
typedef struct restart_rank {
  int rank;
  const char *url;
  zeus_thread_group *tg;
  zeus_devices *d;
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  int *phase; /* 0: run; 1: rank paused after round 1; 2: released */
  int rc;
  long iters_done;
  char err[1024];
} restart_rank;

static int one_iteration(zeus_pfo_optimizer *opt) {
  int rc = zeus_pfo_on_step_begin(opt);
  static const char *const seq[] = {"forward", "backward"};
  for (int i = 0; i < 2 && !rc; i++) {
    rc = zeus_pfo_on_instruction_begin(opt, seq[i]);
    if (!rc) rc = zeus_pfo_on_instruction_end(opt, seq[i]);
  }
  return rc ? rc : zeus_pfo_on_step_end(opt);
}

static void *restart_rank_main(void *p) {
  restart_rank *a = p;
  zeus_collective coll;
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer *opt = NULL;
  static const char *const order[] = {"forward", "backward"};
  zeus_pfo_optimizer_opts_init(&o);
  int rc = zeus_thread_group_collective(a->tg, a->rank, &coll);
  if (!rc) {
    o.server_url = a->url;
    o.rank = a->rank, o.pp_rank = a->rank;
    o.pp_degree = 2, o.dp_degree = 1, o.tp_degree = 1, o.world_size = 2;
    o.devices = a->d;
    o.collective = &coll;
    o.pipe_schedule = order, o.n_pipe_schedule = 2;
    o.iters_per_round = 1;
    o.retries = 40, o.retry_backoff_s = 0.02, o.schedule_timeout_s = 20;
    rc = zeus_pfo_optimizer_open(&opt, &o);
  }
  for (int i = 0; i < 2 && !rc; i++, a->iters_done++) rc = one_iteration(opt);
  if (!rc) {
    pthread_mutex_lock(a->mu);
    if (a->rank == 1) { /* rank 1 holds back until the server has been replaced */
      *a->phase = 1;
      pthread_cond_broadcast(a->cv);
      while (*a->phase != 2) pthread_cond_wait(a->cv, a->mu);
    }
    pthread_mutex_unlock(a->mu);
    /* Rank 0 posts its result and waits for rank 1 in the schedule request when the server goes
     * away; rank 1 comes to the new server. Both must fail, saying the job is unknown. */
    rc = one_iteration(opt);
    if (!rc) a->iters_done++;
  }
  a->rc = rc;
  if (rc) snprintf(a->err, sizeof a->err, "%s", zeus_errmsg());
  if (opt && rc && !zeus_pfo_detached(opt)) snprintf(a->err, sizeof a->err, "failed but not detached");
  zeus_pfo_optimizer_close(opt);
  return NULL;
}

static void client_server_restarted_mid_training_reports_unknown_job(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  int port = zeus_pfo_server_port(s);
  char url[64];
  url_of(port, url, sizeof url);
  zeus_thread_group *tg;
  assert_zeus_ok(zeus_thread_group_open(&tg, 2));
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  int phase = 0;
  restart_rank a[2];
  pthread_t th[2];
  double t0 = zeus_monotonic_s();
  for (int r = 0; r < 2; r++) {
    a[r] = (restart_rank){.rank = r, .url = url, .tg = tg, .d = open_sim(), .mu = &mu, .cv = &cv, .phase = &phase};
    assert_int_equal(pthread_create(&th[r], NULL, restart_rank_main, &a[r]), 0);
  }
  pthread_mutex_lock(&mu);
  while (phase != 1) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  usleep(300 * 1000); /* rank 0 is now waiting in its schedule request */
  zeus_pfo_server_close(s);
  s = start_server("AllMaxFrequency", NULL, port, NULL);
  pthread_mutex_lock(&mu);
  phase = 2;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  assert_true(zeus_monotonic_s() - t0 < 15);
  for (int r = 0; r < 2; r++) {
    if (a[r].iters_done != 2) fail_msg("rank %d ran %ld iterations before the restart: %s", r, a[r].iters_done, a[r].err);
    assert_int_equal(a[r].rc, ZEUS_EHTTP);
    if (!strstr(a[r].err, "unknown to the server") || !strstr(a[r].err, "answered 404"))
      fail_msg("rank %d: %s", r, a[r].err);
    assert_unlocked(a[r].d);
    zeus_devices_close(a[r].d);
  }
  zeus_pfo_server_close(s);
  zeus_thread_group_close(tg);
}

typedef struct joiner {
  int rank;
  const char *url, *job_id;
  zeus_devices *d;
  int rc;
  char err[1024];
  zeus_pfo_round_stats st;
} joiner;

static void *joiner_main(void *p) {
  joiner *a = p;
  static const char *const order[] = {"forward", "backward"};
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer *opt = NULL;
  zeus_pfo_optimizer_opts_init(&o);
  int rc = ZEUS_OK;
  if (!rc) {
    o.server_url = a->url;
    o.job_id = a->job_id; /* no collective: the job id is given */
    o.rank = a->rank, o.pp_rank = a->rank;
    o.pp_degree = 2, o.dp_degree = 1, o.tp_degree = 1, o.world_size = 2;
    o.devices = a->d;
    o.pipe_schedule = order, o.n_pipe_schedule = 2;
    o.iters_per_round = 2;
    o.retries = 2, o.retry_backoff_s = 0.05, o.schedule_timeout_s = 30;
    rc = zeus_pfo_optimizer_open(&opt, &o);
  }
  /* Each instruction: one unit of work on the rank's simulated GPU at the scheduled clock. */
  zeus_sim_node *node = zeus_devices_sim_node(a->d);
  for (int i = 0; i < 4 && !rc; i++) {
    rc = zeus_pfo_on_step_begin(opt);
    for (int k = 0; k < 2 && !rc; k++) {
      rc = zeus_pfo_on_instruction_begin(opt, order[k]);
      if (!rc) rc = zeus_pfo_controller_wait(zeus_pfo_optimizer_controller(opt), 10);
      if (!rc) rc = zeus_sim_work(node, 0, 1, NULL);
      if (!rc) rc = zeus_pfo_on_instruction_end(opt, order[k]);
    }
    if (!rc) rc = zeus_pfo_on_step_end(opt);
  }
  if (!rc && strcmp(zeus_pfo_job_id(opt), a->job_id) != 0) rc = zeus_set_errmsg(ZEUS_EINTERNAL, "wrong job id");
  if (!rc) zeus_pfo_last_round(opt, &a->st);
  a->rc = rc;
  if (rc) snprintf(a->err, sizeof a->err, "%s", zeus_errmsg());
  zeus_pfo_optimizer_close(opt);
  return NULL;
}

static void client_ranks_join_a_given_job_id_without_a_collective(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  char url[64];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  /* A launcher registers the job; the ranks only know its id. */
  th_conn c = {.fd = -1, .port = zeus_pfo_server_port(s)};
  char *resp = NULL, id[256];
  assert_int_equal(th_request(&c, "POST", "/register_job", "{\"job_id\": \"\", \"pp_degree\": 2, \"dp_degree\": 1, "
                              "\"tp_degree\": 1, \"world_size\": 2, \"job_metadata\": \"launcher\"}", NULL, &resp),
                   200);
  snprintf(id, sizeof id, "%.*s", (int)strlen(resp) - 2, resp + 1);
  free(resp);
  th_close(&c);
  joiner a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    a[r] = (joiner){.rank = r, .url = url, .job_id = id, .d = open_sim()};
    assert_int_equal(pthread_create(&th[r], NULL, joiner_main, &a[r]), 0);
  }
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < 2; r++) {
    if (a[r].rc) fail_msg("rank %d: %s", r, a[r].err);
    assert_int_equal(a[r].st.round, 1);
    assert_int_equal(a[r].st.iterations, 2);
    /* forward 1 unit + backward 1 unit at 1740 MHz on the default GPU: 2 x 0.05 s at 290 W */
    assert_near(a[r].st.iter_time_s, 0.1, 1e-9);
    assert_near(a[r].st.iter_energy_j, 29, 2e-3);
    zeus_devices_close(a[r].d);
  }
  char dir[700];
  snprintf(dir, sizeof dir, "%s/dump/%s", g_dir, id);
  zeus_pfo_rank_info *ranks;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_ranks(dir, &ranks, &n));
  assert_int_equal(n, 2);
  for (int r = 0; r < 2; r++) {
    assert_int_equal(ranks[r].n_available_frequencies, 103); /* high to low */
    assert_int_equal(ranks[r].available_frequencies[0], 1740);
    assert_int_equal(ranks[r].available_frequencies[102], 210);
    assert_int_equal(ranks[r].n_pipe_schedule, 2);
    assert_string_equal(ranks[r].pipe_schedule[1], "backward");
  }
  zeus_pfo_ranks_free(ranks, n);
  zeus_pfo_server_close(s);
}

/* One rank whose plan is forward @1740, backward @1500. */
static zeus_pfo_optimizer *one_rank(zeus_pfo_server **s, zeus_devices **d) {
  char plan[512], args[700], url[64];
  snprintf(plan, sizeof plan, "%s/plan.py", g_dir);
  zeus_test_write_file(plan, "[[(\"forward\", 1740), (\"backward\", 1500)]]\n");
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
  *s = start_server("PointSolution", args, -1, NULL);
  url_of(zeus_pfo_server_port(*s), url, sizeof url);
  *d = open_sim();
  zeus_pfo_optimizer_opts o;
  fast_opts(&o, url, 100);
  o.pp_degree = o.dp_degree = o.tp_degree = o.world_size = 1;
  o.devices = *d;
  zeus_pfo_optimizer *opt;
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  assert_int_equal(zeus_pfo_current_schedule(opt)->n_frequencies, 2);
  return opt;
}

static void client_schedule_too_long_names_its_length(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s;
  zeus_devices *d;
  zeus_pfo_optimizer *opt = one_rank(&s, &d);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "backward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "backward"));
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "forward"), ZEUS_ESTATE, "has 2 instructions per iteration");
  assert_zeus_ok(zeus_pfo_on_step_end(opt)); /* the failed iteration is not measured */
  /* The next iteration starts over. */
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "backward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "backward"));
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  zeus_pfo_optimizer_close(opt);
  assert_unlocked(d);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_schedule_too_short_names_the_next_expected(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s;
  zeus_devices *d;
  zeus_pfo_optimizer *opt = one_rank(&s, &d);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_err(zeus_pfo_on_step_end(opt), ZEUS_ESTATE, "next expected is 'backward' (instruction 2 of 2)");
  /* Hooks out of place. */
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "forward"), ZEUS_ESTATE, "outside an iteration");
  assert_zeus_err(zeus_pfo_on_step_end(opt), ZEUS_ESTATE, "no iteration is running");
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_err(zeus_pfo_on_step_begin(opt), ZEUS_ESTATE, "has not ended");
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_instruction_name_mismatch_names_both(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s;
  zeus_devices *d;
  zeus_pfo_optimizer *opt = one_rank(&s, &d);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "backward"), ZEUS_EINVAL,
                  "on_instruction_begin('backward'): rank 0's schedule expects 'forward' as instruction 1 of 2");
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_err(zeus_pfo_on_instruction_end(opt, "backward"), ZEUS_EINVAL, "the instruction running is 'forward'");
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

typedef struct sync_state {
  int calls;
  int fail_at;
} sync_state;

static int count_sync(void *ctx) {
  sync_state *st = ctx;
  if (++st->calls == st->fail_at) return zeus_set_errmsg(ZEUS_EDEVICE, "cudaDeviceSynchronize: device lost");
  return ZEUS_OK;
}

static void client_sync_callback_runs_before_each_instruction(void **state) {
  (void)state;
  fresh_dir();
  char plan[512], args[700], url[64];
  snprintf(plan, sizeof plan, "%s/plan.py", g_dir);
  zeus_test_write_file(plan, "[[(\"forward\", 1740), (\"backward\", 1500)]]\n");
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
  zeus_pfo_server *s = start_server("PointSolution", args, -1, NULL);
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  zeus_devices *d = open_sim();
  sync_state st = {.fail_at = 4};
  zeus_pfo_optimizer_opts o;
  fast_opts(&o, url, 100);
  o.pp_degree = o.dp_degree = o.tp_degree = o.world_size = 1;
  o.devices = d;
  o.sync = count_sync;
  o.sync_ctx = &st;
  zeus_pfo_optimizer *opt;
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  assert_zeus_ok(one_iteration(opt));
  assert_int_equal(st.calls, 2);
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, "forward"));
  assert_zeus_ok(zeus_pfo_on_instruction_end(opt, "forward"));
  assert_zeus_err(zeus_pfo_on_instruction_begin(opt, "backward"), ZEUS_EDEVICE,
                  "the synchronisation callback failed: cudaDeviceSynchronize: device lost");
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_measures_a_gpu_without_energy_counter_through_the_monitor(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_server *s = start_server("AllMaxFrequency", "{\"num_microbatches\": 1}", -1, NULL);
  char url[64];
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  zeus_sim_gpu_config g = {.no_energy_counter = true};
  zeus_sim_config cfg = {.num_gpus = 1, .gpus = &g, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts dopts = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  assert_zeus_ok(zeus_devices_open(&d, &dopts));
  zeus_pfo_optimizer_opts o;
  fast_opts(&o, url, 1);
  o.pp_degree = o.dp_degree = o.tp_degree = o.world_size = 1;
  o.devices = d;
  zeus_pfo_optimizer *opt;
  assert_zeus_ok(zeus_pfo_optimizer_open(&opt, &o));
  static const char *const seq[] = {"forward", "backward"};
  assert_zeus_ok(zeus_pfo_on_step_begin(opt));
  for (int k = 0; k < 2; k++) {
    assert_zeus_ok(zeus_pfo_on_instruction_begin(opt, seq[k]));
    assert_zeus_ok(zeus_sim_work(zeus_devices_sim_node(d), 0, 1, NULL));
    assert_zeus_ok(zeus_pfo_on_instruction_end(opt, seq[k]));
  }
  assert_zeus_ok(zeus_pfo_on_step_end(opt));
  zeus_pfo_round_stats st;
  zeus_pfo_last_round(opt, &st);
  assert_int_equal(st.round, 0);
  assert_near(st.iter_time_s, 0.1, 1e-9); /* two units at 1740 MHz */
  /* Polled power: the window bounds sample it; the figure is an estimate, but it is there. */
  assert_true(st.iter_energy_j > 0);
  /* The posted breakdown has both instructions. */
  char dir[700];
  snprintf(dir, sizeof dir, "%s/dump/%s", g_dir, zeus_pfo_job_id(opt));
  zeus_pfo_prof_result *pr;
  size_t n;
  assert_zeus_ok(zeus_pfo_load_prof(dir, 0, &pr, &n));
  assert_int_equal(pr[0].n_time_breakdown, 2);
  assert_near(pr[0].time_breakdown[0].values[0], 0.05, 1e-9);
  zeus_pfo_prof_results_free(pr, n);
  zeus_pfo_optimizer_close(opt);
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

static void client_schedule_with_an_unsupported_frequency_is_refused(void **state) {
  (void)state;
  fresh_dir();
  char plan[512], args[700], url[64];
  snprintf(plan, sizeof plan, "%s/plan.py", g_dir);
  zeus_test_write_file(plan, "[[(\"forward\", 1741)]]\n");
  snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
  zeus_pfo_server *s = start_server("PointSolution", args, -1, NULL);
  url_of(zeus_pfo_server_port(s), url, sizeof url);
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  fast_opts(&o, url, 1);
  o.pp_degree = o.dp_degree = o.tp_degree = o.world_size = 1;
  o.devices = d;
  zeus_pfo_optimizer *opt = NULL;
  /* PointSolution checks the plan against the registered frequencies: its 400 reaches the client. */
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EHTTP, "answered 400");
  assert_non_null(strstr(zeus_errmsg(), "asks for 1741 MHz"));
  zeus_pfo_server_close(s);
  zeus_devices_close(d);
}

/* A scripted server: answers the registrations, then GET /schedule with `schedule` (any text). */
typedef struct scripted {
  int fd, port;
  const char *schedule;
  pthread_t th;
} scripted;

static void *scripted_main(void *p) {
  scripted *sv = p;
  for (int served = 0; served < 3; served++) { /* register_job, register_rank, schedule */
    int c = accept(sv->fd, NULL, NULL);
    if (c < 0) return NULL;
    char req[8192];
    size_t have = 0;
    for (;;) { /* headers, then Content-Length bytes */
      ssize_t r = recv(c, req + have, sizeof req - 1 - have, 0);
      if (r <= 0) break;
      have += (size_t)r;
      req[have] = '\0';
      char *end = strstr(req, "\r\n\r\n");
      const char *cl = strcasestr(req, "Content-Length:");
      if (end && (!cl || have >= (size_t)(end + 4 - req) + strtoul(cl + 15, NULL, 10))) break;
    }
    const char *body = strncmp(req, "POST /register_job", 18) == 0 ? "\"scripted-job\""
                       : strncmp(req, "POST /register_rank", 19) == 0 ? "null" : sv->schedule;
    char resp[9000];
    int n = snprintf(resp, sizeof resp, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", strlen(body), body);
    if (send(c, resp, (size_t)n, MSG_NOSIGNAL) < 0) { close(c); return NULL; }
    close(c);
  }
  return NULL;
}

static void scripted_start(scripted *sv, const char *schedule) {
  sv->schedule = schedule;
  sv->fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof sa;
  assert_int_equal(bind(sv->fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(listen(sv->fd, 8), 0);
  assert_int_equal(getsockname(sv->fd, (struct sockaddr *)&sa, &sl), 0);
  sv->port = ntohs(sa.sin_port);
  assert_int_equal(pthread_create(&sv->th, NULL, scripted_main, sv), 0);
}

static void client_checks_the_schedule_it_receives(void **state) {
  (void)state;
  fresh_dir();
  static const struct { const char *schedule; int code; const char *needle; } cases[] = {
      {"{\"rank\": 0, \"frequencies\": [[\"forward\", 1740], [\"backward\", 1741]]}", ZEUS_EINVAL,
       "asks for 1741 MHz at instruction 2 ('backward'), which GPU 0 does not support (210..1740 MHz)"},
      {"{\"rank\": 3, \"frequencies\": [[\"forward\", 1740]]}", ZEUS_EINVAL, "sent rank 3's schedule to rank 0"},
      {"{\"rank\": 0, \"frequencies\": []}", ZEUS_EINVAL, "has no instructions"},
      {"{\"rank\": 0, \"frequencies\": [[\"forward\"", ZEUS_EPARSE, "the server's FrequencySchedule:1:"},
  };
  zeus_devices *d = open_sim();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    scripted sv;
    scripted_start(&sv, cases[i].schedule);
    char url[64];
    url_of(sv.port, url, sizeof url);
    zeus_pfo_optimizer_opts o;
    fast_opts(&o, url, 1);
    o.pp_degree = o.dp_degree = o.tp_degree = o.world_size = 1;
    o.devices = d;
    zeus_pfo_optimizer *opt = NULL;
    assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), cases[i].code, cases[i].needle);
    assert_null(opt);
    pthread_join(sv.th, NULL);
    close(sv.fd);
    assert_unlocked(d);
  }
  zeus_devices_close(d);
}

static void client_nvml_permission_error_at_controller_start_fails_every_rank(void **state) {
  (void)state;
  fresh_dir();
  /* Rank 1's GPU refuses locked clocks; rank 0 must learn it and fail too, not hang. */
  setenv("FAKE_NVML_INJECT", "nvmlDeviceSetGpuLockedClocks:NO_PERMISSION:1", 1);
  zeus_pfo_server *s = start_server("AllMaxFrequency", NULL, -1, NULL);
  harness h;
  harness_setup(&h, 1, 2, 1, 2, 2, 1, zeus_pfo_server_port(s));
  pthread_t th[2];
  for (int r = 0; r < 2; r++) assert_int_equal(pthread_create(&th[r], NULL, fake_rank_main, &h.r[r]), 0);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  assert_int_equal(h.r[1].rc, ZEUS_EPERM);
  if (!strstr(h.r[1].err, "NO_PERMISSION") || !strstr(h.r[1].err, "locking the SM clock at 1740 MHz") ||
      !strstr(h.r[1].err, "CAP_SYS_ADMIN"))
    fail_msg("rank 1: %s", h.r[1].err);
  assert_int_equal(h.r[0].rc, ZEUS_ESTATE);
  if (!strstr(h.r[0].err, "1 other rank(s) of the job failed")) fail_msg("rank 0: %s", h.r[0].err);
  /* Rank 1 put back the memory clock it had locked; rank 0 reset everything at close. */
  gpu_log lg;
  read_log(1, &lg);
  assert_true(lg.mem_locked && lg.mem_reset);
  assert_int_equal(lg.nsets, 0);
  read_log(0, &lg);
  assert_true(lg.nsets == 1 && lg.reset_after_last_set && lg.mem_reset);
  harness_teardown(&h);
  zeus_pfo_server_close(s);
}

/* ---- options ---- */

static void client_options_come_from_the_environment_with_perseus_aliases(void **state) {
  (void)state;
  fresh_dir();
  zeus_pfo_optimizer_opts o;
  setenv("PERSEUS_ITERS_PER_ROUND", "7", 1);
  setenv("PERSEUS_RETRIES", "3", 1);
  setenv("ZEUS_PFO_RETRIES", "4", 1);
  setenv("ZEUS_PFO_SERVER_URL", "http://example:1", 1);
  zeus_pfo_optimizer_opts_init(&o); /* the defaults only: _init reads no environment */
  assert_int_equal(o.iters_per_round, 10);
  assert_int_equal(o.retries, 5);
  assert_null(o.server_url);
  assert_zeus_ok(zeus_pfo_optimizer_opts_from_env(&o));
  assert_int_equal(o.iters_per_round, 7);
  assert_int_equal(o.retries, 4); /* ZEUS_PFO_ wins */
  assert_string_equal(o.server_url, "http://example:1");
  assert_near(o.schedule_timeout_s, 1800, 0);
  setenv("PERSEUS_ITERS_PER_ROUND", "0", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_ERANGE, "PERSEUS_ITERS_PER_ROUND");
  setenv("PERSEUS_ITERS_PER_ROUND", "ten", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_EINVAL, "PERSEUS_ITERS_PER_ROUND");
  unsetenv("PERSEUS_ITERS_PER_ROUND");
  setenv("ZEUS_PFO_SCHEDULE_TIMEOUT", "-1", 1);
  assert_zeus_err(zeus_pfo_optimizer_opts_from_env(&o), ZEUS_ERANGE, "ZEUS_PFO_SCHEDULE_TIMEOUT");
  unsetenv("ZEUS_PFO_SCHEDULE_TIMEOUT");
}

static void client_bad_options_are_named(void **state) {
  (void)state;
  fresh_dir();
  zeus_devices *d = open_sim();
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer *opt = NULL;
  fast_opts(&o, "http://127.0.0.1:1", 1);
  o.devices = d;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "dp_degree is 0");
  o.pp_degree = 2, o.dp_degree = 1, o.tp_degree = 1, o.world_size = 3;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "world_size is 3, but dp_degree x pp_degree");
  o.world_size = 2;
  o.pp_rank = 2;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "pp_rank is 2, expected 0..1");
  o.pp_rank = 0;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "give a collective");
  o.pp_degree = o.world_size = 1;
  o.server_url = "127.0.0.1:7787";
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_EINVAL, "must start with http://");
  o.server_url = "http://127.0.0.1:1";
  o.device_id = 3;
  assert_zeus_err(zeus_pfo_optimizer_open(&opt, &o), ZEUS_ENOENT, "device_id 3 does not exist");
  assert_null(opt);
  zeus_devices_close(d);
}

/* ---- the controller alone ---- */

static void controller_applies_changes_and_puts_everything_back(void **state) {
  (void)state;
  zeus_devices *d = open_sim();
  zeus_sim_node *n = zeus_devices_sim_node(d);
  assert_zeus_ok(zeus_gpu_set_power_limit(d, 0, 200000)); /* not the default */
  zeus_pfo_controller *c;
  zeus_pfo_controller_opts co = {.no_signal_handlers = true};
  assert_zeus_ok(zeus_pfo_controller_open(&c, d, 0, &co));
  unsigned lo, hi, mlo, mhi, mw;
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 0, &lo, &hi, &mlo, &mhi));
  assert_true(lo == 1740 && hi == 1740 && mlo == 7251 && mhi == 7251);
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 300000); /* back to the default */
  const unsigned *f;
  assert_int_equal(zeus_pfo_controller_frequencies(c, &f), 103);
  assert_int_equal(f[0], 1740);
  assert_int_equal(f[102], 210);
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1200));
  assert_zeus_ok(zeus_pfo_controller_wait(c, 10));
  assert_zeus_ok(zeus_sim_gpu_get_locked_clocks(n, 0, &lo, &hi, NULL, NULL));
  assert_true(lo == 1200 && hi == 1200);
  assert_int_equal(zeus_pfo_controller_current_mhz(c), 1200);
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1200)); /* the same: nothing to do */
  assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 0));    /* 0: leave as is */
  assert_zeus_ok(zeus_pfo_controller_wait(c, 10));
  assert_int_equal(zeus_pfo_controller_changes(c), 1);
  for (unsigned k = 0; k < 50; k++) assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1005 + 15 * (k % 5)));
  assert_zeus_ok(zeus_pfo_controller_wait(c, 10));
  assert_int_equal(zeus_pfo_controller_current_mhz(c), 1005 + 15 * 4); /* the latest wish wins */
  assert_zeus_err(zeus_pfo_controller_set_frequency(c, 1001), ZEUS_EINVAL, "1001 MHz is not a supported SM clock");
  zeus_pfo_controller_close(c);
  assert_unlocked(d);
  assert_zeus_ok(zeus_gpu_get_power_limit(d, 0, &mw));
  assert_int_equal(mw, 200000); /* as it was */
  zeus_devices_close(d);
}

/* Waits (up to 5 s) for the controller to have put `mhz` in place by itself. */
static bool applied_within(zeus_pfo_controller *c, unsigned mhz, double *took) {
  double t0 = zeus_monotonic_s();
  while (zeus_monotonic_s() - t0 < 5) {
    if (zeus_pfo_controller_current_mhz(c) == mhz) {
      *took = zeus_monotonic_s() - t0;
      return true;
    }
    usleep(100);
  }
  return false;
}

static void controller_finds_wishes_by_polling_and_wakes_from_parking(void **state) {
  (void)state;
  zeus_devices *d = open_sim();
  for (int poll = 0; poll < 2; poll++) {
    zeus_pfo_controller *c;
    zeus_pfo_controller_opts co = {.no_signal_handlers = true, .poll_interval_s = poll ? 0.002 : -1};
    assert_zeus_ok(zeus_pfo_controller_open(&c, d, 0, &co));
    double took;
    /* Parked (no polling, or 50 ms without a wish): the wish must wake the thread. */
    usleep(80 * 1000);
    assert_zeus_ok(zeus_pfo_controller_set_frequency(c, 1500));
    if (!applied_within(c, 1500, &took)) fail_msg("poll %d: a parked controller missed the wish", poll);
    /* Active: wishes in a row, no zeus_pfo_controller_wait. */
    for (unsigned k = 0; k < 20; k++) {
      unsigned f = k % 2 ? 1500 : 1455;
      assert_zeus_ok(zeus_pfo_controller_set_frequency(c, f));
      if (!applied_within(c, f, &took)) fail_msg("poll %d: wish %u (%u MHz) was never applied", poll, k, f);
      assert_true(took < 1.0);
    }
    assert_int_equal(zeus_pfo_controller_changes(c), 21);
    zeus_pfo_controller_close(c);
    assert_unlocked(d);
  }
  zeus_devices_close(d);
}

/* Forks a child that starts a controller on the fake NVML, changes the clock and waits for SIGTERM;
 * returns the log of GPU 0 once the child has died. */
static void signal_child(int sig, bool handlers, gpu_log *lg) {
  fresh_dir();
  char log[512];
  snprintf(log, sizeof log, "%s/nvml.log", g_dir);
  setenv("FAKE_NVML_LOG", log, 1);
  setenv("ZEUS_SIM_CLOCK", "virtual", 1);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    zeus_devices_opts o = {.backend = "nvml", .nvml_library = FAKE_NVML_PATH, .keep_settings_on_close = true};
    zeus_devices *d;
    zeus_pfo_controller *c;
    zeus_pfo_controller_opts co = {.no_signal_handlers = !handlers};
    if (zeus_devices_open(&d, &o) || zeus_pfo_controller_open(&c, d, 0, &co) ||
        zeus_pfo_controller_set_frequency(c, 1305) || zeus_pfo_controller_wait(c, 10))
      _exit(3);
    if (write(fds[1], "r", 1) != 1) _exit(4);
    for (;;) pause();
  }
  close(fds[1]);
  char ch;
  assert_int_equal(read(fds[0], &ch, 1), 1);
  close(fds[0]);
  assert_int_equal(kill(pid, sig), 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFSIGNALED(st)); /* the handler hands the signal on: the process still dies of it */
  assert_int_equal(WTERMSIG(st), sig);
  read_log(0, lg);
  unsetenv("FAKE_NVML_LOG");
}

static void controller_sigterm_and_sigint_reset_locked_clocks(void **state) {
  (void)state;
  static const int sigs[] = {SIGTERM, SIGINT};
  for (int i = 0; i < 2; i++) {
    gpu_log lg;
    signal_child(sigs[i], true, &lg);
    assert_int_equal(lg.nsets, 2);
    assert_int_equal(lg.sets[1], 1305);
    assert_true(lg.reset_after_last_set);
    assert_true(lg.mem_reset);
  }
}

static void controller_sigterm_without_handlers_leaves_clocks_locked(void **state) {
  (void)state;
  gpu_log lg;
  signal_child(SIGTERM, false, &lg);
  assert_int_equal(lg.nsets, 2);
  assert_false(lg.reset_after_last_set);
  assert_false(lg.mem_reset);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(client_pp4_all_max_frequency_clocks_match_schedule),
      cmocka_unit_test(client_pp4_point_solution_clocks_match_plan),
      cmocka_unit_test(client_pp4_instruction_profiler_writes_csv_of_measured_instructions),
      cmocka_unit_test(client_3d_2x2x2_every_rank_of_a_stage_runs_the_stage_plan),
      cmocka_unit_test(client_server_down_at_start_fails_after_retries),
      cmocka_unit_test(client_http_error_carries_the_servers_message),
      cmocka_unit_test(client_server_restarted_mid_training_reports_unknown_job),
      cmocka_unit_test(client_ranks_join_a_given_job_id_without_a_collective),
      cmocka_unit_test(client_schedule_too_long_names_its_length),
      cmocka_unit_test(client_schedule_too_short_names_the_next_expected),
      cmocka_unit_test(client_instruction_name_mismatch_names_both),
      cmocka_unit_test(client_schedule_with_an_unsupported_frequency_is_refused),
      cmocka_unit_test(client_checks_the_schedule_it_receives),
      cmocka_unit_test(client_sync_callback_runs_before_each_instruction),
      cmocka_unit_test(client_measures_a_gpu_without_energy_counter_through_the_monitor),
      cmocka_unit_test(client_nvml_permission_error_at_controller_start_fails_every_rank),
      cmocka_unit_test(client_options_come_from_the_environment_with_perseus_aliases),
      cmocka_unit_test(client_bad_options_are_named),
      cmocka_unit_test(controller_applies_changes_and_puts_everything_back),
      cmocka_unit_test(controller_finds_wishes_by_polling_and_wakes_from_parking),
      cmocka_unit_test(controller_sigterm_and_sigint_reset_locked_clocks),
      cmocka_unit_test(controller_sigterm_without_handlers_leaves_clocks_locked),
  };
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
