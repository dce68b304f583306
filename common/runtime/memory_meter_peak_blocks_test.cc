// DISTLM_MEMORY_PEAK_BLOCKS (memory_meter.h): the sizes of the largest blocks live at the peak,
// against tensors of known sizes. Its own process: the variable is read once, at Install.
#include <cstdlib>

#include <gtest/gtest.h>
#include <torch/types.h>

#include "common/runtime/memory_meter.h"

namespace distlm::runtime {
namespace {

TEST(MemoryMeterPeakBlocksTest, NamesTheLargestBlocksAtThePeak) {
  ASSERT_EQ(setenv("DISTLM_MEMORY_PEAK_BLOCKS", "2", 1), 0);
  MemoryMeter::Install();
  MemoryMeter::ResetPeak();
  torch::Tensor keep = torch::empty({1 << 20}, torch::kFloat);  // 4 MiB, live through the peak
  {
    torch::Tensor a = torch::empty({3 << 20}, torch::kFloat);   // 12 MiB
    torch::Tensor b = torch::empty({2 << 20}, torch::kFloat);   // 8 MiB: the peak is a + b + keep
  }
  torch::Tensor later = torch::empty({1 << 18}, torch::kFloat);  // 1 MiB, after the peak
  const std::vector<int64_t> want = {int64_t{12} << 20, int64_t{8} << 20};
  EXPECT_EQ(MemoryMeter::PeakBlocks(), want) << "the two largest blocks live at the peak, largest first";
  // A new update: the blocks live now, until the peak grows again.
  MemoryMeter::ResetPeak();
  EXPECT_EQ(MemoryMeter::PeakBlocks(), (std::vector<int64_t>{int64_t{4} << 20, int64_t{1} << 20}));
}

}  // namespace
}  // namespace distlm::runtime
