#include "common/data/batch.h"

#include "common/glue/features.h"
#include "common/runtime/errors.h"

namespace distlm::data {

FeatureTensors ToTensors(const std::vector<glue::InputFeatures>& features) {
  if (features.empty()) throw UserError("the data set is empty: no examples to train or evaluate on");
  const int64_t n = static_cast<int64_t>(features.size());
  const int64_t len = static_cast<int64_t>(features[0].input_ids.size());
  auto ids = torch::empty({n, len}, torch::kLong), seg = torch::empty({n, len}, torch::kLong),
       mask = torch::empty({n, len}, torch::kLong), labels = torch::empty({n}, torch::kLong);
  FeatureTensors out;
  for (int64_t i = 0; i < n; ++i) {
    const auto& f = features[i];
    if (static_cast<int64_t>(f.input_ids.size()) != len || f.segment_ids.size() != f.input_ids.size() ||
        f.input_mask.size() != f.input_ids.size()) {
      throw UserError("example " + f.guid + ": features are not padded to one length");
    }
    std::copy(f.input_ids.begin(), f.input_ids.end(), ids[i].data_ptr<int64_t>());
    std::copy(f.segment_ids.begin(), f.segment_ids.end(), seg[i].data_ptr<int64_t>());
    std::copy(f.input_mask.begin(), f.input_mask.end(), mask[i].data_ptr<int64_t>());
    labels[i] = f.label_id;
    out.guids.push_back(f.guid);
  }
  out.input_ids = ids;
  out.segment_ids = seg;
  out.input_mask = mask;
  out.labels = labels;
  return out;
}

Batch MakeBatch(const FeatureTensors& data, const std::vector<int64_t>& indices, bool trim_padding) {
  auto index = torch::tensor(indices, torch::kLong);
  Batch b{data.input_ids.index_select(0, index), data.segment_ids.index_select(0, index),
          data.input_mask.index_select(0, index), data.labels.index_select(0, index)};
  if (trim_padding) {
    int64_t longest = b.input_mask.sum(1).max().item<int64_t>();
    longest = std::max<int64_t>(longest, 1);
    b.input_ids = b.input_ids.narrow(1, 0, longest).contiguous();
    b.segment_ids = b.segment_ids.narrow(1, 0, longest).contiguous();
    b.input_mask = b.input_mask.narrow(1, 0, longest).contiguous();
  }
  return b;
}

Batch Batch::To(const torch::Device& device) const {
  if (input_ids.device() == device) return *this;
  // non_blocking: the host copies are made per batch and stay alive until the step is done.
  return {input_ids.to(device, /*non_blocking=*/true), segment_ids.to(device, true),
          input_mask.to(device, true), labels.to(device, true)};
}

}  // namespace distlm::data
