// Task 8a: local SGD and DiLoCo. N workers each train alone for H updates (part 1's step, each
// with its own AdamW, on its own shard of the data), then meet once: the round's
// pseudo-gradient, how far the workers moved on average, goes through an outer optimizer applied
// to where the round started, and every worker starts the next round from the result. Across a
// slow link that is one exchange every H updates instead of one every update.
#pragma once

#include <memory>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include "task8/int8_exchange.h"

namespace distlm::task8 {

// The outer optimizer: torch.optim.SGD's update on the round's pseudo-gradient, with its
// momentum and Nesterov as torch defines them. DiLoCo's: lr 0.7, momentum 0.9, Nesterov.
// Momentum 0: plain SGD (lr 1 then makes a round the workers' average: local SGD).
struct OuterOptimizerOptions {
  double lr = 0.7;
  double momentum = 0.9;
  bool nesterov = true;
};

// One worker's side of the rounds; the caller keeps it for the whole run.
//
// Begin(parameters) is called once, before training, on every worker, with the parameters every
// worker starts from (the same tensors everywhere). End(pg, parameters) is called on every worker
// after its H-th update of a round. When End returns, on every worker and in the same bits:
//   - the parameters are the outer optimizer's step from the round's start, taken with the
//     round's pseudo-gradient g = start - (the mean over workers of their parameters);
//   - the next round starts from them.
// The outer optimizer's state carries from round to round, as torch.optim.SGD's does from step
// to step. What a worker keeps, what it sends and when, is yours.
//
// With Compression::kInt8 (8b) each worker sends its pseudo-gradient as an Int8Message
// (int8_exchange.h), and the mean is the mean of what the workers sent, dequantized. What a
// worker's message missed of what it meant to send is added to what it sends next round. Every
// worker still ends each round with the same bits.
//
// 8c: workers leave and join between rounds (membership.h).
//   - An End whose collective throws (a worker was lost) must leave this worker as it found it:
//     the stage calls End again, with the survivors' group, and the round's mean is then theirs.
//   - SharedState() is what every worker holds alike between rounds besides the parameters, in
//     tensors. On a worker that joins, Begin(the others' parameters) and then
//     LoadSharedState(what a trained worker's SharedState() returned) make its next End the
//     same as theirs would have been had it trained from the start. What is a worker's own (8b's
//     error) is not shared: a joiner has sent nothing yet.
class OuterLoop {
 public:
  virtual ~OuterLoop() = default;
  virtual void Begin(const std::vector<torch::Tensor>& parameters) = 0;
  virtual void End(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) = 0;
  virtual std::vector<torch::Tensor> SharedState() const = 0;
  virtual void LoadSharedState(const std::vector<torch::Tensor>& state) = 0;
};

std::unique_ptr<OuterLoop> MakeOuterLoop(const OuterOptimizerOptions& options,
                                         Compression compression = Compression::kNone);

}  // namespace distlm::task8
