// Exact resume for task 6 on 2 ranks: the whole job SIGKILLed after its 7th update (snapshots
// every 2) and started again with the same command logs the same losses and ends with the same
// weights as a run never interrupted, bit for bit. Between updates no rank holds the model, and
// no rank gathers it for a snapshot: each writes its part (its blocks of the parameters and
// moments) beside an index (common/train/snapshot.h), and reads it back. The parts rebuild
// task 5's whole snapshot; a part found corrupt sends every rank to the snapshot before; and a
// run of another world size rebuilds the whole tensors from every part and takes its blocks
// (4 -> 2 and 2 -> 4 ranks, the same examples per update), or says which part it lacks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "common/runtime/atomic_file.h"
#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"
#include "common/train/snapshot.h"

namespace {

using distlm::testing::Command;
using distlm::testing::Runfile;

std::vector<std::string> TwoRanks(const std::string& stage, const std::string& out, int updates) {
  std::vector<std::string> argv = {Runfile("tools/launch"), "--nproc_per_node=2", "--", Runfile(stage + "/reference")};
  for (const std::string flag : {"--save_steps=2", "--num_threads=1", "--max_seq_length=32", "--per_gpu_train_batch_size=2"}) {
    argv.push_back(flag);
  }
  argv.push_back("--max_steps=" + std::to_string(updates));
  argv.push_back("--output_dir=" + out);
  return argv;
}

TEST(Task6ResumeTest, KilledAndResumedIsBitForBitTheSame) {
  const std::string whole = distlm::testing::MakeTempDir("task6_whole");
  auto r = distlm::testing::Run(Command{TwoRanks("task6", whole, 12), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(distlm::testing::LoggedLosses(whole).size(), 12u);

  const std::string out = distlm::testing::MakeTempDir("task6_killed");
  auto k = distlm::testing::RunAndKillAfterUpdates(TwoRanks("task6", out, 12), out, 7, 180);
  ASSERT_EQ(k.exit_code, 0) << "finished before it could be killed: " << k.output;
  r = distlm::testing::Run(Command{TwoRanks("task6", out, 12), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from"), std::string::npos) << r.output;
  EXPECT_EQ(distlm::testing::LoggedLosses(out), distlm::testing::LoggedLosses(whole));
  const auto a = distlm::safetensors::LoadFile(whole + "/model.safetensors");
  const auto b = distlm::safetensors::LoadFile(out + "/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

// N ranks with a per-rank batch of 8 / N (the same 8 examples per update on any N), dropout off.
std::vector<std::string> Ranks(int n, const std::string& out, int updates) {
  std::vector<std::string> argv = {Runfile("tools/launch"), "--nproc_per_node=" + std::to_string(n), "--",
                                   Runfile("task6/reference"), "--save_steps=2", "--num_threads=1",
                                   "--max_seq_length=32", "--hidden_dropout_prob=0", "--attention_probs_dropout_prob=0",
                                   "--per_gpu_train_batch_size=" + std::to_string(8 / n),
                                   "--max_steps=" + std::to_string(updates), "--output_dir=" + out};
  return argv;
}

// A 4-rank snapshot resumed on 2 ranks, and a 2-rank one on 4: rank 0 rebuilds the whole
// tensors from every part, and each rank takes its blocks of them for the new layout, and with the same examples per update the run
// goes on as the uninterrupted one: the updates before the snapshot exactly, the later ones but
// for the order in which the ranks' sums add (within 1e-5 relative; about 1e-7 seen).
TEST(Task6ResumeTest, ResumesOnAnotherWorldSize) {
  for (const auto& [from, to] : std::vector<std::pair<int, int>>{{4, 2}, {2, 4}}) {
    const std::string name = std::to_string(from) + " -> " + std::to_string(to) + " ranks";
    const std::string whole = distlm::testing::MakeTempDir("task6_whole_n");
    ASSERT_EQ(distlm::testing::Run(Command{Ranks(from, whole, 8), {}}, 240).exit_code, 0) << name;
    const std::vector<double> want = distlm::testing::LoggedLosses(whole);
    ASSERT_EQ(want.size(), 8u) << name;

    const std::string out = distlm::testing::MakeTempDir("task6_reshard");
    auto k = distlm::testing::RunAndKillAfterUpdates(Ranks(from, out, 8), out, 5, 240);
    ASSERT_EQ(k.exit_code, 0) << name << ": finished before it could be killed: " << k.output;
    // The same world size's per-rank batch on the new one is refused, naming the fix.
    std::vector<std::string> wrong = Ranks(to, out, 8);
    for (auto& a : wrong) {
      if (a.rfind("--per_gpu_train_batch_size=", 0) == 0) a = "--per_gpu_train_batch_size=" + std::to_string(8 / from);
    }
    auto w = distlm::testing::Run(Command{wrong, {}}, 240);
    EXPECT_EQ(w.exit_code, 2) << name << ":\n" << w.output;
    EXPECT_NE(w.output.find("resume on " + std::to_string(to) + " rank(s) with --per_gpu_train_batch_size=" +
                            std::to_string(8 / to)),
              std::string::npos)
        << name << ":\n" << w.output;

    // Another world size rebuilds the whole tensors on rank 0 from every part: one missing
    // there is named, and nothing is written.
    const std::string last = distlm::train::SnapshotPartPath(out, 4, from - 1, from);
    ASSERT_EQ(std::rename(last.c_str(), (last + ".away").c_str()), 0) << last;
    const std::string log_before = distlm::ReadFile(out + "/train_log.jsonl");
    auto m = distlm::testing::Run(Command{Ranks(to, out, 8), {}}, 240);
    EXPECT_EQ(m.exit_code, 2) << name << ":\n" << m.output;
    EXPECT_NE(m.output.find("the snapshot of update 4 was written in parts by " + std::to_string(from) +
                            " rank(s), and this run (" + std::to_string(to) +
                            " rank(s)) must rebuild it whole on rank 0, which lacks " + last),
              std::string::npos)
        << name << ":\n" << m.output;
    EXPECT_EQ(distlm::ReadFile(out + "/train_log.jsonl"), log_before) << name;
    ASSERT_EQ(std::rename((last + ".away").c_str(), last.c_str()), 0);

    auto r = distlm::testing::Run(Command{Ranks(to, out, 8), {}}, 240);
    ASSERT_EQ(r.exit_code, 0) << name << ":\n" << r.output;
    EXPECT_NE(r.output.find("the snapshot was taken on " + std::to_string(from) + " rank(s), this run has " +
                            std::to_string(to)),
              std::string::npos)
        << r.output;
    const std::vector<double> got = distlm::testing::LoggedLosses(out);
    ASSERT_EQ(got.size(), 8u) << name << ":\n" << r.output;
    double worst = 0;
    for (size_t i = 0; i < 8; ++i) {
      if (i < 4) {
        EXPECT_EQ(got[i], want[i]) << name << ": update " << i + 1 << " came from the snapshot";
      }
      worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
    }
    EXPECT_LT(worst, 1e-5) << name;
    std::printf("task6 resumed %s: worst relative loss difference from the uninterrupted run %.3g\n", name.c_str(),
                worst);
  }
}

TEST(Task6ResumeTest, PartsHoldHalfEachAndRebuildTask5sSnapshot) {
  const std::string f = distlm::testing::MakeTempDir("task6_snap"), z = distlm::testing::MakeTempDir("task5_snap");
  ASSERT_EQ(distlm::testing::Run(Command{TwoRanks("task6", f, 3), {}}, 180).exit_code, 0);
  ASSERT_EQ(distlm::testing::Run(Command{TwoRanks("task5", z, 3), {}}, 180).exit_code, 0);
  const std::string whole5 = z + "/snapshots/snapshot-2.safetensors";
  EXPECT_FALSE(distlm::PathExists(f + "/snapshots/snapshot-2.safetensors")) << "task 6 wrote a whole snapshot";
  const auto snap = distlm::train::LoadLatestSnapshot(f, /*below=*/3);
  ASSERT_TRUE(snap.has_value());
  ASSERT_EQ(snap->path, f + "/snapshots/snapshot-2.index.json");
  // Each part is its rank's blocks: about half of the whole snapshot's bytes.
  const double whole_bytes = static_cast<double>(distlm::ReadFile(whole5).size());
  for (int r = 0; r < 2; ++r) {
    const double part = static_cast<double>(distlm::ReadFile(distlm::train::SnapshotPartPath(f, 2, r, 2)).size());
    EXPECT_GT(part, 0.45 * whole_bytes) << "rank " << r;
    EXPECT_LT(part, 0.55 * whole_bytes) << "rank " << r;
  }
  const auto fs = distlm::train::WholeFromParts(f, snap->state);
  auto zs = distlm::safetensors::LoadFile(whole5);
  ASSERT_EQ(fs.size(), zs.size());
  std::map<std::string, torch::Tensor> by_name(zs.begin(), zs.end());
  for (const auto& [name, t] : fs) {
    ASSERT_TRUE(by_name.count(name)) << name << " is not in task 5's snapshot";
    const torch::Tensor& want = by_name[name];
    ASSERT_EQ(t.sizes(), want.sizes()) << name;
    if (name.rfind("rng/", 0) == 0) continue;
    // As task 5's resume test: the key bias's gradient is rounding noise (softmax ignores a
    // constant added to a row of scores), so its moments depend on the order of float sums.
    if (name.find("attention.self.key.bias") != std::string::npos) continue;
    const double scale = want.abs().max().item<double>();
    EXPECT_TRUE(torch::allclose(t, want, 1e-3, 1e-4 * scale + 1e-12)) << name;
  }
}

// The newest snapshot's part of rank 1 corrupted after the kill: every rank goes back to the
// snapshot before, and the run still ends as the uninterrupted one, bit for bit.
TEST(Task6ResumeTest, ACorruptPartSendsEveryRankToTheSnapshotBefore) {
  const std::string whole = distlm::testing::MakeTempDir("task6_whole_c");
  ASSERT_EQ(distlm::testing::Run(Command{TwoRanks("task6", whole, 8), {}}, 180).exit_code, 0);
  const std::string out = distlm::testing::MakeTempDir("task6_corrupt");
  auto k = distlm::testing::RunAndKillAfterUpdates(TwoRanks("task6", out, 8), out, 5, 180);
  ASSERT_EQ(k.exit_code, 0) << "finished before it could be killed: " << k.output;
  const std::string part = distlm::train::SnapshotPartPath(out, 4, 1, 2);
  ASSERT_TRUE(distlm::PathExists(part) && distlm::PathExists(out + "/snapshots/snapshot-4.index.json")) << k.output;
  std::string bytes = distlm::ReadFile(part);
  bytes[bytes.size() - 100] ^= 0x01;
  distlm::WriteFileAtomically(part, bytes);
  auto r = distlm::testing::Run(Command{TwoRanks("task6", out, 8), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the snapshot of update 4 is unusable: rank 1's part: " + part +
                          ": checksum mismatch with its index; trying the previous one"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("resuming from " + out + "/snapshots/snapshot-2.index.json"), std::string::npos) << r.output;
  EXPECT_EQ(distlm::testing::LoggedLosses(out), distlm::testing::LoggedLosses(whole));
}

}  // namespace
