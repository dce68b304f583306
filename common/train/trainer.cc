#include "common/train/trainer.h"

#include "common/train/resume.h"
#include "common/train/plots.h"
#include "common/train/progress.h"
#include "common/train/run_dir.h"
#include "common/train/snapshot.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <limits>
#include <ctime>
#include <optional>
#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include "common/data/sampler.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/memory_meter.h"
#include "common/runtime/errors.h"
#include "common/runtime/device.h"

namespace distlm::train {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

}  // namespace

namespace {

// A fault-injection variable of the tests, "R:U" (rank R, update U) or, where `any_rank`, "U"
// (every rank): true when it names this rank and update.
bool FaultAt(const char* variable, bool any_rank, int rank, int64_t update) {
  const char* spec = std::getenv(variable);
  if (spec == nullptr) return false;
  int r = -1;
  long long at = -1;
  if (std::sscanf(spec, "%d:%lld", &r, &at) == 2) return r == rank && at == update;
  return any_rank && std::atoll(spec) == update;
}

}  // namespace

// Fault injection for the reliability tests: DISTLM_FAULT_KILL=R:K makes rank R SIGKILL itself
// right after its K-th update, as a node that dies mid-run would.
void Trainer::MaybeInjectFault(int64_t update) const {
  if (FaultAt("DISTLM_FAULT_KILL", /*any_rank=*/false, dist_.rank, update)) {
    std::fflush(stdout);
    std::raise(SIGKILL);
  }
}

void Trainer::DropGradients() {
  torch::NoGradGuard no_grad;
  for (auto& p : parameters_) p.mutable_grad() = torch::Tensor();  // as ZeroGrad: the next backward starts afresh
  if (optimizer_) optimizer_->ZeroGrad();
}

bool Trainer::UnscaleGradients(int64_t update) {
  if (!scaler_.enabled()) return true;
  // DISTLM_FAULT_INF_GRAD=U (every rank) or R:U (rank R only): an overflow in update U's
  // gradients, for the tests of the skip and of task 5's vote.
  std::vector<torch::Tensor> gradients = optimizer_->GradientsToUnscale();
  if (gradients.empty()) {
    for (auto& p : parameters_) {
      if (p.grad().defined()) gradients.push_back(p.grad());
    }
  }
  if (FaultAt("DISTLM_FAULT_INF_GRAD", /*any_rank=*/true, dist_.rank, update) && !gradients.empty()) {
    torch::NoGradGuard no_grad;
    gradients.front().view(-1)[0] = std::numeric_limits<float>::infinity();
  }
  // Where the ranks' gradients still differ here (averaged inside the optimizer's step, or
  // each rank's own shard), they vote; elsewhere they are already the same everywhere.
  if (scaler_.UnscaleAndCheckGradients(gradients, optimizer_->overflow_vote_group())) return true;
  DropGradients();
  return false;
}

Trainer::Trainer(TrainOptions options, Stage& stage, DistInfo dist)
    : options_(std::move(options)), stage_(stage), dist_(std::move(dist)) {}

void Trainer::PrepareOutputDir() {
  options_.output_dir = ResolveOutputDir(options_.output_dir, stage_.name());
  if (!is_main_rank()) return;
  PrepareRunDir(options_.output_dir, options_.do_train, options_.overwrite_output_dir);
  WriteTrainingArgs(options_.output_dir, RunArgs());
}

json Trainer::RunArgs() const {
  json args = options_.ToJson();
  args["stage"] = stage_.name();
  args["world_size"] = dist_.world_size;
  args["backend"] = dist_.backend;
  args["num_threads"] = at::get_num_threads();
  return args;
}

