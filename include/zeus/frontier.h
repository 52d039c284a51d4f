/* zeus/frontier.h: the iteration time–energy frontier of pipeline-parallel training
 * (Perseus' optimizer, "lowtime", in C).
 *
 * From an instruction profile (the time and energy of one forward or backward of one
 * microbatch on each pipeline stage at each GPU clock) the solver computes every
 * Pareto-optimal GPU frequency plan of one synchronous 1F1B training iteration, from the
 * all-slowest plan down to the shortest iteration time, one time unit per step
 * (Phillips–Dessouky iterative minimum cut). Each point carries a frequency plan
 * (one list of ("forward"|"backward", MHz) per stage, in schedule order) that the PFO
 * server's PointSolution scheduler deploys.
 *
 * Typical use:
 *   zeus_frontier_profile *p;  zeus_frontier *f;
 *   zeus_frontier_profile_load(&p, "profile.csv");
 *   zeus_frontier_opts o = {.stages = 4, .microbatches = 8, .blocking_power_w = 83.64};
 *   zeus_frontier_solve(&f, p, &o);
 *   zeus_frontier_write(f, "out", NULL);
 *   zeus_frontier_free(f);  zeus_frontier_profile_free(p);
 *
 * Threads: distinct objects may be used from distinct threads; one object is not
 * thread-safe. Units are in the names (_s seconds, _j joules, _w watts, _mhz).
 */
#ifndef ZEUS_FRONTIER_H
#define ZEUS_FRONTIER_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* ---- instruction profiles ---------------------------------------------------------- */

typedef struct zeus_frontier_profile zeus_frontier_profile;

/* The instruction kinds of a 1F1B pipeline. */
typedef enum zeus_frontier_instr {
  ZEUS_FRONTIER_FORWARD = 0,
  ZEUS_FRONTIER_BACKWARD = 1
} zeus_frontier_instr;

/* Loads a profile CSV with (at least) the columns stage,instruction,frequency,time,energy
 * (other columns, such as rank, are ignored): one row per stage, instruction ("forward" or
 * "backward"), SM clock in MHz, time in seconds and energy in joules.
 * A UTF-8 byte-order mark before the header is skipped. The file must be a regular file
 * (not a FIFO or device, which could block or never end) of at most 64 MiB.
 * Errors: ZEUS_ENOENT/ZEUS_EPERM/ZEUS_EIO (file), ZEUS_EINVAL (not a regular file), ZEUS_ERANGE
 * (larger than 64 MiB), ZEUS_EPARSE naming the file, line and column (missing column,
 * non-numeric value, unknown instruction, negative stage, time <= 0, energy < 0). */
ZEUS_EXTERN int zeus_frontier_profile_load(zeus_frontier_profile **out /* out */, const char *path);

/* An empty profile to fill with zeus_frontier_profile_add() (for callers that hold the
 * measurements in memory, such as the server). `name` names it in errors (NULL: "profile"). */
ZEUS_EXTERN int zeus_frontier_profile_new(zeus_frontier_profile **out /* out */, const char *name);

/* Adds one measurement. ZEUS_EINVAL for a negative stage, a kind out of range, a clock <= 0,
 * time_s <= 0, a negative energy or a non-finite value. */
ZEUS_EXTERN int zeus_frontier_profile_add(zeus_frontier_profile *p, int stage,
                                          zeus_frontier_instr kind, int freq_mhz, double time_s,
                                          double energy_j);

/* Number of stages in the profile (highest stage index + 1). */
ZEUS_EXTERN int zeus_frontier_profile_num_stages(const zeus_frontier_profile *p);

ZEUS_EXTERN void zeus_frontier_profile_free(zeus_frontier_profile *p);

/* ---- solving ----------------------------------------------------------------------- */

typedef enum zeus_frontier_cost_model {
  /* cost(t) = a·e^(b·t) + c, least squares with a >= 0 (the original's model). Default. */
  ZEUS_FRONTIER_COST_EXPONENTIAL = 0,
  /* The lower convex hull of the options, piecewise linear (no fitting). */
  ZEUS_FRONTIER_COST_HULL = 1
} zeus_frontier_cost_model;

/* Which cost the options' Pareto filter compares (against the measured time). */
typedef enum zeus_frontier_pareto {
  /* The effective cost, energy − blocking power × quantised time: an option slower than the
   * least-energy clock stays when the blocking power it saves outweighs the energy it adds.
   * Default. */
  ZEUS_FRONTIER_PARETO_EFFECTIVE = 0,
  /* The measured energy, as the original (lowtime) does; the effective cost is computed
   * afterwards. No option is slower than the least-energy clock. */
  ZEUS_FRONTIER_PARETO_ENERGY = 1
} zeus_frontier_pareto;

