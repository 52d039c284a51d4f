/* zeus/pfo_client.h: the Perseus client in each rank (PipelineFrequencyOptimizer of the original)
 * and the frequency controller it drives.
 *
 * Each rank of a pipeline-parallel job opens one optimizer. Rank 0 registers the job with the
 * Perseus server (zeus pfo-server) and the job id reaches the other ranks through the
 * collective's broadcast (or is given explicitly); every rank then registers itself with the SM
 * frequencies its GPU supports and, when the caller declares it, the order of its instructions
 * (pipe_schedule). The server answers with a frequency schedule per rank: one (instruction, MHz)
 * pair per instruction of one iteration. The training loop calls the hooks around every
 * iteration and every instruction; the optimizer checks that the instructions arrive in the
 * order of the schedule and asks the frequency controller, a thread that owns the GPU's clocks,
 * to set each instruction's frequency. The hooks never wait for the GPU.
 *
 *   zeus_pfo_optimizer_opts o;
 *   zeus_pfo_optimizer_opts_init(&o);            // defaults
 *   zeus_pfo_optimizer_opts_from_env(&o);        // then the ZEUS_PFO_* settings, if wanted
 *   o.rank = rank; o.pp_rank = stage; ...        // this rank's place in the job
 *   o.pp_degree = 4; o.world_size = 4;
 *   o.server_url = "http://perseus:7787";
 *   o.collective = &coll;                        // broadcasts the job id from rank 0
 *   zeus_pfo_optimizer *opt;
 *   if (zeus_pfo_optimizer_open(&opt, &o)) die(zeus_errmsg());
 *   for (step ...) {
 *     zeus_pfo_on_step_begin(opt);
 *     for (each instruction of the 1F1B schedule) {
 *       zeus_pfo_on_instruction_begin(opt, "forward");
 *       run_forward();
 *       zeus_pfo_on_instruction_end(opt, "forward");
 *     }
 *     zeus_pfo_on_step_end(opt);        // every iters_per_round steps: report, next schedule
 *   }
 *   zeus_pfo_optimizer_close(opt);               // locked clocks are reset
 *
 * Online profiling: the optimizer measures every iteration's time and energy, and every
 * instruction's, on the rank's GPU. Every iters_per_round iterations it posts them to the server
 * as a ProfilingResult and fetches the next schedule, which takes effect at the next iteration.
 * Online schedulers (InstructionProfiler) decide from these results.
 *
 * Settings (read by zeus_pfo_optimizer_opts_from_env; each also as PERSEUS_<NAME>, ZEUS_PFO_
 * wins; fields the caller sets afterwards win over both). A bad value is ZEUS_EINVAL/ZEUS_ERANGE
 * naming the variable:
 *   ZEUS_PFO_SERVER_URL            the server's URL, e.g. http://127.0.0.1:7787
 *   ZEUS_PFO_JOB_ID                join this job instead of registering one
 *   ZEUS_PFO_ITERS_PER_ROUND       iterations per profiling round (default 10)
 *   ZEUS_PFO_CONNECT_TIMEOUT       seconds to connect (default 5)
 *   ZEUS_PFO_REQUEST_TIMEOUT       seconds for a request other than a schedule (default 30)
 *   ZEUS_PFO_SCHEDULE_TIMEOUT      seconds to wait for a schedule, which comes only once every
 *                                  rank has asked for it (default 1800)
 *   ZEUS_PFO_RETRIES               retries after a connection error or a 503 (default 5)
 *   ZEUS_PFO_RETRY_BACKOFF         seconds before the first retry, doubled after each (capped
 *                                  at 30 s; default 0.5)
 *   ZEUS_PFO_TOKEN                 bearer token the server requires (as the server's setting)
 *   ZEUS_PFO_PROFILE_INSTRUCTIONS  0: do not measure single instructions (default 1)
 *   ZEUS_PFO_SIGNAL_HANDLERS       0: do not reset locked clocks on SIGINT/SIGTERM (default 1)
 *   ZEUS_PFO_INSTRUCTION_ENERGY    auto | read | fit: how an instruction's energy is measured
 *                                  (see instruction_energy; default auto)
 *   ZEUS_PFO_CLOCK_LATENCY         auto | seconds from a clock lock call's start to its effect
 *                                  (0: none; default auto: see clock_latency_s)
 *   ZEUS_PFO_CONTROLLER_POLL       seconds between the controller's looks for a new frequency
 *                                  while they keep coming (default 0.0005; 0: wake it on every
 *                                  change instead, which costs the caller a system call)
 *
 * Each rank registers with a random credential of its own (header X-Zeus-Rank-Token) that the
 * server then requires on every request about the rank, so that nobody else who learns the job
 * id can post its results (docs/pfo-server.md, "Isolation").
 *
 * Errors from the server (an HTTP status >= 400) are ZEUS_EHTTP carrying the server's message;
 * an unreachable server is ZEUS_ENET after the retries; a wait longer than its timeout is
 * ZEUS_ETIMEDOUT. A server that was restarted has forgotten the job: the next exchange fails
 * with ZEUS_EHTTP saying that the job is unknown.
 *
 * Thread safety: one optimizer is driven from one thread. Different optimizers (ranks that are
 * threads of one process) are independent.
 */
