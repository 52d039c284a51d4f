/* The frequency controller: one thread per GPU that owns its clocks.
 *
 * The caller's side (zeus_pfo_controller_set_frequency) runs on the training thread around every
 * instruction, so it takes no lock and makes no system call while the thread is active: it
 * stores the wish and bumps a sequence number. Waking a sleeping thread costs the waker a system
 * call of several microseconds, so while wishes keep coming the thread does not sleep for good:
 * it looks for a new wish every poll interval (0.5 ms by default), and parks only after
 * PARK_AFTER_S without one. The first wish after that wakes it. Dekker's pattern with
 * sequentially consistent atomics makes that wake-up safe: the caller writes the sequence and
 * then reads `parked`; the thread writes `parked` and then reads the sequence; at least one of
 * them sees the other's write. With polling off, the thread parks at once and every change
 * wakes it (lowest latency, a system call per change on the caller's thread).
 *
 * Only the latest wish is applied: a wish overtaken before the thread ran belongs to an
 * instruction that has already ended.
 *
 * Timed wishes (zeus_pfo_controller_set_frequency_at): a clock lock takes effect some time after
 * the call starts (~8 ms on an H100, whose call returns after ~11 ms), so a clock wanted at device
 * time T is issued at T - latency. The caller posts at most one timed wish ahead (the next
 * instruction's clock) in a slot guarded by its own small mutex (uncontended: no system call);
 * the thread waits for the issue time on CLOCK_MONOTONIC, converted from the device clock. Each
 * lock the thread makes is recorded in a timeline of (time it takes effect, clock): issue time
 * plus latency, or the time the call returned when the call took far longer than that (a slow or
 * hung NVML; until it returns the old clock stays in the timeline, so the instructions meanwhile
 * count as "clock late"). The caller never waits for a call. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"
#include "device/restore_signals.h"
#include "zeus/pfo_client.h"
#include "zeus/sim.h"

/* Park after this long without a wish (while polling). */
#define PARK_AFTER_S 0.05
#define DEFAULT_POLL_S 0.0005
#define TIMELINE_CAP 8192 /* lock records kept (a ring) */

struct zeus_pfo_controller {
  zeus_devices *d;
  double poll_s; /* <= 0: no polling */
  unsigned gpu;
  unsigned *freqs; /* highest first */
  size_t nfreqs;
  unsigned max_mem;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t wake; /* the thread waits here */
  pthread_cond_t done; /* zeus_pfo_controller_wait and open wait here */
  bool stop;
  bool started;   /* start-up finished (successfully or not) */
  int start_rc;
  char start_msg[1024];
  bool signals;
  /* caller side */
  atomic_uint last_wish;
  /* shared */
  atomic_uint target;
  atomic_ulong wish_seq;
  atomic_ulong done_seq;
  atomic_int parked;
  atomic_int failed; /* 0, or the negative code of the change that failed */
  char fail_msg[1024]; /* written before `failed` (release) */
  atomic_uint current;
  atomic_ulong changes;
  /* timed wishes and the lock latency */
  double latency;        /* seconds from a lock call's start to its effect; 0: none */
  pthread_mutex_t wmu;   /* guards next_mhz, next_at */
  unsigned next_mhz;
  double next_at;        /* device time the clock is wanted at */
  atomic_ulong next_seq;
  atomic_ulong timed_done; /* the next_seq of the last timed wish applied */
  atomic_ulong late_calls; /* lock calls that took far longer than the latency */
  /* the timeline of locks: (device time of effect, clock), a ring guarded by tmu */
  pthread_mutex_t tmu;
  double tl_t[TIMELINE_CAP];
  unsigned tl_f[TIMELINE_CAP];
  unsigned long tl_n;
  /* what start-up changed, for putting back */
  bool sm_locked, mem_locked, pl_changed;
  unsigned pl_prev_mw;
};


/* ---- start-up and shut-down (on the controller's thread) ---- */

static int cmp_desc(const void *a, const void *b) {
  unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
  return (y > x) - (y < x);
}

/* Lists the supported clocks: the highest memory clock, and the SM clocks at it (sorted high to
 * low, without duplicates). */
