#include "common/data/sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include "common/runtime/errors.h"

namespace distlm::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle,
                                       uint64_t seed)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle), seed_(seed) {
  if (dataset_size <= 0) throw UserError("the data set is empty: nothing to sample");
  if (num_replicas <= 0 || rank < 0 || rank >= num_replicas) {
    throw UserError("sampler rank " + std::to_string(rank) + " is outside world size " +
                    std::to_string(num_replicas));
  }
}

int64_t DistributedSampler::num_samples() const {
  return (dataset_size_ + num_replicas_ - 1) / num_replicas_;
}

std::vector<int64_t> DistributedSampler::Indices() const {
  std::vector<int64_t> order(dataset_size_);
  if (shuffle_) {
    // torch.randperm(n, generator=g) with g.manual_seed(seed + epoch), as DistributedSampler.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ + static_cast<uint64_t>(epoch_));
    auto perm = torch::randperm(dataset_size_, gen, torch::kLong);
    const int64_t* p = perm.data_ptr<int64_t>();
    order.assign(p, p + dataset_size_);
  } else {
    for (int64_t i = 0; i < dataset_size_; ++i) order[i] = i;
  }
  const int64_t total = num_samples() * num_replicas_;
  for (int64_t i = dataset_size_; i < total; ++i) order.push_back(order[i - dataset_size_]);
  std::vector<int64_t> mine;
  mine.reserve(num_samples());
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[i]);
  return mine;
}

std::vector<std::vector<int64_t>> MakeBatches(const std::vector<int64_t>& indices, int64_t batch_size,
                                              bool drop_last) {
  if (batch_size <= 0) throw UserError("batch size must be >= 1, got " + std::to_string(batch_size));
  std::vector<std::vector<int64_t>> batches;
  for (size_t start = 0; start < indices.size(); start += batch_size) {
    size_t end = std::min(indices.size(), start + static_cast<size_t>(batch_size));
    if (drop_last && end - start < static_cast<size_t>(batch_size)) break;
    batches.emplace_back(indices.begin() + start, indices.begin() + end);
  }
  return batches;
}

}  // namespace distlm::data
