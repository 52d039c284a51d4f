/* InstructionProfiler(warmup_iters, min_frequency, num_microbatches, patience):
 *   round 0      every rank at its highest frequency; results discarded (GPU warm-up);
 *   then         each stage steps down through its frequencies (>= min_frequency), one per round;
 *                the first warmup_iters iterations of every result are dropped, the rest averaged
 *                into time and energy per (stage, instruction, frequency); the instruction CSV is
 *                rewritten in the job's dump folder after every step; a stage stops once its
 *                energy (forward + backward) has risen for `patience` (default 5) consecutive
 *                frequencies, or when its frequencies run out; a stopped stage runs at its
 *                highest frequency;
 *   finally      when every stage has stopped, all ranks run at their highest frequency forever. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pfo_server/sched.h"

typedef struct {
  zeus_pfo_rank_info info;
  const char **order;
  size_t norder;
  int *freqs; /* descending, >= min_frequency */
  size_t nfreqs, idx;
  int rises;
  double last_energy;
  bool done;
  zeus_pfo_offline_result prof;
} prof_rank;

typedef struct {
  prof_rank *r;
  size_t n;
  long warmup_iters;
  long patience;
  int phase; /* 0 warm-up, 1 profiling, 2 final */
  char *csv_path;
} prof_state;

static const zeus__sched_param prof_params[] = {
    {"warmup_iters", ZEUS__ARG_INT, true},
    {"min_frequency", ZEUS__ARG_INT, false},
    {"num_microbatches", ZEUS__ARG_INT, false},
    {"patience", ZEUS__ARG_INT, false},
    {NULL, 0, false},
};

static int prof_check(const json_t *args) {
  if (json_integer_value(json_object_get(args, "warmup_iters")) < 0)
    return zeus__error(ZEUS_EINVAL, "InstructionProfiler: warmup_iters must be >= 0");
  json_t *p = json_object_get(args, "patience");
  if (p && json_integer_value(p) < 1)
    return zeus__error(ZEUS_EINVAL, "InstructionProfiler: patience must be >= 1");
  return ZEUS_OK;
}

static int cmp_desc(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (y > x) - (y < x);
}

static void prof_destroy(void *state) {
  prof_state *st = state;
  for (size_t i = 0; i < st->n; i++) {
    zeus_pfo_rank_info_clear(&st->r[i].info);
    free(st->r[i].order);
    free(st->r[i].freqs);
    zeus_pfo_offline_result_clear(&st->r[i].prof);
  }
  free(st->r);
  free(st->csv_path);
  free(st);
}

static int prof_create(void **state, const zeus__sched_ctx *ctx, const json_t *args) {
  int rc = prof_check(args);
  if (rc) return rc;
  long nmb = (long)json_integer_value(json_object_get(args, "num_microbatches"));
  long minf = (long)json_integer_value(json_object_get(args, "min_frequency"));
  json_t *pat = json_object_get(args, "patience");
  prof_state *st = calloc(1, sizeof *st);
  if (!st || !(st->r = calloc(ctx->n_ranks + 1, sizeof *st->r))) {
    free(st);
    return zeus__oom("creating InstructionProfiler");
  }
  st->warmup_iters = (long)json_integer_value(json_object_get(args, "warmup_iters"));
  st->patience = pat ? (long)json_integer_value(pat) : 5;
  if (ctx->job_dump_dir) {
    zeus__buf b = {0};
    if (zeus__buf_printf(&b, "%s/instruction_profile.csv", ctx->job_dump_dir)) {
      prof_destroy(st);
      return zeus__oom("creating InstructionProfiler");
    }
    st->csv_path = b.data;
  }
  for (size_t i = 0; i < ctx->n_ranks && !rc; i++) {
    prof_rank *pr = &st->r[st->n];
    if ((rc = zeus__pfo_rank_info_copy(&ctx->ranks[i], &pr->info))) break;
    st->n++;
    if ((rc = zeus__pfo_instruction_order(ctx->job, &pr->info, nmb, &pr->order, &pr->norder))) break;
    pr->freqs = malloc(pr->info.n_available_frequencies * sizeof(int));
    if (!pr->freqs) { rc = zeus__oom("creating InstructionProfiler"); break; }
    memcpy(pr->freqs, pr->info.available_frequencies, pr->info.n_available_frequencies * sizeof(int));
    qsort(pr->freqs, pr->info.n_available_frequencies, sizeof(int), cmp_desc);
    size_t k = 0;
    for (size_t j = 0; j < pr->info.n_available_frequencies; j++)
      if (pr->freqs[j] >= minf && (k == 0 || pr->freqs[k - 1] != pr->freqs[j])) pr->freqs[k++] = pr->freqs[j];
    if (k == 0)
      rc = zeus__error(ZEUS_EINVAL, "InstructionProfiler: rank %d has no frequency >= min_frequency %ld",
                       pr->info.rank, minf);
    pr->nfreqs = k;
    pr->prof.rank = pr->info.rank;
    pr->prof.dp_rank = pr->info.dp_rank;
    pr->prof.pp_rank = pr->info.pp_rank;
    pr->prof.tp_rank = pr->info.tp_rank;
    pr->prof.forward = calloc(k + 1, sizeof *pr->prof.forward);
    pr->prof.backward = calloc(k + 1, sizeof *pr->prof.backward);
    if (!rc && (!pr->prof.forward || !pr->prof.backward)) rc = zeus__oom("creating InstructionProfiler");
  }
  if (!rc && ctx->job_dump_dir) rc = zeus__mkdirs(ctx->job_dump_dir);
  if (rc) { prof_destroy(st); return rc; }
  *state = st;
  return ZEUS_OK;
}