static int list_clocks(zeus_pfo_controller *c) {
  unsigned mem[64];
  size_t nmem = ZEUS__ARRAY_LEN(mem);
  int rc = zeus_gpu_supported_memory_clocks(c->d, c->gpu, mem, &nmem);
  if (rc) return zeus__error_ctx(rc, "frequency controller of GPU %u: listing memory clocks", c->gpu);
  if (nmem == 0)
    return zeus__error(ZEUS_ENOTSUP, "frequency controller of GPU %u: the GPU lists no memory clock", c->gpu);
  c->max_mem = mem[0];
  for (size_t i = 1; i < nmem; i++)
    if (mem[i] > c->max_mem) c->max_mem = mem[i];
  size_t cap = 256;
  for (;;) {
    unsigned *f = realloc(c->freqs, cap * sizeof *f);
    if (!f) return zeus__oom("listing SM clocks");
    c->freqs = f;
    size_t n = cap;
    rc = zeus_gpu_supported_graphics_clocks(c->d, c->gpu, c->max_mem, f, &n);
    if (rc == ZEUS_ERANGE && n > cap && n < 100000) { cap = n; continue; }
    if (rc) return zeus__error_ctx(rc, "frequency controller of GPU %u: listing SM clocks at %u MHz memory clock",
                                   c->gpu, c->max_mem);
    if (n == 0)
      return zeus__error(ZEUS_ENOTSUP,
                         "frequency controller of GPU %u: no SM clock is supported at %u MHz memory clock", c->gpu,
                         c->max_mem);
    qsort(f, n, sizeof *f, cmp_desc);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (k == 0 || f[k - 1] != f[i]) f[k++] = f[i];
    c->nfreqs = k;
    return ZEUS_OK;
  }
}

/* Puts back what start-up changed: locked clocks reset, power limit as it was. */
static void put_back(zeus_pfo_controller *c) {
  int rc;
  if (c->sm_locked && c->mem_locked) {
    /* Both in one reset (on AMD one performance-level reset instead of two and a lock between). */
    if ((rc = zeus_gpu_reset_all_clocks(c->d, c->gpu)))
      zeus__log(ZEUS_LOG_ERROR, "pfo", "frequency controller of GPU %u: resetting the locked clocks failed: %s",
                c->gpu, zeus_errmsg());
    c->sm_locked = c->mem_locked = false;
  }
  if (c->sm_locked) {
    if ((rc = zeus_gpu_reset_locked_clocks(c->d, c->gpu)))
      zeus__log(ZEUS_LOG_ERROR, "pfo", "frequency controller of GPU %u: resetting the locked SM clock failed: %s",
                c->gpu, zeus_errmsg());
    c->sm_locked = false;
  }
  if (c->mem_locked) {
    if ((rc = zeus_gpu_reset_memory_locked_clocks(c->d, c->gpu)) && rc != ZEUS_ENOTSUP)
      zeus__log(ZEUS_LOG_ERROR, "pfo", "frequency controller of GPU %u: resetting the locked memory clock failed: %s",
                c->gpu, zeus_errmsg());
    c->mem_locked = false;
  }
  if (c->pl_changed) {
    if (zeus_gpu_set_power_limit(c->d, c->gpu, c->pl_prev_mw))
      zeus__log(ZEUS_LOG_ERROR, "pfo", "frequency controller of GPU %u: restoring the power limit of %u mW failed: %s",
                c->gpu, c->pl_prev_mw, zeus_errmsg());
    c->pl_changed = false;
  }
}

/* Appends (t, mhz) to the timeline. */
static void record(zeus_pfo_controller *c, double t, unsigned mhz) {
  pthread_mutex_lock(&c->tmu);
  c->tl_t[c->tl_n % TIMELINE_CAP] = t;
  c->tl_f[c->tl_n % TIMELINE_CAP] = mhz;
  c->tl_n++;
  pthread_mutex_unlock(&c->tmu);
}

/* The lock latency when none is configured: a simulated GPU's hardware profile says it (the time
 * from a call's start to its effect); otherwise the start-up lock call's duration, an upper bound
 * on a real GPU (an H100's call returns after ~11 ms, its effect comes at ~8 ms), below 50 us
 * taken as none. */
static double device_latency(zeus_pfo_controller *c, double call_s) {
  zeus_sim_node *node = zeus_devices_sim_node(c->d);
  unsigned ng;
  zeus_sim_hardware hw;
  if (node && !zeus_devices_sim_index(c->d, c->gpu, &ng) && !zeus_sim_gpu_hardware(node, ng, &hw))
    return hw.clock_lock_effect_s;
  return call_s < 50e-6 ? 0 : call_s;
}

