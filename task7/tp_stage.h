// Task 7a's stage: tensor parallelism (Megatron-LM's layout) on BERT, driven by the Trainer with
// part 1's step. Given code, not the student's: the student's column- and row-parallel linears
// (task7/tensor_parallel.h) are what the split model runs.
//
// With --tensor_parallel_size=T below the world size W (task 7c), the ranks form D = W / T
// replicas of T ranks (task7/device_mesh.h, the student's layout): the split runs in each
// replica's tensor group, each replica reads its own share of every batch, and after backward
// the student's AverageOverDataGroup averages every gradient over the data group (the ranks
// holding the same shard). Without it (or T = W), every rank reads every batch: one replica,
// task 7a. Before the optimizer is
// made, the model's encoder is split over the ranks (BertForSequenceClassification::
// ShardForTensorParallel: each rank keeps its heads' rows of query, key and value and the
// matching columns of the attention output, its rows of the intermediate linear and columns of
// the output linear); the optimizer then holds the shards' state only. Per update:
//   forward   two all-reduces per layer (the row-parallel sums, g), of batch x seq x hidden
//   backward  two per layer (the column-parallel inputs' gradients, f), of the same size
//   step      the gradient norm of the whole model: the shards' squared norms summed over the
//             ranks (one small all-reduce), the replicated parameters' counted once; clipping
//             with it, then part 1's step (whose own clip then finds nothing to do)
// Evaluation, snapshots and saving see the model whole (WithFullParameters gathers the cut
// weights, and cuts them again after); a snapshot's optimizer state is gathered whole too, so
// snapshots are those of part 1 and resume at any number of ranks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/dist/counting_process_group.h"
#include "common/model/parallel_ops.h"
#include "common/train/stage.h"
#include "task7/device_mesh.h"

namespace distlm::task7 {

class TensorParallelStage : public train::Stage {
 public:
  TensorParallelStage(std::string name, train::TrainStep step);
  ~TensorParallelStage() override;

  // Float32 only (--comm_dtype refused); --tensor_parallel_size checked against the world size
  // before any rank waits; the tensor and data groups made when there is more than one replica.
  train::DistInfo Connect() override;
  std::unique_ptr<train::Optimizer> MakeOptimizer(const train::StageContext& ctx) override;
  double OptimizerStep(const train::StageContext& ctx, train::UpdateContext& u) override;
  train::UpdateFigures TakeFigures() override;
  void WithFullParameters(const train::StageContext& ctx, const std::function<void()>& use) override;
  void SyncGradients(const train::StageContext& ctx) override;
  DataShare data_share(const train::DistInfo&) const override { return {mesh_.data_size, mesh_.data_rank}; }

 private:
  MeshLayout mesh_;          // one replica (data_size 1) unless --tensor_parallel_size < world
  dist::GroupPtr tensor_pg_;  // the replica's ranks: the world's group when there is one replica
  dist::GroupPtr data_pg_;    // the ranks holding the same shards; null with one replica
  std::unique_ptr<model::ParallelOps> ops_;
  std::vector<int> cut_dim_;  // per parameter, in registration order: the dimension cut, or -1
  bool split_ = false;
  std::vector<dist::CountingProcessGroup*> counting_;  // the world's and the subgroups', for the figures
};

std::unique_ptr<train::Stage> MakeTensorParallelStage(std::string name, train::TrainStep step);

}  // namespace distlm::task7
