// The Trainer's loop: epochs, micro-batches (forward, the stage's backward), the end of each
// update (the stage's synchronisation and optimizer step, the log line) and the snapshots it
// asks for. The rest of the Trainer (set-up, logging, evaluation, the model's saving) is in
// trainer.cc, snapshots and resume in trainer_snapshots.cc.
#include "common/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>

#include "common/data/sampler.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/runtime/memory_meter.h"
#include "common/train/progress.h"
#include "common/trace/clock_sync.h"
#include "common/trace/recorder.h"

namespace distlm::train {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;


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

Trainer::Stepped Trainer::FinishUpdate(UpdateContext& u, int64_t update, int64_t epoch, double loss_sum,
                                       int64_t global_samples, std::chrono::steady_clock::time_point start) {
  const int64_t accum = options_.gradient_accumulation_steps;
  Stepped s;
  {
    trace::Scope span(trace::cat::kSync, "SyncGradients");
    stage_.SyncGradients(*ctx_);
  }
  TraceMemory();
  // The gradients as the optimizer will read them, before it drops them.
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters_) grads.push_back(p.grad());
  memory_ = json::object();
  memory_["held_grad_bytes"] = StorageBytes(grads);
  s.lr = optimizer_->lr();
  const double loss_scale = scaler_.scale();
  const bool finite = UnscaleGradients(update);
  // An overflowed update is skipped (no optimizer or schedule step), as GradScaler does.
  if (finite) {
    trace::Scope span(trace::cat::kStep, "OptimizerStep");
    s.grad_norm = stage_.OptimizerStep(*ctx_, u);
  } else {
    s.grad_norm = std::numeric_limits<double>::quiet_NaN();
  }
  TraceMemory();
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
  const double own_loss = loss_sum / static_cast<double>(accum);
  s.loss_mean = stage_.averages_loss_over_ranks() ? AverageOverRanks(own_loss) : own_loss;
  losses_.push_back(s.loss_mean);
  MaybeInjectFault(update);
  LogUpdate(update, epoch + 1, s.loss_mean, s.lr, s.grad_norm, s.step_ms, global_samples,
            scaler_.enabled() ? std::optional<double>(loss_scale) : std::nullopt, !finite);
  return s;
}

void Trainer::Train() {
  const int64_t B = options_.per_device_train_batch_size;
  const int64_t accum = options_.gradient_accumulation_steps;
  const Stage::DataShare share = stage_.data_share(dist_);
  if (share.replicas < 1 || share.replica < 0 || share.replica >= share.replicas) {
    throw std::logic_error(stage_.name() + ": data_share says replica " + std::to_string(share.replica) + " of " +
                           std::to_string(share.replicas));
  }
  data::DistributedSampler sampler(task_->train_size(), share.replicas, share.replica, /*shuffle=*/true,
                                   options_.seed);
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

  // A worker that joined a running job (task 8c) starts where the others stand, with its own
  // optimizer's state fresh and the schedule at their update.
  if (!resumed) {
    resumed = stage_.JoinedAt();
    if (resumed) {
      schedule.set_updates_done(resumed->update);
      optimizer_->set_lr(schedule.current_lr());
    }
  }
  Position at;
  if (resumed) {
    at.update = resumed->update;
    at.minibatch = resumed->minibatches;
    at.skip = resumed->batch_in_epoch;
  }
  // On rank 0: one line redrawn in place on a terminal, a plain line every --logging_steps
  // updates elsewhere. Samples/s counts every rank's examples since this run (or resume) began.
  ProgressLine progress("train", total, terminal_, options_.logging_steps, is_main_rank(), at.update);
  progress_ = &progress;
  struct Forget {
    ProgressLine** p;
    ~Forget() { *p = nullptr; }
  } forget{&progress_};
  for (int64_t epoch = resumed ? resumed->epoch : 0; epoch < epochs && at.update < total; ++epoch) {
    sampler.set_epoch(epoch);
    TrainEpoch(epoch, data::MakeBatches(sampler.Indices(), B), total, ctx, &at);
    at.skip = 0;
    stage_.EndOfEpoch(*ctx_, epoch + 1);
    TrainingState state;
    state.update = at.update;
    state.epoch = epoch + 1;
    state.minibatches = at.minibatch;
    Snapshot(state);
  }

  PrintMeanIterationTime();
  // A run shorter than the window: what it traced.
  if (trace_ && !trace_written_) WriteTrace();
}

