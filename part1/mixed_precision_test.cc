// --bf16 and --fp16 through the whole program (part 1's reference): the start-up line says what
// runs, bad combinations are one-line errors, and --fp16's loss scaler skips an update whose
// gradients overflowed (DISTLM_FAULT_INF_GRAD makes one): that update logs skipped with a null
// gradient norm, the weights do not move (its snapshot equals the one before, bit for bit), and
// the next update runs with half the scale. --fp16 on CPU needs LibTorch 2.4+'s CPU autocast:
// on 1.13 that part says SKIPPED and the 2.11 line of CI runs it.
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/version.h>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"

namespace {

using distlm::testing::Command;
using distlm::testing::ProcessResult;

const std::vector<std::string> kFlags = {"--max_steps=3", "--num_threads=1", "--max_seq_length=32",
                                         "--per_gpu_train_batch_size=8", "--do_eval=false", "--plots=false",
                                         "--hidden_dropout_prob=0", "--attention_probs_dropout_prob=0"};

ProcessResult RunPart1(const std::string& out, std::vector<std::string> extra, std::map<std::string, std::string> env = {}) {
  Command c;
  c.argv = {distlm::testing::Runfile("part1/reference")};
  c.argv.insert(c.argv.end(), kFlags.begin(), kFlags.end());
  c.argv.insert(c.argv.end(), extra.begin(), extra.end());
  c.argv.push_back("--output_dir=" + out);
  c.env = std::move(env);
  return distlm::testing::Run(c, 120);
}

std::vector<nlohmann::json> LogLines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(out + "/train_log.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST(MixedPrecisionTest, BothFlagsAreOneLineError) {
  ProcessResult r = RunPart1(distlm::testing::MakeTempDir("both"), {"--bf16", "--fp16"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--bf16 and --fp16 both given"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("terminate"), std::string::npos) << "a crash, not an error line:\n" << r.output;
}

TEST(MixedPrecisionTest, Bf16SaysSoAndKeepsFloat32Weights) {
  const std::string out = distlm::testing::MakeTempDir("bf16");
  ProcessResult r = RunPart1(out, {"--bf16"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("mixed precision bf16: forward passes under autocast; weights, gradients and optimizer "
                          "in float32"),
            std::string::npos)
      << r.output;
  for (const auto& [name, t] : distlm::safetensors::LoadFile(out + "/model.safetensors")) {
    EXPECT_EQ(t.scalar_type(), torch::kFloat) << name << " was saved in " << t.scalar_type();
  }
  for (const auto& line : LogLines(out)) EXPECT_FALSE(line.contains("loss_scale")) << "bf16 needs no loss scale";
}

TEST(MixedPrecisionTest, Fp16SkipsAnOverflowedUpdateAndHalvesTheScale) {
#if TORCH_VERSION_MAJOR == 1
  ProcessResult refused = RunPart1(distlm::testing::MakeTempDir("fp16"), {"--fp16"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.output.find("--fp16 needs --device=cuda"), std::string::npos) << refused.output;
  GTEST_SKIP() << "SKIPPED: LibTorch " << TORCH_VERSION
               << "'s CPU autocast has no float16, so the loss scaler's skip was NOT run here (the 2.11 line runs it)";
#endif
  const std::string out = distlm::testing::MakeTempDir("fp16");
  ProcessResult r = RunPart1(out, {"--fp16", "--save_steps=1"}, {{"DISTLM_FAULT_INF_GRAD", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dynamic loss scaling from 65536"), std::string::npos) << r.output;
  const auto lines = LogLines(out);
  ASSERT_EQ(lines.size(), 3u);
  for (int i : {0, 1}) {
    EXPECT_EQ(lines[i]["loss_scale"], 65536.0) << lines[i].dump();
    EXPECT_EQ(lines[i]["skipped"], false) << lines[i].dump();
    EXPECT_TRUE(lines[i]["grad_norm"].is_number()) << lines[i].dump();
  }
  EXPECT_EQ(lines[2]["loss_scale"], 65536.0) << "the scale the overflowed update used: " << lines[2].dump();
  EXPECT_EQ(lines[2]["skipped"], true) << lines[2].dump();
  EXPECT_TRUE(lines[2]["grad_norm"].is_null()) << lines[2].dump();

  // Snapshots after updates 2 and 3 (the newest two): the skipped update moved nothing.
  auto two = distlm::safetensors::LoadFile(out + "/snapshots/snapshot-2.safetensors");
  auto three = distlm::safetensors::LoadFile(out + "/snapshots/snapshot-3.safetensors");
  ASSERT_EQ(two.size(), three.size());
  int compared = 0;
  for (size_t i = 0; i < two.size(); ++i) {
    if (two[i].first.rfind("rng/", 0) == 0) continue;  // the data order moved on
    EXPECT_TRUE(torch::equal(two[i].second, three[i].second)) << two[i].first << " changed in the skipped update";
    ++compared;
  }
  EXPECT_GT(compared, 10);

  // Without the fault: no skip, and the losses of a rounded float32 run.
  const std::string clean = distlm::testing::MakeTempDir("fp16_clean");
  const std::string fp32 = distlm::testing::MakeTempDir("fp32");
  ASSERT_EQ(RunPart1(clean, {"--fp16"}).exit_code, 0);
  ASSERT_EQ(RunPart1(fp32, {}).exit_code, 0);
  const auto a = distlm::testing::LoggedLosses(clean), b = distlm::testing::LoggedLosses(fp32);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LT(std::abs(a[i] - b[i]) / b[i], 1e-2) << "update " << i + 1 << ": fp16 " << a[i] << ", fp32 " << b[i];
    EXPECT_NE(a[i], b[i]) << "update " << i + 1 << ": fp16 gave float32's loss exactly: autocast did not act";
  }
  for (const auto& line : LogLines(clean)) EXPECT_EQ(line["skipped"], false) << line.dump();
}

}  // namespace
