// Task 7c reference: the tensor-first layout, and the gradients averaged over the data group.
#include "task7/device_mesh.h"

namespace distlm::task7 {

MeshLayout MakeMeshLayout(int rank, int world_size, int tensor_size) {
  MeshLayout m;
  m.tensor_size = tensor_size;
  m.data_size = world_size / tensor_size;
  m.tensor_rank = rank % tensor_size;
  m.data_rank = rank / tensor_size;
  m.tensor_groups.resize(m.data_size);
  m.data_groups.resize(tensor_size);
  for (int r = 0; r < world_size; ++r) {
    m.tensor_groups[r / tensor_size].push_back(r);
    m.data_groups[r % tensor_size].push_back(r);
  }
  return m;
}

void AverageOverDataGroup(const std::vector<torch::Tensor>& parameters, const dist::GroupPtr& data_group) {
  std::vector<torch::Tensor> grads, flat_views;
  for (const auto& p : parameters) {
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    flat_views.push_back(p.grad().reshape({-1}));
  }
  if (grads.empty()) return;
  // One all-reduce of every gradient flattened together, then divided by the replicas.
  std::vector<torch::Tensor> flat = {torch::cat(flat_views)};
  data_group->allreduce(flat)->wait();
  flat[0].div_(data_group->getSize());
  int64_t at = 0;
  for (auto& g : grads) {
    g.copy_(flat[0].slice(0, at, at + g.numel()).view_as(g));
    at += g.numel();
  }
}

}  // namespace distlm::task7