static int start_up(zeus_pfo_controller *c) {
  int rc = list_clocks(c);
  if (rc) return rc;
  /* The power limit back to the default, so that it does not cap the clocks we set. */
  unsigned lo, hi, def, cur;
  rc = zeus_gpu_power_limit_constraints(c->d, c->gpu, &lo, &hi, &def);
  if (!rc) rc = zeus_gpu_get_power_limit(c->d, c->gpu, &cur);
  if (rc == ZEUS_OK && cur != def) {
    if ((rc = zeus_gpu_set_power_limit(c->d, c->gpu, def)))
      return zeus__error_ctx(rc, "frequency controller of GPU %u: resetting the power limit to its default %u mW",
                             c->gpu, def);
    c->pl_changed = true;
    c->pl_prev_mw = cur;
  } else if (rc && rc != ZEUS_ENOTSUP) {
    return zeus__error_ctx(rc, "frequency controller of GPU %u: reading the power limit", c->gpu);
  }
  /* Memory clock at its maximum; GPUs that cannot lock it (before Ampere) are fine. */
  rc = zeus_gpu_set_memory_locked_clocks(c->d, c->gpu, c->max_mem, c->max_mem);
  if (rc == ZEUS_OK) c->mem_locked = true;
  else if (rc != ZEUS_ENOTSUP)
    return zeus__error_ctx(rc, "frequency controller of GPU %u: locking the memory clock at %u MHz", c->gpu,
                           c->max_mem);
  /* SM clock at the highest frequency; its call's duration is the measured lock latency. */
  double t0 = zeus_monotonic_s();
  if ((rc = zeus_gpu_set_locked_clocks(c->d, c->gpu, c->freqs[0], c->freqs[0])))
    return zeus__error_ctx(rc, "frequency controller of GPU %u: locking the SM clock at %u MHz", c->gpu, c->freqs[0]);
  double took = zeus_monotonic_s() - t0;
  c->sm_locked = true;
  if (c->latency == 0) c->latency = device_latency(c, took);
  else if (c->latency < 0) c->latency = 0;
  record(c, zeus_devices_now(c->d), c->freqs[0]);
  atomic_store(&c->current, c->freqs[0]);
  atomic_store(&c->last_wish, c->freqs[0]);
  atomic_store(&c->target, c->freqs[0]);
  return ZEUS_OK;
}

/* Locks the SM clock at f unless it is there or the controller has failed; records the change in
 * the timeline. Without the controller's mutex. */
static void apply(zeus_pfo_controller *c, unsigned f) {
  if (atomic_load(&c->failed) || f == atomic_load(&c->current)) return;
  double t0 = zeus_devices_now(c->d), m0 = zeus_monotonic_s();
  int e = zeus_gpu_set_locked_clocks(c->d, c->gpu, f, f);
  if (e) {
    snprintf(c->fail_msg, sizeof c->fail_msg, "frequency controller of GPU %u: setting the SM clock to %u MHz: %s",
             c->gpu, f, zeus_errmsg());
    zeus__log(ZEUS_LOG_ERROR, "pfo", "%s", c->fail_msg);
    atomic_store_explicit(&c->failed, e, memory_order_release);
    return;
  }
  double took = zeus_monotonic_s() - m0, t1 = zeus_devices_now(c->d);
  /* A call far slower than the latency (a slow or stuck NVML): its effect is known only at its return. */
  double slow = 4 * c->latency > 0.002 ? 4 * c->latency : 0.002;
  if (took > slow) {
    atomic_fetch_add(&c->late_calls, 1);
    record(c, t1, f);
  } else {
    record(c, t0 + c->latency, f);
  }
  atomic_store(&c->current, f);
  atomic_fetch_add(&c->changes, 1);
}

