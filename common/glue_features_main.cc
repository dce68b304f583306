// glue_features: prints the BERT input features of every example of a GLUE TSV, one JSON
// object per line, so users can see exactly what the model will be fed:
//
//   bazel run //common:glue_features -- --input=RTE/dev.tsv --split=dev
//       --vocab_file=bert-base-uncased/vocab.txt --do_lower_case=true --max_seq_length=128
//
//   {"guid":"dev-0","input_ids":[101,...],"segment_ids":[0,...],"input_mask":[1,...],"label_id":1}
//
// Lists are padded to --max_seq_length; label_id is left out for the test split. Bad flags and
// bad files end with one line "error: ..." and exit status 2.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "common/glue/features.h"
#include "common/glue/processors.h"
#include "common/runtime/errors.h"
#include "common/runtime/runfiles.h"
#include "common/tokenizer/bert_tokenizer.h"

ABSL_FLAG(std::string, input, "", "the GLUE TSV file to convert (required)");
ABSL_FLAG(std::string, split, "train",
          "train, dev or test: the file's layout (test files have no label column) and the guid prefix");
ABSL_FLAG(std::string, vocab_file, "", "the model's WordPiece vocabulary, vocab.txt (required)");
ABSL_FLAG(bool, do_lower_case, true, "lower-case and strip accents, as uncased models expect");
ABSL_FLAG(int, max_seq_length, 128, "pad or truncate every example to this many tokens");
ABSL_FLAG(std::string, task, "rte", "the GLUE task whose layout the file has (rte, mrpc, sst-2)");

namespace distlm {
namespace {

// absl::ParseCommandLine answers an unknown flag or a bad value with a multi-line report and
// exit status 1. This command promises one line and status 2, so every flag is checked here
// first with absl's own parsers; absl then parses the same, now valid, command line.
void CheckFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') {
      throw UserError("unexpected argument '" + std::string(arg) + "' (flags are --name=value; see --help)");
    }
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t eq = arg.find('=');
    std::string name(arg.substr(0, eq));
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(arg.substr(eq + 1));
    if (name.rfind("help", 0) == 0 || name == "version" || name == "flagfile" || name == "fromenv" ||
        name == "tryfromenv" || name == "undefok" || name == "only_check_args") {
      continue;  // absl's own flags: absl handles them
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    bool negated = false;
    if (flag == nullptr && name.rfind("no", 0) == 0) {  // --noflag for booleans
      flag = absl::FindCommandLineFlag(name.substr(2));
      negated = flag != nullptr && flag->IsOfType<bool>() && !value;
      if (!negated) flag = nullptr;
    }
    if (flag == nullptr) throw UserError("unknown flag --" + name + " (see --help)");
    if (!value) {
      if (flag->IsOfType<bool>()) {
        value = negated ? "false" : "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        throw UserError("flag --" + name + " needs a value");
      }
    }
    std::string error;
    if (!flag->ParseFrom(*value, &error)) throw UserError("--" + name + "=" + *value + ": " + error);
  }
}

// Relative paths are relative to where the user typed the command, also under `bazel run`.
std::string UserPath(const std::string& flag, const std::string& path) {
  if (path.empty()) throw UserError("--" + flag + " is required (see --help)");
  if (path[0] == '/') return path;
  return UserWorkingDirectory() + "/" + path;
}

int Main(int argc, char** argv) {
  CheckFlags(argc, argv);
  absl::ParseCommandLine(argc, argv);
  const std::string input = UserPath("input", absl::GetFlag(FLAGS_input));
  const std::string vocab_file = UserPath("vocab_file", absl::GetFlag(FLAGS_vocab_file));
  glue::Split split;
  try {
    split = glue::ParseSplit(absl::GetFlag(FLAGS_split));
  } catch (const UserError& e) {
    throw UserError(std::string("--split: ") + e.what());
  }
  const int max_seq_length = absl::GetFlag(FLAGS_max_seq_length);
  if (max_seq_length < 3 || max_seq_length > glue::kMaxSupportedSeqLength) {
    throw UserError("--max_seq_length=" + std::to_string(max_seq_length) + " is outside [3, " +
                    std::to_string(glue::kMaxSupportedSeqLength) + "]");
  }
  std::unique_ptr<glue::DataProcessor> processor;
  try {
    processor = glue::MakeProcessor(absl::GetFlag(FLAGS_task));
  } catch (const UserError& e) {
    throw UserError(std::string("--task: ") + e.what());
  }
  const auto tokenizer = tokenizer::BertTokenizer::FromVocabFile(vocab_file, absl::GetFlag(FLAGS_do_lower_case));
  const auto examples = processor->GetExamples(input, split);
  const auto features = glue::ConvertExamplesToFeatures(examples, processor->GetLabels(), max_seq_length, tokenizer);

  for (const glue::InputFeatures& f : features) {
    nlohmann::ordered_json j;
    j["guid"] = f.guid;
    j["input_ids"] = f.input_ids;
    j["segment_ids"] = f.segment_ids;
    j["input_mask"] = f.input_mask;
    if (split != glue::Split::kTest) j["label_id"] = f.label_id;
    const std::string line = j.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) throw UserError("cannot write to standard output");
  return 0;
}

}  // namespace
}  // namespace distlm

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "prints the BERT features of each example of a GLUE TSV as one JSON object per line:\n"
      "  glue_features --input=dev.tsv --split=dev --vocab_file=vocab.txt --do_lower_case=true "
      "--max_seq_length=128");
  return distlm::RunMain([&] { return distlm::Main(argc, argv); });
}
