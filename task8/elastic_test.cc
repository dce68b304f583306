// Task 8c's stage end to end: three workers started as a cluster's nodes start them (--master_ip,
// --world_size, --local_rank; no launcher, which would end them all at the first death), slot 2
// killed in its third update, and a fourth process started at once with --join in slot 2. The
// survivors finish the round the dead worker left, the joiner is let in at a later round's end
// with the others' state and position, and all three end the run with the same bits; rank 0's log
// says who left and who joined, and when. A joiner with another model is refused with one line.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"

namespace {

using distlm::testing::Command;
using distlm::testing::Runfile;

constexpr int kSteps = 10;

// The stage binary under test, from --stage (a runfile path: the BUILD's $(rootpath)).
std::string& StagePath() {
  static std::string path;
  return path;
}

Command Worker(const std::string& out, int port, int slot, const std::vector<std::string>& extra = {}) {
  Command c;
  c.argv = {Runfile(StagePath()),
            "--max_steps=" + std::to_string(kSteps),
            "--num_threads=1",
            "--max_seq_length=32",
            "--per_gpu_train_batch_size=2",
            "--do_eval=false",
            "--plots=false",
            "--save_every_rank",
            "--inner_steps=2",
            "--elastic",
            "--dist_timeout_s=20",
            "--master_ip=127.0.0.1",
            "--master_port=" + std::to_string(port),
            "--world_size=3",
            "--local_rank=" + std::to_string(slot),
            "--output_dir=" + out};
  for (const auto& f : extra) c.argv.push_back(f);
  return c;
}

using Tensors = std::vector<std::pair<std::string, torch::Tensor>>;
Tensors Model(const std::string& dir) { return distlm::safetensors::LoadFile(dir + "/model.safetensors"); }

std::string All(const std::vector<distlm::testing::ProcessResult>& results) {
  std::string s;
  for (size_t i = 0; i < results.size(); ++i) {
    s += "--- process " + std::to_string(i) + " (exit " + std::to_string(results[i].exit_code) + "):\n" +
         results[i].output;
  }
  return s;
}

TEST(ElasticTest, AWorkerKilledMidRunIsLeftBehindAndAJoinerInItsSlotEndsWithTheSameBits) {
  const std::string out = distlm::testing::MakeTempDir("elastic");
  const int port = distlm::testing::FreePort();
  Command doomed = Worker(out, port, 2);
  doomed.env["DISTLM_FAULT_KILL"] = "2:3";
  const auto results = distlm::testing::RunAll(
      {Worker(out, port, 0), Worker(out, port, 1), doomed, Worker(out, port, 2, {"--join"})}, 240);
  const std::string all = All(results);
  std::printf("%s", all.c_str());  // the run, for the reader of the test's output
  ASSERT_EQ(results[0].exit_code, 0) << all;
  ASSERT_EQ(results[1].exit_code, 0) << all;
  EXPECT_EQ(results[2].exit_code, 128 + SIGKILL) << all;
  ASSERT_EQ(results[3].exit_code, 0) << all;
  EXPECT_NE(results[0].output.find("task8: round 2: lost slot(s) 2"), std::string::npos) << all;

  const auto lines = distlm::testing::LogLines(out);
  ASSERT_EQ(lines.size(), static_cast<size_t>(kSteps)) << all;
  int left_at = 0, joined_at = 0;
  for (const auto& line : lines) {
    const int step = line.at("step").get<int>();
    if (line.contains("left")) {
      EXPECT_EQ(line.at("left"), nlohmann::json::array({2})) << line.dump();
      left_at = step;
    }
    if (line.contains("joined")) {
      EXPECT_EQ(line.at("joined"), nlohmann::json::array({2})) << line.dump();
      joined_at = step;
    }
  }
  EXPECT_EQ(left_at, 4) << "the round of updates 3 and 4, which slot 2 did not finish\n" << all;
  EXPECT_GE(joined_at, left_at) << all;
  EXPECT_LT(joined_at, kSteps) << "the joiner trains before the run ends\n" << all;
  EXPECT_NE(results[3].output.find("task8: slot 2 joined 3 worker(s) after update " + std::to_string(joined_at)),
            std::string::npos)
      << all;

  // Every worker ends on the last round's outer step: the same bits, the joiner's too.
  const Tensors rank0 = Model(out), rank1 = Model(out + "/rank_1"), joiner = Model(out + "/rank_2");
  ASSERT_EQ(rank0.size(), joiner.size());
  for (size_t i = 0; i < rank0.size(); ++i) {
    EXPECT_TRUE(torch::equal(rank0[i].second, rank1[i].second)) << rank0[i].first;
    EXPECT_TRUE(torch::equal(rank0[i].second, joiner[i].second)) << rank0[i].first << ": the joiner's differs";
  }
}

TEST(ElasticTest, AJoinerWithAnotherModelIsRefusedWithOneLine) {
  const std::string out = distlm::testing::MakeTempDir("elastic_refused");
  const int port = distlm::testing::FreePort();
  // Long enough that the workers still train when the joiner, started with them, asks.
  const std::string steps = "--max_steps=300";
  const auto results = distlm::testing::RunAll(
      {Worker(out, port, 0, {steps}), Worker(out, port, 1, {steps}), Worker(out, port, 2, {steps}),
       Worker(out + "/joiner", port, 1, {steps, "--join", "--max_seq_length=64"})},
      240);
  const std::string all = All(results);
  for (int i : {0, 1, 2}) EXPECT_EQ(results[i].exit_code, 0) << all;
  EXPECT_EQ(results[3].exit_code, 2) << all;
  EXPECT_NE(results[3].output.find("error: slot 1 refused: it is not the model the workers train: its max_seq_length "
                                   "is 64, the workers' 32"),
            std::string::npos)
      << all;
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--stage=", 0) == 0) {
      StagePath() = arg.substr(8);
    } else {
      std::fprintf(stderr, "error: unknown argument %s (expected --stage=PATH)\n", argv[i]);
      return 2;
    }
  }
  if (StagePath().empty()) {
    std::fprintf(stderr, "error: --stage=PATH is missing: the stage binary to run (task8/BUILD passes it)\n");
    return 2;
  }
  return RUN_ALL_TESTS();
}
