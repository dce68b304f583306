#include "common/glue/features.h"

#include <unordered_map>

#include "common/runtime/errors.h"

namespace distlm::glue {

void TruncateSeqPair(std::vector<std::string>* a, std::vector<std::string>* b, size_t max_length) {
  while (a->size() + b->size() > max_length) {
    if (a->size() > b->size()) {
      a->pop_back();
    } else {
      b->pop_back();
    }
  }
}

std::vector<InputFeatures> ConvertExamplesToFeatures(const std::vector<InputExample>& examples,
                                                     const std::vector<std::string>& labels, int max_seq_length,
                                                     const tokenizer::BertTokenizer& tokenizer) {
  if (max_seq_length < 3 || max_seq_length > kMaxSupportedSeqLength) {
    throw UserError("max_seq_length=" + std::to_string(max_seq_length) + " is outside [3, " +
                    std::to_string(kMaxSupportedSeqLength) + "] ([CLS] A [SEP] B [SEP] needs at least 3)");
  }
  const size_t max_len = static_cast<size_t>(max_seq_length);
  std::unordered_map<std::string, int64_t> label_map;
  for (size_t i = 0; i < labels.size(); ++i) label_map.emplace(labels[i], static_cast<int64_t>(i));

  std::vector<InputFeatures> features;
  features.reserve(examples.size());
  for (const InputExample& ex : examples) {
    InputFeatures f;
    f.guid = ex.guid;
    if (ex.label) {
      auto it = label_map.find(*ex.label);
      if (it == label_map.end()) {
        std::string known;
        for (const auto& l : labels) known += (known.empty() ? "" : ", ") + l;
        throw UserError("example " + ex.guid + ": label '" + *ex.label + "' is not one of the task's labels (" +
                        known + ")");
      }
      f.label_id = it->second;
    }

    std::vector<std::string> tokens_a = tokenizer.Tokenize(ex.text_a);
    std::vector<std::string> tokens_b;
    if (!ex.text_b.empty()) {
      tokens_b = tokenizer.Tokenize(ex.text_b);
      TruncateSeqPair(&tokens_a, &tokens_b, max_len - 3);
    } else if (tokens_a.size() > max_len - 2) {
      tokens_a.resize(max_len - 2);
    }

    f.input_ids.reserve(max_len);
    f.segment_ids.reserve(max_len);
    f.input_ids.push_back(tokenizer.cls_id());
    for (int64_t id : tokenizer.ConvertTokensToIds(tokens_a)) f.input_ids.push_back(id);
    f.input_ids.push_back(tokenizer.sep_id());
    f.segment_ids.assign(f.input_ids.size(), 0);
    if (!tokens_b.empty()) {
      for (int64_t id : tokenizer.ConvertTokensToIds(tokens_b)) f.input_ids.push_back(id);
      f.input_ids.push_back(tokenizer.sep_id());
      f.segment_ids.resize(f.input_ids.size(), 1);
    }
    f.input_mask.assign(f.input_ids.size(), 1);
    f.input_ids.resize(max_len, tokenizer.pad_id());
    f.input_mask.resize(max_len, 0);
    f.segment_ids.resize(max_len, 0);
    features.push_back(std::move(f));
  }
  return features;
}

}  // namespace distlm::glue
