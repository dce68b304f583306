// Fuzz entry point for the GLUE TSV reader and everything after it: arbitrary bytes are
// parsed as a TSV, read as each split of each task, and turned into features. Bad input may
// only ever raise UserError; anything else (another exception, a crash, a broken invariant)
// aborts. Build with clang's libFuzzer (see common/tokenizer/README.md) or replay with
// :tsv_fuzzer_test.
//
// Invariants of every feature: max_seq_length long; the mask is 1s then 0s; input_ids start
// with [CLS], end their real part with [SEP] and hold [PAD] after it; segment ids are 0s, then
// 1s starting right after a [SEP] (pairs), then 0s over the padding; the label id is -1
// exactly when there is no label. (A [SEP] may also come from the text itself, as literal
// "[SEP]" is a special token, so [SEP]s are not counted.)
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/glue/features.h"
#include "common/glue/processors.h"
#include "common/glue/tsv.h"
#include "common/runtime/errors.h"
#include "common/tokenizer/bert_tokenizer.h"

namespace {

using distlm::UserError;
namespace glue = distlm::glue;
namespace tokenizer = distlm::tokenizer;

constexpr int kMaxSeqLength = 12;

void Check(bool ok) {
  if (!ok) std::abort();
}

const tokenizer::BertTokenizer& Tokenizer() {
  static const tokenizer::BertTokenizer* const t = [] {
    std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "entailment", "the"};
    for (char c = 'a'; c <= 'z'; ++c) {
      tokens.push_back(std::string(1, c));
      tokens.push_back("##" + std::string(1, c));
    }
    return new tokenizer::BertTokenizer(tokenizer::Vocab::FromTokens(tokens, "fuzz-vocab"), true);
  }();
  return *t;
}

void CheckFeatures(const glue::InputExample& ex, const glue::InputFeatures& f) {
  const auto& tok = Tokenizer();
  const size_t n = kMaxSeqLength;
  Check(f.input_ids.size() == n && f.input_mask.size() == n && f.segment_ids.size() == n);
  Check(f.guid == ex.guid);
  Check((f.label_id == -1) == !ex.label.has_value());
  size_t real = 0;
  while (real < n && f.input_mask[real] == 1) ++real;
  Check(real >= 2);
  for (size_t i = 0; i < n; ++i) {
    if (i >= real) {
      Check(f.input_mask[i] == 0 && f.input_ids[i] == tok.pad_id() && f.segment_ids[i] == 0);
    } else if (i > 0) {
      Check(f.segment_ids[i] == f.segment_ids[i - 1] ||
            (f.segment_ids[i - 1] == 0 && f.segment_ids[i] == 1 && f.input_ids[i - 1] == tok.sep_id()));
    }
  }
  Check(f.input_ids[0] == tok.cls_id() && f.input_ids[real - 1] == tok.sep_id() && f.segment_ids[0] == 0);
  // Only a pair can have a second segment.
  Check(f.segment_ids[real - 1] == 0 || !ex.text_b.empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  glue::TsvTable table;
  try {
    table = glue::ParseTsv(text, "fuzz.tsv");
  } catch (const UserError&) {
    return 0;
  }
  Check(!table.header.fields.empty());
  for (const auto& row : table.rows) Check(!row.fields.empty() && row.line > table.header.line);
  for (const std::string& task : glue::KnownTasks()) {
    auto processor = glue::MakeProcessor(task);
    for (glue::Split split : {glue::Split::kTrain, glue::Split::kDev, glue::Split::kTest}) {
      std::vector<glue::InputExample> examples;
      try {
        examples = processor->CreateExamples(table, split);
      } catch (const UserError&) {
        continue;
      }
      Check(examples.size() == table.rows.size());
      // Labels were validated by the processor, so conversion must not throw.
      const auto features =
          glue::ConvertExamplesToFeatures(examples, processor->GetLabels(), kMaxSeqLength, Tokenizer());
      Check(features.size() == examples.size());
      for (size_t i = 0; i < features.size(); ++i) CheckFeatures(examples[i], features[i]);
    }
  }
  return 0;
}
