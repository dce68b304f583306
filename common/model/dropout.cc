#include "common/model/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/autograd.h>

#include <cmath>
#include <mutex>
#include <string>

#include "common/runtime/errors.h"

namespace distlm::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Variable;
using torch::autograd::variable_list;

// A 32-bit integer finaliser (xor-shift / multiply, three rounds): every input bit reaches
// every output bit. Two of them around a key make a keyed hash of the element's index that is
// plenty for dropout (no visible correlation between neighbours or between calls; see
// dropout_test) and vectorises with 32-bit lane multiplies.
inline uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

inline uint32_t Hash(uint32_t k0, uint32_t k1, uint32_t index) { return Mix32(Mix32(index ^ k0) ^ k1); }

// Keys for the 2^32-element block `block` of a call keyed `key` (tensors of more than 2^32
// elements continue with fresh keys rather than repeating the mask).
inline void BlockKeys(uint64_t key, uint64_t block, uint32_t* k0, uint32_t* k1) {
  *k0 = static_cast<uint32_t>(key) ^ Mix32(static_cast<uint32_t>(block) * 0x9e3779b9U + 1U);
  *k1 = static_cast<uint32_t>(key >> 32);
}

// keep iff Hash >= threshold: P(drop) = threshold / 2^32.
inline uint32_t Threshold(double p) {
  return static_cast<uint32_t>(std::min(std::ldexp(p, 32), 4294967295.0));
}

// Cloned for AVX-512 and AVX2 so the hash runs 16 or 8 lanes at a time.
__attribute__((target_clones("avx512f", "avx2", "default"))) void ForwardRange(
    const float* x, float* y, uint8_t* keep, uint32_t first_index, int64_t n, uint32_t k0, uint32_t k1,
    uint32_t threshold, float scale) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t h = Hash(k0, k1, first_index + static_cast<uint32_t>(i));
    const bool kept = h >= threshold;
    keep[i] = kept;
    // Multiply even when dropped, as x * mask does: NaN and inf stay visible.
    y[i] = x[i] * (kept ? scale : 0.0f);
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void BackwardRange(const float* dy,
                                                                                 const uint8_t* keep, float* dx,
                                                                                 int64_t n, float scale) {
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * (keep[i] ? scale : 0.0f);
}

constexpr int64_t kGrain = 1 << 15;

uint64_t DrawKey() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return at::check_generator<at::CPUGeneratorImpl>(gen)->random64();
}

// Where a run of contiguous elements of the input sits in the tensor whose element indices
// key the mask: x's elements [local, local + n) are that tensor's [global, global + n).
struct Segment {
  int64_t local, global, n;
};

// The mask and output of one segment, split at 2^32-element block boundaries of the global
// index (within a block the index is 32 bits).
void FillSegment(const float* xp, float* yp, uint8_t* kp, Segment s, uint64_t key, uint32_t threshold, float scale) {
  int64_t done = 0;
  while (done < s.n) {
    const int64_t g = s.global + done;
    const uint64_t block = static_cast<uint64_t>(g) >> 32;
    const int64_t take = std::min<int64_t>(s.n - done, static_cast<int64_t>((block + 1) << 32) - g);
    uint32_t k0, k1;
    BlockKeys(key, block, &k0, &k1);
    ForwardRange(xp + s.local + done, yp + s.local + done, kp + s.local + done, static_cast<uint32_t>(g), take, k0, k1,
                 threshold, scale);
    done += take;
  }
}

