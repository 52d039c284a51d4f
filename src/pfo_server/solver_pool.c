/* The Perseus server's solver threads: a fixed set of workers, a bounded FIFO of reference-counted
 * solve tasks. One mutex guards the queue and every task's shared fields; the solve itself runs
 * without it. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "pfo_server/solver_pool.h"
#include "zeus/format.h"

/* How much nicer than the server's other threads a solver thread runs. */
#define ZEUS__SOLVER_NICE 10

struct zeus__solve {
  struct zeus__solve *next; /* queue link */
  zeus__solver_pool *pool;
  int refs; /* the caller's and the pool's */
  zeus__solve_state state;
  bool taken;
  atomic_bool cancel;
  atomic_size_t points;
  bool timed_out; /* set by the solving thread only */
  double stopped_at_s, fastest_s;
  double queued_at, started_at, max_seconds;
  zeus_frontier_profile *profile;
  zeus_frontier_opts opts;
  char label[160];
  zeus__solve_result res;
};

struct zeus__solver_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t *th;
  int nth;
  zeus__solve *head, *tail;
  size_t queued, max_queued;
  bool closing;
};

void zeus__solve_result_clear(zeus__solve_result *r) {
  if (!r) return;
  zeus_frontier_free(r->frontier);
  zeus_free(r->csv);
  free(r->svg);
  memset(r, 0, sizeof *r);
}

static void task_free(zeus__solve *t) {
  zeus_frontier_profile_free(t->profile);
  zeus__solve_result_clear(&t->res);
  free(t);
}

/* Drops one reference (pool lock held); frees the task with the last. */
static void unref_locked(zeus__solve *t) {
  if (--t->refs == 0) task_free(t);
}

/* Makes frontier.csv's and frontier.svg's texts (the scheduler writes them where it may). The
 * picture is drawn into a private temporary folder (mkdtemp: mode 0700, a name no one else can
 * pick), read back and removed. A failure is noted in the result, never fatal. */
static void make_artifacts(zeus__solve *t) {
  zeus__solve_result *r = &t->res;
  if (zeus_frontier_csv(r->frontier, NULL, &r->csv)) {
    snprintf(r->artifact_error, sizeof r->artifact_error, "frontier.csv: %s", zeus_errmsg());
    return;
  }
  const char *base = getenv("TMPDIR");
  zeus__buf dir = {0}, path = {0};
  size_t len;
  int rc = zeus__buf_printf(&dir, "%s/zeus-frontier-XXXXXX", base && *base ? base : "/tmp");
  if (!rc && !mkdtemp(dir.data))
    rc = zeus__error(ZEUS_EIO, "cannot make a temporary folder for frontier.svg: %s", strerror(errno));
  if (!rc) rc = zeus__buf_printf(&path, "%s/frontier.svg", dir.data);
  if (!rc) rc = zeus_frontier_write_plot_svg(r->frontier, path.data, NULL);
  if (!rc) rc = zeus__read_file(path.data, &r->svg, &len);
  if (rc) snprintf(r->artifact_error, sizeof r->artifact_error, "frontier.svg: %s", zeus_errmsg());
  if (path.data) unlink(path.data);
  if (dir.data) rmdir(dir.data);
  zeus__buf_free(&dir);
  zeus__buf_free(&path);
}

/* After every point: counts it, and stops the solve once its caller gave it up or its time is
 * up (a cut-short frontier lacks the fast plans, so it is reported as a failure). */
static int progress(const zeus_frontier_progress *pr, void *ctx) {
  zeus__solve *t = ctx;
  atomic_store(&t->points, pr->points);
  if (atomic_load(&t->cancel)) return 1;
  if (t->max_seconds > 0 && zeus_monotonic_s() - t->started_at > t->max_seconds) {
    t->timed_out = true;
    t->stopped_at_s = pr->time_s;
    t->fastest_s = pr->fastest_time_s;
    return 1;
  }
  return 0;
}

static void run(zeus__solve *t) {
  zeus__solve_result *r = &t->res;
  double t0 = zeus_monotonic_s();
  r->queued_s = t0 - t->queued_at;
  t->opts.progress = progress;
  t->opts.progress_ctx = t;
  int rc = zeus_frontier_solve(&r->frontier, t->profile, &t->opts);
  r->solve_s = zeus_monotonic_s() - t0;
  if (!rc && t->timed_out) {
    rc = zeus__error(ZEUS_ETIMEDOUT, "the solve passed its limit of %g s (max_solve_s) after %zu points, at %.4f s "
                     "of iteration time with the fastest at %.4f s; a coarser unit_time_s or fewer microbatches "
                     "solve faster", t->max_seconds, zeus_frontier_num_points(r->frontier), t->stopped_at_s,
                     t->fastest_s);
    zeus_frontier_free(r->frontier);
  } else if (!rc && atomic_load(&t->cancel)) {
    rc = zeus__error(ZEUS_ESTATE, "the solve was given up by its job");
    zeus_frontier_free(r->frontier);
  }
  r->rc = rc;
  if (rc) {
    snprintf(r->errmsg, sizeof r->errmsg, "%s", zeus_errmsg());
    r->frontier = NULL;
    zeus__log(ZEUS_LOG_WARN, "perseus", "%s: the frontier solve failed after %.3f s: %s", t->label, r->solve_s,
              r->errmsg);
    return;
  }
  atomic_store(&t->points, zeus_frontier_num_points(r->frontier));
  zeus__log(ZEUS_LOG_INFO, "perseus", "%s: frontier solved in %.3f s (%zu points, %.3f s queued)", t->label,
            r->solve_s, zeus_frontier_num_points(r->frontier), r->queued_s);
  make_artifacts(t);
}

