// Resuming a run from its newest snapshot (snapshot.h) on every rank: rank 0 reads the file and
// sends what it found to the others, so ranks need no shared file system. The Trainer calls these
// in order (Trainer::TryResume); each is one step a resume can fail at, with its own message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/train/snapshot.h"

namespace distlm::train {

// The state of rank 0's snapshot (`snap`, null when it has none) on every rank; nullopt on
// every rank when rank 0 has none. `pg` null: one process.
std::optional<TrainingState> ShareSnapshotState(c10d::ProcessGroup* pg, bool is_main, const LoadedSnapshot* snap);

// Rank 0's `text` on every rank (`pg` null or one rank: `text` itself).
std::string BroadcastString(c10d::ProcessGroup* pg, bool is_main, const std::string& text);

// Every rank's `text` in rank order, on every rank; each the same length (checksums).
std::vector<std::string> GatherStrings(c10d::ProcessGroup* pg, const std::string& text);

// Whether `ok` holds on every rank (a collective; `pg` null: `ok`).
bool AllRanksOk(c10d::ProcessGroup* pg, bool ok);

// A UserError naming the first option of `now` (the run's fingerprint) that the snapshot was
// taken with a different value of.
void CheckFingerprint(const TrainingState& state, const nlohmann::json& now, const std::string& output_dir);

// Copies the snapshot's tensors into `mine` (this rank's tensors, the same names on every rank,
// in the same order): rank 0 from `snap`, the others by broadcast. "rng/cpu" sets LibTorch's
// CPU generator instead. A UserError naming the tensor when the snapshot lacks it or has
// another shape or dtype.
void RestoreTensors(c10d::ProcessGroup* pg, bool is_main, const LoadedSnapshot* snap, const NamedTensors& mine);

// Keeps the first `updates` lines of <output_dir>/train_log.jsonl (a torn last line is
// dropped): the log then holds exactly what the snapshot has seen.
void TruncateTrainLog(const std::string& output_dir, int64_t updates);

}  // namespace distlm::train
