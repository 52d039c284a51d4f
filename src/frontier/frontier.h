/* src/frontier/frontier.h: internals of the frontier solver (not API).
 *
 * Pieces, one file each: profile.c (measurements), options.c (quantised, Pareto-filtered
 * options per stage and instruction), costmodel.c (exponential fit, convex hull), dag.c (1F1B
 * DAG, longest paths, evaluation with measured values), maxflow.c (minimum cut with lower
 * bounds: warm-started Dinic), solver.c (Phillips–Dessouky), output.c (CSV, plan files), svg.c (pictures).
 */
#ifndef ZEUS_FRONTIER_INTERNAL_H
#define ZEUS_FRONTIER_INTERNAL_H

#include "core/core.h"
#include "zeus/frontier.h"

/* ---- tolerances, all in one place ---- */
/* Quantisation: floor(time / unit + ZEUS__QUANT_EPS), so a time that is an exact multiple of
 * the unit up to floating-point error (0.030 s at 1 ms) gives that many units (30), not one
 * fewer as plain floating-point floor division does. */
#define ZEUS__QUANT_EPS 1e-9
/* Slack reclamation: an option fits a slack of r seconds when its time is at most r + this. */
#define ZEUS__TIME_EPS 1e-12
/* Max flow: a residual capacity at or below this (joules) counts as saturated. */
#define ZEUS__FLOW_EPS 1e-9
/* Exponential fit: golden-section refinement steps of the exponent. */
#define ZEUS__FIT_REFINE_STEPS 80

/* ---- profile ---- */
typedef struct zeus__fmeas {
  int freq_mhz;
  double time_s;
  double energy_j;
  size_t line; /* input line, 0 when added in memory */
} zeus__fmeas;

struct zeus_frontier_profile {
  char *name;
  int nstages;             /* highest stage + 1 */
  zeus__fmeas *rows[2];    /* per kind: all rows, stage-major after sorting */
  size_t nrows[2], cap[2];
  int *row_stage[2];       /* stage of each row */
};

/* ---- options of one (stage, instruction) ---- */
typedef struct zeus__fopt {
  int freq_mhz;
  double time_s;
  double energy_j;
  long quant;  /* whole time units */
  double cost; /* energy − blocking power × quant × unit */
} zeus__fopt;

typedef struct zeus__fopts {
  int stage;
  zeus_frontier_instr kind;
  zeus__fopt *opt; /* kept options, fastest first, distinct quant */
  size_t nopt;
  long qmin, qmax; /* quant of fastest and slowest option */
  /* cost model */
  zeus_frontier_cost_model model;
  double a, b, c; /* exponential: a·e^(b·(q − qmin)) + c */
  long *hull_q;   /* hull vertices (quant, cost), fastest first */
  double *hull_c;
  size_t nhull;
  double *table;  /* model cost at quant qmin..qmax */
  int *pick;      /* at quant qmin..qmax: the index of the slowest option with quant <= it */
  double *rcost;  /* measured effective cost of each option: energy − blocking power × time_s */
  int *rmq;       /* range minima of rcost (see zeus__fopts_reclaim) */
} zeus__fopts;

/* Quantises a time: floor(time_s / unit_s + ZEUS__QUANT_EPS). */
long zeus__frontier_quantise(double time_s, double unit_s);

/* Builds the options of one stage and instruction from the profile's rows: quantise, cost,
 * Pareto filter on (time, cost) (retried with the noise factor when <= 3 survive: then an
 * option is dominated only by a faster one whose cost is below c − (1 − noise)·|c|), one
 * option per quantum (the fastest), sorted fastest first; then fits the cost model. With
 * opts->pareto == ZEUS_FRONTIER_PARETO_ENERGY the filter compares the measured energy instead
 * of the cost (the original's order: filter, then effective cost).
 * ZEUS_EINVAL "stage S has no options for forward" when the profile has none. */
int zeus__fopts_build(zeus__fopts *o, const zeus_frontier_profile *p, int stage,
                      zeus_frontier_instr kind, const zeus_frontier_opts *opts);
void zeus__fopts_free(zeus__fopts *o);
/* The option that runs a duration of q units: the slowest option with quant <= q. */
const zeus__fopt *zeus__fopts_pick(const zeus__fopts *o, long q);
/* Slack reclamation: of option `cur` and the slower options that take at most room_s
 * (measured), the index of the one with the least measured effective cost (cur on a tie). */