static int prof_next(void *state, zeus_pfo_schedule **out, size_t *n) {
  prof_state *st = state;
  zeus_pfo_schedule *v = calloc(st->n + 1, sizeof *v);
  if (!v) return zeus__oom("building a profiling schedule");
  for (size_t i = 0; i < st->n; i++) {
    prof_rank *pr = &st->r[i];
    int f = (st->phase == 1 && !pr->done) ? pr->freqs[pr->idx] : pr->freqs[0];
    if (st->phase != 1 || pr->done) {
      f = pr->info.available_frequencies[0];
      for (size_t j = 1; j < pr->info.n_available_frequencies; j++)
        if (pr->info.available_frequencies[j] > f) f = pr->info.available_frequencies[j];
    }
    v[i].rank = pr->info.rank;
    v[i].frequencies = calloc(pr->norder + 1, sizeof *v[i].frequencies);
    if (!v[i].frequencies) { zeus_pfo_schedules_free(v, i + 1); return zeus__oom("building a profiling schedule"); }
    for (size_t j = 0; j < pr->norder; j++) {
      v[i].frequencies[j].frequency_mhz = f;
      if (!(v[i].frequencies[j].instruction = zeus__strdup(pr->order[j]))) {
        zeus_pfo_schedules_free(v, i + 1);
        return zeus__oom("building a profiling schedule");
      }
      v[i].n_frequencies++;
    }
  }
  *out = v;
  *n = st->n;
  return ZEUS_OK;
}

/* Mean of the values of iterations [skip, n_iters) (all iterations when there are too few). */
static bool bd_mean(const zeus_pfo_breakdown *bd, size_t nbd, const char *inst, long skip, double *out) {
  for (size_t i = 0; i < nbd; i++) {
    if (strcmp(bd[i].instruction, inst)) continue;
    size_t from = (size_t)skip < bd[i].n_iters ? (size_t)skip : 0;
    size_t a = bd[i].offsets[from], b = bd[i].offsets[bd[i].n_iters];
    if (b <= a) return false;
    double s = 0;
    for (size_t j = a; j < b; j++) s += bd[i].values[j];
    *out = s / (double)(b - a);
    return true;
  }
  return false;
}

static int prof_write_csv(prof_state *st) {
  if (!st->csv_path) return ZEUS_OK;
  zeus_pfo_offline_result *v = malloc((st->n + 1) * sizeof *v);
  if (!v) return zeus__oom("writing the instruction CSV");
  for (size_t i = 0; i < st->n; i++) v[i] = st->r[i].prof;
  int rc = zeus_pfo_write_instruction_csv(st->csv_path, v, st->n);
  free(v);
  return rc;
}

static int prof_observe(void *state, const zeus_pfo_prof_result *res, size_t n) {
  prof_state *st = state;
  if (st->phase == 0) { st->phase = 1; return 0; }
  if (st->phase == 2) return 1;
  bool all_done = true;
  for (size_t i = 0; i < st->n; i++) {
    prof_rank *pr = &st->r[i];
    if (pr->done) continue;
    const zeus_pfo_prof_result *r = NULL;
    for (size_t j = 0; j < n; j++) if (res[j].rank == pr->info.rank) { r = &res[j]; break; }
    if (!r) return zeus__error(ZEUS_EINVAL, "InstructionProfiler: no result for rank %d", pr->info.rank);
    int f = pr->freqs[pr->idx];
    double energy = 0;
    bool any = false;
    static const char *const insts[] = {"forward", "backward"};
    for (size_t k = 0; k < 2; k++) {
      double t, e;
      if (!bd_mean(r->time_breakdown, r->n_time_breakdown, insts[k], st->warmup_iters, &t) ||
          !bd_mean(r->energy_breakdown, r->n_energy_breakdown, insts[k], st->warmup_iters, &e))
        continue;
      zeus_pfo_freq_measure *m = k == 0 ? &pr->prof.forward[pr->prof.n_forward++]
                                        : &pr->prof.backward[pr->prof.n_backward++];
      m->frequency_mhz = f;
      m->time_s = t;
      m->energy_j = e;
      energy += e;
      any = true;
    }
    if (!any)
      return zeus__error(ZEUS_EINVAL, "InstructionProfiler: rank %d's result has no forward or backward "
                         "measurements in time_breakdown and energy_breakdown", r->rank);
    if (pr->idx > 0 && energy > pr->last_energy) pr->rises++;
    else pr->rises = 0;
    pr->last_energy = energy;
    pr->idx++;
    if (pr->rises >= st->patience || pr->idx >= pr->nfreqs) pr->done = true;
    if (!pr->done) all_done = false;
  }
  int rc = prof_write_csv(st);
  if (rc) return rc;
  if (all_done) st->phase = 2;
  return 0;
}

const zeus__sched_ops zeus__sched_instruction_profiler = {
    "InstructionProfiler", prof_params, prof_check, prof_create, prof_next, prof_observe, prof_destroy,
};
