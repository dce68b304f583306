// Training snapshots: everything needed to continue a run exactly where it stopped.
//
// A snapshot is one safetensors file, output_dir/snapshots/snapshot-<update>.safetensors:
// tensors "param/<name>", "exp_avg/<name>", "exp_avg_sq/<name>" and "rng/cpu" (LibTorch's CPU
// generator state), and metadata "state" (JSON: update, epoch, position in the epoch, losses,
// evaluation results, the options that must not change) and "checksum" (over every tensor's
// bytes in name order and the state JSON). It is written atomically (temporary file, fsync,
// rename); the newest two are kept, so a snapshot found corrupt or truncated falls back to the
// one before.
//
// Sharded snapshots: where the ranks keep disjoint parts of the model state between updates
// (task 6), each rank writes its part, snapshot-<update>.rank-<r>-of-<N>.safetensors (atomically,
// its checksum in its metadata), and rank 0 then writes the index, snapshot-<update>.index.json:
// the training state with "shards" = {"world_size", "layout", "checksums"}. The index comes
// last, so a snapshot exists once every part does. The layout says where each part's elements
// belong in the whole tensors:
//   {"units": [{"name", "shard_numel": S, "params": [{"name", "offset", "shape"}]}]}
// rank r's part holds, per unit u, "unit<u>/param", "unit<u>/exp_avg", "unit<u>/exp_avg_sq"
// (S float32 elements each: elements r*S .. r*S+S-1 of the unit's parameters laid end to end,
// as zero::FlatLayout lays them) and "rng/cpu", the rank's generator. A run with the same layout
// reads its own part; any other run (another world size, another stage) rebuilds the whole
// tensors from every part (WholeFromParts), which must then all be on rank 0's file system.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

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
  // A sharded snapshot's {"world_size", "layout", "checksums"}; null for a whole one.
  nlohmann::json shards = nullptr;

  nlohmann::json ToJson() const;
  static TrainingState FromJson(const nlohmann::json& j);
};

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes a snapshot of `state` and `tensors` into dir/snapshots, then deletes all but the newest
// `keep`. Returns the file's path.
std::string WriteSnapshot(const std::string& dir, const TrainingState& state, const NamedTensors& tensors,
                          int keep = 2);

struct LoadedSnapshot {
  std::string path;      // the file, or a sharded snapshot's index
  TrainingState state;
  NamedTensors tensors;  // empty for a sharded snapshot (its parts are read by each rank)
};

// The newest snapshot in dir/snapshots older than update `below` whose checksum holds (for a
// sharded one: whose index reads); a newer one that is corrupt or truncated is skipped with a
// message on stderr naming it and the reason. nullopt when none.
std::optional<LoadedSnapshot> LoadLatestSnapshot(const std::string& dir, int64_t below = INT64_MAX);

// Sharded snapshots. This rank's part, written atomically; returns its checksum. Removes the
// parts of this rank (and world size) of updates before the newest keep + 1 (an index being
// written may still need the one before).
std::string WriteSnapshotPart(const std::string& dir, int64_t update, int rank, int world_size,
                              const NamedTensors& tensors, int keep = 2);
// The index, once every part is written (rank 0); state.shards set. Removes the snapshots (whole
// ones and indexes) beyond the newest `keep`. Returns its path.
std::string WriteSnapshotIndex(const std::string& dir, const TrainingState& state, int keep = 2);
std::string SnapshotPartPath(const std::string& dir, int64_t update, int rank, int world_size);
// Rank `rank`'s part of the sharded snapshot `state` is the state of, its checksum checked
// against the index's: a UserError naming the file otherwise.
NamedTensors LoadSnapshotPart(const std::string& dir, const TrainingState& state, int rank);
// The whole snapshot's tensors ("param/<name>", "exp_avg/<name>", "exp_avg_sq/<name>", and
// rank 0's "rng/cpu") rebuilt from every part: a UserError naming a part that is missing or
// corrupt, or a tensor that does not match the layout.
NamedTensors WholeFromParts(const std::string& dir, const TrainingState& state);

// True when dir/snapshots holds at least one snapshot file (valid or not).
bool HasSnapshots(const std::string& dir);

// The checksum the snapshot format uses (exposed for tests).
std::string SnapshotChecksum(const NamedTensors& tensors, const std::string& state_json);

}  // namespace distlm::train
