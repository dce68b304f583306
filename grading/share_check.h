// Did each rank of a run do its share of the work, and no more? Seen from outside the processes,
// as the traffic count is: a submission can log anything, and can pad the network with bytes of
// its own, but it cannot lower what the kernel counted of its ranks' memory and CPU time. The
// forgery this closes: every rank (or rank 0, the others copying it) trains the whole batch on
// the whole model on its own, so that the trace, the final weights and, padded, the traffic are
// the single-node run's, and nothing is ever synchronised.
//
// Where it looks: a second run of the layout at 512 tokens a sequence, where a rank's share
// (its 8 / ranks examples in data parallel; its heads and MLP slice in tensor parallel; its
// layers in a pipeline) has activations that outweigh the rest of the process (about 28 MB an
// example pair, tiny BERT, measured) and forward and backward outweigh the start-up. Two
// yardsticks of the grader's own, on the same flags: its own run of the layout (task 2b's
// reference for the data-parallel stages, the stage's own reference for task 7), and the whole
// batch on one process. A rank that trains the whole batch at once holds its activations (the
// single process's peak); one that trains it a piece at a time (gradient accumulation) holds a
// piece's but uses the single process's CPU time. So the largest rank may hold at most 3/4 of a
// share ((single - split) / (ranks - 1)) more than the grader's largest rank, and use at most
// 0.6 of the gap to the single process's CPU time more (see kCpuAllowanceOfSplit for where the
// gap is small). A largest rank that held 3/4 of a share less than the grader's is not credited
// either: every rank holds its own share's activations, so such a figure says some process or
// thread was out of the count (a rank's CPU time is not bounded from below: honest runs have used
// less than the grader's own data-parallel run, whose synchronisation costs more). Measured,
// graded in the full jail: the references of tasks 2a to 6 at -22 % to
// -3 % of that gap and within 2.3 MB of the grader's memory; the two forgeries of data
// parallelism at 118 % and 156 %, and 3.1 shares.
//
// The same bounds hold the run as a whole, from its control group, where the grader's own runs
// had one: its ranks' mean (the run's memory in use at its peak and its CPU time, over the
// ranks) against the grader's own run's mean and the single process. Nothing a process does to
// itself hides from that count (an exited child, a zombie's threads, a process the watch sampled
// too rarely), so a student's run the grader could not account is not credited. It is bounded
// from above only: a lean run is no sign of hiding there.
#pragma once

#include <cstdint>
#include <string>


namespace distlm::grading {

// What the busiest process of a run held and used (StageRun::peak_memory_bytes,
// peak_cpu_seconds), and what the run as a whole did, from its control group
// (StageRun::run_memory_bytes, run_cpu_seconds: every process and thread it ever had, which no
// process state hides); -1: not read.
struct ShareFigures {
  int64_t peak_memory_bytes = -1;
  double peak_cpu_seconds = -1;
  int64_t run_memory_bytes = -1;
  double run_cpu_seconds = -1;
};

// The grader's own two runs at 512 tokens, and the words for them.
struct ShareYardstick {
  int ranks = 0;
  ShareFigures split;   // its own run of the layout on `ranks` ranks
  ShareFigures single;  // the whole batch on one process
  std::string split_name = "data-parallel run";        // "the grader's own " + this
  std::string share_name = "a rank's share of the batch";  // what one rank should compute
  // The last words of a verdict that failed: what a rank of this layout does instead.
  std::string advice = "a data-parallel rank computes the gradients of its own examples and gets the others' through "
                       "the synchronisation";
};

// Memory and CPU gaps below these are not told from noise: not judged.
inline constexpr int64_t kMinShareBytes = 4'000'000;
inline constexpr double kMinCpuGapSeconds = 0.5;
inline constexpr double kMemoryAllowanceShares = 0.75;
// CPU time is the noisier count (an honest run has come out 39 % over the grader's own run of
// the same program, measured): the allowance is 0.6 of the gap, and never under 45 % of the
// grader's own run's figure; where that leaves less than a fifth of the gap to a rank that did
// the whole batch's work (tensor parallelism on 2 ranks, whose ranks each do about 2/3 of the
// whole), the CPU time is not judged.
inline constexpr double kCpuAllowanceOfGap = 0.6;
inline constexpr double kCpuAllowanceOfSplit = 0.45;
inline constexpr double kCpuJudgedUpToGap = 0.8;

struct ShareVerdict {
  bool memory_judged = false;
  bool cpu_judged = false;
  bool ok = true;
  std::string message;  // what was measured and, when not ok, why not credited
};

ShareVerdict CheckShare(const ShareFigures& run, const ShareYardstick& yardstick);

}  // namespace distlm::grading
