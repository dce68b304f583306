// Task 8a's stage on real workers (the reference outer loop):
//   - local SGD's exactness: one round at outer lr 1 without momentum leaves every worker with
//     the mean of what two independent part 1 runs on the workers' shards end with;
//   - the rounds: where they end (every --inner_steps updates and at the run's last update),
//     nothing sent between them, the bytes of each, and every worker with the same bits after;
//   - bad flags: one line naming the flag, exit 2.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"
#include "task8/int8_exchange.h"

namespace {

using distlm::testing::Command;

using distlm::testing::Runfile;

std::vector<std::string> Common(const std::string& out, int steps) {
  return {"--max_steps=" + std::to_string(steps),
          "--num_threads=1",
          "--max_seq_length=32",
          "--per_gpu_train_batch_size=2",
          "--do_eval=false",
          "--plots=false",
          "--output_dir=" + out};
}

std::vector<std::string> Workers(int n, const std::string& out, int steps, const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {Runfile("tools/launch"), "--nproc_per_node=" + std::to_string(n), "--",
                                   Runfile("task8/reference")};
  for (const auto& f : Common(out, steps)) argv.push_back(f);
  for (const auto& f : flags) argv.push_back(f);
  return argv;
}

using Tensors = std::vector<std::pair<std::string, torch::Tensor>>;

Tensors Model(const std::string& dir) { return distlm::safetensors::LoadFile(dir + "/model.safetensors"); }

int64_t Numel(const Tensors& model) {
  int64_t n = 0;
  for (const auto& [name, t] : model) n += t.numel();
  return n;
}

TEST(LocalSgdTest, OneRoundAtOuterLrOneIsTheMeanOfTheWorkersPart1Runs) {
  const int steps = 4;
  const std::string diloco = distlm::testing::MakeTempDir("local_sgd");
  auto r = distlm::testing::Run(Command{Workers(2, diloco, steps,
                               {"--inner_steps=4", "--outer_lr=1", "--outer_momentum=0", "--outer_nesterov=false"}),
                       {}},
               240);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> alone;
  for (int w = 0; w < 2; ++w) {
    alone.push_back(distlm::testing::MakeTempDir("part1_shard"));
    std::vector<std::string> argv = {Runfile("part1/reference")};
    for (const auto& f : Common(alone[w], steps)) argv.push_back(f);
    argv.push_back("--data_shard=" + std::to_string(w) + "/2");
    auto p = distlm::testing::Run(Command{argv, {}}, 240);
    ASSERT_EQ(p.exit_code, 0) << p.output;
  }
  // Rank 0 trained alone on its shard until the round's end: its losses are part 1's on that
  // shard, bit for bit (the same data, dropout draws and AdamW).
  EXPECT_EQ(distlm::testing::LoggedLosses(diloco), distlm::testing::LoggedLosses(alone[0]))
      << "rank 0's losses are not part 1's on --data_shard=0/2";
  const Tensors got = Model(diloco), a = Model(alone[0]), b = Model(alone[1]);
  ASSERT_EQ(got.size(), a.size());
  ASSERT_EQ(got.size(), b.size());
  double worst = 0, moved = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].first, a[i].first);
    const torch::Tensor mean = (a[i].second.to(torch::kDouble) + b[i].second.to(torch::kDouble)) / 2;
    worst = std::max(worst, (got[i].second.to(torch::kDouble) - mean).abs().max().item<double>());
    moved = std::max(moved, (a[i].second - b[i].second).abs().max().item<double>());
  }
  EXPECT_LE(worst, 1e-6) << "the round's result is not the mean of the workers' parameters";
  EXPECT_GT(moved, 1e-4) << "the shards did not differ: the test would not see a wrong mean";
}

TEST(LocalSgdTest, RoundsEndEveryHUpdatesAndAtTheLastAndSendNothingBetween) {
  const std::string out = distlm::testing::MakeTempDir("diloco");
  auto r = distlm::testing::Run(Command{Workers(2, out, 5, {"--inner_steps=2", "--save_every_rank"}), {}}, 240);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = distlm::testing::LogLines(out);
  ASSERT_EQ(lines.size(), 5u) << r.output;
  const int64_t params = Numel(Model(out));
  const std::map<int, std::pair<int, int>> rounds = {{2, {1, 2}}, {4, {2, 2}}, {5, {3, 1}}};
  for (const auto& line : lines) {
    const int step = line.at("step").get<int>();
    SCOPED_TRACE("update " + std::to_string(step));
    auto it = rounds.find(step);
    if (it == rounds.end()) {
      EXPECT_FALSE(line.contains("round"));
      EXPECT_EQ(line.at("comm_bytes").get<int64_t>(), 0) << "something was sent between rounds";
      continue;
    }
    EXPECT_EQ(line.at("round").get<int>(), it->second.first);
    EXPECT_EQ(line.at("round_updates").get<int>(), it->second.second);
    // One float32 per parameter: the pseudo-gradient's mean.
    EXPECT_EQ(line.at("comm_bytes").get<int64_t>(), 4 * params);
  }
  const Tensors rank0 = Model(out), rank1 = Model(out + "/rank_1");
  ASSERT_EQ(rank0.size(), rank1.size());
  for (size_t i = 0; i < rank0.size(); ++i) {
    EXPECT_TRUE(torch::equal(rank0[i].second, rank1[i].second)) << rank0[i].first << " differs between the workers";
  }
}

