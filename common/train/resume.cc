#include "common/train/resume.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"

namespace distlm::train {

std::string BroadcastString(c10d::ProcessGroup* pg, bool is_main, const std::string& text) {
  if (pg == nullptr || pg->getSize() == 1) return text;
  std::vector<at::Tensor> len = {torch::tensor({static_cast<int64_t>(is_main ? text.size() : 0)}, torch::kLong)};
  pg->broadcast(len)->wait();
  const int64_t n = len[0].item<int64_t>();
  std::vector<at::Tensor> bytes = {torch::zeros({std::max<int64_t>(n, 1)}, torch::kByte)};
  if (is_main) std::memcpy(bytes[0].data_ptr(), text.data(), n);
  pg->broadcast(bytes)->wait();
  return std::string(static_cast<const char*>(bytes[0].data_ptr()), n);
}

std::vector<std::string> GatherStrings(c10d::ProcessGroup* pg, const std::string& text) {
  if (pg == nullptr || pg->getSize() == 1) return {text};
  const int64_t n = static_cast<int64_t>(text.size());
  std::vector<at::Tensor> mine = {torch::zeros({std::max<int64_t>(n, 1)}, torch::kByte)};
  std::memcpy(mine[0].data_ptr(), text.data(), n);
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < pg->getSize(); ++r) all[0].push_back(torch::zeros_like(mine[0]));
  pg->allgather(all, mine)->wait();
  std::vector<std::string> out;
  for (const at::Tensor& t : all[0]) out.emplace_back(static_cast<const char*>(t.data_ptr()), n);
  return out;
}

bool AllRanksOk(c10d::ProcessGroup* pg, bool ok) {
  if (pg == nullptr || pg->getSize() == 1) return ok;
  std::vector<at::Tensor> failed = {torch::tensor({ok ? 0L : 1L}, torch::kLong)};
  pg->allreduce(failed)->wait();  // a sum: every backend has it
  return failed[0].item<int64_t>() == 0;
}

std::optional<TrainingState> ShareSnapshotState(c10d::ProcessGroup* pg, bool is_main, const LoadedSnapshot* snap) {
  const std::string state_json = BroadcastString(pg, is_main, snap != nullptr ? snap->state.ToJson().dump() : "");
  if (state_json.empty()) return std::nullopt;
  return TrainingState::FromJson(nlohmann::json::parse(state_json));
}

void CheckFingerprint(const TrainingState& state, const nlohmann::json& now, const std::string& output_dir) {
  const nlohmann::json& then = state.fingerprint;
  for (auto& [key, value] : now.items()) {
    // Another world size resumes when their product, examples_per_micro_batch, agrees.
    if (key == "world_size" || key == "per_gpu_train_batch_size") continue;
    if (key == "examples_per_micro_batch" && then.value(key, nlohmann::json()) != value &&
        then.value(key, nlohmann::json()).is_number_integer()) {
      const int64_t want = then[key].get<int64_t>(), n = now.value("world_size", int64_t{1});
      throw UserError("the snapshot in " + output_dir + "/snapshots was taken with " + std::to_string(want) +
                      " examples per micro-batch (" + then.value("world_size", nlohmann::json()).dump() + " rank(s) x " +
                      then.value("per_gpu_train_batch_size", nlohmann::json()).dump() + "), this run has " +
                      value.dump() + " (" + std::to_string(n) + " x " +
                      now.value("per_gpu_train_batch_size", nlohmann::json()).dump() + "); " +
                      (want % n == 0 ? "resume on " + std::to_string(n) + " rank(s) with --per_gpu_train_batch_size=" +
                                           std::to_string(want / n)
                                     : std::string("resume on a world size that divides ") + std::to_string(want)) +
                      ", or --overwrite_output_dir to start afresh");
    }
    if (then.value(key, nlohmann::json()) != value) {
      throw UserError("the snapshot in " + output_dir + "/snapshots was taken with " + key + "=" +
                      then.value(key, nlohmann::json()).dump() + ", this run has " + value.dump() +
                      "; rerun with the same flags to resume, or --overwrite_output_dir to start afresh");
    }
  }
}

void RestoreTensors(c10d::ProcessGroup* pg, bool is_main, const LoadedSnapshot* snap, const NamedTensors& mine) {
  std::map<std::string, torch::Tensor> loaded;
  if (snap != nullptr) {
    for (auto& [name, t] : snap->tensors) loaded[name] = t;
  }
  const bool multi = pg != nullptr && pg->getSize() > 1;
  torch::NoGradGuard no_grad;
  for (const auto& [name, target] : mine) {
    torch::Tensor value;
    if (is_main) {
      auto it = loaded.find(name);
      if (it == loaded.end() || it->second.sizes() != target.sizes() || it->second.scalar_type() != target.scalar_type()) {
        throw UserError((snap != nullptr ? snap->path : std::string("the snapshot")) + ": tensor '" + name +
                        "' is missing or has another shape or dtype");
      }
      value = it->second;
    } else {
      value = torch::empty(target.sizes(), target.options().device(torch::kCPU));
    }
    if (multi) {
      std::vector<at::Tensor> t = {value};
      pg->broadcast(t)->wait();
    }
    if (name == "rng/cpu") {
      at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle to the global one
      gen.set_state(value);
    } else {
      torch::Tensor(target).copy_(value);  // parameters and optimizer moments share storage with `mine`
    }
  }
}

void TruncateTrainLog(const std::string& output_dir, int64_t updates) {
  const std::string path = output_dir + "/train_log.jsonl";
  std::string kept;
  if (PathExists(path)) {
    const std::string all = ReadFile(path);
    size_t pos = 0;
    for (int64_t i = 0; i < updates && pos < all.size(); ++i) {
      const size_t nl = all.find('\n', pos);
      if (nl == std::string::npos) break;  // a torn last line is dropped
      pos = nl + 1;
    }
    kept = all.substr(0, pos);
  }
  WriteFileAtomically(path, kept);
}

}  // namespace distlm::train