static void *controller_main(void *arg) {
  zeus_pfo_controller *c = arg;
  zeus_sim_thread_background(true); /* a simulated GPU's call latencies are this thread's own */
  int rc = start_up(c);
  pthread_mutex_lock(&c->mu);
  c->started = true;
  c->start_rc = rc;
  if (rc) snprintf(c->start_msg, sizeof c->start_msg, "%s", zeus_errmsg());
  pthread_cond_broadcast(&c->done);
  if (rc) {
    pthread_mutex_unlock(&c->mu);
    put_back(c);
    return NULL;
  }
  unsigned long seen = atomic_load(&c->wish_seq), seen_next = atomic_load(&c->next_seq);
  bool timed = false; /* a timed wish waits for its issue time */
  unsigned timed_mhz = 0;
  double timed_at = 0;
  double last_wish_at = zeus_monotonic_s();
  for (;;) {
    if (c->stop) break;
    /* next_seq first: a caller bumps wish_seq before next_seq, so a new timed wish seen here comes
     * with the immediate wish made before it. */
    unsigned long nseq = atomic_load(&c->next_seq), seq = atomic_load(&c->wish_seq);
    if (nseq != seen_next) {
      seen_next = nseq;
      pthread_mutex_lock(&c->wmu);
      timed_mhz = c->next_mhz;
      timed_at = c->next_at;
      pthread_mutex_unlock(&c->wmu);
      timed = true;
      last_wish_at = zeus_monotonic_s();
    }
    double wait_s = -1; /* until the timed wish is due; < 0: no timed wish */
    if (seq == seen && timed) {
      double due = timed_at - c->latency - zeus_devices_now(c->d);
      if (due <= 0) {
        timed = false;
        pthread_mutex_unlock(&c->mu);
        apply(c, timed_mhz);
        pthread_mutex_lock(&c->mu);
        atomic_store(&c->timed_done, seen_next);
        pthread_cond_broadcast(&c->done);
        last_wish_at = zeus_monotonic_s();
        continue;
      }
      wait_s = due;
    }
    if (seq != seen) {
      seen = seq;
      unsigned f = atomic_load(&c->target);
      pthread_mutex_unlock(&c->mu);
      apply(c, f);
      last_wish_at = zeus_monotonic_s();
      pthread_mutex_lock(&c->mu);
      atomic_store(&c->done_seq, seen);
      pthread_cond_broadcast(&c->done);
      continue;
    }
    double now = zeus_monotonic_s();
    if (wait_s >= 0 || (c->poll_s > 0 && now - last_wish_at < PARK_AFTER_S)) {
      /* Polling, or waiting for a timed wish's issue time: callers do not signal; zeus_pfo_controller_wait
       * and close may. */
      double w = c->poll_s > 0 ? c->poll_s : 0.05;
      if (wait_s >= 0 && wait_s < w) w = wait_s;
      struct timespec until = zeus__deadline_in(w);
      zeus__cond_wait_until(&c->wake, &c->mu, &until);
      continue;
    }
    atomic_store(&c->parked, 1);
    if (atomic_load(&c->wish_seq) == seen && atomic_load(&c->next_seq) == seen_next && !c->stop)
      pthread_cond_wait(&c->wake, &c->mu);
    atomic_store(&c->parked, 0);
    last_wish_at = zeus_monotonic_s();
  }
  pthread_mutex_unlock(&c->mu);
  put_back(c);
  return NULL;
}

/* ---- API ---- */

static void controller_free(zeus_pfo_controller *c) {
  pthread_mutex_destroy(&c->wmu);
  pthread_mutex_destroy(&c->tmu);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->wake);
  pthread_cond_destroy(&c->done);
  free(c->freqs);
  free(c);
}

void zeus_pfo_controller_opts_init(zeus_pfo_controller_opts *o) {
  memset(o, 0, sizeof *o);
  o->poll_interval_s = DEFAULT_POLL_S;
}

