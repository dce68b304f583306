// A stage of the course as the Trainer sees it: one object the loop calls at named points,
// each call handed a StageContext (what the stage may read of the run, and an evaluation),
// never the Trainer. One run, in order:
//
//   once, after the flags: Connect() -> DistInfo           the process group (part 1: none)
//   once, after set-up:    MakeOptimizer(ctx) -> Optimizer  before any resume: snapshots hold its state
//   once:                  BeforeTraining(ctx)              after any resume
//   per micro-batch:       BeforeBackward(ctx, will_sync)   will_sync: the update's last micro-batch
//                          Backward(loss)                   part 1's
//                    (or:  ForwardBackward(ctx, batch, ...) task 7b's pipeline, runs_forward_backward())
//   per update:            SyncGradients(ctx)               tasks 2a/2b/3: .grad = the mean over ranks
//                          OptimizerStep(ctx, update)       part 1's (task 5: its sharded update) -> norm
//                          TakeFigures() -> UpdateFigures   the Trainer writes them into the log line
//   per epoch:             EndOfEpoch(ctx, epoch)           part 1's
//   around every use of the whole model outside forward and backward (evaluation, a snapshot,
//   a resume's loading, the final save), on every rank:
//                          WithFullParameters(ctx, use)     task 6 gathers its shards for it
//
// Part 1's three pieces arrive as a TrainStep (part1/train_step.h): every stage trains
// with the student's own part 1, or the reference's. A stage lives in its own folder with its
// figures and flags; this library names none of them. The main of every stage is
// RunStageMain (run_stage.h).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "common/dist/counting_process_group.h"
#include "common/model/parallel_ops.h"
#include "common/model/unit_hooks.h"
#include "common/model/units_batch.h"
#include "common/train/dist_info.h"
#include "common/train/eval_result.h"
#include "common/train/optimizer.h"
#include "common/train/schedule.h"
#include "common/train/snapshot.h"
#include "common/train/train_options.h"

namespace distlm::train {

using NamedParameters = std::vector<std::pair<std::string, torch::Tensor>>;

// What a stage may read of the run, and the one thing it may ask of it (an evaluation). The
// Trainer makes it once set-up is done; it stays valid for the whole run.
class StageContext {
 public:
  struct Parts {
    std::string stage;                                 // the stage's name()
    const TrainOptions* options = nullptr;             // output_dir resolved
    const NamedParameters* named_parameters = nullptr; // the model's, in registration order
    const std::vector<torch::Tensor>* parameters = nullptr;  // the same tensors, without names
    const DistInfo* dist = nullptr;
    torch::Device device{torch::kCPU};                 // where the model lives (--device)
    std::function<EvalResult(int64_t epoch)> evaluate;
    std::vector<model::Unit> units;                    // the model's, in forward order
    std::function<void(const model::UnitHooks*)> set_unit_hooks;
    std::function<void(const model::ParallelOps*)> set_tensor_parallel;
    std::function<model::UnitsBatch(const std::vector<int64_t>&, int, int64_t)> batch_for_units;
    std::function<void(c10::intrusive_ptr<c10d::ProcessGroup>, int, int)> replace_group;
  };
  explicit StageContext(Parts parts) : p_(std::move(parts)) {}

  const std::string& stage() const { return p_.stage; }
  const TrainOptions& options() const { return *p_.options; }
  const NamedParameters& named_parameters() const { return *p_.named_parameters; }
  const std::vector<torch::Tensor>& parameters() const { return *p_.parameters; }
  const DistInfo& dist() const { return *p_.dist; }
  const std::string& output_dir() const { return p_.options->output_dir; }
  bool is_main_rank() const { return p_.dist->rank == 0; }
  const torch::Device& device() const { return p_.device; }
  // Evaluates on the dev split (the main rank computes, the others get an empty result; a
  // barrier on several ranks) and records it in eval_results.json. Needs --do_eval.
  EvalResult Evaluate(int64_t epoch) const { return p_.evaluate(epoch); }
  // The units the model's forward runs in turn (the embeddings, each encoder layer, the head;
  // model/unit_hooks.h), and the hooks it runs them through from the next forward on, training
  // and evaluation alike (null: none). The stage keeps `hooks` alive for the run.
  const std::vector<model::Unit>& units() const { return p_.units; }
  void SetUnitHooks(const model::UnitHooks* hooks) const { p_.set_unit_hooks(hooks); }
  // Task 7a: the model's encoder split over `ops`'s ranks (ModelTask::SetTensorParallel), or put
  // back whole with null (a collective). The stage keeps `ops` alive while the model is split.
  void SetTensorParallel(const model::ParallelOps* ops) const { p_.set_tensor_parallel(ops); }
  // Task 7b: the training examples at `indices` cut into `parts` micro-batches, and the model's
  // units run on one (ModelTask::BatchForUnits), on the run's device.
  model::UnitsBatch BatchForUnits(const std::vector<int64_t>& indices, int parts, int64_t epoch) const {
    return p_.batch_for_units(indices, parts, epoch);
  }
  // Task 8c: the ranks training from now on, after workers left or joined: the Trainer's
  // collectives (evaluation's barrier, snapshots) and dist() use `pg`, where this process is
  // `rank` of `world_size`. Rank 0 stays the main rank. The data each rank reads stays its own.
  void ReplaceGroup(c10::intrusive_ptr<c10d::ProcessGroup> pg, int rank, int world_size) const {
    p_.replace_group(std::move(pg), rank, world_size);
  }

