#include "common/zero/sharded_adamw.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <torch/version.h>
#include <torch/utils.h>

#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/trace/recorder.h"
#include "common/zero/shard_ops.h"

namespace distlm::zero {

namespace {

std::vector<int64_t> Numels(const std::vector<std::pair<std::string, torch::Tensor>>& params) {
  std::vector<int64_t> out;
  for (const auto& [name, p] : params) {
    if (p.scalar_type() != torch::kFloat) throw UserError("ZeRO: parameter " + name + " is not float32");
    out.push_back(p.numel());
  }
  return out;
}

}  // namespace

ShardedAdamW::ShardedAdamW(std::vector<std::pair<std::string, torch::Tensor>> params, train::AdamWOptions options,
                           int rank, int world_size)
    : params_(std::move(params)), layout_(Numels(params_), world_size), rank_(rank) {
  if (rank < 0 || rank >= world_size) {
    throw UserError("ZeRO: rank " + std::to_string(rank) + " outside world size " + std::to_string(world_size));
  }
  torch::NoGradGuard no_grad;
  // The padding stays zero in both buffers: no parameter or gradient ever writes there.
  // On the parameters' device (--device); every parameter must be there.
  const torch::Device device = params_.empty() ? torch::Device(torch::kCPU) : params_.front().second.device();
  for (const auto& [name, p] : params_) {
    if (p.device() != device) {
      throw UserError("ZeRO: " + name + " is on " + p.device().str() + ", " + params_.front().first + " on " +
                      device.str() + "; put the whole model on one device");
    }
  }
  const auto on_device = torch::TensorOptions().dtype(torch::kFloat).device(device);
  flat_params_ = torch::zeros({layout_.padded_numel()}, on_device);
  flat_grad_ = torch::zeros({layout_.padded_numel()}, on_device);
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    torch::Tensor data = flat_params_.narrow(0, layout_.offset(i), layout_.numel(i));
    data.copy_(p.detach().reshape({-1}));
    // set_data keeps the parameter the same object (the model and the trainer hold it) and
    // moves it onto the flat storage; its old storage is freed.
    p.set_data(data.view(p.sizes()));
    // Autograd adds into a .grad that is already there (in place, without grad mode), so
    // backward accumulates into the flat gradient.
    p.mutable_grad() = flat_grad_.narrow(0, layout_.offset(i), layout_.numel(i)).view(p.sizes());
  }
  const int64_t begin = layout_.shard_begin(rank_);
  param_shard_ = flat_params_.narrow(0, begin, layout_.shard_numel());
  grad_shard_ = torch::zeros({layout_.shard_numel()}, on_device);
  segments_ = layout_.Segments(rank_);
  std::vector<std::pair<std::string, torch::Tensor>> pieces;
  for (const Segment& s : segments_) {
    torch::Tensor piece = flat_params_.narrow(0, s.flat_begin, s.numel);
    piece.mutable_grad() = grad_shard_.narrow(0, s.flat_begin - begin, s.numel);
    pieces.emplace_back(params_[s.param].first, piece);
  }
  shard_opt_ = std::make_unique<train::BertAdamW>(std::move(pieces), options);
}

void ShardedAdamW::AdoptGradients() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    torch::Tensor view = flat_grad_.narrow(0, layout_.offset(i), layout_.numel(i));
    const torch::Tensor& g = p.grad();
    if (g.defined() && g.data_ptr() == view.data_ptr() && g.is_contiguous()) continue;
    if (g.defined()) {
      view.copy_(g.reshape({-1}));
    } else {
      view.zero_();
    }
    p.mutable_grad() = view.view(p.sizes());
  }
}

double ShardedAdamW::ShardSquaredNorm() const { return SquaredNormInDouble(grad_shard_); }

void ShardedAdamW::ScaleGradShard(double norm, double max_norm) { ScaleForClipping({grad_shard_}, norm, max_norm); }

double ShardedAdamW::ClipGradShard(c10d::ProcessGroup& pg, double max_norm) {
  trace::Scope span(trace::cat::kClip, "ClipGradShard");
  std::vector<torch::Tensor> sq = {torch::tensor({ShardSquaredNorm()}, torch::kDouble)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  pg.allreduce(sq, opts)->wait();
  const double norm = std::sqrt(sq[0].item<double>());
  ScaleGradShard(norm, max_norm);
  return norm;
}

void ShardedAdamW::StepShard() {
  trace::Scope span(trace::cat::kOptimizer, "AdamW (shard)");
  auto start = std::chrono::steady_clock::now();
  shard_opt_->Step();
  last_step_ms_ = MsSince(start);
}

void ShardedAdamW::ZeroGrad() {
  torch::NoGradGuard no_grad;
  flat_grad_.zero_();
  grad_shard_.zero_();
  AdoptGradients();  // in case something pointed a .grad elsewhere meanwhile
}

train::BertAdamW::State ShardedAdamW::GatherState(c10d::ProcessGroup& pg) {
  const auto& mine = shard_opt_->state();
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& [name, p] : params_) shapes.push_back(p.sizes().vec());
  train::BertAdamW::State whole;
  whole.step = shard_opt_->step_count();
  whole.exp_avg = GatherWhole(pg, layout_, rank_, mine.exp_avg, shapes);
  whole.exp_avg_sq = GatherWhole(pg, layout_, rank_, mine.exp_avg_sq, shapes);
  return whole;
}

void ShardedAdamW::LoadState(const train::BertAdamW::State& whole) {
  if (whole.exp_avg.size() != params_.size() || whole.exp_avg_sq.size() != params_.size()) {
    throw UserError("ZeRO: optimizer state has " + std::to_string(whole.exp_avg.size()) + " tensors, the model has " +
                    std::to_string(params_.size()) + " parameters");
  }
  std::vector<std::string> names;
  for (const auto& [name, p] : params_) names.push_back(name);
  train::BertAdamW::State mine;
  mine.step = whole.step;
  try {
    mine.exp_avg = ShardPieces(layout_, rank_, whole.exp_avg, names);
    mine.exp_avg_sq = ShardPieces(layout_, rank_, whole.exp_avg_sq, names);
  } catch (const UserError& e) {
    throw UserError(std::string("ZeRO: ") + e.what());
  }
  shard_opt_->LoadState(mine);
}

// Gloo: LibTorch 1.13's has no reduce_scatter; 2.x's has one (and _reduce_scatter_base), but it
// is an all_reduce inside: measured on 2.11 over 4 ranks (task4_bench/gloo_bytes.py),
// reduce_scatter_tensor put the same bytes on the wire as all_reduce (6.0x the payload, where a
// ring reduce-scatter sends 3.0x).
// Calling it would only hide the all_reduce's cost under the name of the cheaper collective,
// so both lines all-reduce and slice, and say so.
bool HasReduceScatter(const c10d::ProcessGroup& pg) { return pg.getBackendName() != "gloo"; }

std::string FallbackNote(const c10d::ProcessGroup& pg) {
  if (HasReduceScatter(pg)) return "";
#if TORCH_VERSION_MAJOR >= 2
  const std::string why = "'s reduce_scatter in this LibTorch is an all_reduce inside (the same bytes on the wire)";
#else
  const std::string why = " has no reduce_scatter in this LibTorch";
#endif
  return pg.getBackendName() + why +
         ": all_reduce + slice, which sends 2x the bytes of a reduce-scatter; all_gather into a list of shard views";
}

}  // namespace distlm::zero
