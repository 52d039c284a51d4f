/* The Perseus client (PipelineFrequencyOptimizer): registration, the per-instruction hooks and
 * the online profiling rounds.
 *
 * The hooks run on the training thread around every instruction, so they allocate nothing,
 * format nothing unless something is wrong, and never touch the device for clocks (the
 * controller's thread does): an instruction costs a name comparison, a frequency wish, and
 * (with instruction profiling) two readings of the GPU's clock and energy counter. Each round's
 * measurements go into buffers sized when the schedule is installed; the round's end builds the
 * ProfilingResult from them.
 *
 * Start-up is collective: every rank takes part in every collective call whatever happened to
 * it locally, and the ranks agree (allreduce) on whether all started, so a rank that fails never
 * leaves the others waiting in a collective or in a schedule request. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "pfo_client/client_http.h"
#include "pfo_client/fit.h"
#include "pfo/pfo_internal.h"
#include "zeus/format.h"
#include "zeus/monitor.h"
#include "zeus/pfo_client.h"
#include "zeus/sim.h"

enum { SLOT_ITER = 0, SLOT_INST = 1 };
#define TL_CAP 8192 /* controller timeline records looked at per round */
static const char *const slot_key[2] = {"zeus.pfo.iteration", "zeus.pfo.instruction"};

/* Time and energy of one GPU: its energy counter read directly, or (a GPU without a counter) a
 * monitor window that integrates polled power. */
typedef struct meter {
  zeus_devices *d;
  unsigned gpu;
  zeus_monitor *mon;
  double t0[2];
  uint64_t e0[2]; /* the energy counter at the slot's start, in mJ */
} meter;

struct zeus_pfo_optimizer {
  /* the hot path's fields first */
  size_t idx, n;
  const char **names; /* the schedule's instructions (borrowed from sched) */
  unsigned *freqs;
  bool in_step, in_inst, bad, profile;
  zeus_pfo_controller *ctl;
  zeus_pfo_sync_fn sync;
  void *sync_ctx;
  meter m;
  bool fit;          /* instruction energy: fitted after the round (else read around each) */
  double latency;    /* the controller's lock latency (s) */
  unsigned *eff;     /* the clock asked for per instruction: freqs after the merge rule */
  double *pred;      /* expected duration per instruction (0: unknown) */
  size_t *cls_of;    /* instruction -> class */
  double *inst_t, *inst_e; /* [iteration in round][instruction], K x n */
  double *inst_b;    /* begin times (device clock), K x n */
  double *iter_t, *iter_e; /* K */
  double *iter_b;    /* K */
  double iter_b0;    /* begin of the iteration running */
  zeus__pfo_follower *fol;
  /* (instruction kind, clock) classes seen so far: expected duration and fitted power */
  struct pfo_class { const char *name; unsigned mhz; double dur_s, power_w; } *cls;
  size_t ncls, cap_cls;
  char **cls_names; /* owned copies of the names */
  double *tl_t;     /* scratch for the controller's timeline */
  unsigned *tl_f;
  long it;                 /* iterations measured in this round */
  long K;                  /* iterations per round */
  /* the schedule in effect, and the next one */
  zeus_pfo_schedule sched;
  zeus_pfo_schedule pending;
  bool have_pending;
  size_t *key_of;     /* instruction -> index into keys */
  const char **keys;  /* distinct instruction names */
  size_t nkeys;
  /* who we are, and the server */
  int rank, dp_rank, pp_rank, tp_rank;
  zeus__pfo_http *http;
  char *job_id, *job_esc;
  bool detached;
  bool left;       /* this rank told the server it left the job */
  int last_status; /* HTTP status of the last exchange with the server (0: none) */
  long round;
  zeus_pfo_round_stats last;
  double other_w;     /* fitted power outside instructions */
  zeus_pfo_class_stats *rcls; /* the last round's classes */
  size_t nrcls, cap_rcls;
  double clock_frac;  /* this round's fraction of instruction time at the planned clock */
  long clock_late;
  /* The rank's presence: GET /presence held open on its own connection by a thread for as long as
   * the rank lives, so that when this process dies (kill -9, a crash) the server sees the
   * connection close and tells every other rank at once instead of leaving them to time out. */
  zeus__pfo_http *presence_http;
  char *presence_path;
  pthread_t presence_th;
  bool presence_started;
  volatile bool presence_stop;
};

/* ---- meter ---- */

static int meter_open(meter *m, zeus_devices *d, unsigned gpu) {
  bool counter = false;
  m->d = d;
  m->gpu = gpu;
  int rc = zeus_gpu_energy_counter_supported(d, gpu, &counter);
  if (rc) return rc;
  zeus_monitor_opts mo = {.devices = d, .gpu_indices = &gpu, .num_gpu_indices = 1, .cpu_indices = &gpu,
                          .num_cpu_indices = 0};
  if ((rc = zeus_monitor_open(&m->mon, &mo))) return rc;
  /* A counter that is fast to read is read directly (no window bookkeeping); one that is slow and
   * ticks coarsely (an H100's: 3.3 ms, 100 ms) is followed by the monitor's sampler, so that an
   * instruction's bounds cost microseconds and an instruction shorter than a tick is measured. */
  if (counter && zeus_monitor_gpu_energy_source(m->mon, 0) == ZEUS_ENERGY_RAW) {
    zeus_monitor_close(m->mon);
    m->mon = NULL;
  }
  return ZEUS_OK;
}

static inline int meter_begin(meter *m, int slot) {
  if (m->mon) return zeus_monitor_begin_window(m->mon, slot_key[slot], true);
  m->t0[slot] = zeus_devices_now(m->d);
  return zeus_gpu_total_energy(m->d, m->gpu, &m->e0[slot]);
}

static inline int meter_end(meter *m, int slot, double *t, double *e) {
  if (m->mon) {
    zeus_measurement r;
    int rc = zeus_monitor_end_window(m->mon, slot_key[slot], false, &r);
    if (rc) return rc;
    *t = r.time_s;
    *e = r.gpu_energy_j[0];
    return ZEUS_OK;
  }
  uint64_t mj;
  double now = zeus_devices_now(m->d);
  int rc = zeus_gpu_total_energy(m->d, m->gpu, &mj);
  if (rc) return rc;
  /* As measured (zeus/format.h): the time at the ns, the energy a difference of mJ counts. */
  *t = zeus_round_decimals(now - m->t0[slot], 9);
  *e = zeus_joules_from_mj((int64_t)(mj - m->e0[slot]));
  return ZEUS_OK;
}

/* ---- settings ---- */

void zeus_pfo_optimizer_opts_init(zeus_pfo_optimizer_opts *o) {
  memset(o, 0, sizeof *o);
  o->iters_per_round = 10;
  o->connect_timeout_s = 5;
  o->request_timeout_s = 30;
  o->schedule_timeout_s = 1800;
  o->retries = 5;
  o->retry_backoff_s = 0.5;
  o->controller_poll_s = 0.0005;
}

