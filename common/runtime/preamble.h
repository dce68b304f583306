// The runtime preamble every distlm binary calls first.
//
// It sets LibTorch's intra-op thread count (LibTorch starts with one thread here, which wastes
// the machine), warns loudly when matrix products would run on the slow reference BLAS (or on
// OpenBLAS's pthread build, whose threads fight LibTorch's OpenMP threads), and
// tells glibc's malloc to keep freed memory for reuse (see preamble.cc).
#pragma once

#include <string>

namespace distlm::runtime {

// What the preamble decided, for banners and tests.
struct PreambleReport {
  int num_threads = 1;        // threads LibTorch now uses for intra-op work
  int ranks_on_host = 1;      // processes sharing this host (from LOCAL_WORLD_SIZE & co.)
  std::string blas;           // the BLAS library the process loaded, e.g. "openblas"
  bool slow_blas = false;     // true for the reference BLAS (~27x slower matrix products)
  std::string blas_threading;  // BlasThreading()
  bool keeps_freed_memory = false;  // malloc told to reuse freed blocks rather than return them
};

// Threads to use when the user gave none: the host's cores shared among the ranks that run on
// it, at least one.
int DefaultNumThreads(int cores, int ranks_on_host);

// Ranks on this host, read from the launchers' variables (torchrun: LOCAL_WORLD_SIZE; Open
// MPI: OMPI_COMM_WORLD_LOCAL_SIZE; Slurm: SLURM_NTASKS_PER_NODE); 1 when none is set.
int RanksOnThisHost();

// Names the BLAS this process has loaded ("openblas", "mkl", "blis", "reference" or
// "unknown").
std::string LoadedBlas();

// How the loaded OpenBLAS runs its threads: "openmp", "pthread", "sequential", or "" when the
// BLAS is not OpenBLAS.
std::string BlasThreading();

// Applies the preamble. num_threads <= 0 means DefaultNumThreads. Prints a warning on stderr
// when the BLAS is the reference implementation. Safe to call more than once.
PreambleReport InitRuntime(int num_threads);

}  // namespace distlm::runtime