size_t zeus__fopts_reclaim(const zeus__fopts *o, size_t cur, double room_s);
/* Text of the options and the model, for golden files and debugging. */
int zeus__fopts_dump(const zeus__fopts *o, zeus__buf *b);

/* costmodel.c: fits o->model to o->opt and fills o->table. */
int zeus__costmodel_fit(zeus__fopts *o);
double zeus__costmodel_eval(const zeus__fopts *o, double q);

/* ---- 1F1B DAG ---- */
typedef struct zeus__fdag {
  int S, M;
  int n;              /* nodes: 0 source, 1..S·2M instructions, n − 1 sink */
  int *stage, *mb;    /* per node (−1 for source/sink) */
  zeus_frontier_instr *kind;
  int *succ_off, *succ; /* CSR successors */
  int *pred_off, *pred; /* CSR predecessors */
  int *topo;          /* a topological order */
} zeus__fdag;

/* Node id of the k-th instruction (schedule order) of stage s. */
static inline int zeus__fdag_node(const zeus__fdag *d, int s, int k) { return 1 + s * 2 * d->M + k; }
/* The 1F1B schedule of stage s: kinds and microbatches of its 2M instructions in order. */
void zeus__fdag_1f1b_order(int S, int M, int s, zeus_frontier_instr *kinds, int *mbs);
int zeus__fdag_build(zeus__fdag *d, int S, int M);
void zeus__fdag_free(zeus__fdag *d);
/* Longest path with real durations dur[node] (source/sink 0): start[] and finish[] (either
 * may be NULL when not needed... both required here), returns the makespan. */
double zeus__fdag_longest(const zeus__fdag *d, const double *dur, double *start, double *finish);
/* Evaluates a plan with measured values: time[node], energy[node] of each instruction.
 * Energy = Σ energy + blocking power × Σ_stage (makespan − busy time of the stage). */
void zeus__fdag_evaluate(const zeus__fdag *d, const double *time, const double *energy,
                         double blocking_w, double *time_out, double *energy_out);
/* The same with caller-provided scratch space of 2 × d->n doubles (no allocation). */
void zeus__fdag_evaluate_buf(const zeus__fdag *d, const double *time, const double *energy, double blocking_w,
                             double *scratch, double *time_out, double *energy_out);

/* ---- minimum cut (maxflow.c) ---- */
/* An edge of a network with lower and upper bounds (0 <= lb <= ub; ub = INFINITY for an
 * unbounded edge). Nodes are numbered in a topological order (u < v), the source is node 0
 * and the sink the last. `key` names the edge from call to call (small integers, >= 0): the
 * edge's flow in one call is the next call's starting point. */
typedef struct zeus__lbedge {
  int u, v;
  double lb, ub;
  int key;
} zeus__lbedge;

/* The state of zeus__mincut_lb, kept between calls (zero-initialise; free with
 * zeus__mincut_free). */
typedef struct zeus__mincut {
  double *kflow;          /* flow above the lower bound of the edge with each key */
  int kcap;
  double *sflow, *tflow;  /* flow of the node arcs s → v and v → t */
  int ncap, acap, na;
  int *to, *adj, *anode, *adj_off; /* arcs (a and its reverse a ^ 1), adjacency by node */
  double *res;                     /* residual capacity of each arc */
  int *dist, *cur, *queue, *path;
  double *ex;
} zeus__mincut;

/* Minimum s–t cut of a network with lower and upper bounds on n nodes (s = 0, t = n − 1), the
 * cut's value being Σ ub over edges cut forwards − Σ lb over edges cut backwards: one maximum
 * flow (Dinic, warm-started from the previous call's flows; see maxflow.c), then the source side
 * of the residual graph in side[] (n entries, 1 = source side; the smallest minimum cut).
 * Returns 1 when a finite cut exists (its value in *value), 0 when every cut is infinite, < 0 on
 * error (ZEUS_ENOMEM; ZEUS_EINTERNAL for an edge against the topological order). */
int zeus__mincut_lb(zeus__mincut *c, int n, const zeus__lbedge *e, int m, int s, int t,
                    unsigned char *side, double *value);
void zeus__mincut_free(zeus__mincut *c);

