#include "task8/int8_exchange.h"

#include <torch/torch.h>

namespace distlm::task8 {

Int8Message QuantizeInt8(const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  const int64_t n = flat.numel(), chunks = (n + kInt8Chunk - 1) / kInt8Chunk;
  // Padded to whole chunks with zeros, which change no chunk's largest |value|.
  torch::Tensor padded = torch::zeros({chunks * kInt8Chunk}, flat.options().dtype(torch::kFloat));
  padded.narrow(0, 0, n).copy_(flat.reshape({-1}));
  torch::Tensor rows = padded.view({chunks, kInt8Chunk});
  torch::Tensor scales = rows.abs().amax(1) / 127;
  // A chunk of zeros divides by 1 instead of 0: its values stay 0.
  torch::Tensor divisor = torch::where(scales > 0, scales, torch::ones_like(scales)).unsqueeze(1);
  torch::Tensor q = (rows / divisor).round().clamp(-127, 127).to(torch::kChar);
  return {q.view({-1}).narrow(0, 0, n).contiguous(), scales};
}

torch::Tensor DequantizeInt8(const Int8Message& m) {
  torch::NoGradGuard no_grad;
  const int64_t n = m.values.numel(), chunks = m.scales.numel();
  torch::Tensor padded = torch::zeros({chunks * kInt8Chunk}, torch::kFloat);
  padded.narrow(0, 0, n).copy_(m.values.to(torch::kFloat));
  return (padded.view({chunks, kInt8Chunk}) * m.scales.unsqueeze(1)).view({-1}).narrow(0, 0, n).contiguous();
}

}  // namespace distlm::task8
