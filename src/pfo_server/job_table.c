/* The job table: the transport-free core of the Perseus server.
 *
 * One job goes through: ranks register -> the scheduler is built -> rounds. A round: every rank
 * asks for its schedule (the requests wait until all have asked), all are answered, every rank
 * posts its result, the scheduler observes them and produces the next schedule. Per rank:
 *
 *   IDLE --GET--> WAITING --(all asked)--> ANSWERED --POST--> DONE --GET--> NEXT_WAITING
 *   DONE -> IDLE and NEXT_WAITING -> WAITING when the last result of the round arrives.
 *
 * A rank that asks again while WAITING replaces its earlier request (its client went away and
 * came back); one that asks again while ANSWERED gets the same schedule again (the answer was
 * lost). A job whose scheduler failed answers every request with that error. Everything is
 * under one mutex; waiters are completed through a callback under that mutex. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pfo_server/job_table.h"
#include "pfo_server/sched.h"
#include "pfo_server/solver_pool.h"

enum { R_IDLE, R_WAITING, R_ANSWERED, R_DONE, R_NEXT_WAITING };

typedef struct job {
  struct job *next;
  char *id;
  char *dir; /* <dump_dir>/<id> */
  zeus_pfo_job_info info;
  zeus_pfo_rank_info *ranks; /* index = rank */
  bool *registered;
  size_t n_registered;
  zeus__sched *sched;
  int err_status; /* != 0: the job failed */
  char *err_msg;
  int round;
  unsigned char *st;
  void **waiter;
  size_t n_waiting, n_posted;
  zeus_pfo_prof_result *results; /* index = rank */
  char **sjson; /* serialised schedule of the round, index = rank */
  size_t *slen;
  double last_active;
} job;

struct zeus__job_table {
  pthread_mutex_t mu;
  zeus__job_table_opts o;
  char *scheduler, *dump_dir;
  json_t *args;
  job *jobs;
  size_t njobs;
  unsigned long seq;
  bool closing;
  zeus__solver_pool *pool; /* frontier solves of the schedulers that need them (Perseus) */
  /* Dump writes that failed (the round goes on: a full disk must not stop training), and the
   * last failure's message, reported by GET /info. */
  unsigned long dump_failures;
  char last_dump_error[512];
  unsigned long rounds_done; /* rounds completed over every job, removed ones included */
};

/* Records a failed dump write (caller holds r->mu) and logs it. */
static void dump_failed(zeus__job_table *r, const char *job_id, const char *what) {
  r->dump_failures++;
  snprintf(r->last_dump_error, sizeof r->last_dump_error, "job %s: dumping %s failed: %s", job_id, what,
           zeus_errmsg());
  zeus__log(ZEUS_LOG_ERROR, "pfo", "%s", r->last_dump_error);
}

void zeus__job_table_dump_status(zeus__job_table *r, unsigned long *failures, char *last, size_t len) {
  pthread_mutex_lock(&r->mu);
  *failures = r->dump_failures;
  snprintf(last, len, "%s", r->last_dump_error);
  pthread_mutex_unlock(&r->mu);
}

int zeus__reply_error(zeus__reply *reply, int status, const char *msg) {
  json_t *o = json_pack("{ss}", "detail", msg ? msg : "");
  reply->status = status;
  reply->body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  reply->len = reply->body ? strlen(reply->body) : 0;
  json_decref(o);
  return status;
}

static int reply_text(zeus__reply *reply, const char *text) {
  reply->status = 200;
  reply->body = zeus__strdup(text);
  reply->len = reply->body ? strlen(text) : 0;
  if (!reply->body) return zeus__reply_error(reply, 500, "out of memory");
  return 200;
}

int zeus__http_status_of(int code) {
  switch (code) {
    case ZEUS_EINVAL: case ZEUS_EPARSE: case ZEUS_ERANGE: return 400;
    case ZEUS_ENOENT: return 404;
    case ZEUS_EEXIST: case ZEUS_ESTATE: return 409;
    case ZEUS_EPERM: return 401;
    default: return 500;
  }
}

/* The answer to a request naming a job the table does not hold. */
static int reply_unknown_job(zeus__reply *reply) {
  return zeus__reply_error(reply, 404, "unknown job id (register the job first, or it was removed after being idle)");
}

