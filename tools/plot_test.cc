// //tools:plot on runs it did not train: two synthetic train_log.jsonl files overlaid, and a
// folder without a log refused with its name.
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"

namespace distlm {
namespace {

std::string Log(double first_loss, double step_ms) {
  std::string s;
  for (int i = 1; i <= 6; ++i) {
    s += "{\"step\": " + std::to_string(i) + ", \"epoch\": " + std::to_string(i <= 3 ? 1 : 2) + ", \"loss\": " + std::to_string(first_loss / i) +
         ", \"lr\": 0.0001, \"samples_per_s\": 100, \"step_time_ms\": " + std::to_string(i == 1 ? 10 * step_ms : step_ms) + "}\n";
  }
  return s;
}

bool IsPng(const std::string& path) {
  return testing::ReadFileOrEmpty(path).compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
}

TEST(PlotTest, OverlaysRunsAndDrawsTheirIterationTimes) {
  const std::string root = testing::MakeTempDir("plot");
  testing::WriteFileMakingDirs(root + "/task2a/train_log.jsonl", Log(0.7, 40));
  testing::WriteFileMakingDirs(root + "/task2b/train_log.jsonl", Log(0.69, 25));
  testing::Command c;
  c.argv = {testing::Runfile("tools/plot"), root + "/task2a", root + "/task2b", "--out=" + root + "/out"};
  auto p = testing::Run(c, 120);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(IsPng(root + "/out/loss.png")) << p.output;
  EXPECT_TRUE(IsPng(root + "/out/iteration_time.png")) << p.output;
  // The bars are the mean over iterations 2..40: the first, slow one is left out.
  const std::string bars = testing::ReadFileOrEmpty(root + "/out/iteration_time.dat");
  EXPECT_NE(bars.find("\"task2a\" 40"), std::string::npos) << bars;
  EXPECT_NE(bars.find("\"task2b\" 25"), std::string::npos) << bars;
  EXPECT_FALSE(std::filesystem::exists(root + "/out/accuracy_by_time.png")) << "no run was evaluated";
}

// Accuracy against the training time to reach it: epoch 1 ends after updates 1-3 (400 + 40 +
// 40 ms), epoch 2 after 4-6 (120 ms more).
TEST(PlotTest, AccuracyAgainstTheTrainingTimeOfEachEvaluatedEpoch) {
  const std::string root = testing::MakeTempDir("plot_accuracy");
  testing::WriteFileMakingDirs(root + "/ddp/train_log.jsonl", Log(0.7, 40));
  testing::WriteFileMakingDirs(root + "/ddp/eval_results.json",
                               "[{\"epoch\": 1, \"accuracy\": 0.6}, {\"epoch\": 2, \"accuracy\": 0.75}]");
  testing::WriteFileMakingDirs(root + "/diloco/train_log.jsonl", Log(0.7, 25));
  testing::Command c;
  c.argv = {testing::Runfile("tools/plot"), root + "/ddp", root + "/diloco", "--out=" + root + "/out"};
  auto p = testing::Run(c, 120);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(IsPng(root + "/out/accuracy_by_time.png")) << p.output;
  EXPECT_EQ(testing::ReadFileOrEmpty(root + "/out/run0.acc.dat"), "# training_s accuracy epoch\n0.48 0.6 1\n0.6 0.75 2\n");
  EXPECT_FALSE(std::filesystem::exists(root + "/out/run1.acc.dat")) << "diloco has no evaluations";
}

TEST(PlotTest, AFolderWithoutALogIsNamed) {
  const std::string root = testing::MakeTempDir("plot_missing");
  std::filesystem::create_directories(root + "/empty");
  testing::Command c;
  c.argv = {testing::Runfile("tools/plot"), root + "/empty", "--out=" + root + "/out"};
  auto p = testing::Run(c, 60);
  EXPECT_NE(p.exit_code, 0);
  EXPECT_NE(p.output.find(root + "/empty/train_log.jsonl: missing, or no update in it"), std::string::npos) << p.output;
}

}  // namespace
}  // namespace distlm
