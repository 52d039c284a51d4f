/* The scheduler table (looked up by name, "<name>3D" wraps for 3D parallelism) and the
 * driver that runs one scheduler for one job: it caches the current schedule and serves the
 * last one forever once the scheduler says it is finished. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pfo_server/sched.h"
#include "zeus/format.h"
#include "zeus/pfo_server.h"

static const zeus__sched_ops *const sched_table[] = {
    &zeus__sched_point_solution,
    &zeus__sched_all_max,
    &zeus__sched_instruction_profiler,
    &zeus__sched_perseus,
};

#define NSCHED ZEUS__ARRAY_LEN(sched_table)

/* The public list: every scheduler's name, then every name with the 3D suffix, built once from
 * the table (the one place a scheduler is listed). */
static const char *g_names[2 * NSCHED + 1];
static char g_names3d[NSCHED][64];
static pthread_once_t g_names_once = PTHREAD_ONCE_INIT;

static void build_names(void) {
  size_t k = NSCHED;
  for (size_t i = 0; i < NSCHED; i++) {
    g_names[i] = sched_table[i]->name;
    if (sched_table[i]->native_3d) continue;
    snprintf(g_names3d[i], sizeof g_names3d[i], "%s3D", sched_table[i]->name);
    g_names[k++] = g_names3d[i];
  }
}

const char *const *zeus_pfo_scheduler_names(void) {
  pthread_once(&g_names_once, build_names);
  return g_names;
}

int zeus__sched_lookup(const char *name, const zeus__sched_ops **ops, bool *wrap3d) {
  size_t len = name ? strlen(name) : 0;
  bool w = len > 2 && strcmp(name + len - 2, "3D") == 0;
  for (size_t i = 0; name && i < NSCHED; i++) {
    const char *n = sched_table[i]->name;
    if ((!w && strcmp(n, name) == 0) || (w && strlen(n) == len - 2 && !strncmp(n, name, len - 2))) {
      if (w && sched_table[i]->native_3d)
        return zeus__error(ZEUS_EINVAL, "there is no scheduler '%s': %s handles data and tensor parallelism "
                           "itself (use '%s')", name, n, n);
      *ops = sched_table[i];
      *wrap3d = w;
      return ZEUS_OK;
    }
  }
  zeus__buf known = {0};
  for (size_t i = 0; i < NSCHED; i++) zeus__buf_printf(&known, "%s, ", sched_table[i]->name);
  int rc = zeus__error(ZEUS_EINVAL, "unknown scheduler '%s' (expected %sor one of them with the suffix 3D)",
                       name ? name : "", known.data ? known.data : "");
  zeus__buf_free(&known);
  return rc;
}

static const char *arg_type_name(zeus__arg_type t) {
  switch (t) {
    case ZEUS__ARG_INT: return "an integer";
    case ZEUS__ARG_NUMBER: return "a number";
    case ZEUS__ARG_STRING: return "a string";
    case ZEUS__ARG_BOOL: return "a boolean";
  }
  return "?";
}

int zeus__sched_check(const zeus__sched_ops *ops, const json_t *args) {
  if (args && !json_is_object(args))
    return zeus__error(ZEUS_EINVAL, "scheduler arguments of %s: expected a JSON object, got %s",
                       ops->name, zeus__json_type_name(args));
  const char *key;
  json_t *val;
  if (args) {
    json_object_foreach((json_t *)args, key, val) {
      const zeus__sched_param *p = ops->params;
      while (p->name && strcmp(p->name, key)) p++;
      if (!p->name) {
        zeus__buf b = {0};
        for (p = ops->params; p->name; p++) zeus__buf_printf(&b, "%s%s", p == ops->params ? "" : ", ", p->name);
        int rc = zeus__error(ZEUS_EINVAL, "scheduler %s has no argument '%s' (its arguments: %s)",
                             ops->name, key, b.data ? b.data : "none");
        zeus__buf_free(&b);
        return rc;
      }
      bool ok = (p->type == ZEUS__ARG_INT && json_is_integer(val)) ||
                (p->type == ZEUS__ARG_NUMBER && json_is_number(val)) ||
                (p->type == ZEUS__ARG_STRING && json_is_string(val)) ||
                (p->type == ZEUS__ARG_BOOL && json_is_boolean(val));
      if (!ok)
        return zeus__error(ZEUS_EINVAL, "scheduler %s: argument '%s' must be %s, got %s", ops->name,
                           key, arg_type_name(p->type), zeus__json_type_name(val));
    }
  }
  for (const zeus__sched_param *p = ops->params; p->name; p++)
    if (p->required && !(args && json_object_get(args, p->name)))
      return zeus__error(ZEUS_EINVAL, "scheduler %s needs the argument '%s' (%s)", ops->name, p->name,
                         arg_type_name(p->type));
  return ops->check_args ? ops->check_args(args) : ZEUS_OK;
}