/* ---- recorded plans (plans.c) ---- */
/* Every point's plan, one option quant per DAG node, delta-encoded: consecutive points differ
 * in a few nodes (on the SOSP'24 profiles under one node per point on average), so a point
 * stores only the nodes whose option changed, and a full copy (a checkpoint) is kept whenever
 * the changes since the last one reach the plan's length. Memory is then O(points + changes),
 * where full copies took points × nodes (2.2 GB for Bloom on A40, 8 × 512), and reading any
 * plan costs at most two plans' worth of work: copy the checkpoint, apply at most n changes. */
typedef struct zeus__fplans {
  int n;                /* entries per plan (the DAG's nodes) */
  size_t npts, cappts;  /* points recorded; capacity of off[] (cappts + 1 entries) */
  size_t *off;          /* point i's changes are entries [off[i], off[i + 1]) */
  int32_t *dnode, *dq;  /* changes: the node and its new quant */
  size_t nd, capd;
  int32_t *ck;          /* checkpoints, n entries each */
  size_t *ck_point;     /* the point each checkpoint holds */
  size_t nck, capck;
  size_t since_ck;      /* changes recorded since the last checkpoint */
  int32_t *last;        /* the latest plan recorded (n entries) */
} zeus__fplans;

int zeus__fplans_init(zeus__fplans *pl, int n);
void zeus__fplans_free(zeus__fplans *pl);
/* Records the next point's plan q[0..n). */
int zeus__fplans_push(zeus__fplans *pl, const int32_t *q);
/* Writes point i's plan into q[0..n) (i < npts). */
void zeus__fplans_get(const zeus__fplans *pl, size_t i, int32_t *q);
/* Turns q from point i − 1's plan into point i's (i >= 1), for walking the points in order. */
void zeus__fplans_step(const zeus__fplans *pl, size_t i, int32_t *q);
/* Bytes held, for the log and the benchmark. */
size_t zeus__fplans_bytes(const zeus__fplans *pl);

/* ---- the solved frontier ---- */
struct zeus_frontier {
  zeus_frontier_opts opts;
  zeus__fdag dag;
  zeus__fopts *fo;      /* per (stage, kind): fo[2 * s + kind] */
  int *node_fo;         /* per node: index into fo, −1 for source/sink */
  zeus_frontier_point *pts;
  size_t npts, cappts;
  zeus__fplans plans;   /* per point: the option quant of each node (zeus__fopts_pick) */
  int clock_min_mhz, clock_max_mhz; /* the profile's clocks over the stages used */
  char *profile_name;
};

/* The option node `node` runs at in the plan q (from zeus__fplans_get; NULL for source/sink). */
const zeus__fopt *zeus__frontier_opt(const zeus_frontier *f, const int32_t *q, int node);

/* Which points a write selects (want[npts], 1 = write its plan): `every`, `sample` and
 * `drop_dominated` of wo (NULL: all). ZEUS_EINVAL for a bad selection. */
int zeus__frontier_select(const zeus_frontier *f, const zeus_frontier_write_opts *wo, unsigned char *want);

/* ---- limits: what a solve may ask for before it is refused (see check_size in solver.c) ---- */
/* DAG instructions (S × 2M): memory grows by about 0.5 KB per instruction (485 MB for 8 × 65,536). */
#define ZEUS__FRONTIER_MAX_INSTRUCTIONS (1L << 20)
/* Quanta between each option set's fastest and slowest option, summed (the cost tables). */
#define ZEUS__FRONTIER_MAX_QUANTA (1L << 24)
/* Frontier points (one per time unit between the all-slowest and all-fastest times). */
#define ZEUS__FRONTIER_MAX_POINTS (4L << 20)

/* ---- synthetic profiles (tests, benchmarks) ---- */
/* Adds a profile from a DVFS model to `p`: `stages` stages of unequal speed (imbalanced by a
 * deterministic pattern from `seed`), `nclocks` SM clocks from 1410 MHz down in even steps to
 * about 45 % of it; time(f) = t·(0.35 + 0.65·fmax/f), power(f) = 70 W + 230 W·(f/fmax)^2.6,
 * energy = power × time with ±0.5 % deterministic jitter; a backward takes about twice a
 * forward. `fwd_s` is the forward time of the fastest stage at the top clock. */
int zeus__frontier_synth(zeus_frontier_profile *p, int stages, int nclocks, double fwd_s, unsigned seed);

#endif
