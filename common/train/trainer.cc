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

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Bytes held by the storages of `tensors` (undefined ones skipped), each storage counted once:
// views of one flat buffer are that buffer.
int64_t StorageBytes(const std::vector<torch::Tensor>& tensors) {
  std::set<const void*> seen;
  int64_t bytes = 0;
  for (const torch::Tensor& t : tensors) {
    if (!t.defined() || !t.has_storage()) continue;
    if (seen.insert(t.storage().unsafeGetStorageImpl()).second) bytes += static_cast<int64_t>(t.storage().nbytes());
  }
  return bytes;
}


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
  json args = options_.ToJson();
  args["stage"] = stage_.name();
  args["world_size"] = dist_.world_size;
  args["backend"] = dist_.backend;
  args["num_threads"] = at::get_num_threads();
  WriteTrainingArgs(options_.output_dir, args);
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
  if (options_.tensorboard && is_main_rank()) {
    tensorboard_ = std::make_unique<tensorboard::EventWriter>(options_.output_dir + "/tensorboard");
  }
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

void Trainer::AddScalars(const std::string& prefix, int64_t step, const json& fields) {
  if (!tensorboard_) return;
  tensorboard::Scalars scalars;
  for (const auto& [k, v] : fields.items()) {
    if (k != "step" && v.is_number()) scalars.emplace_back(prefix + k, v.get<float>());
  }
  tensorboard_->Add(step, scalars);
}

