// Task 7c's local test. First the layout, on paper: for several world sizes and T, every rank's
// MakeMeshLayout must give the tensor-first groups (a tensor group is T adjacent ranks, a data
// group every T-th rank) and its own place in them. Then on 4 real ranks (Gloo over 127.0.0.1,
// T = 2): the groups are made from the layout, and AverageOverDataGroup must leave every
// gradient the mean over its data group, the group's ranks only (not the world, not the tensor
// group), with a parameter that has no gradient left alone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/testing/rank_test.h"
#include "task7/device_mesh.h"

namespace distlm::task7 {
namespace {

using testing::Fail;

std::string Group(const std::vector<int>& ranks) {
  std::string s = "{";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i == 0 ? "" : ",") + std::to_string(ranks[i]);
  return s + "}";
}
std::string Groups(const std::vector<std::vector<int>>& groups) {
  std::string s = "{";
  for (size_t g = 0; g < groups.size(); ++g) s += (g == 0 ? "" : ", ") + Group(groups[g]);
  return s + "}";
}

// What the layout must be: the tensor-first numbering of task7/device_mesh.h.
MeshLayout Expected(int rank, int world, int T) {
  MeshLayout m;
  m.tensor_size = T;
  m.data_size = world / T;
  m.tensor_rank = rank % T;
  m.data_rank = rank / T;
  m.tensor_groups.resize(world / T);
  m.data_groups.resize(T);
  for (int r = 0; r < world; ++r) {
    m.tensor_groups[r / T].push_back(r);
    m.data_groups[r % T].push_back(r);
  }
  return m;
}

// "" when `got` is the layout, else what is wrong with it.
std::string LayoutError(int rank, int world, int T) {
  const MeshLayout got = MakeMeshLayout(rank, world, T);
  const MeshLayout want = Expected(rank, world, T);
  const std::string call = "MakeMeshLayout(" + std::to_string(rank) + ", " + std::to_string(world) + ", " +
                           std::to_string(T) + ")";
  if (got.tensor_size != want.tensor_size || got.data_size != want.data_size) {
    return call + " gives tensor_size " + std::to_string(got.tensor_size) + " and data_size " +
           std::to_string(got.data_size) + ", want " + std::to_string(want.tensor_size) + " and " +
           std::to_string(want.data_size) + " (D = W / T replicas of T ranks)";
  }
  if (got.tensor_groups != want.tensor_groups) {
    return call + ": tensor_groups is " + Groups(got.tensor_groups) + ", want " + Groups(want.tensor_groups) +
           ": a tensor group is a replica's T adjacent ranks (their all-reduces run four times per layer; adjacent "
           "ranks share a node)";
  }
  if (got.data_groups != want.data_groups) {
    return call + ": data_groups is " + Groups(got.data_groups) + ", want " + Groups(want.data_groups) +
           ": a data group is the ranks holding the same shard, one per replica (every T-th rank)";
  }
  if (got.tensor_rank != want.tensor_rank || got.data_rank != want.data_rank) {
    return call + " places the rank at tensor_rank " + std::to_string(got.tensor_rank) + ", data_rank " +
           std::to_string(got.data_rank) + ", want " + std::to_string(want.tensor_rank) + ", " +
           std::to_string(want.data_rank) + " (its index in its tensor group, and its replica)";
  }
  return "";
}

TEST(Task7c, LayoutIsTensorFirst) {
  const int cases[][2] = {{4, 2}, {4, 1}, {4, 4}, {8, 2}, {8, 4}, {6, 3}, {6, 2}, {1, 1}};
  for (const auto& c : cases) {
    for (int rank = 0; rank < c[0]; ++rank) {
      const std::string error = LayoutError(rank, c[0], c[1]);
      ASSERT_EQ(error, "") << error;
    }
  }
}

// Parameter i's gradient on rank r: values that differ by rank, by parameter and by element.
torch::Tensor GradOf(int i, int r) {
  return torch::arange(6, torch::kFloat).reshape({2, 3}) * (i + 1) + 10.0 * r * r + 0.25 * i;
}

RANK_CASE(average) {
  const int T = 2;
  const MeshLayout m = MakeMeshLayout(env.rank, env.world, T);
  if (const std::string e = LayoutError(env.rank, env.world, T); !e.empty()) Fail(e);
  dist::GroupPtr tensor = env.new_subgroup(m.tensor_groups, "tensor");
  dist::GroupPtr data = env.new_subgroup(m.data_groups, "data");
  std::vector<torch::Tensor> params;
  for (int i = 0; i < 3; ++i) {
    params.push_back(torch::zeros({2, 3}).requires_grad_(true));
    if (i != 1) params.back().mutable_grad() = GradOf(i, env.rank);  // parameter 1 has none
  }
  AverageOverDataGroup(params, data);
  const std::vector<int>& mine = m.data_groups[m.tensor_rank];
  for (int i : {0, 2}) {
    torch::Tensor mean = torch::zeros({2, 3}), world_mean = torch::zeros({2, 3}), sum = torch::zeros({2, 3});
    for (int r : mine) sum += GradOf(i, r);
    mean = sum / static_cast<double>(mine.size());
    for (int r = 0; r < env.world; ++r) world_mean += GradOf(i, r) / static_cast<double>(env.world);
    const torch::Tensor& got = params[i].grad();
    if (!got.defined()) Fail("parameter " + std::to_string(i) + " lost its gradient");
    if (torch::allclose(got, mean, 1e-6, 1e-6)) continue;
    std::string what = "parameter " + std::to_string(i) + "'s gradient after AverageOverDataGroup is " +
                       std::to_string(got[0][0].item<double>()) + " at [0, 0], want " +
                       std::to_string(mean[0][0].item<double>()) + ", the mean over the data group " +
                       Group(mine);
    if (torch::allclose(got, sum, 1e-6, 1e-6)) what += ": you have the sum; divide by the group's size";
    if (torch::allclose(got, GradOf(i, env.rank), 1e-6, 1e-6)) what += ": it is unchanged";
    if (torch::allclose(got, world_mean, 1e-6, 1e-6)) {
      what += ": you have the mean over all ranks, which mixes different shards; average over data_group only";
    }
    Fail(what);
  }
  if (params[1].grad().defined()) Fail("parameter 1 had no gradient, and AverageOverDataGroup gave it one");
  // The tensor group still works after it (a collective left pending would show here).
  std::vector<torch::Tensor> one = {torch::ones({1})};
  tensor->allreduce(one)->wait();
  if (one[0].item<double>() != T) Fail("the tensor group's all-reduce after AverageOverDataGroup went wrong");
}

TEST(Task7c, AverageOverTheDataGroupOnFourRanks) { EXPECT_RANKS_PASS("average", 4); }

}  // namespace
}  // namespace distlm::task7
