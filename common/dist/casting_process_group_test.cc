// CastingProcessGroup over two real Gloo ranks (two threads of this process, connected over
// 127.0.0.1 through an in-process store), against closed forms computed without any
// communication.
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/types.h>

#include <cmath>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/dist/casting_process_group.h"
#include "common/dist/counting_process_group.h"
#include "common/dist/gloo_threads_testing.h"
#include "common/runtime/errors.h"

namespace distlm::dist {
namespace {

constexpr int kWorld = 2;
constexpr int64_t kN = 4099;  // not a multiple of the ring's chunking

// Rank r's "gradient": magnitudes in [0.25, 4) with both signs, so that the float32 sum of two
// float16 values is exact and the closed form below has a single rounding. Most values are
// not representable in float16, so casting visibly rounds them.
at::Tensor Gradient(int rank) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + rank);
  at::Tensor magnitude = at::exp2(at::rand({kN}, gen) * 4 - 2);
  at::Tensor sign = at::where(at::rand({kN}, gen) < 0.5, -1.0, 1.0).to(at::kFloat);
  return magnitude * sign;
}

struct Rank {
  c10::intrusive_ptr<CountingProcessGroup> counting;
  c10::intrusive_ptr<CastingProcessGroup> casting;
};

// Runs body(rank) on kWorld threads, each with Casting(Counting(Gloo)) in `dtype`.
void RunRanks(at::ScalarType dtype, const std::function<void(int, Rank&)>& body) {
  RunGlooThreads(kWorld, [&](int r, c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo) {
    Rank rank;
    rank.counting = c10::make_intrusive<CountingProcessGroup>(AsGroup(gloo, "gloo"));
    rank.casting = c10::make_intrusive<CastingProcessGroup>(AsGroup(rank.counting, "gloo"), dtype);
    body(r, rank);
  });
}

// What an fp16 all-reduce of two ranks must give: each addend rounded to float16, their exact
// sum rounded once to float16 (a two-rank ring adds each chunk once), back to float32.
at::Tensor Fp16SumClosedForm() {
  at::Tensor a = Gradient(0).to(at::kHalf).to(at::kFloat);
  at::Tensor b = Gradient(1).to(at::kHalf).to(at::kFloat);
  return (a + b).to(at::kHalf).to(at::kFloat);
}

TEST(CastingProcessGroupTest, Fp16AllreduceEqualsTheSumRoundedThroughFloat16) {
  std::vector<at::Tensor> results(kWorld);
  std::vector<CommStats> stats(kWorld);
  RunRanks(at::kHalf, [&](int r, Rank& rank) {
    rank.casting->set_enabled(true);
    std::vector<at::Tensor> t = {Gradient(r)};
    rank.casting->allreduce(t, c10d::AllreduceOptions())->wait();
    t[0].div_(kWorld);  // as task 2b's student does, in float32
    results[r] = t[0];
    stats[r] = rank.counting->TakeStats();
  });
  const at::Tensor expected = Fp16SumClosedForm() / kWorld;
  const at::Tensor exact = (Gradient(0) + Gradient(1)) / kWorld;
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(results[r].defined());
    EXPECT_EQ(results[r].scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(results[r], expected)) << "rank " << r << ": max |result - closed form| = "
                                                  << (results[r] - expected).abs().max().item<double>();
    // It did round (a plain float32 all-reduce would not match), within float16's half-ulp
    // bound for three roundings.
    EXPECT_FALSE(at::equal(results[r], exact));
    // (relative to the addends' magnitude: the sum itself may cancel to almost nothing).
    const at::Tensor scale = (Gradient(0).abs() + Gradient(1).abs()) / kWorld;
    double rel = ((results[r] - exact).abs() / scale).max().item<double>();
    EXPECT_LE(rel, 3 * std::ldexp(1.0, -11)) << "rank " << r;
    // What went through the counting group: float16, half of float32's bytes.
    ASSERT_EQ(stats[r].records.size(), 1u);
    EXPECT_EQ(stats[r].records[0].dtype, "float16");
    EXPECT_EQ(stats[r].bytes(), kN * 2);
  }
}

TEST(CastingProcessGroupTest, DisabledOrFp32IsAPlainFloat32Allreduce) {
  for (at::ScalarType dtype : {at::kHalf, at::kFloat}) {
    std::vector<at::Tensor> results(kWorld);
    std::vector<CommStats> stats(kWorld);
    RunRanks(dtype, [&](int r, Rank& rank) {
      rank.casting->set_enabled(dtype == at::kFloat);  // fp16 group left disabled
      std::vector<at::Tensor> t = {Gradient(r)};
      rank.casting->allreduce(t, c10d::AllreduceOptions())->wait();
      results[r] = t[0];
      stats[r] = rank.counting->TakeStats();
    });
    const at::Tensor exact = Gradient(0) + Gradient(1);  // two addends: float32's sum is commutative
    for (int r = 0; r < kWorld; ++r) {
      EXPECT_TRUE(at::equal(results[r], exact)) << CommDtypeName(dtype) << " rank " << r;
      EXPECT_EQ(stats[r].records.at(0).dtype, "float32");
      EXPECT_EQ(stats[r].bytes(), kN * 4);
    }
  }
}

