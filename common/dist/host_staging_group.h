// A group for CUDA tensors over a backend that takes host tensors only: our MPI group, and
// Gloo for the collectives it has no CUDA path for (gather, scatter, reduce_scatter, ...).
//
// Each collective copies its CUDA inputs to the host (a synchronous device-to-host copy),
// runs the inner group on the host copies, and copies the results back to the caller's CUDA
// tensors when the inner work completes (CopyBackWork). So the caller sees what a CUDA-capable
// backend would give, at the price of two copies over PCIe per collective; NCCL has none of
// them. InitDistributed registers it for CUDA tensors on gloo and mpi groups (LibTorch 2.x).
#pragma once

#include <vector>

#include "common/dist/c10d_compat.h"

namespace distlm::dist {

class HostStagingGroup : public GroupImpl {
 public:
  explicit HostStagingGroup(c10::intrusive_ptr<GroupImpl> inner);

  const std::string getBackendName() const override { return inner_->getBackendName(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
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
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Point to point (task 7b's pipelines): a send's host copy travels (the inner work holds it);
  // a recv lands in a host tensor, copied into the caller's when the inner work completes.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;

 private:
  c10::intrusive_ptr<GroupImpl> inner_;
};

}  // namespace distlm::dist
