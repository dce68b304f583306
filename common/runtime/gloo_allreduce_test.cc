// Two real processes all-reduce a tensor over Gloo on 127.0.0.1.
//
// The test binary is also the worker: the parent test starts two copies of itself with
// DISTLM_GLOO_TEST_RANK set, on a port chosen at run time, and checks that both ranks saw the
// right sum. A second case asks the workers to reduce with MAX instead of SUM and checks that
// the same verification catches it, so the check is known to be able to fail.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"

namespace {

constexpr int kWorld = 2;
constexpr int kN = 1000;

// The worker: returns 0 when the all-reduced tensor is sum_r (r + 1) * arange(kN).
int Worker(int rank, int port, bool use_max) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(port);
  opts.isServer = rank == 0;
  opts.numWorkers = kWorld;
  opts.timeout = std::chrono::seconds(20);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", opts);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  options->timeout = std::chrono::seconds(20);
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, kWorld, options);

  std::vector<at::Tensor> tensors = {torch::arange(kN, torch::kFloat) * (rank + 1)};
  c10d::AllreduceOptions ar;
  ar.reduceOp = use_max ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  pg->allreduce(tensors, ar)->wait();

  auto expected = torch::arange(kN, torch::kFloat) * (kWorld * (kWorld + 1) / 2);
  double err = (tensors[0] - expected).abs().max().item<double>();
  std::printf("rank %d: max |allreduce - expected| = %g\n", rank, err);
  return err == 0.0 ? 0 : 3;
}

std::vector<distlm::testing::ProcessResult> RunWorkers(bool use_max) {
  int port = distlm::testing::FreePort();
  std::vector<distlm::testing::Command> cmds;
  for (int r = 0; r < kWorld; ++r) {
    cmds.push_back({{"/proc/self/exe"},
                    {{"DISTLM_GLOO_TEST_RANK", std::to_string(r)},
                     {"DISTLM_GLOO_TEST_PORT", std::to_string(port)},
                     {"DISTLM_GLOO_TEST_MAX", use_max ? "1" : "0"}}});
  }
  // /proc/self/exe resolves in the child to the child's own binary: this test.
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  self[n > 0 ? n : 0] = '\0';
  for (auto& c : cmds) c.argv[0] = self;
  return distlm::testing::RunAll(cmds, 60);
}

TEST(GlooAllreduceTest, TwoProcessesSumOverLoopback) {
  auto results = RunWorkers(/*use_max=*/false);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(results[r].timed_out) << "rank " << r << " hung:\n" << results[r].output;
    EXPECT_EQ(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
  }
}

TEST(GlooAllreduceTest, AWrongReductionIsCaught) {
  auto results = RunWorkers(/*use_max=*/true);
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(results[r].timed_out) << "rank " << r << " hung:\n" << results[r].output;
    EXPECT_EQ(results[r].exit_code, 3) << "rank " << r << ":\n" << results[r].output;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* rank = std::getenv("DISTLM_GLOO_TEST_RANK")) {
    return Worker(std::atoi(rank), std::atoi(std::getenv("DISTLM_GLOO_TEST_PORT")),
                  std::string(std::getenv("DISTLM_GLOO_TEST_MAX")) == "1");
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