#ifndef ZEUS_PFO_CLIENT_H
#define ZEUS_PFO_CLIENT_H

#include "zeus/collective.h"
#include "zeus/common.h"
#include "zeus/device.h"
#include "zeus/pfo.h"

ZEUS_BEGIN_DECLS

/* ---------------------------------------------------------------------------------------------
 * The frequency controller: one thread that owns one GPU's clocks.
 *
 * At open (on its thread) it resets the GPU's power limit to the default, locks the memory clock
 * at its maximum (a GPU that cannot lock memory clocks, ZEUS_ENOTSUP, is fine) and the SM clock
 * at the highest frequency supported at that memory clock. zeus_pfo_controller_set_frequency()
 * only records the wish; the thread applies it when it differs from the clock in place; when
 * several wishes arrive before it runs, only the latest is applied (an older one would only slow
 * down the instruction running now). Waking a sleeping thread costs the waker a system call
 * (microseconds), so while wishes keep coming the thread looks for a new one every poll interval
 * (0.5 ms by default) and the caller makes no system call; after 50 ms without a wish it sleeps
 * until the next one wakes it. At close, and on SIGINT/SIGTERM unless opted out, locked clocks are
 * reset and the power limit goes back to what it was.
 * ------------------------------------------------------------------------------------------- */

typedef struct zeus_pfo_controller zeus_pfo_controller;

/* Zero-initialised (or NULL) means defaults. */
typedef struct zeus_pfo_controller_opts {
  /* Do not install SIGINT/SIGTERM handlers that reset locked clocks (the caller handles signals).
   * The handlers run zeus_devices_restore_all(), then the handler that was there before (the
   * default one terminates the process). They stay while any controller is open. */
  bool no_signal_handlers;
  /* How often the thread looks for a new wish while wishes keep coming, i.e. the longest delay
   * before a change is applied. 0: 0.0005 s (at most 1 s). < 0: never poll; every change wakes
   * the thread (lowest delay, a system call on the caller's thread per change). */
  double poll_interval_s;
  /* Seconds from a clock lock call's start to its effect on the GPU, by which timed wishes
   * (zeus_pfo_controller_set_frequency_at) are issued early. 0: find it at open: a simulated GPU's
   * hardware profile gives it (the h100 profile: 8.1 ms); otherwise the duration of the start-up
   * lock call (an upper bound on a real GPU: an H100's call returns after ~11 ms, the effect comes
   * at ~8 ms), below 50 us taken as none. < 0: none (issue at the wanted time). */
  double lock_latency_s;
} zeus_pfo_controller_opts;

/* Fills *o with the defaults (signal handlers on, poll every 0.0005 s). */
ZEUS_EXTERN void zeus_pfo_controller_opts_init(zeus_pfo_controller_opts *o /* out */);

