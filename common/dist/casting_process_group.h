// A ProcessGroup that all-reduces float32 tensors in a narrower dtype (float16 or bfloat16):
// gradient compression as PyTorch DDP's fp16_compress_hook does it, for any code that calls
// allreduce, so students' gradient synchronisation needs no change.
//
// While enabled, allreduce casts each float32 tensor to the communication dtype, all-reduces
// the copy through the inner group, and when the work completes writes the result back, cast
// to float32, into the caller's tensor. So the caller sees what it always sees (its float32
// tensor holds the sum after wait()), rounded as the narrow dtype rounds: float16 keeps 11
// significant bits (relative rounding error at most 2^-11 per operation), bfloat16 8 (2^-8),
// and the backend adds in the narrow dtype too (Gloo: every step of its ring; our MPI group:
// in float32, rounded once per step). Half the bytes cross the network.
//
// Only allreduce of float32 is cast, and only while enabled: the stages enable it around the
// gradient synchronisation, so the loss averaging, evaluation and start-up broadcasts stay
// exact. Every other collective is forwarded as is.
//
// Stacking. Put the CountingProcessGroup inside (Casting(Counting(real))): it then counts the
// tensors actually sent, whose dtype and bytes are the narrow ones.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "common/dist/c10d_compat.h"
#include "common/dist/forwarding_group.h"

namespace distlm::dist {

// "fp32" -> kFloat, "fp16" -> kHalf, "bf16" -> kBFloat16 (also "float32", "float16",
// "bfloat16"). Throws distlm::UserError naming `flag` for anything else.
at::ScalarType ParseCommDtype(const std::string& value, const std::string& flag = "--comm_dtype");

// The short name of a communication dtype: "fp32", "fp16", "bf16".
std::string CommDtypeName(at::ScalarType t);

// Every collective forwarded as it is (ForwardingGroup) but all_reduce, which is cast.
class CastingProcessGroup : public ForwardingGroup {
 public:
  // comm_dtype: kHalf or kBFloat16 (kFloat makes this a plain forwarder).
  CastingProcessGroup(c10::intrusive_ptr<c10d::ProcessGroup> inner, at::ScalarType comm_dtype);

  // Casting applies only while enabled (off at construction).
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }
  at::ScalarType comm_dtype() const { return comm_dtype_; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;

 private:
  at::ScalarType comm_dtype_;
  std::atomic<bool> enabled_{false};
};

}  // namespace distlm::dist
