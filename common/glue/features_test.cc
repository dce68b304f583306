// Expected features are written out by hand from the rules in features.h.
#include "common/glue/features.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/runtime/errors.h"
#include "common/tokenizer/bert_tokenizer.h"

namespace distlm::glue {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Ids = std::vector<int64_t>;
using Tokens = std::vector<std::string>;

// [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4 a=5 b=6 c=7 d=8 e=9 x=10
const tokenizer::BertTokenizer& Tok() {
  static const tokenizer::BertTokenizer t(
      tokenizer::Vocab::FromTokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "d", "e", "x"}), true);
  return t;
}

const std::vector<std::string> kLabels = {"entailment", "not_entailment"};

InputFeatures One(const std::string& a, const std::string& b, int max_len, std::optional<std::string> label = "entailment",
                  const tokenizer::BertTokenizer& tok = Tok()) {
  auto f = ConvertExamplesToFeatures({InputExample{"train-7", a, b, label}}, kLabels, max_len, tok);
  EXPECT_EQ(f.size(), 1u);
  return f.at(0);
}

TEST(TruncateSeqPairTest, PopsFromTheLongerAndFromBOnTies) {
  Tokens a = {"1", "2", "3", "4", "5"}, b = {"x"};
  TruncateSeqPair(&a, &b, 4);
  EXPECT_THAT(a, ElementsAre("1", "2", "3"));
  EXPECT_THAT(b, ElementsAre("x"));
  a = {"1", "2"};
  b = {"x", "y"};
  TruncateSeqPair(&a, &b, 2);  // tie: b loses "y", then a is longer and loses "2"
  EXPECT_THAT(a, ElementsAre("1"));
  EXPECT_THAT(b, ElementsAre("x"));
  a = {};
  b = {"x", "y", "z", "w", "v"};
  TruncateSeqPair(&a, &b, 3);
  EXPECT_THAT(b, ElementsAre("x", "y", "z"));
  a = {"1"};
  b = {"x"};
  TruncateSeqPair(&a, &b, 5);  // fits: untouched
  EXPECT_EQ(a.size() + b.size(), 2u);
}

TEST(FeaturesTest, PairLayoutWithPadding) {
  InputFeatures f = One("A", "b", 8);
  EXPECT_EQ(f.guid, "train-7");
  EXPECT_EQ(f.input_ids, (Ids{2, 5, 3, 6, 3, 0, 0, 0}));
  EXPECT_EQ(f.segment_ids, (Ids{0, 0, 0, 1, 1, 0, 0, 0}));
  EXPECT_EQ(f.input_mask, (Ids{1, 1, 1, 1, 1, 0, 0, 0}));
  EXPECT_EQ(f.label_id, 0);
}

TEST(FeaturesTest, TruncatesTheLongerSequenceFirst) {
  // Budget 8 - 3 = 5 for 4 + 2 tokens: "d" goes.
  InputFeatures f = One("a b c d", "e x", 8, "not_entailment");
  EXPECT_EQ(f.input_ids, (Ids{2, 5, 6, 7, 3, 9, 10, 3}));
  EXPECT_EQ(f.segment_ids, (Ids{0, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(f.input_mask, Ids(8, 1));
  EXPECT_EQ(f.label_id, 1);
  // Budget 4 for 3 + 3: B loses "x" (tie), then A loses "c".
  f = One("a b c", "d e x", 7);
  EXPECT_EQ(f.input_ids, (Ids{2, 5, 6, 3, 8, 9, 3}));
}

TEST(FeaturesTest, SingleSentence) {
  InputFeatures f = One("a b c d e x", "", 5);
  EXPECT_EQ(f.input_ids, (Ids{2, 5, 6, 7, 3}));
  EXPECT_EQ(f.segment_ids, Ids(5, 0));
  f = One("a", "", 4);
  EXPECT_EQ(f.input_ids, (Ids{2, 5, 3, 0}));
  EXPECT_EQ(f.input_mask, (Ids{1, 1, 1, 0}));
}

TEST(FeaturesTest, SecondSentenceWithoutTokensGetsNoSecondSep) {
  // As the reference: text_b is non-empty (so the pair budget applies) but yields no tokens.
  InputFeatures f = One("a", " \xE3\x80\x80 ", 6);
  EXPECT_EQ(f.input_ids, (Ids{2, 5, 3, 0, 0, 0}));
  EXPECT_EQ(f.segment_ids, Ids(6, 0));
  EXPECT_EQ(f.input_mask, (Ids{1, 1, 1, 0, 0, 0}));
  // max_seq_length 3 leaves no room for either sentence.
  f = One("a b", "c", 3);
  EXPECT_EQ(f.input_ids, (Ids{2, 3, 0}));
}

TEST(FeaturesTest, PadsWithThePadIdOfTheVocabulary) {
  tokenizer::BertTokenizer tok(
      tokenizer::Vocab::FromTokens({"a", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "b", "[PAD]"}), true);
  InputFeatures f = One("a", "b", 7, "entailment", tok);
  EXPECT_EQ(f.input_ids, (Ids{2, 0, 3, 5, 3, 6, 6}));
}

TEST(FeaturesTest, UnknownWordsMapToUnk) {
  EXPECT_EQ(One("a zzz", "b", 6).input_ids, (Ids{2, 5, 1, 3, 6, 3}));
}

TEST(FeaturesTest, TestExamplesHaveNoLabel) { EXPECT_EQ(One("a", "b", 6, std::nullopt).label_id, -1); }

TEST(FeaturesTest, Errors) {
  try {
    One("a", "b", 8, "contradiction");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("example train-7: label 'contradiction' is not one of the task's labels "
                                    "(entailment, not_entailment)"));
  }
  for (int bad : {2, 0, -1, kMaxSupportedSeqLength + 1}) {
    try {
      One("a", "b", bad);
      FAIL() << bad;
    } catch (const UserError& e) {
      EXPECT_THAT(e.what(), HasSubstr("max_seq_length=" + std::to_string(bad)));
    }
  }
}

}  // namespace
}  // namespace distlm::glue
