// --device: what each value resolves to, and the one-line refusals on a machine that cannot
// give a GPU (the CPU build of LibTorch, or the CUDA build without a GPU or driver).
#include "common/runtime/device.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(ErrorOf("gpu", 0), "--device=gpu is not a device: use cpu or cuda (cuda means cuda:LOCAL_RANK)");
  EXPECT_EQ(ErrorOf("cuda:1", 0),
            "--device=cuda:1 is not a device: use cpu or cuda (cuda means cuda:LOCAL_RANK)");
}

TEST(DeviceTest, CudaIsRefusedWithItsCauseOrGiven) {
  std::printf("this LibTorch: %s build, %d CUDA device(s) visible\n", BuiltWithCuda() ? "CUDA" : "CPU-only",
              CudaDeviceCount());
  if (!BuiltWithCuda()) {
    EXPECT_NE(ErrorOf("cuda", 0).find("--device=cuda: this LibTorch (" + std::string(TORCH_VERSION)),
              std::string::npos)
        << ErrorOf("cuda", 0);
    EXPECT_NE(ErrorOf("cuda", 0).find(") is a CPU-only build;"), std::string::npos) << ErrorOf("cuda", 0);
    return;
  }
  const int gpus = CudaDeviceCount();
  if (gpus == 0) {
    // The CUDA build (the torch wheel) on a machine without a GPU.
    EXPECT_EQ(ErrorOf("cuda", 0),
              "--device=cuda: no CUDA GPU is visible to this process (this CUDA build of LibTorch "
              "found 0 devices: no GPU, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them); use "
              "--device=cpu");
    return;
  }
  EXPECT_EQ(ResolveDevice("cuda", 0), torch::Device(torch::kCUDA, 0));
  EXPECT_NE(ErrorOf("cuda", gpus).find("needs cuda:" + std::to_string(gpus)), std::string::npos);
}

}  // namespace
}  // namespace distlm::runtime
