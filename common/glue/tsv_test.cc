#include "common/glue/tsv.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"

namespace distlm::glue {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string ParseError(const std::string& text) {
  try {
    ParseTsv(text, "f.tsv");
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TsvTest, FieldsAreRawTextBetweenTabs) {
  TsvTable t = ParseTsv("h1\th2\th3\n\"quoted\ttext\"\tx\\y\t'z'\na\t\t\n", "f.tsv");
  EXPECT_THAT(t.header.fields, ElementsAre("h1", "h2", "h3"));
  EXPECT_EQ(t.header.line, 1);
  ASSERT_EQ(t.rows.size(), 2u);
  // No quote character: a quote is text and cannot protect a tab.
  EXPECT_THAT(t.rows[0].fields, ElementsAre("\"quoted", "text\"", "x\\y", "'z'"));
  EXPECT_EQ(t.rows[0].line, 2);
  EXPECT_THAT(t.rows[1].fields, ElementsAre("a", "", ""));
}

TEST(TsvTest, UniversalNewlinesAndByteOrderMark) {
  TsvTable t = ParseTsv("\xEF\xBB\xBFh\r\na\rb\nc", "f.tsv");
  EXPECT_THAT(t.header.fields, ElementsAre("h"));
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_THAT(t.rows[0].fields, ElementsAre("a"));
  EXPECT_THAT(t.rows[1].fields, ElementsAre("b"));
  EXPECT_THAT(t.rows[2].fields, ElementsAre("c"));
  EXPECT_EQ(t.rows[2].line, 4);
}

TEST(TsvTest, ErrorsNameFileLineAndColumn) {
  EXPECT_THAT(ParseError("h\nok\nab\xFF\n"), HasSubstr("f.tsv:3:3: invalid UTF-8"));
  EXPECT_THAT(ParseError("h\na\n\nb\n"), HasSubstr("f.tsv:3: empty line"));
  EXPECT_THAT(ParseError("h\r\n\r\n"), HasSubstr("f.tsv:2: empty line"));
  EXPECT_THAT(ParseError(""), HasSubstr("f.tsv: empty file"));
  EXPECT_THAT(ParseError("\xEF\xBB\xBF"), HasSubstr("f.tsv: empty file"));
}

TEST(TsvTest, ReadTsvNamesThePath) {
  const std::string dir = distlm::testing::MakeTempDir("tsv");
  WriteFileAtomically(dir + "/ok.tsv", "a\tb\n1\t2\n");
  EXPECT_EQ(ReadTsv(dir + "/ok.tsv").rows.size(), 1u);
  EXPECT_EQ(ReadTsv(dir + "/ok.tsv").name, dir + "/ok.tsv");
  try {
    ReadTsv(dir + "/missing.tsv");
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir + "/missing.tsv: no such file"));
  }
  try {
    ReadTsv(dir);
    FAIL();
  } catch (const UserError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
}

}  // namespace
}  // namespace distlm::glue
