/* The synchronous 1F1B order (zeus/pipeline.h): one closed form, so that the solver's DAG, the
 * Perseus schedulers and the pipeline simulator cannot drift apart. */
#include "core/core.h"
#include "zeus/pipeline.h"

const char *zeus_pipeline_instr_name(zeus_pipeline_instr kind) {
  switch (kind) {
    case ZEUS_PIPELINE_FORWARD: return "forward";
    case ZEUS_PIPELINE_BACKWARD: return "backward";
  }
  return NULL;
}

int zeus_pipeline_1f1b_instr(int stages, int stage, int microbatches, int k, zeus_pipeline_instr *kind,
                             int *microbatch) {
  if (!kind) return zeus__error(ZEUS_EINVAL, "1F1B order: kind is required");
  if (stages < 1) return zeus__error(ZEUS_EINVAL, "1F1B order: stages is %d, expected >= 1", stages);
  if (stage < 0 || stage >= stages)
    return zeus__error(ZEUS_EINVAL, "1F1B order: stage is %d, expected 0..%d", stage, stages - 1);
  if (microbatches < 1)
    return zeus__error(ZEUS_EINVAL, "1F1B order: microbatches is %d, expected >= 1", microbatches);
  if (k < 0 || k / 2 >= microbatches)
    return zeus__error(ZEUS_EINVAL, "1F1B order: instruction %d, expected 0..%d", k, 2 * microbatches - 1);
  int m = microbatches, warm = stages - stage - 1 < m ? stages - stage - 1 : m;
  zeus_pipeline_instr kd;
  int mb;
  if (k < warm) { /* warm-up forwards */
    kd = ZEUS_PIPELINE_FORWARD;
    mb = k;
  } else if (k < 2 * m - warm) { /* steady state: forward warm + i, then backward i */
    int i = (k - warm) / 2;
    kd = (k - warm) % 2 == 0 ? ZEUS_PIPELINE_FORWARD : ZEUS_PIPELINE_BACKWARD;
    mb = kd == ZEUS_PIPELINE_FORWARD ? warm + i : i;
  } else { /* draining backwards */
    kd = ZEUS_PIPELINE_BACKWARD;
    mb = m - warm + (k - (2 * m - warm));
  }
  *kind = kd;
  if (microbatch) *microbatch = mb;
  return ZEUS_OK;
}
