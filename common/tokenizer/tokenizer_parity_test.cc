// Parity with the reference tokenizer (pytorch_transformers 1.2.0 BertTokenizer): every
// sentence1 of RTE train+dev must give exactly the reference's word pieces (`tokens_a` in
// reference/tokenizer/rte_*_max128.jsonl, which are recorded before pair truncation).
//
// The TSV is split here by hand on purpose: this test must not depend on //common/glue, whose
// own parity test checks the whole feature conversion.
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"
#include "common/tokenizer/bert_tokenizer.h"

namespace distlm::tokenizer {
namespace {

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::vector<std::string> Fields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, '\t')) out.push_back(f);
  return out;
}

// guid ("train-12", "dev-3") -> sentence1, as the reference names RTE examples.
std::map<std::string, std::string> Sentence1ByGuid(const std::string& reference) {
  std::map<std::string, std::string> out;
  for (const char* split : {"train", "dev"}) {
    std::vector<std::string> lines = Lines(reference + "/data/RTE/" + split + ".tsv");
    for (size_t i = 1; i < lines.size(); ++i) {
      std::vector<std::string> f = Fields(lines[i]);
      if (f.size() < 2) continue;
      out[std::string(split) + "-" + f[0]] = f[1];
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& t : v) s += (s.empty() ? "" : " ") + t;
  return s;
}

void CheckAll(const std::string& reference, const std::string& jsonl, bool do_lower_case) {
  const auto sentence1 = Sentence1ByGuid(reference);
  ASSERT_EQ(sentence1.size(), 2490u + 277u);
  BertTokenizer tok = BertTokenizer::FromVocabFile(reference + "/vocab/bert-base-uncased-vocab.txt", do_lower_case);
  size_t checked = 0, mismatched = 0;
  for (const std::string& line : Lines(reference + "/tokenizer/" + jsonl)) {
    if (line.empty()) continue;
    nlohmann::json row = nlohmann::json::parse(line);
    const std::string guid = row.at("guid");
    auto it = sentence1.find(guid);
    ASSERT_NE(it, sentence1.end()) << jsonl << ": guid " << guid << " is not in the RTE TSVs";
    const auto expected = row.at("tokens_a").get<std::vector<std::string>>();
    const auto actual = tok.Tokenize(it->second);
    ++checked;
    if (actual != expected && mismatched++ < 3) {
      ADD_FAILURE() << jsonl << " " << guid << ": sentence1 = \"" << it->second << "\"\n  expected: " << Join(expected)
                    << "\n  actual:   " << Join(actual);
    }
  }
  EXPECT_EQ(mismatched, 0u) << "of " << checked;
  EXPECT_EQ(checked, 2767u);
  std::printf("%s: %zu sentences checked, %zu mismatched\n", jsonl.c_str(), checked, mismatched);
}

TEST(TokenizerParityTest, UncasedTokensMatchReference) {
  SKIP_WITHOUT_REFERENCE(reference);
  CheckAll(reference, "rte_uncased_max128.jsonl", true);
}

TEST(TokenizerParityTest, CasedTokensMatchReference) {
  SKIP_WITHOUT_REFERENCE(reference);
  CheckAll(reference, "rte_cased_max128.jsonl", false);
}

}  // namespace
}  // namespace distlm::tokenizer
