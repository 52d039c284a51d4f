/* The power-limit optimizer across MPI ranks (run under mpirun -np 2 and -np 4): one simulated GPU
 * per rank, each rank's GPU with its own table model (higher ranks slow down more at low limits),
 * driven in lockstep through zeus_collective_mpi. Checks, on every rank:
 *   - every measurement's energy is the sum over ranks and its time the largest, as the models
 *     give them (computed here from the models, not from the library);
 *   - every rank chooses the same optimum, the one a reference computes from the combined
 *     figures with ZeusCost(0.5, world_size = number of GPUs of the job) (the default selector);
 *   - only rank 0 writes the profile, and every rank reloads it to the same optimum (Energy too);
 *   - the GPU ends at the optimum and goes back to its earlier limit when the optimizer closes;
 *   - disagreements are errors on every rank at once: power-limit ranges that differ across
 *     ranks, and a profile file that only some ranks see.
 * A failure prints "rank N: ..." and aborts the job (exit code != 0). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include <zeus.h>
#include <zeus/collective_mpi.h>

static int g_rank, g_size;

#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "rank %d: line %d: check failed: %s: ", g_rank, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, " (zeus: %s)\n", zeus_errmsg());                    \
      fflush(stderr);                                                     \
      MPI_Abort(MPI_COMM_WORLD, 1);                                       \
    }                                                                     \
  } while (0)
#define OK(call) CHECK((call) == ZEUS_OK, "%s", #call)

#define NLIM 9 /* 300 down to 100 W in 25 W steps */
#define WAIT 1
#define WARMUP 2
#define PROFILE 5

/* Rank r's GPU at limit L: time and energy of one unit of work (one step). */
static double model_time(int r, double L) { return 0.01 * pow(300.0 / L, 0.2 + 0.1 * r); }
static double model_energy(int r, double L) { return (20 + 1.0 * L) * model_time(r, L); }

/* The job's figures for one window of PROFILE steps at limit L. */
static void combined(double L, double *energy, double *time_s) {
  *energy = 0;
  *time_s = 0;
  for (int r = 0; r < g_size; r++) {
    *energy += PROFILE * model_energy(r, L);
    *time_s = fmax(*time_s, PROFILE * model_time(r, L));
  }
}

static unsigned ref_cost_optimum(double eta, unsigned world) {
  unsigned best = 0;
  double best_c = INFINITY;
  for (int i = 0; i < NLIM; i++) {
    double L = 300 - 25 * i, e, t;
    combined(L, &e, &t);
    double c = eta * e + (1 - eta) * 300.0 * world * t;
    if (c < best_c) { best_c = c; best = (unsigned)L; }
  }
  return best;
}

static unsigned ref_energy_optimum(void) {
  unsigned best = 0;
  double best_e = INFINITY;
  for (int i = 0; i < NLIM; i++) {
    double L = 300 - 25 * i, e, t;
    combined(L, &e, &t);
    if (e < best_e) { best_e = e; best = (unsigned)L; }
  }
  return best;
}

