// Snapshots and exact resume: a run killed with SIGKILL and started again with the same command
// logs the same losses and ends with the same weights, bit for bit, as one that was never
// interrupted; a corrupt newest snapshot falls back to the one before.

#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"

namespace {

using distlm::testing::Command;

const std::vector<std::string> kFlags = {"--max_steps=12", "--save_steps=2", "--num_threads=1",
                                         "--max_seq_length=64", "--per_gpu_train_batch_size=4"};

std::string Binary() { return distlm::testing::Runfile("part1/reference"); }

distlm::testing::ProcessResult RunToEnd(const std::string& out, std::vector<std::string> extra = {}) {
  Command c;
  c.argv = {Binary()};
  c.argv.insert(c.argv.end(), kFlags.begin(), kFlags.end());
  c.argv.insert(c.argv.end(), extra.begin(), extra.end());
  c.argv.push_back("--output_dir=" + out);
  return distlm::testing::Run(c, 120);
}

// Starts the run and SIGKILLs it once its log has `lines` lines.
void RunAndKill(const std::string& out, int lines) {
  std::vector<std::string> argv = {Binary()};
  argv.insert(argv.end(), kFlags.begin(), kFlags.end());
  argv.push_back("--output_dir=" + out);
  auto r = distlm::testing::RunAndKillAfterUpdates(argv, out, lines, 120);
  ASSERT_EQ(r.exit_code, 0) << "the run ended before it could be killed: " << r.output;
}

void ExpectSameWeights(const std::string& a, const std::string& b) {
  auto ta = distlm::safetensors::LoadFile(a + "/model.safetensors");
  auto tb = distlm::safetensors::LoadFile(b + "/model.safetensors");
  ASSERT_EQ(ta.size(), tb.size());
  for (size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].first, tb[i].first);
    EXPECT_TRUE(torch::equal(ta[i].second, tb[i].second)) << ta[i].first;
  }
}

class ResumeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    reference_ = new std::string(distlm::testing::MakeTempDir("uninterrupted"));
    auto r = RunToEnd(*reference_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_EQ(distlm::testing::LoggedLosses(*reference_).size(), 12u);
  }
  static std::string* reference_;
};
std::string* ResumeTest::reference_ = nullptr;

TEST_F(ResumeTest, KilledTwiceThenResumedIsBitForBitTheSame) {
  std::string out = distlm::testing::MakeTempDir("killed");
  RunAndKill(out, 3);   // between snapshots
  RunAndKill(out, 9);   // the second run resumed, then died too
  auto r = RunToEnd(out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from"), std::string::npos) << r.output;
  EXPECT_EQ(distlm::testing::LoggedLosses(out), distlm::testing::LoggedLosses(*reference_));  // exact, not approximate
  ExpectSameWeights(out, *reference_);
}

TEST_F(ResumeTest, CorruptNewestSnapshotFallsBackToThePreviousOne) {
  std::string out = distlm::testing::MakeTempDir("corrupt");
  // Killed from inside, right after update 8 and before its log line and snapshot-8 (the
  // trainer's fault injection): killing from outside after 7 log lines could land after
  // snapshot-8 on a loaded machine, and then the test truncated the wrong snapshot.
  Command killed;
  killed.argv = {Binary()};
  killed.argv.insert(killed.argv.end(), kFlags.begin(), kFlags.end());
  killed.argv.push_back("--output_dir=" + out);
  killed.env["DISTLM_FAULT_KILL"] = "0:8";
  auto k = distlm::testing::Run(killed, 120);
  ASSERT_EQ(k.exit_code, 128 + 9) << k.output;
  ASSERT_EQ(distlm::testing::LoggedLosses(out).size(), 7u);
  // Truncate the newest snapshot (snapshot-6) as a crash during a copy would.
  std::string newest = out + "/snapshots/snapshot-6.safetensors";
  ASSERT_TRUE(distlm::PathExists(newest));
  std::string bytes = distlm::ReadFile(newest);
  distlm::WriteFileAtomically(newest, bytes.substr(0, bytes.size() / 2));
  auto r = RunToEnd(out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("snapshot " + newest + " is unusable"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("resuming from " + out + "/snapshots/snapshot-4.safetensors"), std::string::npos)
      << r.output;
  EXPECT_EQ(distlm::testing::LoggedLosses(out), distlm::testing::LoggedLosses(*reference_));
  ExpectSameWeights(out, *reference_);
}

TEST_F(ResumeTest, ChangedFlagsRefuseToResumeAndOverwriteStartsAfresh) {
  std::string out = distlm::testing::MakeTempDir("changed");
  RunAndKill(out, 5);
  auto r = RunToEnd(out, {"--learning_rate=1e-4"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("error: the snapshot in " + out + "/snapshots was taken with learning_rate=5e-05, this run has 0.0001"),
            std::string::npos)
      << r.output;
  r = RunToEnd(out, {"--overwrite_output_dir"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("resuming"), std::string::npos) << r.output;
  EXPECT_EQ(distlm::testing::LoggedLosses(out), distlm::testing::LoggedLosses(*reference_));
}

}  // namespace