/* Starts the controller of visible GPU `gpu` of `devices` (borrowed; it must outlive the
 * controller; NULL: zeus_devices_default()). opts may be NULL. Returns once the start-up settings
 * are in place. Errors: those of the device calls, e.g. ZEUS_EPERM (setting clocks needs root or
 * CAP_SYS_ADMIN) with NVML's words, ZEUS_ENOENT for a GPU that does not exist; on error nothing
 * stays changed. */
ZEUS_EXTERN int zeus_pfo_controller_open(zeus_pfo_controller **out /* out */, zeus_devices *devices,
                                         unsigned gpu, const zeus_pfo_controller_opts *opts);
/* Stops the thread, resets the locked clocks and puts the power limit back. NULL does nothing. */
ZEUS_EXTERN void zeus_pfo_controller_close(zeus_pfo_controller *c);

/* Asks for SM clock `mhz`; returns at once. 0 leaves the clock as it is. ZEUS_EINVAL for a clock
 * the GPU does not support (see zeus_pfo_controller_frequencies). Returns the error of an earlier
 * failed change (ZEUS_EPERM, ZEUS_EGPULOST, ...) once the controller has failed; the controller
 * then changes nothing more. Cheap: no lock and no system call unless the thread has gone to
 * sleep (see poll_interval_s). Call it from one thread at a time. */
ZEUS_EXTERN int zeus_pfo_controller_set_frequency(zeus_pfo_controller *c, unsigned mhz);

/* Asks for SM clock `mhz` to be in effect at device time at_s (zeus_devices_now's clock): the
 * thread issues the lock at at_s minus the lock latency (at once if that is past). One timed wish
 * is held: a later one replaces it. A wish made with zeus_pfo_controller_set_frequency meanwhile
 * is applied first. Returns at once (an uncontended mutex, no system call unless the thread has
 * gone to sleep). Errors as zeus_pfo_controller_set_frequency. */
ZEUS_EXTERN int zeus_pfo_controller_set_frequency_at(zeus_pfo_controller *c, unsigned mhz, double at_s);
/* The device time at which the pending timed wish will be issued (its wanted time minus the
 * latency), or INFINITY when none is pending. For simulations on a virtual clock, which run each
 * instruction's work up to that time, then zeus_pfo_controller_wait, then the rest. */
ZEUS_EXTERN double zeus_pfo_controller_next_issue(zeus_pfo_controller *c);
/* The lock latency in use (s; see lock_latency_s); 0 for none. */
ZEUS_EXTERN double zeus_pfo_controller_latency(const zeus_pfo_controller *c);
/* Lock calls that took far longer than the latency (more than 4x, at least 2 ms): a slow or stuck
 * NVML; their clocks count as in effect only from the call's return. */
ZEUS_EXTERN unsigned long zeus_pfo_controller_late_calls(const zeus_pfo_controller *c);
/* The controller's accounting of the clock in effect: up to cap records (device time the clock
 * took effect, MHz), oldest first, starting with the one in effect at device time `since`.
 * Effect time = the call's start + the latency, or its return for a slow call. The last 8192
 * records are kept. Returns the number written. */
ZEUS_EXTERN size_t zeus_pfo_controller_timeline(zeus_pfo_controller *c, double since, double *t /* out */,
                                                unsigned *mhz /* out */, size_t cap);

/* Waits until every wish so far is in place on the GPU, and a timed wish whose issue time has come
 * (on the device clock) has been issued (waking the thread rather than waiting for its next poll). Training code does not need this (a real GPU keeps working while its clock
 * changes); simulations whose work takes no real time call it before running an instruction, so
 * that the work runs at the clock asked for. timeout_s <= 0 waits without limit. ZEUS_ETIMEDOUT,
 * or the controller's failure. */
ZEUS_EXTERN int zeus_pfo_controller_wait(zeus_pfo_controller *c, double timeout_s);

/* The SM frequencies (MHz) the GPU supports at its highest memory clock, highest first (borrowed,
 * valid while the controller is open). */