static void *worker(void *arg) {
  zeus__solver_pool *p = arg;
  /* Solves yield the CPU to the HTTP threads: on a busy machine a rank's request must not wait for
   * a time slice behind a solve (Linux: nice applies per thread; lowering it needs no privilege). */
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), ZEUS__SOLVER_NICE) != 0)
    zeus__log(ZEUS_LOG_DEBUG, "perseus", "cannot lower the solver thread's priority: %s", strerror(errno));
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->head && !p->closing) pthread_cond_wait(&p->cv, &p->mu);
    if (!p->head) break; /* closing and nothing left */
    zeus__solve *t = p->head;
    p->head = t->next;
    if (!p->head) p->tail = NULL;
    p->queued--;
    t->next = NULL;
    t->state = ZEUS__SOLVE_RUNNING;
    t->started_at = zeus_monotonic_s();
    pthread_mutex_unlock(&p->mu);
    if (!atomic_load(&t->cancel)) run(t);
    else t->res.rc = zeus__error(ZEUS_ESTATE, "the solve was cancelled before it started");
    pthread_mutex_lock(&p->mu);
    t->state = ZEUS__SOLVE_DONE;
    unref_locked(t);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int zeus__solver_pool_open(zeus__solver_pool **out, int threads, size_t max_queued) {
  if (threads < 1 || threads > 16) return zeus__error(ZEUS_EINVAL, "solver threads %d is outside 1..16", threads);
  zeus__solver_pool *p = calloc(1, sizeof *p);
  if (!p || !(p->th = calloc((size_t)threads, sizeof *p->th))) {
    free(p);
    return zeus__oom("starting the solver threads");
  }
  p->max_queued = max_queued ? max_queued : 1;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  for (int i = 0; i < threads; i++) {
    if (pthread_create(&p->th[i], NULL, worker, p) != 0) {
      int e = errno;
      zeus__solver_pool_close(p);
      return zeus__error(ZEUS_ENOMEM, "cannot start a solver thread: %s", strerror(e));
    }
    p->nth++;
  }
  *out = p;
  return ZEUS_OK;
}

void zeus__solver_pool_close(zeus__solver_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->closing = true;
  while (p->head) { /* drop what waits; tasks the schedulers hold stay until released */
    zeus__solve *t = p->head;
    p->head = t->next;
    t->next = NULL;
    t->state = ZEUS__SOLVE_DONE;
    t->res.rc = ZEUS_ESTATE;
    snprintf(t->res.errmsg, sizeof t->res.errmsg, "the server is shutting down");
    unref_locked(t);
  }
  p->tail = NULL;
  p->queued = 0;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nth; i++) pthread_join(p->th[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->th);
  free(p);
}

int zeus__solver_pool_submit(zeus__solver_pool *p, zeus_frontier_profile *profile, const zeus_frontier_opts *opts,
                             double max_seconds, const char *label, zeus__solve **out) {
  zeus__solve *t = calloc(1, sizeof *t);
  if (!t) {
    zeus_frontier_profile_free(profile);
    return zeus__oom("queueing a frontier solve");
  }
  t->profile = profile;
  t->opts = *opts;
  t->max_seconds = max_seconds;
  t->pool = p;
  t->refs = 2;
  snprintf(t->label, sizeof t->label, "%s", label ? label : "solve");
  pthread_mutex_lock(&p->mu);
  int rc = ZEUS_OK;
  if (p->closing) rc = zeus__error(ZEUS_ESTATE, "the server is shutting down");
  else if (p->queued >= p->max_queued)
    rc = zeus__error(ZEUS_ERANGE, "%zu frontier solves are already waiting for the server's %d solver thread%s",
                     p->queued, p->nth, p->nth == 1 ? "" : "s");
  if (rc) {
    pthread_mutex_unlock(&p->mu);
    task_free(t);
    return rc;
  }
  t->queued_at = zeus_monotonic_s();
  if (p->tail) p->tail->next = t;
  else p->head = t;
  p->tail = t;
  p->queued++;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  *out = t;
  return ZEUS_OK;
}

zeus__solve_state zeus__solve_poll(zeus__solve *t, double *elapsed_s, size_t *points) {
  pthread_mutex_lock(&t->pool->mu);
  zeus__solve_state st = t->state;
  double q = t->queued_at;
  pthread_mutex_unlock(&t->pool->mu);
  if (elapsed_s) *elapsed_s = zeus_monotonic_s() - q;
  if (points) *points = atomic_load(&t->points);
  return st;
}

bool zeus__solve_take(zeus__solve *t, zeus__solve_result *out) {
  pthread_mutex_lock(&t->pool->mu);
  bool ok = t->state == ZEUS__SOLVE_DONE && !t->taken;
  if (ok) {
    *out = t->res;
    memset(&t->res, 0, sizeof t->res);
    t->taken = true;
  }
  pthread_mutex_unlock(&t->pool->mu);
  return ok;
}

void zeus__solve_release(zeus__solve *t) {
  if (!t) return;
  zeus__solver_pool *p = t->pool;
  pthread_mutex_lock(&p->mu);
  atomic_store(&t->cancel, true);
  if (t->state == ZEUS__SOLVE_QUEUED && !p->closing) { /* still waiting: take it out of the queue */
    zeus__solve **pp = &p->head, *prev = NULL;
    while (*pp && *pp != t) prev = *pp, pp = &(*pp)->next;
    if (*pp) {
      *pp = t->next;
      if (p->tail == t) p->tail = prev;
      p->queued--;
      t->state = ZEUS__SOLVE_DONE;
      unref_locked(t); /* the pool's reference */
    }
  }
  unref_locked(t);
  pthread_mutex_unlock(&p->mu);
}
