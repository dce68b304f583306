#include "task7/mesh.h"

#include <stdexcept>
#include <vector>

#include "common/runtime/errors.h"
#include "common/train/distributed.h"

namespace distlm::task7 {
namespace {

// The student's layout as `rank` would see it: a layout whose lists do not put the rank where its
// coordinates say would have the ranks wait in different groups.
void CheckLayout(const MeshLayout& m, int rank, int world, int replica_size) {
  auto where = [&](const std::vector<std::vector<int>>& groups, int group, int index) {
    return group >= 0 && group < static_cast<int>(groups.size()) && index >= 0 &&
           index < static_cast<int>(groups[group].size()) && groups[group][index] == rank;
  };
  const std::string said = "your MakeMeshLayout(" + std::to_string(rank) + ", " + std::to_string(world) + ", " +
                           std::to_string(replica_size) + ")";
  if (m.tensor_size != replica_size || m.data_size * replica_size != world) {
    throw UserError(said + " says " + std::to_string(m.data_size) + " replica(s) of " + std::to_string(m.tensor_size) +
                    " rank(s), not " + std::to_string(world / replica_size) + " of " + std::to_string(replica_size));
  }
  if (static_cast<int>(m.tensor_groups.size()) != m.data_size ||
      static_cast<int>(m.data_groups.size()) != replica_size || !where(m.tensor_groups, m.data_rank, m.tensor_rank) ||
      !where(m.data_groups, m.tensor_rank, m.data_rank)) {
    throw UserError(said + " is not self-consistent: tensor_groups[data_rank][tensor_rank] and "
                    "data_groups[tensor_rank][data_rank] must both be this rank (docs/handout/part7.md, 'Task 7c')");
  }
}

// The world's counting wrapper and each subgroup's that is not the world's.
void AddCounting(Mesh& mesh, const train::DistInfo& info) {
  if (info.pg) mesh.counting.push_back(&train::CountingGroup(info));
  for (const dist::GroupPtr& g : {mesh.model_pg, mesh.data_pg}) {
    auto* counting = g && g != info.pg ? dist::ImplOf<dist::CountingProcessGroup>(g) : nullptr;
    if (counting != nullptr) mesh.counting.push_back(counting);
  }
}

}  // namespace

int ReplicaSize(const std::string& flag_name, int flag, const dist::DistConfig& config) {
  const int size = flag == 0 ? config.world_size : flag;
  if (flag < 0 || config.world_size % size != 0) {
    throw UserError("--" + flag_name + "=" + std::to_string(flag) + " does not divide the world size " +
                    std::to_string(config.world_size) + " (" + config.world_size_origin +
                    "): the ranks form replicas of --" + flag_name + " ranks each");
  }
  return size;
}

Mesh MakeCheckedMesh(train::DistInfo& info, int replica_size, const std::string& model_tag) {
  Mesh mesh;
  mesh.model_pg = info.pg;
  if (replica_size == info.world_size) {  // one replica: no layout to make
    AddCounting(mesh, info);
    return mesh;
  }
  MeshLayout first;
  for (int r = 0; r < info.world_size; ++r) {
    const MeshLayout m = MakeMeshLayout(r, info.world_size, replica_size);  // the student's
    CheckLayout(m, r, info.world_size, replica_size);
    if (r == 0) first = m;
    if (m.tensor_groups != first.tensor_groups || m.data_groups != first.data_groups) {
      throw UserError("your MakeMeshLayout gives rank 0 and rank " + std::to_string(r) +
                      " different groups: every rank must build the same lists of tensor_groups and data_groups");
    }
    if (r == info.rank) mesh.layout = m;
  }
  try {
    mesh.model_pg = info.new_subgroup(mesh.layout.tensor_groups, model_tag);
    mesh.data_pg = info.new_subgroup(mesh.layout.data_groups, "data");
  } catch (const std::invalid_argument& e) {
    throw UserError(std::string("your MakeMeshLayout's groups: ") + e.what());
  }
  AddCounting(mesh, info);
  return mesh;
}

dist::CommStats TakeMergedStats(const std::vector<dist::CountingProcessGroup*>& groups) {
  dist::CommStats all;
  for (dist::CountingProcessGroup* c : groups) {
    dist::CommStats s = c->TakeStats();
    all.records.insert(all.records.end(), s.records.begin(), s.records.end());
  }
  return all;
}

}  // namespace distlm::task7