/* This rank's simulated GPU: the table of its model; `max_w` lets a rank pretend to have other GPUs. */
static zeus_devices *open_gpu(double max_w) {
  zeus_sim_table_row rows[NLIM];
  size_t n = 0;
  for (int i = 0; i < NLIM; i++) {
    double L = 300 - 25 * i;
    if (L > max_w) continue;
    rows[n++] = (zeus_sim_table_row){L, model_time(g_rank, L), model_energy(g_rank, L)};
  }
  zeus_sim_gpu_config g;
  memset(&g, 0, sizeof g);
  g.model = ZEUS_SIM_TABLE;
  g.table = rows;
  g.table_len = n;
  zeus_sim_config cfg = {.num_gpus = 1, .gpus = &g, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts o = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  OK(zeus_devices_open(&d, &o));
  return d;
}

static zeus_monitor *open_monitor(zeus_devices *d) {
  static const unsigned no_cpu[1];
  zeus_monitor_opts mo = {.devices = d, .cpu_indices = no_cpu, .num_cpu_indices = 0};
  zeus_monitor *m;
  OK(zeus_monitor_open(&m, &mo));
  return m;
}

static void steps(zeus_plo *p, zeus_devices *d, long n) {
  zeus_sim_node *node = zeus_devices_sim_node(d);
  for (long s = 0; s < n; s++) {
    OK(zeus_plo_on_step_begin(p));
    OK(zeus_sim_work(node, 0, 1.0, NULL));
    OK(zeus_plo_on_step_end(p));
  }
}

/* Every rank holds the same value. */
static void check_same_everywhere(unsigned v, const char *what) {
  unsigned lo = v, hi = v;
  MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi, "%s differs across ranks: %u .. %u", what, lo, hi);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  zeus_collective coll;
  OK(zeus_collective_mpi(&coll));
  CHECK(coll.rank == g_rank && coll.world_size == g_size, "rank %d of %d", coll.rank, coll.world_size);
  OK(zeus_collective_check(&coll));

  /* The collective itself. */
  double v[2] = {g_rank + 1.0, -(double)g_rank};
  OK(zeus_collective_allreduce(&coll, v, 2, ZEUS_REDUCE_SUM));
  CHECK(v[0] == g_size * (g_size + 1) / 2.0, "sum %g", v[0]);
  v[0] = g_rank;
  OK(zeus_collective_allreduce(&coll, v, 1, ZEUS_REDUCE_MAX));
  CHECK(v[0] == g_size - 1, "max %g", v[0]);
  char word[16] = "";
  if (g_rank == g_size - 1) snprintf(word, sizeof word, "from-last");
  OK(zeus_collective_broadcast(&coll, word, sizeof word, g_size - 1));
  CHECK(strcmp(word, "from-last") == 0, "broadcast got '%s'", word);

  /* A folder every rank sees (one machine): made by rank 0, its name broadcast. */
  char dir[256] = "";
  if (g_rank == 0) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/zeus-mpi-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp %s", dir);
  }
  MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  char profile[300];
  snprintf(profile, sizeof profile, "%s/profile.json", dir);

  /* ---- 1. profile in lockstep, with an epoch that ends in the middle of a window ---- */
  zeus_devices *d = open_gpu(300);
  zeus_monitor *m = open_monitor(d);
  zeus_plo_opts o;
  zeus_plo_opts_init(&o);
  o.collective = &coll;
  o.wait_steps = WAIT;
  o.warmup_steps = WARMUP;
  o.profile_steps = PROFILE;
  o.profile_path = profile;
  o.no_signal_handlers = g_rank % 2 == 1; /* both ways */
  zeus_plo *p;
  OK(zeus_plo_open(&p, m, &o));
  /* Limit 0 from step 2, limit 1 from step 2 + 7 = 9; its window from 11; end the epoch at 13. */
  OK(zeus_plo_on_epoch_begin(p));
  steps(p, d, 13);
  CHECK(zeus_plo_get_state(p) == ZEUS_PLO_PROFILING, "state %d", zeus_plo_get_state(p));
  OK(zeus_plo_on_epoch_end(p));
  CHECK(zeus_plo_current_power_limit_w(p) == 300, "after the epoch end: %u W", zeus_plo_current_power_limit_w(p));
  OK(zeus_plo_on_epoch_begin(p));
  steps(p, d, 1 + (NLIM - 1) * (WARMUP + PROFILE) + 3);
  OK(zeus_plo_on_epoch_end(p));
  CHECK(zeus_plo_get_state(p) == ZEUS_PLO_DONE, "state %d", zeus_plo_get_state(p));

  const zeus_plo_measurement *meas;
  CHECK(zeus_plo_measurements(p, &meas) == NLIM, "measurements");
  for (int i = 0; i < NLIM; i++) {
    double e, t;
    combined(300 - 25 * i, &e, &t);
    CHECK(meas[i].power_limit_w == (unsigned)(300 - 25 * i), "limit %u", meas[i].power_limit_w);
    CHECK(fabs(meas[i].energy_j - e) <= 0.002 * g_size, "%u W: energy %.6f J, expected the sum %.6f J",
          meas[i].power_limit_w, meas[i].energy_j, e);
    CHECK(fabs(meas[i].time_s - t) <= 1e-9, "%u W: time %.9f s, expected the largest %.9f s", meas[i].power_limit_w,
          meas[i].time_s, t);
  }
  unsigned want = ref_cost_optimum(0.5, (unsigned)g_size);
  /* The data is such that the world size matters (125 W for 2 ranks, 250 W for 4; 100 W if the
   * default selector counted only this rank's GPU). */
  CHECK(want != ref_cost_optimum(0.5, 1), "test data: the world size does not change the optimum");
  unsigned opt = zeus_plo_optimal_power_limit_w(p);
  CHECK(opt == want, "optimum %u W, expected %u W (ZeusCost 0.5, world size %d)", opt, want, g_size);
  check_same_everywhere(opt, "the optimum");
  unsigned mw;
  OK(zeus_gpu_get_power_limit(d, 0, &mw));
  CHECK(mw == want * 1000, "GPU at %u mW", mw);
  zeus_plo_close(p);
  OK(zeus_gpu_get_power_limit(d, 0, &mw));
  CHECK(mw == 300000, "after close: %u mW, expected the earlier 300000", mw);
  MPI_Barrier(MPI_COMM_WORLD);
  CHECK(access(profile, F_OK) == 0, "rank 0 did not write %s", profile);

  /* ---- 2. reload on every rank: DONE at once, same optimum; Energy on the same figures ---- */
  OK(zeus_plo_open(&p, m, &o));
  CHECK(zeus_plo_get_state(p) == ZEUS_PLO_DONE && zeus_plo_optimal_power_limit_w(p) == want, "reload: %u W",
        zeus_plo_optimal_power_limit_w(p));
  zeus_plo_close(p);
  zeus_selector energy;
  OK(zeus_selector_energy(&energy));
  o.selector = &energy;
  OK(zeus_plo_open(&p, m, &o));
  unsigned want_e = ref_energy_optimum();
  CHECK(zeus_plo_optimal_power_limit_w(p) == want_e, "reload with Energy: %u W, expected %u W",
        zeus_plo_optimal_power_limit_w(p), want_e);
  check_same_everywhere(zeus_plo_optimal_power_limit_w(p), "the Energy optimum");
  zeus_plo_close(p);
  o.selector = NULL;
  zeus_monitor_close(m);
  zeus_devices_close(d);

  /* ---- 3. disagreements are errors on every rank ---- */
  /* The last rank's GPU tops out at 275 W. */
  d = open_gpu(g_rank == g_size - 1 ? 275 : 300);
  m = open_monitor(d);
  char alone[300];
  snprintf(alone, sizeof alone, "%s/rank%d.json", dir, g_rank);
  o.profile_path = alone;
  p = NULL;
  int rc = zeus_plo_open(&p, m, &o);
  CHECK(rc == ZEUS_EINVAL && strstr(zeus_errmsg(), "ranges differ across ranks") && !p, "rc %d", rc);
  zeus_monitor_close(m);
  zeus_devices_close(d);
  /* Only rank 0 sees its profile file. */
  d = open_gpu(300);
  m = open_monitor(d);
  if (g_rank == 0) {
    FILE *f = fopen(alone, "w");
    CHECK(f != NULL, "cannot write %s", alone);
    fputs("{\"measurements\": [{\"power_limit\": 300, \"energy\": 1, \"time\": 1}]}\n", f);
    fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  rc = zeus_plo_open(&p, m, &o);
  CHECK(rc == ZEUS_EINVAL && strstr(zeus_errmsg(), "exists on 1 of") && !p, "rc %d", rc);
  OK(zeus_gpu_get_power_limit(d, 0, &mw));
  CHECK(mw == 300000, "a failed open changed the limit to %u mW", mw);
  zeus_monitor_close(m);
  zeus_devices_close(d);

  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    printf("PASS: %d ranks agreed on %u W (ZeusCost 0.5) and %u W (Energy) from summed energy and maxed time\n", g_size,
           want, want_e);
  }
  MPI_Finalize();
  return 0;
}
