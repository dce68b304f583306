// One clock across ranks for the traces: each rank's offset to rank 0's steady clock, measured
// over the process group before training (Cristian's algorithm: the round trip with the
// smallest delay of several, the offset taken at its midpoint, known to within half of it).
// Ranks on one host share steady_clock, and their offsets come out near 0; on several hosts
// this is what lines their timelines up.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/trace/recorder.h"

namespace distlm::trace {

// Collective: every rank of `pg` calls it. `rounds` round trips between rank 0 and each other
// rank in turn (broadcasts of one int64, so any backend serves). The trace's time 0 is rank 0's
// clock at the end. If the group cannot broadcast CPU tensors, the clocks are taken as one
// (synced false).
ClockMapping SyncClocks(c10d::ProcessGroup& pg, int rounds = 8);

}  // namespace distlm::trace
