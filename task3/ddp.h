// Task 3: your own DistributedDataParallel. Read docs/handout/part3.md first.
//
// PyTorch's `model = DDP(model)` hides a mechanism you now build in two versions, each in its
// own file under task3/student/:
//   3a per_parameter_ddp.cc  one asynchronous all-reduce per parameter, launched from a hook
//                            the moment backward has produced that parameter's gradient;
//   3b bucketed_ddp.cc       gradients packed into size-capped buckets, each bucket's
//                            all-reduce launched as soon as it is full, while backward goes on;
//   3c (in both)             no_sync: backward passes that only accumulate gradients
//                            communicate nothing.
// The Trainer (task3/ddp_stage.cc) drives either version through DataParallel:
//
//   auto ddp = MakeBucketedDdp(params, pg, cap);  // rank 0's weights now on every rank
//   for each update:
//     for each micro-batch:
//       ddp->set_require_grad_sync(last micro-batch of the update);
//       loss.backward();                          // your hooks run in here
//     ddp->FinishGradientSync();                  // .grad = the average over ranks
//     clip, optimizer step, zero .grad            // (part 1's code)
//
// Tools you are given: autograd::GradReadyHook (common/autograd/grad_ready_hook.h) calls a
// function of yours each time backward has accumulated a parameter's gradient into .grad;
// c10d's asynchronous collectives return a c10d::Work you wait() on later. The exact calls are
// in the handout's "c10d in C++" section.
#pragma once

#include <torch/types.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace distlm::task3 {

// A parameter of the model, with its name (for error messages), in the model's registration
// order. Backward produces gradients roughly in the reverse of that order.
struct NamedParameter {
  std::string name;
  torch::Tensor tensor;
};

// What the Trainer calls. Both of your classes implement it.
class DataParallel {
 public:
  virtual ~DataParallel() = default;

  // 3c, no_sync. Called before every backward. While false, backward must launch no
  // collective: the gradients just accumulate in .grad. The next backward with it true
  // synchronises the accumulated .grad (PyTorch's `with ddp.no_sync():`).
  virtual void set_require_grad_sync(bool sync) = 0;

  // Called once per update, after its last backward (which had sync true), before clipping and
  // the optimizer step. On return every parameter's .grad holds the average over ranks of the
  // ranks' gradients. The communication belongs to backward, where it can overlap with the
  // computation; what is still in flight here is exposed time. If some parameter's gradient
  // never arrived in that backward, throws distlm::UserError (common/runtime/errors.h) naming
  // every such parameter: without a gradient it was never all-reduced, and the ranks would
  // drift apart.
  virtual void FinishGradientSync() = 0;
};

// 3a. After construction every rank holds rank 0's parameter values (every rank constructs at
// the same point), so that the ranks, averaging the same gradients, stay the same model. Each
// parameter's gradient travels in one all-reduce of its own, started during backward, as soon
// as that gradient is complete.
std::unique_ptr<DataParallel> MakePerParameterDdp(std::vector<NamedParameter> params,
                                                  c10::intrusive_ptr<c10d::ProcessGroup> pg);

// 3b. As 3a, but gradients travel in buckets: one flat float32 buffer and one all-reduce per
// bucket, fewer and larger messages. The buckets, fixed at construction and the same on every
// rank, are PyTorch's: consecutive runs of whole parameters in the order backward produces
// them, the last parameter first, so bucket 0 is the first to complete. Every bucket but the
// last holds at least `bucket_cap_bytes` bytes, and none had reached the cap before its last
// parameter joined it (so a bucket exceeds the cap by one parameter at most, and no look-ahead
// is needed). A bucket's all-reduce starts during backward, as soon as the bucket is complete
// and every bucket before it has started: the buckets start in bucket order on every rank
// (collectives pair up by their order, not by their contents). All parameters are float32.
std::unique_ptr<DataParallel> MakeBucketedDdp(std::vector<NamedParameter> params,
                                              c10::intrusive_ptr<c10d::ProcessGroup> pg, int64_t bucket_cap_bytes);

}  // namespace distlm::task3
