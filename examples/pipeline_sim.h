/* examples/pipeline_sim.h: a simulated pipeline-parallel training job whose ranks are threads of
 * one process, driving one Perseus client (zeus_pfo_optimizer) per rank. Used by
 * examples/pipeline_sim.c and by the client's tests (which run the same pipeline on the fake
 * NVML). Header-only: every function is static.
 *
 * The job is dp x pp x tp ranks; rank = (dp_rank * pp + pp_rank) * tp + tp_rank. Each rank runs
 * synchronous 1F1B over M microbatches (zeus/pipeline.h): stage s does min(pp - s - 1, M) warm-up
 * forwards, then alternates forward/backward, then drains the remaining backwards. A forward of stage s > 0
 * needs the activation of the same microbatch from stage s - 1 (same dp and tp rank); a
 * backward of stage s < pp - 1 needs the gradient from stage s + 1. Sends never block.
 *
 * Time. Every rank has its own clock: its simulated GPU's virtual clock, which moves only by
 * the work and the idling of that GPU (psim_gpu below). Messages carry the sender's clock at
 * the moment of sending. A rank that receives a message stamped later than its own clock has
 * waited for it: it idles its GPU (drawing idle power) until the stamp, exactly as a real rank
 * blocked in a receive. A message stamped earlier was already there: no wait. At the end of
 * each iteration every rank idles to the latest clock of all ranks (the pipeline flush and the
 * optimizer step, where data-parallel replicas all-reduce their gradients), so all ranks start
 * every iteration at the same instant and an iteration lasts as long on every rank. Tensor-
 * parallel ranks of a stage run identical work on identical GPUs; their all-reduces are not
 * modelled. Communication itself takes no time. The real threads wait on condition variables
 * meanwhile, and a clock never moves backwards.
 *
 * Per instruction a rank: receives (idling until the stamp), calls on_instruction_begin, waits
 * for the frequency controller to have put the scheduled clock in place (simulated work takes
 * no real time, so without this the work would run at the old clock), runs the work, calls
 * on_instruction_end, and sends.
 */
#ifndef ZEUS_EXAMPLE_PIPELINE_SIM_H
#define ZEUS_EXAMPLE_PIPELINE_SIM_H

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <zeus.h>

/* One rank's simulated GPU: run work at its current clock, idle, read its clock (s). work_kind,
 * when set, runs instead of work and is told whether the instruction is a forward (a GPU model
 * that knows each instruction's time and energy, such as pipeline_sim's --stage-profile). */
typedef struct psim_gpu {
  void *ctx;
  int (*work)(void *ctx, double units);
  int (*idle)(void *ctx, double seconds);
  double (*now)(void *ctx);
  int (*work_kind)(void *ctx, bool forward, double units);
} psim_gpu;

typedef struct psim_slot {
  long iter; /* iteration the message belongs to; -1: none yet */
  double stamp;
} psim_slot;

/* What the ranks share: mailboxes, the end-of-iteration barrier, and an abort flag. */
typedef struct psim_job {
  int dp, pp, tp, world, microbatches;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  psim_slot *slots; /* [kind 0 activation / 1 gradient][dp][tp][receiving stage][microbatch] */
  bool aborted;
  /* barrier */
  int arrived;
  unsigned long generation;
  double bar_max, bar_result;
} psim_job;

static inline int psim_rank_of(const psim_job *j, int dp, int pp, int tp) { return (dp * j->pp + pp) * j->tp + tp; }

static inline void psim_coords(const psim_job *j, int rank, int *dp, int *pp, int *tp) {
  *tp = rank % j->tp;
  *pp = (rank / j->tp) % j->pp;
  *dp = rank / (j->tp * j->pp);
}

static inline int psim_job_open(psim_job **out, int dp, int pp, int tp, int microbatches) {
  if (dp < 1 || pp < 1 || tp < 1 || microbatches < 1)
    return zeus_set_errmsg(ZEUS_EINVAL, "pipeline: dp %d, pp %d, tp %d and microbatches %d must all be >= 1", dp, pp,
                           tp, microbatches);
  psim_job *j = calloc(1, sizeof *j);
  size_t nslots = (size_t)2 * dp * tp * pp * microbatches;
  if (!j || !(j->slots = malloc(nslots * sizeof *j->slots))) {
    free(j);
    return zeus_set_errmsg(ZEUS_ENOMEM, "pipeline: out of memory");
  }
  for (size_t i = 0; i < nslots; i++) j->slots[i] = (psim_slot){-1, 0};
  j->dp = dp, j->pp = pp, j->tp = tp, j->world = dp * pp * tp, j->microbatches = microbatches;
  pthread_mutex_init(&j->mu, NULL);
  pthread_cond_init(&j->cv, NULL);
  *out = j;
  return ZEUS_OK;
}