int zeus_pfo_optimizer_opts_from_env(zeus_pfo_optimizer_opts *o) {
  if (!o) return zeus__error(ZEUS_EINVAL, "zeus_pfo_optimizer_opts_from_env: o is required");
  char var[64];
  const char *v;
  long l;
  double d;
  bool b;
  int rc;
  if ((v = zeus__pfo_env("SERVER_URL", var, sizeof var))) o->server_url = v;
  if ((v = zeus__pfo_env("JOB_ID", var, sizeof var))) o->job_id = v;
  if ((v = zeus__pfo_env("TOKEN", var, sizeof var))) o->token = v;
  if ((v = zeus__pfo_env("ITERS_PER_ROUND", var, sizeof var))) {
    if ((rc = zeus__env_long(var, 1, 100000, o->iters_per_round, &l))) return rc;
    o->iters_per_round = l;
  }
  if ((v = zeus__pfo_env("RETRIES", var, sizeof var))) {
    if ((rc = zeus__env_long(var, 0, 100, o->retries, &l))) return rc;
    o->retries = (int)l;
  }
  static const struct { const char *name; double min, max; size_t off; } dbl[] = {
      {"CONNECT_TIMEOUT", 0.001, 3600, offsetof(zeus_pfo_optimizer_opts, connect_timeout_s)},
      {"REQUEST_TIMEOUT", 0.001, 86400, offsetof(zeus_pfo_optimizer_opts, request_timeout_s)},
      {"SCHEDULE_TIMEOUT", 0, 1e7, offsetof(zeus_pfo_optimizer_opts, schedule_timeout_s)},
      {"RETRY_BACKOFF", 0, 3600, offsetof(zeus_pfo_optimizer_opts, retry_backoff_s)},
      {"CONTROLLER_POLL", 0, 1, offsetof(zeus_pfo_optimizer_opts, controller_poll_s)},
  };
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(dbl); i++) {
    if (!(v = zeus__pfo_env(dbl[i].name, var, sizeof var))) continue;
    double *dst = (double *)((char *)o + dbl[i].off);
    if ((rc = zeus__env_double(var, dbl[i].min, dbl[i].max, *dst, &d))) return rc;
    *dst = d;
  }
  if ((v = zeus__pfo_env("PROFILE_INSTRUCTIONS", var, sizeof var))) {
    if ((rc = zeus__env_bool(var, true, &b))) return rc;
    o->no_instruction_profiling = !b;
  }
  if ((v = zeus__pfo_env("INSTRUCTION_ENERGY", var, sizeof var))) {
    if (!strcmp(v, "auto")) o->instruction_energy = ZEUS_PFO_ENERGY_AUTO;
    else if (!strcmp(v, "read")) o->instruction_energy = ZEUS_PFO_ENERGY_READ;
    else if (!strcmp(v, "fit")) o->instruction_energy = ZEUS_PFO_ENERGY_FIT;
    else return zeus__error(ZEUS_EINVAL, "%s is '%s', expected auto, read or fit", var, v);
  }
  if ((v = zeus__pfo_env("CLOCK_LATENCY", var, sizeof var))) {
    if (!strcmp(v, "auto")) {
      o->clock_latency_s = 0;
    } else {
      if ((rc = zeus__env_double(var, 0, 10, 0, &d))) return rc;
      o->clock_latency_s = d > 0 ? d : -1;
    }
  }
  if ((v = zeus__pfo_env("SIGNAL_HANDLERS", var, sizeof var))) {
    if ((rc = zeus__env_bool(var, true, &b))) return rc;
    o->no_signal_handlers = !b;
  }
  return ZEUS_OK;
}

static int check_opts(const zeus_pfo_optimizer_opts *o) {
  const char *ctx = "Perseus client";
  const struct { const char *name; int v; } deg[] = {{"dp_degree", o->dp_degree}, {"pp_degree", o->pp_degree},
                                                      {"tp_degree", o->tp_degree}, {"world_size", o->world_size}};
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(deg); i++)
    if (deg[i].v < 1 || deg[i].v > 65536)
      return zeus__error(ZEUS_EINVAL, "%s: %s is %d, expected 1..65536", ctx, deg[i].name, deg[i].v);
  long long prod = (long long)o->dp_degree * o->pp_degree * o->tp_degree;
  if (prod != o->world_size)
    return zeus__error(ZEUS_EINVAL, "%s: world_size is %d, but dp_degree x pp_degree x tp_degree = %d x %d x %d = %lld",
                       ctx, o->world_size, o->dp_degree, o->pp_degree, o->tp_degree, prod);
  const struct { const char *name; int v, lim; const char *deg; } rk[] = {
      {"rank", o->rank, o->world_size, "world_size"}, {"dp_rank", o->dp_rank, o->dp_degree, "dp_degree"},
      {"pp_rank", o->pp_rank, o->pp_degree, "pp_degree"}, {"tp_rank", o->tp_rank, o->tp_degree, "tp_degree"}};
  for (size_t i = 0; i < ZEUS__ARRAY_LEN(rk); i++)
    if (rk[i].v < 0 || rk[i].v >= rk[i].lim)
      return zeus__error(ZEUS_EINVAL, "%s: %s is %d, expected 0..%d (%s is %d)", ctx, rk[i].name, rk[i].v,
                         rk[i].lim - 1, rk[i].deg, rk[i].lim);
  if (o->iters_per_round < 1 || o->iters_per_round > 100000)
    return zeus__error(ZEUS_EINVAL, "%s: iters_per_round is %ld, expected 1..100000 (start from "
                       "zeus_pfo_optimizer_opts_init)", ctx, o->iters_per_round);
  if (!(o->connect_timeout_s > 0) || !(o->request_timeout_s > 0) || !(o->schedule_timeout_s >= 0) ||
      !(o->retry_backoff_s >= 0) || o->retries < 0 || o->retries > 100 || !(o->controller_poll_s >= 0) ||
      o->controller_poll_s > 1)
    return zeus__error(ZEUS_EINVAL, "%s: connect_timeout_s (%g) and request_timeout_s (%g) must be > 0, "
                       "schedule_timeout_s (%g) and retry_backoff_s (%g) >= 0, retries (%d) 0..100, "
                       "controller_poll_s (%g) 0..1 (start from zeus_pfo_optimizer_opts_init)", ctx,
                       o->connect_timeout_s, o->request_timeout_s, o->schedule_timeout_s, o->retry_backoff_s,
                       o->retries, o->controller_poll_s);
  if (o->collective) {
    int rc = zeus_collective_check(o->collective);
    if (rc) return zeus__error_ctx(rc, "%s", ctx);
    if (o->collective->world_size != o->world_size || o->collective->rank != o->rank)
      return zeus__error(ZEUS_EINVAL, "%s: the collective has rank %d of %d, but the options say rank %d of %d", ctx,
                         o->collective->rank, o->collective->world_size, o->rank, o->world_size);
  } else if (o->world_size > 1 && !(o->job_id && *o->job_id)) {
    return zeus__error(ZEUS_EINVAL, "%s: world_size is %d: give a collective (rank 0 broadcasts the job id through it) "
                       "or the job id (job_id, ZEUS_PFO_JOB_ID)", ctx, o->world_size);
  }
  if (o->instruction_energy < ZEUS_PFO_ENERGY_AUTO || o->instruction_energy > ZEUS_PFO_ENERGY_FIT)
    return zeus__error(ZEUS_EINVAL, "%s: instruction_energy is %d, expected ZEUS_PFO_ENERGY_AUTO, _READ or _FIT", ctx,
                       o->instruction_energy);
  if (!(o->clock_latency_s <= 10))
    return zeus__error(ZEUS_EINVAL, "%s: clock_latency_s is %g, expected at most 10 (0: find it, < 0: none)", ctx,
                       o->clock_latency_s);
  if (o->n_pipe_schedule && !o->pipe_schedule)
    return zeus__error(ZEUS_EINVAL, "%s: n_pipe_schedule is %zu but pipe_schedule is NULL", ctx, o->n_pipe_schedule);
  for (size_t i = 0; i < o->n_pipe_schedule; i++)
    if (!o->pipe_schedule[i] || !o->pipe_schedule[i][0])
      return zeus__error(ZEUS_EINVAL, "%s: pipe_schedule[%zu] must be a non-empty instruction name", ctx, i);
  return ZEUS_OK;
}

