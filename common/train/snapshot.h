// Training snapshots: everything needed to continue a run exactly where it stopped.
//
// A snapshot is one safetensors file, output_dir/snapshots/snapshot-<update>.safetensors:
// tensors "param/<name>", "exp_avg/<name>", "exp_avg_sq/<name>" and "rng/cpu" (LibTorch's CPU
// generator state), and metadata "state" (JSON: update, epoch, position in the epoch, losses,
// evaluation results, the options that must not change) and "checksum" (over every tensor's
// bytes in name order and the state JSON). It is written atomically (temporary file, fsync,
// rename); the newest two are kept, so a snapshot found corrupt or truncated falls back to the
// one before.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

namespace distlm::train {

struct TrainingState {
  int64_t update = 0;          // optimizer updates done
  int64_t epoch = 0;           // 0-based epoch the next mini-batch belongs to
  int64_t batch_in_epoch = 0;  // mini-batches of that epoch already consumed
  int64_t minibatches = 0;     // mini-batches consumed in the whole run
  std::vector<double> losses;  // logged loss of every update so far
  nlohmann::json eval_results = nlohmann::json::array();
  nlohmann::json fingerprint = nlohmann::json::object();  // options a resume must share
  // --fp16's loss scaler: {"scale", "clean_updates", "skipped"}; null without loss scaling.
  nlohmann::json loss_scaler = nullptr;

  nlohmann::json ToJson() const;
  static TrainingState FromJson(const nlohmann::json& j);
};

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes a snapshot of `state` and `tensors` into dir/snapshots, then deletes all but the newest
// `keep`. Returns the file's path.
std::string WriteSnapshot(const std::string& dir, const TrainingState& state, const NamedTensors& tensors,
                          int keep = 2);

struct LoadedSnapshot {
  std::string path;
  TrainingState state;
  NamedTensors tensors;
};

// The newest snapshot in dir/snapshots whose checksum holds; a newer one that is corrupt or
// truncated is skipped with a message on stderr naming it and the reason. nullopt when none.
std::optional<LoadedSnapshot> LoadLatestSnapshot(const std::string& dir);

// True when dir/snapshots holds at least one snapshot file (valid or not).
bool HasSnapshots(const std::string& dir);

// The checksum the snapshot format uses (exposed for tests).
std::string SnapshotChecksum(const NamedTensors& tensors, const std::string& state_json);

}  // namespace distlm::train
