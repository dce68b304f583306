// //part1:bench -- times BERT training steps on random data.
//
// A benchmark, not a test: it prints per-step times, the machine's measured sgemm rate, and
// last one JSON line {"ms_per_step": median, "gflops_per_s": ..., ...} (first step excluded).
// FLOPs count the matrix products of forward and backward (3x the forward's), which is what
// an implementation cannot avoid; elementwise work is overhead on top.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/utils.h>
#include <torch/nn/module.h>
#include <torch/csrc/autograd/profiler.h>
#include <torch/cuda.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/bert/bert_model.h"
#include "common/runtime/device.h"
#include "common/runtime/errors.h"
#include "common/runtime/runtime_flags.h"
#include "common/train/bert_adamw.h"
#include "common/train/mixed_precision.h"
#include "common/vit/vit_model.h"

ABSL_FLAG(std::string, model, "tiny",
          "tiny (BERT, hidden 128, 2 layers, 2 heads, intermediate 512), base (bert-base), or a ViT on "
          "CIFAR-10's 10 classes: vit_tiny (32x32 images, 8x8 patches, hidden 64), vit_b16 or vit_b32 "
          "(ViT-B, 224x224 images, 16x16 or 32x32 patches); --seq_len is BERT's only");
ABSL_FLAG(int64_t, batch_size, 32, "examples per step");
ABSL_FLAG(int64_t, seq_len, 128, "tokens per example");
ABSL_FLAG(int64_t, steps, 10, "timed steps (plus one warm-up step)");
ABSL_FLAG(double, dropout, 0.1, "dropout probability (the model's default is 0.1)");
ABSL_FLAG(bool, bf16, false, "forward passes under bfloat16 autocast, as the programs' --bf16");
ABSL_FLAG(bool, fp16, false,
          "forward passes under float16 autocast with dynamic loss scaling, as the programs' --fp16 "
          "(CUDA; CPU only on LibTorch 2.4+)");
ABSL_FLAG(std::string, device, "cpu", "cpu, cuda or cuda:N, as the programs' --device");
ABSL_FLAG(std::string, optim, "bert_adamw",
          "bert_adamw (pytorch_transformers 1.2's, distlm's default) or adamw_torch (torch.optim.AdamW), "
          "as the programs' --optim");
ABSL_FLAG(std::string, adamw_kernel, "auto",
          "how the AdamW step runs: auto (the fastest measured), loop, foreach or fused (see "
          "common/train/bert_adamw.h)");