/* How a point's instruction durations become clocks. */
typedef enum zeus_frontier_slack {
  /* Each instruction runs at the slowest option that fits its duration (a duration between
   * two options runs at the faster one); then, in reverse schedule order, an instruction with
   * slack in the schedule of measured times moves to the slower option of least measured
   * effective cost (energy − blocking power × time) that fits its slack, which never
   * lengthens the iteration and never raises its energy. Default. */
  ZEUS_FRONTIER_SLACK_RECLAIM = 0,
  /* Only the first step: the clocks the solver's durations give (the original's plans). */
  ZEUS_FRONTIER_SLACK_KEEP = 1
} zeus_frontier_slack;

/* Where a running solve stands, for a progress display. Points run from the all-slowest
 * iteration time down to the all-fastest one, one time unit (or more) per point. */
typedef struct zeus_frontier_progress {
  size_t points;          /* points recorded so far (>= 1) */
  double time_s;          /* the latest point's iteration time (quantised) */
  double slowest_time_s;  /* the first point's: where the solve started */
  double fastest_time_s;  /* the all-fastest plan's: where it ends (unless max_iterations) */
  size_t max_points;      /* the most points the solve can record (the time range in units + 1,
                           * or max_iterations) */
} zeus_frontier_progress;

/* Called by zeus_frontier_solve() after every point, on the solving thread. Return 0 to go on,
 * non-zero to stop after this point (the frontier keeps the points so far, as max_iterations
 * does). It must not call into the frontier being solved. */
typedef int (*zeus_frontier_progress_fn)(const zeus_frontier_progress *p, void *ctx);

/* Zero-initialised fields take the default given; stages and microbatches have none. */
typedef struct zeus_frontier_opts {
  int stages;              /* pipeline stages S (required, >= 1; the profile must have >= S) */
  int microbatches;        /* microbatches M per iteration (required, >= 1; M < S is refused
                            * unless allow_fewer_microbatches: usually swapped arguments) */
  double blocking_power_w; /* GPU power while blocked on pipeline communication (>= 0) */
  double unit_time_s;      /* time quantum; 0: 0.001 s */
  double noise_factor;     /* Pareto filter retry factor in (0, 1]; 0: 0.95 */
  zeus_frontier_cost_model cost_model; /* 0: exponential */
  long max_iterations;     /* stop after this many points; 0: no limit */
  zeus_frontier_pareto pareto;         /* 0: effective cost */
  zeus_frontier_slack slack;           /* 0: reclaim */
  /* Accept M < S: a valid but bubble-heavy 1F1B pipeline that never reaches its steady state
   * (every stage warms up with all M forwards, as DeepSpeed's TrainSchedule does). */
  bool allow_fewer_microbatches;
  zeus_frontier_progress_fn progress; /* NULL: none */
  void *progress_ctx;
} zeus_frontier_opts;

/* Fills *o with the defaults (unit time 0.001 s, noise factor 0.95, the rest zero); stages and
 * microbatches must then be set. */
ZEUS_EXTERN void zeus_frontier_opts_init(zeus_frontier_opts *o /* out */);

/* One frontier point. time_s is the quantised iteration time (units × unit_time_s) the
 * solver reached; cost_j the cost model's sum over instructions of
 * (energy − blocking power × time) at the solver's durations; cost_with_blocking_j = cost_j +
 * blocking power × S × time_s (the model's iteration energy); eval_* recompute the plan's
 * iteration time and energy from the profile's measured values (critical path over the 1F1B
 * DAG with the plan's clocks; energy of every instruction plus blocking power × idle time of
 * every stage). `dominated` is set when another point's plan is at least as fast and at least as
 * cheap by these evaluated figures (eval_time_s, eval_energy_j) and better in one of them: a
 * plan nobody should deploy. The model's points (time_s, cost_*) fall monotonically; the
 * evaluated ones need not, and on the SOSP'24 profiles most are dominated. */
typedef struct zeus_frontier_point {
  long iteration;
  long time_units;
  double time_s;
  double cost_j;
  double cost_with_blocking_j;
  double eval_time_s;
  double eval_energy_j;
  bool dominated;
} zeus_frontier_point;

typedef struct zeus_frontier zeus_frontier;

/* Computes the frontier. The profile is borrowed for the call only. Memory grows with the DAG
 * (about 0.5 KB per instruction) and the points (about 64 bytes each, plus about 12 bytes per
 * instruction whose clock differs from the point before), not with points × instructions. Errors: ZEUS_EINVAL for bad options
 * (microbatches < 1, the profile has fewer stages than `stages`, a stage without options for
 * an instruction, a unit time or noise factor out of range), naming the value; ZEUS_ERANGE for
 * a solve past the limits, naming the limit and what to change: more than 1,048,576
 * instructions (stages × 2 × microbatches), more than 16,777,216 time units between the options'
 * fastest and slowest times summed over stages and instructions (a unit time far below the
 * profile's resolution), or more than 4,194,304 points without max_iterations to bound them;
 * ZEUS_ENOMEM. A solve expected to take more than about a minute logs a warning first. */
