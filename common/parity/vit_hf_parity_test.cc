// distlm's ViT against transformers' (tools/peers/hf_vit_dump.py, written by
// tools/peers/make_dumps.sh to $DISTLM_PEERS_DIR/vit/tiny): the logits and loss of one batch,
// every parameter's gradient, and the losses of 12 updates of torch.optim.AdamW with clipping
// and a linear schedule. One OK / NOT OK line per tensor with the worst difference, as llm.c's
// test_gpt2 prints them. Skips, saying so, without the dump.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/train/bert_adamw.h"
#include "common/vit/vit_checkpoint.h"

namespace distlm::vit {
namespace {

// |a - b| <= atol + rtol * |b|, elementwise; prints the line and returns whether it held.
bool Check(const std::string& what, const torch::Tensor& mine, const torch::Tensor& ref, double atol, double rtol) {
  if (!mine.sizes().equals(ref.sizes())) {
    std::printf("NOT OK %-58s shape %s, transformers %s\n", what.c_str(), c10::str(mine.sizes()).c_str(),
                c10::str(ref.sizes()).c_str());
    return false;
  }
  torch::Tensor a = mine.detach().to(torch::kDouble), b = ref.to(torch::kDouble);
  const double worst = (a - b).abs().max().item<double>();
  const bool ok = ((a - b).abs() <= atol + rtol * b.abs()).all().item<bool>();
  std::printf("%s %-58s worst |diff| %.2e (max |ref| %.2e)\n", ok ? "OK    " : "NOT OK", what.c_str(), worst,
              b.abs().max().item<double>());
  return ok;
}

TEST(ViTHfParityTest, LogitsGradientsAndTwelveUpdates) {
  const auto peers = distlm::testing::PeersDir();
  const std::string dir = peers ? *peers + "/vit/tiny" : "";
  if (!peers || distlm::testing::ReadFileOrEmpty(dir + "/meta.json").empty()) {
    GTEST_SKIP() << "SKIPPED: no transformers ViT dump (tools/peers/make_dumps.sh writes "
                    "DISTLM_PEERS_DIR/vit/tiny; it needs PyPI once); ViT parity did not run";
  }
  std::map<std::string, torch::Tensor> dump;
  for (auto& [name, t] : safetensors::LoadFile(dir + "/dump.safetensors", /*to_float32=*/false)) dump[name] = t;
  std::printf("transformers: %s\n", distlm::testing::ReadFileOrEmpty(dir + "/meta.json").c_str());

  PretrainedViT loaded = LoadPretrainedViT(dir + "/model");
  EXPECT_TRUE(loaded.report.unused.empty() && loaded.report.newly_initialized.empty() &&
              loaded.report.replaced_head.empty())
      << "the checkpoint did not map one to one onto the model";
  ViTForImageClassification model = loaded.model;
  model->train();  // no dropout in this config: train and eval agree
  const torch::Tensor pixels = dump.at("batches.pixel_values"), labels = dump.at("batches.labels").to(torch::kLong);

  int failures = 0;
  ViTOutputs out = model(pixels[0], labels[0]);
  failures += !Check("logits", out.logits, dump.at("logits"), 1e-5, 1e-4);
  failures += !Check("loss", out.loss.reshape({1}), dump.at("loss"), 1e-6, 1e-5);
  out.loss.backward();
  int grads = 0;
  for (const auto& p : model->named_parameters()) {
    auto it = dump.find("grad." + p.key());
    ASSERT_NE(it, dump.end()) << "no gradient of " << p.key() << " in the dump";
    ASSERT_TRUE(p.value().grad().defined()) << p.key() << " got no gradient";
    failures += !Check("grad " + p.key(), p.value().grad(), it->second, 1e-6, 1e-4);
    ++grads;
  }
  EXPECT_EQ(grads, static_cast<int>(model->named_parameters().size()));

  // 12 updates from the checkpoint's weights again: torch.optim.AdamW, clip 1.0, lr linear to 0.
  ViTForImageClassification fresh = LoadPretrainedViT(dir + "/model", -1, /*log=*/false).model;
  fresh->train();
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<torch::Tensor> params;
  for (const auto& p : fresh->named_parameters()) {
    named.emplace_back(p.key(), p.value());
    params.push_back(p.value());
  }
  train::AdamWOptions options;
  options.lr = 1e-3;
  options.eps = 1e-8;
  options.torch_semantics = true;
  train::BertAdamW opt(named, options);
  const torch::Tensor trace = dump.at("trace.loss");
  const int64_t steps = trace.size(0);
  std::vector<double> losses;
  for (int64_t i = 0; i < steps; ++i) {
    opt.set_lr(1e-3 * static_cast<double>(steps - i) / static_cast<double>(steps));
    torch::Tensor loss = fresh(pixels[i], labels[i]).loss;
    loss.backward();
    train::ClipGradNorm(params, 1.0);
    opt.Step();
    opt.ZeroGrad();
    losses.push_back(loss.item<double>());
  }
  failures += !Check("trace: 12 updates' losses", torch::tensor(losses, torch::kDouble), trace, 1e-6, 1e-5);
  std::printf("== %d NOT OK\n", failures);
  EXPECT_EQ(failures, 0);
}

}  // namespace
}  // namespace distlm::vit