void Trainer::Setup() {
  if (setup_done_) return;
  device_ = runtime::ResolveDevice(options_.device, dist_.local_rank);
  // Before the model exists, so that its tensors are counted (memory_meter.h).
  runtime::MemoryMeter::Install();
  if (dist_.backend == "nccl" && device_.is_cuda() && device_.index() != dist_.local_rank) {
    // The NCCL communicator is on cuda:LOCAL_RANK (InitDistributed), the tensors would not be.
    throw UserError("--device=" + options_.device + " with --backend=nccl: NCCL runs rank " +
                    std::to_string(dist_.rank) + " on cuda:" + std::to_string(dist_.local_rank) +
                    " (one GPU per rank); use --device=cuda, or gloo to share one GPU");
  }
  precision_ = PrecisionFromFlags(options_.bf16, options_.fp16, device_);
  scaler_ = LossScaler(precision_ == Precision::kFp16);
  // The model and its examples (BERT on GLUE, or a ViT on CIFAR-10), built or loaded under the seed.
  torch::manual_seed(options_.seed);
  task_ = MakeModelTask(options_, /*log=*/is_main_rank());
  // Every rank built or loaded the same weights on the host; from here on they live on the
  // device (parameters keep their identity: to() moves their data).
  task_->module().to(device_);
  parameters_.clear();
  named_parameters_.clear();
  for (const auto& p : task_->module().named_parameters()) {
    named_parameters_.emplace_back(p.key(), p.value());
    parameters_.push_back(p.value());
  }
  if (dist_.check_agreement) {
    // Every rank must build the same model and see the same data, or averaging is meaningless.
    dist_.check_agreement("model config", task_->Fingerprint());
    if (options_.do_train) dist_.check_agreement("number of training examples", std::to_string(task_->train_size()));
    // A rank on the CPU beside ranks on GPUs, or in another precision, would still average: the
    // updates would differ from one process's in ways no test bounds (and one fp16 rank would
    // wait alone in the overflow vote). The GPU's index may differ (one GPU per rank).
    dist_.check_agreement("device and precision",
                          std::string(device_.is_cpu() ? "cpu" : "cuda") + " " + PrecisionName(precision_));
  }
  PrepareOutputDir();
  StartTrace();
  StartTensorBoard();
  StageContext::Parts parts;
  parts.stage = stage_.name();
  parts.options = &options_;
  parts.named_parameters = &named_parameters_;
  parts.parameters = &parameters_;
  parts.dist = &dist_;
  parts.device = device_;
  parts.evaluate = [this](int64_t epoch) { return Evaluate(epoch); };
  parts.units = task_->Units();
  parts.set_unit_hooks = [this](const model::UnitHooks* hooks) { task_->SetUnitHooks(hooks); };
  parts.set_tensor_parallel = [this](const model::ParallelOps* ops) { task_->SetTensorParallel(ops); };
  parts.batch_for_units = [this](const std::vector<int64_t>& indices, int parts, int64_t epoch) {
    return task_->BatchForUnits(indices, parts, epoch, device_);
  };
  parts.replace_group = [this](c10::intrusive_ptr<c10d::ProcessGroup> pg, int rank, int world_size) {
    if (dist_.rank == 0 && rank != 0) throw std::logic_error("ReplaceGroup: the main rank must stay rank 0");
    dist_.pg = std::move(pg);
    dist_.rank = rank;
    dist_.world_size = world_size;
  };
  ctx_ = std::make_unique<StageContext>(std::move(parts));
  setup_done_ = true;
}

double Trainer::AverageOverRanks(double value) {
  if (!dist_.pg || dist_.world_size == 1) return value;
  std::vector<at::Tensor> t = {torch::tensor({value}, torch::kDouble)};
  dist_.pg->allreduce(t)->wait();
  return t[0].item<double>() / dist_.world_size;
}

void Trainer::LogUpdate(int64_t step, int64_t epoch, double loss, double lr, double grad_norm,
                        double step_ms, int64_t samples, std::optional<double> loss_scale, bool skipped) {
  json line = {{"step", step},
               {"epoch", epoch},
               {"loss", loss},
               {"lr", lr},
               {"grad_norm", grad_norm},
               {"step_time_ms", step_ms},
               {"samples_per_s", samples / (step_ms / 1000.0)}};
  const UpdateFigures figures = stage_.TakeFigures();
  const json fields = figures.ToJson();  // named: items() would not keep a temporary alive
  for (auto& [k, v] : fields.items()) line[k] = v;
  if (figures.comm) line["compute_time_ms"] = step_ms - figures.comm_time_ms;
  // What the rank holds: the Trainer's count from the storages, or the stage's where it keeps
  // what the Trainer cannot see (shards); and the host's peak during the update.
  for (auto& [k, v] : memory_.items()) {
    if (!line.contains(k)) line[k] = v;
  }
  int64_t model_state = 0;
  for (const char* k : {"held_param_bytes", "held_grad_bytes", "held_opt_bytes"}) {
    model_state += line.contains(k) ? std::max<int64_t>(0, line[k].get<int64_t>()) : 0;
  }
  line["held_model_state_bytes"] = model_state;
  // --trace: what the rank holds of the model's state, beside the counter of all it holds.
  if (trace::Recorder* r = trace::Recorder::Active()) {
    json held = json::object();
    for (const char* k : {"held_param_bytes", "held_grad_bytes", "held_opt_bytes"}) {
      if (line.contains(k)) held[k] = line[k];
    }
    r->Counter("model state", trace::NowNs(), held);
  }
  last_memory_ = json::object();  // what the end-of-run line prints, not the whole line
  for (const char* k : {"held_param_bytes", "held_grad_bytes", "held_opt_bytes", "held_model_state_bytes",
                        "mem_peak_bytes"}) {
    if (line.contains(k)) last_memory_[k] = line[k];
  }
  if (loss_scale) {
    line["loss_scale"] = *loss_scale;
    line["skipped"] = skipped;  // an overflow: no optimizer step, grad_norm null
  }
  if (is_main_rank()) AppendLineDurably(options_.output_dir + "/train_log.jsonl", line.dump());
  AddScalars("train/", step, line);
}

