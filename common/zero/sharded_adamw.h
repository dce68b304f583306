// ZeRO stage 2 on one rank: the reference AdamW over this rank's shard of a flat buffer.
//
// At construction every parameter becomes a view of one flat float32 buffer (FlatLayout: in
// registration order, padded to a multiple of the world size), and every parameter's .grad a
// view of a second one, so backward writes straight into the flat gradient, and whatever is
// written into the flat parameters is the model's parameters, with no copy. Of the N * S
// elements, the rank owns the shard [rank * S, (rank + 1) * S) and keeps, for it only:
//   - grad_shard(): S floats of its own (not a view of flat_grad), the gradient StepShard
//     reads; the class never fills it from flat_grad;
//   - AdamW's exp_avg and exp_avg_sq for the shard's real elements (not the padding): 1/N of
//     what BertAdamW holds for the whole model. This is the memory ZeRO saves.
// The class holds the buffers and does the arithmetic of one rank. Of its methods only
// ClipGradShard and GatherState communicate (a norm, the optimizer state); moving gradients
// and parameters between ranks is the caller's, in task5/sharded_step.h.
// StepShard runs train::BertAdamW itself over the shard's pieces of each parameter (named as
// the parameter, so weight decay skips biases and LayerNorm weights exactly as for the whole
// model): the same arithmetic, eps before the bias correction included, in one place.
//
// What is not saved here: backward still produces the whole gradient (flat_grad) before it is
// reduce-scattered, and the whole parameters stay on every rank. ZeRO-2 proper reduce-scatters
// gradient buckets while backward runs and frees them; stage 3 (FSDP) shards the parameters too.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include "common/train/bert_adamw.h"
#include "common/zero/flat_layout.h"

namespace distlm::zero {

class ShardedAdamW {
 public:
  // params: (name, parameter) in registration order, float32. Moves each parameter's data
  // into the flat buffer (values kept) and points its .grad at the flat gradient (zeros).
  ShardedAdamW(std::vector<std::pair<std::string, torch::Tensor>> params, train::AdamWOptions options, int rank,
               int world_size);

  const FlatLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  int world_size() const { return layout_.world_size(); }

  // The whole gradient, padded (N * S elements): backward accumulates into it.
  torch::Tensor& flat_grad() { return flat_grad_; }
  // This rank's averaged gradient (S elements), what the step reads.
  torch::Tensor& grad_shard() { return grad_shard_; }
  // The whole parameters, padded (N * S elements): every parameter is a view of it.
  torch::Tensor& flat_params() { return flat_params_; }
  // This rank's part of flat_params (a view, S elements), what the step writes.
  torch::Tensor& param_shard() { return param_shard_; }

  // Makes every .grad a view of flat_grad again, with its values: a .grad that something
  // replaced (a zero_grad that sets gradients to none, then backward) is copied in, a missing
  // one becomes zeros. Nothing to do, and no copy, when backward wrote into the views.
  void AdoptGradients();

  // Squared L2 norm of grad_shard, in double.
  double ShardSquaredNorm() const;
  // Clipping by a norm computed elsewhere, as train::ClipGradNorm does it: the float32
  // coefficient max_norm / (norm + 1e-6) multiplies grad_shard when below 1; max_norm <= 0
  // leaves it alone.
  void ScaleGradShard(double norm, double max_norm);
  // The global gradient norm (sqrt of the all-reduced squared shard norms), then
  // ScaleGradShard with it. A collective. Returns the norm before clipping.
  double ClipGradShard(c10d::ProcessGroup& pg, double max_norm);
  // One AdamW update of param_shard from grad_shard, at the current learning rate.
  void StepShard();
  // Zeroes flat_grad (every .grad) and grad_shard.
  void ZeroGrad();

  void set_lr(double lr) { shard_opt_->set_lr(lr); }
  double lr() const { return shard_opt_->lr(); }
  int64_t step_count() const { return shard_opt_->step_count(); }
  double last_step_ms() const { return last_step_ms_; }  // StepShard's own time, last call

  // Bytes this rank holds: AdamW's moments for its shard, and its gradient shard.
  int64_t OptimizerStateBytes() const { return shard_opt_->StateBytes(); }
  int64_t GradShardBytes() const { return grad_shard_.nbytes(); }
  int64_t FlatGradBytes() const { return flat_grad_.nbytes(); }

  // Snapshots. GatherState gathers the moment shards on rank 0 and returns there the whole
  // state in BertAdamW's form (one exp_avg/exp_avg_sq per parameter, its shape; views of one
  // buffer per moment), so a snapshot has the same format as every other stage's. Other ranks
  // get tensors of the same shapes with undefined values (what a resume broadcasts into). A
  // collective: every rank calls it.
  train::BertAdamW::State GatherState(c10d::ProcessGroup& pg);
  // Takes this rank's slices of a whole state (as GatherState returns) and its step count.
  void LoadState(const train::BertAdamW::State& whole);

 private:
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  FlatLayout layout_;
  int rank_;
  std::vector<Segment> segments_;
  torch::Tensor flat_params_, flat_grad_, param_shard_, grad_shard_;
  std::unique_ptr<train::BertAdamW> shard_opt_;  // over the shard's segments
  double last_step_ms_ = 0;
};

// Collectives over equal blocks, with a fallback where the backend lacks them. Gloo in
// LibTorch 1.13 has neither reduce_scatter nor _allgather_base; MPI and NCCL have both.
bool HasReduceScatter(const c10d::ProcessGroup& pg);
// One line for the log when a fallback is used, else "".
std::string FallbackNote(const c10d::ProcessGroup& pg);

}  // namespace distlm::zero
