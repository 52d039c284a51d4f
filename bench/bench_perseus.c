/* Perseus in the server, end to end over HTTP on the Perseus artifact's measured stage profiles
 * (../shared/data/perseus-sosp24/stage_profile, or $ZEUS_DATA_DIR): ranks whose results are
 * computed from the profile (tests/pfo_pipeline_eval.h) drive `zeus pfo-server`'s Perseus
 * scheduler round by round.
 *
 *   1. 8 stages x 12 microbatches, one pipeline, each model and GPU: rounds until a plan is
 *      deployed, solve time, and the deployed plan's iteration energy and time against every GPU
 *      at its highest clock (AllMaxFrequency).
 *   2. GPT-3 on A40, two pipelines, pipeline 1 slowed 1.1x then 1.2x then recovered: pipeline 0's
 *      energy against all-max clocks plus idling to the straggler's time, and the job's time
 *      against the straggler's.
 *   3. GPT-3 on A40 at 96 microbatches: request latency (rounds of 8 long polls and 8 results,
 *      and single GETs) before and while the solve runs on the solver thread.
 * Not a test: prints figures. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ftw.h>
#include <jansson.h>
#include <zeus.h>

#include "core/core.h"
#include "pfo_http.h"
#include "pfo_pipeline_eval.h"

#define S 8

typedef struct job {
  int port, D, M;
  char id[256];
  pe_profile *p;
  double bp;
  th_conn c[64];
  double factor[8];
  double time, pipe_e[8];
} job;

static double now_s(void) { return zeus_monotonic_s(); }

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static char *http(int port, const char *method, const char *path, const char *body, int *status) {
  th_conn c = {.fd = -1, .port = port};
  char *resp = NULL;
  *status = th_request(&c, method, path, body, NULL, &resp);
  th_close(&c);
  return resp;
}

static json_t *get_json(job *j, const char *path) {
  int st;
  char *r = http(j->port, "GET", path, NULL, &st);
  json_t *v = st == 200 && r ? json_loads(r, 0, NULL) : NULL;
  free(r);
  return v;
}

static const char **order_1f1b(int s, int M) {
  const char **v = calloc((size_t)(2 * M), sizeof *v);
  for (int k = 0; k < 2 * M; k++) {
    zeus_pipeline_instr kind;
    zeus_pipeline_1f1b_instr(S, s, M, k, &kind, NULL);
    v[k] = zeus_pipeline_instr_name(kind);
  }
  return v;
}

static int start_job(job *j, int port, int D, int M, pe_profile *p, double bp) {
  memset(j, 0, sizeof *j);
  j->port = port, j->D = D, j->M = M, j->p = p, j->bp = bp;
  for (int d = 0; d < 8; d++) j->factor[d] = 1;
  char body[256];
  snprintf(body, sizeof body,
           "{\"job_id\": \"\", \"pp_degree\": %d, \"dp_degree\": %d, \"tp_degree\": 1, \"world_size\": %d}", S, D,
           S * D);
  int st;
  char *r = http(port, "POST", "/register_job", body, &st);
  if (st != 200) {
    fprintf(stderr, "register_job: %d %s\n", st, r ? r : "");
    free(r);
    return -1;
  }
  snprintf(j->id, sizeof j->id, "%.*s", (int)strlen(r) - 2, r + 1);
  free(r);
  for (int rank = 0; rank < S * D; rank++) {
    zeus__buf b = {0};
    int s = rank % S;
    zeus__buf_printf(&b,
                     "{\"rank\": %d, \"dp_rank\": %d, \"pp_rank\": %d, \"tp_rank\": 0, \"available_frequencies\": [",
                     rank, rank / S, s);
    for (int c = 0; c < p->nclk; c++) zeus__buf_printf(&b, "%s%d", c ? ", " : "", p->mhz[c]);
    zeus__buf_puts(&b, "], \"pipe_schedule\": [");
    const char **ord = order_1f1b(s, M);
    for (int k = 0; k < 2 * M; k++) zeus__buf_printf(&b, "%s\"%s\"", k ? ", " : "", ord[k]);
    free(ord);
    zeus__buf_puts(&b, "]}");
    char path[400];
    snprintf(path, sizeof path, "/register_rank/%s", j->id);
    free(http(port, "POST", path, b.data, &st));
    zeus__buf_free(&b);
    if (st != 200) return -1;
    j->c[rank] = (th_conn){.fd = -1, .port = port};
  }
  return 0;
}

static void end_job(job *j) {
  for (int r = 0; r < S * j->D; r++) th_close(&j->c[r]);
}

/* One round over HTTP; returns its wall time, or -1. */
static double round_trip(job *j) {
  int W = S * j->D;
  double t0 = now_s();
  char path[400];
  for (int r = 0; r < W; r++) {
    snprintf(path, sizeof path, "/schedule/%s?rank=%d", j->id, r);
    if (j->c[r].fd < 0 && th_connect(&j->c[r], j->port)) {
      fprintf(stderr, "rank %d: cannot connect\n", r);
      return -1;
    }
    if (th_send_request(&j->c[r], "GET", path, NULL, NULL)) {
      fprintf(stderr, "rank %d: cannot send\n", r);
      return -1;
    }
  }
  zeus_pfo_schedule sched[64];
  for (int r = 0; r < W; r++) {
    char *resp;
    if (th_read_response(&j->c[r], &resp) != 200 ||
        zeus_pfo_schedule_from_json(resp, strlen(resp), "schedule", &sched[r])) {
      fprintf(stderr, "schedule of rank %d: %s\n", r, resp ? resp : "");
      free(resp);
      return -1;
    }
    free(resp);
  }
  zeus_pfo_prof_result res[64];
  if (pe_round(j->p, j->D, S, 1, sched, j->factor, j->bp, 1, false, res, &j->time, j->pipe_e)) {
    fprintf(stderr, "a schedule asks for a clock the profile lacks\n");
    return -1;
  }
  snprintf(path, sizeof path, "/result/%s", j->id);
  for (int r = 0; r < W; r++) {
    char *body, *resp;
    zeus_pfo_prof_result_to_json(&res[r], &body);
    int st = th_request(&j->c[r], "POST", path, body, NULL, &resp);
    free(resp);
    zeus_free(body);
    zeus_pfo_prof_result_clear(&res[r]);
    zeus_pfo_schedule_clear(&sched[r]);
    if (st != 200) {
      fprintf(stderr, "result of rank %d: %d\n", r, st);
      return -1;
    }
  }
  return now_s() - t0;
}