/* ---- schedules ---- */

static int check_schedule(const zeus_pfo_optimizer *o, const zeus_pfo_schedule *s) {
  if (s->rank != o->rank)
    return zeus__error(ZEUS_EINVAL, "Perseus client: the server sent rank %d's schedule to rank %d", s->rank, o->rank);
  if (s->n_frequencies == 0)
    return zeus__error(ZEUS_EINVAL, "Perseus client: the schedule of rank %d has no instructions", o->rank);
  const unsigned *f;
  size_t nf = zeus_pfo_controller_frequencies(o->ctl, &f);
  for (size_t i = 0; i < s->n_frequencies; i++) {
    unsigned want = (unsigned)s->frequencies[i].frequency_mhz;
    bool ok = false;
    for (size_t k = 0; k < nf && !ok; k++) ok = f[k] == want;
    if (!ok)
      return zeus__error(ZEUS_EINVAL, "Perseus client: the schedule of rank %d asks for %u MHz at instruction %zu "
                         "('%s'), which GPU %u does not support (%u..%u MHz)", o->rank, want, i + 1,
                         s->frequencies[i].instruction, o->m.gpu, f[nf - 1], f[0]);
  }
  return ZEUS_OK;
}

/* The class (instruction kind, clock) of `name` at `mhz`, added if new. */
static int class_of(zeus_pfo_optimizer *o, const char *name, unsigned mhz, size_t *out) {
  for (size_t c = 0; c < o->ncls; c++)
    if (o->cls[c].mhz == mhz && !strcmp(o->cls[c].name, name)) {
      *out = c;
      return ZEUS_OK;
    }
  if (o->ncls == o->cap_cls) {
    size_t cap = o->cap_cls ? 2 * o->cap_cls : 32;
    struct pfo_class *v = realloc(o->cls, cap * sizeof *v);
    if (!v) return zeus__oom("installing a schedule");
    o->cls = v;
    char **nm = realloc(o->cls_names, cap * sizeof *nm);
    if (!nm) return zeus__oom("installing a schedule");
    o->cls_names = nm;
    o->cap_cls = cap;
  }
  char *copy = zeus__strdup(name);
  if (!copy) return zeus__oom("installing a schedule");
  o->cls_names[o->ncls] = copy;
  o->cls[o->ncls] = (struct pfo_class){copy, mhz, 0, 0};
  *out = o->ncls++;
  return ZEUS_OK;
}

/* Makes `s` the schedule in effect (takes ownership) and sizes the round's buffers for it. */
static int install(zeus_pfo_optimizer *o, zeus_pfo_schedule *s) {
  size_t n = s->n_frequencies;
  /* A round's result must stay within what the server accepts (ZEUS_PFO_MAX_RESULT_VALUES). */
  double values = 2.0 * (double)o->K * (double)(1 + (o->profile ? n : 0));
  if (values > ZEUS_PFO_MAX_RESULT_VALUES)
    return zeus__error(ZEUS_EINVAL, "Perseus client: %ld iterations per round of %zu instructions make results of "
                       "%.0f numbers, more than the %d a server accepts; lower iters_per_round", o->K, n, values,
                       ZEUS_PFO_MAX_RESULT_VALUES);
  const char **names = malloc(n * sizeof *names), **keys = malloc(n * sizeof *keys);
  unsigned *freqs = malloc(n * sizeof *freqs), *eff = malloc(n * sizeof *eff);
  size_t *key_of = malloc(n * sizeof *key_of), *cls_of = malloc(n * sizeof *cls_of);
  double *it_ = malloc((size_t)o->K * n * sizeof *it_), *ie = malloc((size_t)o->K * n * sizeof *ie);
  double *ib = malloc((size_t)o->K * n * sizeof *ib), *pred = calloc(n, sizeof *pred);
  if (!names || !keys || !freqs || !key_of || !it_ || !ie || !eff || !cls_of || !ib || !pred) {
    free(names), free(keys), free(freqs), free(key_of), free(it_), free(ie);
    free(eff), free(cls_of), free(ib), free(pred);
    return zeus__oom("installing a schedule");
  }
  size_t nkeys = 0;
  int rc = ZEUS_OK;
  for (size_t i = 0; i < n; i++) {
    names[i] = s->frequencies[i].instruction;
    freqs[i] = (unsigned)s->frequencies[i].frequency_mhz;
    eff[i] = freqs[i];
    size_t k = 0;
    while (k < nkeys && strcmp(keys[k], names[i]) != 0) k++;
    if (k == nkeys) keys[nkeys++] = names[i];
    key_of[i] = k;
    if (!rc) rc = class_of(o, names[i], freqs[i], &cls_of[i]);
  }
  if (rc) {
    free(names), free(keys), free(freqs), free(key_of), free(it_), free(ie);
    free(eff), free(cls_of), free(ib), free(pred);
    return rc;
  }
  free(o->names), free(o->keys), free(o->freqs), free(o->key_of), free(o->inst_t), free(o->inst_e);
  free(o->eff), free(o->cls_of), free(o->inst_b), free(o->pred);
  zeus_pfo_schedule_clear(&o->sched);
  o->sched = *s;
  memset(s, 0, sizeof *s);
  o->names = names, o->keys = keys, o->freqs = freqs, o->key_of = key_of, o->inst_t = it_, o->inst_e = ie;
  o->eff = eff, o->cls_of = cls_of, o->inst_b = ib, o->pred = pred;
  o->n = n;
  o->nkeys = nkeys;
  return ZEUS_OK;
}

/* ---- talking to the server ---- */

/* Adds what a 404 most likely means to the message of a failed exchange about the job. */
static int job_error(const zeus_pfo_optimizer *o, int rc, int status) {
  if (rc != ZEUS_EHTTP || status != 404) return rc;
  zeus__saved_error e;
  zeus__error_save(&e);
  return zeus__error(rc, "%s (job '%s' is unknown to the server: a restarted server has forgotten its jobs; restart "
                     "the training job to register a new one)", e.msg, o->job_id);
}

/* POSTs `body` (taken: freed here) to <route>/<job id>. A 409 after a retry counts as success
 * (the earlier try reached the server: "registered twice", "posted twice"). */
static int post_to_job(zeus_pfo_optimizer *o, const char *route, char *body) {
  zeus__buf path = {0};
  char *resp = NULL;
  int status = 0, rc = zeus__buf_printf(&path, "%s/%s", route, o->job_esc);
  if (!rc) rc = zeus__pfo_http_request(o->http, "POST", path.data, body, false, 409, &resp, &status);
  o->last_status = status;
  zeus__buf_free(&path);
  zeus_free(body);
  free(resp);
  return job_error(o, rc, status);
}

/* Tells the server that this rank drops out, so that every other rank hears it at once (their
 * schedule requests are answered 410 with `reason`) instead of waiting for a schedule that cannot
 * come. One try, two seconds at most, errors only logged: the rank is stopping anyway. The last
 * error (zeus_errmsg) is kept. */