ZEUS_EXTERN size_t zeus_pfo_controller_frequencies(const zeus_pfo_controller *c,
                                                   const unsigned **mhz /* out */);
/* The SM clock (MHz) the controller last put in place. */
ZEUS_EXTERN unsigned zeus_pfo_controller_current_mhz(const zeus_pfo_controller *c);
/* How many clock changes the controller has made since open (the start-up lock excluded). */
ZEUS_EXTERN unsigned long zeus_pfo_controller_changes(const zeus_pfo_controller *c);

/* ---------------------------------------------------------------------------------------------
 * The optimizer
 * ------------------------------------------------------------------------------------------- */

typedef struct zeus_pfo_optimizer zeus_pfo_optimizer;

/* Called first by zeus_pfo_on_instruction_begin, e.g. to synchronise the caller's CUDA device so
 * that the previous instruction's kernels finish at their own clock. Returns ZEUS_OK or a
 * negative code (message through zeus_set_errmsg()). */
typedef int (*zeus_pfo_sync_fn)(void *ctx);

/* Start from zeus_pfo_optimizer_opts_init(): zero is a value here (no retries, no back-off, never
 * poll the controller) and a zeroed struct is refused (iters_per_round and timeouts 0). */
typedef struct zeus_pfo_optimizer_opts {
  /* This rank: global rank, ranks in the data/pipeline/tensor parallel groups, and the degrees.
   * world_size = dp_degree x pp_degree x tp_degree. Required (zero degrees are rejected). */
  int rank, dp_rank, pp_rank, tp_rank;
  int dp_degree, pp_degree, tp_degree, world_size;
  /* Visible index (in `devices`) of the GPU this rank uses. */
  unsigned device_id;
  /* The GPUs (borrowed; must outlive the optimizer). NULL: zeus_devices_default(). */
  zeus_devices *devices;
  /* URL of the Perseus server ("http://host:port"). Required. */
  const char *server_url;
  /* Appended to the job id by the server (sanitised); NULL for none. Used by rank 0 only. */
  const char *job_metadata;
  /* Join this job instead of registering one; no broadcast is made then. */
  const char *job_id;
  /* Broadcasts the job id from rank 0, and lets every rank learn whether all started: MPI
   * (zeus_collective_mpi), zeus_thread_group for ranks that are threads, or the caller's. Borrowed.
   * NULL: one process, which is then the whole job (world_size 1) unless job_id is given. */
  const zeus_collective *collective;
  /* The instruction names of one iteration of this rank, in order (e.g. 1F1B); sent to the
   * server so that schedulers know the order. Optional (schedulers may then need their
   * num_microbatches argument). Copied. */
  const char *const *pipe_schedule;
  size_t n_pipe_schedule;
  /* Iterations per profiling round: results are posted and the next schedule fetched every
   * iters_per_round iterations. 1..100000 (the round's measurements are kept in memory). */
  long iters_per_round;
  /* Optional synchronisation before each instruction (see zeus_pfo_sync_fn). */
  zeus_pfo_sync_fn sync;
  void *sync_ctx;
  /* Do not measure single instructions: the hooks then touch no device, and the breakdowns in
   * the results are empty (schedulers that need them, such as InstructionProfiler, fail). */
  bool no_instruction_profiling;
  /* See zeus_pfo_controller_opts. controller_poll_s: 0 means never poll (wake the controller on
   * every change); the default is 0.0005. */
  bool no_signal_handlers;
  double controller_poll_s;
  /* HTTP: seconds to connect, for one request, and to wait for a schedule; retries after a
   * connection error or a 503 answer, with back-off doubling from retry_backoff_s (at most 30 s
   * between tries); bearer token (NULL: none). */
  double connect_timeout_s;
  double request_timeout_s;
  double schedule_timeout_s;
  int retries;
  double retry_backoff_s;
  const char *token;
  /* How an instruction's energy is measured (with instruction profiling on):
   * ZEUS_PFO_ENERGY_AUTO (0): FIT where one energy counter read takes >= 100 us of wall time on
   * the caller's thread (an H100's takes ~3.3 ms; measured at open), READ otherwise (a GPU without
   * a counter is measured by a monitor window, READ);
   * ZEUS_PFO_ENERGY_READ: the counter read at each instruction's begin and end on the caller's
   * thread (the original's way; on an H100 ~6.6 ms per instruction and a reading that moves only on
   * the counter's 100 ms tick); ZEUS_PFO_ENERGY_FIT: the hooks record only timestamps, a thread
   * follows the counter's ticks, and after each round every (instruction kind, clock) class gets
   * the power that best explains the counter's increments (docs/perseus-latency.md). */
  int instruction_energy;
  /* The frequency controller's lock latency (zeus_pfo_controller_opts.lock_latency_s): 0 finds it,
   * < 0 none. With a latency, each instruction's clock is issued that long before the instruction
   * is expected to start (its predecessor's begin plus its last measured duration), and an
   * instruction expected to last less than the latency is merged with the ones after it until the
   * group lasts at least the latency; the group runs at its members' highest clock. */
  double clock_latency_s;
} zeus_pfo_optimizer_opts;