static const char *phase(job *j, json_t **status) {
  char path[400];
  snprintf(path, sizeof path, "/perseus/%s", j->id);
  json_decref(*status);
  *status = get_json(j, path);
  const char *ph = json_string_value(json_object_get(*status, "phase"));
  return ph ? ph : "?";
}

/* Every GPU at its highest clock, evaluated like a round (time, and energy of pipeline 0). */
static void all_max(const pe_profile *p, int D, int M, const double *factor, double bp, double *t, double *e0) {
  zeus_pfo_schedule sched[64];
  zeus_pfo_freq *fr = calloc((size_t)(2 * M * S), sizeof *fr);
  for (int r = 0; r < S * D; r++) {
    const char **ord = order_1f1b(r % S, M);
    sched[r] = (zeus_pfo_schedule){.rank = r, .frequencies = fr + (r % S) * 2 * M, .n_frequencies = (size_t)(2 * M)};
    for (int k = 0; k < 2 * M; k++) fr[(r % S) * 2 * M + k] = (zeus_pfo_freq){(char *)ord[k], p->mhz[0]};
    free(ord);
  }
  zeus_pfo_prof_result res[64];
  double pe[8];
  pe_round(p, D, S, 1, sched, factor, bp, 1, false, res, t, pe);
  for (int r = 0; r < S * D; r++) zeus_pfo_prof_result_clear(&res[r]);
  free(fr);
  *e0 = pe[0];
}