/* `closed`: the rank leaves because its training ended (close), not on an error. */
static void leave_job(zeus_pfo_optimizer *o, const char *reason, bool closed) {
  if (o->left || !o->http || !o->job_esc) return;
  o->left = true;
  zeus__saved_error e;
  zeus__error_save(&e);
  json_t *b = json_pack("{si}", "rank", o->rank);
  if (b) json_object_set_new(b, "reason", json_stringn(reason, strnlen(reason, 512)));
  if (b && closed) json_object_set_new(b, "closed", json_true());
  char *body = b ? zeus_json_dumps(b, JSON_COMPACT) : NULL;
  json_decref(b);
  zeus__buf path = {0};
  char *resp = NULL;
  int status = 0;
  if (body && !zeus__buf_printf(&path, "/leave/%s", o->job_esc) &&
      zeus__pfo_http_request_once(o->http, "POST", path.data, body, 2.0, &resp, &status))
    zeus__log(ZEUS_LOG_DEBUG, "pfo", "rank %d: telling the server it left the job failed: %s", o->rank, zeus_errmsg());
  free(resp);
  free(body);
  zeus__buf_free(&path);
  zeus__error_restore(&e);
}

static void *presence_main(void *arg) {
  zeus_pfo_optimizer *o = arg;
  int status = 0;
  int rc = zeus__pfo_http_hold(o->presence_http, o->presence_path, &o->presence_stop, &status);
  if (rc)
    zeus__log(ZEUS_LOG_WARN, "pfo", "rank %d: the presence connection to the server broke (%s): should this process "
              "die now, the other ranks would learn it only by their schedule timeout", o->rank, zeus_errmsg());
  else if (status == 404 || status == 405)
    zeus__log(ZEUS_LOG_DEBUG, "pfo", "rank %d: the server has no GET /presence (an older server): the other ranks "
              "learn of this rank's death only by their schedule timeout", o->rank);
  else if (status)
    zeus__log(ZEUS_LOG_DEBUG, "pfo", "rank %d: the server ended this rank's presence (%d)", o->rank, status);
  return NULL;
}

/* Starts holding the presence (after the rank registered). Failing to is only logged: the rank
 * trains as without it. */
static void presence_start(zeus_pfo_optimizer *o) {
  zeus__buf p = {0};
  if (!o->presence_http || zeus__buf_printf(&p, "/presence/%s?rank=%d", o->job_esc, o->rank)) {
    zeus__buf_free(&p);
    return;
  }
  o->presence_path = p.data;
  if (pthread_create(&o->presence_th, NULL, presence_main, o) == 0) o->presence_started = true;
  else zeus__log(ZEUS_LOG_WARN, "pfo", "rank %d: could not start the presence thread", o->rank);
}

/* Ends the presence (the server answered it already when the rank left). */
static void presence_end(zeus_pfo_optimizer *o) {
  if (!o->presence_started) return;
  __atomic_store_n(&o->presence_stop, true, __ATOMIC_RELEASE);
  pthread_join(o->presence_th, NULL);
  o->presence_started = false;
}

static int register_job(zeus_pfo_optimizer *o, const zeus_pfo_optimizer_opts *opts) {
  zeus_pfo_job_info ji = {.job_id = "", .pp_degree = opts->pp_degree, .dp_degree = opts->dp_degree,
                          .tp_degree = opts->tp_degree, .world_size = opts->world_size,
                          .job_metadata = (char *)opts->job_metadata};
  char *body, *resp = NULL;
  int status, rc = zeus_pfo_job_info_to_json(&ji, &body);
  if (rc) return rc;
  rc = zeus__pfo_http_request(o->http, "POST", "/register_job", body, false, 0, &resp, &status);
  zeus_free(body);
  if (rc) return rc;
  json_t *j = json_loads(resp, JSON_DECODE_ANY, NULL);
  const char *id = json_string_value(j);
  if (!id || !*id)
    rc = zeus__error(ZEUS_EPARSE, "Perseus server %s: POST /register_job answered '%.200s', expected the job id as a "
                     "JSON string", zeus__pfo_http_url(o->http), resp);
  else if (!(o->job_id = zeus__strdup(id)))
    rc = zeus__oom("registering the job");
  json_decref(j);
  free(resp);
  return rc;
}

static int register_rank(zeus_pfo_optimizer *o, const zeus_pfo_optimizer_opts *opts) {
  const unsigned *f;
  size_t nf = zeus_pfo_controller_frequencies(o->ctl, &f);
  zeus_pfo_rank_info ri = {.rank = o->rank, .dp_rank = o->dp_rank, .pp_rank = o->pp_rank, .tp_rank = o->tp_rank,
                           .n_available_frequencies = nf, .pipe_schedule = (char **)opts->pipe_schedule,
                           .n_pipe_schedule = opts->n_pipe_schedule};
  if (!opts->n_pipe_schedule) ri.pipe_schedule = NULL;
  ri.available_frequencies = malloc(nf * sizeof(int));
  if (!ri.available_frequencies) return zeus__oom("registering the rank");
  for (size_t i = 0; i < nf; i++) ri.available_frequencies[i] = (int)f[i];
  char *body = NULL;
  int rc = zeus_pfo_rank_info_to_json(&ri, &body);
  free(ri.available_frequencies);
  if (rc) return rc;
  return post_to_job(o, "/register_rank", body);
}

/* Fetches this rank's schedule of the coming round (waits until every rank has asked). */
static int fetch_schedule(zeus_pfo_optimizer *o, zeus_pfo_schedule *out) {
  zeus__buf path = {0};
  char *resp = NULL;
  int status = 0, rc = zeus__buf_printf(&path, "/schedule/%s?rank=%d", o->job_esc, o->rank);
  if (!rc) rc = zeus__pfo_http_request(o->http, "GET", path.data, NULL, true, 0, &resp, &status);
  o->last_status = status;
  zeus__buf_free(&path);
  if (rc) return job_error(o, rc, status);
  zeus_pfo_schedule s;
  rc = zeus_pfo_schedule_from_json(resp, strlen(resp), "the server's FrequencySchedule", &s);
  free(resp);
  if (rc) return rc;
  if ((rc = check_schedule(o, &s))) {
    zeus_pfo_schedule_clear(&s);
    return rc;
  }
  *out = s;
  return ZEUS_OK;
}

/* The round's ProfilingResult as JSON: iteration times and energies, and per instruction name,
 * per iteration, the values of its occurrences in schedule order. */
