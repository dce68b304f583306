// Features as tensors, and batches cut from them.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>

namespace distlm::glue {
struct InputFeatures;
}

namespace distlm::data {

// A whole split as tensors: [N, max_seq_length] int64 each, labels [N] (-1 for unlabelled).
struct FeatureTensors {
  torch::Tensor input_ids, segment_ids, input_mask, labels;
  std::vector<std::string> guids;
  int64_t size() const { return input_ids.size(0); }
};

FeatureTensors ToTensors(const std::vector<glue::InputFeatures>& features);

struct Batch {
  torch::Tensor input_ids, segment_ids, input_mask, labels;
  int64_t size() const { return input_ids.size(0); }
  // The same batch on `device` (itself when it is there already).
  Batch To(const torch::Device& device) const;
};

// The rows `indices`. With trim_padding (dynamic padding), the batch is cut to its longest row
// (the largest input_mask sum) instead of max_seq_length: every row keeps all of its tokens, so
// the model computes the same values on them.
Batch MakeBatch(const FeatureTensors& data, const std::vector<int64_t>& indices, bool trim_padding);

}  // namespace distlm::data
