#include "common/runtime/device.h"

#include <libtorch_info.h>

#include "common/runtime/errors.h"

namespace distlm::runtime {

bool BuiltWithCuda() {
#ifdef DISTLM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int CudaDeviceCount() {
  if (!BuiltWithCuda()) return 0;
  // Asks the CUDA runtime; with no driver or no GPU it answers 0 rather than failing.
  return static_cast<int>(torch::cuda::device_count());
}

torch::Device ResolveDevice(const std::string& value, int local_rank, const std::string& flag) {
  if (value == "cpu") return torch::Device(torch::kCPU);
  if (value != "cuda") {
    throw UserError(flag + "=" + value + " is not a device: use cpu or cuda (cuda means cuda:LOCAL_RANK)");
  }
  if (!BuiltWithCuda()) {
    throw UserError(flag + "=cuda: this LibTorch (" + std::string(TORCH_VERSION) + " from " +
                    DISTLM_LIBTORCH_ROOT +
                    ") is a CPU-only build; build against a CUDA LibTorch "
                    "(DISTLM_TORCH_WHEEL=2.11.0 ./distlm ...) or use --device=cpu");
  }
  const int count = CudaDeviceCount();
  if (count == 0) {
    throw UserError(flag +
                    "=cuda: no CUDA GPU is visible to this process (this CUDA build of LibTorch "
                    "found 0 devices: no GPU, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides "
                    "them); use --device=cpu");
  }
  if (local_rank >= count) {
    throw UserError(flag + "=cuda: local rank " + std::to_string(local_rank) + " needs cuda:" +
                    std::to_string(local_rank) + ", but this host has " + std::to_string(count) +
                    (count == 1 ? " GPU" : " GPUs") +
                    "; start at most that many ranks per host (--nproc_per_node)");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

}  // namespace distlm::runtime
