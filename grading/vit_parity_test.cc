// The parity suite on the second model family (#23): a tiny ViT on a generated CIFAR-10-format
// set (//common/vision:make_sample_cifar10), with the training augmentation on, through every
// stage's reference against part 1, loss by loss over 5 updates at the BERT suite's tolerance.
// The stages never see which model they train: this is the check that the Stage interface is
// model-agnostic. A mutant that never synchronises must fail it.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"
#include "grading/parity_cases.h"
#include "grading/stage_runner.h"

namespace distlm::grading {
namespace {

const std::string& DataDir() {
  static const std::string dir = [] {
    std::string d = testing::MakeTempDir("cifar_sample");
    testing::Command c;
    c.argv = {Bin("common/vision/make_sample_cifar10"), "--out=" + d, "--train_per_class=4", "--test_per_class=1"};
    auto r = testing::Run(c, 60);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return d;
  }();
  return dir;
}

std::vector<std::string> VitFlags(int per_rank_batch) {
  return {"--model_type=vit",
          "--task_name=cifar10",
          "--data_dir=" + DataDir(),
          "--max_steps=5",
          "--per_gpu_train_batch_size=" + std::to_string(per_rank_batch),
          "--learning_rate=1e-3",
          "--do_eval=false",
          "--plots=false",
          "--num_threads=1",
          "--dist_timeout_s=60"};
}

const std::vector<double>& Part1Losses() {
  static std::vector<double> losses;
  if (losses.empty()) {
    StageRun r = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, VitFlags(8), 120);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    losses = r.losses();
  }
  return losses;
}

struct VitCase {
  std::string binary;
  int ranks;
  std::vector<std::string> extra;
};

class VitParityTest : public ::testing::TestWithParam<VitCase> {};

TEST_P(VitParityTest, MatchesPart1) {
  const VitCase& c = GetParam();
  const auto& want = Part1Losses();
  ASSERT_EQ(want.size(), kSteps);
  auto flags = VitFlags(8 / c.ranks);
  flags.insert(flags.end(), c.extra.begin(), c.extra.end());
  StageRun r = RunStage(Bin(c.binary), c.ranks, Launcher::kLaunch, flags, 180);
  const std::string name = c.binary + " x" + std::to_string(c.ranks);
  ASSERT_FALSE(r.timed_out) << name << " hung:\n" << r.output;
  ASSERT_EQ(r.exit_code, 0) << name << ":\n" << r.output;
  EXPECT_EQ(CompareLosses(want, r.losses(), kSteps, kTol), "") << name;
  double worst = 0;
  for (size_t i = 0; i < std::min(want.size(), r.losses().size()); ++i) {
    worst = std::max(worst, std::abs(r.losses()[i] - want[i]) / want[i]);
  }
  std::printf("ViT, %s: worst relative loss difference from part 1 over %zu updates %.3g\n", name.c_str(), kSteps, worst);
}

INSTANTIATE_TEST_SUITE_P(
    Stages, VitParityTest,
    ::testing::Values(VitCase{"task2a/reference", 2, {}}, VitCase{"task2b/reference", 4, {}},
                      VitCase{"task3/reference", 4, {"--ddp=buckets", "--bucket_cap_mb=0.1"}},
                      VitCase{"task5/reference", 4, {}}, VitCase{"task6/reference", 4, {}}),
    [](const ::testing::TestParamInfo<VitCase>& info) {
      return info.param.binary.substr(0, info.param.binary.find('/')) + "_x" + std::to_string(info.param.ranks);
    });

TEST(VitParityMutationTest, NoSynchronisationIsCaught) {
  const auto& want = Part1Losses();
  auto flags = VitFlags(2);
  flags.push_back("--mutation=no_sync");
  StageRun r = RunStage(Bin("grading/mutant_stage"), 4, Launcher::kLaunch, flags, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(CompareLosses(want, r.losses(), kSteps, kTol), "") << "ranks that never synchronise passed";
}

}  // namespace
}  // namespace distlm::grading
