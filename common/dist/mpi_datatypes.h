// What MPI reduces a tensor with (//common/dist:mpi_process_group only): the MPI datatype of
// its dtype and the MPI_Op of a c10d ReduceOp. float16 and bfloat16, which MPI has no types
// for, get 2-byte types of our own and a SUM that adds in float32 and rounds the result to the
// narrow type (once per pair of addends, as Gloo's float16 sum does).
#pragma once

#include <ATen/ATen.h>

#include "common/dist/c10d_compat.h"
#include "common/dist/mpi_runtime.h"

namespace distlm::dist::mpi_internal {

// Makes the narrow types and their SUM. Once, right after MPI_Init, before any worker thread
// exists (InitMpiOnce calls it).
void MakeNarrowTypes();

// The MPI datatype a reduction of `t` tensors uses; a TORCH_CHECK error naming `op` for a
// dtype MPI cannot reduce.
MPI_Datatype ReductionType(at::ScalarType t, const char* op);

// The MPI_Op of `reduce_op` for `t` tensors; a TORCH_CHECK error naming `op` for AVG, a
// bitwise op on floats, or anything but SUM on float16/bfloat16.
MPI_Op ReductionOp(const c10d::ReduceOp& reduce_op, at::ScalarType t, const char* op);

}  // namespace distlm::dist::mpi_internal
