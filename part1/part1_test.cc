// Part 1 end to end: the reference binary against the HuggingFace trace, determinism, the
// student stubs, bad flags, and dynamic padding.
#include <cmath>
#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "common/bert/checkpoint.h"
#include "common/runtime/atomic_file.h"
#include "common/testing/subprocess.h"

namespace {

using distlm::testing::Command;
using distlm::testing::ProcessResult;
using nlohmann::json;

ProcessResult RunStage(const std::string& binary, std::vector<std::string> args, double timeout_s = 120) {
  Command c;
  c.argv = {distlm::testing::Runfile("part1/" + binary)};
  for (auto& a : args) c.argv.push_back(a);
  c.env["LOCAL_WORLD_SIZE"] = "1";
  return distlm::testing::Run(c, timeout_s);
}

std::vector<json> ReadLog(const std::string& dir) {
  std::vector<json> lines;
  std::ifstream in(dir + "/train_log.jsonl");
  std::string line;
  while (std::getline(in, line)) lines.push_back(json::parse(line));
  return lines;
}

// The flags of the reference's 10-step run (../shared/reference/README.md).
std::vector<std::string> ReferenceRunFlags(const std::string& ref, const std::string& out) {
  return {"--model_name_or_path=" + ref + "/bert_tiny_reference",
          "--data_dir=" + ref + "/bert_tiny_reference/data",
          "--task_name=rte",
          "--output_dir=" + out,
          "--per_gpu_train_batch_size=8",
          "--learning_rate=1e-3",
          "--max_steps=10",
          "--warmup_steps=0",
          "--weight_decay=0",
          "--max_grad_norm=1.0",
          "--max_seq_length=128",
          "--do_lower_case=true",
          "--num_threads=1"};
}

TEST(Part1Test, ReferenceMatchesTheHuggingFaceTrace) {
  SKIP_WITHOUT_REFERENCE(ref);
  std::string out = distlm::testing::MakeTempDir("part1_trace");
  auto r = RunStage("reference", ReferenceRunFlags(ref, out));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json expected = json::parse(distlm::ReadFile(ref + "/bert_tiny_reference/expected.json"));
  auto want = expected["train"]["loss_per_step"].get<std::vector<double>>();
  auto want_lr = expected["train"]["lr_per_step"].get<std::vector<double>>();
  auto log = ReadLog(out);
  ASSERT_EQ(log.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    double got = log[i]["loss"].get<double>();
    double rel = std::abs(got - want[i]) / std::abs(want[i]);
    worst = std::max(worst, rel);
    EXPECT_LT(rel, 1e-4) << "step " << i + 1 << ": loss " << got << ", reference " << want[i];
    EXPECT_NEAR(log[i]["lr"].get<double>(), want_lr[i], 1e-12) << "step " << i + 1;
    EXPECT_EQ(log[i]["step"].get<int>(), static_cast<int>(i + 1));
  }
  // The saved model's eval logits against the reference's after the last update.
  auto model = distlm::bert::LoadPretrained(out, -1, false).model;
  model->eval();
  const json& f = expected["features"];
  auto rows = [](const json& j) {
    std::vector<int64_t> flat;
    for (const auto& row : j) for (const auto& v : row) flat.push_back(v.get<int64_t>());
    return torch::tensor(flat, torch::kLong).view({static_cast<int64_t>(j.size()), -1});
  };
  torch::NoGradGuard no_grad;
  auto logits = model(rows(f["input_ids"]), rows(f["segment_ids"]), rows(f["input_mask"])).logits;
  double worst_logit = 0;
  const json& want_logits = expected["train"]["final_eval_logits"];
  for (size_t i = 0; i < want_logits.size(); ++i) {
    for (size_t j = 0; j < 2; ++j) {
      worst_logit = std::max(worst_logit, std::abs(logits[i][j].item<double>() - want_logits[i][j].get<double>()));
    }
  }
  std::printf("worst relative loss difference over 10 steps: %.3g; worst final logit difference: %.3g\n", worst,
              worst_logit);
  EXPECT_LT(worst_logit, 1e-4);
  EXPECT_NE(r.output.find("minibatch 1 loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mean iteration time over iterations 2..10"), std::string::npos) << r.output;
  for (const char* file : {"eval_results.json", "training_args.json", "config.json", "model.safetensors", "vocab.txt"}) {
    EXPECT_TRUE(distlm::PathExists(out + "/" + file)) << file;
  }
  json evals = json::parse(distlm::ReadFile(out + "/eval_results.json"));
  EXPECT_EQ(evals.size(), 10u);  // one epoch per update here: 8 rows, batch 8
  EXPECT_EQ(evals[0]["examples"].get<int>(), 8);
}

std::vector<std::string> SmallRun(const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> flags = {"--output_dir=" + out, "--max_steps=4", "--num_threads=1",
                                    "--per_gpu_train_batch_size=8", "--max_seq_length=64", "--learning_rate=1e-4"};
  flags.insert(flags.end(), extra.begin(), extra.end());
  return flags;
}

TEST(Part1Test, SameSeedSameTraceBitForBit) {
  std::string a = distlm::testing::MakeTempDir("det_a"), b = distlm::testing::MakeTempDir("det_b");
  auto ra = RunStage("reference", SmallRun(a));
  auto rb = RunStage("reference", SmallRun(b));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  auto la = ReadLog(a), lb = ReadLog(b);
  ASSERT_EQ(la.size(), 4u);
  ASSERT_EQ(lb.size(), 4u);
  for (size_t i = 0; i < la.size(); ++i) {
    EXPECT_EQ(la[i]["loss"].get<double>(), lb[i]["loss"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(la[i]["grad_norm"].get<double>(), lb[i]["grad_norm"].get<double>()) << "step " << i + 1;
  }
  // A different seed gives a different trace (so the check above can fail).
  std::string c = distlm::testing::MakeTempDir("det_c");
  ASSERT_EQ(RunStage("reference", SmallRun(c, {"--seed=7"})).exit_code, 0);
  EXPECT_NE(ReadLog(c)[0]["loss"].get<double>(), la[0]["loss"].get<double>());
}

TEST(Part1Test, DynamicPaddingGivesTheSameResults) {
  std::string a = distlm::testing::MakeTempDir("pad_full"), b = distlm::testing::MakeTempDir("pad_dyn");
  auto ra = RunStage("reference", SmallRun(a, {"--hidden_dropout_prob=0", "--attention_probs_dropout_prob=0"}));
  auto rb = RunStage("reference", SmallRun(b, {"--hidden_dropout_prob=0", "--attention_probs_dropout_prob=0",
                                               "--pad_to_max_length=false"}));
  ASSERT_EQ(ra.exit_code, 0) << ra.output;
  ASSERT_EQ(rb.exit_code, 0) << rb.output;
  auto la = ReadLog(a), lb = ReadLog(b);
  ASSERT_EQ(la.size(), lb.size());
  for (size_t i = 0; i < la.size(); ++i) {
    double x = la[i]["loss"].get<double>(), y = lb[i]["loss"].get<double>();
    EXPECT_LT(std::abs(x - y) / std::abs(x), 1e-5) << "step " << i + 1;
  }
  json ea = json::parse(distlm::ReadFile(a + "/eval_results.json"));
  json eb = json::parse(distlm::ReadFile(b + "/eval_results.json"));
  EXPECT_NEAR(ea.back()["loss"].get<double>(), eb.back()["loss"].get<double>(), 1e-5);
}

TEST(Part1Test, StudentStubsFailNamingTheHandout) {
  std::string out = distlm::testing::MakeTempDir("student");
  auto r = RunStage("student", SmallRun(out));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("error: TODO(student): part1 Backward is not implemented yet; see docs/handout/part1.md"),
            std::string::npos)
      << r.output;
}

TEST(Part1Test, BadFlagsAreOneLineErrors) {
  std::string used = distlm::testing::MakeTempDir("used");
  distlm::WriteFileAtomically(used + "/something.txt", "x");
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--per_gpu_train_batch_size=0"}, "error: --per_gpu_train_batch_size must be >= 1, got 0"},
      {{"--learning_rate=0"}, "error: --learning_rate must be > 0, got 0"},
      {{"--learning_rate=-1"}, "error: --learning_rate must be > 0, got -1"},
      {{"--data_dir=/no/such/dir"}, "error: --data_dir=/no/such/dir: no such directory"},
      {{"--task_name=nope"}, "error: unknown task 'nope'"},
      {{"--max_seq_length=2"}, "error: --max_seq_length must be >= 3"},
      {{"--output_dir=" + used}, "error: --output_dir=" + used + " exists and is not empty; pass --overwrite_output_dir"},
      {{"--model_name_or_path=/no/model"}, "error: /no/model: model directory not found (--model_name_or_path)"},
      {{"--learning_rate=abc"}, "Illegal value 'abc' specified for flag 'learning_rate'"},
      {{"--device=gpu"}, "error: --device=gpu is not a device: use cpu, cuda (cuda:LOCAL_RANK) or cuda:N"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> flags = c.flags;
    if (c.flags[0].rfind("--output_dir", 0) != 0) flags.push_back("--output_dir=" + distlm::testing::MakeTempDir("bad"));
    auto r = RunStage("reference", flags, 60);
    EXPECT_NE(r.exit_code, 0) << c.flags[0];
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.flags[0] << ":\n" << r.output;
    // One line: the error is the whole output (no backtrace).
    size_t lines = std::count(r.output.begin(), r.output.end(), '\n');
    EXPECT_LE(lines, 2u) << r.output;
  }
}

TEST(Part1Test, DeviceCudaWithoutAGpuIsOneLineAndExitTwo) {
  // The CPU build refuses with "a CPU-only build", the CUDA build (LibTorch 2.x wheel) on a
  // machine without a GPU with "no CUDA GPU is visible"; on a GPU it trains.
  auto r = RunStage("reference", {"--device=cuda", "--max_steps=1", "--do_eval=false",
                                  "--output_dir=" + distlm::testing::MakeTempDir("cuda")}, 120);
  if (r.exit_code == 0) {
    std::printf("a GPU is present: --device=cuda trained\n");
    return;
  }
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("error: --device=cuda: "), std::string::npos) << r.output;
  const bool cpu_build = r.output.find("is a CPU-only build") != std::string::npos;
  const bool no_gpu = r.output.find("no CUDA GPU is visible") != std::string::npos;
  EXPECT_TRUE(cpu_build || no_gpu) << r.output;
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 2) << r.output;
}

}  // namespace