enum { ZEUS_PFO_ENERGY_AUTO = 0, ZEUS_PFO_ENERGY_READ = 1, ZEUS_PFO_ENERGY_FIT = 2 };

/* Fills *o with the defaults listed at the top (identity fields, server_url and job_id zero).
 * Reads no environment. */
ZEUS_EXTERN void zeus_pfo_optimizer_opts_init(zeus_pfo_optimizer_opts *o /* out */);
/* Applies the ZEUS_PFO_* / PERSEUS_* settings listed at the top over *o (unset variables leave
 * their field as it is). Strings point into the environment. ZEUS_EINVAL/ZEUS_ERANGE naming a
 * bad variable (*o then holds the settings read before it). */
ZEUS_EXTERN int zeus_pfo_optimizer_opts_from_env(zeus_pfo_optimizer_opts *o /* in, out */);

/* Creates the optimizer: starts the frequency controller of the rank's GPU, registers the job
 * (rank 0) and the rank, and fetches the first schedule, which waits until every rank of the job
 * has registered and asked. With a collective, every rank must call this; when any rank fails
 * to start, every rank returns an error (none hangs in the collective). Errors: ZEUS_EINVAL for
 * bad options (named), ZEUS_ENET / ZEUS_ETIMEDOUT / ZEUS_EHTTP from the server (with its
 * message), device errors from the controller (ZEUS_EPERM without the privilege to set clocks),
 * ZEUS_EINVAL for a schedule that does not fit the GPU (a frequency it does not support). */
ZEUS_EXTERN int zeus_pfo_optimizer_open(zeus_pfo_optimizer **out /* out */,
                                        const zeus_pfo_optimizer_opts *opts);
/* Stops the controller (locked clocks are reset, the power limit restored) and frees. The round
 * in progress is not reported. Unless the optimizer has detached, it tells the server that this
 * rank leaves the job (POST /leave: one try of at most 2 s), so that any other rank still
 * waiting for a schedule hears it at once instead of waiting for its timeout. NULL does nothing. */
ZEUS_EXTERN void zeus_pfo_optimizer_close(zeus_pfo_optimizer *o);

/* Marks the start of an iteration: the schedule fetched last takes effect, and the iteration's
 * measurement starts. ZEUS_ESTATE inside an unfinished iteration. */
ZEUS_EXTERN int zeus_pfo_on_step_begin(zeus_pfo_optimizer *o);
/* Marks the end of an iteration. The schedule must have been used up exactly: ending early is
 * ZEUS_ESTATE naming the next expected instruction. Every iters_per_round-th iteration posts the
 * round's results and fetches the next schedule (this waits until every rank has asked). A
 * server error is returned once; the optimizer then stays on its last schedule without contacting
 * the server again (zeus_pfo_detached() says so), after telling the server that this rank leaves
 * (unless the error was the server's 410: another rank left first), so the other ranks' next
 * exchange fails at once with the reason. A failed iteration (any hook returned an error)
 * is not measured. */