static int result_json(const zeus_pfo_optimizer *o, char **out) {
  size_t it = (size_t)o->it, nk = o->profile ? o->nkeys : 0;
  zeus_pfo_prof_result r = {.rank = o->rank, .iter_time = o->iter_t, .n_iter_time = it, .iter_energy = o->iter_e,
                            .n_iter_energy = it, .n_time_breakdown = nk, .n_energy_breakdown = nk};
  zeus_pfo_breakdown *tb = calloc(nk + 1, sizeof *tb), *eb = calloc(nk + 1, sizeof *eb);
  int rc = (!tb || !eb) ? zeus__oom("building the profiling result") : ZEUS_OK;
  for (size_t k = 0; k < nk && !rc; k++) {
    size_t c = 0;
    for (size_t i = 0; i < o->n; i++) c += o->key_of[i] == k;
    for (int w = 0; w < 2 && !rc; w++) {
      zeus_pfo_breakdown *b = w ? &eb[k] : &tb[k];
      const double *src = w ? o->inst_e : o->inst_t;
      b->instruction = (char *)o->keys[k];
      b->n_iters = it;
      b->offsets = malloc((it + 1) * sizeof *b->offsets);
      b->values = malloc((it * c + 1) * sizeof *b->values);
      if (!b->offsets || !b->values) { rc = zeus__oom("building the profiling result"); break; }
      size_t pos = 0;
      for (size_t i = 0; i < it; i++) {
        b->offsets[i] = pos;
        for (size_t j = 0; j < o->n; j++)
          if (o->key_of[j] == k) b->values[pos++] = src[i * o->n + j];
      }
      b->offsets[it] = pos;
    }
  }
  r.time_breakdown = tb;
  r.energy_breakdown = eb;
  if (!rc) rc = zeus_pfo_prof_result_to_json(&r, out);
  for (size_t k = 0; k < nk && tb && eb; k++) {
    free(tb[k].offsets), free(tb[k].values), free(eb[k].offsets), free(eb[k].values);
  }
  free(tb);
  free(eb);
  return rc;
}

/* End of a round: post the results, fetch the next schedule (installed at the next step). */
static int exchange(zeus_pfo_optimizer *o) {
  char *body;
  int rc = result_json(o, &body);
  if (rc || (rc = post_to_job(o, "/result", body))) return rc;
  zeus_pfo_schedule s;
  if ((rc = fetch_schedule(o, &s))) return rc;
  zeus_pfo_schedule_clear(&o->pending);
  o->pending = s;
  o->have_pending = true;
  return ZEUS_OK;
}

/* ---- open / close ---- */

/* Every rank learns whether every rank succeeded so far; a local failure keeps its own message. */
static int agree(const zeus_collective *c, int local, const char *what) {
  if (!c || c->world_size == 1) return local;
  zeus__saved_error e;
  zeus__error_save(&e);
  double failed = local ? 1 : 0;
  int rc = zeus_collective_allreduce(c, &failed, 1, ZEUS_REDUCE_SUM);
  if (local) {
    zeus__error_restore(&e);
    return local;
  }
  if (rc) return zeus__error_ctx(rc, "Perseus client: %s", what);
  if (failed > 0)
    return zeus__error(ZEUS_ESTATE, "Perseus client: %s: %.0f other rank(s) of the job failed (see their errors), so "
                       "this rank stops too", what, failed);
  return ZEUS_OK;
}

typedef struct bcast_msg {
  int32_t rc;
  char text[1020];
} bcast_msg;

void zeus_pfo_optimizer_close(zeus_pfo_optimizer *o) {
  if (!o) return;
  /* A rank that stops while the job goes on would leave the others waiting for it: say so. */
  if (!o->detached) {
    char why[96];
    snprintf(why, sizeof why, "rank %d closed its optimizer (its training stopped)", o->rank);
    leave_job(o, why, true);
  }
  presence_end(o);
  zeus__pfo_http_close(o->presence_http);
  free(o->presence_path);
  zeus_pfo_controller_close(o->ctl);
  zeus_monitor_close(o->m.mon);
  zeus__pfo_http_close(o->http);
  zeus_pfo_schedule_clear(&o->sched);
  zeus_pfo_schedule_clear(&o->pending);
  free(o->names), free(o->keys), free(o->freqs), free(o->key_of);
  free(o->inst_t), free(o->inst_e), free(o->iter_t), free(o->iter_e);
  zeus__pfo_follower_close(o->fol);
  free(o->eff), free(o->pred), free(o->cls_of), free(o->inst_b), free(o->iter_b);
  for (size_t c = 0; c < o->ncls; c++) free(o->cls_names[c]);
  free(o->cls_names), free(o->cls), free(o->tl_t), free(o->tl_f), free(o->rcls);
  free(o->job_id);
  free(o->job_esc);
  free(o);
}

/* Everything that needs no other rank: the HTTP client, the controller, the meter, buffers. */
static int setup_local(zeus_pfo_optimizer *o, const zeus_pfo_optimizer_opts *opts) {
  zeus_devices *d = opts->devices;
  int rc;
  if (!d && (rc = zeus_devices_default(&d))) return rc;
  zeus__pfo_http_opts ho = {opts->connect_timeout_s, opts->request_timeout_s, opts->schedule_timeout_s, opts->retries,
                            opts->retry_backoff_s, opts->token};
  if ((rc = zeus__pfo_http_open(&o->http, opts->server_url, &ho))) return rc;
  if ((rc = zeus__pfo_http_open(&o->presence_http, opts->server_url, &ho))) return rc;
  /* This rank's credential: registered with the rank, required by the server on every later
   * request about it, so that nobody else who learns the job id can act for this rank. */
  char tok[33], line[64];
  if ((rc = zeus__random_token(tok, 32))) return rc;
  snprintf(line, sizeof line, "X-Zeus-Rank-Token: %s", tok);
  rc = zeus__pfo_http_add_header(o->http, line);
  if (!rc) rc = zeus__pfo_http_add_header(o->presence_http, line);
  memset(tok, 0, sizeof tok);
  memset(line, 0, sizeof line);
  if (rc) return rc;
  if (opts->device_id >= zeus_gpu_count(d))
    return zeus__error(ZEUS_ENOENT, "Perseus client: device_id %u does not exist (%u visible GPU%s on backend %s)",
                       opts->device_id, zeus_gpu_count(d), zeus_gpu_count(d) == 1 ? "" : "s", zeus_devices_backend(d));
  if ((rc = meter_open(&o->m, d, opts->device_id))) return rc;
  o->iter_t = malloc((size_t)o->K * sizeof *o->iter_t);
  o->iter_e = malloc((size_t)o->K * sizeof *o->iter_e);
  o->iter_b = malloc((size_t)o->K * sizeof *o->iter_b);
  o->tl_t = malloc(TL_CAP * sizeof *o->tl_t);
  o->tl_f = malloc(TL_CAP * sizeof *o->tl_f);
  if (!o->iter_t || !o->iter_e || !o->iter_b || !o->tl_t || !o->tl_f) return zeus__oom("creating the Perseus client");
  zeus_pfo_controller_opts co = {.no_signal_handlers = opts->no_signal_handlers,
                                 .poll_interval_s = opts->controller_poll_s > 0 ? opts->controller_poll_s : -1,
                                 .lock_latency_s = opts->clock_latency_s};
  if ((rc = zeus_pfo_controller_open(&o->ctl, d, opts->device_id, &co))) return rc;
  o->latency = zeus_pfo_controller_latency(o->ctl);
  /* How instruction energy is measured: AUTO fits where a counter read is slow. */
  int how = opts->instruction_energy;
  if (how == ZEUS_PFO_ENERGY_AUTO && !o->m.mon) {
    double best = 1e9;
    for (int i = 0; i < 3; i++) {
      uint64_t mj;
      double t0 = zeus_monotonic_s();
      if (zeus_gpu_total_energy(d, opts->device_id, &mj)) break;
      double dt = zeus_monotonic_s() - t0;
      if (dt < best) best = dt;
    }
    /* On a simulated GPU's virtual clock a read's cost is virtual: its hardware profile says it. */
    zeus_sim_node *node = zeus_devices_sim_node(d);
    unsigned ng;
    zeus_sim_hardware hw;
    if (node && !zeus_devices_sim_index(d, opts->device_id, &ng) && !zeus_sim_gpu_hardware(node, ng, &hw) &&
        hw.energy_read_s > best)
      best = hw.energy_read_s;
    how = best >= 100e-6 && best < 1e9 ? ZEUS_PFO_ENERGY_FIT : ZEUS_PFO_ENERGY_READ;
  }
  o->fit = o->profile && how == ZEUS_PFO_ENERGY_FIT && !o->m.mon;
  if (o->fit && (rc = zeus__pfo_follower_open(&o->fol, d, opts->device_id))) return rc;
  zeus__log(ZEUS_LOG_DEBUG, "pfo", "rank %d: instruction energy %s, clock lock latency %.4f s", o->rank,
            !o->profile ? "not measured" : o->fit ? "fitted from the counter's ticks" : "read around each instruction",
            o->latency);
  return ZEUS_OK;
}

