// Exact resume for a distributed stage: task 3 on 2 ranks, the whole job SIGKILLed (the
// launcher first, the ranks with it) and started again with the same command, logs the same
// losses and ends with the same weights as a run that was never interrupted, bit for bit.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"

namespace {

using distlm::testing::Command;

std::vector<std::string> Argv(const std::string& out) {
  return {distlm::testing::Runfile("tools/launch"), "--nproc_per_node=2", "--",
          distlm::testing::Runfile("task3/reference"), "--max_steps=12", "--save_steps=2", "--num_threads=1",
          "--max_seq_length=32", "--per_gpu_train_batch_size=2", "--output_dir=" + out};
}

std::vector<double> Losses(const std::string& dir) {
  std::vector<double> out;
  std::ifstream in(dir + "/train_log.jsonl");
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  return out;
}

TEST(Task3ResumeTest, KilledAndResumedTwoRankRunIsBitForBitTheSame) {
  std::string whole = distlm::testing::MakeTempDir("task3_whole");
  auto r = distlm::testing::Run(Command{Argv(whole), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(Losses(whole).size(), 12u);

  std::string out = distlm::testing::MakeTempDir("task3_killed");
  std::string cmd;
  for (const auto& a : Argv(out)) cmd += a + " ";
  cmd += ">/dev/null 2>&1 & pid=$!; while [ \"$(cat " + out + "/train_log.jsonl 2>/dev/null | wc -l)\" -lt 7 ]; do "
         "kill -0 $pid 2>/dev/null || exit 3; sleep 0.01; done; kill -9 $pid; wait $pid; sleep 1; exit 0";
  auto k = distlm::testing::Run(Command{{"/bin/sh", "-c", cmd}, {}}, 180);
  ASSERT_EQ(k.exit_code, 0) << "finished before it could be killed: " << k.output;

  r = distlm::testing::Run(Command{Argv(out), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from"), std::string::npos) << r.output;
  EXPECT_EQ(Losses(out), Losses(whole));
  auto a = distlm::safetensors::LoadFile(whole + "/model.safetensors");
  auto b = distlm::safetensors::LoadFile(out + "/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << a[i].first;
}

}  // namespace
