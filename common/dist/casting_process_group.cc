#include "common/dist/casting_process_group.h"

#include <mutex>

#include "common/dist/copy_back_work.h"
#include "common/runtime/errors.h"

namespace distlm::dist {

at::ScalarType ParseCommDtype(const std::string& value, const std::string& flag) {
  if (value == "fp32" || value == "float32") return at::kFloat;
  if (value == "fp16" || value == "float16") return at::kHalf;
  if (value == "bf16" || value == "bfloat16") return at::kBFloat16;
  throw UserError(flag + "=" + value + " is not a communication dtype: use fp32, fp16 or bf16");
}

std::string CommDtypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "fp32";
    case at::kHalf: return "fp16";
    case at::kBFloat16: return "bf16";
    default: return c10::toString(t);
  }
}

CastingProcessGroup::CastingProcessGroup(c10::intrusive_ptr<c10d::ProcessGroup> inner, at::ScalarType comm_dtype)
    : ForwardingGroup(std::move(inner)), comm_dtype_(comm_dtype) {
  if (comm_dtype != at::kFloat && comm_dtype != at::kHalf && comm_dtype != at::kBFloat16) {
    throw UserError("CastingProcessGroup: cannot communicate in " + std::string(c10::toString(comm_dtype)) +
                    "; use float32, float16 or bfloat16");
  }
}

c10::intrusive_ptr<c10d::Work> CastingProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& opts) {
  bool cast = enabled_ && comm_dtype_ != at::kFloat;
  for (const auto& t : tensors) cast = cast && t.scalar_type() == at::kFloat;
  if (!cast) return inner_->allreduce(tensors, opts);
  std::vector<at::Tensor> narrow;
  narrow.reserve(tensors.size());
  for (const auto& t : tensors) narrow.push_back(t.to(comm_dtype_));
  auto work = inner_->allreduce(narrow, opts);
  return c10::make_intrusive<CopyBackWork>(std::move(work), tensors, narrow);
}

}  // namespace distlm::dist