int zeus_pfo_optimizer_open(zeus_pfo_optimizer **out, const zeus_pfo_optimizer_opts *opts) {
  if (!out || !opts) return zeus__error(ZEUS_EINVAL, "zeus_pfo_optimizer_open: out and opts are required");
  /* A collective that is itself unusable cannot carry the agreement: fail at once. */
  const zeus_collective *coll = opts->collective;
  if (coll && zeus_collective_check(coll)) return zeus__error_ctx(ZEUS_EINVAL, "Perseus client: collective");
  zeus_pfo_optimizer *o = calloc(1, sizeof *o);
  if (!o) return zeus__oom("creating the Perseus client");
  o->rank = opts->rank, o->dp_rank = opts->dp_rank, o->pp_rank = opts->pp_rank, o->tp_rank = opts->tp_rank;
  o->K = opts->iters_per_round;
  o->profile = !opts->no_instruction_profiling;
  o->sync = opts->sync;
  o->sync_ctx = opts->sync_ctx;
  o->round = 0;
  o->last.round = -1;
  o->last.planned_clock_fraction = NAN;
  int local = check_opts(opts);
  if (!local) local = setup_local(o, opts);

  /* The job id: given, or registered by rank 0 and broadcast. Every rank broadcasts. */
  if (opts->job_id && *opts->job_id) {
    if (!local && !(o->job_id = zeus__strdup(opts->job_id))) local = zeus__oom("creating the Perseus client");
  } else {
    bcast_msg msg;
    memset(&msg, 0, sizeof msg);
    if (opts->rank == 0) {
      if (!local) local = register_job(o, opts);
      if (!local && strlen(o->job_id) >= sizeof msg.text)
        local = zeus__error(ZEUS_EINVAL, "Perseus client: the job id '%.60s...' is longer than %zu bytes", o->job_id,
                            sizeof msg.text - 1);
      msg.rc = local;
      snprintf(msg.text, sizeof msg.text, "%s", local ? zeus_errmsg() : o->job_id);
    }
    if (coll && coll->world_size > 1) {
      zeus__saved_error e;
      zeus__error_save(&e);
      int brc = zeus_collective_broadcast(coll, &msg, sizeof msg, 0);
      if (local) zeus__error_restore(&e);
      else if (brc) local = zeus__error_ctx(brc, "Perseus client: broadcasting the job id");
    }
    if (opts->rank != 0 && !local) {
      msg.text[sizeof msg.text - 1] = '\0';
      if (msg.rc) local = zeus__error(msg.rc, "Perseus client: rank 0 could not register the job: %s", msg.text);
      else if (!(o->job_id = zeus__strdup(msg.text))) local = zeus__oom("creating the Perseus client");
    }
  }
  if (!local && !(o->job_esc = zeus__pfo_http_escape(o->http, o->job_id)))
    local = zeus__oom("creating the Perseus client");
  if (!local) local = register_rank(o, opts);
  if (!local) presence_start(o);
  local = agree(coll, local, "registering the ranks");
  if (!local) {
    zeus_pfo_schedule s;
    local = fetch_schedule(o, &s);
    if (!local && (local = install(o, &s))) zeus_pfo_schedule_clear(&s);
  }
  local = agree(coll, local, "fetching the first schedule");
  if (local) {
    /* Ranks that are not in this collective (or without one) would wait for this one. */
    if (o->last_status != 410) leave_job(o, zeus_errmsg(), false);
    o->detached = true; /* close: do not say it twice */
    zeus__saved_error e;
    zeus__error_save(&e);
    zeus_pfo_optimizer_close(o);
    zeus__error_restore(&e);
    return local;
  }
  zeus__log(ZEUS_LOG_INFO, "pfo", "rank %d joined job %s: %zu instructions per iteration, %ld iterations per round",
            o->rank, o->job_id, o->n, o->K);
  *out = o;
  return ZEUS_OK;
}

/* ---- hooks ---- */

/* Expected durations from the classes' last measurements, and the clocks to ask for: with a lock
 * latency, an instruction expected to last less than it cannot have a clock of its own, so it is
 * merged with the instructions after it until the group lasts at least the latency, and the group
 * runs at its members' highest clock (never slower than planned). */
static void plan_clocks(zeus_pfo_optimizer *o) {
  bool known = o->latency > 0;
  for (size_t i = 0; i < o->n; i++) {
    o->pred[i] = o->cls[o->cls_of[i]].dur_s;
    if (!(o->pred[i] > 0)) known = false;
  }
  memcpy(o->eff, o->freqs, o->n * sizeof *o->eff);
  if (!known) return;
  for (size_t i = 0; i < o->n;) {
    size_t j = i;
    double dur = o->pred[i];
    unsigned top = o->freqs[i];
    while (dur < o->latency && j + 1 < o->n) {
      j++;
      dur += o->pred[j];
      if (o->freqs[j] > top) top = o->freqs[j];
    }
    for (size_t q = i; q <= j; q++) o->eff[q] = top;
    i = j + 1;
  }
}

int zeus_pfo_on_step_begin(zeus_pfo_optimizer *o) {
  if (!o) return zeus__error(ZEUS_EINVAL, "zeus_pfo_on_step_begin: no optimizer given");
  if (o->in_step)
    return zeus__error(ZEUS_ESTATE, "on_step_begin: the iteration begun before has not ended (call on_step_end)");
  int rc;
  if (o->have_pending) {
    if ((rc = install(o, &o->pending))) return rc;
    o->have_pending = false;
  }
  if (o->fit) o->iter_b0 = zeus_devices_now(o->m.d);
  else if ((rc = meter_begin(&o->m, SLOT_ITER))) return zeus__error_ctx(rc, "on_step_begin: measuring the iteration");
  plan_clocks(o);
  o->idx = 0;
  o->bad = false;
  o->in_inst = false;
  o->in_step = true;
  return ZEUS_OK;
}

static int begin_slow(zeus_pfo_optimizer *o, const char *name) {
  if (!o || !name) return zeus__error(ZEUS_EINVAL, "zeus_pfo_on_instruction_begin: optimizer and name are required");
  if (!o->in_step)
    return zeus__error(ZEUS_ESTATE, "on_instruction_begin('%s'): outside an iteration (call on_step_begin first)",
                       name);
  o->bad = true;
  return zeus__error(ZEUS_ESTATE, "on_instruction_begin('%s'): instruction %zu ('%s') has not ended (call "
                     "on_instruction_end first)", name, o->idx + 1, o->names[o->idx]);
}

