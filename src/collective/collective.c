/* collective.c: validation and NULL-is-one-process helpers for zeus_collective. */
#include "zeus/collective.h"

#include "core/core.h"

int zeus_collective_check(const zeus_collective *c) {
  if (!c) return ZEUS_OK;
  if (!c->allreduce) return zeus__error(ZEUS_EINVAL, "collective: allreduce callback is NULL");
  if (!c->broadcast) return zeus__error(ZEUS_EINVAL, "collective: broadcast callback is NULL");
  if (c->world_size < 1)
    return zeus__error(ZEUS_EINVAL, "collective: world_size %d, expected >= 1", c->world_size);
  if (c->rank < 0 || c->rank >= c->world_size)
    return zeus__error(ZEUS_EINVAL, "collective: rank %d, expected 0 <= rank < world_size (%d)", c->rank,
                       c->world_size);
  return ZEUS_OK;
}

int zeus_collective_allreduce(const zeus_collective *c, double *values, size_t n, zeus_reduce_op op) {
  if (!c || c->world_size == 1 || n == 0) return ZEUS_OK;
  if (op != ZEUS_REDUCE_SUM && op != ZEUS_REDUCE_MAX)
    return zeus__error(ZEUS_EINVAL, "collective: unknown reduce op %d", (int)op);
  int rc = c->allreduce(c->ctx, values, n, op);
  if (rc < 0 && zeus_errcode() != rc) return zeus__error(rc, "collective allreduce failed: %s", zeus_strerror(rc));
  return rc < 0 ? rc : ZEUS_OK;
}

int zeus_collective_broadcast(const zeus_collective *c, void *buf, size_t len, int root) {
  if (!c || c->world_size == 1 || len == 0) return ZEUS_OK;
  if (root < 0 || root >= c->world_size)
    return zeus__error(ZEUS_EINVAL, "collective: broadcast root %d, expected 0 <= root < %d", root, c->world_size);
  int rc = c->broadcast(c->ctx, buf, len, root);
  if (rc < 0 && zeus_errcode() != rc) return zeus__error(rc, "collective broadcast failed: %s", zeus_strerror(rc));
  return rc < 0 ? rc : ZEUS_OK;
}
