#include "task8/outer_loop.h"

#include <torch/torch.h>

namespace distlm::task8 {
namespace {

class Rounds : public OuterLoop {
 public:
  explicit Rounds(const OuterOptimizerOptions& options) : options_(options) {}

  void Begin(const std::vector<torch::Tensor>& parameters) override {
    torch::NoGradGuard no_grad;
    start_.clear();
    for (const auto& p : parameters) start_.push_back(p.detach().clone());
  }

  void End(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) override {
    torch::NoGradGuard no_grad;
    // Each worker's own pseudo-gradient, start - mine; their mean is start - mean(mine). One
    // flat all-reduce: one message per round, whatever the number of tensors.
    std::vector<torch::Tensor> mine;
    for (size_t i = 0; i < parameters.size(); ++i) mine.push_back((start_[i] - parameters[i]).reshape({-1}));
    std::vector<torch::Tensor> flat = {torch::cat(mine)};
    pg.allreduce(flat)->wait();
    flat[0].div_(pg.getSize());
    int64_t at = 0;
    const bool first = momentum_.empty();
    for (size_t i = 0; i < parameters.size(); ++i) {
      const int64_t n = parameters[i].numel();
      torch::Tensor g = flat[0].narrow(0, at, n).view_as(parameters[i]);
      at += n;
      torch::Tensor d = g;
      if (options_.momentum != 0) {
        if (first) {
          momentum_.push_back(g.clone());
        } else {
          momentum_[i].mul_(options_.momentum).add_(g);
        }
        d = options_.nesterov ? g.add(momentum_[i], options_.momentum) : momentum_[i];
      }
      start_[i].sub_(d, options_.lr);
      parameters[i].copy_(start_[i]);
    }
  }

 private:
  OuterOptimizerOptions options_;
  std::vector<torch::Tensor> start_;     // where the round started: the same on every worker
  std::vector<torch::Tensor> momentum_;  // the outer optimizer's buffers, from the first round on
};

}  // namespace

std::unique_ptr<OuterLoop> MakeOuterLoop(const OuterOptimizerOptions& options) {
  return std::make_unique<Rounds>(options);
}

}  // namespace distlm::task8
