#include "common/dist/mpi_arguments.h"

#include <climits>

#include <c10/util/Exception.h>

namespace distlm::dist::mpi_internal {

int Count(int64_t n, const char* op) {
  TORCH_CHECK(n <= INT_MAX, "MpiProcessGroup::", op, ": ", n,
              " exceeds the int count of one MPI call; split the tensor");
  return static_cast<int>(n);
}

void CheckTensor(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.defined(), "MpiProcessGroup::", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "MpiProcessGroup::", op,
              ": tensors must be on the CPU, got one on ", t.device());
  TORCH_CHECK(t.layout() == at::kStrided, "MpiProcessGroup::", op,
              ": only dense (strided) tensors are supported");
}

void CheckSingle(const std::vector<at::Tensor>& ts, const char* op) {
  TORCH_CHECK(ts.size() == 1, "MpiProcessGroup::", op, ": takes exactly one tensor, got ",
              ts.size());
  CheckTensor(ts[0], op);
}

void CheckRoot(int64_t root, int size, const char* op) {
  TORCH_CHECK(root >= 0 && root < size, "MpiProcessGroup::", op, ": root rank ", root,
              " is not in 0..", size - 1);
}

// Every tensor in `ts` must match `like` in dtype and element count: one slot per rank.
void CheckSlots(const std::vector<at::Tensor>& ts, const at::Tensor& like, int size,
                const char* op, const char* which) {
  TORCH_CHECK(static_cast<int>(ts.size()) == size, "MpiProcessGroup::", op, ": needs ", size,
              " ", which, " tensors (one per rank), got ", ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    CheckTensor(ts[i], op);
    TORCH_CHECK(ts[i].scalar_type() == like.scalar_type(), "MpiProcessGroup::", op, ": ",
                which, " tensor ", i, " is ", ts[i].scalar_type(), ", expected ",
                like.scalar_type());
    TORCH_CHECK(ts[i].numel() == like.numel(), "MpiProcessGroup::", op, ": ", which,
                " tensor ", i, " has ", ts[i].numel(), " elements, expected ", like.numel());
  }
}

Staged Stage(const at::Tensor& t) { return {t, t.contiguous()}; }

void Unpack(const at::Tensor& rows, std::vector<at::Tensor>& slots) {
  for (size_t i = 0; i < slots.size(); ++i) {
    slots[i].copy_(rows[static_cast<int64_t>(i)].view(slots[i].sizes()));
  }
}

at::Tensor Pack(const std::vector<at::Tensor>& slots) {
  std::vector<at::Tensor> flat;
  flat.reserve(slots.size());
  for (const auto& s : slots) flat.push_back(s.reshape({-1}));
  return at::stack(flat);
}

at::Tensor Rows(int size, const at::Tensor& like) {
  return at::empty({size, like.numel()}, at::TensorOptions().dtype(like.scalar_type()));
}

}  // namespace distlm::dist::mpi_internal
