/* The Perseus client across MPI ranks (run under mpirun -np 2 and -np 4). Rank 0 runs a Perseus
 * server in its process (PointSolution, one plan entry per rank, dumps on) and broadcasts its port;
 * every rank opens its own simulated GPU and a zeus_pfo_optimizer over zeus_collective_mpi, so the
 * job id travels from rank 0 by MPI_Bcast. Checks, on every rank:
 *   - all ranks joined the same job (the ids are gathered and compared);
 *   - every instruction ran at the clock the rank's plan entry gives (the simulated GPU's operating
 *     point when the work starts), and the last round's mean iteration time is the model's;
 *   - rank 0 finds every round's results of every rank in the server's dumps, with each rank's
 *     iteration time as the model gives it;
 *   - a start-up failure on one rank (a GPU that does not exist on the last rank) fails every
 *     rank, each with its own message, and none hangs.
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

#define CHECK(cond, ...)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "rank %d: line %d: check failed: %s: ", g_rank, __LINE__, #cond);  \
      fprintf(stderr, __VA_ARGS__);                                                      \
      fprintf(stderr, " (zeus: %s)\n", zeus_errmsg());                                   \
      fflush(stderr);                                                                    \
      MPI_Abort(MPI_COMM_WORLD, 1);                                                      \
    }                                                                                    \
  } while (0)
#define OK(call) CHECK((call) == ZEUS_OK, "%s", #call)

#define NINST 4 /* forward, forward, backward, backward */
#define K 2     /* iterations per round */
#define ITERS 4

static const char *const order[NINST] = {"forward", "forward", "backward", "backward"};

static unsigned planned(int rank, int i) { return i < 2 ? 1500 - 15 * rank : 1200 + 30 * rank; }

/* One unit of work on the default simulated GPU at f MHz (0.05 s at 1740 MHz, 25 % memory-bound). */
static double unit_time(unsigned f) { return 0.05 * (0.25 + 0.75 * 1740.0 / f); }

static double iter_time(int rank) {
  double t = 0;
  for (int i = 0; i < NINST; i++) t += unit_time(planned(rank, i));
  return t;
}