/* The last zeus error as a reply. */
static int reply_zeus_error(zeus__reply *reply, int code) {
  return zeus__reply_error(reply, zeus__http_status_of(code), zeus_errmsg());
}

static void complete(zeus__job_table *r, job *j, size_t rank, int status, const char *body, size_t len) {
  void *w = j->waiter[rank];
  j->waiter[rank] = NULL;
  if (!w) return;
  zeus__reply rep = {0};
  if (status == 200) {
    rep.status = 200;
    rep.body = malloc(len + 1);
    if (rep.body) { memcpy(rep.body, body, len); rep.body[len] = '\0'; rep.len = len; }
    else zeus__reply_error(&rep, 500, "out of memory");
  } else {
    zeus__reply_error(&rep, status, body);
  }
  r->o.on_complete(w, &rep);
}

static void job_free(job *j) {
  size_t w = (size_t)j->info.world_size;
  free(j->id);
  free(j->dir);
  zeus_pfo_job_info_clear(&j->info);
  if (j->ranks) for (size_t i = 0; i < w; i++) zeus_pfo_rank_info_clear(&j->ranks[i]);
  free(j->ranks);
  free(j->registered);
  zeus__sched_destroy(j->sched);
  free(j->err_msg);
  free(j->st);
  free(j->waiter);
  if (j->results) for (size_t i = 0; i < w; i++) zeus_pfo_prof_result_clear(&j->results[i]);
  free(j->results);
  if (j->sjson) for (size_t i = 0; i < w; i++) free(j->sjson[i]);
  free(j->sjson);
  free(j->slen);
  free(j);
}

/* Marks the job failed and answers every parked request with the error. */
static void fail_job(zeus__job_table *r, job *j, int status, const char *msg) {
  if (!j->err_status) {
    j->err_status = status;
    j->err_msg = zeus__strdup(msg ? msg : "scheduler failed");
    zeus__log(ZEUS_LOG_ERROR, "pfo", "job %s failed: %s", j->id, msg ? msg : "");
  }
  for (size_t i = 0; i < (size_t)j->info.world_size; i++)
    if (j->waiter[i]) complete(r, j, i, j->err_status, j->err_msg ? j->err_msg : "scheduler failed", 0);
}

/* Serialises the current schedule of every rank (and dumps it) at the start of a round. */
static int install_round(zeus__job_table *r, job *j) {
  const zeus_pfo_schedule *s;
  size_t n;
  zeus__sched_current(j->sched, &s, &n);
  for (size_t i = 0; i < n; i++) {
    zeus__buf b = {0};
    int rc = zeus__pfo_schedule_to_buf(&s[i], &b);
    if (rc) { zeus__buf_free(&b); return rc; }
    free(j->sjson[i]);
    j->sjson[i] = b.data;
    j->slen[i] = b.len;
  }
  if (r->o.dump_data) {
    int rc = zeus_pfo_save_schedules(j->dir, j->round, s, n);
    if (rc) {
      char what[64];
      snprintf(what, sizeof what, "schedule %d", j->round);
      dump_failed(r, j->id, what);
    }
  }
  return ZEUS_OK;
}

/* Answers every waiting rank when all have asked; `self` (or SIZE_MAX) is answered by the caller. */
static bool maybe_answer_all(zeus__job_table *r, job *j, size_t self) {
  size_t w = (size_t)j->info.world_size;
  if (!j->sched || j->err_status || j->n_waiting != w) return false;
  for (size_t i = 0; i < w; i++) {
    j->st[i] = R_ANSWERED;
    if (i != self) complete(r, j, i, 200, j->sjson[i], j->slen[i]);
  }
  j->n_waiting = 0;
  zeus__log(ZEUS_LOG_DEBUG, "pfo", "job %s: round %d answered", j->id, j->round);
  return true;
}

static job *find_job(zeus__job_table *r, const char *id) {
  for (job *j = r->jobs; j; j = j->next)
    if (strcmp(j->id, id) == 0) return j;
  return NULL;
}

