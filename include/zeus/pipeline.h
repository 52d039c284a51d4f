/* zeus/pipeline.h: the instruction order of pipeline-parallel training.
 *
 * One definition of synchronous 1F1B, shared by everything that needs it: the frontier solver
 * builds its pipeline DAG from it (zeus/frontier.h), the Perseus schedulers use it for ranks that
 * send no pipe_schedule (zeus/pfo_server.h), and examples/pipeline_sim.h simulates it.
 *
 * Synchronous 1F1B over M microbatches on S stages: stage s runs w = min(S - s - 1, M) warm-up
 * forwards (microbatches 0..w-1), then alternates one forward and one backward (forward w + i,
 * backward i) M - w times, then drains the remaining w backwards; 2M instructions in all. This
 * is DeepSpeed's TrainSchedule (which the original's Synchronous1F1B follows), also when M < S.
 *
 * Pure functions: no allocation, no state, thread-safe.
 */
#ifndef ZEUS_PIPELINE_H
#define ZEUS_PIPELINE_H

#include "zeus/common.h"

ZEUS_BEGIN_DECLS

/* The instruction kinds of a pipeline schedule. */
typedef enum zeus_pipeline_instr {
  ZEUS_PIPELINE_FORWARD = 0,
  ZEUS_PIPELINE_BACKWARD = 1
} zeus_pipeline_instr;

/* "forward" or "backward" (the names on the wire and in plan files); NULL for another value.
 * Static storage. */
ZEUS_EXTERN const char *zeus_pipeline_instr_name(zeus_pipeline_instr kind);

/* Instruction k (0 <= k < 2 * microbatches) of stage `stage` (0 <= stage < stages) in one
 * synchronous 1F1B iteration: its kind, and the microbatch it works on (`microbatch` may be
 * NULL). ZEUS_EINVAL naming the argument out of range (stages or microbatches < 1); *kind and
 * *microbatch are then untouched. */
ZEUS_EXTERN int zeus_pipeline_1f1b_instr(int stages, int stage, int microbatches, int k,
                                         zeus_pipeline_instr *kind /* out */,
                                         int *microbatch /* out, may be NULL */);

ZEUS_END_DECLS
#endif