static int open_opt(zeus_pfo_optimizer **opt, zeus_devices *d, const zeus_collective *coll, const char *url,
                    unsigned device_id) {
  zeus_pfo_optimizer_opts o;
  zeus_pfo_optimizer_opts_init(&o);
  o.rank = g_rank, o.pp_rank = g_rank;
  o.pp_degree = g_size, o.dp_degree = 1, o.tp_degree = 1, o.world_size = g_size;
  o.server_url = url;
  o.devices = d;
  o.device_id = device_id;
  o.collective = coll;
  o.pipe_schedule = order, o.n_pipe_schedule = NINST;
  o.iters_per_round = K;
  o.retries = 2, o.retry_backoff_s = 0.05, o.schedule_timeout_s = 60;
  o.no_signal_handlers = true;
  return zeus_pfo_optimizer_open(opt, &o);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  zeus_collective coll;
  OK(zeus_collective_mpi(&coll));

  /* Rank 0: the plan, the server, the port for everyone. */
  char dir[256] = "", plan[400], dump[400], args[600];
  int port = 0;
  zeus_pfo_server *srv = NULL;
  if (g_rank == 0) {
    const char *base = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/zeus-pfo-mpi-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(plan, sizeof plan, "%s/plan.py", dir);
    snprintf(dump, sizeof dump, "%s/dump", dir);
    FILE *f = fopen(plan, "w");
    CHECK(f != NULL, "%s", plan);
    fputs("[\n", f);
    for (int r = 0; r < g_size; r++) {
      fputs("  [", f);
      for (int i = 0; i < NINST; i++) fprintf(f, "%s(\"%s\", %u)", i ? ", " : "", order[i], planned(r, i));
      fputs("],\n", f);
    }
    fputs("]\n", f);
    fclose(f);
    snprintf(args, sizeof args, "{\"solution_path\": \"%s\"}", plan);
    zeus_pfo_server_opts so = {.port = -1, .scheduler = "PointSolution", .scheduler_args = args, .dump_data = true,
                               .dump_dir = dump};
    OK(zeus_pfo_server_open(&srv, &so));
    port = zeus_pfo_server_port(srv);
  }
  MPI_Bcast(&port, 1, MPI_INT, 0, MPI_COMM_WORLD);
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%d", port);

  /* Each rank: its own simulated GPU on a virtual clock. */
  zeus_sim_config cfg = {.num_gpus = 1, .clock = ZEUS_SIM_CLOCK_VIRTUAL};
  zeus_devices_opts dopts = {.backend = "sim", .sim = &cfg, .all_devices = true};
  zeus_devices *d;
  OK(zeus_devices_open(&d, &dopts));
  zeus_sim_node *node = zeus_devices_sim_node(d);

  zeus_pfo_optimizer *opt;
  OK(open_opt(&opt, d, &coll, url, 0));
  /* One job id for all. */
  char id[256] = "", *ids = malloc((size_t)g_size * sizeof id);
  snprintf(id, sizeof id, "%s", zeus_pfo_job_id(opt));
  MPI_Allgather(id, sizeof id, MPI_CHAR, ids, sizeof id, MPI_CHAR, MPI_COMM_WORLD);
  for (int r = 0; r < g_size; r++) CHECK(strcmp(ids + r * sizeof id, id) == 0, "rank %d has job '%s', I have '%s'", r,
                                         ids + r * sizeof id, id);
  free(ids);
  CHECK(strstr(id, "PointSolution") != NULL, "job id '%s'", id);

  for (int it = 0; it < ITERS; it++) {
    OK(zeus_pfo_on_step_begin(opt));
    for (int i = 0; i < NINST; i++) {
      OK(zeus_pfo_on_instruction_begin(opt, order[i]));
      OK(zeus_pfo_controller_wait(zeus_pfo_optimizer_controller(opt), 10));
      unsigned clk;
      OK(zeus_sim_operating_point(node, 0, &clk, NULL));
      CHECK(clk == planned(g_rank, i), "iteration %d instruction %d ran at %u MHz, the plan says %u", it, i, clk,
            planned(g_rank, i));
      OK(zeus_sim_work(node, 0, 1, NULL));
      OK(zeus_pfo_on_instruction_end(opt, order[i]));
    }
    OK(zeus_pfo_on_step_end(opt));
  }
  zeus_pfo_round_stats st;
  zeus_pfo_last_round(opt, &st);
  CHECK(st.round == ITERS / K - 1 && st.iterations == K, "round %ld, %ld iterations", st.round, st.iterations);
  CHECK(fabs(st.iter_time_s - iter_time(g_rank)) < 1e-9, "iteration time %.12g, model %.12g", st.iter_time_s,
        iter_time(g_rank));
  zeus_pfo_optimizer_close(opt);
  MPI_Barrier(MPI_COMM_WORLD);

  if (g_rank == 0) { /* every round's results of every rank reached the server */
    char jd[700];
    snprintf(jd, sizeof jd, "%s/%s", dump, id);
    for (int round = 0; round < ITERS / K; round++) {
      zeus_pfo_prof_result *pr;
      size_t n;
      OK(zeus_pfo_load_prof(jd, round, &pr, &n));
      CHECK(n == (size_t)g_size, "round %d: %zu results", round, n);
      for (size_t i = 0; i < n; i++) {
        CHECK(pr[i].n_iter_time == K, "round %d rank %d: %zu iterations", round, pr[i].rank, pr[i].n_iter_time);
        CHECK(fabs(pr[i].iter_time[0] - iter_time(pr[i].rank)) < 1e-9, "round %d rank %d: %.12g s", round, pr[i].rank,
              pr[i].iter_time[0]);
      }
      zeus_pfo_prof_results_free(pr, n);
    }
  }

  /* The last rank names a GPU that does not exist: every rank fails, none hangs. */
  zeus_pfo_optimizer *bad = NULL;
  int rc = open_opt(&bad, d, &coll, url, g_rank == g_size - 1 ? 5 : 0);
  if (g_rank == g_size - 1)
    CHECK(rc == ZEUS_ENOENT && strstr(zeus_errmsg(), "device_id 5 does not exist"), "rc %d", rc);
  else
    CHECK(rc == ZEUS_ESTATE && strstr(zeus_errmsg(), "1 other rank(s) of the job failed"), "rc %d", rc);
  CHECK(bad == NULL, "an optimizer came back");
  unsigned lo, hi;
  OK(zeus_sim_gpu_get_locked_clocks(node, 0, &lo, &hi, NULL, NULL));
  CHECK(hi == 0, "the SM clock is still locked at %u MHz", hi);

  zeus_devices_close(d);
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_rank == 0) {
    zeus_pfo_server_close(srv);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    printf("ok: %d ranks, job id by MPI_Bcast, clocks as planned, results in the dumps, failures agreed\n", g_size);
  }
  MPI_Finalize();
  return 0;
}
