// DistributedDataParallel for LibTorch modules: what `model = DDP(model)` does in PyTorch.
//
//   ddp::DistributedDataParallel ddp(model, pg);   // rank 0's weights now on every rank
//   auto loss = model(x, y);                        // forward as before
//   loss.backward();                                // gradients averaged over ranks on return
//   optimizer.step();
//
// Construction broadcasts the module's parameters and buffers from rank 0 (a few large
// coalesced broadcasts instead of one per tensor), splits the parameters into buckets
// (bucket_assignment.h) and hooks every parameter's gradient accumulator. During backward, as
// each parameter's gradient is accumulated, the hook copies it (divided by the world size)
// into its bucket's flat buffer; when a bucket's last gradient arrives, its asynchronous
// all_reduce starts, so communication overlaps the rest of backward. When backward is over,
// a callback queued on the autograd engine waits for the buckets still in flight and copies
// the averaged gradients back into every parameter's .grad. So when backward() returns, .grad
// holds the average over ranks, ready for clipping and the optimizer.
//
// Which hook. A tensor hook (Tensor::register_hook) runs before the gradient is added to .grad
// and sees only this backward's contribution; with gradient accumulation (no_sync) the bucket
// must hold the accumulated .grad. PyTorch's Reducer therefore hooks the parameter's
// AccumulateGrad node (torch::autograd::impl::grad_accumulator) with a post-hook, which runs
// after .grad has been updated; so does this class. The node is held here: the parameter only
// keeps a weak pointer to it, and a node recreated at the next forward would have no hook.
//
// Order. Every rank must launch the same collectives in the same order, or they pair up wrong.
// Buckets are therefore launched strictly in bucket order: a bucket that fills early waits
// until the ones before it have been launched (as PyTorch does).
//
// Threads. On CPU the autograd engine runs backward, and so the hooks and the final callback,
// on the thread that called backward(). The backend completes the all-reduces on its own
// threads; the only thing done there is recording the completion time.
//
// Not (yet) here, compared with PyTorch 1.13: buffers are broadcast only at construction (not
// before every forward; BERT's buffers are constants), no gradient_as_bucket_view, no
// communication hooks (fp16 compression is the process group's job: dist::CastingProcessGroup,
// task 3's --comm_dtype), no static_graph, no bucket rebuild after the first
// iteration (see bucket_assignment.h), no sparse gradients, CPU tensors only.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <vector>

#include "common/autograd/grad_ready_hook.h"
#include "common/ddp/bucket_assignment.h"

namespace distlm::ddp {

struct DdpOptions {
  int64_t bucket_cap_bytes = kDefaultBucketCapBytes;             // PyTorch: bucket_cap_mb=25
  int64_t first_bucket_cap_bytes = kDefaultFirstBucketCapBytes;  // PyTorch: 1 MiB
  // When false, a parameter whose gradient is not computed in a synchronised backward is an
  // error naming it (otherwise its bucket would never be all-reduced and the ranks would
  // drift apart). When true, such parameters are detected at the end of backward and take
  // part with their current .grad (zero if none); a parameter no rank used keeps its .grad
  // untouched. Costs one extra small all-reduce per synchronised backward.
  bool find_unused_parameters = false;
};

// One bucket as built: which parameters, how big.
struct BucketInfo {
  std::vector<std::string> names;  // in the order backward is expected to fill them
  int64_t numel = 0;
  int64_t bytes = 0;
  int64_t cap = 0;
  std::string dtype;
};

// What one synchronised backward did, for logs and the overlap evidence. Times are
// steady_clock points; "backward end" is when the autograd engine ran DDP's final callback,
// i.e. when every gradient had been computed.
struct SyncStats {
  using Clock = std::chrono::steady_clock;
  Clock::time_point first_gradient;  // the first hooked gradient of this backward
  Clock::time_point backward_end;
  std::vector<Clock::time_point> launched;   // per bucket: its all_reduce started
  std::vector<Clock::time_point> completed;  // per bucket: the backend finished it
  bool completion_exact = true;              // false if the backend has no futures: then "completed" is
                                             // when waiting for it returned (an upper bound)
  double wait_ms = 0;                        // the final callback waiting for buckets: the step was blocked
  double copy_back_ms = 0;                   // averaged buckets -> .grad
  int64_t unused_parameters = 0;             // with find_unused_parameters: locally unused this time

