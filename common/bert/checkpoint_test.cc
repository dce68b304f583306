// Checkpoints the project writes itself: round trip, pre-training names, and bad input.
#include "common/bert/checkpoint.h"

#include <gtest/gtest.h>
#include <torch/utils.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/user_error.h"

namespace distlm::bert {
namespace {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

BertConfig Small() {
  BertConfig c;
  c.vocab_size = 30;
  c.hidden_size = 8;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.intermediate_size = 16;
  c.max_position_embeddings = 16;
  return c;
}

// A model directory with the given tensors and config.
std::string WriteModelDir(const BertConfig& c, const Named& tensors, int vocab_lines = 30) {
  std::string dir = distlm::testing::MakeTempDir("model");
  WriteFileAtomically(dir + "/config.json", c.ToJson());
  std::string vocab;
  for (int i = 0; i < vocab_lines; ++i) vocab += "tok" + std::to_string(i) + "\n";
  WriteFileAtomically(dir + "/vocab.txt", vocab);
  safetensors::SaveFile(dir + "/model.safetensors", tensors);
  return dir;
}

Named StateOf(BertForSequenceClassification& m) {
  Named out;
  for (const auto& p : m->named_parameters()) out.emplace_back(p.key(), p.value().detach().clone());
  return out;
}

TEST(CheckpointTest, RoundTripAndPretrainingNames) {
  torch::manual_seed(7);
  BertForSequenceClassification m(Small());
  std::string dir = WriteModelDir(Small(), StateOf(m));
  auto loaded = LoadPretrained(dir, -1, false);
  for (const auto& p : loaded.model->named_parameters()) {
    EXPECT_TRUE(torch::equal(p.value(), *m->named_parameters().find(p.key()))) << p.key();
  }

  // Old names: no "bert." prefix, gamma/beta, an extra cls head, no classifier; F16 storage.
  Named old;
  for (auto& [name, t] : StateOf(m)) {
    if (name.rfind("classifier.", 0) == 0) continue;
    std::string n = name.substr(5);  // drop "bert."
    if (n.size() > 16 && n.compare(n.size() - 16, 16, "LayerNorm.weight") == 0) n = n.substr(0, n.size() - 6) + "gamma";
    if (n.size() > 14 && n.compare(n.size() - 14, 14, "LayerNorm.bias") == 0) n = n.substr(0, n.size() - 4) + "beta";
    old.emplace_back(n, t.to(torch::kHalf));
  }
  old.emplace_back("cls.predictions.bias", torch::zeros({30}));
  auto report = LoadPretrained(WriteModelDir(Small(), old), -1, false).report;
  EXPECT_EQ(report.unused, std::vector<std::string>{"cls.predictions.bias"});
  EXPECT_EQ(report.newly_initialized, (std::vector<std::string>{"classifier.weight", "classifier.bias"}));
}

TEST(CheckpointTest, BadInputIsOneLineNamingWhat) {
  torch::manual_seed(8);
  BertForSequenceClassification m(Small());
  Named good = StateOf(m);

  std::string missing = distlm::testing::MakeTempDir("empty");
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadPretrained(missing, -1, false); }),
            missing + "/config.json: file not found (a model directory holds config.json, "
                      "model.safetensors and vocab.txt)");
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadPretrained("/no/such/dir", -1, false); }),
            "/no/such/dir: model directory not found");

  Named wrong_shape = good;
  for (auto& [n, t] : wrong_shape) {
    if (n == "bert.pooler.dense.weight") t = torch::zeros({8, 4});
  }
  std::string dir = WriteModelDir(Small(), wrong_shape);
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadPretrained(dir, -1, false); }),
            dir + "/model.safetensors: tensor 'bert.pooler.dense.weight' has shape [8, 4], the model "
                  "expects [8, 8] (from config.json)");

  Named wrong_vocab = good;
  for (auto& [n, t] : wrong_vocab) {
    if (n == "bert.embeddings.word_embeddings.weight") t = torch::zeros({40, 8});
  }
  dir = WriteModelDir(Small(), wrong_vocab);
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadPretrained(dir, -1, false); }),
            dir + "/model.safetensors: tensor 'bert.embeddings.word_embeddings.weight' has 40 rows "
                  "but config.json says vocab_size 30");

  dir = WriteModelDir(Small(), good, /*vocab_lines=*/31);
  EXPECT_EQ(::distlm::testing::UserErrorOf([&] { LoadPretrained(dir, -1, false); }),
            dir + "/vocab.txt: has 31 tokens but config.json says vocab_size 30");

  dir = WriteModelDir(Small(), {{"something.else", torch::zeros({2})}});
  EXPECT_NE(::distlm::testing::UserErrorOf([&] { LoadPretrained(dir, -1, false); }).find("none of its 1 tensors is a BERT parameter"),
            std::string::npos);
}

TEST(CheckpointTest, SavedDirectoryLoadsAndHasTheLayout) {
  torch::manual_seed(9);
  BertForSequenceClassification m(Small());
  std::string src = WriteModelDir(Small(), StateOf(m));
  std::string out = distlm::testing::MakeTempDir("out") + "/nested/model";
  SavePretrained(out, m, src + "/vocab.txt");
  for (const char* f : {"config.json", "model.safetensors", "vocab.txt"}) {
    EXPECT_TRUE(PathExists(out + "/" + f)) << f;
  }
  EXPECT_EQ(ParseBertConfig(ReadFile(out + "/config.json"), "x").ToJson(), Small().ToJson());
  auto tensors = safetensors::LoadFile(out + "/model.safetensors");
  EXPECT_EQ(tensors.size(), m->named_parameters().size());
}

}  // namespace
}  // namespace distlm::bert
