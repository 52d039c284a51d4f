/* zeus/bso.h: the batch-size optimizer and the training side of recurring jobs.
 *
 * A recurring training job is launched again and again (`zeus run`, zeus/run.h). Before each
 * launch the batch-size optimizer (zeus_bso) picks a batch size; after it, it learns the cost
 * of that try. It explores by pruning (from the default batch size downwards, then upwards,
 * a direction ending at its first batch size that does not reach the target metric, the
 * default moving to the best batch size, twice), then exploits with Gaussian Thompson sampling
 * (zeus_gts) over the batch sizes that survived.
 *
 * The training program talks back through the ZEUS_* environment protocol, handled by
 * zeus_job (zeus/job.h).
 *
 * Cost (the Zeus cost of the original): eta * energy_j + (1 - eta) * max_power_w * time_s, where
 * max_power_w is the GPUs' maximum power limit times the number of GPUs of the job.
 *
 * Random numbers are the project's own, so that the same seed gives the same run on every
 * machine (see zeus_rng below). Thread safety: each object is used from one thread at a time.
 */
#ifndef ZEUS_BSO_H
#define ZEUS_BSO_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* ---- random numbers -------------------------------------------------------------------------
 *
 * xoshiro256** (Blackman and Vigna, 2018) seeded through splitmix64: s[i] = splitmix64 output i
 * for the 64-bit seed. Uniform doubles are the top 53 bits of a draw times 2^-53, in [0, 1).
 * Integers below n are drawn by rejection (no modulo bias). Normal deviates use Marsaglia's polar
 * method (pairs of uniforms in (-1, 1) until 0 < s < 1, then u * sqrt(-2 ln(s) / s); the second
 * deviate of the pair is discarded) with a logarithm computed by this library from IEEE
 * additions, multiplications and divisions only, so the stream does not depend on the C
 * library's libm: the same seed gives bit-identical numbers on every machine. */
typedef struct zeus_rng {
  uint64_t s[4];
} zeus_rng;

ZEUS_EXTERN void zeus_rng_seed(zeus_rng *r /* out */, uint64_t seed);
/* The next 64 random bits. */
ZEUS_EXTERN uint64_t zeus_rng_next(zeus_rng *r);
/* Uniform in [0, 1). */
ZEUS_EXTERN double zeus_rng_uniform(zeus_rng *r);
/* Uniform integer in [0, n); n == 0 gives 0 without drawing. */
ZEUS_EXTERN uint64_t zeus_rng_below(zeus_rng *r, uint64_t n);
/* Standard normal deviate (mean 0, standard deviation 1). */
ZEUS_EXTERN double zeus_rng_normal(zeus_rng *r);

/* ---- Gaussian Thompson sampling --------------------------------------------------------------
 *
 * Each arm's reward is Normal(mu, 1 / reward_precision) with a known precision; the belief about
 * mu is Normal(mean, 1 / precision), starting at the prior. Fitting n rewards x_i (conjugate
 * update):  precision' = precision + n * reward_precision,
 *           mean'      = (precision * mean + reward_precision * sum x_i) / precision'.
 * An infinite reward precision (one observation, or observations without spread) makes the
 * belief exact: mean' = the rewards' mean, precision' = infinity, and sampling returns the mean.
 *
 * predict(): the arms are visited in a random order (a Fisher-Yates shuffle); the first arm
 * with fewer than num_exploration observations is returned. Otherwise one mu is sampled per arm
 * (in arm order) and the arm with the largest sample wins (ties: the earlier arm). */
typedef struct zeus_gts zeus_gts;

/* Start from zeus_gts_opts_init(): zero is a value here (seed 0, no exploration). */
typedef struct zeus_gts_opts {
  double prior_mean;        /* default 0 */
  double prior_precision;   /* >= 0, finite; default 0 (no prior information) */
  double reward_precision;  /* every arm's initial reward precision: >= 0 or INFINITY; default 0 */
  long num_exploration;     /* >= 0; default 1 */
  uint64_t seed;            /* default 123456 */
} zeus_gts_opts;

/* One arm's state. */
typedef struct zeus_gts_arm {
  long arm;
  double mean;              /* posterior mean of mu */
  double precision;         /* posterior precision of mu (INFINITY: exact) */
  double reward_precision;
  long num_observations;
} zeus_gts_arm;

ZEUS_EXTERN void zeus_gts_opts_init(zeus_gts_opts *o /* out */);
/* A bandit over n >= 1 distinct arms (copied, order kept). opts NULL: defaults. ZEUS_EINVAL for
 * no arms, a repeated arm or an option out of range (named). */
ZEUS_EXTERN int zeus_gts_open(zeus_gts **out /* out */, const long *arms, size_t n,
                              const zeus_gts_opts *opts);
ZEUS_EXTERN void zeus_gts_close(zeus_gts *g);
/* Sets an arm's reward precision (>= 0 or INFINITY). ZEUS_ENOENT for an unknown arm. */
ZEUS_EXTERN int zeus_gts_set_reward_precision(zeus_gts *g, long arm, double precision);
/* Updates one arm's belief with n rewards (finite); reset first puts the arm back to the prior
 * with no observations. ZEUS_ENOENT for an unknown arm, ZEUS_EINVAL for a non-finite reward. */
ZEUS_EXTERN int zeus_gts_fit_arm(zeus_gts *g, long arm, const double *rewards, size_t n,
                                 bool reset);
/* Fits every arm on the rewards of the pulls (arms[i], rewards[i]); reset applies to every arm. */
ZEUS_EXTERN int zeus_gts_fit(zeus_gts *g, const long *arms, const double *rewards, size_t n,
                             bool reset);
