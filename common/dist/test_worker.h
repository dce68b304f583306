// For the multi-process tests: the worker side. A test binary re-executes itself (directly,
// or under mpirun) with DISTLM_DIST_TEST_MODE set; the worker builds its group from the dist
// flags and environment, like a stage would, and runs the mode:
//   collectives  every collective the stages use, against closed forms; exit 3 on a mismatch
//   agree        CheckAgreement("model config", $DISTLM_DIST_TEST_VALUE)
//   init         InitDistributed only (for the start-up error cases); with
//                $DISTLM_DIST_TEST_AWAIT_CLAIMS=N rank 0 then keeps the store up until N
//                processes have claimed rank 1
//   die          rank $DISTLM_DIST_TEST_DIE_RANK kills itself (SIGKILL) after start-up; the
//                others all-reduce until that fails and throw LostRankError
//   hang         rank $DISTLM_DIST_TEST_DIE_RANK sleeps instead of joining an all-reduce
// Errors go through distlm::RunMain: "error: <one line>" and exit 2.
#pragma once

#include <string>
#include <vector>

#include "common/dist/dist.h"

namespace distlm::dist::testing {

// Runs every collective the stages use on ctx.pg and compares each result with its closed
// form. `mpi_only` adds the ones Gloo 1.13 lacks (reduce_scatter, _reduce_scatter_base,
// _allgather_base), non-contiguous tensors and argument errors. Returns what failed.
std::vector<std::string> CheckCollectives(DistContext& ctx, bool mpi_only);

// True in a re-executed worker.
bool IsWorker();

// The worker's main: parses the dist flags from argv and runs the mode.
int WorkerMain(int argc, char** argv);

}  // namespace distlm::dist::testing
