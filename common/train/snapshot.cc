#include "common/train/snapshot.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/safetensors/safetensors.h"

namespace distlm::train {
namespace {

constexpr char kPrefix[] = "snapshot-";
constexpr char kSuffix[] = ".safetensors";

// Snapshot files in dir/snapshots, newest (highest update) first.
std::vector<std::pair<int64_t, std::string>> ListSnapshots(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::string sdir = dir + "/snapshots";
  DIR* d = opendir(sdir.c_str());
  if (d == nullptr) return found;
  while (auto* e = readdir(d)) {
    std::string name = e->d_name;
    const size_t p = std::strlen(kPrefix), s = std::strlen(kSuffix);
    if (name.size() <= p + s || name.rfind(kPrefix, 0) != 0 || name.compare(name.size() - s, s, kSuffix) != 0) continue;
    std::string digits = name.substr(p, name.size() - p - s);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    found.emplace_back(std::stoll(digits), sdir + "/" + name);
  }
  closedir(d);
  std::sort(found.rbegin(), found.rend());
  return found;
}

// 64-bit multiply-xor hash over 8-byte words; detects corruption, not tampering.
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void Add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      h = (h ^ w) * 0x100000001b3ull;
      h ^= h >> 29;
    }
    for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    h = (h ^ n) * 0x100000001b3ull;
  }
};

}  // namespace

nlohmann::json TrainingState::ToJson() const {
  return {{"update", update},   {"epoch", epoch},         {"batch_in_epoch", batch_in_epoch},
          {"minibatches", minibatches}, {"losses", losses}, {"eval_results", eval_results},
          {"fingerprint", fingerprint}, {"loss_scaler", loss_scaler}};
}

TrainingState TrainingState::FromJson(const nlohmann::json& j) {
  TrainingState s;
  s.update = j.at("update").get<int64_t>();
  s.epoch = j.at("epoch").get<int64_t>();
  s.batch_in_epoch = j.at("batch_in_epoch").get<int64_t>();
  s.minibatches = j.at("minibatches").get<int64_t>();
  s.losses = j.at("losses").get<std::vector<double>>();
  s.eval_results = j.at("eval_results");
  s.fingerprint = j.at("fingerprint");
  if (j.contains("loss_scaler")) s.loss_scaler = j.at("loss_scaler");
  return s;
}

std::string SnapshotChecksum(const NamedTensors& tensors, const std::string& state_json) {
  std::vector<const std::pair<std::string, torch::Tensor>*> sorted;
  for (const auto& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  Hasher hasher;
  for (const auto* t : sorted) {
    hasher.Add(t->first.data(), t->first.size());
    torch::Tensor c = t->second.to(torch::kCPU).contiguous();
    hasher.Add(c.data_ptr(), c.nbytes());
  }
  hasher.Add(state_json.data(), state_json.size());
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(hasher.h));
  return buf;
}

bool HasSnapshots(const std::string& dir) { return !ListSnapshots(dir).empty(); }

std::string WriteSnapshot(const std::string& dir, const TrainingState& state, const NamedTensors& tensors, int keep) {
  MakeDirs(dir + "/snapshots");
  std::string state_json = state.ToJson().dump();
  std::string path = dir + "/snapshots/" + kPrefix + std::to_string(state.update) + kSuffix;
  safetensors::SaveFile(path, tensors, {{"state", state_json}, {"checksum", SnapshotChecksum(tensors, state_json)}});
  auto all = ListSnapshots(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) std::remove(all[i].second.c_str());
  return path;
}

std::optional<LoadedSnapshot> LoadLatestSnapshot(const std::string& dir) {
  for (const auto& [update, path] : ListSnapshots(dir)) {
    try {
      auto header = safetensors::ReadHeader(path);
      auto state_it = header.metadata.find("state");
      auto sum_it = header.metadata.find("checksum");
      if (state_it == header.metadata.end() || sum_it == header.metadata.end()) {
        throw UserError(path + ": no state or checksum in its metadata");
      }
      LoadedSnapshot s;
      s.path = path;
      s.tensors = safetensors::LoadFile(path, /*to_float32=*/false);
      if (SnapshotChecksum(s.tensors, state_it->second) != sum_it->second) {
        throw UserError(path + ": checksum mismatch");
      }
      s.state = TrainingState::FromJson(nlohmann::json::parse(state_it->second));
      return s;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "snapshot %s is unusable (%s); trying the previous one\n", path.c_str(),
                   OneLine(e).c_str());
    }
  }
  return std::nullopt;
}

}  // namespace distlm::train