static zeus_pfo_server *start_server(const char *dir) {
  zeus_pfo_server_opts o;
  zeus_pfo_server_opts_init(&o);
  o.port = -1;
  o.scheduler = "Perseus";
  o.scheduler_args = "{\"warmup_iters\": 0}";
  o.dump_dir = dir;
  zeus_pfo_server *srv = NULL;
  if (zeus_pfo_server_open(&srv, &o)) fprintf(stderr, "server: %s\n", zeus_errmsg());
  return srv;
}

/* Rounds until deployed (or failed); returns the rounds run, -1 on error; *profiling: the rounds
 * before the solve started (the others ran while it did). */
static int until_deployed(job *j, json_t **st, int *profiling) {
  int rounds = 0;
  for (;;) {
    const char *ph = phase(j, st);
    if (!strcmp(ph, "profiling")) *profiling = rounds + 1;
    if (!strcmp(ph, "deployed") || !strcmp(ph, "failed")) return rounds;
    if (!strcmp(ph, "solving")) { /* the ranks train between rounds: 20 ms here */
      struct timespec ts = {0, 20000000};
      nanosleep(&ts, NULL);
    }
    if (round_trip(j) < 0 || ++rounds > 20000) {
      fprintf(stderr, "until_deployed: phase %s after %d rounds\n", ph, rounds);
      return -1;
    }
  }
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pct_of(double *v, int n, double q) {
  if (!n) return NAN;
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  int i = (int)ceil(q * n) - 1;
  return v[i < 0 ? 0 : i];
}

int main(void) {
  const char *data = getenv("ZEUS_DATA_DIR");
  char dir[] = "/tmp/zeus-bench-perseus-XXXXXX", path[1024];
  if (!data || !*data) data = "../shared/data";
  snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv", data);
  struct stat sb;
  if (stat(path, &sb)) {
    printf("bench_perseus: skipped, no measured stage profiles under %s (set ZEUS_DATA_DIR)\n", data);
    return 0;
  }
  if (!mkdtemp(dir)) return 1;
  zeus_pfo_server *srv = start_server(dir);
  if (!srv) return 1;
  int port = zeus_pfo_server_port(srv);

  printf("1. 8 stages x 12 microbatches, one pipeline: the plan Perseus deploys against AllMaxFrequency\n"
         "   (rounds of one iteration: profiling, then while the solve ran and the ranks trained at all-max, \n"
         "   one round every 20 ms)\n");
  printf("%-20s %9s %8s %8s %7s %10s %10s %9s %8s\n", "profile", "profiling", "solving", "solve_s", "points",
         "allmax_j", "plan_j", "energy_%", "time_%");
  static const char *const models[] = {"gpt3-175b+a40", "bloom+a40", "gpt3-175b+a100_sxm", "bloom+a100_sxm"};
  for (int m = 0; m < 4; m++) {
    snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/%s_bf16.csv", data, models[m]);
    double bp = strstr(models[m], "a40") ? 70.38 : 83.64;
    pe_profile *p = pe_load(path, S);
    job j;
    json_t *st = NULL;
    if (!p || start_job(&j, port, 1, 12, p, bp)) return 1;
    int prof = 0, rounds = until_deployed(&j, &st, &prof);
    round_trip(&j);
    double ta, ea, one = 1;
    all_max(p, 1, 12, &one, bp, &ta, &ea);
    json_t *solve = json_object_get(st, "solve");
    printf("%-20s %9d %8d %8.3f %7d %10.1f %10.1f %+9.2f %+8.3f\n", models[m], prof, rounds - prof,
           json_number_value(json_object_get(solve, "solve_s")),
           (int)json_integer_value(json_object_get(solve, "points")), ea, j.pipe_e[0], 100 * (j.pipe_e[0] - ea) / ea,
           100 * (j.time - ta) / ta);
    json_decref(st);
    end_job(&j);
    pe_free(p);
  }

  printf("\n2. GPT-3 on A40, two pipelines, pipeline 1 a straggler: pipeline 0 against all-max clocks plus idling\n");
  printf("%-8s %-10s %12s %12s %12s %9s %12s\n", "factor", "round", "straggler_s", "job_s", "allmax+idle", "p0_j",
         "energy_%");
  {
    snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv", data);
    pe_profile *p = pe_load(path, S);
    job j;
    json_t *st = NULL;
    if (!p || start_job(&j, port, 2, 12, p, 70.38)) return 1;
    int prof = 0;
    until_deployed(&j, &st, &prof);
    round_trip(&j);
    double tbase = j.time;
    static const double factors[] = {1.1, 1.1, 1.1, 1.2, 1.2, 1.2, 1.0, 1.0};
    for (int i = 0; i < 8; i++) {
      j.factor[1] = factors[i];
      round_trip(&j);
      double ta, ea;
      all_max(p, 2, 12, j.factor, 70.38, &ta, &ea);
      printf("%-8.2f %-10d %12.4f %12.4f %12.1f %9.1f %+12.2f\n", factors[i], i, factors[i] * tbase, j.time, ea,
             j.pipe_e[0], 100 * (j.pipe_e[0] - ea) / ea);
    }
    printf("(each round's schedules follow the previous round's measurement: the first round at a new factor runs "
           "the old plan)\n");
    json_decref(st);
    end_job(&j);
    pe_free(p);
  }

  printf("\n3. GPT-3 on A40, 8 x 96: request latency before and while the solve runs (rounds 20 ms apart)\n");
  {
    snprintf(path, sizeof path, "%s/perseus-sosp24/stage_profile/gpt3-175b+a40_bf16.csv", data);
    pe_profile *p = pe_load(path, S);
    job j;
    json_t *st = NULL;
    if (!p || start_job(&j, port, 1, 96, p, 70.38)) return 1;
    double before[256], during[256], gets[512];
    int nb = 0, nd = 0, ng = 0;
    char spath[400];
    snprintf(spath, sizeof spath, "/perseus/%s", j.id);
    double t_end = now_s() + 300;
    while (now_s() < t_end) {
      const char *ph = phase(&j, &st);
      const char *ss = json_string_value(json_object_get(json_object_get(st, "solve"), "state"));
      bool running = !strcmp(ph, "solving") && ss && !strcmp(ss, "running");
      if (!strcmp(ph, "deployed") || !strcmp(ph, "failed")) break;
      struct timespec ts = {0, 20000000}; /* the ranks train between rounds: 20 ms here */
      nanosleep(&ts, NULL);
      double dt = round_trip(&j);
      if (dt < 0) return 1;
      if (!running && nb < 256) before[nb++] = dt;
      if (running && nd < 256) {
        during[nd++] = dt;
        for (int k = 0; k < 2 && ng < 512; k++) {
          double t0 = now_s();
          json_decref(get_json(&j, k ? spath : "/info"));
          gets[ng++] = now_s() - t0;
        }
      }
    }
    phase(&j, &st);
    json_t *solve = json_object_get(st, "solve");
    printf("solve %.3f s (%d points) on the solver thread\n", json_number_value(json_object_get(solve, "solve_s")),
           (int)json_integer_value(json_object_get(solve, "points")));
    printf("%-34s %6s %9s %9s %9s\n", "requests", "count", "p50_ms", "p99_ms", "max_ms");
    printf("%-34s %6d %9.2f %9.2f %9.2f\n", "round (16 requests), before", nb, 1e3 * pct_of(before, nb, 0.5),
           1e3 * pct_of(before, nb, 0.99), 1e3 * pct_of(before, nb, 1));
    printf("%-34s %6d %9.2f %9.2f %9.2f\n", "round (16 requests), while solving", nd, 1e3 * pct_of(during, nd, 0.5),
           1e3 * pct_of(during, nd, 0.99), 1e3 * pct_of(during, nd, 1));
    printf("%-34s %6d %9.2f %9.2f %9.2f\n", "GET /info or status, while solving", ng, 1e3 * pct_of(gets, ng, 0.5),
           1e3 * pct_of(gets, ng, 0.99), 1e3 * pct_of(gets, ng, 1));
    json_decref(st);
    end_job(&j);
    pe_free(p);
  }
  zeus_pfo_server_close(srv);
  return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) ? 1 : 0;
}
