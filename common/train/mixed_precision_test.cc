// --bf16 / --fp16's pieces: the loss scaler against closed forms (its scales are powers of two,
// so scaling and unscaling are exact and the expected values are exact too), and autocast's
// dtypes inside and outside a scope, nested scopes included.
#include "common/train/mixed_precision.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/nn/functional.h>
#include <torch/version.h>

#include "common/runtime/errors.h"

namespace distlm::train {
namespace {

torch::Tensor WithGrad(torch::Tensor value, torch::Tensor grad) {
  value.mutable_grad() = grad;
  return value;
}

TEST(LossScalerTest, ScalesTheLossAndUnscalesTheGradientsExactly) {
  LossScaler s(true);
  EXPECT_EQ(s.scale(), 65536.0) << "GradScaler's initial scale is 2^16";
  auto loss = torch::tensor(0.693147f);
  EXPECT_EQ(s.Scale(loss).item<float>(), 0.693147f * 65536.0f);
  std::vector<torch::Tensor> params = {WithGrad(torch::zeros({3}), torch::tensor({65536.0f, -3.0f * 65536.0f, 1.5f})),
                                       torch::zeros({2})};  // no gradient: skipped
  ASSERT_TRUE(s.UnscaleAndCheck(params, nullptr));
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::tensor({1.0f, -3.0f, 1.5f / 65536.0f})));
  EXPECT_FALSE(params[1].grad().defined());
}

TEST(LossScalerTest, AnOverflowHalvesTheScaleAndCountsASkip) {
  LossScaler s(true);
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    std::vector<torch::Tensor> params = {WithGrad(torch::zeros({2}), torch::tensor({1.0f, 2.0f})),
                                         WithGrad(torch::zeros({2}), torch::tensor({bad, 0.0f}))};
    const double before = s.scale();
    EXPECT_FALSE(s.UnscaleAndCheck(params, nullptr)) << bad << " was not noticed";
    s.Update(false);
    EXPECT_EQ(s.scale(), before / 2);
  }
  EXPECT_EQ(s.skipped(), 3);
  EXPECT_EQ(s.scale(), 8192.0);
}

TEST(LossScalerTest, GrowsAfterTheIntervalOfCleanUpdatesOnly) {
  LossScaler::Options o;
  o.growth_interval = 3;
  LossScaler s(true, o);
  s.Update(true);
  s.Update(true);
  EXPECT_EQ(s.scale(), 65536.0);
  s.Update(false);  // the run of clean updates starts again
  EXPECT_EQ(s.scale(), 32768.0);
  s.Update(true);
  s.Update(true);
  EXPECT_EQ(s.scale(), 32768.0);
  s.Update(true);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.clean_updates(), 0);
}

TEST(LossScalerTest, DisabledIsTheIdentity) {
  LossScaler s(false);
  auto loss = torch::tensor(2.5f);
  EXPECT_TRUE(s.Scale(loss).is_same(loss));
  std::vector<torch::Tensor> params = {WithGrad(torch::zeros({1}), torch::tensor({std::nanf("")}))};
  EXPECT_TRUE(s.UnscaleAndCheck(params, nullptr)) << "fp32 and bf16 runs never skip";
  s.Update(false);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.skipped(), 0);
}

TEST(LossScalerTest, RestoreRefusesANonPositiveScale) {
  LossScaler s(true);
  s.Restore(1024.0, 7, 2);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.skipped(), 2);
  EXPECT_THROW(s.Restore(0.0, 0, 0), UserError);
}

TEST(AutocastScopeTest, Bf16ProductsInsideFloat32OutsideAndNested) {
  auto x = torch::randn({4, 8});
  auto w = torch::randn({3, 8}, torch::requires_grad());
  const torch::Device cpu(torch::kCPU);
  {
    AutocastScope outer(Precision::kBf16, cpu);
    EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16);
    {
      AutocastScope inner(Precision::kBf16, cpu);
      EXPECT_EQ(torch::matmul(x, w.t()).scalar_type(), torch::kBFloat16);
    }
    EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kBFloat16) << "the inner scope ended the outer one";
    // The loss stays float32: cross entropy is on autocast's float32 list.
    auto loss = torch::nn::functional::cross_entropy(torch::linear(x, w), torch::tensor({0, 1, 2, 0}));
    EXPECT_EQ(loss.scalar_type(), torch::kFloat);
    loss.backward();
    EXPECT_EQ(w.grad().scalar_type(), torch::kFloat) << "gradients of float32 weights are float32";
  }
  EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat) << "autocast outlived its scope";
  AutocastScope none(Precision::kFp32, cpu);
  EXPECT_EQ(torch::linear(x, w).scalar_type(), torch::kFloat);
}

TEST(PrecisionTest, FlagsAndDevices) {
  const torch::Device cpu(torch::kCPU);
  EXPECT_EQ(PrecisionFromFlags(false, false, cpu), Precision::kFp32);
  EXPECT_EQ(PrecisionFromFlags(true, false, cpu), Precision::kBf16);
  EXPECT_THROW(PrecisionFromFlags(true, true, cpu), UserError);
#if TORCH_VERSION_MAJOR == 1
  try {
    PrecisionFromFlags(false, true, cpu);
    ADD_FAILURE() << "--fp16 on CPU was accepted by LibTorch 1.x";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("--fp16 needs --device=cuda"), std::string::npos) << e.what();
  }
#else
  EXPECT_EQ(PrecisionFromFlags(false, true, cpu), Precision::kFp16);
#endif
  EXPECT_EQ(PrecisionName(Precision::kBf16), "bf16");
}

}  // namespace
}  // namespace distlm::train
