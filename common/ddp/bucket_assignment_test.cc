// AssignBuckets against layouts computed by hand from the rule in bucket_assignment.h, and
// the rule's invariants on random sizes.
#include "common/ddp/bucket_assignment.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "common/runtime/errors.h"

namespace distlm::ddp {
namespace {

using Indices = std::vector<std::vector<size_t>>;

std::vector<ParamSize> Floats(const std::vector<int64_t>& bytes) {
  std::vector<ParamSize> out;
  for (int64_t b : bytes) out.push_back({b, c10::ScalarType::Float});
  return out;
}

Indices IndicesOf(const std::vector<BucketPlan>& buckets) {
  Indices out;
  for (const auto& b : buckets) out.push_back(b.params);
  return out;
}

TEST(BucketAssignmentTest, ReverseOrderFirstCapThenCap) {
  // Walking back: d 400 (< 500), + c 300 = 700 >= 500 closes the first bucket; then the cap
  // is 600: b 200, + a 100 = 300, still open at the end.
  auto buckets = AssignBuckets(Floats({100, 200, 300, 400}), /*first_cap=*/500, /*cap=*/600);
  EXPECT_EQ(IndicesOf(buckets), (Indices{{3, 2}, {1, 0}}));
  ASSERT_EQ(buckets.size(), 2u);
  EXPECT_EQ(buckets[0].bytes, 700);
  EXPECT_EQ(buckets[0].cap, 500);
  EXPECT_EQ(buckets[1].bytes, 300);
  EXPECT_EQ(buckets[1].cap, 600);
}

TEST(BucketAssignmentTest, ReachingTheCapExactlyCloses) {
  EXPECT_EQ(IndicesOf(AssignBuckets(Floats({4, 4, 4, 4}), 8, 8)), (Indices{{3, 2}, {1, 0}}));
  EXPECT_EQ(IndicesOf(AssignBuckets(Floats({4, 4, 4, 4}), 9, 9)), (Indices{{3, 2, 1}, {0}}));
}

TEST(BucketAssignmentTest, ABigParameterOnAnEmptyBucketIsAlone) {
  // 10 + 10 reach the first cap 16; 5000 alone exceeds the cap 100 and closes its own bucket.
  auto buckets = AssignBuckets(Floats({10, 5000, 10, 10}), 16, 100);
  EXPECT_EQ(IndicesOf(buckets), (Indices{{3, 2}, {1}, {0}}));
  EXPECT_EQ(buckets[1].bytes, 5000);
}

TEST(BucketAssignmentTest, ABigParameterJoinsAnOpenBucket) {
  // PyTorch's rule checks the cap after adding: an open bucket takes the big one too.
  auto buckets = AssignBuckets(Floats({5000, 10}), 16, 100);
  EXPECT_EQ(IndicesOf(buckets), (Indices{{1, 0}}));
  EXPECT_EQ(buckets[0].bytes, 5010);
}

TEST(BucketAssignmentTest, DefaultCapsAreOneAndTwentyFiveMiB) {
  const int64_t MiB = 1 << 20;
  // 0.5 MiB + 2 MiB closes the 1 MiB bucket; 30 MiB alone closes a 25 MiB one; 24 MiB + 1 MiB
  // reach 25 MiB exactly; the last 1 MiB stays open.
  auto buckets = AssignBuckets(Floats({MiB, MiB, 24 * MiB, 30 * MiB, 2 * MiB, MiB / 2}));
  EXPECT_EQ(IndicesOf(buckets), (Indices{{5, 4}, {3}, {2, 1}, {0}}));
  EXPECT_EQ(buckets[0].cap, MiB);
  EXPECT_EQ(buckets[1].cap, 25 * MiB);
  EXPECT_EQ(buckets[2].bytes, 25 * MiB);
}

TEST(BucketAssignmentTest, DtypesGetTheirOwnBucketsAndFirstCaps) {
  // Walking back: d (f64, 100) opens f64's first bucket; c and b (f32, 600 each) fill f32's
  // first bucket (1200 >= 1000); a (f64, 700) brings f64's to 800, open at the end. The f64
  // bucket expects its first gradient (d, index 3) before the f32 one (c, index 2).
  std::vector<ParamSize> params = {{700, c10::ScalarType::Double},
                                   {600, c10::ScalarType::Float},
                                   {600, c10::ScalarType::Float},
                                   {100, c10::ScalarType::Double}};
  auto buckets = AssignBuckets(params, 1000, 1000);
  EXPECT_EQ(IndicesOf(buckets), (Indices{{3, 0}, {2, 1}}));
  EXPECT_EQ(buckets[0].dtype, c10::ScalarType::Double);
  EXPECT_EQ(buckets[0].cap, 1000);
  EXPECT_EQ(buckets[1].dtype, c10::ScalarType::Float);
  EXPECT_EQ(buckets[1].cap, 1000);
}

TEST(BucketAssignmentTest, InvariantsOnRandomSizes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + rng() % 40;
    std::vector<ParamSize> params;
    for (size_t i = 0; i < n; ++i) params.push_back({static_cast<int64_t>(rng() % 3000), c10::ScalarType::Float});
    const int64_t first_cap = 1 + rng() % 2000, cap = 1 + rng() % 5000;
    auto buckets = AssignBuckets(params, first_cap, cap);
    std::set<size_t> seen;
    size_t expected_next = n;  // one dtype: buckets tile the indices from the top down
    for (size_t b = 0; b < buckets.size(); ++b) {
      const auto& bucket = buckets[b];
      ASSERT_FALSE(bucket.params.empty());
      EXPECT_EQ(bucket.cap, b == 0 ? first_cap : cap);
      int64_t bytes = 0, before_last = 0;
      for (size_t k = 0; k < bucket.params.size(); ++k) {
        EXPECT_EQ(bucket.params[k], expected_next - 1 - k) << "trial " << trial;
        EXPECT_TRUE(seen.insert(bucket.params[k]).second);
        bytes += params[bucket.params[k]].bytes;
        if (k + 1 < bucket.params.size()) before_last = bytes;
      }
      expected_next -= bucket.params.size();
      EXPECT_EQ(bucket.bytes, bytes);
      EXPECT_LT(before_last, bucket.cap) << "the bucket should have closed earlier (trial " << trial << ")";
      if (b + 1 < buckets.size()) EXPECT_GE(bytes, bucket.cap) << "closed below its cap (trial " << trial << ")";
    }
    EXPECT_EQ(seen.size(), n);
  }
}

TEST(BucketAssignmentTest, BadCapsAreOneLineErrors) {
  try {
    AssignBuckets(Floats({4}), 0, 10);
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(),
                 "DistributedDataParallel: bucket caps must be positive (first bucket 0 bytes, others 10 bytes)");
  }
  EXPECT_THROW(AssignBuckets(Floats({4}), 10, -1), UserError);
  EXPECT_THROW(AssignBuckets(Floats({-4}), 10, 10), UserError);
  EXPECT_TRUE(AssignBuckets({}, 10, 10).empty());
}

}  // namespace
}  // namespace distlm::ddp
