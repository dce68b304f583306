#include "common/dist/mpi_datatypes.h"

#include <c10/util/Exception.h>

namespace distlm::dist::mpi_internal {
namespace {

// Made once by MakeNarrowTypes, read afterwards.
MPI_Datatype g_half_type = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16_type = MPI_DATATYPE_NULL;
MPI_Op g_half_sum = MPI_OP_NULL;
MPI_Op g_bfloat16_sum = MPI_OP_NULL;

template <typename T>
void SumInFloat(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = static_cast<T>(static_cast<float>(a[i]) + static_cast<float>(b[i]));
}

}  // namespace

void MakeNarrowTypes() {
  MPI_Type_contiguous(2, MPI_BYTE, &g_half_type);
  MPI_Type_commit(&g_half_type);
  MPI_Type_contiguous(2, MPI_BYTE, &g_bfloat16_type);
  MPI_Type_commit(&g_bfloat16_type);
  MPI_Op_create(&SumInFloat<c10::Half>, /*commute=*/1, &g_half_sum);
  MPI_Op_create(&SumInFloat<c10::BFloat16>, /*commute=*/1, &g_bfloat16_sum);
}

MPI_Datatype ReductionType(at::ScalarType t, const char* op) {
  switch (t) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kChar: return MPI_INT8_T;
    case at::kShort: return MPI_INT16_T;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    case at::kByte: return MPI_UINT8_T;
    case at::kHalf: return g_half_type;
    case at::kBFloat16: return g_bfloat16_type;
    default:
      TORCH_CHECK(false, "MpiProcessGroup::", op, ": MPI cannot reduce ", t,
                  " tensors; use float, double, half, bfloat16 or an integer type");
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op ReductionOp(const c10d::ReduceOp& reduce_op, at::ScalarType t, const char* op) {
  if (t == at::kHalf || t == at::kBFloat16) {
    TORCH_CHECK(reduce_op == c10d::ReduceOp::SUM, "MpiProcessGroup::", op, ": ", t,
                " tensors reduce with SUM only (summed in float32, rounded to ", t, ")");
    return t == at::kHalf ? g_half_sum : g_bfloat16_sum;
  }
  switch (static_cast<c10d::ReduceOp::RedOpType>(reduce_op)) {
    case c10d::ReduceOp::SUM: return MPI_SUM;
    case c10d::ReduceOp::PRODUCT: return MPI_PROD;
    case c10d::ReduceOp::MIN: return MPI_MIN;
    case c10d::ReduceOp::MAX: return MPI_MAX;
    case c10d::ReduceOp::BAND:
    case c10d::ReduceOp::BOR:
    case c10d::ReduceOp::BXOR:
      TORCH_CHECK(at::isIntegralType(t, /*includeBool=*/false), "MpiProcessGroup::", op,
                  ": bitwise reductions need an integer tensor, got ", t);
      if (reduce_op == c10d::ReduceOp::BAND) return MPI_BAND;
      if (reduce_op == c10d::ReduceOp::BOR) return MPI_BOR;
      return MPI_BXOR;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(false, "MpiProcessGroup::", op, ": ReduceOp AVG is not supported (nor in "
                  "Gloo): reduce with SUM and divide by the world size");
      break;
    default:
      TORCH_CHECK(false, "MpiProcessGroup::", op, ": ReduceOp ",
                  static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(reduce_op)),
                  " is not supported: use SUM, PRODUCT, MIN, MAX, BAND, BOR or BXOR");
  }
  return MPI_OP_NULL;
}

}  // namespace distlm::dist::mpi_internal
