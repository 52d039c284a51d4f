/* Perseus: profile, solve and deploy inside the server, and follow stragglers.
 *
 *   profiling  exactly as InstructionProfiler (profiling.c), one unit per pipeline stage: every
 *              rank of a stage runs the same clock; a stage's measurement of a round is, per
 *              data-parallel pipeline, the slowest tensor-parallel rank's time and their mean
 *              energy, and across pipelines the lower median by time (one straggling pipeline
 *              does not skew the profile). GET /perseus/{job_id}/profile.csv serves it as it
 *              grows; stage_profile.csv is written once it is complete (no file write per round).
 *              While profiling, the GPU power while blocked (idle time and energy of every
 *              iteration outside its instructions) is measured unless blocking_power_w is given.
 *   solving    the stage profile goes to the server's solver threads (solver_pool.h); the ranks
 *              train meanwhile with every GPU at its highest clock, and each round looks whether
 *              the solve has finished. A failed profile or solve is reported (status, events,
 *              log) and the job goes on at the highest clocks.
 *   deployed   the base plan (least energy at the fastest iteration time, or under target_time_s,
 *              or within max_slowdown of the fastest), then straggler following: each round
 *              measures every data-parallel pipeline's own iteration time (the critical path of
 *              its 1F1B DAG over the instruction times its ranks measured) against its plan's;
 *              a pipeline slower by more than straggler_tolerance (for straggler_rounds rounds,
 *              or declared by POST /perseus/{job_id}/straggler) keeps the base plan, every other
 *              pipeline moves to the frontier point of least energy at the slowest straggler's
 *              time (counting the blocking power while it waits), and all move back once every
 *              straggler is within recovery_tolerance again. A new straggler time moves them
 *              only when it differs from the one followed by more than retarget_tolerance.
 * Every plan change is a deployment with its reason; deployments and events are logged, kept
 * (the most recent PERSEUS_MAX_LOG of each) and dumped to perseus.json. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pfo_server/sched.h"
#include "pfo_server/solver_pool.h"
#include "zeus/format.h"
#include "zeus/pipeline.h"

#define PERSEUS_MAX_LOG 1000  /* deployments and events kept (older ones dropped and counted) */
#define PERSEUS_MAX_BP 4096   /* blocking-power samples kept */

enum { P_PROFILING, P_SOLVING, P_DEPLOYED, P_FAILED };
static const char *const phase_names[] = {"profiling", "solving", "deployed", "failed"};
enum { MODE_FASTEST, MODE_TARGET, MODE_SLOWDOWN };
static const char *const mode_names[] = {"fastest", "target_time", "max_slowdown"};

typedef struct {
  int rank, dp, pp, tp;
  const char **order; /* instruction names of one iteration */
  size_t norder;
  int *cidx; /* per entry of order: its index among the stage's 2M compute instructions */
} prank;

typedef struct {
  long point;        /* deployed frontier point, -1 before the first deployment */
  bool slow;         /* a straggler: keeps the base plan */
  int over, under;   /* rounds in a row above the straggler / below the recovery threshold */
  double declared_s; /* > 0: declared iteration time */
  double natural_s;  /* its time on the base plan, as last measured or declared (NAN: unknown) */
  /* the last round's measurement */
  bool have;
  double own_s, iter_s, energy_j, ratio;
} pipe;

typedef struct {
  char job_id[200];
  int S, D, T, M;
  prank *r;
  size_t n;
  size_t *at; /* at[(d * S + s) * T + t]: index in r */
  int *kind_at, *mb_at; /* 1F1B order of each stage: [s * 2M + k] */
  /* options */
  long warmup_iters, patience, min_frequency;
  double bp_arg;  /* < 0: measure */
  double unit_s;
  zeus_frontier_cost_model cost_model;
  int mode;
  double target_s, max_slowdown;
  double tol_enter, tol_exit, tol_retarget, max_solve_s;
  long hold;
  /* state */
  int phase;
  long round; /* rounds observed */
  char error[1024];
  zeus__profiling *prof;
  zeus__prof_sample *samples; /* per stage */
  double *bp;
  size_t nbp, bp_next;
  zeus__solver_pool *pool;
  zeus__solve *task;
  double solve_s, queued_s;
  size_t solve_points;
  zeus_frontier *f;
  size_t npts;
  double *pt_time, *pt_energy;
  unsigned char *written; /* plan file written, per point */
  char *csv, *svg;
  char artifact_error[512];
  double bp_used;
  const char *bp_source;
  double allmax_time, allmax_energy;
  long base;
  char base_reason[1024];
  bool following;
  double target_follow;
  pipe *pipes;
  json_t *deployments, *events;
  size_t deployments_dropped, events_dropped, ndeployments;
  char *dir;                      /* the job's dump folder, for the status */
  const zeus__pfo_dump_loc *dump; /* where files are written (without following symlinks) */
  char dump_error[512];
  double *scratch; /* 6 S M doubles for measurements */
} perseus;

static const zeus__sched_param perseus_params[] = {
    {"warmup_iters", ZEUS__ARG_INT, false},
    {"min_frequency", ZEUS__ARG_INT, false},
    {"num_microbatches", ZEUS__ARG_INT, false},
    {"patience", ZEUS__ARG_INT, false},
    {"blocking_power_w", ZEUS__ARG_NUMBER, false},
    {"unit_time_s", ZEUS__ARG_NUMBER, false},
    {"cost_model", ZEUS__ARG_STRING, false},
    {"target_time_s", ZEUS__ARG_NUMBER, false},
    {"max_slowdown", ZEUS__ARG_NUMBER, false},
    {"straggler_tolerance", ZEUS__ARG_NUMBER, false},
    {"recovery_tolerance", ZEUS__ARG_NUMBER, false},
    {"retarget_tolerance", ZEUS__ARG_NUMBER, false},
    {"straggler_rounds", ZEUS__ARG_INT, false},
    {"max_solve_s", ZEUS__ARG_NUMBER, false},
    {NULL, 0, false},
};

/* ---- arguments ---- */

static double num_arg(const json_t *args, const char *key, double def) {
  json_t *v = json_object_get(args, key);
  return v ? json_number_value(v) : def;
}

static int range_arg(const json_t *args, const char *key, double lo, double hi, bool lo_open, const char *what) {
  json_t *v = json_object_get(args, key);
  if (!v) return ZEUS_OK;
  double x = json_number_value(v);
  if (!isfinite(x) || x > hi || x < lo || (lo_open && x == lo))
    return zeus__error(ZEUS_EINVAL, "Perseus: %s must be %s, got %g", key, what, x);
  return ZEUS_OK;
}

static int perseus_check(const json_t *args) {
  int rc;
  if ((rc = range_arg(args, "warmup_iters", 0, 1e9, false, "an integer >= 0")) ||
      (rc = range_arg(args, "patience", 1, 1e9, false, "an integer >= 1")) ||
      (rc = range_arg(args, "num_microbatches", 1, 100000, false, "an integer in 1..100000")) ||
      (rc = range_arg(args, "blocking_power_w", 0, 100000, false, "a power in watts, 0..100000")) ||
      (rc = range_arg(args, "unit_time_s", 1e-6, 10, false, "a time quantum in 0.000001..10 s")) ||
      (rc = range_arg(args, "target_time_s", 0, 1e6, true, "an iteration time > 0 s")) ||
      (rc = range_arg(args, "max_slowdown", 1, 100, false, "a factor in 1..100 of the fastest time")) ||
      (rc = range_arg(args, "straggler_tolerance", 0, 10, true, "a fraction > 0 (0.05: 5 % slower)")) ||
      (rc = range_arg(args, "recovery_tolerance", 0, 10, false, "a fraction >= 0")) ||
      (rc = range_arg(args, "retarget_tolerance", 0, 10, false, "a fraction >= 0")) ||
      (rc = range_arg(args, "straggler_rounds", 1, 1000, false, "an integer in 1..1000")) ||
      (rc = range_arg(args, "max_solve_s", 0, 86400, true, "seconds > 0")))
    return rc;
  if (json_object_get(args, "target_time_s") && json_object_get(args, "max_slowdown"))
    return zeus__error(ZEUS_EINVAL, "Perseus: give target_time_s or max_slowdown, not both");
  const char *cm = json_string_value(json_object_get(args, "cost_model"));
  if (cm && strcmp(cm, "exponential") && strcmp(cm, "hull"))
    return zeus__error(ZEUS_EINVAL, "Perseus: cost_model must be \"exponential\" or \"hull\", got \"%s\"", cm);
  double enter = num_arg(args, "straggler_tolerance", 0.05), exit_ = num_arg(args, "recovery_tolerance", 0.02);
  if (exit_ >= enter)
    return zeus__error(ZEUS_EINVAL, "Perseus: recovery_tolerance (%g) must be below straggler_tolerance (%g), "
                       "or plans would flap between the two", exit_, enter);
  return ZEUS_OK;
}

/* ---- logs and dumps ---- */

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static void push_capped(json_t *arr, json_t *item, size_t *dropped) {
  json_array_append_new(arr, item);
  while (json_array_size(arr) > PERSEUS_MAX_LOG) {
    json_array_remove(arr, 0);
    (*dropped)++;
  }
}

