// Cutting a whole tensor into a rank's block (given code: task 7a's shards, the optimizer
// state of a resumed run).
#include <stdexcept>
#include <string>

#include "task7/tensor_parallel.h"

namespace distlm::task7 {
namespace {

torch::Tensor Block(const torch::Tensor& full, int dim, int rank, int world) {
  const int64_t n = full.size(dim);
  if (world < 1 || rank < 0 || rank >= world || n % world != 0) {
    throw std::invalid_argument("cannot cut dimension " + std::to_string(dim) + " of size " + std::to_string(n) +
                                " into " + std::to_string(world) + " equal blocks for rank " + std::to_string(rank));
  }
  return full.narrow(dim, rank * (n / world), n / world).clone();
}

}  // namespace

torch::Tensor ShardRows(const torch::Tensor& full, int rank, int world) { return Block(full, 0, rank, world); }

torch::Tensor ShardColumns(const torch::Tensor& full, int rank, int world) { return Block(full, 1, rank, world); }

}  // namespace distlm::task7