static inline void psim_job_close(psim_job *j) {
  if (!j) return;
  pthread_mutex_destroy(&j->mu);
  pthread_cond_destroy(&j->cv);
  free(j->slots);
  free(j);
}

/* Wakes every rank waiting on a message or the barrier; they fail. For a rank that failed. */
static inline void psim_job_abort(psim_job *j) {
  pthread_mutex_lock(&j->mu);
  j->aborted = true;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

static inline psim_slot *psim_slot_at(psim_job *j, int kind, int dp, int tp, int stage, int mb) {
  size_t i = ((((size_t)kind * j->dp + dp) * j->tp + tp) * j->pp + stage) * j->microbatches + mb;
  return &j->slots[i];
}

/* The 1F1B order of `stage` (zeus_pipeline_1f1b_instr): 2*M names ("forward"/"backward", static
 * strings) and microbatches. */
static inline size_t psim_order(int pp, int stage, int m, const char **names, int *mb) {
  size_t k = 0;
  for (; k < (size_t)(2 * m); k++) {
    zeus_pipeline_instr kind;
    if (zeus_pipeline_1f1b_instr(pp, stage, m, (int)k, &kind, &mb[k])) break;
    names[k] = zeus_pipeline_instr_name(kind);
  }
  return k;
}

/* One rank of the job. */
typedef struct psim_rank {
  psim_job *job;
  int rank, dp, pp, tp;
  psim_gpu gpu;
  zeus_pfo_optimizer *opt;
  double fwd_units, bwd_units; /* work of one forward / backward */
  long iter;                   /* iterations done */
  const char **names;          /* this stage's 1F1B order (2*M), filled by psim_rank_init */
  int *mb;
  size_t n;
} psim_rank;

static inline int psim_rank_init(psim_rank *r, psim_job *j, int rank) {
  memset(r, 0, sizeof *r);
  r->job = j;
  r->rank = rank;
  psim_coords(j, rank, &r->dp, &r->pp, &r->tp);
  r->names = malloc((size_t)2 * j->microbatches * sizeof *r->names);
  r->mb = malloc((size_t)2 * j->microbatches * sizeof *r->mb);
  if (!r->names || !r->mb) {
    free(r->names), free(r->mb);
    return zeus_set_errmsg(ZEUS_ENOMEM, "pipeline: out of memory");
  }
  r->n = psim_order(j->pp, r->pp, j->microbatches, r->names, r->mb);
  r->fwd_units = 1;
  r->bwd_units = 2;
  return ZEUS_OK;
}

static inline void psim_rank_free(psim_rank *r) {
  free(r->names);
  free(r->mb);
}

/* Waits for a message, then idles this rank's GPU up to the message's stamp. */
/* Idles the rank's GPU for `seconds`, stopping at the moment the frequency controller issues its
 * next clock lock (a clock asked for ahead of an instruction by the lock latency) to let it act
 * then: on a virtual clock time does not pass by itself, so the controller's thread cannot see the
 * moment come on its own. */
static inline int psim_idle(psim_rank *r, double seconds) {
  zeus_pfo_controller *ctl = r->opt ? zeus_pfo_optimizer_controller(r->opt) : NULL;
  while (seconds > 0) {
    double now = r->gpu.now(r->gpu.ctx), issue = ctl ? zeus_pfo_controller_next_issue(ctl) : INFINITY;
    int rc;
    if (issue <= now) { /* due already: let it go first */
      if ((rc = zeus_pfo_controller_wait(ctl, 30.0))) return rc;
      if (zeus_pfo_controller_next_issue(ctl) <= now) issue = INFINITY; /* (a failed controller) */
      else continue;
    }
    bool stop = issue < now + seconds;
    double step = stop ? issue - now : seconds;
    if ((rc = r->gpu.idle(r->gpu.ctx, step))) return rc;
    if (r->opt) zeus_pfo_optimizer_observe(r->opt);
    seconds -= step;
    if (stop && (rc = zeus_pfo_controller_wait(ctl, 30.0))) return rc;
  }
  return ZEUS_OK;
}

static inline int psim_recv(psim_rank *r, int kind, int mb) {
  psim_job *j = r->job;
  psim_slot *s = psim_slot_at(j, kind, r->dp, r->tp, r->pp, mb);
  pthread_mutex_lock(&j->mu);
  while (s->iter != r->iter && !j->aborted) pthread_cond_wait(&j->cv, &j->mu);
  bool aborted = s->iter != r->iter;
  double stamp = s->stamp;
  pthread_mutex_unlock(&j->mu);
  if (aborted) return zeus_set_errmsg(ZEUS_ESTATE, "pipeline: rank %d stops because another rank failed", r->rank);
  double now = r->gpu.now(r->gpu.ctx);
  return stamp > now ? psim_idle(r, stamp - now) : ZEUS_OK;
}

static inline void psim_send(psim_rank *r, int kind, int to_stage, int mb) {
  psim_job *j = r->job;
  double stamp = r->gpu.now(r->gpu.ctx);
  psim_slot *s = psim_slot_at(j, kind, r->dp, r->tp, to_stage, mb);
  pthread_mutex_lock(&j->mu);
  s->iter = r->iter;
  s->stamp = stamp;
  pthread_cond_broadcast(&j->cv);
  pthread_mutex_unlock(&j->mu);
}

/* The end-of-iteration barrier: every rank idles to the latest clock of all. */
static inline int psim_flush(psim_rank *r) {
  psim_job *j = r->job;
  double now = r->gpu.now(r->gpu.ctx), latest;
  pthread_mutex_lock(&j->mu);
  unsigned long gen = j->generation;
  if (j->arrived == 0 || now > j->bar_max) j->bar_max = now;
  if (++j->arrived == j->world) {
    j->arrived = 0;
    j->bar_result = j->bar_max;
    j->generation++;
    pthread_cond_broadcast(&j->cv);
  } else {
    while (gen == j->generation && !j->aborted) pthread_cond_wait(&j->cv, &j->mu);
  }
  bool aborted = gen == j->generation;
  latest = j->bar_result;
  pthread_mutex_unlock(&j->mu);
  if (aborted) return zeus_set_errmsg(ZEUS_ESTATE, "pipeline: rank %d stops because another rank failed", r->rank);
  return latest > now ? psim_idle(r, latest - now) : ZEUS_OK;
}

/* Runs one training iteration of rank r with its optimizer's hooks. On failure the job is
 * aborted (the other ranks stop too) and the error is returned (zeus_errmsg() says what). */
static inline int psim_iteration(psim_rank *r) {
  psim_job *j = r->job;
  zeus_pfo_controller *ctl = zeus_pfo_optimizer_controller(r->opt);
  int rc = zeus_pfo_on_step_begin(r->opt);
  for (size_t k = 0; !rc && k < r->n; k++) {
    bool fwd = r->names[k][0] == 'f';
    if (fwd && r->pp > 0) rc = psim_recv(r, 0, r->mb[k]);
    else if (!fwd && r->pp < j->pp - 1) rc = psim_recv(r, 1, r->mb[k]);
    if (!rc) rc = zeus_pfo_on_instruction_begin(r->opt, r->names[k]);
    if (!rc) rc = zeus_pfo_controller_wait(ctl, 30.0);
    if (!rc && r->gpu.work_kind) rc = r->gpu.work_kind(r->gpu.ctx, fwd, fwd ? r->fwd_units : r->bwd_units);
    else if (!rc) rc = r->gpu.work(r->gpu.ctx, fwd ? r->fwd_units : r->bwd_units);
    if (!rc) zeus_pfo_optimizer_observe(r->opt); /* the counter's follower looks now (a virtual clock) */
    if (!rc) rc = zeus_pfo_on_instruction_end(r->opt, r->names[k]);
    if (!rc && fwd && r->pp < j->pp - 1) psim_send(r, 0, r->pp + 1, r->mb[k]);
    if (!rc && !fwd && r->pp > 0) psim_send(r, 1, r->pp - 1, r->mb[k]);
  }
  if (!rc) rc = psim_flush(r);
  if (!rc) rc = zeus_pfo_on_step_end(r->opt);
  if (rc) psim_job_abort(j);
  r->iter++;
  return rc;
}

#endif
