// Which examples each rank trains on, epoch by epoch.
//
// DistributedSampler has the semantics of torch.utils.data.DistributedSampler: a permutation of
// the data set drawn from a generator seeded with seed + epoch, padded (by repeating its start)
// to a multiple of the number of ranks, of which rank r takes positions r, r + N, r + 2N, ...
// With a per-rank batch of B/N, the N ranks' batches at step s are together exactly the
// positions s*B .. s*B+B-1 of the permutation: the single-node batch of step s (N = 1) when the
// data set size is a multiple of N. Single-node training uses it with N = 1 for that reason.
#pragma once

#include <cstdint>
#include <vector>

namespace distlm::data {

class DistributedSampler {
 public:
  // shuffle = false gives 0, 1, 2, ... (the evaluation order).
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle, uint64_t seed);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // This rank's indices for the current epoch, in order.
  std::vector<int64_t> Indices() const;

  // Examples per rank per epoch: ceil(dataset_size / num_replicas).
  int64_t num_samples() const;

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  int64_t epoch_ = 0;
};

// Splits indices into consecutive batches of batch_size (the last may be smaller unless
// drop_last).
std::vector<std::vector<int64_t>> MakeBatches(const std::vector<int64_t>& indices, int64_t batch_size,
                                              bool drop_last = false);

}  // namespace distlm::data