int zeus_pfo_check_scheduler(const char *name, const char *args_json) {
  const zeus__sched_ops *ops;
  bool w;
  int rc = zeus__sched_lookup(name, &ops, &w);
  if (rc) return rc;
  json_t *args = NULL;
  if (args_json && *args_json && (rc = zeus__json_parse(args_json, strlen(args_json), "scheduler arguments", &args)))
    return rc;
  rc = zeus__sched_check(ops, args);
  json_decref(args);
  return rc;
}

struct zeus__sched {
  const zeus__sched_ops *ops;
  void *state;
  bool wrap3d, finished;
  zeus_pfo_job_info job; /* degrees only; strings not owned */
  zeus_pfo_rank_info *ranks;
  size_t n;
  zeus_pfo_schedule *cur; /* world schedule, index = rank */
  size_t ncur;
};

static int cmp_rank(const void *a, const void *b) {
  const zeus_pfo_rank_info *x = a, *y = b;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Asks the scheduler for its next schedule and installs it as the world schedule. */
static int advance(zeus__sched *s) {
  zeus_pfo_schedule *sc = NULL, *full = NULL;
  size_t nsc = 0, nfull = 0;
  int rc = s->ops->next(s->state, &sc, &nsc);
  if (rc) return rc;
  if (s->wrap3d) {
    rc = zeus__sched3d_expand(s->ranks, s->n, sc, nsc, &full, &nfull);
    zeus_pfo_schedules_free(sc, nsc);
    if (rc) return rc;
  } else {
    full = sc;
    nfull = nsc;
  }
  /* Index by rank; every rank must get exactly one schedule. */
  size_t w = (size_t)s->job.world_size;
  zeus_pfo_schedule *byrank = calloc(w, sizeof *byrank);
  if (!byrank) { zeus_pfo_schedules_free(full, nfull); return zeus__oom("installing a schedule"); }
  for (size_t i = 0; i < nfull && !rc; i++) {
    int r = full[i].rank;
    if (r < 0 || (size_t)r >= w || byrank[r].frequencies)
      rc = zeus__error(ZEUS_EINTERNAL, "scheduler %s gave a schedule for rank %d twice or out of range",
                       s->ops->name, r);
    else { byrank[r] = full[i]; memset(&full[i], 0, sizeof full[i]); }
  }
  for (size_t r = 0; r < w && !rc; r++)
    if (!byrank[r].frequencies)
      rc = zeus__error(ZEUS_EINTERNAL, "scheduler %s gave no schedule for rank %zu", s->ops->name, r);
  zeus_pfo_schedules_free(full, nfull);
  if (rc) { zeus_pfo_schedules_free(byrank, w); return rc; }
  zeus_pfo_schedules_free(s->cur, s->ncur);
  s->cur = byrank;
  s->ncur = w;
  return ZEUS_OK;
}

int zeus__sched_create(zeus__sched **out, const char *name, const json_t *args,
                       const zeus_pfo_job_info *job, const zeus_pfo_rank_info *ranks, size_t n,
                       const zeus__pfo_dump_loc *dump, bool dump_data, struct zeus__solver_pool *pool) {
  zeus__sched *s = calloc(1, sizeof *s);
  if (!s) return zeus__oom("creating a scheduler");
  int rc = zeus__sched_lookup(name, &s->ops, &s->wrap3d);
  if (!rc) rc = zeus__sched_check(s->ops, args);
  if (rc) { free(s); return rc; }
  s->job = *job;
  s->job.job_id = NULL;
  s->job.job_metadata = NULL;
  s->ranks = calloc(n + 1, sizeof *s->ranks);
  if (!s->ranks) { free(s); return zeus__oom("creating a scheduler"); }
  for (size_t i = 0; i < n && !rc; i++)
    if (!(rc = zeus__pfo_rank_info_copy(&ranks[i], &s->ranks[i]))) s->n++;
  if (rc) { zeus__sched_destroy(s); return rc; }
  qsort(s->ranks, s->n, sizeof *s->ranks, cmp_rank);
  zeus__sched_ctx ctx = {job, s->ranks, s->n, dump ? dump->path : NULL, dump, dump_data, job->job_id, pool};
  zeus_pfo_job_info vjob;
  zeus_pfo_rank_info *vranks = NULL;
  size_t vn = 0;
  if (s->wrap3d) {
    if ((rc = zeus__sched3d_view(job, s->ranks, s->n, &vjob, &vranks, &vn))) { zeus__sched_destroy(s); return rc; }
    ctx.job = &vjob;
    ctx.ranks = vranks;
    ctx.n_ranks = vn;
  }
  rc = s->ops->create(&s->state, &ctx, args);
  zeus_pfo_ranks_free(vranks, vn);
  if (!rc) rc = advance(s);
  if (rc) {
    zeus__error_ctx(rc, "scheduler %s", name);
    zeus__sched_destroy(s);
    return rc;
  }
  *out = s;
  return ZEUS_OK;
}

int zeus__sched_current(zeus__sched *s, const zeus_pfo_schedule **out, size_t *n) {
  *out = s->cur;
  *n = s->ncur;
  return ZEUS_OK;
}

int zeus__sched_observe(zeus__sched *s, const zeus_pfo_prof_result *results, size_t n) {
  if (s->finished) return ZEUS_OK;
  zeus_pfo_prof_result *agg = NULL;
  size_t nagg = 0;
  int rc;
  if (s->wrap3d) {
    if ((rc = zeus__sched3d_aggregate(&s->job, s->ranks, s->n, results, n, &agg, &nagg))) return rc;
    rc = s->ops->observe(s->state, agg, nagg);
    zeus_pfo_prof_results_free(agg, nagg);
  } else {
    rc = s->ops->observe(s->state, results, n);
  }
  if (rc < 0) return zeus__error_ctx(rc, "scheduler %s", s->ops->name);
  if (rc == 1) { s->finished = true; return ZEUS_OK; }
  rc = advance(s);
  return rc ? zeus__error_ctx(rc, "scheduler %s", s->ops->name) : ZEUS_OK;
}

bool zeus__sched_finished(const zeus__sched *s) { return s->finished; }

const char *zeus__sched_name(const zeus__sched *s) { return s->ops->name; }

int zeus__sched_route_error(zeus__sched_route_reply *out, int status, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  json_t *o = json_pack("{ss}", "detail", msg);
  out->status = status;
  out->body = o ? zeus_json_dumps(o, JSON_COMPACT) : NULL;
  out->len = out->body ? strlen(out->body) : 0;
  out->content_type = NULL;
  json_decref(o);
  return status;
}

int zeus__sched_route(zeus__sched *s, const char *method, const char *path, const char *body, size_t len,
                      zeus__sched_route_reply *out) {
  if (!s->ops->route)
    return zeus__sched_route_error(out, 404, "the job's scheduler %s%s has no routes under /perseus/{job_id} "
                                   "(only the Perseus scheduler has)", s->ops->name, s->wrap3d ? "3D" : "");
  return s->ops->route(s->state, method, path, body, len, out);
}

void zeus__sched_destroy(zeus__sched *s) {
  if (!s) return;
  if (s->state) s->ops->destroy(s->state);
  zeus_pfo_ranks_free(s->ranks, s->n);
  zeus_pfo_schedules_free(s->cur, s->ncur);
  free(s);
}