TEST(CastingProcessGroupTest, OnlyFloat32IsCast) {
  // The loss averaging all-reduces a double and DDP's unused-parameter check an int: untouched.
  RunRanks(at::kHalf, [&](int r, Rank& rank) {
    rank.casting->set_enabled(true);
    std::vector<at::Tensor> d = {torch::tensor({1.0 / 3 + r}, torch::kDouble)};
    rank.casting->allreduce(d, c10d::AllreduceOptions())->wait();
    EXPECT_EQ(d[0].item<double>(), 1.0 / 3 + (1.0 / 3 + 1));
    std::vector<at::Tensor> i = {torch::tensor({70000 + r}, torch::kInt)};
    rank.casting->allreduce(i, c10d::AllreduceOptions())->wait();
    EXPECT_EQ(i[0].item<int>(), 140001);
    auto stats = rank.counting->TakeStats();
    EXPECT_EQ(stats.records.at(0).dtype, "float64");
    EXPECT_EQ(stats.records.at(1).dtype, "int32");
  });
}

TEST(CastingProcessGroupTest, TheFutureCompletesAfterTheWriteBack) {
  // DDP learns that a bucket is done from the work's future: by then the float32 tensor must
  // hold the result.
  const at::Tensor expected = Fp16SumClosedForm();
  RunRanks(at::kHalf, [&](int r, Rank& rank) {
    rank.casting->set_enabled(true);
    std::vector<at::Tensor> t = {Gradient(r)};
    auto work = rank.casting->allreduce(t, c10d::AllreduceOptions());
    // What the tensor holds when the future's callbacks run (on the backend's thread).
    auto seen = std::make_shared<std::promise<at::Tensor>>();
    work->getFuture()->addCallback([seen, out = t[0]](c10::ivalue::Future&) { seen->set_value(out.clone()); });
    auto when_done = seen->get_future();
    ASSERT_EQ(when_done.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    EXPECT_TRUE(work->isCompleted());
    EXPECT_TRUE(at::equal(when_done.get(), expected)) << "rank " << r;
    work->wait();  // after the future: no second write-back, same values
    EXPECT_TRUE(at::equal(t[0], expected)) << "rank " << r;
  });
}

TEST(CastingProcessGroupTest, GlooAllreducesBfloat16FromLibTorch2Only) {
  // Why --comm_dtype=bf16 needs --backend=mpi on 1.13 (common/train/distributed.cc says so).
  RunRanks(at::kBFloat16, [&](int r, Rank& rank) {
    rank.casting->set_enabled(true);
    std::vector<at::Tensor> t = {Gradient(r)};
    if (!kGlooHasBfloat16) {
      EXPECT_ANY_THROW(rank.casting->allreduce(t, c10d::AllreduceOptions())->wait());
      return;
    }
    rank.casting->allreduce(t, c10d::AllreduceOptions())->wait();
    // Two ranks: each addend rounded to bfloat16, the sum rounded once more.
    at::Tensor a = Gradient(0).to(at::kBFloat16).to(at::kFloat);
    at::Tensor b = Gradient(1).to(at::kBFloat16).to(at::kFloat);
    at::Tensor want = (a + b).to(at::kBFloat16).to(at::kFloat);
    EXPECT_TRUE(torch::equal(t[0], want)) << "rank " << r << ": worst difference "
                                          << (t[0] - want).abs().max().item<float>();
  });
}

TEST(CastingProcessGroupTest, ParsesTheFlagValues) {
  EXPECT_EQ(ParseCommDtype("fp32"), at::kFloat);
  EXPECT_EQ(ParseCommDtype("fp16"), at::kHalf);
  EXPECT_EQ(ParseCommDtype("bf16"), at::kBFloat16);
  EXPECT_EQ(ParseCommDtype("float16"), at::kHalf);
  try {
    ParseCommDtype("int8");
    ADD_FAILURE() << "int8 accepted";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--comm_dtype=int8 is not a communication dtype: use fp32, fp16 or bf16");
  }
  EXPECT_EQ(CommDtypeName(at::kBFloat16), "bf16");
}

}  // namespace
}  // namespace distlm::dist
