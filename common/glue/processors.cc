#include "common/glue/processors.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "common/runtime/errors.h"

namespace distlm::glue {
namespace {

constexpr int kNone = TsvLayout::kNone;

// The GLUE tasks we know, as the reference reads them. Column layouts are GLUE's own files:
//   RTE   index, sentence1, sentence2, label          guid from the index column
//   MRPC  Quality, #1 ID, #2 ID, #1 String, #2 String  label first; guid = row number
//   SST-2 sentence, label (test: index, sentence)     single sentence; guid = row number
const std::vector<TaskSpec>& Tasks() {
  static const std::vector<TaskSpec> kTasks = {
      {"rte", {"entailment", "not_entailment"},
       {{"index", "sentence1", "sentence2", "label"}, 1, 2, 3, 0},
       {{"index", "sentence1", "sentence2"}, 1, 2, kNone, 0}},
      {"mrpc", {"0", "1"},
       {{"Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"}, 3, 4, 0, kNone},
       {{"index", "#1 ID", "#2 ID", "#1 String", "#2 String"}, 3, 4, kNone, kNone}},
      {"sst-2", {"0", "1"},
       {{"sentence", "label"}, 0, kNone, 1, kNone},
       {{"index", "sentence"}, 1, kNone, kNone, kNone}},
  };
  return kTasks;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Split ParseSplit(const std::string& name) {
  if (name == "train") return Split::kTrain;
  if (name == "dev") return Split::kDev;
  if (name == "test") return Split::kTest;
  throw UserError("unknown split '" + name + "' (expected train, dev or test)");
}

const char* SplitName(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kDev:
      return "dev";
    case Split::kTest:
      return "test";
  }
  return "?";
}

DataProcessor::DataProcessor(TaskSpec spec) : spec_(std::move(spec)) {}

std::vector<InputExample> DataProcessor::GetTrainExamples(const std::string& data_dir) const {
  return GetExamples(data_dir + "/train.tsv", Split::kTrain);
}

std::vector<InputExample> DataProcessor::GetDevExamples(const std::string& data_dir) const {
  return GetExamples(data_dir + "/dev.tsv", Split::kDev);
}

std::vector<InputExample> DataProcessor::GetTestExamples(const std::string& data_dir) const {
  return GetExamples(data_dir + "/test.tsv", Split::kTest);
}

std::vector<InputExample> DataProcessor::GetExamples(const std::string& tsv_path, Split split) const {
  return CreateExamples(ReadTsv(tsv_path), split);
}

std::vector<InputExample> DataProcessor::CreateExamples(const TsvTable& table, Split split) const {
  const TsvLayout& layout = split == Split::kTest ? spec_.test : spec_.labelled;
  const size_t want = layout.columns.size();
  const std::string expected = std::to_string(want) + " tab-separated fields (" + JoinNames(layout.columns) + ")";
  // The header is checked only for its width: that catches a test file read as train or dev
  // (one column short) and a file of another task, without insisting on GLUE's exact names.
  if (table.header.fields.size() != want) {
    throw UserError(table.name + ":" + std::to_string(table.header.line) + ": the header has " +
                    std::to_string(table.header.fields.size()) + " fields; the " + SplitName(split) + " split of " +
                    spec_.name + " has " + expected);
  }
  std::vector<InputExample> examples;
  examples.reserve(table.rows.size());
  for (size_t i = 0; i < table.rows.size(); ++i) {
    const TsvRow& row = table.rows[i];
    const std::string where = table.name + ":" + std::to_string(row.line);
    if (row.fields.size() != want) {
      throw UserError(where + ": expected " + expected + ", found " + std::to_string(row.fields.size()));
    }
    InputExample ex;
    std::string id = layout.guid == kNone ? std::to_string(i + 1) : row.fields[static_cast<size_t>(layout.guid)];
    if (id.empty()) throw UserError(where + ": empty " + layout.columns[static_cast<size_t>(layout.guid)] + " field");
    ex.guid = std::string(SplitName(split)) + "-" + id;
    ex.text_a = row.fields[static_cast<size_t>(layout.text_a)];
    if (layout.text_b != kNone) ex.text_b = row.fields[static_cast<size_t>(layout.text_b)];
    if (layout.label != kNone) {
      const std::string& label = row.fields[static_cast<size_t>(layout.label)];
      if (std::find(spec_.labels.begin(), spec_.labels.end(), label) == spec_.labels.end()) {
        throw UserError(where + ": label '" + label + "' is not one of " + spec_.name + "'s labels (" +
                        JoinNames(spec_.labels) + ")");
      }
      ex.label = label;
    }
    examples.push_back(std::move(ex));
  }
  return examples;
}

std::unique_ptr<DataProcessor> MakeProcessor(const std::string& task_name) {
  const std::string want = Lower(task_name);
  for (const TaskSpec& spec : Tasks()) {
    if (spec.name == want) return std::make_unique<DataProcessor>(spec);
  }
  throw UserError("unknown task '" + task_name + "' (known tasks: " + JoinNames(KnownTasks()) + ")");
}

std::vector<std::string> KnownTasks() {
  std::vector<std::string> names;
  for (const TaskSpec& spec : Tasks()) names.push_back(spec.name);
  return names;
}

}  // namespace distlm::glue
