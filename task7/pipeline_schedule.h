// Task 7b, pipeline parallelism: the order in which each stage runs its micro-batches.
//
// P ranks hold P contiguous blocks of the model (stage 0 the embeddings, stage P-1 the head and
// the loss); a batch is cut into M micro-batches. Stage s runs forward k on the activation stage
// s-1 sends it, and backward k on the gradient stage s+1 sends back. Two orders:
//
//   all-forward-all-backward (GPipe): every forward, then every backward. Each stage holds the
//     activations of all M micro-batches at once.
//   one-forward-one-backward (1F1B, PipeDream-Flush): stage s first runs P - 1 - s forwards
//     (warm-up), then alternates one forward and one backward (steady state), then runs the
//     backwards left (cool-down). A stage never holds more than P - s micro-batches' activations.
//
// With equal times per step both leave the same idle share, the bubble: (P - 1) / (M + P - 1).
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
