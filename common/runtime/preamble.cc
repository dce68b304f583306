#include "common/runtime/preamble.h"

#include <dlfcn.h>
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <c10/util/Logging.h>
#include <torch/version.h>

namespace distlm::runtime {
namespace {

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n <= 0 || n > 1 << 20) return 0;
  return static_cast<int>(n);
}


// Keeps freed memory in the process for the next step instead of handing it back to the
// kernel. A training step allocates and frees the same activation and gradient buffers every
// time; glibc's defaults return the big ones (mmap'ed, or trimmed from the top of the heap),
// so each step page-faults them in again, and on a VM a fault costs microseconds: zeroing a
// fresh 88 MB buffer (BERT-base's word-embedding gradient) took 49 ms against 5-9 ms for a
// reused one. A variable the user set (MALLOC_*_ or GLIBC_TUNABLES) wins.
bool KeepFreedMemory() {
#ifdef __GLIBC__
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                           "GLIBC_TUNABLES"}) {
    if (std::getenv(name) != nullptr) return false;
  }
  // No mmap for single blocks (threads' arenas still fall back to it when they must), never
  // trim, and grow the heap in 64 MiB steps.
  bool ok = mallopt(M_MMAP_MAX, 0) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 && ok;
  ok = mallopt(M_TOP_PAD, 64 << 20) == 1 && ok;
  return ok;
#else
  return false;
#endif
}

}  // namespace

int DefaultNumThreads(int cores, int ranks_on_host) {
  return std::max(1, std::max(cores, 1) / std::max(ranks_on_host, 1));
}

int RanksOnThisHost() {
  for (const char* var : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"}) {
    if (int n = EnvInt(var); n > 0) return n;
  }
  return 1;
}

std::string LoadedBlas() {
  // Whichever library the dynamic linker resolves sgemm_ to is the one LibTorch's matrix
  // products run on, whatever name the libblas.so.3 alternative carries.
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info info;
  if (sgemm == nullptr || dladdr(sgemm, &info) == 0 || info.dli_fname == nullptr) {
    return "unknown";
  }
  std::string path = info.dli_fname;
  char resolved[4096];
  if (realpath(path.c_str(), resolved) != nullptr) path = resolved;
  for (const char* impl : {"openblas", "mkl", "blis"}) {
    if (path.find(impl) != std::string::npos) return impl;
  }
  if (path.find("/blas/libblas") != std::string::npos) return "reference";
  // LibTorch 2.x from the wheel or the official archive carries its BLAS inside
  // libtorch_cpu (MKL on x86-64); its build configuration says which.
  if (path.find("libtorch_cpu") != std::string::npos) {
    const std::string config = at::show_config();
    const size_t at = config.find("BLAS_INFO=");
    if (at != std::string::npos) {
      const std::string blas = config.substr(at + 10, config.find_first_of(", \n", at + 10) - at - 10);
      return blas + " (inside libtorch_cpu)";
    }
  }
  return "unknown (" + path + ")";
}

std::string BlasThreading() {
  using GetParallel = int (*)();
  auto get_parallel = reinterpret_cast<GetParallel>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (get_parallel == nullptr) return "";
  switch (get_parallel()) {
    case 0:
      return "sequential";
    case 1:
      return "pthread";
    case 2:
      return "openmp";
  }
  return "unknown";
}

PreambleReport InitRuntime(int num_threads) {
  PreambleReport report;
#if TORCH_VERSION_MAJOR >= 2
  // LibTorch 2.x's c10d logs its own errors and retries, with C++ backtraces, on stderr before
  // it throws; distlm turns each such failure into one line that names the flag or the rank.
  // Only fatal messages stay, unless TORCH_CPP_LOG_LEVEL asks for more (e.g. INFO).
  if (std::getenv("TORCH_CPP_LOG_LEVEL") == nullptr) FLAGS_caffe2_log_level = 3;
#endif
  report.ranks_on_host = RanksOnThisHost();
  static const bool keeps_freed_memory = KeepFreedMemory();
  report.keeps_freed_memory = keeps_freed_memory;
  unsigned cores = std::thread::hardware_concurrency();
  report.num_threads =
      num_threads > 0 ? num_threads : DefaultNumThreads(static_cast<int>(cores), report.ranks_on_host);
  at::set_num_threads(report.num_threads);
  // OpenBLAS keeps its own thread pool, sized to the machine; match it, or ranks sharing a
  // host oversubscribe its cores and "1 thread" measurements use them all.
  using SetThreads = void (*)(int);
  if (auto set_blas_threads = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas_threads(report.num_threads);
  }
  report.blas = LoadedBlas();
  report.slow_blas = report.blas == "reference";
  report.blas_threading = BlasThreading();
  if (report.blas_threading == "pthread" && report.num_threads > 1) {
    // The pthread build's workers keep spinning after a product and hold the cores LibTorch's
    // OpenMP threads need next: measured 5.4 s against 3.6 s for a BERT-base step on 2 threads.
    std::fprintf(stderr,
                 "WARNING: LibTorch is using OpenBLAS's pthread build, whose threads compete with LibTorch's "
                 "OpenMP threads (training steps up to 2x slower with --num_threads > 1). Install "
                 "libopenblas0-openmp and make it the libblas.so.3 alternative (tools/setup.sh does).\n");
  }
  if (report.slow_blas) {
    std::fprintf(stderr,
                 "WARNING: LibTorch is using the reference BLAS: matrix products run about 27x "
                 "slower. Install libopenblas0-openmp (tools/setup.sh does) and make it the "
                 "libblas.so.3 alternative.\n");
  }
  return report;
}

}  // namespace distlm::runtime