ZEUS_EXTERN int zeus_frontier_solve(zeus_frontier **out /* out */, const zeus_frontier_profile *p,
                                    const zeus_frontier_opts *opts);

ZEUS_EXTERN void zeus_frontier_free(zeus_frontier *f);

/* Number of points (>= 1). Point 0 is the all-slowest plan; the last reaches the all-fastest
 * iteration time. */
ZEUS_EXTERN size_t zeus_frontier_num_points(const zeus_frontier *f);

/* Copies point `i`. ZEUS_ERANGE when i >= num_points. */
ZEUS_EXTERN int zeus_frontier_get_point(const zeus_frontier *f, size_t i,
                                        zeus_frontier_point *out /* out */);

/* The plan of point `i` for one stage: writes up to `cap` entries of the stage's schedule
 * (kinds[] and freqs_mhz[], either may be NULL) and sets *n to the stage's length (2 × M).
 * ZEUS_ERANGE for a bad point or stage. */
ZEUS_EXTERN int zeus_frontier_get_plan(const zeus_frontier *f, size_t i, int stage,
                                       zeus_frontier_instr *kinds /* out, may be NULL */,
                                       int *freqs_mhz /* out, may be NULL */, size_t cap,
                                       size_t *n /* out */);

/* ---- output ------------------------------------------------------------------------ */

/* Zero-initialised (or NULL) means defaults. */
typedef struct zeus_frontier_write_opts {
  long every;  /* write the plan of every N-th point (and the last); 0: every point */
  long sample; /* instead, K plans evenly spaced in iteration time (K >= 2); 0: off */
  /* Keep only the points no other point dominates (zeus_frontier_point.dominated): in
   * frontier.csv and among the plans; `every` and `sample` then choose among those. */
  bool drop_dominated;
} zeus_frontier_write_opts;

/* Fills *o with the defaults (every plan written). */
ZEUS_EXTERN void zeus_frontier_write_opts_init(zeus_frontier_write_opts *o /* out */);

/* Writes DIR/frontier.csv (iteration,time_s,cost_j,cost_with_blocking_j,eval_time_s,
 * eval_energy_j,dominated; every point unless wo->drop_dominated) and the plan files
 * DIR/freqs_pipeline_%05d.py (named by iteration; selected by `wo`, NULL: all). DIR is created
 * when missing (its parent must exist). Files are written atomically, one plan in memory at a
 * time. Errors: ZEUS_EIO naming the path; ZEUS_EINVAL for every and sample both set. */
ZEUS_EXTERN int zeus_frontier_write(const zeus_frontier *f, const char *dir,
                                    const zeus_frontier_write_opts *wo);

/* How many plan files zeus_frontier_write() writes with `wo` (NULL: all), or a negative
 * ZEUS_E... code for a bad selection. */
ZEUS_EXTERN long zeus_frontier_count_plans(const zeus_frontier *f, const zeus_frontier_write_opts *wo);

/* The frontier.csv text: every point, or with wo->drop_dominated only the non-dominated ones
 * (wo may be NULL). Release it with zeus_free(). */
ZEUS_EXTERN int zeus_frontier_csv(const zeus_frontier *f, const zeus_frontier_write_opts *wo,
                                  char **text /* out */);

/* The plan file text of point `i` (release with zeus_free()). ZEUS_ERANGE for a bad point. */
ZEUS_EXTERN int zeus_frontier_plan_text(const zeus_frontier *f, size_t i, char **text /* out */);

/* An SVG of energy against iteration time (720 × 480 px): the evaluated points (non-dominated
 * ones joined by a line, dominated ones as light dots), the cost model's, a marker on each plan
 * that `written` selects (NULL: none marked) and on the minimum-energy plan, SI-prefixed axes
 * (J, kJ, MJ; ms, s) and a legend placed where it covers no data. Series are decimated to what
 * the picture can show (a few points per pixel column), so the file stays small however many
 * points the frontier has. Written atomically; the folder must exist. */
ZEUS_EXTERN int zeus_frontier_write_plot_svg(const zeus_frontier *f, const char *path,
                                             const zeus_frontier_write_opts *written);

/* An SVG of point i's pipeline: one row per stage, one box per instruction from its start
 * to its end (measured times), coloured by clock on one absolute scale (viridis, from the
 * profile's lowest to its highest clock, so a clock has the same colour in every plan of the
 * frontier) with a colour bar, the critical path outlined; a box's label (F3, B3) is drawn
 * where it fits and every box carries a tooltip (<title>) with its instruction, clock and times. */
ZEUS_EXTERN int zeus_frontier_write_timeline_svg(const zeus_frontier *f, size_t i,
                                                 const char *path);

ZEUS_END_DECLS
#endif
