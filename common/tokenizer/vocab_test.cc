#include "common/tokenizer/vocab.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"

namespace distlm::tokenizer {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string WriteVocab(const std::string& name, const std::string& bytes) {
  static const std::string dir = distlm::testing::MakeTempDir("vocab");
  const std::string path = dir + "/" + name;
  WriteFileAtomically(path, bytes);
  return path;
}

std::string LoadError(const std::string& path) {
  try {
    Vocab::Load(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(VocabTest, IdsAreLineNumbers) {
  Vocab v = Vocab::Load(WriteVocab("ok.txt", "[PAD]\n[UNK]\nhello\n##lo\n\xC3\xA9t\xC3\xA9\n"));
  EXPECT_EQ(v.size(), 5u);
  EXPECT_EQ(v.Id("[PAD]"), 0);
  EXPECT_EQ(v.Id("hello"), 2);
  EXPECT_EQ(v.Id("##lo"), 3);
  EXPECT_EQ(v.Token(4), "\xC3\xA9t\xC3\xA9");
  EXPECT_TRUE(v.Contains("hello"));
  EXPECT_FALSE(v.Contains("Hello"));
  EXPECT_EQ(v.Id("missing"), 1);  // [UNK]
  EXPECT_EQ(v.Find("missing"), std::nullopt);
  EXPECT_EQ(v.max_token_chars(), 5u);  // "[PAD]", "[UNK]", "hello"
  EXPECT_EQ(v.source(), WriteVocab("ok.txt", "[PAD]\n[UNK]\nhello\n##lo\n\xC3\xA9t\xC3\xA9\n"));
}

TEST(VocabTest, AcceptsCrLfBomAndMissingFinalNewline) {
  Vocab v = Vocab::Load(WriteVocab("crlf.txt", "\xEF\xBB\xBF[PAD]\r\n[UNK]\r\nlast"));
  EXPECT_EQ(v.size(), 3u);
  EXPECT_EQ(v.Id("[PAD]"), 0);
  EXPECT_EQ(v.Id("last"), 2);
}

TEST(VocabTest, ErrorsNameFileAndLine) {
  std::string p = WriteVocab("empty_line.txt", "a\nb\n\nc\n");
  EXPECT_THAT(LoadError(p), AllOf(HasSubstr(p + ":3"), HasSubstr("empty token")));
  p = WriteVocab("dup.txt", "a\nb\na\n");
  EXPECT_THAT(LoadError(p), AllOf(HasSubstr(p + ":3"), HasSubstr("'a'"), HasSubstr("line 1")));
  p = WriteVocab("utf8.txt", "a\nb\xFF\n");
  EXPECT_THAT(LoadError(p), AllOf(HasSubstr(p + ":2"), HasSubstr("UTF-8")));
  p = WriteVocab("cr.txt", "a\rb\n");
  EXPECT_THAT(LoadError(p), AllOf(HasSubstr(p + ":1"), HasSubstr("carriage return")));
  p = WriteVocab("nothing.txt", "");
  EXPECT_THAT(LoadError(p), AllOf(HasSubstr(p), HasSubstr("empty")));
  EXPECT_THAT(LoadError("/nonexistent/vocab.txt"), HasSubstr("/nonexistent/vocab.txt: vocabulary file not found"));
}

TEST(VocabTest, TokenOutOfRangeAndNoUnk) {
  Vocab v = Vocab::FromTokens({"a", "b"}, "mem");
  EXPECT_THROW(v.Token(2), UserError);
  EXPECT_THROW(v.Token(-1), UserError);
  try {
    v.Id("zzz");
    FAIL() << "expected UserError";
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("mem"), HasSubstr("zzz"), HasSubstr("[UNK]")));
  }
}

}  // namespace
}  // namespace distlm::tokenizer
