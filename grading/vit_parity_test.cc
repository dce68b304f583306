// The parity suite on the second model family: a tiny ViT on a generated CIFAR-10-format
// set (//common/vision:make_sample_cifar10), with the training augmentation on, through every
// stage's reference against part 1, loss by loss over 5 updates at the BERT suite's tolerance.
// The stages never see which model they train: this is the check that the Stage interface is
// model-agnostic. A mutant that never synchronises must fail it.
#include <cstdio>
#include <string>
#include <vector>

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
  std::printf("ViT, %s: worst relative loss difference from part 1 over %zu updates %.3g\n", name.c_str(), kSteps,
              WorstRelative(want, r.losses()));
}

INSTANTIATE_TEST_SUITE_P(
    Stages, VitParityTest,
    ::testing::Values(VitCase{"task2a/reference", 2, {}}, VitCase{"task2b/reference", 4, {}},
                      VitCase{"task3/reference", 4, {"--ddp=buckets", "--bucket_cap_mb=0.1"}},
                      VitCase{"task5/reference", 4, {}}, VitCase{"task6/reference", 4, {}}),
    [](const ::testing::TestParamInfo<VitCase>& info) {
      return info.param.binary.substr(0, info.param.binary.find('/')) + "_x" + std::to_string(info.param.ranks);
    });

// Task 7 on the ViT: 7a's split of its heads and MLP over 2 ranks (each reading the batch of 8),
// 7b's pipeline of its units (the embeddings, each layer, the head) in 2 stages over 4
// micro-batches, and 7c's 2 x 2 of both (each replica reading 4). Then the split of its 2 heads
// over 4 ranks, refused in one line.
TEST(VitModelParallelTest, EveryLayoutMatchesPart1) {
  const auto& want = Part1Losses();
  ASSERT_EQ(want.size(), kSteps);
  struct LayoutCase {
    int ranks, batch;
    std::vector<std::string> extra;
  };
  for (const LayoutCase& c :
       {LayoutCase{2, 8, {"--model_parallel=tensor"}},
        LayoutCase{4, 4, {"--model_parallel=tensor", "--tensor_parallel_size=2"}},
        LayoutCase{2, 8, {"--model_parallel=pipeline", "--micro_batches=4"}},
        LayoutCase{4, 4, {"--model_parallel=pipeline", "--micro_batches=2", "--pipeline_parallel_size=2"}}}) {
    auto flags = VitFlags(c.batch);
    flags.insert(flags.end(), c.extra.begin(), c.extra.end());
    StageRun r = RunStage(Bin("task7/reference"), c.ranks, Launcher::kLaunch, flags, 180);
    std::string name = "task7 x" + std::to_string(c.ranks);
    for (const auto& f : c.extra) name += " " + f;
    ASSERT_FALSE(r.timed_out) << name << " hung:\n" << r.output;
    ASSERT_EQ(r.exit_code, 0) << name << ":\n" << r.output;
    EXPECT_EQ(CompareLosses(want, r.losses(), kSteps, kTol), "") << name;
    std::printf("ViT, %s: worst relative loss difference from part 1 over %zu updates %.3g\n", name.c_str(), kSteps,
                WorstRelative(want, r.losses()));
  }
  auto flags = VitFlags(8);
  flags.push_back("--model_parallel=tensor");
  StageRun split = RunStage(Bin("task7/reference"), 4, Launcher::kLaunch, flags, 120);
  EXPECT_EQ(split.exit_code, 2) << split.output;
  EXPECT_NE(split.output.find("tensor parallelism over 4 ranks needs the ViT's heads (2) and intermediate size (128) "
                              "to divide by it"),
            std::string::npos)
      << split.output;
}

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
