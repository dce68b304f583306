// What a trace says about each update: compute time, communication time, how much of the
// communication compute hid, how much the ranks waited. Per rank and update, with W the
// update's span on the main thread:
//   C = the union of its forward, backward and optimizer-step spans (the main thread computing),
//       less the stage's unit hooks inside them (task 6 waits for its gathers there)
//   M = the union of its collectives, launch to completion
//   busy = |M|, hidden = |M ∩ C|, exposed = busy - hidden, idle = |W| - |C ∪ M|,
//   waiting = the union over its collectives of [this rank's launch, the last rank's launch]
//             (the time some collective of this rank could not progress for want of a slower
//             rank; a union, so that 25 buckets launched 40 ms early count 40 ms, not 1 s).
// HolisticTraceAnalysis and torchtitan's overlap analysis measure hidden communication the same
// way (an intersection of merged intervals); waiting needs the ranks on one clock (clock_sync.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace distlm::trace {

struct UpdateOverlap {
  int rank = 0;
  int64_t update = 0;
  int collectives = 0;
  double step_ms = 0, compute_ms = 0, comm_busy_ms = 0, comm_hidden_ms = 0, comm_exposed_ms = 0, idle_ms = 0;
  double waiting_ms = 0;  // -1: not known (the ranks' collectives did not pair up, or one rank)
  nlohmann::json ToJson() const;
};

// Every (rank, update) of a Chrome trace (one rank's file or a merged one), by update then rank.
// Throws a one-line UserError when it holds no update span.
std::vector<UpdateOverlap> AnalyseOverlap(const nlohmann::json& trace);

// A table, one line per update and rank, then the means over updates of each rank.
std::string OverlapTable(const std::vector<UpdateOverlap>& rows);

}  // namespace distlm::trace
