// GLUE task processors: a task's TSV files -> InputExamples, as the reference's
// (pytorch_transformers 1.2.0 utils_glue.py) RteProcessor, MrpcProcessor and Sst2Processor.
//
// A task is data, not code: a TaskSpec says which column holds what. Adding a GLUE task is
// one more entry in the table in processors.cc (see "sst-2" there: four lines).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/glue/tsv.h"

namespace distlm::glue {

struct InputExample {
  std::string guid;    // "<split>-<id>", e.g. "train-17"
  std::string text_a;
  std::string text_b;  // empty for single-sentence tasks (the reference's text_b=None)
  std::optional<std::string> label;  // absent in the test split
};

enum class Split { kTrain, kDev, kTest };

// "train", "dev" or "test"; anything else is a UserError listing those.
Split ParseSplit(const std::string& name);
const char* SplitName(Split split);

// Where a split's TSV keeps its fields. Column indices are 0-based; kNone for "not there".
struct TsvLayout {
  static constexpr int kNone = -1;
  std::vector<std::string> columns;  // the expected columns, by name (for messages); the count is checked
  int text_a = kNone;
  int text_b = kNone;
  int label = kNone;
  // The guid's id: this column's value (RTE's index), or with kNone the row's position in the
  // file counting the header as 0 (the reference's "%s-%s" % (set_type, i) for MRPC, SST-2).
  int guid = kNone;
};

struct TaskSpec {
  std::string name;                 // lower case, e.g. "rte"
  std::vector<std::string> labels;  // label_id = position in this list
  TsvLayout labelled;               // train.tsv and dev.tsv
  TsvLayout test;                   // test.tsv
};

class DataProcessor {
 public:
  explicit DataProcessor(TaskSpec spec);
  virtual ~DataProcessor() = default;

  // <data_dir>/train.tsv, dev.tsv, test.tsv.
  std::vector<InputExample> GetTrainExamples(const std::string& data_dir) const;
  std::vector<InputExample> GetDevExamples(const std::string& data_dir) const;
  std::vector<InputExample> GetTestExamples(const std::string& data_dir) const;
  // Any file, read with the layout of split. Errors name the file and line: a row with the
  // wrong number of fields, a label outside GetLabels(), an empty guid.
  std::vector<InputExample> GetExamples(const std::string& tsv_path, Split split) const;
  // The same on a table already parsed (tests, fuzzing).
  virtual std::vector<InputExample> CreateExamples(const TsvTable& table, Split split) const;

  const std::vector<std::string>& GetLabels() const { return spec_.labels; }
  const std::string& task_name() const { return spec_.name; }
  const TaskSpec& spec() const { return spec_; }

 private:
  TaskSpec spec_;
};

// The processor of a task, by name, case-insensitive ("RTE", "rte", "SST-2"). An unknown name
// is a UserError listing the known ones.
std::unique_ptr<DataProcessor> MakeProcessor(const std::string& task_name);
// The known task names, in the order they are listed.
std::vector<std::string> KnownTasks();

}  // namespace distlm::glue