double Trainer::ForwardBackward(const std::vector<int64_t>& indices, int64_t epoch, bool last_micro_batch) {
  const int64_t accum = options_.gradient_accumulation_steps;
  if (stage_.runs_forward_backward()) {
    // Task 7b: the stage runs its block on the batch's micro-batches, forward and backward. No
    // span of its own here: the stage traces each step, so that the time between them (the
    // bubble, and the waits for the neighbours) shows as idle.
    const double loss = stage_.ForwardBackward(*ctx_, indices, epoch, static_cast<double>(accum));
    if (trace::Recorder* r = trace::Recorder::Active()) r->EndBackward(trace::NowNs());
    TraceMemory();
    return loss;
  }
  ModelTask::Output out;
  {
    // The batch is assembled from `indices` inside the task's forward: its span holds both.
    trace::Scope span(trace::cat::kForward, "forward");
    AutocastScope autocast(precision_, device_);
    out = task_->Forward(indices, /*train=*/true, epoch, device_);
  }
  TraceMemory();
  torch::Tensor loss = accum > 1 ? out.loss / static_cast<double>(accum) : out.loss;
  {
    trace::Scope span(trace::cat::kBackward, "backward");
    stage_.BeforeBackward(*ctx_, last_micro_batch);
    stage_.Backward(scaler_.Scale(loss));
    if (trace::Recorder* r = trace::Recorder::Active()) r->EndBackward(trace::NowNs());
  }
  TraceMemory();
  return out.loss.item<double>();
}

void Trainer::TrainEpoch(int64_t epoch, const std::vector<std::vector<int64_t>>& batches, int64_t total,
                         UpdateContext& u, Position* at) {
  const int64_t accum = options_.gradient_accumulation_steps;
  task_->module().train();
  const auto epoch_start = Clock::now();
  int64_t batch_index = 0, epoch_samples = 0, micro = 0, samples = 0;
  double loss_sum = 0;
  Clock::time_point update_start;
  for (const auto& indices : batches) {
    if (batch_index++ < at->skip) continue;  // consumed before the snapshot we resumed from
    if (micro == 0) {
      update_start = Clock::now();
      runtime::MemoryMeter::ResetPeak(device_);
      loss_sum = 0;
      samples = 0;
      if (Traced(at->update + 1)) {
        trace::Recorder::SetActive(trace_.get());
        TraceMemory();
      }
    }
    const double micro_loss = ForwardBackward(indices, epoch, micro + 1 == accum);
    loss_sum += micro_loss;
    samples += static_cast<int64_t>(indices.size());
    // The first micro-batches' losses, printed; the one that completes an update only after
    // the update's synchronisation, so that printing never delays it (the stage measures the
    // communication it hid up to the synchronisation's start).
    const bool print_loss = ++at->minibatch <= 5 && is_main_rank();
    auto print = [&] {
      progress_->Finish();
      std::printf("minibatch %lld loss %.6f%s\n", static_cast<long long>(at->minibatch), micro_loss,
                  DataReplicas() > 1 ? " (rank 0's share)" : "");
      std::fflush(stdout);
    };
    if (++micro < accum) {
      if (print_loss) print();
      continue;
    }
    micro = 0;

    const int64_t global_samples = samples * DataReplicas();
    // Batches left in this epoch that cannot make another update are dropped (below).
    u.ends_epoch = at->update + 1 == total || static_cast<int64_t>(batches.size()) - batch_index < accum;
    u.position.update = at->update + 1;
    u.position.epoch = epoch;
    u.position.batch_in_epoch = batch_index;
    u.position.minibatches = at->minibatch;
    const Stepped stepped = FinishUpdate(u, ++at->update, epoch, loss_sum, global_samples, update_start);
    if (print_loss) print();
    epoch_samples += global_samples;
    at->progress_samples += global_samples;
    char fields[160];
    std::snprintf(fields, sizeof(fields), "epoch %lld loss %.6f lr %.3g grad_norm %.4f %.1f ms",
                  static_cast<long long>(epoch + 1), stepped.loss_mean, stepped.lr, stepped.grad_norm, stepped.step_ms);
    progress_->Update(at->update, at->progress_samples, fields);
    if (options_.save_steps > 0 && at->update % options_.save_steps == 0 && at->update < total) {
      trace::Scope span(trace::cat::kSnapshot, "snapshot");
      TrainingState state;
      state.update = at->update;
      state.epoch = epoch;
      state.batch_in_epoch = batch_index;
      state.minibatches = at->minibatch;
      Snapshot(state);
    }
    if (trace::Recorder::Active() != nullptr) {
      trace::Recorder::SetActive(nullptr);
      // The span the log's step_time_ms measures (a snapshot, when one was written, follows it).
      const int64_t begin = std::chrono::duration_cast<std::chrono::nanoseconds>(update_start.time_since_epoch()).count();
      trace_->Span(trace::cat::kUpdate, "update " + std::to_string(at->update), begin,
                   begin + std::llround(stepped.step_ms * 1e6),
                   {{"update", at->update}, {"epoch", epoch + 1}, {"loss", stepped.loss_mean}});
      if (at->update == options_.trace_last) WriteTrace();
    }
    if (at->update == total) break;
  }
  // Micro-batches that did not complete an update at the end of an epoch are dropped.
  if (micro != 0) DropGradients();
  last_epoch_time_s_ = MsSince(epoch_start) / 1000.0;
  last_epoch_samples_per_s_ = epoch_samples / std::max(last_epoch_time_s_, 1e-9);
}

