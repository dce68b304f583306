// Mixed precision, as run_glue's --fp16 and --bf16 do it: the forward passes (training and
// evaluation) under autocast, so matrix products run in 16 bits while the weights, their
// gradients and the optimizer state stay float32 ("master weights": nothing is ever stored in
// 16 bits, and gradient synchronisation is unchanged). Backward runs outside autocast, as
// PyTorch advises: autograd replays each op in the dtype its forward used.
//
//   --bf16  bfloat16: float32's exponent range, so no loss scaling. CPU (oneDNN's bf16 kernels
//           where the CPU has AVX512-BF16 or AMX) and CUDA.
//   --fp16  float16: its range is small (gradients below 6e-8 flush to zero), so the loss is
//           multiplied by a dynamic scale before backward and the gradients divided by it
//           before the optimizer step (LossScaler, torch.cuda.amp.GradScaler's rule). CUDA; on
//           CPU only with LibTorch 2.4+ (whose CPU autocast has float16), slow, for tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

namespace distlm::train {

enum class Precision { kFp32, kBf16, kFp16 };

// From --bf16 and --fp16 (both: a UserError). Checks the device can: fp16 on CPU needs LibTorch
// 2.4+ (a UserError naming --fp16 otherwise).
Precision PrecisionFromFlags(bool bf16, bool fp16, const torch::Device& device);
std::string PrecisionName(Precision p);  // "fp32", "bf16", "fp16"

// Autocast on `device`'s type in `p`'s dtype while alive (nothing for fp32); the previous state
// is restored, and the cache of casted weights cleared when the outermost scope ends.
class AutocastScope {
 public:
  AutocastScope(Precision p, const torch::Device& device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType type_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};

// Dynamic loss scaling (torch.cuda.amp.GradScaler's defaults): the scale starts at 2^16, halves
// on every update whose gradients hold an inf or NaN (that update is skipped: no optimizer step,
// no schedule step, gradients dropped), and doubles after `growth_interval` clean updates in a
// row. Powers of two, so scaling and unscaling are exact. Disabled, it is the identity.
class LossScaler {
 public:
  struct Options {
    double init_scale = 65536.0;
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;
  };
  explicit LossScaler(bool enabled) : LossScaler(enabled, Options()) {}
  LossScaler(bool enabled, Options options);

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  int64_t skipped() const { return skipped_; }

  // loss * scale (the loss itself when disabled).
  torch::Tensor Scale(const torch::Tensor& loss) const;
  // Divides every defined gradient by the scale; true when all are finite. With `agree_over`,
  // the ranks agree (an all-reduce of the verdict): for stages whose gradients differ between
  // ranks until the optimizer step (task 5). Always true when disabled.
  bool UnscaleAndCheck(const std::vector<torch::Tensor>& parameters, c10d::ProcessGroup* agree_over);
  // The same on gradient tensors themselves (task 6: the shards, which are no parameter's .grad).
  bool UnscaleAndCheckGradients(const std::vector<torch::Tensor>& gradients, c10d::ProcessGroup* agree_over);
  // After each update: back off (and count a skip) or grow.
  void Update(bool finite);

  // For snapshots: a resumed run continues with the scale it had.
  void Restore(double scale, int64_t clean_updates, int64_t skipped);
  int64_t clean_updates() const { return clean_; }

 private:
  bool enabled_;
  Options options_;
  double scale_;
  int64_t clean_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace distlm::train