int zeus_pfo_on_instruction_begin(zeus_pfo_optimizer *o, const char *name) {
  if (__builtin_expect(!o || !name || !o->in_step || o->in_inst, 0)) return begin_slow(o, name);
  int rc;
  if (o->sync && (rc = o->sync(o->sync_ctx))) {
    o->bad = true;
    return zeus__error_ctx(rc, "on_instruction_begin('%s'): the synchronisation callback failed", name);
  }
  size_t i = o->idx;
  if (__builtin_expect(i >= o->n, 0)) {
    o->bad = true;
    return zeus__error(ZEUS_ESTATE, "on_instruction_begin('%s'): rank %d's schedule has %zu instructions per iteration "
                       "and all have run; the iteration should end here (on_step_end)", name, o->rank, o->n);
  }
  if (__builtin_expect(strcmp(name, o->names[i]) != 0, 0)) {
    o->bad = true;
    return zeus__error(ZEUS_EINVAL, "on_instruction_begin('%s'): rank %d's schedule expects '%s' as instruction %zu of "
                       "%zu (name mismatch)", name, o->rank, o->names[i], i + 1, o->n);
  }
  bool stamp = o->profile || o->latency > 0;
  double now = stamp ? zeus_devices_now(o->m.d) : 0;
  /* This instruction's clock (normally asked for ahead of time: then this is no change), and the
   * next one's, to be in effect when it is expected to start. */
  if ((rc = zeus_pfo_controller_set_frequency(o->ctl, o->eff[i]))) {
    o->bad = true;
    return rc;
  }
  if (o->latency > 0 && o->pred[i] > 0) {
    unsigned next = i + 1 < o->n ? o->eff[i + 1] : o->have_pending ? 0 : o->eff[0];
    /* A margin of a tenth of the latency (and 0.5 ms) for instructions that end a little early. */
    double at = now + o->pred[i] - 0.1 * o->latency - 0.0005;
    if (next && next != o->eff[i] && (rc = zeus_pfo_controller_set_frequency_at(o->ctl, next, at))) {
      o->bad = true;
      return rc;
    }
  }
  if (stamp) o->inst_b[(size_t)o->it * o->n + i] = now;
  if (o->profile && !o->fit && (rc = meter_begin(&o->m, SLOT_INST))) {
    o->bad = true;
    return rc;
  }
  o->in_inst = true;
  return ZEUS_OK;
}

int zeus_pfo_on_instruction_end(zeus_pfo_optimizer *o, const char *name) {
  if (__builtin_expect(!o || !name || !o->in_inst, 0)) {
    if (!o || !name) return zeus__error(ZEUS_EINVAL, "zeus_pfo_on_instruction_end: optimizer and name are required");
    if (o->in_step) o->bad = true;
    return zeus__error(ZEUS_ESTATE, "on_instruction_end('%s'): no instruction is running (call on_instruction_begin "
                       "first)", name);
  }
  size_t i = o->idx;
  o->in_inst = false;
  o->idx = i + 1;
  if (__builtin_expect(strcmp(name, o->names[i]) != 0, 0)) {
    o->bad = true;
    return zeus__error(ZEUS_EINVAL,
                       "on_instruction_end('%s'): the instruction running is '%s' (instruction %zu of %zu)", name,
                       o->names[i], i + 1, o->n);
  }
  size_t at = (size_t)o->it * o->n + i;
  if (o->profile && !o->fit) {
    double t, e;
    int rc = meter_end(&o->m, SLOT_INST, &t, &e);
    if (rc) {
      o->bad = true;
      return rc;
    }
    o->inst_t[at] = t;
    o->inst_e[at] = e;
  } else if (o->profile || o->latency > 0) {
    o->inst_t[at] = zeus_devices_now(o->m.d) - o->inst_b[at];
  }
  return ZEUS_OK;
}

/* Instruction energies (and the iterations') of the round from the counter's ticks. */
static int fit_round(zeus_pfo_optimizer *o) {
  size_t n = (size_t)o->it * o->n;
  size_t *loc = malloc(o->ncls * sizeof *loc), *cls = malloc((n + 1) * sizeof *cls), *glob = malloc((o->n + 1) * sizeof *glob);
  double *st = malloc(65536 * sizeof *st), *se = malloc(65536 * sizeof *se);
  double *prior = malloc((o->n + 2) * sizeof *prior), *power = malloc((o->n + 2) * sizeof *power);
  int rc = ZEUS_OK;
  if (!loc || !cls || !glob || !st || !se || !prior || !power) {
    rc = zeus__oom("fitting the round's instruction energies");
    goto out;
  }
  for (size_t c = 0; c < o->ncls; c++) loc[c] = SIZE_MAX;
  size_t m = 0;
  for (size_t i = 0; i < o->n; i++) {
    size_t g = o->cls_of[i];
    if (loc[g] == SIZE_MAX) {
      loc[g] = m;
      glob[m++] = g;
    }
  }
  for (size_t j = 0; j < n; j++) cls[j] = loc[o->cls_of[j % o->n]];
  double since = o->iter_b[0] < o->inst_b[0] ? o->iter_b[0] : o->inst_b[0];
  size_t ns = zeus__pfo_follower_samples(o->fol, since, st, se, 65536);
  /* Prior: a class's earlier fit, else the mean power over the samples. */
  double avg = ns >= 2 && st[ns - 1] > st[0] ? (se[ns - 1] - se[0]) / (st[ns - 1] - st[0]) : 0;
  for (size_t c = 0; c < m; c++) prior[c] = o->cls[glob[c]].power_w > 0 ? o->cls[glob[c]].power_w : avg;
  prior[m] = o->other_w > 0 ? o->other_w : avg;
  long rows = zeus__pfo_fit_power(since, o->inst_b, o->inst_t, cls, n, m, st, se, ns, prior, power);
  if (rows < 0) {
    rc = zeus__oom("fitting the round's instruction energies");
    goto out;
  }
  if (rows == 0)
    zeus__log(ZEUS_LOG_WARN, "pfo", "rank %d: no energy counter tick inside round %ld: instruction energies are "
              "estimates from earlier rounds", o->rank, o->round);
  for (size_t c = 0; c < m; c++)
    if (rows > 0) o->cls[glob[c]].power_w = power[c];
  if (rows > 0) o->other_w = power[m];
  for (long k = 0; k < o->it; k++) {
    double in_t = 0, in_e = 0;
    for (size_t i = 0; i < o->n; i++) {
      size_t at = (size_t)k * o->n + i;
      o->inst_e[at] = power[cls[at]] * o->inst_t[at];
      in_t += o->inst_t[at];
      in_e += o->inst_e[at];
    }
    double rest = o->iter_t[k] - in_t;
    o->iter_e[k] = in_e + (rest > 0 ? power[m] * rest : 0);
  }
out:
  free(loc), free(cls), free(glob), free(st), free(se), free(prior), free(power);
  return rc;
}

