// Task 6's sharded state, given code: one FsdpUnit per unit of the model (BERT and the ViT: the
// embeddings, each encoder layer, the head; model/unit_hooks.h), and FsdpModel, all of them
// with the AdamW of the shards.
//
// A unit's parameters are laid end to end in one flat float32 buffer, full_params(), padded to
// N x S elements (zero::FlatLayout over the unit's parameters: rank r owns [r*S, (r+1)*S)), and
// every parameter of the unit is a view of it. Between uses that buffer has NO bytes: its
// storage is released, so the views keep their shapes but point at nothing (reading them is a
// crash, which is why the stage checks after each of your functions). What a rank keeps for
// good is its block: param_shard() (S elements, storage of its own), grad_shard() (S), and the
// AdamW moments of the shard. Per rank that is 16 bytes x S for the whole model: ZeRO stage 3.
//
// Why storage and not tensors: autograd keeps, for backward, the parameters and views of them
// (a Linear saves weight.t()), all sharing full_params()'s storage. Dropping the tensor
// full_params() frees nothing while those views live; releasing the storage frees the bytes
// under all of them at once, and giving it bytes again (then gathering) makes every saved view
// valid again, with the same values, before the unit's backward reads them. This is what
// PyTorch's FSDP does with storage().resize_(0).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include "common/model/unit_hooks.h"
#include "common/train/bert_adamw.h"
#include "common/zero/flat_layout.h"

namespace distlm::task6 {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Gives `t`'s storage its bytes back (the values are undefined until written), enough for t:
// every tensor sharing the storage (every view) sees them. Nothing when it has them already.
void AllocateStorage(const torch::Tensor& t);
// Frees `t`'s storage: every tensor sharing it keeps its shape and has no bytes.
void ReleaseStorage(const torch::Tensor& t);
// Bytes `t`'s storage holds now.
int64_t StorageBytes(const torch::Tensor& t);

class FsdpUnit {
 public:
  // `params`: the unit's parameters (the model's own tensors, float32, on one device). Each
  // becomes a view of full_params() with its values; this rank's block is copied to
  // param_shard(); then the full parameters are released.
  FsdpUnit(std::string name, NamedTensors params, int rank, int world_size);

  const std::string& name() const { return name_; }
  const zero::FlatLayout& layout() const { return layout_; }
  const NamedTensors& params() const { return params_; }
  int rank() const { return rank_; }
  int world_size() const { return layout_.world_size(); }
  int64_t shard_numel() const { return layout_.shard_numel(); }

  // N x S elements, every parameter of the unit a view of it; bytes only while gathered.
  torch::Tensor& full_params() { return full_params_; }
  const torch::Tensor& full_params() const { return full_params_; }
  // S elements: this rank's block of the parameters (storage of its own).
  torch::Tensor& param_shard() { return param_shard_; }
  const torch::Tensor& param_shard() const { return param_shard_; }
  // N x S elements while the unit's backward writes its gradient (every .grad of the unit is
  // a view of it); undefined otherwise.
  torch::Tensor& full_grad() { return full_grad_; }
  const torch::Tensor& full_grad() const { return full_grad_; }
  // S elements: this rank's block of the gradient averaged over ranks, summed over the
  // micro-batches of the update.
  torch::Tensor& grad_shard() { return grad_shard_; }
  const torch::Tensor& grad_shard() const { return grad_shard_; }

  bool gathered() const { return StorageBytes(full_params_) > 0; }
  bool holds_full_grad() const { return full_grad_.defined(); }
  // A new zeroed full_grad(), every parameter's .grad a view of it (backward adds into it).
  void AllocateGrad();
  // Every .grad undefined and full_grad() released.
  void FreeGrad();
  // Bytes this unit holds now: full parameters, full gradient, shards (not the optimizer's).
  int64_t HeldBytes() const;
  // Bytes of the full parameters and full gradient of this unit (4 x N x S each).
  int64_t FullBytes() const { return 4 * layout_.padded_numel(); }

 private:
  std::string name_;
  NamedTensors params_;
  zero::FlatLayout layout_;
  int rank_;
  torch::Tensor full_params_, param_shard_, full_grad_, grad_shard_;
};

// Every unit of a model, and AdamW over every unit's shard.
class FsdpModel {
 public:
  // `units` in forward order (each with its parameters' names); `params` the model's, in
  // registration order: every one must be in one unit. UserError when a unit has fewer
  // elements than ranks (a shard would be only padding).
  FsdpModel(const std::vector<model::Unit>& units, const NamedTensors& params, train::AdamWOptions options, int rank,
            int world_size);

  int num_units() const { return static_cast<int>(units_.size()); }
  FsdpUnit& unit(int u) { return units_.at(u); }
  const FsdpUnit& unit(int u) const { return units_.at(u); }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // The pieces of ShardedStep:
  // squared L2 norm of every unit's grad_shard, summed in double (this rank's part only);
  double ShardSquaredNorm() const;
  // every grad_shard times the clipping coefficient for the global norm `norm` (as
  // train::ClipGradNorm: max_norm / (norm + 1e-6) when below 1);
  void ScaleGradShards(double norm, double max_norm);
  // one AdamW update of every param_shard from its grad_shard, at the current rate.
  void StepShards();

  void ZeroGradShards();
  train::BertAdamW& adam() { return *adam_; }
  const train::BertAdamW& adam() const { return *adam_; }
  double last_step_ms() const { return last_step_ms_; }

  // Whole snapshots (a resume from another stage's, or from parts of another layout, rebuilt
  // whole): the moments whole on rank 0, per parameter in the model's registration order; a
  // collective. LoadState takes this rank's slices.
  train::OptimizerState GatherState(c10d::ProcessGroup& pg);
  void LoadState(const train::OptimizerState& whole);
  // Sharded snapshots (common/train/snapshot.h): where each parameter sits in its unit, this
  // rank's blocks of the parameters and moments (per unit "unit<u>/param", "unit<u>/exp_avg",
  // "unit<u>/exp_avg_sq"), and those blocks back (UserError naming a missing or misshapen one).
  nlohmann::json ShardLayout() const;
  NamedTensors SaveShards() const;
  void LoadShards(const NamedTensors& part, int64_t step);

  // Bytes this rank holds now: parameters, gradients (full buffers that are allocated, and
  // shards), AdamW's moments.
  int64_t ParamBytesHeld() const;
  int64_t GradBytesHeld() const;
  int64_t OptimizerStateBytes() const { return adam_->StateBytes(); }
  int64_t TotalNumel() const;

 private:
  std::vector<FsdpUnit> units_;
  std::vector<size_t> registration_index_;  // per unit parameter, in unit order
  std::vector<size_t> first_piece_;         // per unit: its first piece in adam_'s parameters
  size_t num_params_ = 0;
  int rank_, world_size_;
  std::unique_ptr<train::BertAdamW> adam_;
  double last_step_ms_ = 0;
};

}  // namespace distlm::task6
