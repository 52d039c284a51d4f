/* AllMaxFrequency: every instruction at the rank's highest frequency. Also the instruction
 * order shared by schedulers: a rank's pipe_schedule, or synchronous 1F1B (zeus/pipeline.h). */
#include <stdlib.h>
#include <string.h>

#include "pfo_server/sched.h"
#include "zeus/pipeline.h"

int zeus__pfo_instruction_order(const zeus_pfo_job_info *job, const zeus_pfo_rank_info *rank,
                                long nmb, const char ***out, size_t *n) {
  if (rank->pipe_schedule && rank->n_pipe_schedule) {
    const char **v = malloc(rank->n_pipe_schedule * sizeof *v);
    if (!v) return zeus__oom("building the instruction order");
    for (size_t i = 0; i < rank->n_pipe_schedule; i++) v[i] = rank->pipe_schedule[i];
    *out = v;
    *n = rank->n_pipe_schedule;
    return ZEUS_OK;
  }
  if (nmb <= 0)
    return zeus__error(ZEUS_EINVAL, "rank %d sent no pipe_schedule, and the scheduler argument "
                       "'num_microbatches' is not set: one of them is needed for the order of "
                       "instructions", rank->rank);
  if (nmb > 100000) return zeus__error(ZEUS_EINVAL, "num_microbatches %ld is too large", nmb);
  const char **v = malloc((size_t)(2 * nmb) * sizeof *v);
  if (!v) return zeus__oom("building the instruction order");
  for (int k = 0; k < 2 * (int)nmb; k++) {
    zeus_pipeline_instr kind;
    int rc = zeus_pipeline_1f1b_instr(job->pp_degree, rank->pp_rank, (int)nmb, k, &kind, NULL);
    if (rc) { free(v); return rc; }
    v[k] = zeus_pipeline_instr_name(kind);
  }
  *out = v;
  *n = (size_t)(2 * nmb);
  return ZEUS_OK;
}

typedef struct {
  zeus_pfo_schedule *s;
  size_t n;
} allmax_state;

static const zeus__sched_param allmax_params[] = {
    {"num_microbatches", ZEUS__ARG_INT, false},
    {NULL, 0, false},
};

static int allmax_create(void **state, const zeus__sched_ctx *ctx, const json_t *args) {
  long nmb = (long)json_integer_value(json_object_get(args, "num_microbatches"));
  allmax_state *st = calloc(1, sizeof *st);
  if (!st || !(st->s = calloc(ctx->n_ranks + 1, sizeof *st->s))) {
    free(st);
    return zeus__oom("creating AllMaxFrequency");
  }
  int rc = ZEUS_OK;
  for (size_t i = 0; i < ctx->n_ranks && !rc; i++) {
    const zeus_pfo_rank_info *r = &ctx->ranks[i];
    const char **order;
    size_t no;
    if ((rc = zeus__pfo_instruction_order(ctx->job, r, nmb, &order, &no))) break;
    int fmax = r->available_frequencies[0];
    for (size_t j = 1; j < r->n_available_frequencies; j++)
      if (r->available_frequencies[j] > fmax) fmax = r->available_frequencies[j];
    zeus_pfo_schedule *s = &st->s[st->n++];
    s->rank = r->rank;
    s->frequencies = calloc(no + 1, sizeof *s->frequencies);
    if (!s->frequencies) rc = zeus__oom("creating AllMaxFrequency");
    for (size_t j = 0; j < no && !rc; j++) {
      s->frequencies[j].frequency_mhz = fmax;
      if (!(s->frequencies[j].instruction = zeus__strdup(order[j]))) rc = zeus__oom("creating AllMaxFrequency");
      else s->n_frequencies++;
    }
    free(order);
  }
  if (rc) { zeus_pfo_schedules_free(st->s, st->n); free(st); return rc; }
  *state = st;
  return ZEUS_OK;
}

static int allmax_next(void *state, zeus_pfo_schedule **out, size_t *n) {
  allmax_state *st = state;
  return zeus__pfo_schedules_copy(st->s, st->n, out, n);
}

static int allmax_observe(void *state, const zeus_pfo_prof_result *r, size_t n) { return 1; }

static void allmax_destroy(void *state) {
  allmax_state *st = state;
  zeus_pfo_schedules_free(st->s, st->n);
  free(st);
}

const zeus__sched_ops zeus__sched_all_max = {
    "AllMaxFrequency", allmax_params, NULL, allmax_create, allmax_next, allmax_observe, allmax_destroy, NULL, false,
    false, /* writes no files */
};
