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
 * lost). A job whose scheduler failed, or one of whose ranks left (POST /leave), answers every
 * request with that error at once, waiting ones included. Everything is under one mutex;
 * waiters are completed through a callback under that mutex; memory of removed jobs is released
 * after the mutex is let go.
 *
 * Jobs live in a hash table keyed by their id with a per-table random seed, and ids are compared
 * in constant time, so neither the answer nor its timing says how close a guess came. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pfo_server/job_table.h"
#include "zeus/format.h"
#include "pfo_server/sched.h"
#include "pfo_server/solver_pool.h"

enum { R_IDLE, R_WAITING, R_ANSWERED, R_DONE, R_NEXT_WAITING };

/* Random characters at the end of a job id: 26 base32 characters, 130 bits. */
#define ID_RANDOM_CHARS 26

typedef struct job {
  struct job *next; /* hash chain */
  char *id;
  char *dir; /* <dump_dir>/<id>, for messages */
  zeus__pfo_dump_loc dump;
  zeus_pfo_job_info info;
  zeus_pfo_rank_info *ranks; /* index = rank */
  bool *registered;
  char **tok; /* rank credentials, NULL for a rank that registered without one */
  size_t n_registered;
  zeus__sched *sched;
  int err_status; /* != 0: the job failed or a rank left */
  bool ended;     /* a rank left because its training ended (closed), not on an error */
  char *err_msg;
  int round;
  unsigned char *st;
  /* Parked requests: [rank] a schedule request, [world_size + rank] the rank's presence (GET
   * /presence: held open for as long as the rank lives; its closing before the rank left means
   * the rank died). */
  void **waiter;
  size_t n_parked; /* non-NULL entries of waiter: scans of waiter[] are skipped when 0 */
  size_t n_waiting, n_posted;
  zeus_pfo_prof_result *results; /* index = rank */
  char **sjson; /* serialised schedule of the round, index = rank */
  size_t *slen;
  double last_active;
  char owner[64];       /* the client that registered it ("" : nobody) */
  size_t bytes;         /* estimated memory charged to the job, all of it */
  size_t results_bytes; /* of which the round's results */
  size_t sched_bytes;   /* of which the round's schedules */
} job;

struct zeus__job_table {
  pthread_mutex_t mu;
  zeus__job_table_opts o;
  char *scheduler, *dump_dir;
  json_t *args;
  job **bucket;
  size_t nbucket; /* a power of two */
  uint64_t seed;
  size_t njobs;
  size_t bytes; /* estimated memory of every job */
  size_t max_pipe; /* longest pipe_schedule accepted */
  long num_microbatches; /* the scheduler's argument, 0 when not given */
  int dump_fd;  /* the dump folder, -1 when nothing is dumped */
  bool closing;
  zeus__solver_pool *pool; /* frontier solves of the schedulers that need them (Perseus) */
  /* Dump writes that failed (the round goes on: a full disk must not stop training), and the
   * last failure's message, reported by GET /info. */
  unsigned long dump_failures;
  char last_dump_error[512];
  unsigned long rounds_done; /* rounds completed over every job, removed ones included */
};

/* The one answer for a job that does not exist and for a credential that does not match. */
static const char unknown_job_msg[] =
    "unknown job id, or a rank credential (X-Zeus-Rank-Token) other than the one the rank registered with "
    "(register the job first; a job is removed after being idle)";

/* Records a failed dump write (caller holds r->mu) and logs it. GET /info shows the message to
 * anyone who may ask, so there the job id (a secret of the job) reads "<job id>". */
