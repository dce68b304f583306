#include <algorithm>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "common/data/batch.h"
#include "common/data/sampler.h"
#include "common/glue/features.h"
#include "common/runtime/errors.h"

namespace distlm::data {
namespace {

TEST(SamplerTest, ShuffledIsAPermutationThatChangesWithTheEpoch) {
  DistributedSampler s(100, 1, 0, true, 42);
  auto e0 = s.Indices();
  std::vector<int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> all(100);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(sorted, all);
  EXPECT_NE(e0, all);
  EXPECT_EQ(s.Indices(), e0);  // same epoch, same order
  s.set_epoch(1);
  EXPECT_NE(s.Indices(), e0);
  // torch semantics: the permutation is randperm with a generator seeded with seed + epoch.
  DistributedSampler t(100, 1, 0, true, 41);
  t.set_epoch(2);
  DistributedSampler u(100, 1, 0, true, 42);
  u.set_epoch(1);
  EXPECT_EQ(t.Indices(), u.Indices());
}

TEST(SamplerTest, RanksInterleaveThePermutationAndPad) {
  const int64_t n = 10;
  DistributedSampler single(n, 1, 0, true, 7);
  auto perm = single.Indices();
  const int world = 4;
  // ceil(10 / 4) = 3 each; total 12: positions 10 and 11 repeat positions 0 and 1.
  std::vector<int64_t> padded = perm;
  padded.push_back(perm[0]);
  padded.push_back(perm[1]);
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, world, r, true, 7);
    EXPECT_EQ(s.num_samples(), 3);
    auto mine = s.Indices();
    ASSERT_EQ(mine.size(), 3u);
    for (int j = 0; j < 3; ++j) EXPECT_EQ(mine[j], padded[r + j * world]);
  }
}

TEST(SamplerTest, LocalBatchesTogetherAreTheSingleNodeBatch) {
  // The property the parity checks rest on: per-rank batch B/N at step s, taken over all
  // ranks, is exactly the single-node batch of size B at step s.
  const int64_t n = 48, B = 8;
  for (int world : {2, 4}) {
    auto single = MakeBatches(DistributedSampler(n, 1, 0, true, 3).Indices(), B);
    std::vector<std::vector<std::vector<int64_t>>> per_rank;
    for (int r = 0; r < world; ++r) {
      per_rank.push_back(MakeBatches(DistributedSampler(n, world, r, true, 3).Indices(), B / world));
    }
    for (size_t step = 0; step < single.size(); ++step) {
      std::multiset<int64_t> joined;
      for (int r = 0; r < world; ++r) joined.insert(per_rank[r][step].begin(), per_rank[r][step].end());
      EXPECT_EQ(joined, std::multiset<int64_t>(single[step].begin(), single[step].end()))
          << "world " << world << " step " << step;
    }
  }
}

TEST(SamplerTest, SequentialAndErrors) {
  DistributedSampler s(5, 1, 0, false, 0);
  EXPECT_EQ(s.Indices(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_THROW(DistributedSampler(0, 1, 0, false, 0), UserError);
  EXPECT_THROW(DistributedSampler(5, 2, 2, false, 0), UserError);
  EXPECT_EQ(MakeBatches({0, 1, 2, 3, 4}, 2).size(), 3u);
  EXPECT_EQ(MakeBatches({0, 1, 2, 3, 4}, 2, true).size(), 2u);
  EXPECT_THROW(MakeBatches({0}, 0), UserError);
}

TEST(BatchTest, DynamicPaddingCutsToTheLongestRow) {
  std::vector<glue::InputFeatures> f(3);
  const std::vector<int64_t> lengths = {3, 5, 2};
  for (int i = 0; i < 3; ++i) {
    f[i].guid = "g" + std::to_string(i);
    f[i].input_ids.assign(8, 0);
    f[i].input_mask.assign(8, 0);
    f[i].segment_ids.assign(8, 0);
    for (int64_t j = 0; j < lengths[i]; ++j) {
      f[i].input_ids[j] = 10 + j;
      f[i].input_mask[j] = 1;
    }
    f[i].label_id = i % 2;
  }
  FeatureTensors t = ToTensors(f);
  EXPECT_EQ(t.size(), 3);
  Batch full = MakeBatch(t, {0, 2}, false);
  EXPECT_EQ(full.input_ids.size(1), 8);
  Batch trimmed = MakeBatch(t, {0, 2}, true);
  EXPECT_EQ(trimmed.input_ids.size(1), 3);
  EXPECT_TRUE(torch::equal(trimmed.input_ids, full.input_ids.narrow(1, 0, 3)));
  EXPECT_EQ(MakeBatch(t, {1, 2}, true).input_ids.size(1), 5);
  EXPECT_EQ(trimmed.labels[1].item<int64_t>(), 0);
  EXPECT_THROW(ToTensors({}), UserError);
}

}  // namespace
}  // namespace distlm::data
