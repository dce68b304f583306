// LibTorch links, computes, and runs backward: checked against closed forms.
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/version.h>

#include <gtest/gtest.h>
#include <libtorch_info.h>

#include "common/runtime/device.h"
#include "common/runtime/preamble.h"

namespace {

TEST(TorchSmokeTest, MatmulMatchesClosedForm) {
  distlm::runtime::InitRuntime(0);
  // A = [[1,2],[3,4]], B = I + 1: A @ B = [[4,5],[10,11]].
  auto a = torch::tensor({{1.f, 2.f}, {3.f, 4.f}});
  auto b = torch::eye(2) + 1;
  auto c = torch::matmul(a, b);
  EXPECT_FLOAT_EQ(c[0][0].item<float>(), 4.f);
  EXPECT_FLOAT_EQ(c[0][1].item<float>(), 5.f);
  EXPECT_FLOAT_EQ(c[1][0].item<float>(), 10.f);
  EXPECT_FLOAT_EQ(c[1][1].item<float>(), 11.f);
}

TEST(TorchSmokeTest, LargeSgemmAgreesWithDoublePrecision) {
  // Exercises the BLAS (sgemm) path rather than a small-matrix kernel.
  torch::manual_seed(0);
  auto a = torch::randn({256, 300});
  auto b = torch::randn({300, 200});
  auto c = torch::mm(a, b);
  auto ref = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
  EXPECT_LT((c.to(torch::kDouble) - ref).abs().max().item<double>(), 1e-3);
}

TEST(TorchSmokeTest, BackwardOfSumOfSquares) {
  auto x = torch::tensor({1.f, -2.f, 3.f}, torch::requires_grad());
  (x * x).sum().backward();
  auto g = x.grad();
  EXPECT_FLOAT_EQ(g[0].item<float>(), 2.f);
  EXPECT_FLOAT_EQ(g[1].item<float>(), -4.f);
  EXPECT_FLOAT_EQ(g[2].item<float>(), 6.f);
}

TEST(TorchSmokeTest, ReportsWhichLibTorchItUses) {
  // DISTLM_LIBTORCH=/usr must resolve to the same system LibTorch the default build uses.
  std::string source = DISTLM_LIBTORCH_SOURCE;
  EXPECT_TRUE(source == "system" || source == "DISTLM_LIBTORCH") << source;
  if (const char* expect = std::getenv("DISTLM_EXPECT_LIBTORCH_SOURCE")) {
    EXPECT_EQ(source, expect) << "root " << DISTLM_LIBTORCH_ROOT;
  }
  if (const char* expect = std::getenv("DISTLM_EXPECT_TORCH_VERSION")) {
    EXPECT_EQ(std::string(TORCH_VERSION).rfind(expect, 0), 0u) << "built against " << TORCH_VERSION;
  }
  std::printf("LibTorch %s (%s build, %d CUDA device(s) visible) from %s (%s)\n", TORCH_VERSION,
              distlm::runtime::BuiltWithCuda() ? "CUDA" : "CPU-only", distlm::runtime::CudaDeviceCount(),
              DISTLM_LIBTORCH_ROOT, DISTLM_LIBTORCH_SOURCE);
}

}  // namespace
