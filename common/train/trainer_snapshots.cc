// The Trainer's snapshots (snapshot.h): what a resume must agree on, the tensors a snapshot holds,
// writing one, and resuming from the newest valid one. Apart from trainer.cc, which runs the loop.
#include <algorithm>
#include <cstdio>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/train/resume.h"
#include "common/train/snapshot.h"
#include "common/train/trainer.h"

namespace distlm::train {

using nlohmann::json;

json Trainer::Fingerprint() const {
  // A snapshot is whole (every stage's), so it resumes on another world size when every update
  // sees the same examples: the ranks' micro-batch s is together positions s*N*b .. s*N*b+N*b-1
  // of one permutation (common/data/sampler.h), so what must agree is N x b and the updates an
  // epoch has, not N and b apiece. world_size and the per-rank batch are kept for messages.
  const int64_t n = dist_.world_size, b = options_.per_device_train_batch_size;
  const int64_t per_rank = (task_->train_size() + n - 1) / n;
  return {{"stage", stage_.name()},
          {"world_size", n},
          {"per_gpu_train_batch_size", b},
          {"examples_per_micro_batch", n * b},
          {"updates_per_epoch", (per_rank + b - 1) / b / options_.gradient_accumulation_steps},
          {"gradient_accumulation_steps", options_.gradient_accumulation_steps},
          {"learning_rate", options_.learning_rate},
          {"weight_decay", options_.weight_decay},
          {"warmup_steps", options_.warmup_steps},
          {"max_steps", options_.max_steps},
          {"num_train_epochs", options_.num_train_epochs},
          {"seed", options_.seed},
          {"max_seq_length", options_.max_seq_length},
          {"model_config", task_->Fingerprint()},
          {"train_examples", task_->train_size()}};
}

NamedTensors Trainer::SnapshotTensors(const OptimizerState& state) const {
  const NamedParameters& params = named_parameters_;
  if (state.exp_avg.size() != params.size() || state.exp_avg_sq.size() != params.size()) {
    throw UserError("optimizer state has " + std::to_string(state.exp_avg.size()) + " tensors, the model " +
                    std::to_string(params.size()) + " parameters");
  }
  NamedTensors tensors;
  for (size_t i = 0; i < params.size(); ++i) {
    tensors.emplace_back("param/" + params[i].first, params[i].second.detach());
    tensors.emplace_back("exp_avg/" + params[i].first, state.exp_avg[i]);
    tensors.emplace_back("exp_avg_sq/" + params[i].first, state.exp_avg_sq[i]);
  }
  tensors.emplace_back("rng/cpu", at::detail::getDefaultCPUGenerator().get_state());
  return tensors;
}

void Trainer::Snapshot(const TrainingState& state) {
  const json layout = optimizer_->ShardLayout();
  if (!layout.is_null()) return SnapshotParts(state, layout);
  stage_.WithFullParameters(*ctx_, [&] { SnapshotWhole(state); });
}

TrainingState Trainer::StateToSave(const TrainingState& state) const {
  TrainingState s = state;
  s.losses = losses_;
  s.eval_results = json::array();
  for (const auto& e : eval_results_) s.eval_results.push_back(e.ToJson());
  s.fingerprint = Fingerprint();
  if (scaler_.enabled()) {
    s.loss_scaler = {{"scale", scaler_.scale()}, {"clean_updates", scaler_.clean_updates()}, {"skipped", scaler_.skipped()}};
  }
  return s;
}

void Trainer::SnapshotWhole(const TrainingState& state) {
  // Every rank: a collective where the optimizer state is sharded (task 5), handles otherwise.
  const OptimizerState optimizer_state = optimizer_->GatherState();
  if (!is_main_rank()) return;
  WriteSnapshot(options_.output_dir, StateToSave(state), SnapshotTensors(optimizer_state));
}

void Trainer::SnapshotParts(const TrainingState& state, const json& layout) {
  NamedTensors part = optimizer_->SaveShards();
  part.emplace_back("rng/cpu", at::detail::getDefaultCPUGenerator().get_state());
  const std::string checksum =
      WriteSnapshotPart(options_.output_dir, state.update, dist_.rank, dist_.world_size, part);
  // Every part's checksum on rank 0; the gather is also the barrier that puts the index after
  // every part.
  const std::vector<std::string> checksums = GatherStrings(dist_.pg.get(), checksum);
  if (!is_main_rank()) return;
  TrainingState s = StateToSave(state);
  s.shards = {{"world_size", dist_.world_size}, {"layout", layout}, {"checksums", checksums}};
  WriteSnapshotIndex(options_.output_dir, s);
}

bool Trainer::RestoreSnapshot(const TrainingState& state, LoadedSnapshot* snap, int64_t step) {
  c10d::ProcessGroup* pg = dist_.pg.get();
  const std::string& dir = options_.output_dir;
  const json layout = optimizer_->ShardLayout();
  const std::string which = "the snapshot of update " + std::to_string(state.update);
  if (state.shards.is_object() && !layout.is_null() && state.shards.value("world_size", 0) == dist_.world_size &&
      state.shards.at("layout") == layout) {
    // Sharded, and this run's layout: each rank reads its own part.
    NamedTensors part;
    std::string error;
    try {
      part = LoadSnapshotPart(dir, state, dist_.rank);
    } catch (const std::exception& e) {
      error = OneLine(e);
    }
    if (!AllRanksOk(pg, error.empty())) {
      if (!error.empty()) {
        std::fprintf(stderr, "%s is unusable: rank %d's part: %s; trying the previous one\n", which.c_str(),
                     dist_.rank, error.c_str());
      }
      return false;
    }
    auto rng = std::find_if(part.begin(), part.end(), [](const auto& t) { return t.first == "rng/cpu"; });
    if (rng == part.end()) throw UserError(SnapshotPartPath(dir, state.update, dist_.rank, dist_.world_size) + ": no rng/cpu");
    at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle to the global one
    gen.set_state(rng->second);
    optimizer_->LoadShards(part, step);
    return true;
  }
  if (state.shards.is_object()) {
    // Sharded in another layout (world size, stage): rank 0 rebuilds the whole tensors from
    // every part, and the run goes on as from a whole snapshot.
    std::string missing, error;
    if (is_main_rank()) {
      const int n = state.shards.value("world_size", 0);
      for (int r = 0; r < n && missing.empty(); ++r) {
        if (!PathExists(SnapshotPartPath(dir, state.update, r, n))) missing = SnapshotPartPath(dir, state.update, r, n);
      }
      if (missing.empty()) {
        try {
          snap->tensors = WholeFromParts(dir, state);
        } catch (const std::exception& e) {
          error = OneLine(e);
        }
      }
    }
    missing = BroadcastString(pg, is_main_rank(), missing);
    if (!missing.empty()) {
      throw UserError(which + " was written in parts by " + state.shards.value("world_size", json()).dump() +
                      " rank(s), and this run (" + std::to_string(dist_.world_size) +
                      " rank(s)) must rebuild it whole on rank 0, which lacks " + missing +
                      ": copy every rank's snapshots/ folder there, or resume on the world size it was taken on");
    }
    if (!AllRanksOk(pg, error.empty())) {
      if (is_main_rank()) std::fprintf(stderr, "%s is unusable: %s; trying the previous one\n", which.c_str(), error.c_str());
      return false;
    }
  }
  // Whole: rank 0 reads, every rank receives. The parameters and the optimizer's moments (its
  // live state, or the whole-state tensors a sharded optimizer gathered) share storage with
  // the tensors restored.
  OptimizerState optimizer_state = optimizer_->GatherState();
  stage_.WithFullParameters(*ctx_, [&] { RestoreTensors(pg, is_main_rank(), snap, SnapshotTensors(optimizer_state)); });
  optimizer_state.step = step;
  optimizer_->LoadState(optimizer_state);
  return true;
}

std::optional<TrainingState> Trainer::TryResume(LinearSchedule& schedule) {
  c10d::ProcessGroup* pg = dist_.pg.get();
  std::optional<LoadedSnapshot> snap;
  std::optional<TrainingState> state;
  int64_t skipped = 0;
  for (int64_t below = INT64_MAX;; below = state->update) {  // a rank's part unusable: the one before
    snap.reset();
    if (is_main_rank() && !options_.overwrite_output_dir) snap = LoadLatestSnapshot(options_.output_dir, below);
    state = ShareSnapshotState(pg, is_main_rank(), snap ? &*snap : nullptr);
    if (!state) return std::nullopt;
    CheckFingerprint(*state, Fingerprint(), options_.output_dir);
    // Updates an overflow skipped (--fp16) stepped neither the optimizer nor the schedule.
    skipped = scaler_.enabled() && state->loss_scaler.is_object() ? state->loss_scaler.at("skipped").get<int64_t>() : 0;
    if (RestoreSnapshot(*state, snap ? &*snap : nullptr, state->update - skipped)) break;
  }
  if (scaler_.enabled() && state->loss_scaler.is_object()) {
    scaler_.Restore(state->loss_scaler.at("scale").get<double>(), state->loss_scaler.at("clean_updates").get<int64_t>(),
                    skipped);
  }
  schedule.set_updates_done(state->update - skipped);
  optimizer_->set_lr(schedule.current_lr());
  losses_ = state->losses;
  eval_results_.clear();
  for (const auto& e : state->eval_results) eval_results_.push_back(EvalResult::FromJson(e));
  if (is_main_rank()) {
    // The log keeps exactly the updates the snapshot has seen; later lines are replayed.
    TruncateTrainLog(options_.output_dir, state->update);
    json evals = json::array();
    for (const auto& e : eval_results_) evals.push_back(e.ToJson());
    WriteFileAtomically(options_.output_dir + "/eval_results.json", evals.dump(2) + "\n");
    std::printf("resuming from %s: %lld updates done (epoch %lld, mini-batch %lld of it)\n", snap->path.c_str(),
                static_cast<long long>(state->update), static_cast<long long>(state->epoch + 1),
                static_cast<long long>(state->batch_in_epoch));
    const int64_t taken_on = state->fingerprint.value("world_size", int64_t{0});
    if (taken_on != dist_.world_size) {
      // The same examples per update; the sums over ranks add in another order, so the losses
      // from here on differ from an uninterrupted run by rounding (about 1e-7 relative).
      std::printf("the snapshot was taken on %lld rank(s), this run has %d: each rank takes its part of the whole "
                  "snapshot (resharded); the same examples per update\n",
                  static_cast<long long>(taken_on), dist_.world_size);
    }
    std::fflush(stdout);
  }
  return state;
}

}  // namespace distlm::train