static json_t *status_json(const perseus *st, bool full);

/* Writes one file of the job's dump folder atomically (the only place Perseus writes); a failure
 * is kept for the status and logged, never fatal. */
static void write_file(perseus *st, const char *name, const void *data, size_t len) {
  if (!st->dir || !st->dump) return;
  if (zeus__pfo_dump_write(st->dump, name, data, len)) {
    snprintf(st->dump_error, sizeof st->dump_error, "%s", zeus_errmsg());
    zeus__log(ZEUS_LOG_ERROR, "perseus", "job %s: %s", st->job_id, st->dump_error);
  }
}

/* Rewrites perseus.json (status, deployments, events). */
static void dump_state(perseus *st) {
  if (!st->dir) return;
  json_t *o = status_json(st, true);
  zeus_json_round_by_unit(o); /* each figure at its resolution (docs/output.md) */
  char *text = o ? zeus_json_dumps(o, JSON_INDENT(2)) : NULL;
  json_decref(o);
  if (text) write_file(st, "perseus.json", text, strlen(text));
  else snprintf(st->dump_error, sizeof st->dump_error, "perseus.json: %s", zeus_errmsg());
  zeus_free(text);
}

/* Records an event (and logs it). `extra` (owned) adds fields; NULL for none. */
static void event(perseus *st, const char *kind, json_t *extra, int level, const char *fmt, ...) ZEUS__PRINTF(5, 6);
static void event(perseus *st, const char *kind, json_t *extra, int level, const char *fmt, ...) {
  char msg[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (st->round > 0) zeus__log(level, "perseus", "job %s, after round %ld: %s", st->job_id, st->round - 1, msg);
  else zeus__log(level, "perseus", "job %s: %s", st->job_id, msg);
  json_t *e = extra ? extra : json_object();
  /* The round whose results led to the event (0-based); what it decides applies from the next. */
  json_object_set_new(e, "round", st->round > 0 ? json_integer(st->round - 1) : json_null());
  json_object_set_new(e, "time_unix_s", json_integer((json_int_t)time(NULL)));
  json_object_set_new(e, "event", json_string(kind));
  json_object_set_new(e, "message", json_string(msg));
  push_capped(st->events, e, &st->events_dropped);
  dump_state(st);
}

static void fail(perseus *st, const char *kind, const char *msg) {
  st->phase = P_FAILED;
  snprintf(st->error, sizeof st->error, "%s", msg);
  event(st, kind, NULL, ZEUS_LOG_ERROR, "%s; the job goes on with every GPU at its highest clock", msg);
}

static void plan_name(long point, char *buf, size_t len) { snprintf(buf, len, "freqs_pipeline_%05ld.py", point); }

/* Writes the plan file of a deployed point once. */
static void write_plan(perseus *st, long p) {
  if (!st->dir || st->written[p]) return;
  char *text = NULL, name[64];
  plan_name(p, name, sizeof name);
  if (zeus_frontier_plan_text(st->f, (size_t)p, &text)) {
    snprintf(st->dump_error, sizeof st->dump_error, "%s: %s", name, zeus_errmsg());
    return;
  }
  write_file(st, name, text, strlen(text));
  st->written[p] = 1;
  zeus_free(text);
}

static void fmt_profile_row(zeus__buf *b, int stage, const char *inst, const zeus_pfo_freq_measure *m) {
  char t[ZEUS_FORMAT_DOUBLE_MAX], e[ZEUS_FORMAT_DOUBLE_MAX];
  zeus_format_double(m->time_s, t, sizeof t);
  zeus_format_double(m->energy_j, e, sizeof e);
  zeus__buf_printf(b, "%d,%s,%d,%s,%s\n", stage, inst, m->frequency_mhz, t, e);
}

/* stage,instruction,frequency,time,energy of every measured step (zeus frontier's input; reals
 * in their shortest round-trip form, so the file solves to exactly what the server solved). */
static int profile_csv(const perseus *st, zeus__buf *b) {
  int rc = zeus__buf_puts(b, "stage,instruction,frequency,time,energy\n");
  for (int s = 0; s < st->S && !rc; s++) {
    const zeus_pfo_offline_result *u = zeus__profiling_unit(st->prof, (size_t)s);
    for (size_t i = 0; i < u->n_forward; i++) fmt_profile_row(b, s, "forward", &u->forward[i]);
    for (size_t i = 0; i < u->n_backward; i++) fmt_profile_row(b, s, "backward", &u->backward[i]);
  }
  if (!rc && !b->data) rc = zeus__oom("writing the stage profile");
  return rc;
}

static void dump_profile(perseus *st) {
  zeus__buf b = {0};
  if (profile_csv(st, &b)) snprintf(st->dump_error, sizeof st->dump_error, "stage_profile.csv: %s", zeus_errmsg());
  else write_file(st, "stage_profile.csv", b.data, b.len);
  zeus__buf_free(&b);
}

/* ---- creation ---- */

static void perseus_destroy(void *state) {
  perseus *st = state;
  for (size_t i = 0; i < st->n; i++) {
    free(st->r[i].order);
    free(st->r[i].cidx);
  }
  free(st->r);
  free(st->at);
  free(st->kind_at);
  free(st->mb_at);
  zeus__profiling_destroy(st->prof);
  free(st->samples);
  free(st->bp);
  zeus__solve_release(st->task);
  zeus_frontier_free(st->f);
  free(st->pt_time);
  free(st->pt_energy);
  free(st->written);
  zeus_free(st->csv);
  free(st->svg);
  free(st->pipes);
  json_decref(st->deployments);
  json_decref(st->events);
  free(st->dir);
  free(st->scratch);
  free(st);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* The clocks every rank of stage s has (sorted ascending), as a pseudo-rank for the profiler. */
static int stage_unit(const perseus *st, const zeus_pfo_rank_info *ranks, int s, zeus_pfo_rank_info *u) {
  const zeus_pfo_rank_info *first = &ranks[st->at[(size_t)s * (size_t)st->T]];
  int *f = malloc((first->n_available_frequencies + 1) * sizeof *f);
  if (!f) return zeus__oom("creating Perseus");
  size_t k = 0;
  for (size_t i = 0; i < first->n_available_frequencies; i++) {
    int c = first->available_frequencies[i];
    bool all = true;
    for (int d = 0; d < st->D && all; d++)
      for (int t = 0; t < st->T && all; t++) {
        const zeus_pfo_rank_info *o =
            &ranks[st->at[((size_t)d * (size_t)st->S + (size_t)s) * (size_t)st->T + (size_t)t]];
        bool has = false;
        for (size_t j = 0; j < o->n_available_frequencies && !has; j++) has = o->available_frequencies[j] == c;
        all = has;
      }
    if (all) f[k++] = c;
  }
  qsort(f, k, sizeof *f, cmp_int);
  if (k == 0) {
    free(f);
    return zeus__error(ZEUS_EINVAL, "Perseus: the ranks of pipeline stage %d have no SM clock in common", s);
  }
  *u = (zeus_pfo_rank_info){.rank = s, .pp_rank = s, .available_frequencies = f, .n_available_frequencies = k};
  return ZEUS_OK;
}

/* Checks a rank's order against synchronous 1F1B and maps its compute instructions. */
static int map_order(perseus *st, prank *pr) {
  pr->cidx = malloc((pr->norder + 1) * sizeof *pr->cidx);
  if (!pr->cidx) return zeus__oom("creating Perseus");
  int nf = 0, k = 0, M2 = 2 * st->M;
  for (size_t i = 0; i < pr->norder; i++) {
    const char *n = pr->order[i];
    bool f = strcmp(n, "forward") == 0, b = strcmp(n, "backward") == 0;
    nf += f;
    if (!f && !b) {
      pr->cidx[i] = k > 0 ? k - 1 : 0; /* other instructions run at the clock of the last compute one */
      continue;
    }
    if (k >= M2 || (st->kind_at[pr->pp * M2 + k] == ZEUS_PIPELINE_FORWARD) != f)
      return zeus__error(ZEUS_EINVAL,
                         "Perseus: rank %d's instruction %zu ('%s') is not where synchronous 1F1B puts it for %d "
                         "stages and %d microbatches; the frontier solver models 1F1B only",
                         pr->rank, i, n, st->S, st->M);
    pr->cidx[i] = k++;
  }
  if (k != M2)
    return zeus__error(ZEUS_EINVAL, "Perseus: rank %d has %d forward and %d backward instructions per iteration, "
                       "rank %d has %d of each", pr->rank, nf, k - nf, st->r[0].rank, st->M);
  return ZEUS_OK;
}

static int perseus_create(void **state, const zeus__sched_ctx *ctx, const json_t *args) {
  int rc = perseus_check(args);
  if (rc) return rc;
  if (!ctx->pool)
    return zeus__error(ZEUS_EINVAL, "Perseus needs the server's solver threads (it runs inside zeus pfo-server)");
  perseus *st = calloc(1, sizeof *st);
  if (!st) return zeus__oom("creating Perseus");
  snprintf(st->job_id, sizeof st->job_id, "%s", ctx->job_id && *ctx->job_id ? ctx->job_id : "?");
  st->S = ctx->job->pp_degree, st->D = ctx->job->dp_degree, st->T = ctx->job->tp_degree;
  st->pool = ctx->pool;
  st->base = -1;
  st->warmup_iters = (long)num_arg(args, "warmup_iters", 1);
  st->patience = (long)num_arg(args, "patience", 5);
  st->min_frequency = (long)num_arg(args, "min_frequency", 0);
  st->bp_arg = num_arg(args, "blocking_power_w", -1);
  st->unit_s = num_arg(args, "unit_time_s", 0.001);
  const char *cm = json_string_value(json_object_get(args, "cost_model"));
  st->cost_model = cm && !strcmp(cm, "hull") ? ZEUS_FRONTIER_COST_HULL : ZEUS_FRONTIER_COST_EXPONENTIAL;
  st->target_s = num_arg(args, "target_time_s", NAN);
  st->max_slowdown = num_arg(args, "max_slowdown", NAN);
  st->mode = isfinite(st->target_s) ? MODE_TARGET : isfinite(st->max_slowdown) ? MODE_SLOWDOWN : MODE_FASTEST;
  st->tol_enter = num_arg(args, "straggler_tolerance", 0.05);
  st->tol_exit = num_arg(args, "recovery_tolerance", 0.02);
  st->tol_retarget = num_arg(args, "retarget_tolerance", 0.02);
  st->hold = (long)num_arg(args, "straggler_rounds", 1);
  st->max_solve_s = num_arg(args, "max_solve_s", 600);
  st->deployments = json_array();
  st->events = json_array();
  size_t S = (size_t)st->S, D = (size_t)st->D, T = (size_t)st->T;
  st->r = calloc(ctx->n_ranks + 1, sizeof *st->r);
  st->at = malloc(D * S * T * sizeof *st->at);
  st->pipes = calloc(D, sizeof *st->pipes);
  st->samples = calloc(S, sizeof *st->samples);
  st->bp = malloc(PERSEUS_MAX_BP * sizeof *st->bp);
  if (!st->deployments || !st->events || !st->r || !st->at || !st->pipes || !st->samples || !st->bp) {
    perseus_destroy(st);
    return zeus__oom("creating Perseus");
  }
  for (size_t i = 0; i < D * S * T; i++) st->at[i] = SIZE_MAX;
  for (size_t d = 0; d < D; d++) st->pipes[d] = (pipe){.point = -1, .natural_s = NAN};
  long nmb = (long)num_arg(args, "num_microbatches", 0);
  for (size_t i = 0; i < ctx->n_ranks && !rc; i++) {
    const zeus_pfo_rank_info *ri = &ctx->ranks[i];
    prank *pr = &st->r[st->n++];
    *pr = (prank){.rank = ri->rank, .dp = ri->dp_rank, .pp = ri->pp_rank, .tp = ri->tp_rank};
    size_t *slot = &st->at[((size_t)ri->dp_rank * S + (size_t)ri->pp_rank) * T + (size_t)ri->tp_rank];
    if (*slot != SIZE_MAX)
      rc = zeus__error(ZEUS_EINVAL, "Perseus: ranks %d and %d both claim dp_rank %d, pp_rank %d, tp_rank %d",
                       st->r[*slot].rank, ri->rank, ri->dp_rank, ri->pp_rank, ri->tp_rank);
    *slot = i;
    if (!rc) rc = zeus__pfo_instruction_order(ctx->job, ri, nmb, &pr->order, &pr->norder);
  }
  for (size_t i = 0; i < D * S * T && !rc; i++)
    if (st->at[i] == SIZE_MAX)
      rc = zeus__error(ZEUS_EINVAL, "Perseus: no rank has dp_rank %zu, pp_rank %zu, tp_rank %zu", i / (S * T),
                       (i / T) % S, i % T);
  if (!rc) { /* M from the first rank; every rank must follow 1F1B with the same M */
    int m = 0;
    for (size_t i = 0; i < st->r[0].norder; i++) m += strcmp(st->r[0].order[i], "forward") == 0;
    st->M = m;
    if (m < 1) rc = zeus__error(ZEUS_EINVAL, "Perseus: rank %d's instructions have no forward", st->r[0].rank);
  }
  if (!rc) {
    size_t M2 = 2 * (size_t)st->M;
    st->kind_at = malloc(S * M2 * sizeof *st->kind_at);
    st->mb_at = malloc(S * M2 * sizeof *st->mb_at);
    st->scratch = malloc((6 * S * (size_t)st->M + 2 * S + 1) * sizeof *st->scratch);
    if (!st->kind_at || !st->mb_at || !st->scratch) rc = zeus__oom("creating Perseus");
    for (int s = 0; s < st->S && !rc; s++)
      for (int k = 0; k < 2 * st->M && !rc; k++) {
        zeus_pipeline_instr kind;
        rc = zeus_pipeline_1f1b_instr(st->S, s, st->M, k, &kind, &st->mb_at[(size_t)s * M2 + (size_t)k]);
        st->kind_at[(size_t)s * M2 + (size_t)k] = (int)kind;
      }
  }
  for (size_t i = 0; i < st->n && !rc; i++) rc = map_order(st, &st->r[i]);
  zeus_pfo_rank_info *units = rc ? NULL : calloc(S, sizeof *units);
  if (!rc && !units) rc = zeus__oom("creating Perseus");
  for (int s = 0; s < st->S && !rc; s++) rc = stage_unit(st, ctx->ranks, s, &units[s]);
  if (!rc) rc = zeus__profiling_create(&st->prof, "Perseus", units, S, st->min_frequency, st->patience);
  if (units)
    for (size_t s = 0; s < S; s++) free(units[s].available_frequencies);
  free(units);
  /* The job folder is made by the first write (zeus__pfo_dump_write), inside the server's private
   * dump folder and without following symlinks. */
  if (!rc && ctx->dump) {
    st->dump = ctx->dump;
    if (!(st->dir = zeus__strdup(ctx->dump->path))) rc = zeus__oom("creating Perseus");
  }
  if (rc) {
    perseus_destroy(st);
    return rc;
  }
  event(st, "profiling_started", NULL, ZEUS_LOG_INFO,
        "profiling %d stages x %d microbatches (%d pipeline%s, %d rank%s per stage and pipeline), warmup_iters %ld, "
        "min_frequency %ld, patience %ld", st->S, st->M, st->D, st->D == 1 ? "" : "s", st->T, st->T == 1 ? "" : "s",
        st->warmup_iters, st->min_frequency, st->patience);
  *state = st;
  return ZEUS_OK;
}

/* ---- schedules ---- */

static int perseus_next(void *state, zeus_pfo_schedule **out, size_t *n) {
  perseus *st = state;
  size_t M2 = 2 * (size_t)st->M;
  int *plan = malloc((M2 + 1) * sizeof *plan);
  zeus_pfo_schedule *v = calloc(st->n + 1, sizeof *v);
  if (!plan || !v) {
    free(plan);
    free(v);
    return zeus__oom("building Perseus' schedules");
  }
  int rc = ZEUS_OK;
  for (size_t i = 0; i < st->n && !rc; i++) {
    const prank *pr = &st->r[i];
    long point = st->phase == P_DEPLOYED ? st->pipes[pr->dp].point : -1;
    size_t np = 0;
    if (point >= 0) rc = zeus_frontier_get_plan(st->f, (size_t)point, pr->pp, NULL, plan, M2, &np);
    else {
      int f = zeus__profiling_frequency(st->prof, (size_t)pr->pp); /* the step, or the highest clock */
      for (size_t k = 0; k < M2; k++) plan[k] = f;
    }
    v[i].rank = pr->rank;
    v[i].frequencies = calloc(pr->norder + 1, sizeof *v[i].frequencies);
    if (!rc && !v[i].frequencies) rc = zeus__oom("building Perseus' schedules");
    for (size_t j = 0; j < pr->norder && !rc; j++) {
      v[i].frequencies[j].frequency_mhz = plan[pr->cidx[j]];
      if (!(v[i].frequencies[j].instruction = zeus__strdup(pr->order[j])))
        rc = zeus__oom("building Perseus' schedules");
      else v[i].n_frequencies++;
    }
  }
  free(plan);
  if (rc) {
    zeus_pfo_schedules_free(v, st->n);
    return rc;
  }
  *out = v;
  *n = st->n;
  return ZEUS_OK;
}

/* ---- measurements ---- */

static size_t first_iter(long skip, size_t n) { return skip > 0 && (size_t)skip < n ? (size_t)skip : 0; }

static bool list_mean(const double *v, size_t n, long skip, double *out) {
  if (!n) return false;
  size_t from = first_iter(skip, n);
  double s = 0;
  for (size_t i = from; i < n; i++) s += v[i];
  *out = s / (double)(n - from);
  return true;
}

/* Per-occurrence means of `inst` (exactly M values per iteration) over the round's iterations. */
static bool occ_means(const zeus_pfo_breakdown *bd, size_t nbd, const char *inst, long skip, int M, double *out) {
  for (size_t i = 0; i < nbd; i++) {
    if (strcmp(bd[i].instruction, inst)) continue;
    size_t n = bd[i].n_iters, from = first_iter(skip, n);
    if (n == 0) return false;
    for (int m = 0; m < M; m++) out[m] = 0;
    for (size_t it = from; it < n; it++) {
      if (bd[i].offsets[it + 1] - bd[i].offsets[it] != (size_t)M) return false;
      for (int m = 0; m < M; m++) out[m] += bd[i].values[bd[i].offsets[it] + (size_t)m];
    }
    for (int m = 0; m < M; m++) out[m] /= (double)(n - from);
    return true;
  }
  return false;
}

/* The iteration time of one 1F1B pipeline from its instruction durations F[s*M+m], B[s*M+m]:
 * the longest path of its DAG (forward m of stage s after forward m of stage s-1, backward m of
 * stage s after backward m of stage s+1, each stage in its order). fin: 2 S M scratch. */
static double makespan(const perseus *st, const double *F, const double *B, double *fin) {
  int S = st->S, M = st->M, M2 = 2 * M;
  double *fF = fin, *fB = fin + (size_t)S * (size_t)M;
  for (size_t i = 0; i < 2 * (size_t)S * (size_t)M; i++) fin[i] = -1;
  int *idx = calloc((size_t)S, sizeof *idx);
  double *end = calloc((size_t)S, sizeof *end);
  if (!idx || !end) {
    free(idx);
    free(end);
    return NAN;
  }
  size_t left = (size_t)S * (size_t)M2;
  while (left) {
    bool progress = false;
    for (int s = 0; s < S; s++) {
      while (idx[s] < M2) {
        int k = idx[s], kind = st->kind_at[s * M2 + k], m = st->mb_at[s * M2 + k];
        double dep = 0;
        if (kind == ZEUS_PIPELINE_FORWARD && s > 0) dep = fF[(s - 1) * M + m];
        else if (kind == ZEUS_PIPELINE_BACKWARD && s < S - 1) dep = fB[(s + 1) * M + m];
        if (dep < 0) break;
        double start = end[s] > dep ? end[s] : dep;
        double fin_t = start + (kind == ZEUS_PIPELINE_FORWARD ? F[s * M + m] : B[s * M + m]);
        (kind == ZEUS_PIPELINE_FORWARD ? fF : fB)[s * M + m] = fin_t;
        end[s] = fin_t;
        idx[s]++;
        left--;
        progress = true;
      }
    }
    if (!progress) break; /* cannot happen for 1F1B */
  }
  double t = 0;
  for (int s = 0; s < S; s++) t = end[s] > t ? end[s] : t;
  free(idx);
  free(end);
  return left ? NAN : t;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One blocking-power sample from a rank's round: energy over time outside its instructions. */
static void sample_blocking_power(perseus *st, const zeus_pfo_prof_result *r) {
  size_t n = r->n_iter_time < r->n_iter_energy ? r->n_iter_time : r->n_iter_energy;
  for (size_t b = 0; b < r->n_time_breakdown; b++)
    n = r->time_breakdown[b].n_iters < n ? r->time_breakdown[b].n_iters : n;
  for (size_t b = 0; b < r->n_energy_breakdown; b++)
    n = r->energy_breakdown[b].n_iters < n ? r->energy_breakdown[b].n_iters : n;
  if (!n || !r->n_time_breakdown || !r->n_energy_breakdown) return;
  double it_t = 0, idle_t = 0, idle_e = 0;
  for (size_t it = first_iter(st->warmup_iters, n); it < n; it++) {
    double t = r->iter_time[it], e = r->iter_energy[it];
    it_t += t;
    for (size_t b = 0; b < r->n_time_breakdown; b++)
      for (size_t j = r->time_breakdown[b].offsets[it]; j < r->time_breakdown[b].offsets[it + 1]; j++)
        t -= r->time_breakdown[b].values[j];
    for (size_t b = 0; b < r->n_energy_breakdown; b++)
      for (size_t j = r->energy_breakdown[b].offsets[it]; j < r->energy_breakdown[b].offsets[it + 1]; j++)
        e -= r->energy_breakdown[b].values[j];
    idle_t += t;
    idle_e += e;
  }
  if (!(idle_t > 0.02 * it_t) || !(idle_e >= 0)) return; /* too little idle time to tell */
  st->bp[st->bp_next] = idle_e / idle_t;
  st->bp_next = (st->bp_next + 1) % PERSEUS_MAX_BP;
  if (st->nbp < PERSEUS_MAX_BP) st->nbp++;
}

/* Measures every pipeline (and, while profiling, every stage and the blocking power). */
static void measure(perseus *st, const zeus_pfo_prof_result *res, size_t n) {
  int S = st->S, M = st->M, D = st->D, T = st->T;
  const zeus_pfo_prof_result **by = calloc(st->n + 1, sizeof *by);
  if (!by) return;
  for (size_t j = 0; j < n; j++)
    for (size_t i = 0; i < st->n; i++)
      if (st->r[i].rank == res[j].rank) {
        by[i] = &res[j];
        break;
      }
  size_t SM = (size_t)S * (size_t)M;
  double *F = st->scratch, *B = F + SM, *tf = B + SM, *tb = tf + SM, *fin = tb + SM; /* fin: 2 SM */
  for (int d = 0; d < D; d++) {
    pipe *p = &st->pipes[d];
    bool own = true, any = false;
    double iter = 0, energy = 0;
    for (int s = 0; s < S; s++) {
      for (int m = 0; m < M; m++) F[s * M + m] = B[s * M + m] = 0;
      for (int t = 0; t < T; t++) {
        const zeus_pfo_prof_result *r = by[st->at[((size_t)d * (size_t)S + (size_t)s) * (size_t)T + (size_t)t]];
        if (!r) {
          own = false;
          continue;
        }
        double x;
        if (list_mean(r->iter_time, r->n_iter_time, st->warmup_iters, &x)) iter = x > iter ? x : iter, any = true;
        if (list_mean(r->iter_energy, r->n_iter_energy, st->warmup_iters, &x)) energy += x;
        if (own && occ_means(r->time_breakdown, r->n_time_breakdown, "forward", st->warmup_iters, M, tf) &&
            occ_means(r->time_breakdown, r->n_time_breakdown, "backward", st->warmup_iters, M, tb)) {
          for (int m = 0; m < M; m++) {
            if (tf[m] > F[s * M + m]) F[s * M + m] = tf[m];
            if (tb[m] > B[s * M + m]) B[s * M + m] = tb[m];
          }
        } else {
          own = false;
        }
      }
    }
    p->have = any;
    p->iter_s = any ? iter : NAN;
    p->energy_j = any ? energy : NAN;
    p->own_s = own ? makespan(st, F, B, fin) : NAN;
  }
  if (st->phase == P_PROFILING && st->bp_arg < 0)
    for (size_t i = 0; i < st->n; i++)
      if (by[i]) sample_blocking_power(st, by[i]);
  if (st->phase == P_PROFILING && zeus__profiling_phase(st->prof) == 1) {
    /* Per stage: per pipeline the slowest tensor-parallel rank's time and their mean energy;
     * across pipelines the lower median by (forward + backward) time. */
    static const char *const insts[] = {"forward", "backward"};
    zeus__prof_sample *cand = calloc((size_t)D, sizeof *cand);
    double *key = calloc((size_t)D, sizeof *key);
    for (int s = 0; s < S && cand && key; s++) {
      int nc = 0;
      for (int d = 0; d < D; d++) {
        zeus__prof_sample c = {{true, true}, {0, 0}, {0, 0}};
        for (int k = 0; k < 2; k++) {
          for (int t = 0; t < T && c.have[k]; t++) {
            const zeus_pfo_prof_result *r = by[st->at[((size_t)d * (size_t)S + (size_t)s) * (size_t)T + (size_t)t]];
            double tt, ee;
            if (!r ||
                !zeus__pfo_breakdown_mean(r->time_breakdown, r->n_time_breakdown, insts[k], st->warmup_iters, &tt) ||
                !zeus__pfo_breakdown_mean(r->energy_breakdown, r->n_energy_breakdown, insts[k], st->warmup_iters,
                                          &ee)) {
              c.have[k] = false;
              break;
            }
            if (tt > c.time_s[k]) c.time_s[k] = tt;
            c.energy_j[k] += ee / T;
          }
        }
        if (!c.have[0] && !c.have[1]) continue;
        key[nc] = (c.have[0] ? c.time_s[0] : 0) + (c.have[1] ? c.time_s[1] : 0);
        cand[nc++] = c;
      }
      zeus__prof_sample pick = {{false, false}, {0, 0}, {0, 0}};
      if (nc) { /* the lower median by time */
        int *ord = malloc((size_t)nc * sizeof *ord);
        if (ord) {
          for (int i = 0; i < nc; i++) ord[i] = i;
          for (int i = 1; i < nc; i++)
            for (int j = i; j > 0 && key[ord[j]] < key[ord[j - 1]]; j--) {
              int x = ord[j];
              ord[j] = ord[j - 1];
              ord[j - 1] = x;
            }
          pick = cand[ord[(nc - 1) / 2]];
          free(ord);
        }
      }
      /* Means of measured figures: kept at the ns and the uJ, so that the profile (the solver's
       * input, stage_profile.csv) carries no binary noise (zeus/format.h). */
      for (int k = 0; k < 2; k++) {
        pick.time_s[k] = zeus_round_decimals(pick.time_s[k], 9);
        pick.energy_j[k] = zeus_round_decimals(pick.energy_j[k], 6);
      }
      st->samples[s] = pick;
    }
    free(cand);
    free(key);
  }
  free(by);
}

/* ---- plans ---- */

/* The fastest evaluated time, and the least-energy point within one time unit of it. */
static long pick_fastest(const perseus *st, double *tmin, int *ncand) {
  double t0 = INFINITY;
  for (size_t i = 0; i < st->npts; i++) t0 = st->pt_time[i] < t0 ? st->pt_time[i] : t0;
  long best = -1;
  int nc = 0;
  for (size_t i = 0; i < st->npts; i++) {
    if (st->pt_time[i] > t0 + st->unit_s) continue;
    nc++;
    if (best < 0 || st->pt_energy[i] < st->pt_energy[best]) best = (long)i;
  }
  *tmin = t0;
  if (ncand) *ncand = nc;
  return best;
}

/* The point of least energy with an evaluated time at most T; `padded` adds the blocking power of
 * every stage while the pipeline waits from its own time to T. -1 when no point is that fast. */
static long pick_below(const perseus *st, double T, bool padded, int *ncand) {
  long best = -1;
  double best_e = INFINITY;
  int nc = 0;
  for (size_t i = 0; i < st->npts; i++) {
    if (st->pt_time[i] > T * (1 + 1e-12)) continue;
    nc++;
    double e = st->pt_energy[i] + (padded ? st->bp_used * st->S * (T - st->pt_time[i]) : 0);
    if (e < best_e) best_e = e, best = (long)i;
  }
  if (ncand) *ncand = nc;
  return best;
}

/* The all-max plan evaluated on the measured profile (as the solver evaluates its plans). */
static void eval_allmax(perseus *st) {
  int S = st->S, M = st->M;
  size_t SM = (size_t)S * (size_t)M;
  double *F = st->scratch, *B = F + SM, *fin = B + 2 * SM;
  double busy = 0, e = 0;
  st->allmax_time = st->allmax_energy = NAN;
  for (int s = 0; s < S; s++) {
    const zeus_pfo_offline_result *u = zeus__profiling_unit(st->prof, (size_t)s);
    const zeus_pfo_freq_measure *mf = NULL, *mb = NULL;
    for (size_t i = 0; i < u->n_forward; i++)
      if (!mf || u->forward[i].frequency_mhz > mf->frequency_mhz) mf = &u->forward[i];
    for (size_t i = 0; i < u->n_backward; i++)
      if (!mb || u->backward[i].frequency_mhz > mb->frequency_mhz) mb = &u->backward[i];
    if (!mf || !mb) return;
    for (int m = 0; m < M; m++) F[s * M + m] = mf->time_s, B[s * M + m] = mb->time_s;
    busy += M * (mf->time_s + mb->time_s);
    e += M * (mf->energy_j + mb->energy_j);
  }
  double t = makespan(st, F, B, fin);
  st->allmax_time = t;
  st->allmax_energy = e + st->bp_used * (S * t - busy);
}

static json_t *point_json(const perseus *st, long p) {
  char name[64];
  plan_name(p, name, sizeof name);
  return json_pack("{sIsssoso}", "point", (json_int_t)p, "plan_file", name, "eval_time_s", jnum(st->pt_time[p]),
                   "eval_energy_j", jnum(st->pt_energy[p]));
}

/* Moves pipelines to `points` (one per pipeline), recording the deployment and its reason. */
static void deploy(perseus *st, const long *points, const char *reason) {
  bool change = false;
  for (int d = 0; d < st->D; d++) change |= st->pipes[d].point != points[d];
  if (!change) return;
  json_t *pl = json_array();
  for (int d = 0; d < st->D; d++) {
    st->pipes[d].point = points[d];
    write_plan(st, points[d]);
    json_t *o = point_json(st, points[d]);
    json_object_set_new(o, "dp", json_integer(d));
    json_object_set_new(o, "straggler", json_boolean(st->pipes[d].slow));
    json_array_append_new(pl, o);
  }
  st->ndeployments++;
  json_t *dep = json_pack("{sIsIsIsOss}", "deployment", (json_int_t)st->ndeployments, "from_round",
                          (json_int_t)st->round, "time_unix_s", (json_int_t)time(NULL), "pipelines", pl, "reason",
                          reason);
  push_capped(st->deployments, dep, &st->deployments_dropped);
  char which[256] = "";
  for (int d = 0; d < st->D && strlen(which) < 200; d++) {
    char one[48];
    snprintf(one, sizeof one, "%spipeline %d -> point %ld", d ? ", " : "", d, points[d]);
    strncat(which, one, sizeof which - strlen(which) - 1);
  }
  event(st, "deploy", json_pack("{sIso}", "deployment", (json_int_t)st->ndeployments, "pipelines", pl),
        ZEUS_LOG_INFO, "deployment %zu (%s): %s", st->ndeployments, which, reason);
}

static double pct(double a, double b) { return 100.0 * (a - b) / b; }

/* Chooses the base plan after the solve and deploys it to every pipeline. */
static void deploy_base(perseus *st) {
  double tmin;
  int nfast;
  long fast = pick_fastest(st, &tmin, &nfast), p = fast;
  char rs[1024], cmp[256] = "";
  if (isfinite(st->allmax_time))
    snprintf(cmp, sizeof cmp, "; every GPU at its highest clock: %.4f s and %.1f J", st->allmax_time,
             st->allmax_energy);
  if (st->mode == MODE_FASTEST) {
    snprintf(rs, sizeof rs,
             "least energy at the fastest iteration time: %.1f J at %.4f s, the least of the %d plan%s within one "
             "time unit (%g s) of the fastest %.4f s%s (%+.1f %% energy, %+.2f %% time)",
             st->pt_energy[p], st->pt_time[p], nfast, nfast == 1 ? "" : "s", st->unit_s, tmin, cmp,
             pct(st->pt_energy[p], st->allmax_energy), pct(st->pt_time[p], st->allmax_time));
  } else {
    double T = st->mode == MODE_TARGET ? st->target_s : tmin * st->max_slowdown;
    char what[160];
    if (st->mode == MODE_TARGET) snprintf(what, sizeof what, "target_time_s %.4f s", st->target_s);
    else snprintf(what, sizeof what, "max_slowdown %g x the fastest %.4f s = %.4f s", st->max_slowdown, tmin, T);
    int nc;
    long q = pick_below(st, T, false, &nc);
    if (q < 0) {
      snprintf(rs, sizeof rs, "no plan meets %s (the fastest takes %.4f s): the fastest plan, %.1f J at %.4f s%s", what,
               tmin, st->pt_energy[p], st->pt_time[p], cmp);
    } else {
      p = q;
      snprintf(rs, sizeof rs, "least energy within %s: %.1f J at %.4f s, the least of %d plan%s%s (%+.1f %% energy, "
               "%+.2f %% time)", what, st->pt_energy[p], st->pt_time[p], nc, nc == 1 ? "" : "s", cmp,
               pct(st->pt_energy[p], st->allmax_energy), pct(st->pt_time[p], st->allmax_time));
    }
  }
  st->base = p;
  snprintf(st->base_reason, sizeof st->base_reason, "%s", rs);
  long *pts = malloc((size_t)st->D * sizeof *pts);
  if (!pts) return;
  for (int d = 0; d < st->D; d++) pts[d] = p;
  st->phase = P_DEPLOYED;
  deploy(st, pts, rs);
  free(pts);
}

/* Straggler following, once per round after the base plan is deployed. `measured`: whether this
 * round's measurements were taken on the deployed plans (not on the round of the first deploy). */
static void follow(perseus *st, bool measured) {
  double tb = st->pt_time[st->base];
  for (int d = 0; d < st->D; d++) {
    pipe *p = &st->pipes[d];
    bool was = p->slow;
    double ratio;
    if (p->declared_s > 0) {
      ratio = p->declared_s / tb;
      p->natural_s = p->declared_s;
      p->slow = ratio > 1 + st->tol_enter;
      p->over = p->under = 0;
    } else if (measured && p->have && p->point >= 0) {
      double t = isfinite(p->own_s) ? p->own_s : p->iter_s;
      ratio = t / st->pt_time[p->point];
      if (!isfinite(ratio)) continue;
      p->natural_s = ratio * tb;
      if (p->slow) {
        p->under = ratio <= 1 + st->tol_exit ? p->under + 1 : 0;
        if (p->under >= st->hold) p->slow = false, p->under = 0;
      } else {
        p->over = ratio > 1 + st->tol_enter ? p->over + 1 : 0;
        if (p->over >= st->hold) p->slow = true, p->over = 0;
      }
    } else {
      continue;
    }
    p->ratio = ratio;
    if (p->slow && !was)
      event(st, "straggler",
            json_pack("{sisoso}", "dp", d, "natural_time_s", jnum(p->natural_s), "slowdown", jnum(ratio)),
            ZEUS_LOG_WARN, "pipeline %d is a straggler: %.4f s per iteration (%s), %.3f x its plan's time", d,
            p->natural_s, p->declared_s > 0 ? "declared" : "measured", ratio);
    else if (!p->slow && was)
      event(st, "recovered",
            json_pack("{sisoso}", "dp", d, "natural_time_s", jnum(p->natural_s), "slowdown", jnum(ratio)),
            ZEUS_LOG_INFO, "pipeline %d has recovered: %.3f x its plan's time (%s)", d, ratio,
            p->declared_s > 0 ? "declared" : "measured");
  }
  double Tstar = -1;
  int who = -1;
  for (int d = 0; d < st->D; d++)
    if (st->pipes[d].slow && isfinite(st->pipes[d].natural_s) && st->pipes[d].natural_s > Tstar)
      Tstar = st->pipes[d].natural_s, who = d;
  long *pts = malloc((size_t)st->D * sizeof *pts);
  if (!pts) return;
  char rs[1024] = "";
  int nslow = 0;
  for (int d = 0; d < st->D; d++) nslow += st->pipes[d].slow;
  if (who < 0) {
    for (int d = 0; d < st->D; d++) pts[d] = st->base;
    if (st->following)
      snprintf(rs, sizeof rs, "no pipeline is slower than its plan by more than recovery_tolerance %g: every pipeline "
               "returns to the base plan (%s)", st->tol_exit, st->base_reason);
    st->following = false;
  } else {
    bool retarget = !st->following || fabs(Tstar - st->target_follow) > st->tol_retarget * st->target_follow;
    if (retarget) {
      if (st->following)
        event(st, "retarget", json_pack("{soso}", "from_s", jnum(st->target_follow), "to_s", jnum(Tstar)),
              ZEUS_LOG_INFO, "the slowest straggler now runs at %.4f s per iteration (followed: %.4f s)", Tstar,
              st->target_follow);
      st->target_follow = Tstar;
      st->following = true;
    }
    double T = st->target_follow;
    int nc;
    long q = pick_below(st, T, true, &nc);
    if (q < 0) q = st->base;
    double wait_e = st->pt_energy[q] + st->bp_used * st->S * (T - st->pt_time[q]);
    double base_e = st->pt_energy[st->base] + st->bp_used * st->S * (T - tb);
    for (int d = 0; d < st->D; d++) pts[d] = st->pipes[d].slow ? st->base : q;
    snprintf(
        rs, sizeof rs,
        "pipeline %d runs at %.4f s per iteration (%s, %.3f x the base plan's %.4f s): the other pipelines move to "
        "the least energy at that time counting the blocking power while they wait: point %ld, %.1f J at %.4f s, "
        "%.1f J per iteration with the wait against %.1f J on the base plan (%+.1f %%); %s the base plan",
        who, T, st->pipes[who].declared_s > 0 ? "declared" : "measured", T / tb, tb, q, st->pt_energy[q],
        st->pt_time[q], wait_e, base_e, pct(wait_e, base_e),
        nslow == 1 ? "the straggler keeps" : "the stragglers keep");
  }
  deploy(st, pts, rs);
  free(pts);
}

/* ---- profiling done: build the stage profile and queue the solve ---- */

/* A stage measured at a clock for one instruction but not the other (a round whose results
 * lacked it) is no failure: the solver plans each instruction over the clocks it has. The gaps
 * are an event, so that a user sees why a clock is never chosen. */
static bool has_clock(const zeus_pfo_freq_measure *v, size_t n, int mhz) {
  for (size_t i = 0; i < n; i++)
    if (v[i].frequency_mhz == mhz) return true;
  return false;
}

static void note_profile_gaps(perseus *st) {
  enum { SHOWN = 8, KEPT = 256 };
  json_t *gaps = json_array();
  zeus__buf b = {0};
  size_t n = 0;
  for (int s = 0; s < st->S; s++) {
    const zeus_pfo_offline_result *u = zeus__profiling_unit(st->prof, (size_t)s);
    for (int k = 0; k < 2; k++) { /* k = 0: forward rows without a backward; 1: the reverse */
      const zeus_pfo_freq_measure *have = k ? u->backward : u->forward, *other = k ? u->forward : u->backward;
      size_t nhave = k ? u->n_backward : u->n_forward, nother = k ? u->n_forward : u->n_backward;
      const char *missing = k ? "forward" : "backward";
      for (size_t i = 0; i < nhave; i++) {
        if (has_clock(other, nother, have[i].frequency_mhz)) continue;
        if (n < KEPT && gaps)
          json_array_append_new(gaps, json_pack("{sisssi}", "stage", s, "instruction", missing, "frequency_mhz",
                                                have[i].frequency_mhz));
        if (n < SHOWN)
          zeus__buf_printf(&b, "%sstage %d %s at %d MHz", n ? ", " : "", s, missing, have[i].frequency_mhz);
        n++;
      }
    }
  }
  if (n)
    event(st, "profile_incomplete", json_pack("{sIso}", "missing", (json_int_t)n, "gaps", gaps ? gaps : json_null()),
          ZEUS_LOG_WARN,
          "the profile lacks %zu measurement%s (%s%s): the rounds that profiled %s had no such "
          "instruction in their results; the solver plans %s only at the clocks measured",
          n, n == 1 ? "" : "s", b.data ? b.data : "", n > SHOWN ? ", ..." : "", n == 1 ? "it" : "them",
          n == 1 ? "that instruction" : "those instructions");
  else
    json_decref(gaps);
  zeus__buf_free(&b);
}

static void start_solve(perseus *st) {
  for (int s = 0; s < st->S; s++) {
    const zeus_pfo_offline_result *u = zeus__profiling_unit(st->prof, (size_t)s);
    if (!u->n_forward || !u->n_backward) {
      char msg[512];
      snprintf(msg, sizeof msg, "the profile of pipeline stage %d has no %s measurement (its ranks' results had no "
               "'%s' in time_breakdown and energy_breakdown): the solver needs both", s,
               !u->n_forward ? "forward" : "backward", !u->n_forward ? "forward" : "backward");
      fail(st, "profile_failed", msg);
      return;
    }
  }
  note_profile_gaps(st);
  if (st->bp_arg >= 0) {
    st->bp_used = st->bp_arg;
    st->bp_source = "argument";
  } else if (st->nbp) {
    double *v = malloc(st->nbp * sizeof *v);
    if (!v) {
      fail(st, "profile_failed", "out of memory while measuring the blocking power");
      return;
    }
    memcpy(v, st->bp, st->nbp * sizeof *v);
    qsort(v, st->nbp, sizeof *v, cmp_double);
    st->bp_used = st->nbp % 2 ? v[st->nbp / 2] : (v[st->nbp / 2 - 1] + v[st->nbp / 2]) / 2;
    st->bp_source = "measured";
    free(v);
  } else {
    fail(st, "profile_failed", "cannot measure the GPU power while blocked: the ranks' results show no idle time "
         "outside their instructions (give the scheduler argument blocking_power_w)");
    return;
  }
  zeus_frontier_profile *fp = NULL;
  char name[240];
  snprintf(name, sizeof name, "Perseus profile of job %s", st->job_id);
  int rc = zeus_frontier_profile_new(&fp, name);
  for (int s = 0; s < st->S && !rc; s++) {
    const zeus_pfo_offline_result *u = zeus__profiling_unit(st->prof, (size_t)s);
    for (size_t i = 0; i < u->n_forward && !rc; i++)
      rc = zeus_frontier_profile_add(fp, s, ZEUS_FRONTIER_FORWARD, u->forward[i].frequency_mhz, u->forward[i].time_s,
                                     u->forward[i].energy_j);
    for (size_t i = 0; i < u->n_backward && !rc; i++)
      rc = zeus_frontier_profile_add(fp, s, ZEUS_FRONTIER_BACKWARD, u->backward[i].frequency_mhz, u->backward[i].time_s,
                                     u->backward[i].energy_j);
  }
  if (rc) {
    zeus_frontier_profile_free(fp);
    char msg[1200];
    snprintf(msg, sizeof msg, "the measured profile is unusable: %s", zeus_errmsg());
    fail(st, "profile_failed", msg);
    return;
  }
  eval_allmax(st);
  zeus_frontier_opts o;
  zeus_frontier_opts_init(&o);
  o.stages = st->S, o.microbatches = st->M, o.blocking_power_w = st->bp_used, o.unit_time_s = st->unit_s;
  o.cost_model = st->cost_model;
  o.allow_fewer_microbatches = true; /* M comes from the ranks' own schedules, not a typed argument */
  char label[260];
  snprintf(label, sizeof label, "job %s", st->job_id);
  if ((rc = zeus__solver_pool_submit(st->pool, fp, &o, st->max_solve_s, label, &st->task))) {
    char msg[1200];
    snprintf(msg, sizeof msg, "cannot queue the frontier solve: %s", zeus_errmsg());
    fail(st, "solve_failed", msg);
    return;
  }
  st->phase = P_SOLVING;
  size_t done, max;
  zeus__profiling_progress(st->prof, &done, &max);
  event(st, "solve_queued",
        json_pack("{sososi}", "blocking_power_w", jnum(st->bp_used), "blocking_power_source",
                  json_string(st->bp_source), "profile_steps", (int)done),
        ZEUS_LOG_INFO,
        "profiled %zu clock steps over %d stages; blocking power %.3f W (%s); solving the frontier of %d "
        "stages x %d microbatches on a solver thread while the ranks train at their highest clocks",
        done, st->S, st->bp_used, st->bp_source, st->S, st->M);
}

/* Takes a finished solve: deploys its base plan, or records the failure. */
static void collect_solve(perseus *st) {
  zeus__solve_result r;
  if (!zeus__solve_take(st->task, &r)) return;
  zeus__solve_release(st->task);
  st->task = NULL;
  st->solve_s = r.solve_s;
  st->queued_s = r.queued_s;
  if (r.rc) {
    char msg[1200];
    snprintf(msg, sizeof msg, "the frontier solve failed after %.3f s: %s", r.solve_s, r.errmsg);
    zeus__solve_result_clear(&r);
    fail(st, "solve_failed", msg);
    return;
  }
  st->f = r.frontier;
  r.frontier = NULL;
  st->csv = r.csv;
  st->svg = r.svg;
  r.csv = r.svg = NULL;
  snprintf(st->artifact_error, sizeof st->artifact_error, "%s", r.artifact_error);
  zeus__solve_result_clear(&r);
  if (st->csv) write_file(st, "frontier.csv", st->csv, strlen(st->csv));
  if (st->svg) write_file(st, "frontier.svg", st->svg, strlen(st->svg));
  st->npts = zeus_frontier_num_points(st->f);
  st->solve_points = st->npts;
  st->pt_time = malloc(st->npts * sizeof *st->pt_time);
  st->pt_energy = malloc(st->npts * sizeof *st->pt_energy);
  st->written = calloc(st->npts, 1);
  if (!st->pt_time || !st->pt_energy || !st->written) {
    fail(st, "solve_failed", "out of memory while taking the frontier");
    return;
  }
  for (size_t i = 0; i < st->npts; i++) {
    zeus_frontier_point pt;
    zeus_frontier_get_point(st->f, i, &pt);
    st->pt_time[i] = pt.eval_time_s;
    st->pt_energy[i] = pt.eval_energy_j;
  }
  event(st, "solved", json_pack("{sisoso}", "points", (int)st->npts, "solve_s", jnum(st->solve_s), "queued_s",
                                jnum(st->queued_s)),
        ZEUS_LOG_INFO, "frontier solved: %zu points in %.3f s%s%s", st->npts, st->solve_s,
        st->artifact_error[0] ? "; " : "", st->artifact_error);
  deploy_base(st);
}

/* A failure never fails the job: the round it happens in returns 0, so the next schedule (every
 * GPU at its highest clock) is installed; later rounds return 1 and that schedule stays. */
static int perseus_observe(void *state, const zeus_pfo_prof_result *res, size_t n) {
  perseus *st = state;
  if (st->phase == P_FAILED) return 1;
  st->round++;
  measure(st, res, n);
  switch (st->phase) {
    case P_PROFILING: {
      if (zeus__profiling_observe(st->prof, st->samples)) {
        char msg[1200];
        snprintf(msg, sizeof msg, "profiling stopped: %s", zeus_errmsg());
        zeus__profiling_stop(st->prof);
        dump_profile(st);
        fail(st, "profile_failed", msg);
        return 0;
      }
      if (zeus__profiling_phase(st->prof) == 2) {
        dump_profile(st); /* once, at the end: GET /profile.csv serves it while it grows */
        start_solve(st);
      }
      return 0;
    }
    case P_SOLVING:
      collect_solve(st);
      if (st->phase == P_DEPLOYED) follow(st, false);
      return 0;
    default: /* P_DEPLOYED */
      follow(st, true);
      return 0;
  }
}

/* ---- status and routes ---- */

static json_t *status_json(const perseus *st, bool full) {
  size_t done, max;
  zeus__profiling_progress(st->prof, &done, &max);
  json_t *o = json_object();
  json_object_set_new(o, "scheduler", json_string("Perseus"));
  json_object_set_new(o, "job_id", json_string(st->job_id));
  json_object_set_new(o, "phase", json_string(phase_names[st->phase]));
  json_object_set_new(o, "rounds_observed", json_integer(st->round));
  json_object_set_new(o, "error", st->error[0] ? json_string(st->error) : json_null());
  json_object_set_new(o, "stages", json_integer(st->S));
  json_object_set_new(o, "microbatches", json_integer(st->M));
  json_object_set_new(o, "pipelines_dp", json_integer(st->D));
  json_object_set_new(o, "tp_degree", json_integer(st->T));
  json_object_set_new(o, "profiling", json_pack("{sIsIsIsIsI}", "steps_done", (json_int_t)done, "steps_max",
                                                 (json_int_t)max, "warmup_iters", (json_int_t)st->warmup_iters,
                                                 "min_frequency", (json_int_t)st->min_frequency, "patience",
                                                 (json_int_t)st->patience));
  json_object_set_new(o, "blocking_power_w", st->bp_source ? jnum(st->bp_used) : json_null());
  json_object_set_new(o, "blocking_power_source", st->bp_source ? json_string(st->bp_source) : json_null());
  json_object_set_new(o, "blocking_power_samples", json_integer((json_int_t)st->nbp));
  json_t *solve = json_object();
  if (st->task) {
    double el;
    size_t pts;
    zeus__solve_state ss = zeus__solve_poll(st->task, &el, &pts);
    json_object_set_new(solve, "state",
                        json_string(ss == ZEUS__SOLVE_QUEUED    ? "queued"
                                    : ss == ZEUS__SOLVE_RUNNING ? "running"
                                                                : "done"));
    json_object_set_new(solve, "elapsed_s", jnum(el));
    json_object_set_new(solve, "points_so_far", json_integer((json_int_t)pts));
  } else {
    json_object_set_new(solve, "state", st->f ? json_string("done") : json_null());
  }
  json_object_set_new(solve, "solve_s", st->f ? jnum(st->solve_s) : json_null());
  json_object_set_new(solve, "queued_s", st->f ? jnum(st->queued_s) : json_null());
  json_object_set_new(solve, "points", st->f ? json_integer((json_int_t)st->npts) : json_null());
  json_object_set_new(solve, "artifact_error", st->artifact_error[0] ? json_string(st->artifact_error) : json_null());
  json_object_set_new(o, "solve", solve);
  json_object_set_new(o, "options",
                      json_pack("{sssosososssososososIso}", "mode", mode_names[st->mode], "target_time_s",
                                jnum(st->target_s), "max_slowdown", jnum(st->max_slowdown), "unit_time_s",
                                jnum(st->unit_s), "cost_model",
                                st->cost_model == ZEUS_FRONTIER_COST_HULL ? "hull" : "exponential",
                                "straggler_tolerance", jnum(st->tol_enter), "recovery_tolerance", jnum(st->tol_exit),
                                "retarget_tolerance", jnum(st->tol_retarget), "blocking_power_w",
                                st->bp_arg >= 0 ? jnum(st->bp_arg) : json_null(), "straggler_rounds",
                                (json_int_t)st->hold, "max_solve_s", jnum(st->max_solve_s)));
  json_object_set_new(o, "all_max", json_pack("{soso}", "eval_time_s", jnum(st->allmax_time), "eval_energy_j",
                                               jnum(st->allmax_energy)));
  if (st->base >= 0) {
    json_t *b = point_json(st, st->base);
    json_object_set_new(b, "reason", json_string(st->base_reason));
    json_object_set_new(o, "base_plan", b);
  } else {
    json_object_set_new(o, "base_plan", json_null());
  }
  json_object_set_new(o, "following", json_boolean(st->following));
  json_object_set_new(o, "following_time_s", st->following ? jnum(st->target_follow) : json_null());
  json_t *pl = json_array();
  for (int d = 0; d < st->D; d++) {
    const pipe *p = &st->pipes[d];
    json_t *x = p->point >= 0 ? point_json(st, p->point)
                              : json_pack("{snsnsnsn}", "point", "plan_file", "eval_time_s", "eval_energy_j");
    json_object_set_new(x, "dp", json_integer(d));
    json_object_set_new(x, "straggler", json_boolean(p->slow));
    json_object_set_new(x, "declared_time_s", p->declared_s > 0 ? jnum(p->declared_s) : json_null());
    json_object_set_new(x, "measured_own_time_s", p->have ? jnum(p->own_s) : json_null());
    json_object_set_new(x, "measured_iter_time_s", p->have ? jnum(p->iter_s) : json_null());
    json_object_set_new(x, "measured_iter_energy_j", p->have ? jnum(p->energy_j) : json_null());
    json_object_set_new(x, "slowdown", p->point >= 0 && p->ratio > 0 ? jnum(p->ratio) : json_null());
    json_array_append_new(pl, x);
  }
  json_object_set_new(o, "pipelines", pl);
  json_object_set_new(o, "deployments", json_integer((json_int_t)st->ndeployments));
  json_object_set_new(o, "dump_dir", st->dir ? json_string(st->dir) : json_null());
  json_object_set_new(o, "dump_error", st->dump_error[0] ? json_string(st->dump_error) : json_null());
  json_object_set_new(o, "routes", json_pack("[sssssss]", "GET /perseus/{job_id}", "GET /perseus/{job_id}/profile.csv",
                                             "GET /perseus/{job_id}/frontier.csv", "GET /perseus/{job_id}/frontier.svg",
                                             "GET /perseus/{job_id}/plans[/<point>]", "GET /perseus/{job_id}/events",
                                             "POST /perseus/{job_id}/straggler"));
  if (full) {
    json_object_set(o, "deployment_log", st->deployments);
    json_object_set_new(o, "deployments_dropped", json_integer((json_int_t)st->deployments_dropped));
    json_object_set(o, "events", st->events);
    json_object_set_new(o, "events_dropped", json_integer((json_int_t)st->events_dropped));
  }
  return o;
}

static int reply_json(zeus__sched_route_reply *out, json_t *v) {
  zeus_json_round_by_unit(v); /* each figure at its resolution (docs/output.md) */
  char *text = v ? zeus_json_dumps(v, JSON_INDENT(2)) : NULL;
  json_decref(v);
  if (!text) return zeus__sched_route_error(out, 500, "out of memory");
  out->status = 200;
  out->len = strlen(text);
  out->body = malloc(out->len + 2);
  if (!out->body) {
    zeus_free(text);
    return zeus__sched_route_error(out, 500, "out of memory");
  }
  memcpy(out->body, text, out->len);
  out->body[out->len++] = '\n';
  out->body[out->len] = '\0';
  zeus_free(text);
  return 200;
}

static int reply_text(zeus__sched_route_reply *out, const char *text, size_t len, const char *type) {
  out->body = malloc(len + 1);
  if (!out->body) return zeus__sched_route_error(out, 500, "out of memory");
  memcpy(out->body, text, len);
  out->body[len] = '\0';
  out->len = len;
  out->status = 200;
  out->content_type = type;
  return 200;
}

static int not_solved(const perseus *st, zeus__sched_route_reply *out) {
  if (st->phase == P_FAILED)
    return zeus__sched_route_error(out, 409, "Perseus has no frontier: %s", st->error);
  size_t done, max;
  zeus__profiling_progress(st->prof, &done, &max);
  return zeus__sched_route_error(out, 409, "the frontier is not solved yet (phase %s; %zu of at most %zu clock steps "
                                 "profiled)", phase_names[st->phase], done, max);
}

static int post_straggler(perseus *st, const char *body, size_t len, zeus__sched_route_reply *out) {
  json_t *v;
  if (zeus__json_parse(body, len, "straggler declaration", &v))
    return zeus__sched_route_error(out, 400, "%s", zeus_errmsg());
  int status = 0;
  const char *key;
  json_t *val;
  if (!json_is_object(v)) status = zeus__sched_route_error(out, 400, "straggler declaration: expected a JSON object "
                                                           "{\"dp\": <pipeline>, \"iter_time_s\": <seconds or null>}");
  else
    json_object_foreach(v, key, val) if (strcmp(key, "dp") && strcmp(key, "iter_time_s")) {
      status = zeus__sched_route_error(out, 400, "straggler declaration: unknown field '%s' (fields: dp, iter_time_s)",
                                       key);
      break;
    }
  json_t *dp = json_object_get(v, "dp"), *t = json_object_get(v, "iter_time_s");
  if (!status && !json_is_integer(dp))
    status = zeus__sched_route_error(out, 400, "straggler declaration: field 'dp' must be the data-parallel rank of "
                                     "a pipeline, an integer");
  else if (!status && (json_integer_value(dp) < 0 || json_integer_value(dp) >= st->D))
    status = zeus__sched_route_error(out, 400, "straggler declaration: pipeline %lld does not exist: the job has %d "
                                     "data-parallel pipeline%s (dp 0..%d)", (long long)json_integer_value(dp), st->D,
                                     st->D == 1 ? "" : "s", st->D - 1);
  else if (!status && !json_is_null(t) && !(json_is_number(t) && json_number_value(t) > 0 &&
                                              json_number_value(t) <= 1e6))
    status = zeus__sched_route_error(out, 400, "straggler declaration: field 'iter_time_s' must be the pipeline's "
                                     "iteration time in seconds (> 0, at most 1e6), or null to withdraw the "
                                     "declaration; got %s", t ? zeus__json_type_name(t) : "nothing");
  else if (!status && st->phase == P_FAILED)
    status = zeus__sched_route_error(out, 409, "Perseus has no plans to adapt: %s", st->error);
  if (status) {
    json_decref(v);
    return status;
  }
  int d = (int)json_integer_value(dp);
  double T = json_is_null(t) ? 0 : json_number_value(t);
  st->pipes[d].declared_s = T;
  if (T > 0)
    event(st, "declared", json_pack("{siso}", "dp", d, "iter_time_s", jnum(T)), ZEUS_LOG_INFO,
          "pipeline %d declared to run at %.4f s per iteration (applies from the next round%s)", d, T,
          st->phase == P_DEPLOYED ? "" : ", once a plan is deployed");
  else
    event(st, "declaration_withdrawn", json_pack("{si}", "dp", d), ZEUS_LOG_INFO,
          "pipeline %d's declaration withdrawn: its measured time counts again from the next round", d);
  json_decref(v);
  return reply_json(out, json_pack("{sisoss}", "dp", d, "declared_time_s", T > 0 ? jnum(T) : json_null(), "applies",
                                   st->phase == P_DEPLOYED ? "from the next round" : "once a plan is deployed"));
}

static int perseus_route(void *state, const char *method, const char *path, const char *body, size_t len,
                         zeus__sched_route_reply *out) {
  perseus *st = state;
  bool get = strcmp(method, "GET") == 0;
  if (strcmp(path, "/straggler") == 0) {
    if (strcmp(method, "POST") == 0) return post_straggler(st, body, len, out);
    if (!get) goto method;
    json_t *a = json_array();
    for (int d = 0; d < st->D; d++)
      json_array_append_new(
          a, json_pack("{sisososb}", "dp", d, "declared_time_s",
                       st->pipes[d].declared_s > 0 ? jnum(st->pipes[d].declared_s) : json_null(), "natural_time_s",
                       jnum(st->pipes[d].natural_s), "straggler", st->pipes[d].slow));
    return reply_json(out, a);
  }
  if (!get) goto method;
  if (!*path || strcmp(path, "/") == 0) return reply_json(out, status_json(st, false));
  if (strcmp(path, "/events") == 0)
    return reply_json(out, json_pack("{sOsI}", "events", st->events, "dropped", (json_int_t)st->events_dropped));
  if (strcmp(path, "/plans") == 0)
    return reply_json(out, json_pack("{sOsI}", "deployments", st->deployments, "dropped",
                                     (json_int_t)st->deployments_dropped));
  if (strcmp(path, "/profile.csv") == 0) {
    zeus__buf b = {0};
    if (profile_csv(st, &b)) {
      zeus__buf_free(&b);
      return zeus__sched_route_error(out, 500, "%s", zeus_errmsg());
    }
    int rc = reply_text(out, b.data, b.len, "text/csv");
    zeus__buf_free(&b);
    return rc;
  }
  if (strcmp(path, "/frontier.csv") == 0) {
    if (!st->f) return not_solved(st, out);
    if (!st->csv)
      return zeus__sched_route_error(out, 500, "the frontier's CSV could not be made: %s", st->artifact_error);
    return reply_text(out, st->csv, strlen(st->csv), "text/csv");
  }
  if (strcmp(path, "/frontier.svg") == 0) {
    if (!st->f) return not_solved(st, out);
    if (!st->svg)
      return zeus__sched_route_error(out, 404, "the frontier picture was not made: %s",
                                     st->artifact_error[0] ? st->artifact_error : "the job has no dump folder");
    return reply_text(out, st->svg, strlen(st->svg), "image/svg+xml");
  }
  if (strncmp(path, "/plans/", 7) == 0) {
    if (!st->f) return not_solved(st, out);
    const char *p = path + 7;
    if (strncmp(p, "freqs_pipeline_", 15) == 0) p += 15;
    char *end;
    long i = strtol(p, &end, 10);
    if (end == p || (*end && strcmp(end, ".py")) || i < 0 || (size_t)i >= st->npts)
      return zeus__sched_route_error(out, 404, "no plan '%s': the frontier has points 0..%zu (ask for /plans/<point> "
                                     "or /plans/freqs_pipeline_<point>.py)", path + 7, st->npts - 1);
    char *text;
    if (zeus_frontier_plan_text(st->f, (size_t)i, &text)) return zeus__sched_route_error(out, 500, "%s", zeus_errmsg());
    int rc = reply_text(out, text, strlen(text), "text/x-python");
    zeus_free(text);
    return rc;
  }
  return zeus__sched_route_error(out, 404, "Perseus has no route '%s' (routes: /perseus/{job_id}, /profile.csv, "
                                 "/frontier.csv, /frontier.svg, /plans, /plans/<point>, /events, /straggler)", path);
method:
  out->allow = strcmp(path, "/straggler") == 0 ? "GET, POST" : "GET";
  return zeus__sched_route_error(out, 405, "method %s is not allowed on /perseus/{job_id}%s (allowed: %s)", method,
                                 path, out->allow);
}

const zeus__sched_ops zeus__sched_perseus = {
    "Perseus", perseus_params, perseus_check, perseus_create, perseus_next, perseus_observe, perseus_destroy,
    perseus_route, true,
    true, /* perseus.json and the plans it deploys, dumps or not */
};
