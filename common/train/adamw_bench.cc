// //common/train:adamw_bench -- times ClipGradNorm and BertAdamW::Step alone, per kernel.
//
// bazel run -c opt //common/train:adamw_bench -- --model=base --num_threads=2
//     [--kernels=loop,foreach,fused] [--torch_semantics] [--weight_decay=0.01] [--steps=10]
//
// A benchmark, not a test. The parameters have BERT-base's (or the tiny BERT's) names and
// shapes, random values; every step starts from the same random gradients (copied in, not
// timed) with a global norm above 1, so the clip multiplies as in training. Prints one JSON
// line per kernel: the median clip_ms and step_ms, the fastest (*_min_ms: on a shared machine
// the better estimate of the kernel's cost), and step_gb_per_s, the bytes an update must move
// (p, m, v read and written, g read: 28 per parameter) over the median step. A kernel the line
// lacks (fused before LibTorch 2.4, or for the reference semantics) runs as KernelFor resolves
// it; "ran" says which.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>
#include <torch/utils.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/runtime/errors.h"
#include "common/runtime/runtime_flags.h"
#include "common/train/bert_adamw.h"

ABSL_FLAG(std::string, model, "base", "base (BERT-base's 110M parameters) or tiny (hidden 128, 2 layers)");
ABSL_FLAG(std::string, kernels, "loop,foreach,fused", "comma-separated: loop, foreach, fused");
ABSL_FLAG(bool, torch_semantics, false, "torch.optim.AdamW's formula (--optim=adamw_torch)");
ABSL_FLAG(double, weight_decay, 0.01, "weight decay of the decay group (biases and LayerNorm weights get none)");
ABSL_FLAG(int, steps, 10, "timed steps per kernel (after one warm-up step)");

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::pair<std::string, std::vector<int64_t>>> Shapes(const std::string& model) {
  int64_t H, I, L;
  if (model == "base") {
    H = 768, I = 3072, L = 12;
  } else if (model == "tiny") {
    H = 128, I = 512, L = 2;
  } else {
    throw distlm::UserError("--model must be base or tiny, got '" + model + "'");
  }
  std::vector<std::pair<std::string, std::vector<int64_t>>> s = {
      {"bert.embeddings.word_embeddings.weight", {30522, H}},
      {"bert.embeddings.position_embeddings.weight", {512, H}},
      {"bert.embeddings.token_type_embeddings.weight", {2, H}},
      {"bert.embeddings.LayerNorm.weight", {H}},
      {"bert.embeddings.LayerNorm.bias", {H}}};
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      s.push_back({p + n + ".weight", {H, H}});
      s.push_back({p + n + ".bias", {H}});
    }
    s.push_back({p + "attention.output.LayerNorm.weight", {H}});
    s.push_back({p + "attention.output.LayerNorm.bias", {H}});
    s.push_back({p + "intermediate.dense.weight", {I, H}});
    s.push_back({p + "intermediate.dense.bias", {I}});
    s.push_back({p + "output.dense.weight", {H, I}});
    s.push_back({p + "output.dense.bias", {H}});
    s.push_back({p + "output.LayerNorm.weight", {H}});
    s.push_back({p + "output.LayerNorm.bias", {H}});
  }
  s.push_back({"bert.pooler.dense.weight", {H, H}});
  s.push_back({"bert.pooler.dense.bias", {H}});
  s.push_back({"classifier.weight", {2, H}});
  s.push_back({"classifier.bias", {2}});
  return s;
}

const char* Name(distlm::train::AdamWKernel k) {
  switch (k) {
    case distlm::train::AdamWKernel::kLoop: return "loop";
    case distlm::train::AdamWKernel::kForeach: return "foreach";
    case distlm::train::AdamWKernel::kFused: return "fused";
    default: return "auto";
  }
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  return distlm::RunMain([&]() -> int {
    absl::ParseCommandLine(argc, argv);
    auto rt = distlm::runtime::InitRuntimeFromFlags();
    torch::NoGradGuard no_grad;
    torch::manual_seed(0);
    std::vector<std::pair<std::string, torch::Tensor>> named;
    std::vector<torch::Tensor> params, grads0;
    int64_t numel = 0;
    for (const auto& [name, shape] : Shapes(absl::GetFlag(FLAGS_model))) {
      named.emplace_back(name, torch::randn(shape) * 0.02);
      grads0.push_back(torch::randn(shape) * 1e-3);
      params.push_back(named.back().second);
      numel += params.back().numel();
    }
    std::stringstream list(absl::GetFlag(FLAGS_kernels));
    for (std::string kernel; std::getline(list, kernel, ',');) {
      distlm::train::AdamWOptions o;
      o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
      o.torch_semantics = absl::GetFlag(FLAGS_torch_semantics);
      if (kernel == "loop") {
        o.kernel = distlm::train::AdamWKernel::kLoop;
      } else if (kernel == "foreach") {
        o.kernel = distlm::train::AdamWKernel::kForeach;
      } else if (kernel == "fused") {
        o.kernel = distlm::train::AdamWKernel::kFused;
      } else {
        throw distlm::UserError("--kernels: loop, foreach or fused, got '" + kernel + "'");
      }
      distlm::train::BertAdamW opt(named, o);
      std::vector<double> clip_ms, step_ms;
      for (int i = 0; i <= absl::GetFlag(FLAGS_steps); ++i) {
        for (size_t j = 0; j < params.size(); ++j) params[j].mutable_grad() = grads0[j].clone();
        auto t0 = Clock::now();
        distlm::train::ClipGradNorm(params, 1.0);
        auto t1 = Clock::now();
        opt.Step();
        auto t2 = Clock::now();
        if (i == 0) continue;  // warm-up: first touches of the moments' pages
        clip_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        step_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
      }
      const double step = Median(step_ms);
      nlohmann::json line = {{"kernel", kernel},
                             {"ran", Name(opt.KernelFor(params.back()))},
                             {"torch_semantics", o.torch_semantics},
                             {"parameters", numel},
                             {"threads", rt.num_threads},
                             {"clip_ms", Median(clip_ms)},
                             {"step_ms", step},
                             // The fastest of the steps: what the kernel costs on a quiet machine.
                             {"clip_min_ms", *std::min_element(clip_ms.begin(), clip_ms.end())},
                             {"step_min_ms", *std::min_element(step_ms.begin(), step_ms.end())},
                             {"step_gb_per_s", 28.0 * numel / (step / 1000) / 1e9}};
      std::printf("%s\n", line.dump().c_str());
    }
    return 0;
  });
}
