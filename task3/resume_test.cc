// Exact resume for a distributed stage: task 3 on 2 ranks, the whole job SIGKILLed (the
// launcher first, the ranks with it) and started again with the same command, logs the same
// losses and ends with the same weights as a run that was never interrupted, bit for bit.

#include <gtest/gtest.h>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"

namespace {

using distlm::testing::Command;

std::vector<std::string> Argv(const std::string& out) {
  return {distlm::testing::Runfile("tools/launch"), "--nproc_per_node=2", "--",
          distlm::testing::Runfile("task3/reference"), "--max_steps=12", "--save_steps=2", "--num_threads=1",
          "--max_seq_length=32", "--per_gpu_train_batch_size=2", "--output_dir=" + out};
}

TEST(Task3ResumeTest, KilledAndResumedTwoRankRunIsBitForBitTheSame) {
  std::string whole = distlm::testing::MakeTempDir("task3_whole");
  auto r = distlm::testing::Run(Command{Argv(whole), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(distlm::testing::LoggedLosses(whole).size(), 12u);

  std::string out = distlm::testing::MakeTempDir("task3_killed");
  auto k = distlm::testing::RunAndKillAfterUpdates(Argv(out), out, 7, 180);
  ASSERT_EQ(k.exit_code, 0) << "finished before it could be killed: " << k.output;

  r = distlm::testing::Run(Command{Argv(out), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from"), std::string::npos) << r.output;
  EXPECT_EQ(distlm::testing::LoggedLosses(out), distlm::testing::LoggedLosses(whole));
  auto a = distlm::safetensors::LoadFile(whole + "/model.safetensors");
  auto b = distlm::safetensors::LoadFile(out + "/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

}  // namespace
