// The counting allocator against tensors of known sizes: in use and peak, freed on release.
#include "common/runtime/memory_meter.h"

#include <gtest/gtest.h>
#include <torch/types.h>

namespace distlm::runtime {
namespace {

TEST(MemoryMeterTest, CountsWhatTensorsHold) {
  MemoryMeter::Install();
  MemoryMeter::Install();  // twice: once
  ASSERT_TRUE(MemoryMeter::installed());
  const int64_t before = MemoryMeter::BytesInUse();
  MemoryMeter::ResetPeak();
  {
    torch::Tensor a = torch::empty({1000}, torch::kFloat);   // 4000 bytes
    torch::Tensor b = torch::empty({250}, torch::kDouble);   // 2000 bytes
    EXPECT_EQ(MemoryMeter::BytesInUse() - before, 6000);
    b = torch::Tensor();
    EXPECT_EQ(MemoryMeter::BytesInUse() - before, 4000);
    torch::Tensor view = a.narrow(0, 0, 10);  // a view allocates nothing
    EXPECT_EQ(MemoryMeter::BytesInUse() - before, 4000);
  }
  EXPECT_EQ(MemoryMeter::BytesInUse(), before);
  EXPECT_EQ(MemoryMeter::PeakBytes() - before, 6000);
  MemoryMeter::ResetPeak();
  EXPECT_EQ(MemoryMeter::PeakBytes(), before);
  // Arithmetic allocates its result: 1 MB in, 1 MB out (and a few bytes for the scalar 2,
  // wrapped in a tensor and freed).
  torch::Tensor x = torch::ones({250000});
  MemoryMeter::ResetPeak();
  const int64_t with_x = MemoryMeter::BytesInUse();
  torch::Tensor y = x * 2;
  EXPECT_EQ(MemoryMeter::BytesInUse() - with_x, 1000000);
  EXPECT_LT(MemoryMeter::PeakBytes() - MemoryMeter::BytesInUse(), 64);
  EXPECT_EQ(y.sum().item<float>(), 500000.0f);
}

}  // namespace
}  // namespace distlm::runtime
