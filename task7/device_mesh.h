// Task 7c, tensor parallelism inside data parallelism: the layout of the ranks, and the
// data-parallel half of an update.
//
// W ranks form D = W / T replicas of the model; each replica is T ranks that split every layer
// between them (7a), and every replica reads its own share of each batch (tasks 2-3). So each
// rank belongs to two groups:
//
//   its tensor group  the T ranks of its replica; the split layers' all-reduces (f and g) run
//                     in it, four per layer and step, on the critical path;
//   its data group    the D ranks, one per replica, that hold the same shards; after backward
//                     each gradient is averaged in it, once per update.
//
// Ranks are numbered tensor-first: a tensor group is T adjacent ranks, since launchers put
// adjacent ranks on one node, where the frequent all-reduces are cheapest; a data group holds
// one rank per replica, the ones that hold the same shard.
#pragma once

#include <vector>

#include <torch/types.h>

#include "common/dist/c10d_compat.h"

namespace distlm::task7 {

struct MeshLayout {
  int tensor_size = 1;  // T: ranks per replica
  int data_size = 1;    // D = W / T: replicas
  int tensor_rank = 0;  // this rank's place in its tensor group (which shard it holds)
  int data_rank = 0;    // its replica: which share of each batch it reads
  // Every group of each kind, each listing its ranks in increasing order (the group's rank i is
  // its i-th entry): D tensor groups of T ranks, replicas in increasing order of their ranks, and
  // T data groups of D ranks, data group t holding the ranks at place t of their tensor groups.
  // So tensor_groups[data_rank][tensor_rank] and data_groups[tensor_rank][data_rank] are both
  // this rank. Every rank builds the same lists; dist::NewSubgroup makes each rank's group from
  // them.
  std::vector<std::vector<int>> tensor_groups;
  std::vector<std::vector<int>> data_groups;
};

// The layout of `world_size` ranks with `tensor_size` ranks per replica, seen from `rank`.
// Called with tensor_size dividing world_size (the stage checks the flags first).
MeshLayout MakeMeshLayout(int rank, int world_size, int tensor_size);

// After backward: every parameter's gradient becomes its mean over `data_group`, the ranks that
// hold the same shard in the other replicas (parameters without a gradient are left alone).
// The tensor group is not involved: its ranks' gradients are of different shards.
void AverageOverDataGroup(const std::vector<torch::Tensor>& parameters, const dist::GroupPtr& data_group);

}  // namespace distlm::task7
