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
  // the optimizer step. Waits for every all-reduce that backward launched (launching any that
  // could not start yet) and leaves in every parameter's .grad the average over ranks of the
  // ranks' gradients. If some parameter's gradient never arrived in that backward, throws
  // distlm::UserError (common/runtime/errors.h) naming every such parameter: without a
  // gradient it was never all-reduced, and the ranks would drift apart.
  virtual void FinishGradientSync() = 0;
};

// 3a. At construction: copy rank 0's parameter values into every rank's parameters (a
// broadcast; every rank constructs at the same point), then hook every parameter. In a
// parameter's hook: launch one asynchronous all-reduce of its .grad. FinishGradientSync waits
// for them and divides by the number of ranks.
std::unique_ptr<DataParallel> MakePerParameterDdp(std::vector<NamedParameter> params,
                                                  c10::intrusive_ptr<c10d::ProcessGroup> pg);

// 3b. As 3a, but gradients travel in buckets: one flat float32 buffer per bucket, one
// all-reduce per bucket. The buckets, fixed at construction: walk the parameters from the LAST
// to the first, adding each to the open bucket; as soon as the open bucket holds at least
// `bucket_cap_bytes` bytes, close it (so a bucket may exceed the cap by its last parameter,
// and the last bucket may be small). Bucket 0 therefore holds the last parameters, whose
// gradients backward produces first. In a hook: copy the gradient into its place in its
// bucket; when a bucket has all its gradients, launch its all-reduce, but strictly in bucket
// order (every rank must launch the same collectives in the same order, or they pair up
// wrong): a bucket that fills early waits for the ones before it. FinishGradientSync waits for
// the buckets and copies the averages back into .grad. All parameters are float32.
std::unique_ptr<DataParallel> MakeBucketedDdp(std::vector<NamedParameter> params,
                                              c10::intrusive_ptr<c10d::ProcessGroup> pg, int64_t bucket_cap_bytes);

}  // namespace distlm::task3
