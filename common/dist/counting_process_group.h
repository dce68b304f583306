// A ProcessGroup that counts what passes through it, then forwards to the real one.
//
// Stages hand students this group, so the per-update log can say how many tensors were
// communicated, their shapes, dtype and bytes, without the student's code doing any of it.
// "Payload" is what this rank hands a collective as input: allreduce and broadcast, the tensor;
// gather and allgather, this rank's contribution; scatter, the root's N pieces (none elsewhere);
// reduce_scatter, this rank's N pieces. What crosses the network depends on the algorithm (see
// task4_bench for the expected network bytes of each).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "common/dist/c10d_compat.h"
#include "common/dist/forwarding_group.h"

namespace distlm::dist {

struct CollectiveRecord {
  std::string op;                    // "allreduce", "gather", ...
  std::vector<std::vector<int64_t>> shapes;
  std::string dtype;                 // e.g. "float32" (of the first tensor)
  int64_t bytes = 0;                 // payload bytes, all tensors
  int64_t numel() const;             // payload elements, all tensors
  // When the caller launched it, and (all_reduce, all_gather, reduce_scatter) when the backend finished it: ticks of
  // steady_clock since its epoch, 0 until then or when the backend offers no future. Shared because the
  // completion is stored from the backend's thread after the record was taken.
  std::chrono::steady_clock::time_point launched;
  std::shared_ptr<std::atomic<int64_t>> completed_ns = std::make_shared<std::atomic<int64_t>>(0);
};

struct CommStats {
  std::vector<CollectiveRecord> records;
  int64_t calls() const { return static_cast<int64_t>(records.size()); }
  int64_t tensors() const;
  int64_t bytes() const;
  // Time some recorded collective with a known completion was in flight (the union of their
  // launch-to-completion spans).
  double BusyMs() const;
  // {"comm_calls", "comm_tensors", "comm_bytes", "comm_dtype", "comm_ops": {op: calls},
  //  "comm_shapes": [[...], ...] (at most max_shapes listed, then "comm_shapes_more")}.
  nlohmann::json ToJson(size_t max_shapes = 16) const;
};

// Every collective recorded (op, shapes, bytes, dtype, launch and, for all_reduce, all_gather
// and reduce_scatter, completion time), then forwarded (ForwardingGroup).
class CountingProcessGroup : public ForwardingGroup {
 public:
  explicit CountingProcessGroup(c10::intrusive_ptr<c10d::ProcessGroup> inner);

  // What was recorded since the last call; starts afresh.
  CommStats TakeStats();

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

 private:
  // Returns the record's completion slot.
  std::shared_ptr<std::atomic<int64_t>> Record(const std::string& op, const std::vector<at::Tensor>& tensors);

  std::mutex mu_;
  CommStats stats_;
};

}  // namespace distlm::dist
