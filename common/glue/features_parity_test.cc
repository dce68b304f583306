// Parity with the reference (pytorch_transformers 1.2.0 RteProcessor +
// convert_examples_to_features, max_seq_length 128): every RTE train+dev pair, read by our
// processor and converted by our code, gives the reference's guid, label_id, input_ids and
// segment_ids (stored without padding in reference/tokenizer/rte_*_max128.jsonl), and pads
// the rest correctly.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/glue/features.h"
#include "common/glue/processors.h"
#include "common/testing/subprocess.h"
#include "common/tokenizer/bert_tokenizer.h"

namespace distlm::glue {
namespace {

constexpr int kMaxSeqLength = 128;

std::string Show(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

void CheckAll(const std::string& reference, const std::string& jsonl, bool do_lower_case) {
  auto rte = MakeProcessor("rte");
  std::vector<InputExample> examples = rte->GetTrainExamples(reference + "/data/RTE");
  for (auto& ex : rte->GetDevExamples(reference + "/data/RTE")) examples.push_back(std::move(ex));
  auto tok = tokenizer::BertTokenizer::FromVocabFile(reference + "/vocab/bert-base-uncased-vocab.txt", do_lower_case);
  const auto features = ConvertExamplesToFeatures(examples, rte->GetLabels(), kMaxSeqLength, tok);

  std::ifstream in(reference + "/tokenizer/" + jsonl);
  ASSERT_TRUE(in.good()) << jsonl;
  std::string line;
  size_t row = 0, mismatched = 0, truncated = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ASSERT_LT(row, features.size()) << jsonl << " has more rows than RTE train+dev";
    const nlohmann::json ref = nlohmann::json::parse(line);
    const InputFeatures& f = features[row++];
    const auto ids = ref.at("input_ids").get<std::vector<int64_t>>();
    const auto segments = ref.at("segment_ids").get<std::vector<int64_t>>();
    const size_t n = ids.size();
    truncated += n == kMaxSeqLength;
    ASSERT_EQ(f.guid, ref.at("guid").get<std::string>()) << jsonl << " row " << row;
    EXPECT_EQ(f.label_id, ref.at("label_id").get<int64_t>()) << f.guid;
    const std::vector<int64_t> ours(f.input_ids.begin(), f.input_ids.begin() + std::min(n, f.input_ids.size()));
    const std::vector<int64_t> our_segments(f.segment_ids.begin(),
                                            f.segment_ids.begin() + std::min(n, f.segment_ids.size()));
    if (ours != ids || our_segments != segments) {
      if (mismatched++ < 3) {
        ADD_FAILURE() << jsonl << " " << f.guid << " differs:\n  reference ids: " << Show(ids)
                      << "\n  our ids:       " << Show(f.input_ids) << "\n  reference segments: " << Show(segments)
                      << "\n  our segments:       " << Show(f.segment_ids);
      }
      continue;
    }
    // The rest is padding, and the mask covers exactly the real tokens.
    ASSERT_EQ(f.input_ids.size(), static_cast<size_t>(kMaxSeqLength));
    for (size_t i = 0; i < static_cast<size_t>(kMaxSeqLength); ++i) {
      ASSERT_EQ(f.input_mask[i], i < n ? 1 : 0) << f.guid << " position " << i;
      if (i >= n) {
        ASSERT_EQ(f.input_ids[i], tok.pad_id()) << f.guid;
        ASSERT_EQ(f.segment_ids[i], 0) << f.guid;
      }
    }
  }
  EXPECT_EQ(row, features.size()) << jsonl << " has fewer rows than RTE train+dev";
  EXPECT_EQ(row, 2767u);
  EXPECT_EQ(mismatched, 0u);
  EXPECT_GT(truncated, 0u) << "no pair reached 128 tokens: the truncation path went unchecked";
  std::printf("%s: %zu pairs checked (%zu truncated to %d), %zu mismatched\n", jsonl.c_str(), row, truncated,
              kMaxSeqLength, mismatched);
}

TEST(FeaturesParityTest, UncasedMatchesReference) {
  SKIP_WITHOUT_REFERENCE(reference);
  CheckAll(reference, "rte_uncased_max128.jsonl", true);
}

TEST(FeaturesParityTest, CasedMatchesReference) {
  SKIP_WITHOUT_REFERENCE(reference);
  CheckAll(reference, "rte_cased_max128.jsonl", false);
}

}  // namespace
}  // namespace distlm::glue