int zeus__job_table_open(zeus__job_table **out, const zeus__job_table_opts *opts) {
  if (!opts || !opts->on_complete) return zeus__error(ZEUS_EINVAL, "job table: on_complete is required");
  zeus__job_table *r = calloc(1, sizeof *r);
  if (!r) return zeus__oom("creating the job table");
  r->o = *opts;
  r->scheduler = zeus__strdup(opts->scheduler ? opts->scheduler : "PointSolution");
  r->dump_dir = zeus__strdup(opts->dump_dir && *opts->dump_dir ? opts->dump_dir : "./dump");
  r->o.scheduler = r->scheduler;
  r->o.dump_dir = r->dump_dir;
  if (r->o.max_job_idle_time_s <= 0) r->o.max_job_idle_time_s = 7 * 24 * 3600.0;
  int rc = (!r->scheduler || !r->dump_dir) ? zeus__oom("creating the job table") : ZEUS_OK;
  if (!rc && opts->scheduler_args && *opts->scheduler_args)
    rc = zeus__json_parse(opts->scheduler_args, strlen(opts->scheduler_args), "scheduler arguments", &r->args);
  const zeus__sched_ops *ops;
  bool w;
  if (!rc) rc = zeus__sched_lookup(r->scheduler, &ops, &w);
  if (!rc) rc = zeus__sched_check(ops, r->args);
  /* At most 64 solves wait for a thread: each holds one profile (kilobytes). */
  if (!rc) rc = zeus__solver_pool_open(&r->pool, opts->solver_threads > 0 ? opts->solver_threads : 1, 64);
  if (rc) {
    json_decref(r->args);
    free(r->scheduler);
    free(r->dump_dir);
    free(r);
    return rc;
  }
  pthread_mutex_init(&r->mu, NULL);
  *out = r;
  return ZEUS_OK;
}

void zeus__job_table_fail_all_waiters(zeus__job_table *r, const char *why) {
  pthread_mutex_lock(&r->mu);
  r->closing = true;
  for (job *j = r->jobs; j; j = j->next)
    for (size_t i = 0; i < (size_t)j->info.world_size; i++)
      if (j->waiter[i]) complete(r, j, i, 503, why, 0);
  pthread_mutex_unlock(&r->mu);
}