  int64_t buckets() const { return static_cast<int64_t>(launched.size()); }
  int64_t buckets_started_before_backward_end() const;
  double backward_ms() const;  // first_gradient -> backward_end
  // The union of the buckets' [launched, completed] intervals (time some all-reduce was in
  // flight), split at backward_end into the part hidden behind backward and the part after.
  double comm_busy_ms() const;
  double comm_hidden_ms() const;
  double comm_exposed_ms() const;
};

class DistributedDataParallel {
 public:
  // Broadcasts rank 0's parameters and buffers (a collective: every rank constructs at the
  // same point), builds the buckets and installs the hooks. Throws distlm::UserError for a
  // null module or group, a module without trainable parameters, non-CPU or sparse
  // parameters, bad caps, and ranks whose modules differ in shapes or dtypes.
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, c10::intrusive_ptr<c10d::ProcessGroup> pg,
                          DdpOptions options = {});
  template <typename M>
  DistributedDataParallel(const torch::nn::ModuleHolder<M>& module, c10::intrusive_ptr<c10d::ProcessGroup> pg,
                          DdpOptions options = {})
      : DistributedDataParallel(std::static_pointer_cast<torch::nn::Module>(module.ptr()), std::move(pg), options) {}
  // Removes the hooks: the module trains locally again.
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  torch::nn::Module& module() { return *module_; }
  const std::shared_ptr<torch::nn::Module>& module_ptr() const { return module_; }
  c10d::ProcessGroup& process_group() { return *pg_; }
  const DdpOptions& options() const { return options_; }

  // Gradient accumulation: while false, backward leaves the local gradients in .grad (they
  // accumulate there) and communicates nothing; the next backward with it true all-reduces
  // the accumulated sums. PyTorch's `with ddp.no_sync():`.
  void set_require_backward_grad_sync(bool sync) { require_sync_ = sync; }
  bool require_backward_grad_sync() const { return require_sync_; }

  // RAII form: no synchronisation while the guard lives.
  class NoSyncGuard {
   public:
    explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(&ddp), previous_(ddp.require_sync_) {
      ddp.require_sync_ = false;
    }
    ~NoSyncGuard() {
      if (ddp_ != nullptr) ddp_->require_sync_ = previous_;
    }
    NoSyncGuard(NoSyncGuard&& other) noexcept : ddp_(other.ddp_), previous_(other.previous_) { other.ddp_ = nullptr; }
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(NoSyncGuard&&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool previous_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  // The buckets, in launch order.
  const std::vector<BucketInfo>& buckets() const { return bucket_info_; }
  // One line per bucket: "bucket 0: 12 tensors, 1.06 MiB (cap 1 MiB): classifier.bias .. layer.1.output.dense.weight".
  std::string DescribeBuckets() const;
  // The last synchronised backward; synced_backwards() counts them.
  const SyncStats& last_sync() const { return last_; }
  int64_t synced_backwards() const { return synced_backwards_; }

 private:
  struct Param;
  struct Bucket;
  struct Pass;

  void OnGradientAccumulated(size_t index);
  void CopyIntoBucket(size_t index);
  void LaunchReadyBuckets();
  void FinishBackward();
  void ResetPass();
  [[noreturn]] void ThrowUnused();

  std::shared_ptr<torch::nn::Module> module_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  DdpOptions options_;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<BucketInfo> bucket_info_;
  bool require_sync_ = true;
  std::unique_ptr<Pass> pass_;  // the synchronised backward in progress, if any
  SyncStats last_;
  int64_t synced_backwards_ = 0;
  // Set when a failure left this rank's collectives out of step with the others: every later
  // synchronised backward throws it.
  std::string broken_;
  // find_unused_parameters: parameters whose gradient was computed since the last sync
  // (no_sync passes included, as in PyTorch).
  std::vector<uint8_t> used_since_sync_;
  // One per parameter (common/autograd): last, so they are removed before anything they use.
  std::vector<autograd::GradReadyHook> hooks_;
};

}  // namespace distlm::ddp