int zeus_pfo_controller_open(zeus_pfo_controller **out, zeus_devices *devices, unsigned gpu,
                             const zeus_pfo_controller_opts *opts) {
  if (!out) return zeus__error(ZEUS_EINVAL, "zeus_pfo_controller_open: out is required");
  int rc;
  if (!devices && (rc = zeus_devices_default(&devices))) return rc;
  if (gpu >= zeus_gpu_count(devices))
    return zeus__error(ZEUS_ENOENT, "frequency controller: GPU %u does not exist (%u visible GPU%s on backend %s)", gpu,
                       zeus_gpu_count(devices), zeus_gpu_count(devices) == 1 ? "" : "s", zeus_devices_backend(devices));
  zeus_pfo_controller *c = calloc(1, sizeof *c);
  if (!c) return zeus__oom("creating a frequency controller");
  c->d = devices;
  c->gpu = gpu;
  c->poll_s = opts && opts->poll_interval_s != 0 ? opts->poll_interval_s : DEFAULT_POLL_S;
  if (c->poll_s > 1) c->poll_s = 1;
  c->latency = opts ? opts->lock_latency_s : 0;
  if (!(c->latency < 10)) c->latency = 10; /* NaN or absurd: at most 10 s */
  pthread_mutex_init(&c->wmu, NULL);
  pthread_mutex_init(&c->tmu, NULL);
  pthread_mutex_init(&c->mu, NULL);
  if ((rc = zeus__cond_init(&c->wake))) {
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    pthread_mutex_destroy(&c->tmu);
    free(c);
    return rc;
  }
  if ((rc = zeus__cond_init(&c->done))) {
    pthread_cond_destroy(&c->wake);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->wmu);
    pthread_mutex_destroy(&c->tmu);
    free(c);
    return rc;
  }
  /* Handlers first: a signal right after the clocks are locked must find them in place. */
  c->signals = !(opts && opts->no_signal_handlers);
  if (c->signals && zeus__restore_signals_acquire() != ZEUS_OK) {
    zeus__log(ZEUS_LOG_WARN, "pfo", "frequency controller of GPU %u: %s; locked clocks are reset on close only",
              gpu, zeus_errmsg());
    c->signals = false;
  }
  if (pthread_create(&c->th, NULL, controller_main, c) != 0) {
    if (c->signals) zeus__restore_signals_release();
    controller_free(c);
    return zeus__error(ZEUS_EINTERNAL, "frequency controller of GPU %u: cannot start its thread", gpu);
  }
  pthread_mutex_lock(&c->mu);
  while (!c->started) pthread_cond_wait(&c->done, &c->mu);
  rc = c->start_rc;
  pthread_mutex_unlock(&c->mu);
  if (rc) {
    pthread_join(c->th, NULL);
    if (c->signals) zeus__restore_signals_release();
    zeus__error(rc, "%s", c->start_msg);
    controller_free(c);
    return rc;
  }
  zeus__log(ZEUS_LOG_DEBUG, "pfo",
            "frequency controller of GPU %u: memory clock %u MHz, SM clock locked at %u MHz (%zu "
            "frequencies supported), lock latency %.4f s",
            gpu, c->max_mem, c->freqs[0], c->nfreqs, c->latency);
  *out = c;
  return ZEUS_OK;
}

void zeus_pfo_controller_close(zeus_pfo_controller *c) {
  if (!c) return;
  pthread_mutex_lock(&c->mu);
  c->stop = true;
  pthread_cond_signal(&c->wake);
  pthread_mutex_unlock(&c->mu);
  pthread_join(c->th, NULL);
  if (c->signals) zeus__restore_signals_release();
  controller_free(c);
}

static bool supported(const zeus_pfo_controller *c, unsigned mhz) {
  size_t lo = 0, hi = c->nfreqs; /* descending order */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (c->freqs[mid] == mhz) return true;
    if (c->freqs[mid] > mhz) lo = mid + 1;
    else hi = mid;
  }
  return false;
}

static int failure(zeus_pfo_controller *c, int code) { return zeus__error(code, "%s", c->fail_msg); }

int zeus_pfo_controller_set_frequency(zeus_pfo_controller *c, unsigned mhz) {
  int f = atomic_load_explicit(&c->failed, memory_order_acquire);
  if (f) return failure(c, f);
  if (mhz == 0 || mhz == atomic_load_explicit(&c->last_wish, memory_order_relaxed)) return ZEUS_OK;
  if (!supported(c, mhz))
    return zeus__error(ZEUS_EINVAL, "frequency controller of GPU %u: %u MHz is not a supported SM clock (%u..%u MHz "
                       "at %u MHz memory clock)", c->gpu, mhz, c->freqs[c->nfreqs - 1], c->freqs[0], c->max_mem);
  atomic_store_explicit(&c->last_wish, mhz, memory_order_relaxed);
  atomic_store(&c->target, mhz);
  atomic_fetch_add(&c->wish_seq, 1);
  if (atomic_load(&c->parked)) {
    pthread_mutex_lock(&c->mu);
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
  }
  return ZEUS_OK;
}

int zeus_pfo_controller_set_frequency_at(zeus_pfo_controller *c, unsigned mhz, double at_s) {
  int f = atomic_load_explicit(&c->failed, memory_order_acquire);
  if (f) return failure(c, f);
  if (mhz == 0) return ZEUS_OK;
  if (!supported(c, mhz))
    return zeus__error(ZEUS_EINVAL, "frequency controller of GPU %u: %u MHz is not a supported SM clock (%u..%u MHz "
                       "at %u MHz memory clock)", c->gpu, mhz, c->freqs[c->nfreqs - 1], c->freqs[0], c->max_mem);
  pthread_mutex_lock(&c->wmu);
  c->next_mhz = mhz;
  c->next_at = at_s;
  pthread_mutex_unlock(&c->wmu);
  atomic_fetch_add(&c->next_seq, 1);
  if (atomic_load(&c->parked)) {
    pthread_mutex_lock(&c->mu);
    pthread_cond_signal(&c->wake);
    pthread_mutex_unlock(&c->mu);
  }
  return ZEUS_OK;
}

