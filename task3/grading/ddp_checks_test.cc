// The bucket layout the grader expects of task 3b (ExpectedBuckets), against the rule stated
// in task3/ddp.h: walk the parameters from the last to the first, add each to the open bucket,
// close it as soon as it holds at least the cap. Closed forms first, then the rule's invariants
// on random sizes. (These took over from the deleted second DDP's bucket tests: the rule the
// course holds students to is task 3's, so it is the one tested.)
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "task3/grading/ddp_checks.h"

namespace distlm::grading {
namespace {

using Sizes = std::vector<int64_t>;

TEST(ExpectedBucketsTest, WalksFromTheLastParameterAndClosesAtTheCap) {
  // float32: 4 bytes per element. Cap 2000 bytes = 500 elements. From the last: 400 (1600 B,
  // open), + 300 = 700 (2800 B >= 2000: closed); 200, + 100 = 300 (open at the end).
  EXPECT_EQ(ExpectedBuckets({100, 200, 300, 400}, 2000, /*last_first=*/true), (Sizes{700, 300}));
  // The forward-order mistake the grader recognises walks from the first parameter instead.
  EXPECT_EQ(ExpectedBuckets({100, 200, 300, 400}, 2000, /*last_first=*/false), (Sizes{600, 400}));
}

TEST(ExpectedBucketsTest, ReachingTheCapExactlyCloses) {
  EXPECT_EQ(ExpectedBuckets({4, 4, 4, 4}, 32, true), (Sizes{8, 8}));    // 32 bytes: closed
  EXPECT_EQ(ExpectedBuckets({4, 4, 4, 4}, 33, true), (Sizes{12, 4}));   // 32 < 33: one more
}

TEST(ExpectedBucketsTest, ABigParameterJoinsTheOpenBucketOrIsAlone) {
  // The cap is checked after adding: an open bucket takes the big one too...
  EXPECT_EQ(ExpectedBuckets({5000, 10}, 400, true), (Sizes{5010}));
  // ...and a big one that finds the bucket just closed is alone in its own.
  EXPECT_EQ(ExpectedBuckets({10, 5000, 100}, 400, true), (Sizes{100, 5000, 10}));
}

TEST(ExpectedBucketsTest, NoParametersNoBuckets) { EXPECT_TRUE(ExpectedBuckets({}, 100, true).empty()); }

TEST(ExpectedBucketsTest, InvariantsOnRandomSizes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 40;
    Sizes numels;
    for (size_t i = 0; i < n; ++i) numels.push_back(1 + static_cast<int64_t>(rng() % 3000));
    const int64_t cap = 1 + static_cast<int64_t>(rng() % 20000);
    const Sizes buckets = ExpectedBuckets(numels, cap, true);
    // The buckets tile the parameters from the last one down: each bucket is a run of them.
    size_t next = n;
    int64_t total = 0;
    for (size_t b = 0; b < buckets.size(); ++b) {
      int64_t sum = 0, before_last = 0;
      size_t k = next;
      while (sum < buckets[b]) {
        ASSERT_GT(k, 0u) << "trial " << trial << ": bucket " << b << " holds more than the parameters left";
        before_last = sum;
        sum += numels[--k];
      }
      ASSERT_EQ(sum, buckets[b]) << "trial " << trial << ": bucket " << b << " splits a parameter";
      EXPECT_LT(before_last * 4, cap) << "trial " << trial << ": bucket " << b << " should have closed earlier";
      if (b + 1 < buckets.size()) {
        EXPECT_GE(sum * 4, cap) << "trial " << trial << ": bucket " << b << " closed below the cap";
      }
      next = k;
      total += sum;
    }
    EXPECT_EQ(next, 0u) << "trial " << trial;
    int64_t all = 0;
    for (int64_t v : numels) all += v;
    EXPECT_EQ(total, all) << "trial " << trial;
  }
}

// The grader's layout message names the first bucket off the rule and the property it breaks,
// never the rule's sizes. Parameters 100, 200, 300, 400 elements, cap 2000 bytes: the rule gives
// {700, 300} (the last parameter first).
TEST(FirstBrokenBucketTest, NamesThePropertyNotTheAnswer) {
  const Sizes params = {100, 200, 300, 400}, want = {700, 300};
  auto says = [&](const Sizes& got) { return FirstBrokenBucket(got, want, params, 2000); };
  EXPECT_EQ(says({400, 600}), "bucket 0 (1600 bytes): it closed before reaching the cap of 2000 bytes, though it is "
                              "not the last; a bucket closes once it reaches the cap");
  EXPECT_EQ(says({1000}), "bucket 0 (4000 bytes): it had reached the cap of 2000 bytes before its last parameter "
                          "joined it; a bucket closes as soon as it reaches the cap");
  EXPECT_EQ(says({650, 350}), "bucket 0 (2600 bytes): it cuts a parameter in two; a bucket holds whole parameters");
  EXPECT_EQ(says({700}), "bucket 1: the all-reduces ended before every parameter was in one");
  EXPECT_EQ(says({700, 300, 5}), "bucket 2: every parameter was already in a bucket; each bucket is all-reduced once");
  for (const Sizes& got : {Sizes{400, 600}, Sizes{1000}, Sizes{650, 350}}) {
    EXPECT_EQ(says(got).find("700"), std::string::npos) << says(got);
  }
}

}  // namespace
}  // namespace distlm::grading
