// Part 1 against transformers' own fine-tuning loop (tools/peers/hf_finetune.py, written by
// tools/peers/make_dumps.sh to $DISTLM_PEERS_DIR/finetune/tiny): the reference tiny BERT on the
// real RTE, the same data order, batches, torch.optim.AdamW (--optim=adamw_torch), linear
// schedule and clipping, dropout off. Every update's loss and learning rate must agree within
// 1e-4 relative; prints one OK / NOT OK line per update with the difference. Skips, saying
// so, without the transformers run or without ../shared/reference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"

namespace {

using nlohmann::json;

std::vector<json> ReadJsonLines(const std::string& path) {
  std::vector<json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) lines.push_back(json::parse(line));
  }
  return lines;
}

TEST(HfFinetuneParityTest, TwentyUpdatesMatchTransformersLossForLoss) {
  SKIP_WITHOUT_REFERENCE(ref);
  const auto peers = distlm::testing::PeersDir();
  const std::string hf_dir = peers ? *peers + "/finetune/tiny" : "";
  if (!peers || distlm::testing::ReadFileOrEmpty(hf_dir + "/args.json").empty()) {
    GTEST_SKIP() << "SKIPPED: no transformers fine-tuning run (tools/peers/make_dumps.sh writes "
                    "DISTLM_PEERS_DIR/finetune/tiny; it needs PyPI once); part 1 was not compared "
                    "with transformers' training loop";
  }
  const json args = json::parse(distlm::testing::ReadFileOrEmpty(hf_dir + "/args.json"));
  const std::vector<json> hf = ReadJsonLines(hf_dir + "/train_log.jsonl");
  ASSERT_EQ(args.at("dropout").get<std::string>(), "0") << "the transformers run had dropout on";
  ASSERT_EQ(static_cast<int64_t>(hf.size()), args.at("updates").get<int64_t>()) << hf_dir;

  const std::string out = distlm::testing::MakeTempDir("hf_finetune_parity");
  distlm::testing::Command c;
  c.argv = {distlm::testing::Runfile("part1/reference"),
            "--model_name_or_path=" + ref + "/bert_tiny_reference",
            "--data_dir=" + ref + "/data/RTE",
            "--do_lower_case=true",
            "--max_seq_length=" + std::to_string(args.at("max_seq_length").get<int>()),
            "--pad_to_max_length=false",
            "--per_gpu_train_batch_size=" + std::to_string(args.at("batch").get<int>()),
            "--learning_rate=" + json(args.at("lr").get<double>()).dump(),
            "--max_steps=" + std::to_string(args.at("max_steps").get<int>()),
            "--seed=" + std::to_string(args.at("seed").get<int>()),
            "--optim=adamw_torch",
            "--weight_decay=0",
            "--adam_epsilon=1e-8",
            "--max_grad_norm=1.0",
            "--warmup_steps=0",
            "--hidden_dropout_prob=0",
            "--attention_probs_dropout_prob=0",
            "--do_eval=false",
            "--plots=false",
            "--num_threads=1",
            "--output_dir=" + out};
  auto r = distlm::testing::Run(c, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<json> mine = ReadJsonLines(out + "/train_log.jsonl");
  ASSERT_EQ(mine.size(), hf.size()) << r.output;

  double worst = 0;
  for (size_t i = 0; i < hf.size(); ++i) {
    const double a = mine[i].at("loss").get<double>(), b = hf[i].at("loss").get<double>();
    const double rel = std::abs(a - b) / std::abs(b);
    const double lr_rel = std::abs(mine[i].at("lr").get<double>() - hf[i].at("lr").get<double>()) /
                          hf[i].at("lr").get<double>();
    worst = std::max(worst, rel);
    const bool ok = rel <= 1e-4 && lr_rel <= 1e-6;
    std::printf("%s update %2zu: loss %.7f, transformers %.7f, relative difference %.2e (lr %.3e)\n",
                ok ? "OK    " : "NOT OK", i + 1, a, b, rel, hf[i].at("lr").get<double>());
    EXPECT_LE(rel, 1e-4) << "update " << i + 1 << ": distlm " << a << ", transformers " << b;
    EXPECT_LE(lr_rel, 1e-6) << "update " << i + 1 << ": the learning rates differ";
  }
  std::printf("%zu updates against transformers %s: worst relative loss difference %.2e (bound 1e-4)\n",
              hf.size(), args.dump().c_str(), worst);
}

}  // namespace
