#include "common/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "common/runtime/errors.h"

namespace distlm::model {
namespace {

// The key Dropout will draw next: the default generator's next random64() after `seed`.
uint64_t KeyAfterSeed(uint64_t seed) {
  torch::manual_seed(seed);
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

TEST(DropoutTest, IdentityWhenOffOrEvaluating) {
  auto x = torch::randn({4, 5});
  EXPECT_TRUE(Dropout(x, 0.0, true).is_same(x));
  EXPECT_TRUE(Dropout(x, 0.3, false).is_same(x));
}

TEST(DropoutTest, RefusesProbabilitiesOutsideZeroOne) {
  auto x = torch::randn({3});
  EXPECT_THROW(Dropout(x, 1.0, true), UserError);
  EXPECT_THROW(Dropout(x, -0.1, true), UserError);
}

// Each element is x * 1/(1-p) or 0, and which one is DropoutKeeps(key, i): the parallel
// kernel's split into ranges does not shift indices.
TEST(DropoutTest, ValuesFollowTheHashOfTheIndex) {
  const double p = 0.1;
  const int64_t n = 300001;  // not a multiple of any grain or vector width
  auto x = torch::rand({n}) + 0.5;  // no zeros, so a zero output means dropped
  const uint64_t key = KeyAfterSeed(11);
  torch::manual_seed(11);
  auto y = Dropout(x, p, true);
  const float scale = 1.0f / static_cast<float>(1.0 - p);
  auto xa = x.accessor<float, 1>();
  auto ya = y.accessor<float, 1>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = DropoutKeeps(key, i, p) ? xa[i] * scale : 0.0f;
    if (ya[i] != want) ++wrong;
  }
  EXPECT_EQ(wrong, 0);
}

// Kept fraction within 5 standard deviations of 1 - p (binomial), for several p.
TEST(DropoutTest, KeepsOneMinusPOfTheElements) {
  const int64_t n = 1 << 21;
  for (double p : {0.05, 0.1, 0.5, 0.9}) {
    torch::manual_seed(3);
    auto y = Dropout(torch::ones({n}), p, true);
    const double kept = y.ne(0).sum().item<double>();
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(kept, n * (1 - p), 5 * sd) << "p=" << p;
    // Inverted dropout: the mean is preserved.
    EXPECT_NEAR(y.mean().item<double>(), 1.0, 5 * sd / n / (1 - p)) << "p=" << p;
  }
}

// Neighbouring elements, elements a row apart, and two successive calls are uncorrelated:
// |correlation| below 5 / sqrt(n).
TEST(DropoutTest, MasksAreUncorrelated) {
  const int64_t n = 1 << 20;
  torch::manual_seed(5);
  auto a = Dropout(torch::ones({n}), 0.5, true).ne(0).to(torch::kDouble);
  auto b = Dropout(torch::ones({n}), 0.5, true).ne(0).to(torch::kDouble);
  auto corr = [](const torch::Tensor& u, const torch::Tensor& v) {
    auto uc = u - u.mean(), vc = v - v.mean();
    return ((uc * vc).mean() / (uc.std(false) * vc.std(false))).item<double>();
  };
  const double bound = 5.0 / std::sqrt(static_cast<double>(n));
  EXPECT_LT(std::abs(corr(a.slice(0, 0, n - 1), a.slice(0, 1, n))), bound) << "neighbours";
  EXPECT_LT(std::abs(corr(a.slice(0, 0, n - 768), a.slice(0, 768, n))), bound) << "a row of 768 apart";
  EXPECT_LT(std::abs(corr(a, b)), bound) << "two calls";
}

TEST(DropoutTest, SameSeedSameMaskWhateverTheThreadCount) {
  auto x = torch::randn({64, 128, 32});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  torch::manual_seed(9);
  auto one = Dropout(x, 0.1, true);
  at::set_num_threads(2);
  torch::manual_seed(9);
  auto two = Dropout(x, 0.1, true);
  auto again = Dropout(x, 0.1, true);
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_FALSE(torch::equal(two, again)) << "successive calls must draw new masks";
}

// The gradient is the upstream gradient through the same mask and scale.
TEST(DropoutTest, GradientUsesTheForwardMask) {
  torch::manual_seed(13);
  auto x = (torch::rand({3, 1000}) + 0.5).requires_grad_(true);
  auto y = Dropout(x, 0.2, true);
  auto g = torch::randn({3, 1000});
  y.backward(g);
  const float scale = 1.0f / 0.8f;
  auto want = torch::where(y.ne(0), g * scale, torch::zeros_like(g));
  EXPECT_TRUE(torch::equal(x.grad(), want));
}

// Non-contiguous input: the output is the dropout of its values, in its logical order.
TEST(DropoutTest, NonContiguousInput) {
  auto base = torch::rand({40, 30}) + 0.5;
  auto x = base.t();
  torch::manual_seed(21);
  auto y = Dropout(x, 0.3, true);
  torch::manual_seed(21);
  auto yc = Dropout(x.contiguous(), 0.3, true);
  EXPECT_TRUE(torch::equal(y, yc));
}

TEST(DropoutTest, NanStaysVisible) {
  auto x = torch::full({4096}, std::nanf(""));
  torch::manual_seed(1);
  auto y = Dropout(x, 0.5, true);
  EXPECT_TRUE(y.isnan().all().item<bool>()) << "a dropped NaN must stay NaN, as x * mask does";
}

// Tensor parallelism's attention dropout (task 7a): a rank holding heads [offset, offset + h)
// of the whole [batch x heads, T, T] tensor gets, element for element, what Dropout gives that
// block of the whole tensor, forward and backward: in float32 on the host (the hashed masks)
// and in float64 (LibTorch's dropout, as on a GPU or in another dtype).
void ExpectHeadsMatchTheWholeTensor(torch::ScalarType dtype) {
  const int64_t batch = 3, heads = 4, t = 5;
  const double p = 0.3;
  const auto whole = (torch::rand({batch * heads, t, t}) + 0.5).to(dtype);
  const auto upstream = torch::randn({batch * heads, t, t}).to(dtype);
  auto x = whole.clone().requires_grad_(true);
  torch::manual_seed(17);
  auto y = Dropout(x, p, true);
  y.backward(upstream);
  for (const int64_t local : {int64_t{1}, int64_t{2}}) {
    for (int64_t offset = 0; offset < heads; offset += local) {
      const auto block = [&](const torch::Tensor& a) {
        return a.view({batch, heads, t, t}).narrow(1, offset, local).reshape({batch * local, t, t});
      };
      auto xl = block(whole).clone().requires_grad_(true);
      torch::manual_seed(17);
      auto yl = DropoutOfHeads(xl, p, true, heads, offset, local);
      yl.backward(block(upstream));
      EXPECT_TRUE(torch::equal(yl, block(y.detach())))
          << toString(dtype) << ": heads " << offset << ".." << offset + local - 1 << " of " << heads
          << " differ from those heads of the whole tensor's dropout";
      EXPECT_TRUE(torch::equal(xl.grad(), block(x.grad())))
          << toString(dtype) << ": the gradient of heads " << offset << ".." << offset + local - 1
          << " does not pass the forward's mask";
    }
  }
  EXPECT_GT(y.eq(0).sum().item<int64_t>(), 0) << "p = 0.3 dropped nothing: the test would not see a wrong mask";
}

TEST(DropoutTest, HeadsMatchTheWholeTensorInFloat32) { ExpectHeadsMatchTheWholeTensor(torch::kFloat); }
TEST(DropoutTest, HeadsMatchTheWholeTensorThroughLibTorchsDropout) {
  ExpectHeadsMatchTheWholeTensor(torch::kDouble);
}

TEST(DropoutTest, HeadsOfAShapeThatDoesNotHoldThemAreRefused) {
  try {
    DropoutOfHeads(torch::ones({5, 2, 2}), 0.1, true, 4, 0, 2);
    FAIL() << "5 rows cannot hold batches of 2 heads";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("[batch x 2 heads, ...]: got [5, 2, 2]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace distlm::model
