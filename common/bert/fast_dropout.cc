#include "common/bert/fast_dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <mutex>

namespace distlm::bert {
namespace {

// A 32-bit integer hash with good avalanche (the "lowbias32" constants).
inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

inline uint32_t Uniform32(uint32_t seed_lo, uint32_t seed_hi, uint64_t index) {
  uint32_t h = Mix32(static_cast<uint32_t>(index) * 0x9E3779B9U + seed_lo);
  return Mix32(h ^ seed_hi ^ static_cast<uint32_t>(index >> 32) * 0x85EBCA6BU);
}

// Elements are kept when their uniform number is at or above p * 2^32.
uint32_t Threshold(double p) {
  double t = std::ldexp(p, 32);
  return t >= 4294967295.0 ? 0xFFFFFFFFU : static_cast<uint32_t>(t);
}

// out[i] = keep(i) ? in[i] * scale : 0 for i in [begin, end). Cloned for AVX2 so the integer
// hashing vectorises where the machine allows.
__attribute__((target_clones("avx2", "default"))) void MaskRange(const float* in, float* out, int64_t begin,
                                                                  int64_t end, uint32_t seed_lo, uint32_t seed_hi,
                                                                  uint32_t threshold, float scale) {
  for (int64_t i = begin; i < end; ++i) {
    const bool keep = Uniform32(seed_lo, seed_hi, static_cast<uint64_t>(i)) >= threshold;
    out[i] = keep ? in[i] * scale : 0.0f;
  }
}

torch::Tensor ApplyMask(const torch::Tensor& x, double p, uint64_t seed) {
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "FastDropout takes float32 tensors, got ", x.scalar_type());
  torch::Tensor in = x.contiguous();
  torch::Tensor out = torch::empty_like(in);
  const float* src = in.data_ptr<float>();
  float* dst = out.data_ptr<float>();
  const uint32_t lo = static_cast<uint32_t>(seed), hi = static_cast<uint32_t>(seed >> 32);
  const uint32_t threshold = Threshold(p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  at::parallel_for(0, in.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    MaskRange(src, dst, begin, end, lo, hi, threshold, scale);
  });
  return out;
}

class FastDropoutFunction : public torch::autograd::Function<FastDropoutFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x, double p,
                               int64_t seed) {
    ctx->saved_data["p"] = p;
    ctx->saved_data["seed"] = seed;
    return ApplyMask(x, p, static_cast<uint64_t>(seed));
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    // The same mask, regenerated from the seed: d(out)/d(in) is the mask times the scale.
    const double p = ctx->saved_data["p"].toDouble();
    const uint64_t seed = static_cast<uint64_t>(ctx->saved_data["seed"].toInt());
    return {ApplyMask(grads[0], p, seed), torch::Tensor(), torch::Tensor()};
  }
};

uint64_t NextSeed() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

}  // namespace

bool DropoutKeeps(uint64_t seed, uint64_t index, double p) {
  return Uniform32(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32), index) >= Threshold(p);
}

torch::Tensor FastDropout(const torch::Tensor& x, double p) {
  const int64_t seed = static_cast<int64_t>(NextSeed());
  return FastDropoutFunction::apply(x, p, seed);
}

}  // namespace distlm::bert
