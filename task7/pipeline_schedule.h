// Task 7b, pipeline parallelism: the order in which each stage runs its micro-batches.
//
// P ranks hold P contiguous blocks of the model (stage 0 the embeddings, stage P-1 the head and
// the loss); a batch is cut into M micro-batches. Stage s can run forward k only once stage s-1
// has sent k's activation, and backward k only once stage s+1 has sent k's gradient back; a
// micro-batch is "in flight" on a stage from its forward to its backward, and holds its
// activations there. Two orders:
//
//   all-forward-all-backward (GPipe): every forward, then every backward; each stage holds all
//     M micro-batches at once.
//   one-forward-one-backward (1F1B, PipeDream-Flush): stage s holds at most min(P - s, M)
//     micro-batches at once, and runs a backward only when it holds that many or has no forward
//     left (a backward taken earlier delays the forwards the later stages wait for). Its memory
//     no longer grows with M.
//
// In both, a stage runs its forwards in micro-batch order, and its backwards too.
//
// With equal times per step both leave the same idle share, the bubble: (P - 1) / (M + P - 1).
// The tests simulate the P stages running your orders: every step once, no deadlock, that
// bubble, and exactly that many micro-batches in flight at the peak.
#pragma once

#include <string>
#include <vector>

namespace distlm::task7 {

struct PipelineStep {
  bool forward = true;  // false: backward
  int micro_batch = 0;
  bool operator==(const PipelineStep& o) const { return forward == o.forward && micro_batch == o.micro_batch; }
};

enum class PipelineSchedule { kAllForwardAllBackward, kOneForwardOneBackward };

// Stage `stage`'s steps, in the order it runs them, for `stages` stages and `micro_batches`
// micro-batches. std::invalid_argument for stage outside [0, stages) or fewer than 1 of either.
std::vector<PipelineStep> StageSteps(PipelineSchedule schedule, int stages, int stage, int micro_batches);

// "F0 F1 B0 ...": for messages.
std::string StepsToString(const std::vector<PipelineStep>& steps);

}  // namespace distlm::task7
