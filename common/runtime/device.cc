#include "common/runtime/device.h"

#include <libtorch_info.h>
#include <torch/cuda.h>
#include <torch/version.h>

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
  // "cuda:N": every rank of this host on GPU N (several ranks sharing one GPU, over gloo or mpi).
  int pinned = -1;
  if (value.rfind("cuda:", 0) == 0) {
    const std::string index = value.substr(5);
    if (!index.empty() && index.size() <= 3 &&
        index.find_first_not_of("0123456789") == std::string::npos) {
      pinned = std::stoi(index);
    }
  }
  if (value != "cuda" && pinned < 0) {
    throw UserError(flag + "=" + value +
                    " is not a device: use cpu, cuda (cuda:LOCAL_RANK) or cuda:N (GPU N for every rank)");
  }
  if (!BuiltWithCuda()) {
    throw UserError(flag + "=" + value + ": this LibTorch (" + std::string(TORCH_VERSION) + " from " +
                    DISTLM_LIBTORCH_ROOT +
                    ") is a CPU-only build; build against a CUDA LibTorch "
                    "(DISTLM_TORCH_WHEEL=2.11.0 ./distlm ...) or use --device=cpu");
  }
  const int count = CudaDeviceCount();
  if (count == 0) {
    throw UserError(flag +
                    "=" + value + ": no CUDA GPU is visible to this process (this CUDA build of LibTorch "
                    "found 0 devices: no GPU, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides "
                    "them); use --device=cpu");
  }
  if (pinned >= 0) {
    if (pinned >= count) {
      throw UserError(flag + "=" + value + ": this host has " + std::to_string(count) +
                      (count == 1 ? " GPU (cuda:0)" : " GPUs (cuda:0 to cuda:" + std::to_string(count - 1) + ")"));
    }
    return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(pinned));
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
