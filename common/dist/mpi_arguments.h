// A collective's tensors, for the MPI group (//common/dist:mpi_process_group only): checked on
// the caller's thread, so that bad arguments throw at once and nothing is queued; and made
// contiguous for MPI, which reads and writes plain buffers.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace distlm::dist::mpi_internal {

// n as the int count of one MPI call; a TORCH_CHECK error naming `op` above INT_MAX.
int Count(int64_t n, const char* op);

// Defined, on the CPU, dense.
void CheckTensor(const at::Tensor& t, const char* op);

// Exactly one tensor, and CheckTensor's checks on it.
void CheckSingle(const std::vector<at::Tensor>& ts, const char* op);

// root is a rank of a group of `size`.
void CheckRoot(int64_t root, int size, const char* op);

// Every tensor in `ts` must match `like` in dtype and element count: one slot per rank.
// `which` ("input", "output") names the list in errors.
void CheckSlots(const std::vector<at::Tensor>& ts, const at::Tensor& like, int size,
                const char* op, const char* which);

// A contiguous buffer for `t`: `t` itself, or a copy whose result CopyBack() writes into `t`.
struct Staged {
  at::Tensor original;
  at::Tensor buffer;
  void CopyBack() {
    if (!buffer.is_same(original)) original.copy_(buffer);
  }
};

Staged Stage(const at::Tensor& t);

// Row i of a [size, n] buffer into each slot, whatever the slot's shape.
void Unpack(const at::Tensor& rows, std::vector<at::Tensor>& slots);

// The slots, flattened and stacked into one contiguous [size, n] buffer.
at::Tensor Pack(const std::vector<at::Tensor>& slots);

// An uninitialised [size, like.numel()] buffer of like's dtype: what a gather receives into.
at::Tensor Rows(int size, const at::Tensor& like);

}  // namespace distlm::dist::mpi_internal