ZEUS_EXTERN int zeus_pfo_on_step_end(zeus_pfo_optimizer *o);
/* Marks the start of instruction `name` ("forward", "backward", ...): calls the sync callback,
 * takes the next (instruction, frequency) of the schedule, and asks the controller for that
 * frequency. ZEUS_EINVAL when `name` is not the next instruction of the schedule (both named),
 * ZEUS_ESTATE outside an iteration, inside an unfinished instruction, or past the end of the
 * schedule (naming its length), the controller's error once it has failed, device errors of the
 * measurement. */
ZEUS_EXTERN int zeus_pfo_on_instruction_begin(zeus_pfo_optimizer *o, const char *name);
/* Marks the end of instruction `name` (which must be the one begun). */
ZEUS_EXTERN int zeus_pfo_on_instruction_end(zeus_pfo_optimizer *o, const char *name);

/* The job id (borrowed). */
ZEUS_EXTERN const char *zeus_pfo_job_id(const zeus_pfo_optimizer *o);
/* The schedule in effect (borrowed; valid until the next zeus_pfo_on_step_begin). */
ZEUS_EXTERN const zeus_pfo_schedule *zeus_pfo_current_schedule(const zeus_pfo_optimizer *o);
/* The optimizer's frequency controller (borrowed), e.g. for zeus_pfo_controller_wait(). */
ZEUS_EXTERN zeus_pfo_controller *zeus_pfo_optimizer_controller(zeus_pfo_optimizer *o);
/* For simulations on a virtual clock (time moves only with the simulated work, in jumps): waits
 * until the counter follower (ZEUS_PFO_ENERGY_FIT) has looked at the energy counter at the
 * current time, as its polling does by itself on a real clock. Call it after each piece of
 * simulated work or idling. Does nothing on other clocks or without the follower. */
ZEUS_EXTERN void zeus_pfo_optimizer_observe(zeus_pfo_optimizer *o);
/* Whether a server error has detached the optimizer from the server. */
ZEUS_EXTERN bool zeus_pfo_detached(const zeus_pfo_optimizer *o);

/* What this rank measured in its last completed round. */
typedef struct zeus_pfo_round_stats {
  long round;           /* 0 for the first round; -1 before any round completed */
  long iterations;      /* iterations in the round */
  double iter_time_s;   /* mean iteration time */
  double iter_energy_j; /* mean iteration energy of this rank's GPU */
  /* Fraction of the round's instruction time spent at the planned clock, by the frequency
   * controller's accounting (a lock counts from its call's start plus the lock latency, or from
   * the call's return when the call was slow); NAN when the round has no instruction time. */
  double planned_clock_fraction;
  long clock_late;       /* instructions whose planned clock was not in effect when they began */
  bool energy_fitted;    /* instruction energies came from the fit (ZEUS_PFO_ENERGY_FIT) */
} zeus_pfo_round_stats;
ZEUS_EXTERN void zeus_pfo_last_round(const zeus_pfo_optimizer *o,
                                     zeus_pfo_round_stats *out /* out */);

/* The last completed round per (instruction kind, planned clock) class, with instruction profiling
 * on: how many ran, their mean time and energy as measured (READ) or fitted (FIT), and the
 * fraction of their time at the planned clock by the controller's accounting. */
typedef struct zeus_pfo_class_stats {
  const char *instruction; /* borrowed, valid while the optimizer is open */
  unsigned planned_mhz;
  long count;
  double mean_time_s;
  double mean_energy_j;
  double planned_clock_fraction;
} zeus_pfo_class_stats;
/* Copies up to cap classes into out (in the order of their first instruction in the schedule);
 * returns how many the round had. */
ZEUS_EXTERN size_t zeus_pfo_last_round_classes(const zeus_pfo_optimizer *o, zeus_pfo_class_stats *out /* out */,
                                               size_t cap);

ZEUS_END_DECLS
#endif
