// Each expectation is worked out by hand from the rules in bert_tokenizer.h; the full-data
// comparison with the reference is tokenizer_parity_test.
#include "common/tokenizer/bert_tokenizer.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"
#include "common/tokenizer/basic_tokenizer.h"
#include "common/tokenizer/wordpiece.h"

namespace distlm::tokenizer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Tokens = std::vector<std::string>;

Vocab TestVocab() {
  return Vocab::FromTokens({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "cafe", "café", "Café",
                            "zurich", "un", "##aff", "##able", "a", "##a", ",", ".", "!", "$", "5", "^", "`", "[", "]",
                            "sep", "cl", "##s", "中", "文", "é", "##é", "istanbul", "€5", "co", "##op", "ab", "##cd",
                            "¿", "qué", "que", "\u03bf\u03b4\u03bf\u03c2", "x", "y"},
                           "test-vocab");
}

const BertTokenizer& Uncased() {
  static const BertTokenizer t(TestVocab(), /*do_lower_case=*/true);
  return t;
}

const BertTokenizer& Cased() {
  static const BertTokenizer t(TestVocab(), /*do_lower_case=*/false);
  return t;
}

TEST(BertTokenizerTest, SpecialIdsComeFromTheVocabulary) {
  EXPECT_EQ(Uncased().pad_id(), 0);
  EXPECT_EQ(Uncased().unk_id(), 1);
  EXPECT_EQ(Uncased().cls_id(), 2);
  EXPECT_EQ(Uncased().sep_id(), 3);
  EXPECT_EQ(Uncased().mask_id(), 4);
}

TEST(BertTokenizerTest, MissingSpecialTokenIsAClearError) {
  for (const std::string& missing : BertTokenizer::SpecialTokens()) {
    std::vector<std::string> tokens;
    for (const std::string& t : BertTokenizer::SpecialTokens()) {
      if (t != missing) tokens.push_back(t);
    }
    tokens.push_back("hello");
    try {
      BertTokenizer t(Vocab::FromTokens(tokens, "small-vocab.txt"), true);
      ADD_FAILURE() << "no error for a vocabulary without " << missing;
    } catch (const UserError& e) {
      EXPECT_THAT(e.what(), HasSubstr("small-vocab.txt: the vocabulary has no " + missing));
    }
  }
}

TEST(BertTokenizerTest, LowerCasesAndStripsAccentsOnlyWhenAsked) {
  EXPECT_THAT(Uncased().Tokenize("Hello, WORLD!"), ElementsAre("hello", ",", "world", "!"));
  EXPECT_THAT(Uncased().Tokenize("Café Zürich"), ElementsAre("cafe", "zurich"));
  EXPECT_THAT(Cased().Tokenize("Café café"), ElementsAre("Café", "café"));
  // Decomposed input (e + U+0301) is the same word once accents are stripped.
  EXPECT_THAT(Uncased().Tokenize("cafe\xCC\x81"), ElementsAre("cafe"));
  // U+0130 lowers to "i" + U+0307 (Python), and the dot is stripped with the accents.
  EXPECT_THAT(Uncased().Tokenize("\xC4\xB0stanbul"), ElementsAre("istanbul"));
  // ΟΔΟΣ -> οδος with a final sigma.
  EXPECT_THAT(Uncased().Tokenize("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3"), ElementsAre("\u03bf\u03b4\u03bf\u03c2"));
}

TEST(BertTokenizerTest, CleansControlCharactersAndNormalisesWhitespace) {
  // NUL, U+FFFD, BEL, soft hyphen (Cf) and private use (Co) vanish without splitting the word.
  EXPECT_THAT(Uncased().Tokenize(std::string("co\0op", 5)), ElementsAre("co", "##op"));
  EXPECT_THAT(Uncased().Tokenize("co\xEF\xBF\xBDop co\aop co\xC2\xADop co\xEE\x80\x80op"),
              ElementsAre("co", "##op", "co", "##op", "co", "##op", "co", "##op"));
  // Tabs, newlines, no-break and ideographic spaces separate words.
  EXPECT_THAT(Uncased().Tokenize("\thello\r\nworld\xC2\xA0x\xE3\x80\x80y  "), ElementsAre("hello", "world", "x", "y"));
  // U+2028 is not BERT white space, but Python's str.split() splits on it.
  EXPECT_THAT(Uncased().Tokenize("hello\xE2\x80\xA8world"), ElementsAre("hello", "world"));
  EXPECT_THAT(Uncased().Tokenize(""), ElementsAre());
  EXPECT_THAT(Uncased().Tokenize(" \t\n "), ElementsAre());
}

TEST(BertTokenizerTest, InvalidUtf8IsDroppedNotFatal) {
  EXPECT_THAT(Uncased().Tokenize("ab\xFF\xFE" "cd"), ElementsAre("ab", "##cd"));
  EXPECT_THAT(Uncased().Tokenize("hello \xE4\xB8"), ElementsAre("hello"));
}

TEST(BertTokenizerTest, SplitsCjkCharacters) {
  EXPECT_THAT(Uncased().Tokenize("\xE4\xB8\xAD\xE6\x96\x87x"), ElementsAre("中", "文", "x"));
}

