#include "common/zero/flat_layout.h"

#include <algorithm>

#include "common/runtime/errors.h"

namespace distlm::zero {

FlatLayout::FlatLayout(std::vector<int64_t> numels, int world_size)
    : numels_(std::move(numels)), world_size_(world_size) {
  if (world_size_ < 1) throw UserError("ZeRO: world size " + std::to_string(world_size_) + " must be >= 1");
  for (int64_t n : numels_) {
    if (n < 0) throw UserError("ZeRO: a parameter with a negative number of elements");
    offsets_.push_back(total_);
    total_ += n;
  }
  shard_ = (total_ + world_size_ - 1) / world_size_;
}

int64_t FlatLayout::real_numel(int rank) const {
  const int64_t begin = shard_begin(rank);
  return std::max<int64_t>(0, std::min(shard_, total_ - begin));
}

std::vector<Segment> FlatLayout::Segments(int rank) const {
  const int64_t begin = shard_begin(rank), end = begin + shard_;
  std::vector<Segment> out;
  for (size_t i = 0; i < numels_.size(); ++i) {
    const int64_t lo = std::max(begin, offsets_[i]);
    const int64_t hi = std::min(end, offsets_[i] + numels_[i]);
    if (hi > lo) out.push_back(Segment{i, lo, hi - lo, lo - offsets_[i]});
  }
  return out;
}

std::string FlatLayout::Describe() const {
  return std::to_string(numels_.size()) + " parameters, " + std::to_string(total_) + " elements padded to " +
         std::to_string(padded_numel()) + " = " + std::to_string(world_size_) + " x " + std::to_string(shard_);
}

}  // namespace distlm::zero