void Trainer::PrintRunBanner(int64_t total, int64_t updates_per_epoch, int64_t epochs) const {
  if (!is_main_rank()) return;
  const int64_t B = options_.per_device_train_batch_size;
  const int64_t accum = options_.gradient_accumulation_steps;
  // Ranks that share every batch (task 7) say so rather than multiply it.
  const int replicas = DataReplicas();
  const std::string ranks =
      replicas == dist_.world_size
          ? std::to_string(dist_.world_size) + " rank(s) x batch "
          : (replicas == 1 ? std::to_string(dist_.world_size) + " rank(s) sharing each batch of "
                           : std::to_string(replicas) + " replica(s) of " + std::to_string(dist_.world_size / replicas) +
                                 " rank(s), each sharing a batch of ");
  std::printf("%s: %lld training examples, %s%lld x accumulation %lld = %lld per update; "
              "%lld updates (%lld per epoch, %lld epoch(s)); output in %s\n",
              stage_.name().c_str(), static_cast<long long>(task_->train_size()), ranks.c_str(),
              static_cast<long long>(B), static_cast<long long>(accum),
              static_cast<long long>(B * accum * DataReplicas()), static_cast<long long>(total),
              static_cast<long long>(updates_per_epoch), static_cast<long long>(epochs),
              options_.output_dir.c_str());
  if (precision_ != Precision::kFp32) {
    const std::string scaling =
        scaler_.enabled() ? "; dynamic loss scaling from " + std::to_string(std::lround(scaler_.scale())) : "";
    std::printf("%s: mixed precision %s: forward passes under autocast; weights, gradients and optimizer in "
                "float32%s\n",
                stage_.name().c_str(), PrecisionName(precision_).c_str(), scaling.c_str());
  }
  if (dist_.world_size > 1 && !dist_.described.empty()) {
    std::printf("%s: %s\n", stage_.name().c_str(), dist_.described.c_str());
  }
  std::fflush(stdout);
}

void Trainer::PrintMeanIterationTime() const {
  if (!is_main_rank()) return;
  // What the handout asks students to report: the mean over iterations 2..40 (the first
  // one pays for warming up allocators and thread pools).
  size_t last = std::min<size_t>(step_ms_.size(), 40);
  if (last >= 2) {
    double sum = 0;
    for (size_t i = 1; i < last; ++i) sum += step_ms_[i];
    std::printf("mean iteration time over iterations 2..%zu: %.2f ms\n", last, sum / (last - 1));
  }
  if (last_memory_.contains("held_model_state_bytes")) {
    const json& m = last_memory_;
    auto mb = [&](const char* k) { return m.contains(k) ? m[k].get<double>() / 1e6 : 0.0; };
    std::printf("memory of rank 0 after the last update: parameters %.2f MB, gradients %.2f MB, optimizer state %.2f "
                "MB (model state %.2f MB)",
                mb("held_param_bytes"), mb("held_grad_bytes"), mb("held_opt_bytes"), mb("held_model_state_bytes"));
    if (m.contains("mem_peak_bytes")) {
      std::printf("; %s tensors at the update's peak %.2f MB", device_.is_cpu() ? "host" : device_.str().c_str(),
                  mb("mem_peak_bytes"));
    }
    std::printf("\n");
  }
}

EvalResult Trainer::Evaluate(int64_t epoch) {
  EvalResult r;
  stage_.WithFullParameters(*ctx_, [&] { r = EvaluateWhole(epoch); });
  return r;
}

