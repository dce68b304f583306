// Exact resume for task 5 on 2 ranks: the whole job SIGKILLed (the launcher first, the ranks
// with it) and started again with the same command logs the same losses and ends with the
// same weights as a run that was never interrupted, bit for bit. Each rank holds only its
// shard of AdamW's moments, so this checks that a snapshot gathers them whole and a resume
// gives each rank its slices back. And the snapshot's moments against task 3's, which keeps
// them unsharded: the same names and shapes, the same values (up to the order of float sums).
#include <dirent.h>


#include <gtest/gtest.h>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"

namespace {

using distlm::testing::Command;

std::vector<std::string> Argv(const std::string& stage, const std::string& out, int steps) {
  return {distlm::testing::Runfile("tools/launch"),
          "--nproc_per_node=2",
          "--",
          distlm::testing::Runfile(stage + "/reference"),
          "--max_steps=" + std::to_string(steps),
          "--save_steps=2",
          "--num_threads=1",
          "--max_seq_length=32",
          "--per_gpu_train_batch_size=2",
          "--output_dir=" + out};
}

TEST(Task5ResumeTest, KilledAndResumedTwoRankRunIsBitForBitTheSame) {
  std::string whole = distlm::testing::MakeTempDir("task5_whole");
  auto r = distlm::testing::Run(Command{Argv("task5", whole, 12), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(distlm::testing::LoggedLosses(whole).size(), 12u);

  std::string out = distlm::testing::MakeTempDir("task5_killed");
  auto k = distlm::testing::RunAndKillAfterUpdates(Argv("task5", out, 12), out, 7, 180);
  ASSERT_EQ(k.exit_code, 0) << "finished before it could be killed: " << k.output;

  r = distlm::testing::Run(Command{Argv("task5", out, 12), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from"), std::string::npos) << r.output;
  EXPECT_EQ(distlm::testing::LoggedLosses(out), distlm::testing::LoggedLosses(whole));
  auto a = distlm::safetensors::LoadFile(whole + "/model.safetensors");
  auto b = distlm::safetensors::LoadFile(out + "/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

TEST(Task5ResumeTest, SnapshotHoldsTheWholeStateAsTask3Does) {
  std::string z = distlm::testing::MakeTempDir("task5_snap");
  std::string d = distlm::testing::MakeTempDir("task3_snap");
  auto rz = distlm::testing::Run(Command{Argv("task5", z, 3), {}}, 180);
  ASSERT_EQ(rz.exit_code, 0) << rz.output;
  auto rd = distlm::testing::Run(Command{Argv("task3", d, 3), {}}, 180);
  ASSERT_EQ(rd.exit_code, 0) << rd.output;
  const std::string file = "/snapshots/snapshot-2.safetensors";  // after update 2 (3 is the last)
  auto zs = distlm::safetensors::LoadFile(z + file);
  auto ds = distlm::safetensors::LoadFile(d + file);
  ASSERT_EQ(zs.size(), ds.size());
  int moments = 0;
  for (size_t i = 0; i < zs.size(); ++i) {
    ASSERT_EQ(zs[i].first, ds[i].first);
    ASSERT_EQ(zs[i].second.sizes(), ds[i].second.sizes()) << zs[i].first;
    if (zs[i].first.rfind("exp_avg", 0) != 0) continue;
    ++moments;
    // The key bias's gradient is zero in exact arithmetic (softmax ignores a constant added to
    // a whole row of scores), so its moments are rounding noise that depends on summation order.
    if (zs[i].first.find("attention.self.key.bias") != std::string::npos) continue;
    const double scale = ds[i].second.abs().max().item<double>();
    EXPECT_GT(scale, 0) << zs[i].first << " is all zeros in task 3's snapshot";
    EXPECT_TRUE(torch::allclose(zs[i].second, ds[i].second, 1e-3, 1e-4 * scale)) << zs[i].first;
  }
  EXPECT_EQ(moments, 2 * 41);  // exp_avg and exp_avg_sq of the tiny BERT's 41 parameters
}

}  // namespace
