/* InstructionProfiler(warmup_iters, min_frequency, num_microbatches, patience):
 *   round 0      every rank at its highest frequency; results discarded (GPU warm-up);
 *   then         each stage steps down through its frequencies (>= min_frequency), one per round;
 *                the first warmup_iters iterations of every result are dropped, the rest averaged
 *                into time and energy per (stage, instruction, frequency); the instruction CSV is
 *                rewritten in the job's dump folder after every step; a stage stops once its
 *                energy (forward + backward) has risen for `patience` (default 5) consecutive
 *                frequencies, or when its frequencies run out; a stopped stage runs at its
 *                highest frequency;
 *   finally      when every stage has stopped, all ranks run at their highest frequency forever.
 * The stepping itself is the profiler shared with Perseus (profiling.c). */
#include <stdlib.h>
#include <string.h>

#include "pfo_server/sched.h"

typedef struct {
  const char **order;
  size_t norder;
  int rank;
} prof_rank;

typedef struct {
  prof_rank *r;
  size_t n;
  zeus__profiling *prof;
  zeus__prof_sample *samples;
  long warmup_iters;
  const zeus__pfo_dump_loc *dump; /* where instruction_profile.csv goes; NULL: nowhere */
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

static void prof_destroy(void *state) {
  prof_state *st = state;
  for (size_t i = 0; i < st->n; i++) free(st->r[i].order);
  free(st->r);
  zeus__profiling_destroy(st->prof);
  free(st->samples);
  free(st);
}

static int prof_create(void **state, const zeus__sched_ctx *ctx, const json_t *args) {
  int rc = prof_check(args);
  if (rc) return rc;
  long nmb = (long)json_integer_value(json_object_get(args, "num_microbatches"));
  long minf = (long)json_integer_value(json_object_get(args, "min_frequency"));
  json_t *pat = json_object_get(args, "patience");
  prof_state *st = calloc(1, sizeof *st);
  if (!st || !(st->r = calloc(ctx->n_ranks + 1, sizeof *st->r)) ||
      !(st->samples = calloc(ctx->n_ranks + 1, sizeof *st->samples))) {
    if (st) free(st->r);
    free(st);
    return zeus__oom("creating InstructionProfiler");
  }
  st->warmup_iters = (long)json_integer_value(json_object_get(args, "warmup_iters"));
  st->dump = ctx->dump;
  for (size_t i = 0; i < ctx->n_ranks && !rc; i++) {
    prof_rank *pr = &st->r[st->n++];
    pr->rank = ctx->ranks[i].rank;
    rc = zeus__pfo_instruction_order(ctx->job, &ctx->ranks[i], nmb, &pr->order, &pr->norder);
  }
  if (!rc)
    rc = zeus__profiling_create(&st->prof, "InstructionProfiler", ctx->ranks, ctx->n_ranks, minf,
                                pat ? (long)json_integer_value(pat) : 5);
  if (rc) {
    prof_destroy(st);
    return rc;
  }
  *state = st;
  return ZEUS_OK;
}

static int prof_next(void *state, zeus_pfo_schedule **out, size_t *n) {
  prof_state *st = state;
  zeus_pfo_schedule *v = calloc(st->n + 1, sizeof *v);
  if (!v) return zeus__oom("building a profiling schedule");
  for (size_t i = 0; i < st->n; i++) {
    prof_rank *pr = &st->r[i];
    int f = zeus__profiling_frequency(st->prof, i);
    v[i].rank = pr->rank;
    v[i].frequencies = calloc(pr->norder + 1, sizeof *v[i].frequencies);
    if (!v[i].frequencies) {
      zeus_pfo_schedules_free(v, i + 1);
      return zeus__oom("building a profiling schedule");
    }
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

static int prof_observe(void *state, const zeus_pfo_prof_result *res, size_t n) {
  prof_state *st = state;
  int phase = zeus__profiling_phase(st->prof);
  if (phase == 2) return 1;
  if (phase == 1) {
    static const char *const insts[] = {"forward", "backward"};
    for (size_t i = 0; i < st->n; i++) {
      const zeus_pfo_prof_result *r = NULL;
      for (size_t j = 0; j < n; j++)
        if (res[j].rank == st->r[i].rank) {
          r = &res[j];
          break;
        }
      if (!r) return zeus__error(ZEUS_EINVAL, "InstructionProfiler: no result for rank %d", st->r[i].rank);
      zeus__prof_sample *s = &st->samples[i];
      for (int k = 0; k < 2; k++)
        s->have[k] = zeus__pfo_breakdown_mean(r->time_breakdown, r->n_time_breakdown, insts[k], st->warmup_iters,
                                              &s->time_s[k]) &&
                     zeus__pfo_breakdown_mean(r->energy_breakdown, r->n_energy_breakdown, insts[k],
                                              st->warmup_iters, &s->energy_j[k]);
    }
  }
  int rc = zeus__profiling_observe(st->prof, st->samples);
  if (!rc && phase == 1 && st->dump)
    rc = zeus__profiling_write_csv(st->prof, st->dump, "instruction_profile.csv");
  return rc;
}

const zeus__sched_ops zeus__sched_instruction_profiler = {
    "InstructionProfiler", prof_params, prof_check, prof_create, prof_next, prof_observe, prof_destroy, NULL, false,
    true, /* instruction_profile.csv, dumps or not */
};