TEST(BertTokenizerTest, SplitsPunctuationByTheReferenceDefinition) {
  // ASCII symbols split, the euro sign (Sc, not ASCII) does not; Unicode P* splits.
  EXPECT_THAT(Uncased().Tokenize("$5^`"), ElementsAre("$", "5", "^", "`"));
  EXPECT_THAT(Uncased().Tokenize("\xE2\x82\xAC" "5"), ElementsAre("€5"));
  EXPECT_THAT(Uncased().Tokenize("\xC2\xBFQu\xC3\xA9"), ElementsAre("¿", "que"));
  EXPECT_THAT(Cased().Tokenize("\xC2\xBFqu\xC3\xA9"), ElementsAre("¿", "qué"));
}

TEST(BertTokenizerTest, WordPieceIsGreedyLongestMatch) {
  EXPECT_THAT(Uncased().Tokenize("unaffable"), ElementsAre("un", "##aff", "##able"));
  // One piece that cannot be matched makes the whole word [UNK], not just the tail.
  EXPECT_THAT(Uncased().Tokenize("unaffablez hello"), ElementsAre("[UNK]", "hello"));
}

TEST(BertTokenizerTest, WordsOverOneHundredCodePointsAreUnknown) {
  std::string w100(100, 'a'), w101(101, 'a');
  Tokens t100 = Uncased().Tokenize(w100);
  ASSERT_EQ(t100.size(), 100u);
  EXPECT_EQ(t100[0], "a");
  EXPECT_EQ(t100[99], "##a");
  EXPECT_THAT(Uncased().Tokenize(w101), ElementsAre("[UNK]"));
  // The limit counts code points, not bytes: 100 two-byte letters are still one word.
  std::string e100;
  for (int i = 0; i < 100; ++i) e100 += "\xC3\xA9";
  EXPECT_EQ(Cased().Tokenize(e100).size(), 100u);
  EXPECT_THAT(Cased().Tokenize(e100 + "\xC3\xA9"), ElementsAre("[UNK]"));
  std::vector<std::string> pieces;
  WordpieceTokenize(std::u32string(100, U'a'), TestVocab(), "[UNK]", &pieces, 99);
  EXPECT_THAT(pieces, ElementsAre("[UNK]"));
}

TEST(BertTokenizerTest, SpecialTokensInTheTextStayWhole) {
  EXPECT_THAT(Uncased().Tokenize("[CLS] hello [SEP] world [SEP]"),
              ElementsAre("[CLS]", "hello", "[SEP]", "world", "[SEP]"));
  EXPECT_THAT(Uncased().Tokenize("hello[SEP]world[MASK][PAD][UNK]"),
              ElementsAre("hello", "[SEP]", "world", "[MASK]", "[PAD]", "[UNK]"));
  // Matching is case-sensitive and happens before lower-casing.
  EXPECT_THAT(Uncased().Tokenize("[sep]"), ElementsAre("[", "sep", "]"));
  EXPECT_THAT(Uncased().Tokenize("[Cls]"), ElementsAre("[", "cl", "##s", "]"));
  // A special token that appears only after cleaning is not lower-cased (the reference's
  // never_split) but is still split on punctuation; "CLS" is not in an uncased vocabulary.
  EXPECT_THAT(Uncased().Tokenize(std::string("[C\0LS]", 6)), ElementsAre("[", "[UNK]", "]"));
  EXPECT_EQ(Uncased().Encode("[CLS] hello"), (std::vector<int64_t>{2, 5}));
}

TEST(BertTokenizerTest, ConvertTokensToIdsMapsUnknownsToUnk) {
  EXPECT_EQ(Uncased().ConvertTokensToIds({"hello", "nope", "[SEP]"}), (std::vector<int64_t>{5, 1, 3}));
}

TEST(BasicTokenizerTest, Steps) {
  EXPECT_EQ(BasicTokenizer::CleanText(std::u32string_view(U"a\tb\u00a0c\u200bd\0e", 9)), U"a b cde");
  EXPECT_EQ(BasicTokenizer::SpaceOutCjk(U"a\u4e2db"), U"a \u4e2d b");
  EXPECT_EQ(BasicTokenizer::SplitOnWhitespace(U"  a  b\u2029c "), (std::vector<std::u32string>{U"a", U"b", U"c"}));
  EXPECT_EQ(BasicTokenizer::SplitOnPunctuation(U"a.b..c"),
            (std::vector<std::u32string>{U"a", U".", U"b", U".", U".", U"c"}));
  EXPECT_EQ(BasicTokenizer::SplitOnPunctuation(U""), std::vector<std::u32string>{});
}

TEST(BertTokenizerTest, ProjectVocabularyLoads) {
  BertTokenizer t = BertTokenizer::FromVocabFile(distlm::testing::Runfile("common/testdata/vocab.txt"), true);
  EXPECT_EQ(t.pad_id(), 0);
  EXPECT_EQ(t.unk_id(), 1);
  EXPECT_EQ(t.cls_id(), 2);
  EXPECT_EQ(t.sep_id(), 3);
  EXPECT_EQ(t.mask_id(), 4);
  EXPECT_THAT(t.Tokenize("The championship in Zürich."),
              ElementsAre("the", "champion", "##ship", "in", "zurich", "."));
}

}  // namespace
}  // namespace distlm::tokenizer
