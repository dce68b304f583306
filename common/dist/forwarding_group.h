// A process group that hands every collective to another one: the base of distlm's wrappers
// (counting, casting), which then override only what they change. Both LibTorch lines: on
// 1.13 GroupImpl is c10d::ProcessGroup, on 2.x c10d::Backend (c10d_compat.h); the inner group
// is a caller's ProcessGroup either way.
#pragma once

#include <chrono>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "common/dist/c10d_compat.h"

namespace distlm::dist {

// A Work that hands everything to another one: the base of the local tests' watched works, which
// then override only wait() (to note when, or to bound it).
class ForwardingWork : public c10d::Work {
 public:
  explicit ForwardingWork(c10::intrusive_ptr<c10d::Work> inner) : inner_(std::move(inner)) {}
  bool wait(std::chrono::milliseconds timeout) override { return inner_->wait(timeout); }
  bool isCompleted() override { return inner_->isCompleted(); }
  bool isSuccess() const override { return inner_->isSuccess(); }
  std::exception_ptr exception() const override { return inner_->exception(); }
  std::vector<at::Tensor> result() override { return inner_->result(); }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return inner_->getFuture(); }

 protected:
  c10::intrusive_ptr<c10d::Work> inner_;
};

class ForwardingGroup : public GroupImpl {
 public:
  explicit ForwardingGroup(c10::intrusive_ptr<c10d::ProcessGroup> inner)
      : GroupImpl(inner->getRank(), inner->getSize()), inner_(std::move(inner)) {}

  const c10::intrusive_ptr<c10d::ProcessGroup>& inner() const { return inner_; }
  const std::string getBackendName() const override { return inner_->getBackendName(); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    return inner_->broadcast(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    return inner_->allreduce(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override {
    return inner_->allreduce_coalesced(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    return inner_->reduce(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    return inner_->allgather(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override {
    return inner_->_allgather_base(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override {
    return inner_->gather(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    return inner_->scatter(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    return inner_->reduce_scatter(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override {
    return inner_->_reduce_scatter_base(output, input, opts);
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    return inner_->send(tensors, dst, tag);
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    return inner_->recv(tensors, src, tag);
  }
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override { return inner_->barrier(opts); }

 protected:
  c10::intrusive_ptr<c10d::ProcessGroup> inner_;
};

}  // namespace distlm::dist