 private:
  Parts p_;
};

// What an optimizer step works on.
struct UpdateContext {
  Optimizer& optimizer;
  LinearSchedule& schedule;
  const std::vector<torch::Tensor>& parameters;
  double max_grad_norm;
  // This update is its epoch's last (or the run's): the Trainer evaluates and snapshots next.
  bool ends_epoch = false;
  // Where the run stands once this update is done, as a snapshot records it (task 8c sends it
  // to a worker that joins).
  TrainingState position;
};

// Part 1's pieces (part1/train_step.h).
struct TrainStep {
  // The backward pass of the (already accumulation-scaled) loss.
  std::function<void(const torch::Tensor& loss)> backward;
  // Clip, optimizer step, schedule step, zero gradients; the norm before clipping.
  std::function<double(UpdateContext&)> optimizer_step;
  // The end of an epoch (1-based): evaluation when --do_eval.
  std::function<void(const StageContext&, int64_t epoch)> end_of_epoch;
};

// A stage's figures for one update; the Trainer adds them to the update's log line.
struct UpdateFigures {
  std::optional<dist::CommStats> comm;  // the collectives of the synchronisation
  double comm_time_ms = 0;              // the time they blocked the step (with comm; the
                                        // Trainer adds compute_time_ms = step - this)
  // The stage's own fields (task 3's overlap, task 5's shard sizes, ...): docs/handout lists them.
  nlohmann::json fields = nlohmann::json::object();
  nlohmann::json ToJson() const;
};

class Stage {
 public:
  // `name` names outputs and messages (common/stages/stages.h's ids). A step without all three
  // pieces is a logic error.
  Stage(std::string name, TrainStep step);
  virtual ~Stage();
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  const std::string& name() const { return name_; }

  // The ranks, from the flags (parsed by then) or the launcher's environment. The default is
  // one process: ConnectOneProcess("").
  virtual DistInfo Connect() { return ConnectOneProcess(""); }
  // The optimizer the Trainer steps, snapshots and resumes. Default: BertAdamW over the whole
  // model (AdamWOptionsFor(options)), the same on every rank.
  virtual std::unique_ptr<Optimizer> MakeOptimizer(const StageContext& ctx);
  virtual void BeforeTraining(const StageContext&) {}
  virtual void BeforeBackward(const StageContext&, bool /*will_sync*/) {}
  // Task 7b: a stage that runs each batch's forward and backward itself (a pipeline runs its
  // block of the model on the batch's micro-batches) says so, and the Trainer then calls
  // ForwardBackward for every batch instead of the model's forward, BeforeBackward and Backward.
  // `loss_divisor` is what the Trainer divides a batch's loss by before backward (the
  // accumulation steps); returns the batch's mean loss, the same on every rank.
  virtual bool runs_forward_backward() const { return false; }
  virtual double ForwardBackward(const StageContext&, const std::vector<int64_t>& /*indices*/, int64_t /*epoch*/,
                                 double /*loss_divisor*/) {
    throw std::logic_error(name() + ": ForwardBackward called on a stage that does not run it");
  }
  void Backward(const torch::Tensor& loss) { step_.backward(loss); }
  virtual void SyncGradients(const StageContext&) {}
  virtual double OptimizerStep(const StageContext&, UpdateContext& u) { return step_.optimizer_step(u); }
  // The figures of the update just stepped (then forgotten).
  virtual UpdateFigures TakeFigures() { return {}; }
  virtual void EndOfEpoch(const StageContext& ctx, int64_t epoch) { step_.end_of_epoch(ctx, epoch); }
  // Runs `use`, which reads or writes the model's parameters whole. A stage that keeps only
  // shards of them between uses (task 6) gathers them first and afterwards keeps its shard of
  // what they then hold; a collective there, so the Trainer calls it on every rank.
  virtual void WithFullParameters(const StageContext&, const std::function<void()>& use) { use(); }

  // Which share of the data set this rank reads: the ranks form `replicas` data-parallel
  // replicas and this one belongs to replica `replica` (the distributed sampler's rank and
  // size). Called after Connect. Default: every rank a replica of its own. Task 7's ranks share
  // each batch within a replica (7a: one replica; 7c: world / T); grading's mutation tests use
  // {1, 0} on a data-parallel stage as a mistake.
  struct DataShare {
    int replicas = 1;
    int replica = 0;
  };
  virtual DataShare data_share(const DistInfo& dist) const { return {dist.world_size, dist.rank}; }

  // Whether each update's logged loss is the mean over ranks (one small all-reduce per update)
  // or this rank's own. A stage whose ranks meet only every few updates (task 8) logs its own:
  // across a slow link even that small all-reduce costs a round trip per update.
  virtual bool averages_loss_over_ranks() const { return true; }

  // Task 8c: a worker that joined a running job starts where the others stand (asked once,
  // after BeforeTraining); nullopt: from the start, or from the snapshot resumed.
  virtual std::optional<TrainingState> JoinedAt() const { return std::nullopt; }

 protected:
  const TrainStep& step() const { return step_; }
  // World size 1 (no process group), or a one-line error saying where the larger world size
  // came from, followed by `hint`.
  DistInfo ConnectOneProcess(const std::string& hint) const;

 private:
  std::string name_;
  TrainStep step_;
};

}  // namespace distlm::train