/* The arm to pull next (see above). ZEUS_ESTATE when Thompson sampling meets an arm whose belief
 * has precision 0 (no prior and no information: give a prior precision or explore it). */
ZEUS_EXTERN int zeus_gts_predict(zeus_gts *g, long *arm /* out */);
ZEUS_EXTERN size_t zeus_gts_num_arms(const zeus_gts *g);
/* Arm number i (0 <= i < num_arms) or by value. ZEUS_ERANGE / ZEUS_ENOENT otherwise. */
ZEUS_EXTERN int zeus_gts_arm_at(const zeus_gts *g, size_t i, zeus_gts_arm *out /* out */);
ZEUS_EXTERN int zeus_gts_get_arm(const zeus_gts *g, long arm, zeus_gts_arm *out /* out */);

/* ---- the batch-size optimizer ----------------------------------------------------------------
 *
 * Pruning exploration, num_pruning_rounds rounds: from the default batch size downwards (the
 * default first), then upwards from the one above it; a direction ends at its first batch size
 * that did not reach the target; each batch size that reached it survives the round, and the
 * default moves to the survivor of least cost. The next round starts over from the new default
 * among the survivors. Then a zeus_gts over the survivors (num_exploration 2, the optimizer's
 * prior and seed), each arm fitted on its observed rewards (-cost) with reward precision
 * 1 / variance of those rewards (population variance; INFINITY when they do not vary), over the
 * latest window_size observations of the arm when window_size > 0. Every later observation of
 * an arm refits it the same way.
 *
 * While pruning, predict() returns the batch size the explorer waits for, and observe() must be
 * about that batch size; with `concurrency` an observation of another batch size (a concurrent
 * submission) is kept in the history but does not advance the explorer, without it it is
 * ZEUS_ESTATE. Observations of pruned batch sizes during Thompson sampling are kept in the
 * history only. */
typedef struct zeus_bso zeus_bso;

/* Start from zeus_bso_opts_init(): zero is a value here (seed 0), and num_pruning_rounds 0 is
 * refused. */
typedef struct zeus_bso_opts {
  double prior_mean;        /* default 0 */
  double prior_precision;   /* >= 0, finite; default 0 */
  long window_size;         /* >= 0; 0 (default): every observation */
  long num_pruning_rounds;  /* >= 1; default 2 */
  bool concurrency;         /* default false */
  uint64_t seed;            /* default 123456 */
} zeus_bso_opts;

typedef enum zeus_bso_phase { ZEUS_BSO_PRUNING = 0, ZEUS_BSO_THOMPSON = 1 } zeus_bso_phase;

ZEUS_EXTERN void zeus_bso_opts_init(zeus_bso_opts *o /* out */);
/* An optimizer over n >= 1 distinct positive batch sizes (copied and sorted); default_bs must be
 * one of them. opts NULL: defaults. ZEUS_EINVAL naming what is wrong. */
ZEUS_EXTERN int zeus_bso_open(zeus_bso **out /* out */, const long *batch_sizes, size_t n,
                              long default_bs, const zeus_bso_opts *opts);
ZEUS_EXTERN void zeus_bso_close(zeus_bso *b);
/* The batch size to use next. ZEUS_ESTATE when pruning left no batch size (none reached the
 * target), or from zeus_gts_predict. */
ZEUS_EXTERN int zeus_bso_predict(zeus_bso *b, long *batch_size /* out */);
/* Learns the cost (finite, >= 0) of one try with batch_size and whether it reached the target.
 * ZEUS_EINVAL for an unknown batch size or a bad cost, ZEUS_ESTATE for an unexpected batch size
 * while pruning without concurrency (nothing is recorded then). */
ZEUS_EXTERN int zeus_bso_observe(zeus_bso *b, long batch_size, double cost, bool reached);
ZEUS_EXTERN zeus_bso_phase zeus_bso_get_phase(const zeus_bso *b);
/* The batch size the explorer waits for; 0 during Thompson sampling. */
ZEUS_EXTERN long zeus_bso_expecting(const zeus_bso *b);
/* The bandit (borrowed, valid until the next call on b); NULL while pruning. */
ZEUS_EXTERN const zeus_gts *zeus_bso_bandit(const zeus_bso *b);
/* Number of observations so far, and observation i (batch size and reward = -cost). */
ZEUS_EXTERN size_t zeus_bso_num_observations(const zeus_bso *b);
ZEUS_EXTERN int zeus_bso_observation(const zeus_bso *b, size_t i, long *batch_size /* out */,
                                     double *reward /* out */);
/* The whole state (options, history, explorer, bandit with its random generator) as JSON text
 * (release with zeus_free()); doubles are written with 17 significant digits and non-finite ones
 * as the strings "inf"/"-inf", so loading gives back exactly the same optimizer: the same later
 * predictions. */
ZEUS_EXTERN int zeus_bso_save_state(const zeus_bso *b, char **json /* out */);
/* Rebuilds an optimizer from zeus_bso_save_state's text. ZEUS_EPARSE naming the bad field. */
ZEUS_EXTERN int zeus_bso_load_state(zeus_bso **out /* out */, const char *json);

/* ---- rules ----------------------------------------------------------------------------------- */

/* The learning rate for batch size bs, from the rate default_lr tuned for default_bs: scaled by
 * sqrt(bs / default_bs) for adam, adamw and adadelta, by bs / default_bs for sgd (names in any
 * case). ZEUS_EINVAL for another optimizer (give the rate per batch size instead), a
 * non-positive batch size or a non-finite or negative rate. */
ZEUS_EXTERN int zeus_bso_scale_lr(const char *optimizer, double default_lr, long default_bs,
                                  long bs, double *lr /* out */);

ZEUS_END_DECLS
#endif
