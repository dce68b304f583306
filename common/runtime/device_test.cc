// --device: what each value resolves to, and the one-line refusals on a machine that cannot
// give a GPU (the CPU build of LibTorch, or the CUDA build without a GPU or driver).
#include "common/runtime/device.h"

#include <gtest/gtest.h>
#include <torch/version.h>

#include "common/runtime/errors.h"

namespace distlm::runtime {
namespace {

std::string ErrorOf(const std::string& value, int local_rank) {
  try {
    ResolveDevice(value, local_rank);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceTest, CpuIsAlwaysThere) {
  EXPECT_EQ(ResolveDevice("cpu", 0), torch::Device(torch::kCPU));
  EXPECT_EQ(ResolveDevice("cpu", 3), torch::Device(torch::kCPU));
}

TEST(DeviceTest, AnythingElseIsNamed) {
  const std::string use = " is not a device: use cpu, cuda (cuda:LOCAL_RANK) or cuda:N (GPU N for every rank)";
  EXPECT_EQ(ErrorOf("gpu", 0), "--device=gpu" + use);
  EXPECT_EQ(ErrorOf("cuda:", 0), "--device=cuda:" + use);
  EXPECT_EQ(ErrorOf("cuda:-1", 0), "--device=cuda:-1" + use);
  EXPECT_EQ(ErrorOf("cuda:1x", 0), "--device=cuda:1x" + use);
  EXPECT_EQ(ErrorOf("cuda:99999", 0), "--device=cuda:99999" + use);
}

TEST(DeviceTest, CudaIsRefusedWithItsCauseOrGiven) {
  std::printf("this LibTorch: %s build, %d CUDA device(s) visible\n", BuiltWithCuda() ? "CUDA" : "CPU-only",
              CudaDeviceCount());
  if (!BuiltWithCuda()) {
    EXPECT_NE(ErrorOf("cuda", 0).find("--device=cuda: this LibTorch (" + std::string(TORCH_VERSION)),
              std::string::npos)
        << ErrorOf("cuda", 0);
    EXPECT_NE(ErrorOf("cuda", 0).find(") is a CPU-only build;"), std::string::npos) << ErrorOf("cuda", 0);
    EXPECT_NE(ErrorOf("cuda:0", 0).find("--device=cuda:0: this LibTorch ("), std::string::npos)
        << ErrorOf("cuda:0", 0);
    return;
  }
  const int gpus = CudaDeviceCount();
  if (gpus == 0) {
    // The CUDA build (the torch wheel) on a machine without a GPU.
    EXPECT_EQ(ErrorOf("cuda", 0),
              "--device=cuda: no CUDA GPU is visible to this process (this CUDA build of LibTorch "
              "found 0 devices: no GPU, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them); use "
              "--device=cpu");
    EXPECT_EQ(ErrorOf("cuda:0", 0).rfind("--device=cuda:0: no CUDA GPU is visible", 0), 0u) << ErrorOf("cuda:0", 0);
    return;
  }
  EXPECT_EQ(ResolveDevice("cuda", 0), torch::Device(torch::kCUDA, 0));
  EXPECT_NE(ErrorOf("cuda", gpus).find("needs cuda:" + std::to_string(gpus)), std::string::npos);
  // cuda:N pins every rank, whatever its local rank; past the last GPU it is refused.
  EXPECT_EQ(ResolveDevice("cuda:0", 3), torch::Device(torch::kCUDA, 0));
  EXPECT_EQ(ErrorOf("cuda:" + std::to_string(gpus), 0),
            "--device=cuda:" + std::to_string(gpus) + ": this host has " + std::to_string(gpus) +
                (gpus == 1 ? " GPU (cuda:0)" : " GPUs (cuda:0 to cuda:" + std::to_string(gpus - 1) + ")"));
}

}  // namespace
}  // namespace distlm::runtime