void Trainer::PrintRunBanner(int64_t total, int64_t updates_per_epoch, int64_t epochs) const {
  if (!is_main_rank()) return;
  const int64_t B = options_.per_device_train_batch_size;
  const int64_t accum = options_.gradient_accumulation_steps;
  std::printf("%s: %lld training examples, %d rank(s) x batch %lld x accumulation %lld = %lld per update; "
              "%lld updates (%lld per epoch, %lld epoch(s)); output in %s\n",
              stage_.name().c_str(), static_cast<long long>(task_->train_size()), dist_.world_size,
              static_cast<long long>(B), static_cast<long long>(accum),
              static_cast<long long>(B * accum * dist_.world_size), static_cast<long long>(total),
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

Trainer::Stepped Trainer::FinishUpdate(UpdateContext& u, int64_t update, int64_t epoch, double loss_sum,
                                       int64_t global_samples, std::chrono::steady_clock::time_point start) {
  const int64_t accum = options_.gradient_accumulation_steps;
  Stepped s;
  stage_.SyncGradients(*ctx_);
  // The gradients as the optimizer will read them, before it drops them.
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters_) grads.push_back(p.grad());
  memory_ = json::object();
  memory_["held_grad_bytes"] = StorageBytes(grads);
  s.lr = optimizer_->lr();
  const double loss_scale = scaler_.scale();
  const bool finite = UnscaleGradients(update);
  // An overflowed update is skipped (no optimizer or schedule step), as GradScaler does.
  s.grad_norm = finite ? stage_.OptimizerStep(*ctx_, u) : std::numeric_limits<double>::quiet_NaN();
  scaler_.Update(finite);
  s.step_ms = MsSince(start);
  step_ms_.push_back(s.step_ms);
  memory_["held_param_bytes"] = StorageBytes(parameters_);
  if (const int64_t opt_bytes = optimizer_->StateBytes(); opt_bytes >= 0) memory_["held_opt_bytes"] = opt_bytes;
  // The device's tensors: the counting allocator's on the host, the caching allocator's on a GPU.
  if (const int64_t peak = runtime::MemoryMeter::PeakBytes(device_); peak >= 0) {
    memory_["mem_in_use_bytes"] = runtime::MemoryMeter::BytesInUse(device_);
    memory_["mem_peak_bytes"] = peak;
  }
  // DISTLM_MEMORY_PEAK_BLOCKS=K: the sizes of the K largest host blocks live at the peak.
  if (device_.is_cpu()) {
    if (std::vector<int64_t> blocks = runtime::MemoryMeter::PeakBlocks(); !blocks.empty()) {
      memory_["mem_peak_blocks"] = blocks;
    }
  }
  s.loss_mean = AverageOverRanks(loss_sum / static_cast<double>(accum));
  losses_.push_back(s.loss_mean);
  MaybeInjectFault(update);
  LogUpdate(update, epoch + 1, s.loss_mean, s.lr, s.grad_norm, s.step_ms, global_samples,
            scaler_.enabled() ? std::optional<double>(loss_scale) : std::nullopt, !finite);
  return s;
}

void Trainer::Train() {
  const int64_t B = options_.per_device_train_batch_size;
  const int64_t accum = options_.gradient_accumulation_steps;
  const bool shared_data = stage_.every_rank_reads_all_data();
  data::DistributedSampler sampler(task_->train_size(), shared_data ? 1 : dist_.world_size,
                                   shared_data ? 0 : dist_.rank, /*shuffle=*/true, options_.seed);
  const int64_t batches_per_epoch = (sampler.num_samples() + B - 1) / B;
  const int64_t updates_per_epoch = batches_per_epoch / accum;
  if (updates_per_epoch == 0) {
    throw UserError("each rank gets " + std::to_string(batches_per_epoch) + " batch(es) of " +
                    std::to_string(B) + " per epoch, fewer than --gradient_accumulation_steps=" +
                    std::to_string(accum));
  }
  const int64_t total = options_.max_steps > 0
                            ? options_.max_steps
                            : updates_per_epoch * static_cast<int64_t>(options_.num_train_epochs);
  const int64_t epochs = (total + updates_per_epoch - 1) / updates_per_epoch;

  optimizer_ = stage_.MakeOptimizer(*ctx_);
  if (!optimizer_) throw std::logic_error(stage_.name() + ": MakeOptimizer returned no optimizer");
  LinearSchedule schedule(options_.learning_rate, total, options_.warmup_steps);
  optimizer_->set_lr(schedule.current_lr());
  UpdateContext ctx{*optimizer_, schedule, parameters_, options_.max_grad_norm};
  std::optional<TrainingState> resumed = TryResume(schedule);

  stage_.BeforeTraining(*ctx_);

  terminal_ = isatty(STDOUT_FILENO);
  PrintRunBanner(total, updates_per_epoch, epochs);

  int64_t update = resumed ? resumed->update : 0;
  // On rank 0: one line redrawn in place on a terminal, a plain line every --logging_steps
  // updates elsewhere. Samples/s counts every rank's examples since this run (or resume) began.
  ProgressLine progress("train", total, terminal_, options_.logging_steps, is_main_rank(), update);
  progress_ = &progress;
  struct Forget {
    ProgressLine** p;
    ~Forget() { *p = nullptr; }
  } forget{&progress_};
  int64_t progress_samples = 0;
  int64_t minibatch = resumed ? resumed->minibatches : 0;
  int64_t skip = resumed ? resumed->batch_in_epoch : 0;
  for (int64_t epoch = resumed ? resumed->epoch : 0; epoch < epochs && update < total; ++epoch) {
    sampler.set_epoch(epoch);
    auto batches = data::MakeBatches(sampler.Indices(), B);
    int64_t batch_index = 0;
    task_->module().train();
    auto epoch_start = Clock::now();
    int64_t epoch_samples = 0;
    int64_t micro = 0;
    double loss_sum = 0;
    int64_t samples = 0;
    Clock::time_point update_start;
    for (const auto& indices : batches) {
      if (batch_index++ < skip) continue;  // consumed before the snapshot we resumed from
      if (micro == 0) {
        update_start = Clock::now();
        runtime::MemoryMeter::ResetPeak(device_);
        loss_sum = 0;
        samples = 0;
      }
      ModelTask::Output out;
      {
        AutocastScope autocast(precision_, device_);
        out = task_->Forward(indices, /*train=*/true, epoch, device_);
      }
      torch::Tensor loss = accum > 1 ? out.loss / static_cast<double>(accum) : out.loss;
      stage_.BeforeBackward(*ctx_, micro + 1 == accum);
      stage_.Backward(scaler_.Scale(loss));
      double micro_loss = out.loss.item<double>();
      loss_sum += micro_loss;
      samples += static_cast<int64_t>(indices.size());
      ++minibatch;
      if (minibatch <= 5 && is_main_rank()) {
        progress.Finish();
        std::printf("minibatch %lld loss %.6f%s\n", static_cast<long long>(minibatch), micro_loss,
                    dist_.world_size > 1 ? " (rank 0's share)" : "");
        std::fflush(stdout);
      }
      if (++micro < accum) continue;
      micro = 0;

      const int64_t global_samples = samples * dist_.world_size;
      const Stepped stepped = FinishUpdate(ctx, ++update, epoch, loss_sum, global_samples, update_start);
      epoch_samples += global_samples;
      progress_samples += global_samples;
      char fields[160];
      std::snprintf(fields, sizeof(fields), "epoch %lld loss %.6f lr %.3g grad_norm %.4f %.1f ms",
                    static_cast<long long>(epoch + 1), stepped.loss_mean, stepped.lr, stepped.grad_norm,
                    stepped.step_ms);
      progress.Update(update, progress_samples, fields);
      if (options_.save_steps > 0 && update % options_.save_steps == 0 && update < total) {
        TrainingState at;
        at.update = update;
        at.epoch = epoch;
        at.batch_in_epoch = batch_index;
        at.minibatches = minibatch;
        Snapshot(at);
      }
      if (update == total) break;
    }
    skip = 0;
    // Micro-batches that did not complete an update at the end of an epoch are dropped.
    if (micro != 0) DropGradients();
    last_epoch_time_s_ = MsSince(epoch_start) / 1000.0;
    last_epoch_samples_per_s_ = epoch_samples / std::max(last_epoch_time_s_, 1e-9);
    stage_.EndOfEpoch(*ctx_, epoch + 1);
    TrainingState at;
    at.update = update;
    at.epoch = epoch + 1;
    at.minibatches = minibatch;
    Snapshot(at);
  }

  PrintMeanIterationTime();
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
    double secs = MsSince(start) / 1000.0;
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
