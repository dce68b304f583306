// The optimizer as the Trainer and part 1's OptimizerStep see it. A stage provides it
// (Stage::MakeOptimizer): BertAdamW, the replicated one, where every rank holds the whole state;
// task 5's sharded AdamW, where each rank holds a shard; the later stages' own. The Trainer then
// treats every stage alike: it steps the schedule's rate into it, snapshots and resumes it, and
// asks it over which group an fp16 overflow must be voted.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

namespace c10d {
class ProcessGroup;
}

namespace distlm::train {

// The optimizer state as snapshots store it, whatever the optimizer: per parameter, in
// registration order, its whole exp_avg and exp_avg_sq; and the number of updates done.
struct OptimizerState {
  int64_t step = 0;
  std::vector<torch::Tensor> exp_avg, exp_avg_sq;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;

  // One update from every parameter's .grad, at lr().
  virtual void Step() = 0;
  // Drops every gradient (set to none, or zeroed where the gradients live in a flat buffer).
  virtual void ZeroGrad() = 0;
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
  virtual int64_t step_count() const = 0;

  // Snapshots and resume. Called by every rank (a collective where the state is sharded):
  // the whole state, values on the main rank, tensors of the same shapes elsewhere. The
  // tensors may be the live state; a resume writes the snapshot's values into them and then
  // calls LoadState, which also sets the step count.
  virtual OptimizerState GatherState() = 0;
  virtual void LoadState(const OptimizerState& state) = 0;

  // Sharded snapshots (snapshot.h), for optimizers whose ranks keep disjoint parts of the
  // parameters and state between updates (task 6). ShardLayout: the snapshot's "layout" for this
  // run, null (the default) where snapshots are whole. SaveShards: this rank's part, as the
  // layout names it (no communication). LoadShards: that part back, from a snapshot of the
  // same layout, and the number of updates done.
  virtual nlohmann::json ShardLayout() const { return nullptr; }
  virtual std::vector<std::pair<std::string, torch::Tensor>> SaveShards() const { return {}; }
  virtual void LoadShards(const std::vector<std::pair<std::string, torch::Tensor>>& part, int64_t step) {
    (void)part, (void)step;
    throw std::logic_error("LoadShards: this optimizer's snapshots are whole");
  }

  // --fp16: the group whose ranks vote on an overflow, for optimizers whose ranks still hold
  // different gradients when the Trainer checks them (they are averaged inside the step);
  // null where the gradients are already the same on every rank.
  virtual c10d::ProcessGroup* overflow_vote_group() const { return nullptr; }
  // --fp16: the gradients the loss scaler unscales and checks, where they are not the
  // parameters' .grad (task 6: its shards; the full gradients are freed in backward). Empty:
  // the parameters'.
  virtual std::vector<torch::Tensor> GradientsToUnscale() { return {}; }

  // Bytes of optimizer state this rank holds (AdamW: both moments, of its shard where sharded);
  // -1 when the optimizer does not say.
  virtual int64_t StateBytes() const { return -1; }
};

// An optimizer that hands every call to `inner`: the base of a stage's wrapper that changes only
// some of them (task 7's, whose snapshots gather a state the ranks split).
class ForwardingOptimizer : public Optimizer {
 public:
  explicit ForwardingOptimizer(std::unique_ptr<Optimizer> inner) : inner_(std::move(inner)) {}
  void Step() override { inner_->Step(); }
  void ZeroGrad() override { inner_->ZeroGrad(); }
  double lr() const override { return inner_->lr(); }
  void set_lr(double lr) override { inner_->set_lr(lr); }
  int64_t step_count() const override { return inner_->step_count(); }
  OptimizerState GatherState() override { return inner_->GatherState(); }
  void LoadState(const OptimizerState& state) override { inner_->LoadState(state); }
  c10d::ProcessGroup* overflow_vote_group() const override { return inner_->overflow_vote_group(); }
  std::vector<torch::Tensor> GradientsToUnscale() override { return inner_->GradientsToUnscale(); }
  int64_t StateBytes() const override { return inner_->StateBytes(); }

 protected:
  Optimizer& inner() { return *inner_; }

 private:
  std::unique_ptr<Optimizer> inner_;
};

}  // namespace distlm::train
