// How many bytes the process holds in host tensors, and the most it held at once: LibTorch's
// CPU allocator wrapped in one that counts (installed with c10::SetCPUAllocator, the hook
// LibTorch offers for this). Every CPU tensor's storage allocated after Install passes through
// it; what was allocated before, and memory LibTorch's kernels take from malloc directly
// (oneDNN or OpenBLAS scratch), is not counted. CUDA tensors never pass through it (the caching
// allocator has its own statistics).
//
//   runtime::MemoryMeter::Install();      // once, before the model is built
//   runtime::MemoryMeter::ResetPeak();    // at the start of an update
//   ... MemoryMeter::PeakBytes() ...      // the most held at once since then
#pragma once

#include <cstdint>

namespace distlm::runtime {

class MemoryMeter {
 public:
  // Wraps the current CPU allocator; later calls do nothing.
  static void Install();
  static bool installed();
  // Bytes of the tensors allocated since Install and not freed yet.
  static int64_t BytesInUse();
  // The most BytesInUse was since the last ResetPeak (or Install).
  static int64_t PeakBytes();
  // Sets the peak to what is in use now.
  static void ResetPeak();
};

}  // namespace distlm::runtime
