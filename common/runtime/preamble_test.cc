#include "common/runtime/preamble.h"
#include <torch/version.h>

#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include "common/runtime/errors.h"

namespace distlm::runtime {
namespace {

TEST(PreambleTest, DefaultThreadsShareTheCoresAmongRanks) {
  EXPECT_EQ(DefaultNumThreads(8, 1), 8);
  EXPECT_EQ(DefaultNumThreads(8, 4), 2);
  EXPECT_EQ(DefaultNumThreads(2, 4), 1);  // never zero
  EXPECT_EQ(DefaultNumThreads(0, 1), 1);
}

TEST(PreambleTest, RanksOnHostComesFromTheLauncher) {
  unsetenv("LOCAL_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  unsetenv("SLURM_NTASKS_PER_NODE");
  EXPECT_EQ(RanksOnThisHost(), 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "3", 1);
  EXPECT_EQ(RanksOnThisHost(), 3);
  setenv("LOCAL_WORLD_SIZE", "4", 1);
  EXPECT_EQ(RanksOnThisHost(), 4);
  setenv("LOCAL_WORLD_SIZE", "junk", 1);
  EXPECT_EQ(RanksOnThisHost(), 3);
  unsetenv("LOCAL_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

TEST(PreambleTest, SetsLibTorchThreads) {
  PreambleReport r = InitRuntime(2);
  EXPECT_EQ(r.num_threads, 2);
  EXPECT_EQ(at::get_num_threads(), 2);
  r = InitRuntime(1);
  EXPECT_EQ(at::get_num_threads(), 1);
}

// After the preamble, big blocks come from the heap and stay there when freed: neither a 16 MB
// nor a 100 MB block is mmap'ed (glibc's default would map both, and unmap them on free, so
// every training step would page-fault its buffers in again).
TEST(PreambleTest, BigBlocksAreReusedNotMapped) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer has its own allocator (mallopt does nothing there)";
#endif
  ASSERT_TRUE(InitRuntime(1).keeps_freed_memory) << "mallopt refused, or a MALLOC_* variable is set";
  for (size_t bytes : {size_t{16} << 20, size_t{100} << 20}) {
    const size_t mapped_before = mallinfo2().hblkhd;
    char* volatile block = static_cast<char*>(std::malloc(bytes));
    ASSERT_NE(block, nullptr);
    std::memset(block, 1, bytes);
    EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << bytes << " bytes were mmap'ed";
    std::free(block);
  }
}

TEST(PreambleTest, FindsTheBlasLibTorchUses) {
  if (TORCH_VERSION_MAJOR >= 2) {
    // LibTorch 2.x from PyPI's wheel (tools/torch_wheel.sh) links MKL into libtorch_cpu.
    EXPECT_EQ(LoadedBlas(), "mkl (inside libtorch_cpu)");
    EXPECT_EQ(BlasThreading(), "");
  } else {
    // tools/setup.sh makes OpenBLAS the active BLAS; anything else here is a set-up defect.
    EXPECT_EQ(LoadedBlas(), "openblas");
    // ... in its OpenMP build, which shares LibTorch's OpenMP threads.
    EXPECT_EQ(BlasThreading(), "openmp");
  }
  EXPECT_FALSE(InitRuntime(1).slow_blas);
}

TEST(ErrorsTest, UserErrorsExitTwoWithOneLine) {
  testing::internal::CaptureStderr();
  int rc = RunMain([]() -> int { throw UserError("--learning_rate must be > 0, got -1"); });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(err, "error: --learning_rate must be > 0, got -1\n");
}

TEST(ErrorsTest, LibTorchErrorsLoseTheirBacktrace) {
  testing::internal::CaptureStderr();
  int rc = RunMain([]() -> int {
    TORCH_CHECK(false, "tensor 'x' has the wrong shape");
    return 0;
  });
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, 1);
  EXPECT_EQ(err, "error: tensor 'x' has the wrong shape\n");
}

}  // namespace
}  // namespace distlm::runtime
