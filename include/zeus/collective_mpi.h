/* zeus/collective_mpi.h: a zeus_collective over MPI (library zeus_mpi, built when CMake finds MPI).
 *
 * Not included by zeus.h, so that programs without MPI never need its headers. Link with
 * zeus_mpi (CMake target zeus::zeus_mpi in the build tree; -lzeus_mpi -lzeus once installed)
 * and your MPI.
 *
 *   MPI_Init(&argc, &argv);
 *   zeus_collective coll;
 *   zeus_collective_mpi(&coll);            // MPI_COMM_WORLD
 *   zeus_plo_opts o; zeus_plo_opts_init(&o);
 *   o.collective = &coll;                  // every rank: energy summed, time maxed, one optimum
 *   ...
 *   MPI_Finalize();                        // after closing what uses coll
 *
 * The callbacks use MPI_Allreduce (MPI_IN_PLACE, MPI_DOUBLE, MPI_SUM / MPI_MAX) and MPI_Bcast
 * (MPI_BYTE) on MPI_COMM_WORLD; every rank must make the same calls in the same order.
 */
#ifndef ZEUS_COLLECTIVE_MPI_H
#define ZEUS_COLLECTIVE_MPI_H

#include "zeus/collective.h"

ZEUS_BEGIN_DECLS

/* Fills *out with callbacks over MPI_COMM_WORLD, this process's rank and the number of ranks.
 * MPI must be initialised (MPI_Init or MPI_Init_thread) and not yet finalised: otherwise
 * ZEUS_ESTATE. *out holds no resources; it is valid until MPI_Finalize. A failing MPI call in a
 * callback returns ZEUS_EIO naming the call and MPI's message (with MPI's default error handler
 * the job aborts first). */
ZEUS_EXTERN int zeus_collective_mpi(zeus_collective *out /* out */);

ZEUS_END_DECLS
#endif
