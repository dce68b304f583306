// GradReadyHook runs after .grad is updated (it sees the accumulated gradient), once per
// backward that reaches the parameter, never for an unused one, and not after removal.
#include "common/autograd/grad_ready_hook.h"

#include <gtest/gtest.h>
#include <torch/types.h>

#include <vector>

#include "common/runtime/errors.h"

namespace distlm::autograd {
namespace {

TEST(GradReadyHook, SeesTheAccumulatedGradient) {
  torch::Tensor w = torch::ones({3}, torch::requires_grad());
  torch::Tensor unused = torch::ones({2}, torch::requires_grad());
  std::vector<float> seen;
  int unused_calls = 0;
  {
    GradReadyHook hook(w, [&] { seen.push_back(w.grad()[0].item<float>()); });
    GradReadyHook other(unused, [&] { ++unused_calls; });
    (w * 2).sum().backward();  // .grad = 2
    (w * 3).sum().backward();  // .grad = 2 + 3: the hook sees the sum, not the 3
  }
  (w * 5).sum().backward();  // hook removed
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FLOAT_EQ(seen[0], 2.0f);
  EXPECT_FLOAT_EQ(seen[1], 5.0f);
  EXPECT_EQ(unused_calls, 0);
}

TEST(GradReadyHook, MovedHookStaysInstalledOnce) {
  torch::Tensor w = torch::ones({1}, torch::requires_grad());
  int calls = 0;
  std::vector<GradReadyHook> hooks;
  hooks.emplace_back(w, [&] { ++calls; });
  hooks.reserve(8);  // moves the hook
  w.sum().backward();
  EXPECT_EQ(calls, 1);
}

TEST(GradReadyHook, RefusesNonLeafTensors) {
  torch::Tensor w = torch::ones({1}, torch::requires_grad());
  EXPECT_THROW(GradReadyHook(w * 2, [] {}), UserError);
  EXPECT_THROW(GradReadyHook(torch::ones({1}), [] {}), UserError);
}

}  // namespace
}  // namespace distlm::autograd