// The built-in 48 pairs: 24 a worker, 12 updates of 2 an epoch. Rounds of 5 end at 5 and 10,
// and at 12 with the epoch, before its evaluation; the count starts again in the next epoch.
TEST(LocalSgdTest, ARoundEndsWithEachEpochBeforeItsEvaluation) {
  const std::string out = distlm::testing::MakeTempDir("epochs");
  std::vector<std::string> argv = {Runfile("tools/launch"), "--nproc_per_node=2", "--", Runfile("task8/reference"),
                                   "--num_train_epochs=2", "--inner_steps=5", "--num_threads=1",
                                   "--max_seq_length=32", "--per_gpu_train_batch_size=2", "--do_eval=true",
                                   "--plots=false", "--output_dir=" + out};
  auto r = distlm::testing::Run(Command{argv, {}}, 240);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = distlm::testing::LogLines(out);
  ASSERT_EQ(lines.size(), 24u) << r.output;
  const std::map<int, int> ends = {{5, 5}, {10, 5}, {12, 2}, {17, 5}, {22, 5}, {24, 2}};
  for (const auto& line : lines) {
    const int step = line.at("step").get<int>();
    auto it = ends.find(step);
    if (it == ends.end()) {
      EXPECT_FALSE(line.contains("round")) << "update " << step;
    } else {
      EXPECT_EQ(line.value("round_updates", 0), it->second) << "update " << step;
    }
  }
  std::ifstream evals(out + "/eval_results.json");
  EXPECT_EQ(nlohmann::json::parse(evals).size(), 2u) << "one evaluation per epoch";
}

TEST(LocalSgdTest, Int8RoundsSendAQuarterOfFloat32AndABitMore) {
  const std::string out = distlm::testing::MakeTempDir("int8");
  auto r = distlm::testing::Run(Command{Workers(2, out, 4, {"--inner_steps=2", "--compression=int8"}), {}}, 240);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto lines = distlm::testing::LogLines(out);
  ASSERT_EQ(lines.size(), 4u) << r.output;
  const int64_t params = Numel(Model(out)), chunks = (params + distlm::task8::kInt8Chunk - 1) / distlm::task8::kInt8Chunk;
  for (int step : {2, 4}) {
    const auto& line = lines[step - 1];
    EXPECT_EQ(line.at("compression").get<std::string>(), "int8");
    // An int8 per value and a float32 scale per chunk.
    EXPECT_EQ(line.at("comm_bytes").get<int64_t>(), params + 4 * chunks) << "update " << step;
  }
}

struct BadFlag {
  std::vector<std::string> argv;
  std::string says;
};

TEST(LocalSgdTest, BadFlagsAreOneLineNamingTheFlag) {
  const std::string out = distlm::testing::MakeTempDir("bad");
  std::vector<BadFlag> cases = {
      {Workers(2, out, 2, {"--inner_steps=0"}), "--inner_steps=0: a round needs at least one update"},
      {Workers(2, out, 2, {"--outer_momentum=1"}), "--outer_momentum=1: must be in [0, 1)"},
      {Workers(2, out, 2, {"--outer_momentum=0"}), "--outer_nesterov needs --outer_momentum > 0"},
      {Workers(2, out, 2, {"--outer_lr=-0.5"}), "--outer_lr=-0.5: must be > 0"},
      {Workers(2, out, 2, {"--compression=fp8"}), "--compression=fp8: not one of none, int8"},
      {Workers(2, out, 2, {"--save_steps=1"}), "--save_steps=1: task8 snapshots only at epoch ends"},
      {{Runfile("task8/reference"), "--output_dir=" + out}, "task8 trains 2 or more workers"},
      {{Runfile("part1/reference"), "--output_dir=" + out, "--data_shard=2/2"}, "--data_shard=2/2: expected R/N"},
  };
  for (const auto& c : cases) {
    auto r = distlm::testing::Run(Command{c.argv, {}}, 120);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(c.says), std::string::npos) << r.output;
  }
}

// A snapshot holds rank 0's AdamW moments and no outer state: a second run in the same folder
// is refused rather than resumed into another run, and what the first wrote stays.
TEST(LocalSgdTest, ASnapshotIsNotResumedIntoAnotherRun) {
  const std::string out = distlm::testing::MakeTempDir("resume");
  auto first = distlm::testing::Run(Command{Workers(2, out, 2, {}), {}}, 240);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string log = distlm::testing::ReadFileOrEmpty(out + "/train_log.jsonl");
  auto again = distlm::testing::Run(Command{Workers(2, out, 2, {}), {}}, 240);
  EXPECT_EQ(again.exit_code, 2) << again.output;
  EXPECT_NE(again.output.find("task8 does not resume from a snapshot"), std::string::npos) << again.output;
  EXPECT_EQ(distlm::testing::ReadFileOrEmpty(out + "/train_log.jsonl"), log);
}

}  // namespace