static void dump_failed(zeus__job_table *r, const char *job_id, const char *what) {
  r->dump_failures++;
  char full[1024];
  snprintf(full, sizeof full, "job %s: dumping %s failed: %s", job_id, what, zeus_errmsg());
  zeus__log(ZEUS_LOG_ERROR, "pfo", "%s", full);
  size_t idn = strlen(job_id), k = 0;
  for (const char *p = full; *p && k + 1 < sizeof r->last_dump_error;) {
    if (idn && strncmp(p, job_id, idn) == 0) {
      k += (size_t)snprintf(r->last_dump_error + k, sizeof r->last_dump_error - k, "<job id>");
      if (k >= sizeof r->last_dump_error) k = sizeof r->last_dump_error - 1;
      p += idn;
    } else {
      r->last_dump_error[k++] = *p++;
    }
  }
  r->last_dump_error[k] = '\0';
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
  reply->body = o ? zeus_json_dumps(o, JSON_COMPACT) : NULL;
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

static int reply_unknown_job(zeus__reply *reply) { return zeus__reply_error(reply, 404, unknown_job_msg); }

/* The last zeus error as a reply. */
static int reply_zeus_error(zeus__reply *reply, int code) {
  return zeus__reply_error(reply, zeus__http_status_of(code), zeus_errmsg());
}

static int reply_errorf(zeus__reply *reply, int status, const char *fmt, ...) ZEUS__PRINTF(3, 4);
static int reply_errorf(zeus__reply *reply, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return zeus__reply_error(reply, status, msg);
}

static void complete(zeus__job_table *r, job *j, size_t rank, int status, const char *body, size_t len) {
  void *w = j->waiter[rank];
  j->waiter[rank] = NULL;
  if (!w) return;
  j->n_parked--;
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
  if (j->ranks && j->registered)
    for (size_t i = 0; i < w; i++)
      if (j->registered[i]) zeus_pfo_rank_info_clear(&j->ranks[i]);
  if (j->tok)
    for (size_t i = 0; i < w; i++) free(j->tok[i]);
  if (j->results && j->n_posted)
    for (size_t i = 0; i < w; i++) zeus_pfo_prof_result_clear(&j->results[i]);
  if (j->sjson && j->sched)
    for (size_t i = 0; i < w; i++) free(j->sjson[i]);
  free(j->id);
  free(j->dir);
  zeus_pfo_job_info_clear(&j->info);
  free(j->ranks);
  free(j->registered);
  free(j->tok);
  zeus__sched_destroy(j->sched);
  free(j->err_msg);
  free(j->st);
  free(j->waiter);
  free(j->results);
  free(j->sjson);
  free(j->slen);
  free(j);
}

/* ---- memory estimates ---- */

/* What the table holds for a job of `w` ranks before any registers. */
static size_t job_fixed_bytes(size_t w, size_t id_len) {
  size_t per_rank = sizeof(zeus_pfo_rank_info) + sizeof(bool) + sizeof(char *) + 1 + sizeof(void *) +
                    sizeof(zeus_pfo_prof_result) + sizeof(char *) + sizeof(size_t);
  return sizeof(job) + 2 * id_len + 256 + w * per_rank;
}

/* A rank's information, held by the table and copied by the scheduler driver and the scheduler. */
static size_t rank_bytes(const zeus_pfo_rank_info *ri) {
  size_t b = 64 + ri->n_available_frequencies * sizeof(int);
  for (size_t i = 0; i < ri->n_pipe_schedule; i++) b += sizeof(char *) + strlen(ri->pipe_schedule[i]) + 1 + 16;
  return 3 * b;
}

static size_t result_bytes(const zeus_pfo_prof_result *p) {
  size_t b = sizeof *p + 32 + sizeof(double) * (p->n_iter_time + p->n_iter_energy);
  const struct { const zeus_pfo_breakdown *bd; size_t n; } parts[] = {
      {p->time_breakdown, p->n_time_breakdown}, {p->energy_breakdown, p->n_energy_breakdown}};
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < parts[k].n; i++) {
      const zeus_pfo_breakdown *bd = &parts[k].bd[i];
      b += sizeof *bd + strlen(bd->instruction) + 17 + sizeof(size_t) * (bd->n_iters + 1) +
           sizeof(double) * bd->offsets[bd->n_iters];
    }
  return b;
}

/* Charges `add` estimated bytes to job `j` (NULL: a job not in the table yet, whose `held` bytes
 * are counted) and to the table, or fills a 413 reply naming the bound that would be passed. */
static int charge(zeus__job_table *r, job *j, size_t held, size_t add, const char *what, zeus__reply *reply) {
  size_t jb = (j ? j->bytes : held) + add;
  if (jb > r->o.max_job_bytes)
    return reply_errorf(reply, 413, "%s would bring the job's memory to about %zu bytes, over the limit of %zu bytes "
                        "per job (max_job_memory, --max-job-memory)", what, jb, r->o.max_job_bytes);
  if (r->bytes + add > r->o.max_total_bytes)
    return reply_errorf(reply, 413, "%s would bring the memory of all jobs to about %zu bytes, over the server's "
                        "limit of %zu bytes (max_memory, --max-memory)", what, r->bytes + add,
                        r->o.max_total_bytes);
  if (j) j->bytes += add;
  r->bytes += add;
  return 0;
}

static void release(zeus__job_table *r, job *j, size_t sub) {
  j->bytes -= sub;
  r->bytes -= sub;
}

/* ---- the hash table ---- */

static size_t bucket_of(const zeus__job_table *r, const char *id) {
  uint64_t h = r->seed ^ 14695981039346656037ULL; /* FNV-1a, seeded */
  for (const unsigned char *p = (const unsigned char *)id; *p; p++) {
    h ^= *p;
    h *= 1099511628211ULL;
  }
  h ^= h >> 29;
  return (size_t)(h & (r->nbucket - 1));
}

static job *find_job(zeus__job_table *r, const char *id) {
  if (!id) return NULL;
  for (job *j = r->bucket[bucket_of(r, id)]; j; j = j->next)
    if (zeus__secret_equal(j->id, id)) return j;
  return NULL;
}

