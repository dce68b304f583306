// Task 6's given pieces in one process: a unit's storage released and given back under the
// views autograd saved, so that backward reads the same values again; and the errors of a
// layout that does not fit the model or the world size.
#include "task6/fsdp_unit.h"

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/container/sequential.h>

#include "common/runtime/errors.h"

namespace distlm::task6 {
namespace {

NamedTensors ParamsOf(const torch::nn::Module& m) {
  NamedTensors v;
  for (const auto& p : m.named_parameters()) v.emplace_back(p.key(), p.value());
  return v;
}

// One rank's gather: the storage's bytes back, its (only) block copied in.
void GatherAlone(FsdpUnit& unit) {
  AllocateStorage(unit.full_params());
  torch::NoGradGuard no_grad;
  unit.full_params().copy_(unit.param_shard());
}

TEST(FsdpUnitTest, ReleasedStorageComesBackUnderTheViewsAutogradSaved) {
  torch::manual_seed(0);
  torch::nn::Linear lin(4, 3), plain(4, 3);
  {
    torch::NoGradGuard no_grad;
    plain->weight.copy_(lin->weight);
    plain->bias.copy_(lin->bias);
  }
  FsdpUnit unit("layer", ParamsOf(*lin), /*rank=*/0, /*world_size=*/1);
  EXPECT_FALSE(unit.gathered());
  EXPECT_EQ(StorageBytes(lin->weight), 0) << "the parameters are views of the released buffer";
  EXPECT_EQ(unit.param_shard().numel(), 15);

  const torch::Tensor x = torch::randn({2, 4});
  GatherAlone(unit);
  EXPECT_EQ(StorageBytes(unit.full_params()), 15 * 4);
  torch::Tensor y = lin(x).pow(2).sum();  // autograd keeps weight.t(), a view of the buffer
  ReleaseStorage(unit.full_params());
  EXPECT_EQ(StorageBytes(lin->weight), 0);
  GatherAlone(unit);
  unit.AllocateGrad();
  y.backward();  // the version counters did not move: no in-place error
  plain(x).pow(2).sum().backward();
  EXPECT_TRUE(torch::allclose(lin->weight.grad(), plain->weight.grad()));
  EXPECT_TRUE(torch::allclose(lin->bias.grad(), plain->bias.grad()));
  // The gradients landed in the unit's full gradient buffer, in the layout's order.
  EXPECT_TRUE(torch::equal(unit.full_grad().narrow(0, 0, 12), plain->weight.grad().reshape(-1)));
  unit.FreeGrad();
  EXPECT_FALSE(lin->weight.grad().defined());
  EXPECT_FALSE(unit.holds_full_grad());
}

TEST(FsdpModelTest, ALayoutThatDoesNotFitIsNamed) {
  auto message = [&](const std::vector<model::Unit>& units, int world) {
    torch::nn::Sequential net(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));  // 15 and 8 elements
    try {
      FsdpModel m(units, ParamsOf(*net), train::AdamWOptions{}, 0, world);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<model::Unit> good = {{"first", {"0.weight", "0.bias"}}, {"second", {"1.weight", "1.bias"}}};
  EXPECT_EQ(message(good, 2), "no error");
  EXPECT_EQ(message(good, 9),
            "task6: unit second has 8 elements, fewer than the 9 ranks: every rank's shard would be padding");
  EXPECT_EQ(message({{"first", {"0.weight", "0.bias"}}}, 1), "task6: parameter 1.weight is in no unit of the model");
  EXPECT_EQ(message({{"first", {"0.weight", "0.bias", "2.weight"}}, {"second", {"1.weight", "1.bias"}}}, 1),
            "task6: unit first names 2.weight, which the model lacks");
  EXPECT_EQ(message({{"first", {"0.weight", "0.bias"}}, {"second", {"1.weight", "1.bias", "0.bias"}}}, 1),
            "task6: parameter 0.bias is in two units");
}

}  // namespace
}  // namespace distlm::task6
