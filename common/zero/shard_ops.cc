#include "common/zero/shard_ops.h"

#include <ATen/Parallel.h>
#include <torch/utils.h>

#include <algorithm>

#include "common/runtime/errors.h"

namespace distlm::zero {

double SquaredNormInDouble(const torch::Tensor& t) {
  // A loop on the host, because a double copy of the shard would cost 2x its memory every
  // update; on a GPU the copy is the cheap way.
  if (!t.device().is_cpu()) return t.to(torch::kDouble).square().sum().item<double>();
  const torch::Tensor c = t.contiguous();
  // Blocks of fixed size summed in parallel, each with 8 running sums (one sum is a chain of
  // dependent adds: ~4 cycles an element), then the block sums in order: one pass at memory
  // speed, and the same number whatever the thread count.
  const float* g = c.data_ptr<float>();
  const int64_t n = c.numel();
  constexpr int64_t kBlock = 1 << 16;
  std::vector<double> block_sums((n + kBlock - 1) / kBlock, 0.0);
  at::parallel_for(0, static_cast<int64_t>(block_sums.size()), 1, [&](int64_t first, int64_t last) {
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
      double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t i = begin;
      for (; i + 8 <= end; i += 8) {
        for (int j = 0; j < 8; ++j) lanes[j] += static_cast<double>(g[i + j]) * g[i + j];
      }
      for (; i < end; ++i) lanes[0] += static_cast<double>(g[i]) * g[i];
      double sum = 0;
      for (double lane : lanes) sum += lane;
      block_sums[b] = sum;
    }
  });
  double sum = 0;
  for (double s : block_sums) sum += s;
  return sum;
}

void ScaleForClipping(const std::vector<torch::Tensor>& grads, double norm, double max_norm) {
  if (!(max_norm > 0)) return;
  torch::NoGradGuard no_grad;
  // As train::ClipGradNorm (torch 1.13): the total is a float32 tensor, so is the coefficient.
  torch::Tensor total = torch::tensor(static_cast<float>(norm), torch::kFloat);
  torch::Tensor coef = max_norm / (total + 1e-6);
  if (coef.item<double>() >= 1.0) return;
  for (torch::Tensor g : grads) g.mul_(coef);  // a 0-dim tensor: a scalar on any device
}

std::vector<torch::Tensor> GatherWhole(c10d::ProcessGroup& pg, const FlatLayout& layout, int rank,
                                       const std::vector<torch::Tensor>& pieces,
                                       const std::vector<std::vector<int64_t>>& shapes) {
  torch::NoGradGuard no_grad;
  const std::vector<Segment> segments = layout.Segments(rank);
  if (pieces.size() != segments.size() || shapes.size() != layout.num_params()) {
    throw std::logic_error("GatherWhole: " + std::to_string(pieces.size()) + " pieces for " +
                           std::to_string(segments.size()) + " segments, " + std::to_string(shapes.size()) +
                           " shapes for " + std::to_string(layout.num_params()) + " parameters");
  }
  const int64_t begin = layout.shard_begin(rank);
  torch::Tensor shard = torch::zeros({layout.shard_numel()}, torch::kFloat);
  for (size_t j = 0; j < segments.size(); ++j) {
    shard.narrow(0, segments[j].flat_begin - begin, segments[j].numel).copy_(pieces[j].reshape({-1}));
  }
  torch::Tensor flat = torch::empty({layout.padded_numel()}, torch::kFloat);
  std::vector<std::vector<torch::Tensor>> outs;
  if (pg.getRank() == 0) {
    outs.emplace_back();
    for (int r = 0; r < layout.world_size(); ++r) outs[0].push_back(flat.narrow(0, layout.shard_begin(r), layout.shard_numel()));
  }
  std::vector<torch::Tensor> in = {shard};
  c10d::GatherOptions opts;
  opts.rootRank = 0;
  pg.gather(outs, in, opts)->wait();
  std::vector<torch::Tensor> whole;
  for (size_t i = 0; i < layout.num_params(); ++i) {
    whole.push_back(flat.narrow(0, layout.offset(i), layout.numel(i)).view(shapes[i]));
  }
  return whole;
}

std::vector<torch::Tensor> ShardPieces(const FlatLayout& layout, int rank, const std::vector<torch::Tensor>& whole,
                                       const std::vector<std::string>& names) {
  std::vector<torch::Tensor> pieces;
  for (const Segment& s : layout.Segments(rank)) {
    const torch::Tensor& t = whole.at(s.param);
    if (t.numel() != layout.numel(s.param)) {
      throw UserError("optimizer state of " + names.at(s.param) + " has " + std::to_string(t.numel()) +
                      " elements, the parameter " + std::to_string(layout.numel(s.param)));
    }
    pieces.push_back(t.reshape({-1}).narrow(0, s.param_begin, s.numel));
  }
  return pieces;
}

}  // namespace distlm::zero
