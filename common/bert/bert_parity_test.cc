// Parity with the HuggingFace reference: the tiny checkpoint in ../shared/reference gives the
// logits, loss, pooled output and gradient norms that pytorch_transformers 1.2 computed on it.
#include <cmath>
#include <cstdio>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include "common/bert/checkpoint.h"
#include "common/runtime/atomic_file.h"
#include "common/testing/subprocess.h"

namespace distlm::bert {
namespace {

using nlohmann::json;

torch::Tensor ToLongTensor(const json& rows) {
  std::vector<int64_t> flat;
  for (const auto& row : rows) {
    for (const auto& v : row) flat.push_back(v.get<int64_t>());
  }
  return torch::tensor(flat, torch::kLong).view({static_cast<int64_t>(rows.size()), -1});
}

torch::Tensor ToFloatTensor(const json& rows) {
  std::vector<double> flat;
  for (const auto& row : rows) {
    for (const auto& v : row) flat.push_back(v.get<double>());
  }
  return torch::tensor(flat, torch::kDouble).view({static_cast<int64_t>(rows.size()), -1});
}

struct Batch {
  torch::Tensor input_ids, segment_ids, input_mask, labels;
};

Batch ExpectedBatch(const json& expected) {
  const json& f = expected["features"];
  Batch b;
  b.input_ids = ToLongTensor(f["input_ids"]);
  b.segment_ids = ToLongTensor(f["segment_ids"]);
  b.input_mask = ToLongTensor(f["input_mask"]);
  b.labels = torch::tensor(f["label_ids"].get<std::vector<int64_t>>(), torch::kLong);
  return b;
}

class BertParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = distlm::testing::SharedReferenceDir();
    if (!dir) GTEST_SKIP() << "SKIPPED: ../shared/reference is absent; BERT parity did not run";
    model_dir_ = *dir + "/bert_tiny_reference";
    expected_ = json::parse(ReadFile(model_dir_ + "/expected.json"));
    torch::manual_seed(0);
  }
  std::string model_dir_;
  json expected_;
};

TEST_F(BertParityTest, EvalLogitsLossAndPooledOutputMatch) {
  auto loaded = LoadPretrained(model_dir_, -1, /*log=*/false);
  EXPECT_TRUE(loaded.report.unused.empty());
  EXPECT_TRUE(loaded.report.newly_initialized.empty());
  auto model = loaded.model;
  model->eval();
  Batch b = ExpectedBatch(expected_);
  torch::NoGradGuard no_grad;
  auto out = model(b.input_ids, b.segment_ids, b.input_mask, b.labels);

  auto want_logits = ToFloatTensor(expected_["eval"]["logits"]);
  double logits_err = (out.logits.to(torch::kDouble) - want_logits).abs().max().item<double>();
  double loss_err = std::abs(out.loss.item<double>() - expected_["eval"]["loss"].get<double>());
  auto want_pooled = ToFloatTensor(expected_["eval"]["pooled_output_first4"]);
  double pooled_err =
      (out.pooled_output.narrow(1, 0, 4).to(torch::kDouble) - want_pooled).abs().max().item<double>();
  auto want_cls = ToFloatTensor(expected_["eval"]["sequence_output_cls_first4"]);
  double cls_err = (out.sequence_output.select(1, 0).narrow(1, 0, 4).to(torch::kDouble) - want_cls)
                       .abs().max().item<double>();
  std::printf("worst |logit diff| %.3g, |loss diff| %.3g, |pooled diff| %.3g, |[CLS] diff| %.3g\n",
              logits_err, loss_err, pooled_err, cls_err);
  EXPECT_LT(logits_err, 1e-5);
  EXPECT_LT(loss_err, 1e-6);
  EXPECT_LT(pooled_err, 1e-5);
  EXPECT_LT(cls_err, 1e-5);
}

TEST_F(BertParityTest, GradientNormsAfterOneBackwardMatch) {
  auto model = LoadPretrained(model_dir_, -1, /*log=*/false).model;
  model->train();  // dropout is 0 in this config, so train and eval agree
  Batch b = ExpectedBatch(expected_);
  model(b.input_ids, b.segment_ids, b.input_mask, b.labels).loss.backward();
  const json& want = expected_["grad_l2_norms_one_backward"];
  auto params = model->named_parameters();
  ASSERT_EQ(want.size(), params.size());
  double worst_rel = 0;
  std::string worst_name;
  for (const auto& [name, value] : want.items()) {
    const torch::Tensor* p = params.find(name);
    ASSERT_NE(p, nullptr) << name;
    ASSERT_TRUE(p->grad().defined()) << name;
    double got = p->grad().to(torch::kDouble).norm().item<double>();
    double ref = value.get<double>();
    // The key biases' gradients are zero in exact arithmetic (softmax ignores a per-row
    // constant), so the reference holds float noise (~1e-12) there: compare those absolutely.
    double tol = 1e-4 * std::abs(ref) + 1e-9;
    EXPECT_LE(std::abs(got - ref), tol) << name << ": got " << got << ", reference " << ref;
    if (std::abs(ref) > 1e-9) {
      double rel = std::abs(got - ref) / std::abs(ref);
      if (rel > worst_rel) worst_rel = rel, worst_name = name;
    }
  }
  std::printf("worst relative gradient-norm difference %.3g (%s)\n", worst_rel, worst_name.c_str());
}

TEST_F(BertParityTest, PretrainingLayoutLoadsWithTheRightReport) {
  auto full = LoadPretrained(model_dir_, -1, false);
  auto old = LoadPretrained(model_dir_ + "/pretraining_layout", -1, false);
  EXPECT_EQ(old.report.unused.size(), 7u);
  for (const auto& name : old.report.unused) EXPECT_EQ(name.rfind("cls.", 0), 0u) << name;
  EXPECT_EQ(old.report.newly_initialized,
            (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
  EXPECT_FALSE(old.report.renamed.empty());  // gamma/beta -> weight/bias
  auto lines = DescribeLoadReport(old.report, "model.safetensors");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("unused tensors in model.safetensors (7): cls.", 0), 0u) << lines[0];
  EXPECT_EQ(lines[1], "newly initialised parameters (2): classifier.weight, classifier.bias");

  full.model->eval();
  old.model->eval();
  Batch b = ExpectedBatch(expected_);
  torch::NoGradGuard no_grad;
  auto a = full.model(b.input_ids, b.segment_ids, b.input_mask).pooled_output;
  auto c = old.model(b.input_ids, b.segment_ids, b.input_mask).pooled_output;
  EXPECT_TRUE(torch::equal(a, c));
}

TEST_F(BertParityTest, SaveThenLoadGivesIdenticalTensors) {
  auto loaded = LoadPretrained(model_dir_, -1, false);
  std::string out = distlm::testing::MakeTempDir("saved_model");
  SavePretrained(out, loaded.model, loaded.vocab_path);
  auto again = LoadPretrained(out, -1, false);
  EXPECT_TRUE(again.report.newly_initialized.empty());
  auto a = loaded.model->named_parameters();
  for (const auto& p : again.model->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), *a.find(p.key()))) << p.key();
  }
  EXPECT_EQ(ReadFile(out + "/vocab.txt"), ReadFile(loaded.vocab_path));
}

}  // namespace
}  // namespace distlm::bert
