// Task 3a reference solution: one asynchronous all-reduce per parameter, from its hook.
//
// Each all-reduce starts the moment its gradient exists, so communication runs while backward
// computes the rest; the price is one collective per parameter (41 for the tiny BERT, 201 for
// BERT-base), each paying the backend's latency. 3b fixes that with buckets.
#include <torch/utils.h>

#include <utility>

#include "common/autograd/grad_ready_hook.h"
#include "common/runtime/errors.h"
#include "task3/ddp.h"

namespace distlm::task3 {
namespace {

class PerParameterDdp : public DataParallel {
 public:
  PerParameterDdp(std::vector<NamedParameter> params, c10::intrusive_ptr<c10d::ProcessGroup> pg)
      : params_(std::move(params)), pg_(std::move(pg)), work_(params_.size()) {
    {
      torch::NoGradGuard no_grad;
      for (auto& p : params_) {
        std::vector<torch::Tensor> data = {p.tensor.data()};
        pg_->broadcast(data)->wait();  // root 0 by default
      }
    }
    hooks_.reserve(params_.size());
    for (size_t i = 0; i < params_.size(); ++i) hooks_.emplace_back(params_[i].tensor, [this, i] { OnGradReady(i); });
  }

  void set_require_grad_sync(bool sync) override { sync_ = sync; }

  void FinishGradientSync() override {
    std::string missing;
    int missing_count = 0;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (work_[i]) continue;
      missing += (missing_count++ ? ", " : "") + params_[i].name;
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!work_[i]) continue;
      work_[i]->wait();
      work_[i].reset();
      params_[i].tensor.mutable_grad().div_(pg_->getSize());
    }
    if (missing_count > 0) {
      throw UserError(std::to_string(missing_count) + " parameter(s) received no gradient in this backward: " + missing +
                      "; every parameter must take part in the loss");
    }
  }

 private:
  void OnGradReady(size_t i) {
    if (!sync_) return;
    std::vector<torch::Tensor> grad = {params_[i].tensor.grad()};
    work_[i] = pg_->allreduce(grad);  // sums in place; divided in FinishGradientSync
  }

  std::vector<NamedParameter> params_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  std::vector<c10::intrusive_ptr<c10d::Work>> work_;  // this backward's all-reduce, per parameter
  std::vector<autograd::GradReadyHook> hooks_;        // last: removed before the rest is destroyed
  bool sync_ = true;
};

}  // namespace

std::unique_ptr<DataParallel> MakePerParameterDdp(std::vector<NamedParameter> params,
                                                  c10::intrusive_ptr<c10d::ProcessGroup> pg) {
  return std::make_unique<PerParameterDdp>(std::move(params), std::move(pg));
}

}  // namespace distlm::task3
