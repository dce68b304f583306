// Runs the real glue_features binary: output format, a row worked out by hand, errors, and
// (when ../shared/reference is there) the reference's ids for every RTE dev pair.
#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"

namespace distlm {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using distlm::testing::Runfile;

std::string Binary() { return Runfile("common/glue_features"); }
std::string TestData(const std::string& p) { return Runfile("common/testdata/" + p); }

distlm::testing::ProcessResult RunTool(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  args.insert(args.begin(), Binary());
  return distlm::testing::Run({args, env}, 60);
}

// ordered_json keeps the keys in the order the command printed them.
std::vector<nlohmann::ordered_json> JsonLines(const std::string& output) {
  std::vector<nlohmann::ordered_json> rows;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) rows.push_back(nlohmann::ordered_json::parse(line));
  return rows;
}

// Token -> id straight from the vocabulary's lines, independently of the tokenizer library.
std::map<std::string, int64_t> VocabIds(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, int64_t> ids;
  std::string line;
  for (int64_t i = 0; std::getline(in, line); ++i) ids[line] = i;
  return ids;
}

TEST(GlueFeaturesTest, PrintsOneJsonObjectPerExample) {
  auto r = RunTool({"--input=" + TestData("rte/train.tsv"), "--split=train", "--vocab_file=" + TestData("vocab.txt"),
                    "--do_lower_case=true", "--max_seq_length=48"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rows = JsonLines(r.output);
  ASSERT_EQ(rows.size(), 48u);
  for (const auto& row : rows) {
    std::vector<std::string> keys;
    for (auto it = row.begin(); it != row.end(); ++it) keys.push_back(it.key());
    EXPECT_THAT(keys, ::testing::ElementsAre("guid", "input_ids", "segment_ids", "input_mask", "label_id"));
    EXPECT_EQ(row["input_ids"].size(), 48u);
    EXPECT_EQ(row["segment_ids"].size(), 48u);
    EXPECT_EQ(row["input_mask"].size(), 48u);
  }
  // Row 0, tokenized by hand: "The city council of Lyon approved a new tram line on Monday,
  // after a debate that lasted six hours." / "The city council of Lyon approved a new tram line."
  const std::vector<std::string> a = {"the", "city", "council", "of", "lyon", "approved", "a",    "new",
                                      "tram", "line", "on", "monday", ",", "after", "a", "debate",
                                      "that", "lasted", "six", "hours", "."};
  const std::vector<std::string> b = {"the", "city", "council", "of", "lyon", "approved", "a", "new", "tram", "line", "."};
  auto vocab = VocabIds(TestData("vocab.txt"));
  std::vector<int64_t> ids = {vocab.at("[CLS]")}, segments = {0};
  for (const auto& t : a) ids.push_back(vocab.at(t)), segments.push_back(0);
  ids.push_back(vocab.at("[SEP]")), segments.push_back(0);
  for (const auto& t : b) ids.push_back(vocab.at(t)), segments.push_back(1);
  ids.push_back(vocab.at("[SEP]")), segments.push_back(1);
  std::vector<int64_t> mask(ids.size(), 1);
  ids.resize(48, vocab.at("[PAD]"));
  segments.resize(48, 0);
  mask.resize(48, 0);
  EXPECT_EQ(rows[0]["guid"], "train-0");
  EXPECT_EQ(rows[0]["input_ids"].get<std::vector<int64_t>>(), ids);
  EXPECT_EQ(rows[0]["segment_ids"].get<std::vector<int64_t>>(), segments);
  EXPECT_EQ(rows[0]["input_mask"].get<std::vector<int64_t>>(), mask);
  EXPECT_EQ(rows[0]["label_id"], 0);
  EXPECT_EQ(rows[1]["label_id"], 1);
}

TEST(GlueFeaturesTest, TestSplitHasNoLabel) {
  auto r = RunTool({"--input=" + TestData("rte/test.tsv"), "--split=test", "--vocab_file=" + TestData("vocab.txt")});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto rows = JsonLines(r.output);
  ASSERT_EQ(rows.size(), 8u);
  EXPECT_EQ(rows[7]["guid"], "test-7");
  EXPECT_EQ(rows[7]["input_ids"].size(), 128u);  // the default --max_seq_length
  for (const auto& row : rows) EXPECT_FALSE(row.contains("label_id"));
}

TEST(GlueFeaturesTest, RelativePathsAreRelativeToWhereTheUserRanIt) {
  std::string dir = TestData("vocab.txt");
  dir = dir.substr(0, dir.rfind('/'));
  auto r = RunTool({"--input=rte/dev.tsv", "--split=dev", "--vocab_file=vocab.txt", "--nodo_lower_case"},
                   {{"BUILD_WORKING_DIRECTORY", dir}});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(JsonLines(r.output).size(), 16u);
}

TEST(GlueFeaturesTest, BadInputIsOneLineAndExitTwo) {
  const std::string dir = distlm::testing::MakeTempDir("glue_features");
  {
    std::ofstream(dir + "/bad.tsv") << "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\tonly two\n";
  }
  const std::string vocab = "--vocab_file=" + TestData("vocab.txt");
  const std::string train = "--input=" + TestData("rte/train.tsv");
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{vocab}, "--input is required"},
      {{train}, "--vocab_file is required"},
      {{train, vocab, "--split=valid"}, "--split: unknown split 'valid'"},
      {{train, vocab, "--max_seq_length=2"}, "--max_seq_length=2 is outside [3,"},
      {{train, vocab, "--max_seq_length=many"}, "--max_seq_length=many:"},
      {{train, vocab, "--do_lower_case=perhaps"}, "--do_lower_case=perhaps:"},
      {{train, vocab, "--bogus=1"}, "unknown flag --bogus"},
      {{train, vocab, "stray"}, "unexpected argument 'stray'"},
      {{train, vocab, "--task=cola"}, "--task: unknown task 'cola' (known tasks: rte, mrpc, sst-2)"},
      {{"--input=" + dir + "/bad.tsv", vocab}, dir + "/bad.tsv:3: expected 4 tab-separated fields"},
      {{"--input=" + dir + "/none.tsv", vocab}, dir + "/none.tsv: no such file"},
      {{train, "--vocab_file=" + dir + "/none.txt"}, dir + "/none.txt: vocabulary file not found"},
      {{"--input=" + TestData("rte/test.tsv"), vocab, "--split=dev"}, "the header has 3 fields"},
  };
  for (const auto& [args, message] : cases) {
    auto r = RunTool(args);
    EXPECT_EQ(r.exit_code, 2) << message << "\n" << r.output;
    EXPECT_THAT(r.output, StartsWith("error: ")) << message;
    EXPECT_THAT(r.output, HasSubstr(message));
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

TEST(GlueFeaturesTest, MatchesReferenceOnRteDev) {
  SKIP_WITHOUT_REFERENCE(reference);
  auto r = RunTool({"--input=" + reference + "/data/RTE/dev.tsv", "--split=dev",
                    "--vocab_file=" + reference + "/vocab/bert-base-uncased-vocab.txt", "--do_lower_case=true",
                    "--max_seq_length=128"});
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 500);
  auto rows = JsonLines(r.output);
  ASSERT_EQ(rows.size(), 277u);
  std::map<std::string, nlohmann::json> expected;
  std::ifstream in(reference + "/tokenizer/rte_uncased_max128.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j["guid"].get<std::string>().rfind("dev-", 0) == 0) expected[j["guid"]] = j;
  }
  ASSERT_EQ(expected.size(), 277u);
  size_t checked = 0;
  for (const auto& row : rows) {
    const auto& ref = expected.at(row["guid"].get<std::string>());
    auto ids = row["input_ids"].get<std::vector<int64_t>>();
    auto segments = row["segment_ids"].get<std::vector<int64_t>>();
    const size_t n = ref["input_ids"].size();
    ids.resize(n);
    segments.resize(n);
    EXPECT_EQ(ids, ref["input_ids"].get<std::vector<int64_t>>()) << row["guid"];
    EXPECT_EQ(segments, ref["segment_ids"].get<std::vector<int64_t>>()) << row["guid"];
    EXPECT_EQ(row["label_id"].get<int64_t>(), ref["label_id"].get<int64_t>()) << row["guid"];
    ++checked;
  }
  std::printf("glue_features: %zu RTE dev rows match the reference\n", checked);
}

}  // namespace
}  // namespace distlm