/* Whether a request about `rank` may act for it: a rank that registered with a credential must
 * present the same one; one that registered without may present none. */
static bool rank_authorised(const job *j, size_t rank, const char *token) {
  if (!j->registered[rank]) return true;
  if (j->tok[rank]) return zeus__secret_equal(j->tok[rank], token);
  return token == NULL;
}

/* ---- rounds ---- */

/* Marks the job failed and answers every parked request with the error. */
static void fail_job(zeus__job_table *r, job *j, int status, const char *msg) {
  if (!j->err_status) {
    j->err_status = status;
    j->err_msg = zeus__strdup(msg ? msg : "scheduler failed");
    zeus__log(j->ended ? ZEUS_LOG_INFO : ZEUS_LOG_ERROR, "pfo", "job %s %s: %s", j->id,
              j->ended ? "ended" : "failed", msg ? msg : "");
  }
  for (size_t i = 0; j->n_parked && i < 2 * (size_t)j->info.world_size; i++)
    if (j->waiter[i]) complete(r, j, i, j->err_status, j->err_msg ? j->err_msg : "scheduler failed", 0);
}

static int reply_job_error(zeus__reply *reply, const job *j) {
  return zeus__reply_error(reply, j->err_status, j->err_msg ? j->err_msg : "the job failed");
}

