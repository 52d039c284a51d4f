/* PointSolution(solution_path): serves one frequency plan (lowtime's output or JSON), then
 * keeps serving it. The plan is parsed, never evaluated. */
#include <stdlib.h>
#include <string.h>

#include "pfo_server/sched.h"

typedef struct {
  zeus_pfo_schedule *plan;
  size_t n;
} point_state;

static const zeus__sched_param point_params[] = {
    {"solution_path", ZEUS__ARG_STRING, true},
    {NULL, 0, false},
};

static int point_check(const json_t *args) {
  const char *path = json_string_value(json_object_get(args, "solution_path"));
  zeus_pfo_schedule *plan;
  size_t n;
  int rc = zeus_pfo_parse_plan_file(path, &plan, &n);
  if (rc) return zeus__error_ctx(rc, "PointSolution: solution_path");
  zeus_pfo_schedules_free(plan, n);
  return ZEUS_OK;
}

/* Every planned frequency must be one the rank's GPU supports: a plan made for another GPU model
 * would otherwise fail only in the client, at its first instruction. */
static int check_plan_frequencies(const char *path, const zeus_pfo_schedule *plan, size_t n,
                                  const zeus__sched_ctx *ctx) {
  for (size_t i = 0; i < n && i < ctx->n_ranks; i++) {
    const zeus_pfo_rank_info *ri = &ctx->ranks[i];
    for (size_t k = 0; k < plan[i].n_frequencies; k++) {
      int f = plan[i].frequencies[k].frequency_mhz;
      int nearest = ri->available_frequencies[0];
      bool found = false;
      for (size_t a = 0; a < ri->n_available_frequencies && !found; a++) {
        int av = ri->available_frequencies[a];
        found = av == f;
        if (abs(av - f) < abs(nearest - f)) nearest = av;
      }
      if (!found)
        return zeus__error(ZEUS_EINVAL,
                           "solution file '%s': entry %zu (rank %d), instruction %zu ('%s') asks for %d MHz, "
                           "which is not one of the rank's available frequencies (nearest: %d MHz); was the "
                           "plan made for another GPU?",
                           path, i, ri->rank, k, plan[i].frequencies[k].instruction, f, nearest);
    }
  }
  return ZEUS_OK;
}

static int point_create(void **state, const zeus__sched_ctx *ctx, const json_t *args) {
  const char *path = json_string_value(json_object_get(args, "solution_path"));
  point_state *st = calloc(1, sizeof *st);
  if (!st) return zeus__oom("creating PointSolution");
  int rc = zeus_pfo_parse_plan_file(path, &st->plan, &st->n);
  if (!rc && st->n != (size_t)ctx->job->world_size)
    rc = zeus__error(ZEUS_EINVAL, "solution file '%s' assumes %zu ranks, but the job has %d%s", path,
                     st->n, ctx->job->world_size,
                     ctx->job->dp_degree * ctx->job->tp_degree > 1 ? " (use PointSolution3D to give "
                                                                       "one entry per pipeline stage)" : "");
  if (!rc) rc = check_plan_frequencies(path, st->plan, st->n, ctx);
  if (rc) { zeus_pfo_schedules_free(st->plan, st->n); free(st); return rc; }
  *state = st;
  return ZEUS_OK;
}

static int point_next(void *state, zeus_pfo_schedule **out, size_t *n) {
  point_state *st = state;
  return zeus__pfo_schedules_copy(st->plan, st->n, out, n);
}

static int point_observe(void *state, const zeus_pfo_prof_result *r, size_t n) { return 1; }

static void point_destroy(void *state) {
  point_state *st = state;
  zeus_pfo_schedules_free(st->plan, st->n);
  free(st);
}

const zeus__sched_ops zeus__sched_point_solution = {
    "PointSolution", point_params, point_check, point_create, point_next, point_observe, point_destroy, NULL, false,
    false, /* writes no files */
};
