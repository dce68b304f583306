// Task 8b: int8 with a scale per chunk, and error feedback, on real ranks (Gloo over 127.0.0.1).
//   - QuantizeInt8 / DequantizeInt8 against their contract on chunks of very different sizes;
//   - rounds of local SGD whose workers move the same way every round: with the error carried,
//     the parameters stay within a step of where float32 rounds would have taken them, round
//     after round; dropped, the same rounding adds up round after round. The bytes a round
//     sends, and every worker's bits, are checked too.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/testing/rank_test.h"
#include "task8/int8_exchange.h"
#include "task8/outer_loop.h"

namespace distlm::task8 {
namespace {

using testing::Fail;
using testing::RankEnv;

std::string Num(double v) {
  char s[32];
  std::snprintf(s, sizeof s, "%.4g", v);
  return s;
}

TEST(Task8Int8, EachValueComesBackWithinHalfItsChunksStep) {
  torch::manual_seed(8);
  // Four chunks: ordinary values, tiny ones, zeros, and a short last chunk of large ones.
  const torch::Tensor x = torch::cat({torch::randn({kInt8Chunk}), torch::randn({kInt8Chunk}) * 1e-3,
                                      torch::zeros({kInt8Chunk}), torch::randn({37}) * 50});
  const Int8Message m = QuantizeInt8(x);
  ASSERT_TRUE(m.values.defined() && m.scales.defined()) << "QuantizeInt8 returned an empty message";
  ASSERT_EQ(m.values.scalar_type(), torch::kChar) << "the values are not int8";
  ASSERT_EQ(m.values.numel(), x.numel()) << "one int8 value per value sent";
  ASSERT_EQ(m.scales.scalar_type(), torch::kFloat) << "the scales are not float32";
  ASSERT_EQ(m.scales.numel(), 4) << "one scale per chunk of " << kInt8Chunk << " values, the last one shorter";
  EXPECT_LE(m.values.to(torch::kInt).abs().max().item<int>(), 127) << "an int8 value outside [-127, 127]";
  const torch::Tensor back = DequantizeInt8(m);
  ASSERT_EQ(back.scalar_type(), torch::kFloat);
  ASSERT_EQ(back.numel(), x.numel());
  const char* names[] = {"an ordinary chunk", "a chunk of tiny values", "a chunk of zeros", "the short last chunk"};
  for (int c = 0; c < 4; ++c) {
    const int64_t from = c * kInt8Chunk, n = std::min<int64_t>(kInt8Chunk, x.numel() - from);
    const torch::Tensor want = x.narrow(0, from, n), got = back.narrow(0, from, n);
    const double step = want.abs().max().item<double>() / 127;
    const double worst = (got - want).abs().max().item<double>();
    EXPECT_LE(worst, step / 2 * (1 + 1e-5) + 1e-30)
        << names[c] << ": a value came back " << worst << " away, more than half its chunk's step " << step / 2
        << " (each chunk has its own scale, its largest |value| / 127)";
  }
}

constexpr int kRounds = 12;
const std::vector<std::vector<int64_t>> kShapes = {{20, 30}, {50}, {7}};

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// How worker `rank` moves tensor `i`, the same every round: the same rounding every round too.
torch::Tensor Move(int rank, size_t i) {
  return (torch::sin(torch::arange(Numel(kShapes[i]), torch::kDouble) * (0.37 * (rank + 1)) + static_cast<double>(i)) *
          (0.01 * (rank + 1)))
      .reshape(kShapes[i]);
}

RANK_CASE(error_feedback) {
  std::vector<torch::Tensor> params, start, mean_move;
  int64_t total = 0;
  double largest = 0;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    start.push_back(torch::linspace(-1, 1, Numel(kShapes[i]), torch::kDouble).reshape(kShapes[i]));
    params.push_back(start.back().to(torch::kFloat));
    torch::Tensor m = torch::zeros_like(start.back());
    for (int r = 0; r < env.world; ++r) {
      m += Move(r, i);
      largest = std::max(largest, Move(r, i).abs().max().item<double>());
    }
    mean_move.push_back(m / env.world);
    total += Numel(kShapes[i]);
  }
  // A worker's message carries its move and what earlier ones missed (at most half a step), so
  // no chunk's step is above this.
  const double step = largest / 127 * 1.5;
  std::unique_ptr<OuterLoop> loop = MakeOuterLoop({1.0, 0.0, false}, Compression::kInt8);
  loop->Begin(params);
  env.counting->TakeStats();
  for (int round = 1; round <= kRounds; ++round) {
    std::vector<torch::Tensor> now;
    for (size_t i = 0; i < params.size(); ++i) now.push_back(params[i].to(torch::kDouble));
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(now[i] + Move(env.rank, i));
    loop->End(*env.pg, params);
    const int64_t sent = env.counting->TakeStats().bytes();
    const int64_t chunks = (total + kInt8Chunk - 1) / kInt8Chunk;
    const int64_t bound = total + 4 * (chunks + static_cast<int64_t>(kShapes.size()));
    if (sent > bound || sent == 0) {
      Fail("round " + std::to_string(round) + " sent " + std::to_string(sent) + " bytes; " + std::to_string(total) +
           " values in int8 with a float32 scale per chunk are " + std::to_string(total + 4 * chunks));
    }
    // Where float32 rounds would be: each moved start + mean move, from the first start.
    double off = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      off = std::max(off, (params[i].to(torch::kDouble) - (start[i] + mean_move[i] * round)).abs().max().item<double>());
    }
    const std::string where = "after round " + std::to_string(round) + " of int8 local SGD on " +
                              std::to_string(env.world) + " workers: ";
    if (round == 1 && off < 0.02 * step) {
      Fail(where + "the parameters are float32's to " + Num(off) + ": the pseudo-gradient did not travel as int8");
    }
    if (off > step) {
      Fail(where + "a parameter is " + Num(off / step) + " steps from where float32 rounds take it; with the error "
           "carried into the next message it stays within one (was the error feedback dropped?)");
    }
  }
  // Every worker holds rank 0's bits.
  for (auto& p : params) {
    std::vector<at::Tensor> theirs = {p.clone()};
    env.pg->broadcast(theirs)->wait();
    if (!torch::equal(theirs[0], p)) Fail("the workers' parameters differ after the last round (rank 0's were broadcast)");
  }
}

TEST(Task8Int8, ErrorFeedbackKeepsTheRoundsWithinAStepOfFloat32s) {
  EXPECT_RANKS_PASS("error_feedback", 2);
  EXPECT_RANKS_PASS("error_feedback", 3);
}

}  // namespace
}  // namespace distlm::task8
