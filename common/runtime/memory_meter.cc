#include "common/runtime/memory_meter.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>
#ifdef DISTLM_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace distlm::runtime {
namespace {

std::atomic<int64_t> in_use{0};
std::atomic<int64_t> peak{0};
std::atomic<bool> is_installed{false};

// Each block carries its size in a header before the bytes handed out (64 bytes: LibTorch's
// alignment), so that the data pointer is its own context, as raw_allocate requires of every
// allocator (kernels take scratch space that way).
constexpr size_t kHeader = 64;
c10::Allocator* inner_allocator = nullptr;

// DISTLM_MEMORY_PEAK_BLOCKS: the live blocks and the largest of them at the peak.
struct PeakBlocksTracker {
  size_t k = 0;
  std::mutex mu;
  std::unordered_map<void*, int64_t> live;
  std::vector<int64_t> at_peak;
  int64_t seen_peak = 0;

  // Called under mu with the bytes in use now.
  void MaybeRecord(int64_t now, bool force) {
    if (!force && now < seen_peak + (int64_t{1} << 20)) return;
    seen_peak = now;
    std::vector<int64_t> sizes;
    sizes.reserve(live.size());
    for (const auto& [ptr, n] : live) sizes.push_back(n);
    const size_t top = std::min(k, sizes.size());
    std::partial_sort(sizes.begin(), sizes.begin() + top, sizes.end(), std::greater<int64_t>());
    sizes.resize(top);
    at_peak = std::move(sizes);
  }
};
PeakBlocksTracker* tracker = nullptr;  // set once by Install when asked for

void FreeCounted(void* data) {
  char* base = static_cast<char*>(data) - kHeader;
  in_use.fetch_sub(*reinterpret_cast<int64_t*>(base), std::memory_order_relaxed);
  if (tracker != nullptr) {
    std::lock_guard<std::mutex> lock(tracker->mu);
    tracker->live.erase(data);
  }
  inner_allocator->raw_deallocate(base);
}

class CountingAllocator final : public c10::Allocator {
 public:
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return Count(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return Count(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return &FreeCounted; }

 private:
  static c10::DataPtr Count(size_t n) {
    char* base = static_cast<char*>(inner_allocator->raw_allocate(n + kHeader));
    *reinterpret_cast<int64_t*>(base) = static_cast<int64_t>(n);
    const int64_t now = in_use.fetch_add(static_cast<int64_t>(n), std::memory_order_relaxed) + static_cast<int64_t>(n);
    int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
    void* data = base + kHeader;
    if (tracker != nullptr) {
      std::lock_guard<std::mutex> lock(tracker->mu);
      tracker->live[data] = static_cast<int64_t>(n);
      tracker->MaybeRecord(now, /*force=*/false);
    }
    return c10::DataPtr(data, data, &FreeCounted, c10::Device(c10::DeviceType::CPU));
  }
};

}  // namespace

void MemoryMeter::Install() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never freed: tensors may outlive everything else in the process.
    inner_allocator = c10::GetCPUAllocator();
    if (const char* k = std::getenv("DISTLM_MEMORY_PEAK_BLOCKS"); k != nullptr && std::atoi(k) > 0) {
      tracker = new PeakBlocksTracker();  // never freed, as the allocator
      tracker->k = static_cast<size_t>(std::atoi(k));
    }
    static CountingAllocator* counting = new CountingAllocator();
    c10::SetCPUAllocator(counting, /*priority=*/1);
    is_installed = true;
  });
}

bool MemoryMeter::installed() { return is_installed; }
int64_t MemoryMeter::BytesInUse() { return in_use.load(std::memory_order_relaxed); }
int64_t MemoryMeter::PeakBytes() { return peak.load(std::memory_order_relaxed); }
void MemoryMeter::ResetPeak() {
  peak.store(in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
  if (tracker != nullptr) {
    std::lock_guard<std::mutex> lock(tracker->mu);
    tracker->MaybeRecord(in_use.load(std::memory_order_relaxed), /*force=*/true);
  }
}

std::vector<int64_t> MemoryMeter::PeakBlocks() {
  if (tracker == nullptr) return {};
  std::lock_guard<std::mutex> lock(tracker->mu);
  return tracker->at_peak;
}

namespace {

#ifdef DISTLM_HAVE_CUDA
// Allocated bytes over both pools (small and large blocks): what the device's tensors hold.
c10::CachingAllocator::Stat CudaAllocated(const c10::Device& device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)];
}
#endif

}  // namespace

int64_t MemoryMeter::BytesInUse(const c10::Device& device) {
  if (device.is_cpu()) return installed() ? BytesInUse() : -1;
#ifdef DISTLM_HAVE_CUDA
  if (device.is_cuda()) return CudaAllocated(device).current;
#endif
  return -1;
}

int64_t MemoryMeter::PeakBytes(const c10::Device& device) {
  if (device.is_cpu()) return installed() ? PeakBytes() : -1;
#ifdef DISTLM_HAVE_CUDA
  if (device.is_cuda()) return CudaAllocated(device).peak;
#endif
  return -1;
}

void MemoryMeter::ResetPeak(const c10::Device& device) {
  if (device.is_cpu()) ResetPeak();
#ifdef DISTLM_HAVE_CUDA
  // Every statistic's peak (this one's too) back to its current value.
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
#endif
}

}  // namespace distlm::runtime