void zeus__job_table_close(zeus__job_table *r) {
  if (!r) return;
  zeus__job_table_fail_all_waiters(r, "the server is shutting down");
  while (r->jobs) {
    job *j = r->jobs;
    r->jobs = j->next;
    job_free(j);
  }
  zeus__solver_pool_close(r->pool); /* after the jobs: their schedulers release their solves */
  json_decref(r->args);
  free(r->scheduler);
  free(r->dump_dir);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* ---- POST /register_job ---- */

static bool dir_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

int zeus__job_table_register_job(zeus__job_table *r, const char *body, size_t len, zeus__reply *reply) {
  zeus_pfo_job_info info;
  int rc = zeus_pfo_job_info_from_json(body, len, "JobInfo", &info);
  if (rc) return reply_zeus_error(reply, rc);
  if ((rc = zeus_pfo_job_info_validate(&info, true))) {
    zeus_pfo_job_info_clear(&info);
    return reply_zeus_error(reply, rc);
  }
  char *base;
  if ((rc = zeus_pfo_make_job_id(&info, r->scheduler, (long long)time(NULL), &base))) {
    zeus_pfo_job_info_clear(&info);
    return reply_zeus_error(reply, rc);
  }
  job *j = calloc(1, sizeof *j);
  size_t w = (size_t)info.world_size;
  if (j) {
    j->info = info;
    j->ranks = calloc(w, sizeof *j->ranks);
    j->registered = calloc(w, sizeof *j->registered);
    j->st = calloc(w, 1);
    j->waiter = calloc(w, sizeof *j->waiter);
    j->results = calloc(w, sizeof *j->results);
    j->sjson = calloc(w, sizeof *j->sjson);
    j->slen = calloc(w, sizeof *j->slen);
  } else {
    zeus_pfo_job_info_clear(&info);
  }
  if (!j || !j->ranks || !j->registered || !j->st || !j->waiter || !j->results || !j->sjson || !j->slen) {
    free(base);
    if (j) job_free(j);
    return zeus__reply_error(reply, 500, "out of memory while registering a job");
  }
  pthread_mutex_lock(&r->mu);
  /* Unique among live jobs and earlier dumps: "<base>", then "<base>.2", "<base>.3", ... */
  zeus__buf id = {0};
  for (unsigned n = 1;; n++) {
    id.len = 0;
    rc = n == 1 ? zeus__buf_puts(&id, base) : zeus__buf_printf(&id, "%s.%u", base, n);
    zeus__buf dir = {0};
    if (!rc) rc = zeus__buf_printf(&dir, "%s/%s", r->dump_dir, id.data);
    if (rc) { zeus__buf_free(&dir); break; }
    if (!find_job(r, id.data) && !(r->o.dump_data && dir_exists(dir.data))) {
      j->dir = dir.data;
      break;
    }
    zeus__buf_free(&dir);
  }
  free(base);
  if (rc) {
    pthread_mutex_unlock(&r->mu);
    zeus__buf_free(&id);
    job_free(j);
    return zeus__reply_error(reply, 500, "out of memory while registering a job");
  }
  j->id = id.data;
  free(j->info.job_id); /* "" while registering: from now on the job's id */
  j->info.job_id = zeus__strdup(j->id);
  if (r->o.dump_data && (rc = zeus__mkdirs(j->dir)))
    zeus__log(ZEUS_LOG_ERROR, "pfo", "job %s: %s", j->id, zeus_errmsg());
  j->last_active = zeus_monotonic_s();
  j->next = r->jobs;
  r->jobs = j;
  r->njobs++;
  json_t *s = json_string(j->id);
  char *text = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
  json_decref(s);
  zeus__log(ZEUS_LOG_INFO, "pfo", "registered job %s (world size %d)", j->id, j->info.world_size);
  pthread_mutex_unlock(&r->mu);
  if (!text) return zeus__reply_error(reply, 500, "out of memory");
  reply->status = 200;
  reply->body = text;
  reply->len = strlen(text);
  return 200;
}

/* ---- POST /register_rank/{job_id} ---- */

int zeus__job_table_register_rank(zeus__job_table *r, const char *job_id, const char *body, size_t len,
                                  zeus__reply *reply) {
  zeus_pfo_rank_info ri;
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  int status;
  if (!j) {
    status = reply_unknown_job(reply);
    goto out;
  }
  j->last_active = zeus_monotonic_s();
  int rc = zeus_pfo_rank_info_from_json(body, len, "RankInfo", &ri);
  if (!rc && (rc = zeus_pfo_rank_info_validate(&ri, &j->info))) zeus_pfo_rank_info_clear(&ri);
  if (rc) { status = reply_zeus_error(reply, rc); goto out; }
  if (j->registered[ri.rank]) {
    char msg[128];
    snprintf(msg, sizeof msg, "rank %d is already registered in this job", ri.rank);
    zeus_pfo_rank_info_clear(&ri);
    status = zeus__reply_error(reply, 409, msg);
    goto out;
  }
  j->ranks[ri.rank] = ri;
  j->registered[ri.rank] = true;
  j->n_registered++;
  status = reply_text(reply, "null");
  if (j->n_registered < (size_t)j->info.world_size) goto out;
  /* Every rank is in: dump the ranks and build the scheduler. */
  size_t w = (size_t)j->info.world_size;
  if (r->o.dump_data && zeus_pfo_save_ranks(j->dir, j->ranks, w)) dump_failed(r, j->id, "ranks");
  rc = zeus__sched_create(&j->sched, r->scheduler, r->args, &j->info, j->ranks, w, j->dir, r->o.dump_data,
                          r->pool);
  if (!rc) rc = install_round(r, j);
  if (rc) {
    int st = zeus__http_status_of(rc) == 400 ? 400 : 500;
    free(reply->body);
    zeus__reply_error(reply, st, zeus_errmsg());
    status = st;
    fail_job(r, j, st, zeus_errmsg());
    goto out;
  }
  zeus__log(ZEUS_LOG_INFO, "pfo", "job %s: all %zu ranks registered, scheduler %s ready", j->id, w, r->scheduler);
  maybe_answer_all(r, j, SIZE_MAX);
out:
  pthread_mutex_unlock(&r->mu);
  return status;
}

/* Answers a schedule request with rank's current schedule (a copy the reply owns). */
static int reply_schedule(zeus__reply *reply, const job *j, size_t rank) {
  reply->status = 200;
  reply->body = malloc(j->slen[rank] + 1);
  if (!reply->body) return zeus__reply_error(reply, 500, "out of memory");
  memcpy(reply->body, j->sjson[rank], j->slen[rank] + 1);
  reply->len = j->slen[rank];
  return 200;
}

/* ---- GET /schedule/{job_id}?rank=N ---- */

static int parse_rank(const char *text, const job *j, zeus__reply *reply, size_t *rank) {
  long v;
  if (!text) return zeus__reply_error(reply, 400, "missing query parameter 'rank'");
  if (zeus__parse_long(text, 0, j->info.world_size - 1, "query parameter 'rank'", &v))
    return reply_zeus_error(reply, ZEUS_EINVAL);
  *rank = (size_t)v;
  return 0;
}

int zeus__job_table_request_schedule(zeus__job_table *r, const char *job_id, const char *rank_text,
                                     void *waiter, zeus__reply *reply) {
  int status = 0;
  size_t rank = 0;
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  if (r->closing) { status = zeus__reply_error(reply, 503, "the server is shutting down"); goto out; }
  if (!j) { status = reply_unknown_job(reply); goto out; }
  if ((status = parse_rank(rank_text, j, reply, &rank))) goto out;
  j->last_active = zeus_monotonic_s();
  if (j->err_status) { status = zeus__reply_error(reply, j->err_status, j->err_msg); goto out; }
  if (!j->registered[rank]) {
    char msg[160];
    snprintf(msg, sizeof msg, "rank %zu has not registered (POST /register_rank/<job_id> first)", rank);
    status = zeus__reply_error(reply, 400, msg);
    goto out;
  }
  switch (j->st[rank]) {
    case R_ANSWERED: /* the answer was lost: send it again */
      status = reply_schedule(reply, j, rank);
      goto out;
    case R_WAITING:
    case R_NEXT_WAITING: /* the client came back: its newer request replaces the old one */
      complete(r, j, rank, 409, "superseded by a newer schedule request of the same rank", 0);
      break;
    case R_IDLE:
      j->st[rank] = R_WAITING;
      j->n_waiting++;
      break;
    case R_DONE:
      j->st[rank] = R_NEXT_WAITING;
      break;
  }
  if (j->st[rank] == R_WAITING && maybe_answer_all(r, j, rank)) {
    status = reply_schedule(reply, j, rank);
    goto out;
  }
  if (r->o.on_park) r->o.on_park(waiter);
  j->waiter[rank] = waiter;
out:
  pthread_mutex_unlock(&r->mu);
  return status;
}

/* ---- POST /result/{job_id} ---- */

/* The last result of a round is in: observe, move to the next round, answer early askers. */
static void finish_round(zeus__job_table *r, job *j) {
  size_t w = (size_t)j->info.world_size;
  if (r->o.dump_data && zeus_pfo_save_prof(j->dir, j->round, j->results, w)) {
    char what[64];
    snprintf(what, sizeof what, "results %d", j->round);
    dump_failed(r, j->id, what);
  }
  int rc = zeus__sched_observe(j->sched, j->results, w);
  for (size_t i = 0; i < w; i++) zeus_pfo_prof_result_clear(&j->results[i]);
  j->n_posted = 0;
  j->round++;
  r->rounds_done++;
  if (!rc) rc = install_round(r, j);
  if (rc) {
    fail_job(r, j, zeus__http_status_of(rc) == 400 ? 400 : 500, zeus_errmsg());
    return;
  }
  for (size_t i = 0; i < w; i++) {
    if (j->st[i] == R_NEXT_WAITING) { j->st[i] = R_WAITING; j->n_waiting++; }
    else j->st[i] = R_IDLE;
  }
  maybe_answer_all(r, j, SIZE_MAX);
}

int zeus__job_table_post_result(zeus__job_table *r, const char *job_id, const char *body, size_t len,
                                zeus__reply *reply) {
  zeus_pfo_prof_result res;
  int rc = zeus_pfo_prof_result_from_json(body, len, "ProfilingResult", &res);
  int status;
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  if (!j) { status = reply_unknown_job(reply); goto out; }
  j->last_active = zeus_monotonic_s();
  if (rc) { status = reply_zeus_error(reply, rc); goto out; }
  if (res.rank >= j->info.world_size) {
    char msg[160];
    snprintf(msg, sizeof msg, "ProfilingResult: field 'rank' is %d, expected 0..%d", res.rank, j->info.world_size - 1);
    status = zeus__reply_error(reply, 400, msg);
    goto out;
  }
  if (j->err_status) { status = zeus__reply_error(reply, j->err_status, j->err_msg); goto out; }
  if (j->st[res.rank] != R_ANSWERED) {
    char msg[200];
    snprintf(msg, sizeof msg, "rank %d posted a result for round %d without having received that "
             "round's schedule, or posted it twice", res.rank, j->round);
    status = zeus__reply_error(reply, 409, msg);
    goto out;
  }
  int rk = res.rank;
  j->results[rk] = res;
  memset(&res, 0, sizeof res);
  j->st[rk] = R_DONE;
  j->n_posted++;
  status = reply_text(reply, "null");
  if (j->n_posted == (size_t)j->info.world_size) finish_round(r, j);
out:
  pthread_mutex_unlock(&r->mu);
  if (!rc) zeus_pfo_prof_result_clear(&res);
  return status;
}

int zeus__job_table_sched_route(zeus__job_table *r, const char *job_id, const char *method, const char *path,
                                const char *body, size_t len, zeus__reply *reply) {
  int status;
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  if (!j) status = reply_unknown_job(reply);
  else if (j->err_status) status = zeus__reply_error(reply, j->err_status, j->err_msg);
  else if (!j->sched) {
    char msg[200];
    snprintf(msg, sizeof msg, "the job's scheduler starts once every rank has registered (%zu of %d so far)",
             j->n_registered, j->info.world_size);
    status = zeus__reply_error(reply, 409, msg);
  } else {
    if (strcmp(method, "GET") != 0) j->last_active = zeus_monotonic_s(); /* a declaration is activity */
    zeus__sched_route_reply out = {0};
    status = zeus__sched_route(j->sched, method, path, body, len, &out);
    reply->status = status;
    reply->body = out.body;
    reply->len = out.len;
    reply->content_type = out.content_type;
    reply->allow = out.allow;
    if (!reply->body) status = zeus__reply_error(reply, 500, "out of memory");
  }
  pthread_mutex_unlock(&r->mu);
  return status;
}

void zeus__job_table_cancel_waiter(zeus__job_table *r, void *waiter) {
  pthread_mutex_lock(&r->mu);
  for (job *j = r->jobs; j; j = j->next)
    for (size_t i = 0; i < (size_t)j->info.world_size; i++)
      if (j->waiter[i] == waiter) j->waiter[i] = NULL;
  pthread_mutex_unlock(&r->mu);
}

int zeus__job_table_reap(zeus__job_table *r, double now) {
  int n = 0;
  pthread_mutex_lock(&r->mu);
  for (job **pp = &r->jobs; *pp;) {
    job *j = *pp;
    if (now - j->last_active > r->o.max_job_idle_time_s) {
      for (size_t i = 0; i < (size_t)j->info.world_size; i++)
        if (j->waiter[i]) complete(r, j, i, 404, "the job was removed after being idle too long", 0);
      zeus__log(ZEUS_LOG_INFO, "pfo", "removed job %s after %.0f s idle", j->id, now - j->last_active);
      *pp = j->next;
      job_free(j);
      r->njobs--;
      n++;
    } else {
      pp = &j->next;
    }
  }
  pthread_mutex_unlock(&r->mu);
  return n;
}

void zeus__job_table_stats(zeus__job_table *r, zeus__job_table_stats_t *st) {
  memset(st, 0, sizeof *st);
  pthread_mutex_lock(&r->mu);
  st->jobs = r->njobs;
  for (job *j = r->jobs; j; j = j->next) {
    st->ranks += j->n_registered;
    if (j->err_status) st->failed_jobs++;
  }
  st->rounds_done = r->rounds_done;
  st->dump_failures = r->dump_failures;
  pthread_mutex_unlock(&r->mu);
}

size_t zeus__job_table_njobs(zeus__job_table *r) {
  pthread_mutex_lock(&r->mu);
  size_t n = r->njobs;
  pthread_mutex_unlock(&r->mu);
  return n;
}
