#include "task8/outer_loop.h"

#include <torch/torch.h>

namespace distlm::task8 {
namespace {

class Rounds : public OuterLoop {
 public:
  Rounds(const OuterOptimizerOptions& options, Compression compression)
      : options_(options), compression_(compression) {}

  void Begin(const std::vector<torch::Tensor>& parameters) override {
    torch::NoGradGuard no_grad;
    start_.clear();
    for (const auto& p : parameters) start_.push_back(p.detach().clone());
  }

  std::vector<torch::Tensor> SharedState() const override { return momentum_; }

  void LoadSharedState(const std::vector<torch::Tensor>& state) override {
    momentum_.clear();
    for (const auto& m : state) momentum_.push_back(m.clone());
  }

  void End(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) override {
    torch::NoGradGuard no_grad;
    // Each worker's own pseudo-gradient, start - mine; their mean is start - mean(mine).
    std::vector<torch::Tensor> mine;
    for (size_t i = 0; i < parameters.size(); ++i) mine.push_back((start_[i] - parameters[i]).reshape({-1}));
    std::vector<torch::Tensor> flat = {torch::cat(mine)};
    if (compression_ == Compression::kInt8) {
      flat[0] = MeanOfInt8(pg, flat[0]);
    } else {
      // One flat all-reduce: one message per round, whatever the number of tensors.
      pg.allreduce(flat)->wait();
      flat[0].div_(pg.getSize());
    }
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
  // The mean over workers of what each sent in int8: its pseudo-gradient plus what its earlier
  // messages missed. Every worker dequantizes every message and adds them in rank order, so
  // all end with the same bits. An all-gather: int8 does not add up without overflowing.
  torch::Tensor MeanOfInt8(c10d::ProcessGroup& pg, const torch::Tensor& pseudo_gradient) {
    if (!error_.defined()) error_ = torch::zeros_like(pseudo_gradient);
    const torch::Tensor meant = pseudo_gradient + error_;
    const Int8Message sent = QuantizeInt8(meant);
    // Kept once the exchange went through: a failed one is tried again with the survivors.
    torch::Tensor missed = meant - DequantizeInt8(sent);
    // One all-gather of the scales' bytes then the values: across the world each collective
    // costs round trips, whatever its size. (Scales first: a float view needs an aligned start.)
    const int64_t scale_bytes = sent.scales.numel() * 4;
    std::vector<torch::Tensor> message = {torch::cat({sent.scales.view(torch::kChar), sent.values})};
    const int n = pg.getSize();
    std::vector<std::vector<torch::Tensor>> all(1);
    for (int r = 0; r < n; ++r) all[0].push_back(torch::empty_like(message[0]));
    pg.allgather(all, message)->wait();
    error_ = missed;
    torch::Tensor sum = torch::zeros_like(pseudo_gradient);
    for (int r = 0; r < n; ++r) {
      const torch::Tensor& m = all[0][r];
      sum.add_(DequantizeInt8({m.narrow(0, scale_bytes, m.numel() - scale_bytes), m.narrow(0, 0, scale_bytes).view(torch::kFloat)}));
    }
    return sum.div_(n);
  }

  OuterOptimizerOptions options_;
  Compression compression_;
  torch::Tensor error_;                  // what this worker's messages have missed so far (8b)
  std::vector<torch::Tensor> start_;     // where the round started: the same on every worker
  std::vector<torch::Tensor> momentum_;  // the outer optimizer's buffers, from the first round on
};

}  // namespace

std::unique_ptr<OuterLoop> MakeOuterLoop(const OuterOptimizerOptions& options, Compression compression) {
  return std::make_unique<Rounds>(options, compression);
}

}  // namespace distlm::task8
