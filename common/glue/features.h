// InputExample -> BERT input features, exactly as the reference's convert_examples_to_features
// (pytorch_transformers 1.2.0, BERT settings):
//
//   [CLS] A [SEP] B [SEP]      segment ids 0 ... 0 1 ... 1, input mask 1 per token
//   then right padding to max_seq_length with [PAD]'s id, segment 0, mask 0.
//
// Pairs longer than max_seq_length - 3 lose tokens from the end of the longer sequence, one at
// a time (from B when they are equal). Single sentences (empty text_b) become [CLS] A [SEP],
// cut to max_seq_length - 2. As in the reference, a text_b that yields no tokens gets no second
// [SEP] (but was still truncated as a pair).
//
// Plain std::vector, no LibTorch: //common/data turns these into tensors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/glue/processors.h"
#include "common/tokenizer/bert_tokenizer.h"

namespace distlm::glue {

struct InputFeatures {
  std::string guid;
  std::vector<int64_t> input_ids, input_mask, segment_ids;  // each max_seq_length long
  int64_t label_id = -1;  // -1: no label (test split)
};

// Longer than any BERT's position table (512); a larger --max_seq_length is a typo that would
// only exhaust memory while padding.
inline constexpr int kMaxSupportedSeqLength = 1 << 16;

// Throws UserError when max_seq_length is outside [3, kMaxSupportedSeqLength], and for an
// example whose label is not in labels (naming the guid and the label).
std::vector<InputFeatures> ConvertExamplesToFeatures(const std::vector<InputExample>& examples,
                                                     const std::vector<std::string>& labels, int max_seq_length,
                                                     const tokenizer::BertTokenizer& tokenizer);

// The reference's _truncate_seq_pair: pops the last token of the longer list (of b on ties)
// until both fit in max_length together.
void TruncateSeqPair(std::vector<std::string>* a, std::vector<std::string>* b, size_t max_length);

}  // namespace distlm::glue
