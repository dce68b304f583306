// Did each rank of a data-parallel run do its share of the work, and no more? Seen from outside
// the processes, as the traffic count is: a submission can log anything, and can pad the network
// with bytes of its own, but it cannot lower what the kernel counted of its ranks' memory and
// CPU time. The forgery this closes: every rank (or rank 0, the others copying it) trains the
// whole batch on its own, so that the trace, the final weights and, padded, the traffic are the
// single-node run's, and no gradient is ever synchronised.
//
// Where it looks: a second run of the stage at 512 tokens a sequence, where a rank's share of
// the batch (8 / ranks examples) has activations that outweigh the rest of the process (about
// 28 MB each at 4 ranks, tiny BERT, measured) and forward and backward outweigh the start-up.
// Two yardsticks of the grader's own, on the same flags: its data-parallel reference on the
// same ranks, and the whole batch on one process. A rank that trains the whole batch at once
// holds its activations (the single process's peak); one that trains it a share at a time
// (gradient accumulation) holds a share's but uses the single process's CPU time. So the
// largest rank may hold at most 3/4 of a share more than the grader's largest rank, and use at
// most 0.6 of the gap to the single process's CPU time more (measured, graded in the full jail:
// the references of tasks 2a to 6 at -22 % to -3 % of that gap and within 2.3 MB of the grader's
// memory; the two forgeries at 118 % and 156 %, and 3.1 shares).
#pragma once

#include <cstdint>
#include <string>

#include "grading/test_result.h"

namespace distlm::grading {

// What the busiest process of a run held and used (StageRun::peak_memory_bytes,
// peak_cpu_seconds); -1: not read.
struct ShareFigures {
  int64_t peak_memory_bytes = -1;
  double peak_cpu_seconds = -1;
};

// The grader's own two runs at 512 tokens.
struct ShareYardstick {
  int ranks = 0;
  ShareFigures data_parallel;  // its reference on `ranks` ranks, 8 / ranks examples each
  ShareFigures single;         // the whole batch on one process
};

// Memory and CPU gaps below these are not told from noise: not judged.
inline constexpr int64_t kMinShareBytes = 4'000'000;
inline constexpr double kMinCpuGapSeconds = 0.5;
inline constexpr double kMemoryAllowanceShares = 0.75;
inline constexpr double kCpuAllowanceOfGap = 0.6;

struct ShareVerdict {
  bool memory_judged = false;
  bool cpu_judged = false;
  bool ok = true;
  std::string message;  // what was measured and, when not ok, why not credited
  // Not ok: the parity test scores nothing, the message first; ok: a line more.
  void Judge(TestResult* parity) const;
};

ShareVerdict CheckShare(const ShareFigures& run, const ShareYardstick& yardstick);

}  // namespace distlm::grading
