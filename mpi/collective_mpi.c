/* A zeus_collective over MPI_COMM_WORLD (library zeus_mpi; libzeus itself never links MPI). */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <mpi.h>

#include "zeus/collective_mpi.h"
#include "zeus/error.h"

static int mpi_fail(const char *call, int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", code);
  return zeus_set_errmsg(ZEUS_EIO, "%s failed: %s", call, msg);
}

static int mpi_allreduce(void *ctx, double *values, size_t n, zeus_reduce_op op) {
  (void)ctx;
  MPI_Op mop = op == ZEUS_REDUCE_MAX ? MPI_MAX : MPI_SUM;
  while (n > 0) {
    int chunk = n > (size_t)INT_MAX ? INT_MAX : (int)n;
    int rc = MPI_Allreduce(MPI_IN_PLACE, values, chunk, MPI_DOUBLE, mop, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Allreduce", rc);
    values += chunk;
    n -= (size_t)chunk;
  }
  return ZEUS_OK;
}

static int mpi_broadcast(void *ctx, void *buf, size_t len, int root) {
  (void)ctx;
  char *p = buf;
  while (len > 0) {
    int chunk = len > (size_t)INT_MAX ? INT_MAX : (int)len;
    int rc = MPI_Bcast(p, chunk, MPI_BYTE, root, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_fail("MPI_Bcast", rc);
    p += chunk;
    len -= (size_t)chunk;
  }
  return ZEUS_OK;
}

int zeus_collective_mpi(zeus_collective *out) {
  if (!out) return zeus_set_errmsg(ZEUS_EINVAL, "zeus_collective_mpi: out is required");
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin)
    return zeus_set_errmsg(ZEUS_ESTATE,
                           "zeus_collective_mpi: MPI is %s; call MPI_Init first and "
                           "MPI_Finalize only after the optimizer is closed",
                           fin ? "already finalised" : "not initialised");
  int rank = 0, size = 0, rc;
  if ((rc = MPI_Comm_rank(MPI_COMM_WORLD, &rank)) != MPI_SUCCESS) return mpi_fail("MPI_Comm_rank", rc);
  if ((rc = MPI_Comm_size(MPI_COMM_WORLD, &size)) != MPI_SUCCESS) return mpi_fail("MPI_Comm_size", rc);
  memset(out, 0, sizeof *out);
  out->rank = rank;
  out->world_size = size;
  out->allreduce = mpi_allreduce;
  out->broadcast = mpi_broadcast;
  return ZEUS_OK;
}
