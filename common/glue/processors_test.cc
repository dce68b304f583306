#include "common/glue/processors.h"

#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/glue/features.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"
#include "common/testing/user_error.h"
#include "common/tokenizer/bert_tokenizer.h"

namespace distlm::glue {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::string ProjectRte() {
  std::string train = distlm::testing::Runfile("common/testdata/rte/train.tsv");
  return train.substr(0, train.rfind('/'));
}

std::string WriteTsv(const std::string& name, const std::string& text) {
  static const std::string dir = distlm::testing::MakeTempDir("glue");
  WriteFileAtomically(dir + "/" + name, text);
  return dir + "/" + name;
}

TEST(RteProcessorTest, ReadsTheProjectData) {
  auto rte = MakeProcessor("rte");
  EXPECT_EQ(rte->task_name(), "rte");
  EXPECT_THAT(rte->GetLabels(), ::testing::ElementsAre("entailment", "not_entailment"));
  auto train = rte->GetTrainExamples(ProjectRte());
  auto dev = rte->GetDevExamples(ProjectRte());
  auto test = rte->GetTestExamples(ProjectRte());
  ASSERT_EQ(train.size(), 48u);
  ASSERT_EQ(dev.size(), 16u);
  ASSERT_EQ(test.size(), 8u);
  EXPECT_EQ(train[0].guid, "train-0");
  EXPECT_EQ(train[0].text_a,
            "The city council of Lyon approved a new tram line on Monday, after a debate that lasted six hours.");
  EXPECT_EQ(train[0].text_b, "The city council of Lyon approved a new tram line.");
  EXPECT_EQ(train[0].label, "entailment");
  EXPECT_EQ(train[47].guid, "train-47");
  EXPECT_EQ(dev[15].guid, "dev-15");
  EXPECT_EQ(test[7].guid, "test-7");
  for (const auto& ex : test) EXPECT_FALSE(ex.label.has_value()) << ex.guid;
  int entailed = 0;
  for (const auto& ex : train) entailed += ex.label == "entailment";
  EXPECT_EQ(entailed, 24);  // balanced, as testdata/README.md says
}

TEST(RteProcessorTest, ProjectDataNeedsNoUnknownToken) {
  auto tok = tokenizer::BertTokenizer::FromVocabFile(distlm::testing::Runfile("common/testdata/vocab.txt"), true);
  auto rte = MakeProcessor("rte");
  for (auto get : {&DataProcessor::GetTrainExamples, &DataProcessor::GetDevExamples, &DataProcessor::GetTestExamples}) {
    for (const InputExample& ex : ((*rte).*get)(ProjectRte())) {
      for (const std::string& text : {ex.text_a, ex.text_b}) {
        for (const std::string& t : tok.Tokenize(text)) {
          EXPECT_NE(t, "[UNK]") << ex.guid << ": \"" << text << "\" has a word missing from testdata/vocab.txt";
        }
      }
    }
  }
}

TEST(ProcessorTest, TaskNamesAreCaseInsensitiveAndUnknownOnesListed) {
  EXPECT_EQ(MakeProcessor("RTE")->task_name(), "rte");
  EXPECT_EQ(MakeProcessor("SST-2")->task_name(), "sst-2");
  EXPECT_THAT(::distlm::testing::UserErrorOf([] { MakeProcessor("cola"); }),
              AllOf(HasSubstr("unknown task 'cola'"), HasSubstr("rte, mrpc, sst-2")));
}

TEST(ProcessorTest, SplitNames) {
  EXPECT_EQ(ParseSplit("train"), Split::kTrain);
  EXPECT_EQ(ParseSplit("dev"), Split::kDev);
  EXPECT_EQ(ParseSplit("test"), Split::kTest);
  EXPECT_THAT(::distlm::testing::UserErrorOf([] { ParseSplit("valid"); }), HasSubstr("unknown split 'valid' (expected train, dev or test)"));
}

TEST(RteProcessorTest, MalformedRowsNameFileAndLine) {
  auto rte = MakeProcessor("rte");
  const std::string header = "index\tsentence1\tsentence2\tlabel\n";
  std::string p = WriteTsv("short.tsv", header + "0\ta\tb\tentailment\n1\ta\tb\n");
  EXPECT_THAT(::distlm::testing::UserErrorOf([&] { rte->GetExamples(p, Split::kTrain); }),
              AllOf(HasSubstr(p + ":3: expected 4 tab-separated fields (index, sentence1, sentence2, label), found 3")));
  p = WriteTsv("tab.tsv", header + "0\ta\tb\tc\tentailment\n");
  EXPECT_THAT(::distlm::testing::UserErrorOf([&] { rte->GetExamples(p, Split::kDev); }), HasSubstr(p + ":2: expected 4"));
  p = WriteTsv("label.tsv", header + "0\ta\tb\tentailment\n1\ta\tb\tEntailment\n");
  EXPECT_THAT(::distlm::testing::UserErrorOf([&] { rte->GetExamples(p, Split::kTrain); }),
              HasSubstr(p + ":3: label 'Entailment' is not one of rte's labels (entailment, not_entailment)"));
  p = WriteTsv("guid.tsv", header + "\ta\tb\tentailment\n");
  EXPECT_THAT(::distlm::testing::UserErrorOf([&] { rte->GetExamples(p, Split::kTrain); }), HasSubstr(p + ":2: empty index field"));
  // The test file read as dev: its header is one column short.
  p = WriteTsv("test_as_dev.tsv", "index\tsentence1\tsentence2\n0\ta\tb\n");
  EXPECT_THAT(::distlm::testing::UserErrorOf([&] { rte->GetExamples(p, Split::kDev); }),
              HasSubstr(p + ":1: the header has 3 fields; the dev split of rte has 4"));
  EXPECT_EQ(rte->GetExamples(p, Split::kTest).size(), 1u);
}

// Another task in a few lines of processors.cc; the data here is written for this test.
TEST(MrpcProcessorTest, LabelFirstColumnsAndRowNumberGuids) {
  auto mrpc = MakeProcessor("mrpc");
  std::string p = WriteTsv("mrpc_train.tsv",
                           "\xEF\xBB\xBFQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                           "1\t101\t102\tThe shop opens at nine.\tThe shop opens at 9.\n"
                           "0\t103\t104\tIt rained all day.\tThe sun was out.\n");
  auto ex = mrpc->GetExamples(p, Split::kTrain);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].guid, "train-1");  // the reference counts the header as row 0
  EXPECT_EQ(ex[0].text_a, "The shop opens at nine.");
  EXPECT_EQ(ex[0].text_b, "The shop opens at 9.");
  EXPECT_EQ(ex[0].label, "1");
  EXPECT_EQ(ex[1].guid, "train-2");
  EXPECT_EQ(ex[1].label, "0");
}

TEST(Sst2ProcessorTest, SingleSentences) {
  auto sst2 = MakeProcessor("sst-2");
  std::string p = WriteTsv("sst2_dev.tsv", "sentence\tlabel\na warm , funny film \t1\ntoo long by half \t0\n");
  auto ex = sst2->GetExamples(p, Split::kDev);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_EQ(ex[0].guid, "dev-1");
  EXPECT_EQ(ex[0].text_a, "a warm , funny film ");
  EXPECT_EQ(ex[0].text_b, "");
  EXPECT_EQ(ex[1].label, "0");
  p = WriteTsv("sst2_test.tsv", "index\tsentence\n0\tcharming\n");
  auto test = sst2->GetExamples(p, Split::kTest);
  ASSERT_EQ(test.size(), 1u);
  EXPECT_EQ(test[0].text_a, "charming");
  EXPECT_FALSE(test[0].label.has_value());
}

}  // namespace
}  // namespace distlm::glue
