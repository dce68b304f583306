// Task 7c's mesh as the stages use it: the replica size from its flag, checked against the world
// size before the rendezvous, and the student's layout (device_mesh.h) checked on every rank for
// every rank before any group is made from it. Given code, shared by the data x tensor
// (tp_stage.h) and data x pipeline (pp_stage.h) layouts: in both a replica is `replica_size`
// adjacent ranks that split the model between them (by heads and columns, or by layers), and the
// layout's tensor groups are those replicas' groups.
#pragma once

#include <string>
#include <vector>

#include "common/dist/c10d_compat.h"
#include "common/dist/counting_process_group.h"
#include "common/dist/dist_config.h"
#include "common/train/dist_info.h"
#include "task7/device_mesh.h"

namespace distlm::task7 {

// `flag` is --<flag_name>: 0 means every rank in one replica. Anything that does not divide the
// world size: a UserError naming the flag and the world size's origin.
int ReplicaSize(const std::string& flag_name, int flag, const dist::DistConfig& config);

struct Mesh {
  MeshLayout layout;       // data_size 1 when one replica holds every rank
  dist::GroupPtr model_pg; // the replica's ranks: the world's group when there is one replica
  dist::GroupPtr data_pg;  // the ranks at the same place in every replica; null with one replica
  // The world's counting wrapper and each subgroup's: every byte a rank sends, in any group.
  std::vector<dist::CountingProcessGroup*> counting;
};

// The student's MakeMeshLayout for every rank, each checked (so that a wrong layout stops every
// rank with the same line before any of them waits in a group), then this rank's two groups,
// tagged `model_tag` and "data". With one replica the layout is not called.
Mesh MakeCheckedMesh(train::DistInfo& info, int replica_size, const std::string& model_tag);

// Every collective and send recorded in `groups` since the last call, in one list (an update's
// figures).
dist::CommStats TakeMergedStats(const std::vector<dist::CountingProcessGroup*>& groups);

}  // namespace distlm::task7
