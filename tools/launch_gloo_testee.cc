// A real c10d rank for launch_test: rendezvous through a TCPStore at MASTER_ADDR:MASTER_PORT
// with RANK and WORLD_SIZE from the launcher, as every distlm stage does, then one Gloo
// all-reduce checked against its closed form. Exit 0 and "allreduce ok" when it matches, 3
// when it does not, 4 when a variable is missing.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int EnvInt(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : -1;
}

}  // namespace

int main() {
  const char* addr = std::getenv("MASTER_ADDR");
  int port = EnvInt("MASTER_PORT"), rank = EnvInt("RANK"), world = EnvInt("WORLD_SIZE");
  if (addr == nullptr || port <= 0 || rank < 0 || world <= 0) {
    std::fprintf(stderr, "missing MASTER_ADDR, MASTER_PORT, RANK or WORLD_SIZE\n");
    return 4;
  }
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(port);
  store_options.isServer = rank == 0;
  store_options.numWorkers = world;
  store_options.timeout = std::chrono::seconds(20);
  auto store = c10::make_intrusive<c10d::TCPStore>(addr, store_options);
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(addr));
  options->timeout = std::chrono::seconds(20);
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);

  constexpr int kN = 16;
  std::vector<at::Tensor> tensors = {torch::arange(kN, torch::kFloat) * (rank + 1)};
  pg->allreduce(tensors)->wait();
  // sum over ranks r of (r + 1) * i = i * world * (world + 1) / 2
  auto expected = torch::arange(kN, torch::kFloat) * (world * (world + 1) / 2);
  bool ok = torch::equal(tensors[0], expected);
  std::printf("allreduce %s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 3;
}