double zeus_pfo_controller_latency(const zeus_pfo_controller *c) { return c ? c->latency : 0; }

unsigned long zeus_pfo_controller_late_calls(const zeus_pfo_controller *c) {
  return c ? atomic_load(&((zeus_pfo_controller *)c)->late_calls) : 0;
}

size_t zeus_pfo_controller_timeline(zeus_pfo_controller *c, double since, double *t, unsigned *mhz, size_t cap) {
  if (!c || cap == 0) return 0;
  pthread_mutex_lock(&c->tmu);
  unsigned long n = c->tl_n, first = n > TIMELINE_CAP ? n - TIMELINE_CAP : 0;
  /* The last record at or before `since` (the clock in place then), and every one after. */
  unsigned long from = first;
  for (unsigned long i = n; i-- > first;)
    if (c->tl_t[i % TIMELINE_CAP] <= since) {
      from = i;
      break;
    }
  if (n - from > cap) from = n - cap;
  size_t k = 0;
  for (unsigned long i = from; i < n; i++, k++) {
    t[k] = c->tl_t[i % TIMELINE_CAP];
    mhz[k] = c->tl_f[i % TIMELINE_CAP];
  }
  pthread_mutex_unlock(&c->tmu);
  return k;
}

/* Whether a timed wish is due (its issue time reached on the device clock) and not yet applied;
 * its sequence number in *seq. */
static bool timed_due(zeus_pfo_controller *c, unsigned long *seq) {
  *seq = atomic_load(&c->next_seq);
  if (atomic_load(&c->timed_done) >= *seq) return false;
  pthread_mutex_lock(&c->wmu);
  double at = c->next_at;
  pthread_mutex_unlock(&c->wmu);
  return at - c->latency <= zeus_devices_now(c->d);
}

double zeus_pfo_controller_next_issue(zeus_pfo_controller *c) {
  if (!c || atomic_load(&c->timed_done) >= atomic_load(&c->next_seq)) return INFINITY;
  pthread_mutex_lock(&c->wmu);
  double at = c->next_at;
  pthread_mutex_unlock(&c->wmu);
  return at - c->latency;
}

int zeus_pfo_controller_wait(zeus_pfo_controller *c, double timeout_s) {
  unsigned long want = atomic_load(&c->wish_seq), want_next = 0;
  bool due = timed_due(c, &want_next);
  struct timespec until = zeus__deadline_in(timeout_s > 0 ? timeout_s : 0);
  int rc = ZEUS_OK;
  pthread_mutex_lock(&c->mu);
#define PENDING (atomic_load(&c->done_seq) < want || (due && atomic_load(&c->timed_done) < want_next))
  if (PENDING) pthread_cond_signal(&c->wake); /* do not wait for the next poll */
  while (PENDING && !atomic_load(&c->failed)) {
    if (timeout_s > 0) {
      if (zeus__cond_wait_until(&c->done, &c->mu, &until) == ETIMEDOUT && PENDING) {
        rc = zeus__error(ZEUS_ETIMEDOUT, "frequency controller of GPU %u: the clock change to %u MHz was not done "
                         "within %g s", c->gpu, atomic_load(&c->target), timeout_s);
        break;
      }
    } else {
      pthread_cond_wait(&c->done, &c->mu);
    }
  }
#undef PENDING
  pthread_mutex_unlock(&c->mu);
  int f = atomic_load_explicit(&c->failed, memory_order_acquire);
  if (!rc && f) rc = failure(c, f);
  return rc;
}

size_t zeus_pfo_controller_frequencies(const zeus_pfo_controller *c, const unsigned **mhz) {
  *mhz = c->freqs;
  return c->nfreqs;
}

unsigned zeus_pfo_controller_current_mhz(const zeus_pfo_controller *c) {
  return atomic_load(&((zeus_pfo_controller *)c)->current);
}

unsigned long zeus_pfo_controller_changes(const zeus_pfo_controller *c) {
  return atomic_load(&((zeus_pfo_controller *)c)->changes);
}
