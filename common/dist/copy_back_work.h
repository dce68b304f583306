// A Work that finishes a collective run on stand-in tensors: when the inner work completes,
// each stand-in is copied into the caller's tensor it stood for. The casting group's
// stand-ins are narrow-dtype copies (--comm_dtype); the host-staging group's are host copies
// of CUDA tensors.
//
// With a backend that has futures (Gloo, NCCL, our MPI group) the copy is a callback of the
// inner future, and this work's future completes after it, so completion callbacks (DDP's)
// see the caller's tensors filled; otherwise wait() copies.
#pragma once

#include <mutex>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace distlm::dist {

class CopyBackWork : public c10d::Work {
 public:
  // originals[i] receives stand_ins[i] (converted to its dtype and device) after `inner`.
  CopyBackWork(c10::intrusive_ptr<c10d::Work> inner, std::vector<at::Tensor> originals,
               std::vector<at::Tensor> stand_ins);

  bool wait(std::chrono::milliseconds timeout) override;
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override { return originals_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  static void CopyBack(const std::vector<at::Tensor>& originals, const std::vector<at::Tensor>& stand_ins);

  c10::intrusive_ptr<c10d::Work> inner_;
  std::vector<at::Tensor> originals_;
  std::vector<at::Tensor> stand_ins_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::once_flag copied_;
};

}  // namespace distlm::dist