EvalResult Trainer::EvaluateWhole(int64_t epoch) {
  EvalResult r;
  r.epoch = epoch;
  r.epoch_time_s = last_epoch_time_s_;
  r.train_samples_per_s = last_epoch_samples_per_s_;
  if (!setup_done_ || task_->dev_size() == 0) {
    throw UserError("evaluation needs --do_eval and a dev split");
  }
  if (is_main_rank()) {
    torch::NoGradGuard no_grad;
    bool was_training = task_->module().is_training();
    task_->module().eval();
    data::DistributedSampler sequential(task_->dev_size(), 1, 0, /*shuffle=*/false, 0);
    auto start = Clock::now();
    double loss_sum = 0;
    int64_t steps = 0;
    std::vector<int64_t> preds, labels;
    if (progress_ != nullptr) progress_->Finish();
    const auto eval_batches = data::MakeBatches(sequential.Indices(), options_.per_device_eval_batch_size);
    // On a terminal only: elsewhere the result line below says it all.
    ProgressLine progress("eval", static_cast<int64_t>(eval_batches.size()), terminal_,
                          static_cast<int64_t>(eval_batches.size()), /*enabled=*/terminal_);
    for (const auto& indices : eval_batches) {
      ModelTask::Output out;
      {
        AutocastScope autocast(precision_, device_);
        out = task_->Forward(indices, /*train=*/false, epoch, device_);
      }
      loss_sum += out.loss.item<double>();
      ++steps;
      auto p = out.logits.argmax(1).cpu().contiguous();
      auto l = out.labels.cpu().contiguous();
      preds.insert(preds.end(), p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel());
      labels.insert(labels.end(), l.data_ptr<int64_t>(), l.data_ptr<int64_t>() + l.numel());
      progress.Update(steps, static_cast<int64_t>(preds.size()), "");
    }
    progress.Finish();
    double secs = std::chrono::duration<double>(Clock::now() - start).count();
    if (was_training) task_->module().train();
    r.examples = static_cast<int64_t>(preds.size());
    r.loss = loss_sum / std::max<int64_t>(steps, 1);
    int64_t correct = 0;
    for (size_t i = 0; i < preds.size(); ++i) correct += preds[i] == labels[i];
    r.accuracy = r.examples ? static_cast<double>(correct) / r.examples : 0.0;
    json metrics = task_->Metrics(preds, labels);
    r.binary_metrics = metrics.contains("f1");
    for (auto [field, key] : {std::pair{&r.f1, "f1"}, {&r.precision, "precision"}, {&r.recall, "recall"}, {&r.mcc, "mcc"}}) {
      if (metrics.contains(key)) *field = metrics[key].get<double>();
      metrics.erase(key);
    }
    r.extra = metrics;
    r.samples_per_s = r.examples / std::max(secs, 1e-9);
    eval_results_.push_back(r);
    json all = json::array();
    for (const auto& e : eval_results_) all.push_back(e.ToJson());
    WriteFileAtomically(options_.output_dir + "/eval_results.json", all.dump(2) + "\n");
    AddScalars("eval/", static_cast<int64_t>(losses_.size()), r.ToJson());
    char binary[96] = "";
    if (r.binary_metrics) {
      std::snprintf(binary, sizeof(binary), ", f1 %.4f, precision %.4f, recall %.4f, mcc %.4f", r.f1, r.precision,
                    r.recall, r.mcc);
    }
    std::printf("eval%s: %lld examples, loss %.4f, accuracy %.4f%s (%.0f examples/s)\n",
                epoch > 0 ? (" after epoch " + std::to_string(epoch)).c_str() : "",
                static_cast<long long>(r.examples), r.loss, r.accuracy, binary, r.samples_per_s);
    std::fflush(stdout);
  }
  if (dist_.pg && dist_.world_size > 1) dist_.pg->barrier()->wait();
  return r;
}

void Trainer::Run() {
  Setup();
  if (options_.do_train) {
    Train();
  } else if (options_.do_eval) {
    Evaluate(0);
  }
  if (!options_.do_train) return;
  stage_.WithFullParameters(*ctx_, [this] { SaveModel(); });
  if (is_main_rank() && options_.plots) {
    std::string why;
    const std::vector<std::string> plots = WriteRunPlots(options_.output_dir, &why);
    if (!plots.empty()) std::printf("plots in %s/plots (%zu PNG files)\n", options_.output_dir.c_str(), plots.size());
    if (!why.empty()) std::printf("%s\n", why.c_str());
  }
}

void Trainer::SaveModel() {
  if (!is_main_rank() && options_.save_every_rank) {
    const std::string dir = options_.output_dir + "/rank_" + std::to_string(dist_.rank);
    std::filesystem::create_directories(dir);
    task_->Save(dir);
  }
  if (is_main_rank()) {
    task_->Save(options_.output_dir);
    std::printf("model saved to %s\n", options_.output_dir.c_str());
  }
}

}  // namespace distlm::train
