// Where each parameter lives in ZeRO's flat buffer, and which part of it a rank owns.
//
// Parameters are laid end to end in registration order (parameter i at offsets[i], numel[i]
// elements), and the total is padded with zeros up to a multiple of the world size, so every
// rank owns the same number of elements: rank r owns [r * shard_numel, (r + 1) * shard_numel).
// Equal shards are what reduce-scatter and all-gather need (each rank contributes and receives
// one block of the same size); the padding is at most world_size - 1 elements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace distlm::zero {

// The part of one parameter that falls inside a shard.
struct Segment {
  size_t param = 0;           // index of the parameter
  int64_t flat_begin = 0;     // first element, as an offset in the flat buffer
  int64_t numel = 0;          // elements in the shard (> 0)
  int64_t param_begin = 0;    // first element, as an offset inside the flattened parameter
};

class FlatLayout {
 public:
  // numels: elements of each parameter, in order; world_size >= 1.
  FlatLayout(std::vector<int64_t> numels, int world_size);

  int world_size() const { return world_size_; }
  size_t num_params() const { return numels_.size(); }
  int64_t numel(size_t i) const { return numels_[i]; }
  int64_t offset(size_t i) const { return offsets_[i]; }
  int64_t total_numel() const { return total_; }         // sum of the parameters' elements
  int64_t padded_numel() const { return shard_ * world_size_; }
  int64_t padding() const { return padded_numel() - total_; }
  int64_t shard_numel() const { return shard_; }         // ceil(total / world_size)
  int64_t shard_begin(int rank) const { return static_cast<int64_t>(rank) * shard_; }
  // Elements of real parameters (not padding) in a rank's shard.
  int64_t real_numel(int rank) const;
  // The parameters' pieces inside a rank's shard, in flat order.
  std::vector<Segment> Segments(int rank) const;
  // "41 parameters, 561026 elements padded to 561028 = 4 x 140257"
  std::string Describe() const;

 private:
  std::vector<int64_t> numels_;
  std::vector<int64_t> offsets_;
  int world_size_;
  int64_t total_ = 0;
  int64_t shard_ = 0;
};

}  // namespace distlm::zero