/* The fraction of the round's instruction time at the planned clock, by the controller's account. */
static void clock_accounting(zeus_pfo_optimizer *o) {
  o->clock_frac = NAN;
  o->clock_late = 0;
  o->nrcls = 0;
  if (!(o->profile || o->latency > 0) || o->it == 0) return;
  /* the round's classes, in schedule order */
  if (o->cap_rcls < o->n) {
    zeus_pfo_class_stats *v = realloc(o->rcls, o->n * sizeof *v);
    if (!v) return;
    o->rcls = v;
    o->cap_rcls = o->n;
  }
  size_t *slot = malloc(o->n * sizeof *slot);
  if (!slot) return;
  for (size_t i = 0; i < o->n; i++) {
    size_t c = 0;
    while (c < o->nrcls && !(o->rcls[c].planned_mhz == o->freqs[i] && !strcmp(o->rcls[c].instruction,
                                                                                o->cls[o->cls_of[i]].name)))
      c++;
    if (c == o->nrcls)
      o->rcls[o->nrcls++] = (zeus_pfo_class_stats){o->cls[o->cls_of[i]].name, o->freqs[i], 0, 0, 0, 0};
    slot[i] = c;
  }
  size_t n = (size_t)o->it * o->n;
  size_t k = zeus_pfo_controller_timeline(o->ctl, o->inst_b[0], o->tl_t, o->tl_f, TL_CAP);
  double total = 0, at_plan = 0;
  size_t j = 0;
  for (size_t x = 0; x < n; x++) {
    double b = o->inst_b[x], e = b + o->inst_t[x];
    unsigned want = o->freqs[x % o->n];
    total += o->inst_t[x];
    while (j + 1 < k && o->tl_t[j + 1] <= b) j++;
    if (!(k > 0 && o->tl_t[j] <= b && o->tl_f[j] == want)) o->clock_late++;
    double mine = 0;
    for (size_t q = j; q < k && o->tl_t[q] < e; q++) {
      double s0 = o->tl_t[q] > b ? o->tl_t[q] : b, s1 = q + 1 < k && o->tl_t[q + 1] < e ? o->tl_t[q + 1] : e;
      if (s1 > s0 && o->tl_f[q] == want) mine += s1 - s0;
    }
    at_plan += mine;
    zeus_pfo_class_stats *c = &o->rcls[slot[x % o->n]];
    c->count++;
    c->mean_time_s += o->inst_t[x];
    c->mean_energy_j += o->profile ? o->inst_e[x] : 0;
    c->planned_clock_fraction += mine;
  }
  for (size_t c = 0; c < o->nrcls; c++) {
    zeus_pfo_class_stats *v = &o->rcls[c];
    v->planned_clock_fraction = v->mean_time_s > 0 ? v->planned_clock_fraction / v->mean_time_s : NAN;
    if (v->count) v->mean_time_s /= (double)v->count, v->mean_energy_j /= (double)v->count;
  }
  free(slot);
  if (total > 0) o->clock_frac = at_plan / total;
}

int zeus_pfo_on_step_end(zeus_pfo_optimizer *o) {
  if (!o) return zeus__error(ZEUS_EINVAL, "zeus_pfo_on_step_end: no optimizer given");
  if (!o->in_step) return zeus__error(ZEUS_ESTATE, "on_step_end: no iteration is running (call on_step_begin first)");
  o->in_step = false;
  if (o->in_inst) {
    o->in_inst = false;
    return zeus__error(ZEUS_ESTATE,
                       "on_step_end: instruction %zu ('%s') has not ended (call on_instruction_end first); "
                       "the iteration is not measured",
                       o->idx + 1, o->names[o->idx]);
  }
  if (o->bad) {
    zeus__log(ZEUS_LOG_DEBUG, "pfo", "rank %d: an iteration with a failed hook is not measured", o->rank);
    return ZEUS_OK;
  }
  if (o->idx < o->n)
    return zeus__error(ZEUS_ESTATE, "on_step_end: only %zu of rank %d's %zu scheduled instructions ran this iteration; "
                       "the next expected is '%s' (instruction %zu of %zu); the iteration is not measured", o->idx,
                       o->rank, o->n, o->names[o->idx], o->idx + 1, o->n);
  double t, e = 0;
  int rc;
  if (o->fit) {
    double now = zeus_devices_now(o->m.d);
    t = now - o->iter_b0;
    o->iter_b[o->it] = o->iter_b0;
  } else {
    if ((rc = meter_end(&o->m, SLOT_ITER, &t, &e))) return zeus__error_ctx(rc, "on_step_end: measuring the iteration");
    o->iter_b[o->it] = (o->profile || o->latency > 0) && o->n ? o->inst_b[(size_t)o->it * o->n] : 0;
  }
  o->iter_t[o->it] = t;
  o->iter_e[o->it] = e;
  /* Each class's expected duration (for issuing clocks ahead): its latest measurements. */
  if (o->profile || o->latency > 0)
    for (size_t i = 0; i < o->n; i++) {
      struct pfo_class *c = &o->cls[o->cls_of[i]];
      double d = o->inst_t[(size_t)o->it * o->n + i];
      c->dur_s = c->dur_s > 0 ? 0.5 * c->dur_s + 0.5 * d : d;
    }
  if (++o->it < o->K) return ZEUS_OK;
  /* The round is complete. */
  if (o->fit && (rc = fit_round(o))) return rc;
  clock_accounting(o);
  double st = 0, se = 0;
  for (long i = 0; i < o->it; i++) st += o->iter_t[i], se += o->iter_e[i];
  o->last = (zeus_pfo_round_stats){.round = o->round, .iterations = o->it, .iter_time_s = st / (double)o->it,
                                   .iter_energy_j = se / (double)o->it, .planned_clock_fraction = o->clock_frac,
                                   .clock_late = o->clock_late, .energy_fitted = o->fit};
  zeus__log(ZEUS_LOG_INFO, "pfo", "rank %d round %ld: %.1f %% of instruction time at the planned clock, %ld of %ld "
            "instructions began before their clock was in effect (lock latency %.4f s, %lu slow lock calls)",
            o->rank, o->round, 100 * o->clock_frac, o->clock_late, o->it * (long)o->n, o->latency,
            zeus_pfo_controller_late_calls(o->ctl));
  if (!o->detached && (rc = exchange(o))) {
    o->detached = true;
    zeus__log(ZEUS_LOG_WARN, "pfo", "rank %d: %s; staying on the last schedule without the server", o->rank,
              zeus_errmsg());
    /* 410: another rank left and the server said so; otherwise this rank drops out and says so. */
    if (o->last_status != 410) leave_job(o, zeus_errmsg(), false);
  }
  o->round++;
  o->it = 0;
  return rc;
}

/* ---- accessors ---- */

void zeus_pfo_optimizer_observe(zeus_pfo_optimizer *o) {
  if (o) zeus__pfo_follower_observe(o->fol);
}

size_t zeus_pfo_last_round_classes(const zeus_pfo_optimizer *o, zeus_pfo_class_stats *out, size_t cap) {
  if (!o) return 0;
  for (size_t c = 0; c < o->nrcls && c < cap && out; c++) out[c] = o->rcls[c];
  return o->nrcls;
}

const char *zeus_pfo_job_id(const zeus_pfo_optimizer *o) { return o ? o->job_id : NULL; }
const zeus_pfo_schedule *zeus_pfo_current_schedule(const zeus_pfo_optimizer *o) { return o ? &o->sched : NULL; }
zeus_pfo_controller *zeus_pfo_optimizer_controller(zeus_pfo_optimizer *o) { return o ? o->ctl : NULL; }
bool zeus_pfo_detached(const zeus_pfo_optimizer *o) { return o && o->detached; }

void zeus_pfo_last_round(const zeus_pfo_optimizer *o, zeus_pfo_round_stats *out) {
  if (!out) return;
  if (!o) {
    *out = (zeus_pfo_round_stats){.round = -1, .planned_clock_fraction = NAN};
    return;
  }
  *out = o->last;
}