class DropoutFunction : public torch::autograd::Function<DropoutFunction> {
 public:
  // heads == 0: x is the whole tensor (element i keyed by i). Otherwise x holds local_heads of
  // `heads` heads from head_offset on, [batch * local_heads, ...] (DropoutOfHeads).
  static Variable forward(AutogradContext* ctx, const Variable& input, double p, int64_t heads, int64_t head_offset,
                          int64_t local_heads) {
    const torch::Tensor x = input.contiguous();
    const float scale = 1.0f / static_cast<float>(1.0 - p);
    const uint64_t key = DrawKey();
    const uint32_t threshold = Threshold(p);
    torch::Tensor y = torch::empty_like(x);
    torch::Tensor keep = torch::empty(x.sizes(), x.options().dtype(torch::kUInt8));
    const float* xp = x.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    uint8_t* kp = keep.data_ptr<uint8_t>();
    if (heads == 0) {
      at::parallel_for(0, x.numel(), kGrain, [&](int64_t begin, int64_t end) {
        FillSegment(xp, yp, kp, {begin, begin, end - begin}, key, threshold, scale);
      });
    } else {
      // One segment per (example, local head): its elements are contiguous in both tensors.
      const int64_t per_head = x.numel() / x.size(0), batch = x.size(0) / local_heads;
      at::parallel_for(0, batch * local_heads, std::max<int64_t>(1, kGrain / per_head), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          const int64_t b = i / local_heads, h = head_offset + i % local_heads;
          FillSegment(xp, yp, kp, {i * per_head, (b * heads + h) * per_head, per_head}, key, threshold, scale);
        }
      });
    }
    ctx->saved_data["keep"] = keep;
    ctx->saved_data["scale"] = static_cast<double>(scale);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const torch::Tensor keep = ctx->saved_data["keep"].toTensor();
    const float scale = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const torch::Tensor dy = grad_outputs[0].contiguous();
    torch::Tensor dx = torch::empty_like(dy);
    const float* dyp = dy.data_ptr<float>();
    const uint8_t* kp = keep.data_ptr<uint8_t>();
    float* dxp = dx.data_ptr<float>();
    at::parallel_for(0, dy.numel(), kGrain, [&](int64_t begin, int64_t end) {
      BackwardRange(dyp + begin, kp + begin, dxp + begin, end - begin, scale);
    });
    return {dx, Variable(), Variable(), Variable(), Variable()};
  }
};

}  // namespace

namespace {

// Whether dropout changes x at all; UserError for p outside [0, 1).
bool Applies(double p, bool training) {
  if (!(p >= 0.0 && p < 1.0)) {
    throw UserError("dropout probability " + std::to_string(p) + " is outside [0, 1)");
  }
  return p != 0.0 && training;
}

}  // namespace

bool DropoutKeeps(uint64_t key, uint64_t index, double p) {
  uint32_t k0, k1;
  BlockKeys(key, index >> 32, &k0, &k1);
  return Hash(k0, k1, static_cast<uint32_t>(index)) >= Threshold(p);
}

torch::Tensor Dropout(const torch::Tensor& x, double p, bool training) {
  if (!Applies(p, training)) return x;
  if (x.scalar_type() != torch::kFloat || x.device().type() != torch::kCPU) {
    // Other dtypes and devices (a CUDA build of LibTorch) keep LibTorch's own dropout.
    return torch::dropout(x, p, /*train=*/true);
  }
  return DropoutFunction::apply(x, p, int64_t{0}, int64_t{0}, int64_t{0});
}

torch::Tensor DropoutOfHeads(const torch::Tensor& x, double p, bool training, int64_t heads, int64_t head_offset,
                             int64_t local_heads) {
  if (local_heads == heads) return Dropout(x, p, training);  // the whole tensor: the same keys
  if (!Applies(p, training)) return x;
  if (x.dim() < 1 || local_heads < 1 || x.size(0) % local_heads != 0) {
    throw UserError("tensor-parallel attention dropout needs a tensor of [batch x " + std::to_string(local_heads) +
                    " heads, ...]: got " + c10::str(x.sizes()));
  }
  if (x.scalar_type() == torch::kFloat && x.device().type() == torch::kCPU) {
    return DropoutFunction::apply(x, p, heads, head_offset, local_heads);
  }
  // Other dtypes and devices, where Dropout is LibTorch's: its mask depends on the generator,
  // the shape, the dtype and the device, not on the values, so LibTorch's dropout of ones
  // shaped as the whole tensor makes the draw one process makes (the same generator advance
  // too), and this rank keeps its heads of it. That costs the whole tensor's mask per rank,
  // not its share: on a GPU, a small price for masks equal to part 1's.
  const int64_t batch = x.size(0) / local_heads;
  std::vector<int64_t> whole = x.sizes().vec();
  whole[0] = batch * heads;
  std::vector<int64_t> by_head = {batch, heads};
  by_head.insert(by_head.end(), whole.begin() + 1, whole.end());
  torch::Tensor scaled_mask;
  {
    torch::NoGradGuard no_grad;
    scaled_mask = torch::dropout(torch::ones(whole, x.options()), p, /*train=*/true)
                      .view(by_head)
                      .narrow(1, head_offset, local_heads)
                      .reshape(x.sizes());
  }
  return x * scaled_mask;
}

}  // namespace distlm::model
