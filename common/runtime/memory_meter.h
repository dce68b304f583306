// How many bytes the process holds in host tensors, and the most it held at once: LibTorch's
// CPU allocator wrapped in one that counts (installed with c10::SetCPUAllocator, the hook
// LibTorch offers for this). Every CPU tensor's storage allocated after Install passes through
// it; what was allocated before, and memory LibTorch's kernels take from malloc directly
// (oneDNN or OpenBLAS scratch), is not counted. CUDA tensors never pass through it: for a GPU
// the same three figures come from the CUDA caching allocator's own statistics (allocated bytes,
// both pools), on a LibTorch built with CUDA.
//
//   runtime::MemoryMeter::Install();            // once, before the model is built
//   runtime::MemoryMeter::ResetPeak(device);    // at the start of an update
//   ... MemoryMeter::PeakBytes(device) ...      // the most held at once on device since then
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/Device.h>

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

  // Where the peak is, by size: with DISTLM_MEMORY_PEAK_BLOCKS=K (K > 0) in the environment at
  // Install, the meter also keeps every live block's size, and, each time the peak grows by
  // 1 MB or more, the sizes of the K largest blocks then live (largest first). A lock per
  // allocation: for finding where the bytes are, not for timing. Empty when not asked for.
  static std::vector<int64_t> PeakBlocks();

  // The same for the tensors on `device`: the CPU's are the three above; a GPU's are the caching
  // allocator's (what tensors hold, not what the allocator reserved). -1 where nothing counts
  // them: the meter not installed (CPU), a LibTorch without CUDA (GPU).
  static int64_t BytesInUse(const c10::Device& device);
  static int64_t PeakBytes(const c10::Device& device);
  static void ResetPeak(const c10::Device& device);
};

}  // namespace distlm::runtime
