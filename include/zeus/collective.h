/* zeus/collective.h: how the processes of one training job agree on one answer.
 *
 * Multi-process jobs (one process per GPU, as torchrun or mpirun start them) must agree on
 * what they measured and decided: the power-limit optimizer sums energy and takes the largest
 * time across ranks, the Perseus client broadcasts the job id from rank 0. The optimizers take
 * an optional zeus_collective; NULL means a single process.
 *
 * A collective is a pair of callbacks over the caller's communicator. Implementations: MPI in C
 * (zeus/collective_mpi.h, built when MPI is found), torch.distributed in the Python binding, or
 * the caller's own. Every rank must make the same calls in the same order, as with any
 * collective; a callback returns ZEUS_OK or a negative ZEUS_E... code (and may set the message
 * with zeus_set_errmsg()).
 */
#ifndef ZEUS_COLLECTIVE_H
#define ZEUS_COLLECTIVE_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

typedef enum zeus_reduce_op {
  ZEUS_REDUCE_SUM = 0,
  ZEUS_REDUCE_MAX = 1,
} zeus_reduce_op;

typedef struct zeus_collective {
  /* Passed back to the callbacks. */
  void *ctx;
  /* This process's rank and the number of ranks (>= 1). */
  int rank;
  int world_size;
  /* Reduces values[0..n) element-wise across ranks with op; every rank gets the result in
   * place. */
  int (*allreduce)(void *ctx, double *values, size_t n, zeus_reduce_op op);
  /* Copies len bytes of buf on rank `root` into buf on every other rank. */
  int (*broadcast)(void *ctx, void *buf, size_t len, int root);
} zeus_collective;

/* Checks that c is usable: both callbacks set, world_size >= 1, 0 <= rank < world_size.
 * NULL is valid (a single process). ZEUS_EINVAL names the field. */
ZEUS_EXTERN int zeus_collective_check(const zeus_collective *c);

/* Helpers that treat NULL as a single process (a no-op that succeeds). */
ZEUS_EXTERN int zeus_collective_allreduce(const zeus_collective *c, double *values /* in, out */,
                                          size_t n, zeus_reduce_op op);
ZEUS_EXTERN int zeus_collective_broadcast(const zeus_collective *c, void *buf /* in, out */,
                                          size_t len, int root);

/* ---- an in-process collective for ranks that are threads -------------------------------------
 * For simulations and tests where each rank is a thread of one process (examples/pipeline_sim.c):
 *
 *   zeus_thread_group *g;  zeus_thread_group_open(&g, 4);
 *   // in thread r:  zeus_collective c;  zeus_thread_group_collective(g, r, &c);
 *   zeus_thread_group_close(g);   // after every thread is done with it
 */
typedef struct zeus_thread_group zeus_thread_group;

/* A group of world_size >= 1 threads. */
ZEUS_EXTERN int zeus_thread_group_open(zeus_thread_group **out /* out */, int world_size);
ZEUS_EXTERN void zeus_thread_group_close(zeus_thread_group *g);
/* The collective of member `rank` (0 <= rank < world_size); valid while the group is open. */
ZEUS_EXTERN int zeus_thread_group_collective(zeus_thread_group *g, int rank,
                                             zeus_collective *out /* out */);

ZEUS_END_DECLS
#endif
