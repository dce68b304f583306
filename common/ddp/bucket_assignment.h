// Which gradients DistributedDataParallel all-reduces together.
//
// One all-reduce per parameter pays the collective's fixed cost (a few network round trips)
// hundreds of times per step; one all-reduce of everything cannot start before the whole
// backward pass is over. Buckets sit between the two. Gradients are produced in roughly the
// reverse of the order in which the module registered its parameters (the last layer's
// first), so buckets are filled walking the parameters backwards: the first bucket fills
// with the first gradients backward produces and its all-reduce can start while backward is
// still computing the rest.
//
// The rule, PyTorch's (c10d::compute_bucket_assignment_by_size):
//   - walk the parameters from the last registered to the first; each dtype has its own
//     open bucket (an all-reduce needs one dtype);
//   - add the parameter to its dtype's open bucket; if the bucket now holds >= its cap, close
//     it. A dtype's first bucket has the cap first_cap (1 MiB by default, so communication
//     starts early), the following ones cap (25 MiB by default);
//   - at the end, close what is open; order the buckets by when their first gradient is
//     expected, i.e. by their highest parameter index, descending.
// So a bucket closes at the first parameter that takes it to the cap: it can exceed the cap by
// at most one parameter, and a parameter bigger than the cap that arrives at an empty bucket
// is alone in it.
//
// PyTorch 1.13 uses one bucket for the first iteration and then rebuilds the buckets with
// these caps in the order gradients actually became ready. Walking the registration order
// backwards gives that order directly for models whose forward uses the parameters in the
// order they were registered (BERT does), without the extra iteration.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace distlm::ddp {

inline constexpr int64_t kDefaultFirstBucketCapBytes = int64_t{1} << 20;  // 1 MiB
inline constexpr int64_t kDefaultBucketCapBytes = int64_t{25} << 20;      // 25 MiB

// What the assignment needs to know of a parameter.
struct ParamSize {
  int64_t bytes = 0;
  c10::ScalarType dtype = c10::ScalarType::Float;
};

struct BucketPlan {
  // Parameter indices (registration order), highest first: the order backward fills them.
  std::vector<size_t> params;
  int64_t bytes = 0;
  int64_t cap = 0;  // the cap the bucket was filled against
  c10::ScalarType dtype = c10::ScalarType::Float;
};

// The buckets for `params` (in registration order), in the order their all-reduces are
// launched. Every parameter is in exactly one bucket. Throws distlm::UserError for a cap
// <= 0 or a negative size.
std::vector<BucketPlan> AssignBuckets(const std::vector<ParamSize>& params,
                                      int64_t first_cap = kDefaultFirstBucketCapBytes,
                                      int64_t cap = kDefaultBucketCapBytes);

}  // namespace distlm::ddp