void Trainer::StartTrace() {
  // Every rank must agree, or the clocks' broadcasts below would wait for a rank that never comes.
  const std::string window = std::to_string(options_.trace_first) + ":" + std::to_string(options_.trace_last);
  if (dist_.check_agreement) dist_.check_agreement("--trace and --trace_steps", options_.trace ? window : "off");
  if (!options_.trace) return;
  trace_ = std::make_unique<trace::Recorder>(dist_.rank, dist_.world_size);
  if (dist_.pg && dist_.world_size > 1) trace_->SetClock(trace::SyncClocks(*dist_.pg));
}

void Trainer::TraceMemory() {
  trace::Recorder* r = trace::Recorder::Active();
  if (r == nullptr) return;
  r->Counter("memory", trace::NowNs(),
             {{"in_use_bytes", runtime::MemoryMeter::BytesInUse(device_)},
              {"peak_bytes", runtime::MemoryMeter::PeakBytes(device_)}});
}

void Trainer::WriteTrace() {
  trace_written_ = true;
  const std::string dir = options_.output_dir + "/trace";
  const std::string path =
      dir + "/rank-" + std::to_string(dist_.rank) + "-of-" + std::to_string(dist_.world_size) + ".json";
  if (trace_->size() == 0) {
    if (is_main_rank()) {
      std::printf("trace: nothing traced (the run ended before update %lld of --trace_steps)\n",
                  static_cast<long long>(options_.trace_first));
    }
    return;
  }
  std::filesystem::create_directories(dir);
  const nlohmann::json other = {{"stage", stage_.name()},
                                {"updates", {options_.trace_first, options_.trace_last}},
                                {"backend", dist_.backend},
                                {"device", device_.str()}};
  // One key per line (dump(0)), as Python's json and Kineto write: HolisticTraceAnalysis finds a
  // file's rank with the pattern "rank":<whitespace><digits>, which compact JSON never matches.
  WriteFileAtomically(path, trace_->ToJson(other).dump(0) + "\n");
  if (is_main_rank()) {
    std::printf("trace: %s/rank-*-of-%d.json (updates %lld to %lld); bazel run //tools:trace -- %s merges the ranks "
                "and shows what communication compute hid\n",
                dir.c_str(), dist_.world_size, static_cast<long long>(options_.trace_first),
                static_cast<long long>(options_.trace_last), options_.output_dir.c_str());
    std::fflush(stdout);
  }
}

}  // namespace distlm::train
