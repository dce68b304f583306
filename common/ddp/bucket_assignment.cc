#include "common/ddp/bucket_assignment.h"

#include <algorithm>
#include <map>
#include <string>

#include "common/runtime/errors.h"

namespace distlm::ddp {

std::vector<BucketPlan> AssignBuckets(const std::vector<ParamSize>& params, int64_t first_cap, int64_t cap) {
  if (first_cap <= 0 || cap <= 0) {
    throw UserError("DistributedDataParallel: bucket caps must be positive (first bucket " + std::to_string(first_cap) +
                    " bytes, others " + std::to_string(cap) + " bytes)");
  }
  struct Open {
    BucketPlan bucket;
    bool first = true;  // the next bucket this dtype closes is its first
  };
  std::map<c10::ScalarType, Open> open;
  std::vector<BucketPlan> closed;
  for (size_t i = params.size(); i-- > 0;) {
    const ParamSize& p = params[i];
    if (p.bytes < 0) {
      throw UserError("DistributedDataParallel: parameter " + std::to_string(i) + " has a negative size (" +
                      std::to_string(p.bytes) + " bytes)");
    }
    Open& o = open[p.dtype];
    o.bucket.dtype = p.dtype;
    o.bucket.cap = o.first ? first_cap : cap;
    o.bucket.params.push_back(i);
    o.bucket.bytes += p.bytes;
    if (o.bucket.bytes >= o.bucket.cap) {
      closed.push_back(std::move(o.bucket));
      o.bucket = BucketPlan{};
      o.first = false;
    }
  }
  for (auto& [dtype, o] : open) {
    if (!o.bucket.params.empty()) closed.push_back(std::move(o.bucket));
  }
  // Within one dtype the buckets are already in order; across dtypes, interleave them by the
  // parameter whose gradient each expects first.
  std::stable_sort(closed.begin(), closed.end(),
                   [](const BucketPlan& a, const BucketPlan& b) { return a.params.front() > b.params.front(); });
  return closed;
}

}  // namespace distlm::ddp