/* Serialises the current schedule of every rank (and dumps it) at the start of a round. */
static int install_round(zeus__job_table *r, job *j) {
  const zeus_pfo_schedule *s;
  size_t n, sb = 0;
  zeus__sched_current(j->sched, &s, &n);
  for (size_t i = 0; i < n; i++) {
    zeus__buf b = {0};
    int rc = zeus__pfo_schedule_to_buf(&s[i], &b);
    if (rc) { zeus__buf_free(&b); return rc; }
    free(j->sjson[i]);
    j->sjson[i] = b.data;
    j->slen[i] = b.len;
    /* The text, and the driver's copy of the schedule. */
    sb += b.len + 1 + sizeof s[i] + s[i].n_frequencies * (sizeof(zeus_pfo_freq) + 32);
  }
  /* The schedules follow from the ranks' instructions, which were charged when they registered:
   * this keeps the estimate honest without refusing the server's own answer. */
  release(r, j, j->sched_bytes);
  j->sched_bytes = sb;
  j->bytes += sb;
  r->bytes += sb;
  if (r->o.dump_data && r->dump_fd >= 0) {
    int rc = zeus__pfo_dump_schedules(&j->dump, j->round, s, n);
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

/* ---- open / close ---- */

int zeus__job_table_open(zeus__job_table **out, const zeus__job_table_opts *opts) {
  if (!opts || !opts->on_complete) return zeus__error(ZEUS_EINVAL, "job table: on_complete is required");
  zeus__job_table *r = calloc(1, sizeof *r);
  if (!r) return zeus__oom("creating the job table");
  r->o = *opts;
  r->dump_fd = -1;
  r->scheduler = zeus__strdup(opts->scheduler ? opts->scheduler : "PointSolution");
  r->dump_dir = zeus__strdup(opts->dump_dir && *opts->dump_dir ? opts->dump_dir : "./dump");
  r->o.scheduler = r->scheduler;
  r->o.dump_dir = r->dump_dir;
  if (r->o.max_job_idle_time_s <= 0) r->o.max_job_idle_time_s = 7 * 24 * 3600.0;
  if (!r->o.max_jobs) r->o.max_jobs = ZEUS__PFO_DEFAULT_MAX_JOBS;
  if (!r->o.max_jobs_per_client) r->o.max_jobs_per_client = r->o.max_jobs / 4 ? r->o.max_jobs / 4 : 1;
  if (!r->o.reserved_jobs) r->o.reserved_jobs = r->o.max_jobs / 16;
  if (r->o.reserved_jobs >= r->o.max_jobs) r->o.reserved_jobs = r->o.max_jobs - 1;
  if (!r->o.max_job_bytes) r->o.max_job_bytes = ZEUS__PFO_DEFAULT_MAX_JOB_BYTES;
  if (!r->o.max_total_bytes) r->o.max_total_bytes = ZEUS__PFO_DEFAULT_MAX_TOTAL_BYTES;
  r->nbucket = 64;
  while (r->nbucket < 2 * r->o.max_jobs && r->nbucket < ((size_t)1 << 24)) r->nbucket *= 2;
  r->bucket = calloc(r->nbucket, sizeof *r->bucket);
  int rc = (!r->scheduler || !r->dump_dir || !r->bucket) ? zeus__oom("creating the job table") : ZEUS_OK;
  if (!rc) rc = zeus__random_bytes(&r->seed, sizeof r->seed);
  if (!rc && opts->scheduler_args && *opts->scheduler_args)
    rc = zeus__json_parse(opts->scheduler_args, strlen(opts->scheduler_args), "scheduler arguments", &r->args);
  const zeus__sched_ops *ops = NULL;
  bool w;
  if (!rc) rc = zeus__sched_lookup(r->scheduler, &ops, &w);
  if (!rc) rc = zeus__sched_check(ops, r->args);
  /* The dump folder is held open for the table's life: whatever happens to its path later, the
   * writes go where it was checked to be private. */
  if (!rc && (r->o.dump_data || ops->writes_files)) {
    rc = zeus__open_private_dir(r->dump_dir, &r->dump_fd);
    if (rc) zeus__error_ctx(rc, "the dump folder (dump_dir, --dump-dir)");
  }
  /* At most 64 solves wait for a thread: each holds one profile (kilobytes). */
  if (!rc) rc = zeus__solver_pool_open(&r->pool, opts->solver_threads > 0 ? opts->solver_threads : 1, 64);
  if (rc) {
    if (r->dump_fd >= 0) close(r->dump_fd);
    json_decref(r->args);
    free(r->scheduler);
    free(r->dump_dir);
    free(r->bucket);
    free(r);
    return rc;
  }
  /* A pipe schedule holds one iteration: forward and backward of each microbatch. */
  r->max_pipe = ZEUS_PFO_MAX_INSTRUCTIONS;
  json_t *nmb = json_object_get(r->args, "num_microbatches");
  if (json_is_integer(nmb) && json_integer_value(nmb) > 0) {
    r->num_microbatches = (long)(json_integer_value(nmb) > INT_MAX ? INT_MAX : json_integer_value(nmb));
    if ((size_t)r->num_microbatches * 2 < r->max_pipe) r->max_pipe = (size_t)r->num_microbatches * 2;
  }
  pthread_mutex_init(&r->mu, NULL);
  *out = r;
  return ZEUS_OK;
}

void zeus__job_table_fail_all_waiters(zeus__job_table *r, const char *why) {
  pthread_mutex_lock(&r->mu);
  r->closing = true;
  for (size_t b = 0; b < r->nbucket; b++)
    for (job *j = r->bucket[b]; j; j = j->next)
      for (size_t i = 0; j->n_parked && i < 2 * (size_t)j->info.world_size; i++)
        if (j->waiter[i]) complete(r, j, i, 503, why, 0);
  pthread_mutex_unlock(&r->mu);
}

void zeus__job_table_close(zeus__job_table *r) {
  if (!r) return;
  zeus__job_table_fail_all_waiters(r, "the server is shutting down");
  for (size_t b = 0; b < r->nbucket; b++)
    while (r->bucket[b]) {
      job *j = r->bucket[b];
      r->bucket[b] = j->next;
      job_free(j);
    }
  if (r->dump_fd >= 0) close(r->dump_fd);
  zeus__solver_pool_close(r->pool); /* after the jobs: their schedulers release their solves */
  json_decref(r->args);
  free(r->scheduler);
  free(r->dump_dir);
  free(r->bucket);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

/* ---- POST /register_job ---- */

int zeus__job_table_register_job(zeus__job_table *r, const char *body, size_t len, zeus__reply *reply) {
  return zeus__job_table_register_job_for(r, NULL, body, len, reply);
}

/* How many jobs `owner` holds. Called with r->mu held. */
static size_t jobs_of(const zeus__job_table *r, const char *owner) {
  size_t n = 0;
  for (size_t b = 0; b < r->nbucket; b++)
    for (const job *j = r->bucket[b]; j; j = j->next)
      if (strcmp(j->owner, owner) == 0) n++;
  return n;
}

int zeus__job_table_register_job_for(zeus__job_table *r, const char *owner, const char *body, size_t len,
                                     zeus__reply *reply) {
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
    j->tok = calloc(w, sizeof *j->tok);
    j->st = calloc(w, 1);
    j->waiter = calloc(2 * w, sizeof *j->waiter);
    j->results = calloc(w, sizeof *j->results);
    j->sjson = calloc(w, sizeof *j->sjson);
    j->slen = calloc(w, sizeof *j->slen);
    j->dump.root_fd = r->dump_fd;
  } else {
    zeus_pfo_job_info_clear(&info);
  }
  if (!j || !j->ranks || !j->registered || !j->tok || !j->st || !j->waiter || !j->results || !j->sjson ||
      !j->slen) {
    free(base);
    if (j) job_free(j);
    return zeus__reply_error(reply, 500, "out of memory while registering a job");
  }
  /* "<the original's id>~<random>": the random part makes the id a secret of the job's ranks. */
  zeus__buf id = {0};
  char rnd[ID_RANDOM_CHARS + 1];
  if (!(rc = zeus__random_token(rnd, ID_RANDOM_CHARS))) rc = zeus__buf_printf(&id, "%s~%s", base, rnd);
  free(base);
  zeus__buf dir = {0};
  if (!rc) rc = zeus__buf_printf(&dir, "%s/%s", r->dump_dir, id.data);
  if (rc) {
    zeus__buf_free(&id);
    zeus__buf_free(&dir);
    job_free(j);
    return reply_zeus_error(reply, rc);
  }
  j->id = id.data;
  j->dir = dir.data;
  free(j->info.job_id); /* "" while registering: from now on the job's id */
  j->info.job_id = zeus__strdup(j->id);
  j->dump.job = j->id;
  j->dump.path = j->dir;
  size_t fixed = job_fixed_bytes(w, id.len);

  if (owner) snprintf(j->owner, sizeof j->owner, "%s", owner);
  pthread_mutex_lock(&r->mu);
  int status = 0;
  size_t mine = 0;
  if (r->closing) {
    status = zeus__reply_error(reply, 503, "the server is shutting down");
  } else if (r->njobs >= r->o.max_jobs) {
    status = reply_errorf(reply, 503, "the server holds %zu jobs, its limit (max_jobs, --max-jobs); a job is "
                          "removed once idle for %.0f s (one still registering its ranks: %.0f s)", r->njobs,
                          r->o.max_job_idle_time_s,
                          r->o.max_job_idle_time_s < ZEUS__PFO_PENDING_JOB_IDLE_S ? r->o.max_job_idle_time_s
                                                                                 : ZEUS__PFO_PENDING_JOB_IDLE_S);
  } else if (owner && (mine = jobs_of(r, owner)) >= r->o.max_jobs_per_client) {
    status = reply_errorf(reply, 503, "%s holds %zu jobs, the most one client may hold (max_jobs_per_client, "
                          "--max-jobs-per-client); a job is removed once idle for %.0f s", owner, mine,
                          r->o.max_job_idle_time_s);
  } else if (owner && mine && r->njobs + r->o.reserved_jobs >= r->o.max_jobs) {
    status = reply_errorf(reply, 503, "the server holds %zu jobs; the last %zu of its %zu are kept for clients "
                          "that hold none (reserved_jobs, --reserved-jobs), and %s holds %zu", r->njobs,
                          r->o.reserved_jobs, r->o.max_jobs, owner, mine);
  } else if (find_job(r, j->id)) { /* 130 random bits never collide; refuse rather than merge */
    status = zeus__reply_error(reply, 500, "job id collision; register again");
  } else {
    status = charge(r, NULL, 0, fixed, "registering this job", reply);
  }
  if (status) {
    pthread_mutex_unlock(&r->mu);
    job_free(j);
    return status;
  }
  j->bytes = fixed;
  if (r->o.dump_data && r->dump_fd >= 0 && zeus__pfo_dump_mkdir(&j->dump)) dump_failed(r, j->id, "the job folder");
  j->last_active = zeus_monotonic_s();
  size_t b = bucket_of(r, j->id);
  j->next = r->bucket[b];
  r->bucket[b] = j;
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

static bool token_well_formed(const char *t) {
  size_t n = strlen(t);
  if (n < ZEUS__PFO_RANK_TOKEN_MIN || n > ZEUS__PFO_RANK_TOKEN_MAX) return false;
  for (const char *p = t; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_'))
      return false;
  return true;
}

int zeus__job_table_register_rank(zeus__job_table *r, const char *job_id, const char *token, const char *body,
                                  size_t len, zeus__reply *reply) {
  zeus_pfo_rank_info ri;
  int prc = zeus_pfo_rank_info_from_json(body, len, "RankInfo", &ri);
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  int status, rc;
  bool keep = false; /* ri was taken by the job */
  if (!j) {
    status = reply_unknown_job(reply);
    goto out;
  }
  if (prc) {
    status = reply_zeus_error(reply, prc);
    goto out;
  }
  j->last_active = zeus_monotonic_s();
  if (j->err_status) {
    status = reply_job_error(reply, j);
    goto out;
  }
  if ((rc = zeus_pfo_rank_info_validate(&ri, &j->info))) {
    status = reply_zeus_error(reply, rc);
    goto out;
  }
  if (token && !token_well_formed(token)) {
    status = reply_errorf(reply, 400, "X-Zeus-Rank-Token: expected %d to %d letters, digits, '-' or '_'",
                          ZEUS__PFO_RANK_TOKEN_MIN, ZEUS__PFO_RANK_TOKEN_MAX);
    goto out;
  }
  if (!token && r->o.require_rank_tokens) {
    status = zeus__reply_error(reply, 401, "this server requires a rank credential: register with an "
                               "X-Zeus-Rank-Token header (the libzeus client sends one; see docs/pfo-server.md)");
    goto out;
  }
  if (ri.n_pipe_schedule > r->max_pipe) {
    status = reply_errorf(reply, 400, "RankInfo: field 'pipe_schedule' has %zu instructions, more than the %zu of "
                          "one iteration (forward and backward of the scheduler's num_microbatches = %ld)",
                          ri.n_pipe_schedule, r->max_pipe, r->num_microbatches);
    goto out;
  }
  if (j->registered[ri.rank]) {
    status = reply_errorf(reply, 409, "rank %d is already registered in this job", ri.rank);
    goto out;
  }
  char *tok = token ? zeus__strdup(token) : NULL;
  if (token && !tok) {
    status = zeus__reply_error(reply, 500, "out of memory");
    goto out;
  }
  char what[64];
  snprintf(what, sizeof what, "registering rank %d", ri.rank);
  if ((status = charge(r, j, 0, rank_bytes(&ri), what, reply))) {
    free(tok);
    goto out;
  }
  j->ranks[ri.rank] = ri;
  j->tok[ri.rank] = tok;
  j->registered[ri.rank] = true;
  j->n_registered++;
  keep = true;
  status = reply_text(reply, "null");
  if (j->n_registered < (size_t)j->info.world_size) goto out;
  /* Every rank is in: dump the ranks and build the scheduler. */
  size_t w = (size_t)j->info.world_size;
  bool dumps = r->dump_fd >= 0;
  if (r->o.dump_data && dumps && zeus__pfo_dump_ranks(&j->dump, j->ranks, w)) dump_failed(r, j->id, "ranks");
  rc = zeus__sched_create(&j->sched, r->scheduler, r->args, &j->info, j->ranks, w, dumps ? &j->dump : NULL,
                          r->o.dump_data, r->pool);
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
  if (!prc && !keep) zeus_pfo_rank_info_clear(&ri);
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

/* The job and rank of a request that a registered rank makes about itself (r->mu held): 0, or the
 * status of the error reply written. `activity`: the request keeps the job from being reaped. */
static int rank_request(zeus__job_table *r, const char *job_id, const char *rank_text, const char *token,
                        bool activity, zeus__reply *reply, job **jp, size_t *rank) {
  int status;
  job *j = find_job(r, job_id);
  if (r->closing) return zeus__reply_error(reply, 503, "the server is shutting down");
  if (!j) return reply_unknown_job(reply);
  if ((status = parse_rank(rank_text, j, reply, rank))) return status;
  if (!rank_authorised(j, *rank, token)) return reply_unknown_job(reply);
  if (activity) j->last_active = zeus_monotonic_s();
  if (j->err_status) return reply_job_error(reply, j);
  if (!j->registered[*rank])
    return reply_errorf(reply, 400, "rank %zu has not registered (POST /register_rank/<job_id> first)", *rank);
  *jp = j;
  return 0;
}

/* Parks `waiter` in slot i of the job (r->mu held). */
static void park(zeus__job_table *r, job *j, size_t i, void *waiter) {
  if (r->o.on_park) r->o.on_park(waiter);
  j->waiter[i] = waiter;
  j->n_parked++;
}

int zeus__job_table_request_schedule(zeus__job_table *r, const char *job_id, const char *rank_text,
                                     const char *token, void *waiter, zeus__reply *reply) {
  size_t rank = 0;
  job *j = NULL;
  pthread_mutex_lock(&r->mu);
  int status = rank_request(r, job_id, rank_text, token, true, reply, &j, &rank);
  if (status) goto out;
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
  park(r, j, rank, waiter);
out:
  pthread_mutex_unlock(&r->mu);
  return status;
}

/* ---- GET /presence/{job_id}?rank=N ---- */

int zeus__job_table_presence(zeus__job_table *r, const char *job_id, const char *rank_text, const char *token,
                             void *waiter, zeus__reply *reply) {
  size_t rank = 0;
  job *j = NULL;
  pthread_mutex_lock(&r->mu);
  int status = rank_request(r, job_id, rank_text, token, false, reply, &j, &rank);
  if (!status) {
    size_t slot = (size_t)j->info.world_size + rank;
    /* Its client came back (a new connection): the newer one holds the presence. */
    if (j->waiter[slot]) complete(r, j, slot, 409, "superseded by a newer presence request of the same rank", 0);
    park(r, j, slot, waiter);
  }
  pthread_mutex_unlock(&r->mu);
  return status;
}

/* ---- POST /result/{job_id} ---- */

/* The last result of a round is in: observe, move to the next round, answer early askers. */
static void finish_round(zeus__job_table *r, job *j) {
  size_t w = (size_t)j->info.world_size;
  if (r->o.dump_data && r->dump_fd >= 0 && zeus__pfo_dump_prof(&j->dump, j->round, j->results, w)) {
    char what[64];
    snprintf(what, sizeof what, "results %d", j->round);
    dump_failed(r, j->id, what);
  }
  int rc = zeus__sched_observe(j->sched, j->results, w);
  for (size_t i = 0; i < w; i++) zeus_pfo_prof_result_clear(&j->results[i]);
  release(r, j, j->results_bytes);
  j->results_bytes = 0;
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

int zeus__job_table_post_result(zeus__job_table *r, const char *job_id, const char *token, const char *body,
                                size_t len, zeus__reply *reply) {
  zeus_pfo_prof_result res;
  int rc = r->o.tree_results ? zeus__pfo_prof_result_from_json_tree(body, len, "ProfilingResult", &res)
                              : zeus_pfo_prof_result_from_json(body, len, "ProfilingResult", &res);
  int status;
  bool keep = false;
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  if (!j) { status = reply_unknown_job(reply); goto out; }
  if (rc) { status = reply_zeus_error(reply, rc); goto out; }
  if (res.rank >= j->info.world_size) {
    status = reply_errorf(reply, 400, "ProfilingResult: field 'rank' is %d, expected 0..%d", res.rank,
                          j->info.world_size - 1);
    goto out;
  }
  if (!rank_authorised(j, (size_t)res.rank, token)) { status = reply_unknown_job(reply); goto out; }
  j->last_active = zeus_monotonic_s();
  if (j->err_status) { status = reply_job_error(reply, j); goto out; }
  if (j->st[res.rank] != R_ANSWERED) {
    status = reply_errorf(reply, 409, "rank %d posted a result for round %d without having received that round's "
                          "schedule, or posted it twice", res.rank, j->round);
    goto out;
  }
  char what[80];
  snprintf(what, sizeof what, "the result of rank %d", res.rank);
  size_t rb = result_bytes(&res);
  if ((status = charge(r, j, 0, rb, what, reply))) goto out;
  j->results_bytes += rb;
  int rk = res.rank;
  j->results[rk] = res;
  keep = true;
  j->st[rk] = R_DONE;
  j->n_posted++;
  status = reply_text(reply, "null");
  if (j->n_posted == (size_t)j->info.world_size) finish_round(r, j);
out:
  pthread_mutex_unlock(&r->mu);
  if (!rc && !keep) zeus_pfo_prof_result_clear(&res);
  return status;
}

int zeus__job_table_sched_route(zeus__job_table *r, const char *job_id, const char *method, const char *path,
                                const char *body, size_t len, zeus__reply *reply) {
  int status;
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  if (!j) status = reply_unknown_job(reply);
  /* A job a rank left (410; every libzeus rank leaves when it closes) still has its scheduler's
   * state to show; one whose scheduler failed answers the failure. */
  else if (j->err_status && (j->err_status != 410 || !j->sched))
    status = zeus__reply_error(reply, j->err_status, j->err_msg);
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

/* ---- POST /leave/{job_id} ---- */

#define LEAVE_REASON_MAX 1024

int zeus__job_table_leave(zeus__job_table *r, const char *job_id, const char *token, const char *body, size_t len,
                          zeus__reply *reply) {
  json_t *v = NULL;
  long long rank = -1;
  const char *reason = NULL;
  bool closed = false;
  int rc = zeus__json_parse(body, len, "LeaveRequest", &v);
  if (!rc) {
    json_t *rs;
    if (!json_is_object(v)) {
      rc = zeus__error(ZEUS_EINVAL, "LeaveRequest: expected an object {\"rank\": N, \"reason\": \"...\"}, got %s",
                       zeus__json_type_name(v));
    } else if (!(rc = zeus__json_req_int(v, "rank", "LeaveRequest", &rank))) {
      rs = json_object_get(v, "reason");
      if (rs && !json_is_null(rs) && !json_is_string(rs))
        rc = zeus__error(ZEUS_EINVAL, "LeaveRequest: field 'reason' must be a string, got %s",
                         zeus__json_type_name(rs));
      else if (json_is_string(rs) && json_string_length(rs) > LEAVE_REASON_MAX)
        rc = zeus__error(ZEUS_EINVAL, "LeaveRequest: field 'reason' is %zu bytes long, more than the %d allowed",
                         json_string_length(rs), LEAVE_REASON_MAX);
      else
        reason = json_string_value(rs);
      json_t *cl = json_object_get(v, "closed");
      if (!rc && cl && !json_is_null(cl) && !json_is_boolean(cl))
        rc = zeus__error(ZEUS_EINVAL, "LeaveRequest: field 'closed' must be true or false, got %s",
                         zeus__json_type_name(cl));
      else if (!rc)
        closed = json_is_true(cl);
    }
  }
  int status;
  pthread_mutex_lock(&r->mu);
  job *j = find_job(r, job_id);
  if (!j) { status = reply_unknown_job(reply); goto out; }
  if (rc) { status = reply_zeus_error(reply, rc); goto out; }
  if (rank < 0 || rank >= j->info.world_size) {
    status = reply_errorf(reply, 400, "LeaveRequest: field 'rank' is %lld, expected 0..%d", rank,
                          j->info.world_size - 1);
    goto out;
  }
  /* Only the rank itself may say it leaves: it must have registered, and show its credential if
   * it registered with one. (A rank that never registered has nothing to prove it is that rank,
   * and the job id alone must not be enough to end a job whose ranks hold credentials.) */
  if (!j->registered[rank]) {
    status = reply_errorf(reply, 400, "rank %lld has not registered, so it cannot leave", rank);
    goto out;
  }
  if (!rank_authorised(j, (size_t)rank, token)) {
    status = reply_unknown_job(reply);
    goto out;
  }
  j->last_active = zeus_monotonic_s();
  if (!j->err_status) {
    zeus__buf msg = {0};
    zeus__buf_printf(&msg, "rank %lld left the job: ", rank);
    for (const char *p = reason && *reason ? reason : "no reason given"; *p; p++) {
      char c = (unsigned char)*p < 0x20 ? ' ' : *p; /* one line in logs */
      zeus__buf_append(&msg, &c, 1);
    }
    zeus__buf_puts(&msg, "; this job gets no more schedules (every rank keeps its last one)");
    j->ended = closed;
    fail_job(r, j, 410, msg.data ? msg.data : "a rank left the job");
    zeus__buf_free(&msg);
  }
  status = reply_text(reply, "null");
out:
  pthread_mutex_unlock(&r->mu);
  json_decref(v);
  return status;
}

/* ---- housekeeping ---- */

bool zeus__job_table_cancel_waiter(zeus__job_table *r, void *waiter) {
  bool found = false;
  pthread_mutex_lock(&r->mu);
  for (size_t b = 0; b < r->nbucket && !found; b++)
    for (job *j = r->bucket[b]; j && !found; j = j->next) {
      size_t w = (size_t)j->info.world_size;
      for (size_t i = 0; j->n_parked && i < 2 * w; i++) {
        if (j->waiter[i] != waiter) continue;
        j->waiter[i] = NULL;
        j->n_parked--;
        found = true;
        /* A presence that ends before its rank left: the rank's process died (or its host: TCP
         * keep-alive notices within half a minute). Tell every other rank now. */
        if (i >= w && !j->err_status && !r->closing) {
          char msg[200];
          snprintf(msg, sizeof msg, "rank %zu went away without leaving the job (its process ended or its "
                   "connection to the server broke); this job gets no more schedules (every rank keeps its last one)",
                   i - w);
          fail_job(r, j, 410, msg);
        }
        break;
      }
    }
  pthread_mutex_unlock(&r->mu);
  return found;
}

int zeus__job_table_reap(zeus__job_table *r, double now) {
  int n = 0;
  job *dead = NULL;
  double pending = r->o.max_job_idle_time_s < ZEUS__PFO_PENDING_JOB_IDLE_S ? r->o.max_job_idle_time_s
                                                                            : ZEUS__PFO_PENDING_JOB_IDLE_S;
  pthread_mutex_lock(&r->mu);
  for (size_t b = 0; b < r->nbucket; b++) {
    for (job **pp = &r->bucket[b]; *pp;) {
      job *j = *pp;
      size_t w = (size_t)j->info.world_size;
      double limit = j->n_registered < w ? pending : r->o.max_job_idle_time_s;
      if (now - j->last_active <= limit) {
        pp = &j->next;
        continue;
      }
      for (size_t i = 0; j->n_parked && i < 2 * w; i++)
        if (j->waiter[i]) complete(r, j, i, 404, "the job was removed after being idle too long", 0);
      zeus__log(ZEUS_LOG_INFO, "pfo", "removed job %s after %.0f s idle%s", j->id, now - j->last_active,
                j->n_registered < w ? " (its ranks never all registered)" : "");
      *pp = j->next;
      r->njobs--;
      r->bytes -= j->bytes;
      j->next = dead;
      dead = j;
      n++;
    }
  }
  pthread_mutex_unlock(&r->mu);
  /* Freeing a large job takes a while: never with the lock held, so requests go on meanwhile. */
  while (dead) {
    job *j = dead;
    dead = j->next;
    job_free(j);
  }
  return n;
}

void zeus__job_table_stats(zeus__job_table *r, zeus__job_table_stats_t *st) {
  memset(st, 0, sizeof *st);
  pthread_mutex_lock(&r->mu);
  st->jobs = r->njobs;
  for (size_t b = 0; b < r->nbucket; b++) {
    for (job *j = r->bucket[b]; j; j = j->next) {
      st->ranks += j->n_registered;
      if (j->err_status && j->ended) st->ended_jobs++;
      else if (j->err_status) st->failed_jobs++;
    }
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

size_t zeus__job_table_bytes(zeus__job_table *r) {
  pthread_mutex_lock(&r->mu);
  size_t n = r->bytes;
  pthread_mutex_unlock(&r->mu);
  return n;
}
