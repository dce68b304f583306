// Task 7c's local test. First the layout, on paper: for several world sizes and T, every rank's
// MakeMeshLayout must give the tensor-first groups (a tensor group is T adjacent ranks, a data
// group the ranks holding the same shard) and its own place in them; a failure names the first
// property the layout breaks. Then on 4 real ranks (Gloo over 127.0.0.1, T = 2): the groups are
// made from the layout, and AverageOverDataGroup must leave every gradient the mean over its
// data group, the group's ranks only (not the world, not the tensor group), with a parameter
// that has no gradient left alone.
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

// "" when MakeMeshLayout(rank, world, T) is the tensor-first layout of task7/device_mesh.h, else
// the first property it breaks.
std::string LayoutError(int rank, int world, int T) {
  const MeshLayout got = MakeMeshLayout(rank, world, T);
  const int D = world / T;
  const std::string call = "MakeMeshLayout(" + std::to_string(rank) + ", " + std::to_string(world) + ", " +
                           std::to_string(T) + ")";
  if (got.tensor_size != T || got.data_size != D) {
    return call + " gives tensor_size " + std::to_string(got.tensor_size) + " and data_size " +
           std::to_string(got.data_size) + ": W ranks make D = W / T replicas of T ranks";
  }
  // Where each rank sits: its tensor group (a replica) and its place in it.
  std::vector<int> replica(world, -1), place(world, -1);
  if (static_cast<int>(got.tensor_groups.size()) != D) {
    return call + " lists " + std::to_string(got.tensor_groups.size()) + " tensor groups: one per replica";
  }
  for (int d = 0; d < D; ++d) {
    const std::vector<int>& g = got.tensor_groups[d];
    if (static_cast<int>(g.size()) != T) {
      return call + ": tensor group " + Group(g) + " does not have T ranks";
    }
    for (int i = 0; i < T; ++i) {
      if (g[i] < 0 || g[i] >= world || replica[g[i]] >= 0) {
        return call + ": tensor group " + Group(g) + " holds a rank that is outside the world or in another group";
      }
      if (i > 0 && g[i] != g[i - 1] + 1) {
        return call + ": tensor group " + Group(g) + " is not T adjacent ranks in increasing order (its all-reduces "
               "run four times per layer, and adjacent ranks share a node)";
      }
      replica[g[i]] = d;
      place[g[i]] = i;
    }
    if (d > 0 && g[0] < got.tensor_groups[d - 1][0]) {
      return call + ": tensor group " + Group(g) + " is listed after " + Group(got.tensor_groups[d - 1]) +
             ": list the replicas in increasing order of their ranks (a replica's index in tensor_groups is its "
             "data_rank, which decides the share of each batch it reads)";
    }
  }
  if (static_cast<int>(got.data_groups.size()) != T) {
    return call + " lists " + std::to_string(got.data_groups.size()) + " data groups: one per shard";
  }
  for (int t = 0; t < T; ++t) {
    const std::vector<int>& g = got.data_groups[t];
    if (static_cast<int>(g.size()) != D) return call + ": data group " + Group(g) + " does not have D ranks";
    for (int i = 0; i < D; ++i) {
      if (g[i] < 0 || g[i] >= world || place[g[i]] != t || replica[g[i]] != i) {
        return call + ": data_groups[" + std::to_string(t) + "] is " + Group(g) +
               ": a data group holds the ranks that hold the same shard, one per replica, in replica order (data "
               "group t is the ranks at place t of their tensor groups)";
      }
    }
  }
  if (got.tensor_rank != place[rank] || got.data_rank != replica[rank]) {
    return call + " places the rank at tensor_rank " + std::to_string(got.tensor_rank) + ", data_rank " +
           std::to_string(got.data_rank) + ", but its own groups put it at place " + std::to_string(place[rank]) +
           " of tensor_groups[" + std::to_string(replica[rank]) + "]";
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
