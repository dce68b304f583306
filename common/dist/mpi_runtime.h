// MPI itself, for the MPI group's files (//common/dist:mpi_process_group only): initialised
// once, finalised at exit unless a group was abandoned, and called under one process-wide lock.
#pragma once

#include <atomic>
#include <mutex>

// The C API only: Open MPI's deprecated C++ bindings live in a library we do not link.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

namespace distlm::dist::mpi_internal {

// Set once a group has been given up on (a worker stuck inside MPI, or torn down by an
// exception): MPI_Finalize would then wait for ranks that are not coming, so the process
// exits without it and mpirun ends the job.
extern std::atomic<bool> g_abandoned;

// MPI_THREAD_SERIALIZED allows MPI from any thread but never from two at once; every MPI call
// after initialisation holds this.
extern std::mutex g_mpi_mutex;

// MPI_Init_thread(MPI_THREAD_SERIALIZED) on the first call (and MPI_Finalize at exit), or a
// check that whoever initialised MPI gave that level; then the narrow float types
// (mpi_datatypes.h). Throws UserError when the thread level is too low.
void InitMpiOnce();

// Throws std::runtime_error("<call> failed: <MPI's text>") unless rc is MPI_SUCCESS.
void CheckMpi(int rc, const char* call);

}  // namespace distlm::dist::mpi_internal