ABSL_FLAG(std::string, profile, "", "write a Chrome trace of the last step's operators to this file");

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Matrix-product FLOPs of one forward pass through an encoder (BERT's and ViT's are the same
// products): per token the four HxH projections and the FFN's two HxI products, per sequence
// QK^T and attention x V.
double EncoderFlops(int64_t hidden, int64_t intermediate, int64_t layers, int64_t batch, int64_t seq) {
  const double H = hidden, I = intermediate, S = seq, T = static_cast<double>(batch) * seq;
  return layers * (T * (2 * 4 * H * H + 2 * 2 * H * I) + batch * 2.0 * 2 * S * S * H);
}

// BERT: the encoder, then per example the pooler (HxH) and the classifier.
double ForwardFlops(const distlm::bert::BertConfig& c, int64_t batch, int64_t seq) {
  const double H = c.hidden_size;
  return EncoderFlops(c.hidden_size, c.intermediate_size, c.num_hidden_layers, batch, seq) +
         batch * (2 * H * H + 2 * H * c.num_labels);
}

// ViT: the patch projection (a convolution with stride = kernel: one C*P*P x H product per
// patch), the encoder over [CLS] + patches, then the classifier on [CLS] (no pooler).
double ForwardFlops(const distlm::vit::ViTConfig& v, int64_t batch) {
  const double H = v.hidden_size, patches = static_cast<double>(batch) * (v.num_tokens() - 1);
  return patches * 2.0 * v.num_channels * v.patch_size * v.patch_size * H +
         EncoderFlops(v.hidden_size, v.intermediate_size, v.num_hidden_layers, batch, v.num_tokens()) +
         batch * 2 * H * v.num_labels;
}

// The upper middle value when the count is even (hf_step_time.py's median, the same).
double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Waits for the GPU's queued work, so that a host clock times it (nothing on CPU).
void Sync(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// The device's matrix-product rate through LibTorch in `dtype`, on a product the size of
// BERT-base's FFN (float32: sgemm; on CUDA without TF32, as LibTorch's default is).
double MeasureGemmGflops(const torch::Device& device, torch::Dtype dtype) {
  auto o = torch::TensorOptions().device(device).dtype(dtype);
  auto a = torch::randn({4096, 768}, o), b = torch::randn({768, 3072}, o);
  torch::mm(a, b);
  Sync(device);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    auto c = torch::mm(a, b);
    Sync(device);
    double s = Seconds(t0, Clock::now());
    best = std::max(best, 2.0 * 4096 * 768 * 3072 / s / 1e9);
  }
  return best;
}

// The model to time, its random batch, and one forward pass giving the loss.
struct BenchModel {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor()> forward_loss;
  double forward_flops = 0;
  int64_t tokens_per_example = 0;
};

BenchModel MakeBenchModel(const std::string& which, int64_t B, int64_t S, const torch::Device& device) {
  const std::string choices = "--model must be tiny, base, vit_tiny, vit_b16 or vit_b32, got '" + which + "'";
  BenchModel m;
  m.tokens_per_example = S;
  if (which.rfind("vit_", 0) == 0) {
    distlm::vit::ViTConfig v;
    if (which == "vit_tiny") {
      v = distlm::vit::TinyViTConfig();
    } else if (which == "vit_b16" || which == "vit_b32") {
      v = distlm::vit::ViTBaseConfig(which == "vit_b16" ? 16 : 32);
    } else {
      throw distlm::UserError(choices);
    }
    v.hidden_dropout_prob = v.attention_probs_dropout_prob = absl::GetFlag(FLAGS_dropout);
    auto model = std::make_shared<distlm::vit::ViTForImageClassificationImpl>(v);
    auto pixels = torch::randn({B, v.num_channels, v.image_size, v.image_size}).to(device);
    auto labels = torch::randint(0, v.num_labels, {B}, torch::kLong).to(device);
    m.forward_loss = [model, pixels, labels] { return model->forward(pixels, labels).loss; };
    m.module = model;
    m.tokens_per_example = v.num_tokens();
    m.forward_flops = ForwardFlops(v, B);
  } else {
    distlm::bert::BertConfig c;
    if (which == "tiny") {
      c = distlm::bert::TinyBertConfig(30522);
    } else if (which == "base") {
      c = distlm::bert::BertBaseCasedConfig();
    } else {
      throw distlm::UserError(choices);
    }
    c.hidden_dropout_prob = c.attention_probs_dropout_prob = absl::GetFlag(FLAGS_dropout);
    auto model = std::make_shared<distlm::bert::BertForSequenceClassificationImpl>(c);
    auto ids = torch::randint(1, c.vocab_size, {B, S}, torch::kLong).to(device);
    auto types =
        torch::cat({torch::zeros({B, S / 2}, torch::kLong), torch::ones({B, S - S / 2}, torch::kLong)}, 1).to(device);
    auto mask = torch::ones({B, S}, torch::kLong).to(device);
    auto labels = torch::randint(0, 2, {B}, torch::kLong).to(device);
    m.forward_loss = [model, ids, types, mask, labels] { return model->forward(ids, types, mask, labels).loss; };
    m.module = model;
    m.forward_flops = ForwardFlops(c, B, S);
  }
  m.module->to(device);
  m.module->train();
  return m;
}

// --optim and --adamw_kernel.
distlm::train::AdamWOptions AdamWFromFlags() {
  distlm::train::AdamWOptions adam;
  const std::string optim = absl::GetFlag(FLAGS_optim), kernel = absl::GetFlag(FLAGS_adamw_kernel);
  if (optim != "bert_adamw" && optim != "adamw_torch") {
    throw distlm::UserError("--optim must be bert_adamw or adamw_torch, got '" + optim + "'");
  }
  adam.torch_semantics = optim == "adamw_torch";
  const std::map<std::string, distlm::train::AdamWKernel> kernels = {{"auto", distlm::train::AdamWKernel::kAuto},
                                                                     {"loop", distlm::train::AdamWKernel::kLoop},
                                                                     {"foreach", distlm::train::AdamWKernel::kForeach},
                                                                     {"fused", distlm::train::AdamWKernel::kFused}};
  if (kernels.count(kernel) == 0) {
    throw distlm::UserError("--adamw_kernel must be auto, loop, foreach or fused, got '" + kernel + "'");
  }
  adam.kernel = kernels.at(kernel);
  return adam;
}

// Each timed step's parts, in ms (the warm-up step excluded).
struct StepTimes {
  std::vector<double> step, forward, backward, update;
  std::string kernel_used;  // the AdamW kernel the step ran (it depends on the gradients)
};

// steps + 1 training steps as the Trainer takes them (the first a warm-up), each printed.
StepTimes TimeSteps(BenchModel& m, const torch::Device& device, distlm::train::Precision precision, int64_t steps) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  std::vector<torch::Tensor> params;
  for (const auto& p : m.module->named_parameters()) {
    named.emplace_back(p.key(), p.value());
    params.push_back(p.value());
  }
  distlm::train::BertAdamW opt(named, AdamWFromFlags());
  distlm::train::LossScaler scaler(precision == distlm::train::Precision::kFp16);
  const char* kernel_names[] = {"auto", "loop", "foreach", "fused"};
  StepTimes times;
  for (int64_t i = 0; i <= steps; ++i) {
    std::unique_ptr<torch::autograd::profiler::RecordProfile> profile;
    if (i == steps && !absl::GetFlag(FLAGS_profile).empty()) {
      profile = std::make_unique<torch::autograd::profiler::RecordProfile>(absl::GetFlag(FLAGS_profile));
    }
    Sync(device);
    auto t0 = Clock::now();
    torch::Tensor loss;
    {
      distlm::train::AutocastScope autocast(precision, device);
      loss = m.forward_loss();
    }
    Sync(device);
    auto t1 = Clock::now();
    scaler.Scale(loss).backward();
    Sync(device);
    auto t2 = Clock::now();
    if (i == 0) times.kernel_used = kernel_names[static_cast<int>(opt.KernelFor(params.front()))];
    // As the Trainer: unscale and look for inf/NaN (fp16), clip, step unless it overflowed.
    const bool finite = scaler.UnscaleAndCheck(params, nullptr);
    if (finite) {
      distlm::train::ClipGradNorm(params, 1.0);
      opt.Step();
    }
    scaler.Update(finite);
    opt.ZeroGrad();
    Sync(device);
    auto t3 = Clock::now();
    const double step_ms = Seconds(t0, t3) * 1000;
    std::printf("step %lld: %.1f ms (forward %.1f, backward %.1f, clip+AdamW+zero %.1f)%s\n", static_cast<long long>(i),
                step_ms, Seconds(t0, t1) * 1000, Seconds(t1, t2) * 1000, Seconds(t2, t3) * 1000,
                i == 0 ? " (warm-up, excluded)" : "");
    if (i > 0) {
      times.step.push_back(step_ms);
      times.forward.push_back(Seconds(t0, t1) * 1000);
      times.backward.push_back(Seconds(t1, t2) * 1000);
      times.update.push_back(Seconds(t2, t3) * 1000);
    }
  }
  if (scaler.skipped() > 0) {
    std::printf("fp16: %lld update(s) overflowed and were skipped\n", static_cast<long long>(scaler.skipped()));
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  return distlm::RunMain([&]() -> int {
    absl::ParseCommandLine(argc, argv);
    auto rt = distlm::runtime::InitRuntimeFromFlags();
    const std::string which = absl::GetFlag(FLAGS_model);
    const int64_t B = absl::GetFlag(FLAGS_batch_size), S = absl::GetFlag(FLAGS_seq_len),
                  steps = absl::GetFlag(FLAGS_steps);
    if (B < 1 || S < 3 || S > 512 || steps < 1) {
      throw distlm::UserError("need --batch_size >= 1, 3 <= --seq_len <= 512, --steps >= 1");
    }
    const torch::Device device = distlm::runtime::ResolveDevice(absl::GetFlag(FLAGS_device), 0);
    const auto precision =
        distlm::train::PrecisionFromFlags(absl::GetFlag(FLAGS_bf16), absl::GetFlag(FLAGS_fp16), device);
    torch::manual_seed(0);
    BenchModel model = MakeBenchModel(which, B, S, device);
    int64_t num_params = 0;
    for (const auto& p : model.module->parameters()) num_params += p.numel();
    AdamWFromFlags();  // bad --optim or --adamw_kernel: said before the gemm measurements

    const double sgemm = MeasureGemmGflops(device, torch::kFloat);
    const double gemm16 = precision == distlm::train::Precision::kFp32
                              ? 0
                              : MeasureGemmGflops(device, precision == distlm::train::Precision::kBf16
                                                              ? torch::kBFloat16
                                                              : torch::kHalf);
    const StepTimes times = TimeSteps(model, device, precision, steps);
    const double median = Median(times.step);
    const double gflops = 3 * model.forward_flops / (median / 1000) / 1e9;
    if (device.is_cuda()) {
      std::printf("sgemm through LibTorch on %s: %.1f GFLOP/s\n", device.str().c_str(), sgemm);
    } else {
      std::printf("sgemm through LibTorch: %.1f GFLOP/s (%d threads, %s)\n", sgemm, rt.num_threads, rt.blas.c_str());
    }
    if (gemm16 > 0) std::printf("%s matrix product: %.1f GFLOP/s\n", distlm::train::PrecisionName(precision).c_str(), gemm16);
    nlohmann::json result = {{"model", which},
                             {"batch_size", B},
                             {"tokens_per_example", model.tokens_per_example},
                             {"parameters", num_params},
                             // What data parallelism sends per update: a float32 gradient all-reduce
                             // of every parameter; a ring moves 2(N-1)/N of it per rank (N = 4).
                             {"allreduce_bytes", 4 * num_params},
                             {"ring_bytes_per_rank_at_4", 2.0 * 3 / 4 * 4 * num_params},
                             {"threads", rt.num_threads},
                             {"device", device.str()},
                             {"precision", distlm::train::PrecisionName(precision)},
                             {"optim", absl::GetFlag(FLAGS_optim)},
                             {"adamw_kernel", times.kernel_used},
                             {"ms_per_step", median},
                             // Each part's own median (their sum need not be the step's median).
                             {"forward_ms", Median(times.forward)},
                             {"backward_ms", Median(times.backward)},
                             {"clip_adamw_zero_ms", Median(times.update)},
                             {"gflops_per_s", gflops},
                             {"sgemm_gflops_per_s", sgemm},
                             {"fraction_of_sgemm", gflops / sgemm}};
    if (gemm16 > 0) result["gemm16_gflops_per_s"] = gemm16;
    std::printf("%s\n", result.dump().c_str());
    return 0;
  });
}
