#include "common/train/snapshot.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/safetensors/safetensors.h"

namespace distlm::train {
namespace {

constexpr char kPrefix[] = "snapshot-";
constexpr char kSuffix[] = ".safetensors";
constexpr char kIndexSuffix[] = ".index.json";

// The update of `name` when it is kPrefix <digits> `suffix`.
std::optional<int64_t> UpdateOf(const std::string& name, const std::string& suffix) {
  const size_t p = std::strlen(kPrefix), s = suffix.size();
  if (name.size() <= p + s || name.rfind(kPrefix, 0) != 0 || name.compare(name.size() - s, s, suffix) != 0) {
    return std::nullopt;
  }
  std::string digits = name.substr(p, name.size() - p - s);
  if (digits.empty() || digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), ::isdigit)) return std::nullopt;
  return std::stoll(digits);
}

std::vector<std::string> Names(const std::string& sdir) {
  std::vector<std::string> names;
  DIR* d = opendir(sdir.c_str());
  if (d == nullptr) return names;
  while (auto* e = readdir(d)) names.push_back(e->d_name);
  closedir(d);
  return names;
}

// Snapshots in dir/snapshots (whole files and sharded snapshots' indexes), newest first.
std::vector<std::pair<int64_t, std::string>> ListSnapshots(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  const std::string sdir = dir + "/snapshots";
  for (const std::string& name : Names(sdir)) {
    std::optional<int64_t> u = UpdateOf(name, kSuffix);
    if (!u) u = UpdateOf(name, kIndexSuffix);
    if (u) found.emplace_back(*u, sdir + "/" + name);
  }
  std::sort(found.rbegin(), found.rend());
  return found;
}

// Removes the snapshots (whole files and indexes) beyond the newest `keep` (at least one stays).
void RemoveAllButNewest(const std::string& dir, int keep) {
  auto all = ListSnapshots(dir);
  for (size_t i = static_cast<size_t>(std::max(keep, 1)); i < all.size(); ++i) std::remove(all[i].second.c_str());
}

std::string PartSuffix(int rank, int world_size) {
  return ".rank-" + std::to_string(rank) + "-of-" + std::to_string(world_size) + kSuffix;
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
  nlohmann::json j = {{"update", update},   {"epoch", epoch},         {"batch_in_epoch", batch_in_epoch},
          {"minibatches", minibatches}, {"losses", losses}, {"eval_results", eval_results},
          {"fingerprint", fingerprint}, {"loss_scaler", loss_scaler}};
  if (!shards.is_null()) j["shards"] = shards;  // a whole snapshot's JSON is as it always was
  return j;
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
  if (j.contains("shards")) s.shards = j.at("shards");
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
  RemoveAllButNewest(dir, keep);
  return path;
}

std::optional<LoadedSnapshot> LoadLatestSnapshot(const std::string& dir, int64_t below) {
  for (const auto& [update, path] : ListSnapshots(dir)) {
    if (update >= below) continue;
    try {
      LoadedSnapshot s;
      s.path = path;
      if (UpdateOf(path.substr(path.rfind('/') + 1), kIndexSuffix)) {
        // A sharded snapshot: the index here, the parts read by their ranks (or WholeFromParts).
        s.state = TrainingState::FromJson(nlohmann::json::parse(ReadFile(path)));
        const nlohmann::json& sh = s.state.shards;
        if (!sh.is_object() || !sh.contains("layout") || !sh.contains("checksums") ||
            sh.value("world_size", 0) < 1 || sh["checksums"].size() != sh["world_size"].get<size_t>()) {
          throw UserError(path + ": not an index of a sharded snapshot (shards: world_size, layout, checksums)");
        }
        if (s.state.update != update) throw UserError(path + ": its state is of update " + std::to_string(s.state.update));
        return s;
      }
      auto header = safetensors::ReadHeader(path);
      auto state_it = header.metadata.find("state");
      auto sum_it = header.metadata.find("checksum");
      if (state_it == header.metadata.end() || sum_it == header.metadata.end()) {
        throw UserError(path + ": no state or checksum in its metadata");
      }
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

std::string SnapshotPartPath(const std::string& dir, int64_t update, int rank, int world_size) {
  return dir + "/snapshots/" + kPrefix + std::to_string(update) + PartSuffix(rank, world_size);
}

std::string WriteSnapshotPart(const std::string& dir, int64_t update, int rank, int world_size,
                              const NamedTensors& tensors, int keep) {
  MakeDirs(dir + "/snapshots");
  const std::string checksum = SnapshotChecksum(tensors, "");
  safetensors::SaveFile(SnapshotPartPath(dir, update, rank, world_size), tensors, {{"checksum", checksum}});
  // This rank's parts, newest first; the newest keep + 1 stay.
  std::vector<std::pair<int64_t, std::string>> mine;
  for (const std::string& name : Names(dir + "/snapshots")) {
    if (auto u = UpdateOf(name, PartSuffix(rank, world_size))) mine.emplace_back(*u, dir + "/snapshots/" + name);
  }
  std::sort(mine.rbegin(), mine.rend());
  for (size_t i = static_cast<size_t>(std::max(keep, 1)) + 1; i < mine.size(); ++i) std::remove(mine[i].second.c_str());
  return checksum;
}

std::string WriteSnapshotIndex(const std::string& dir, const TrainingState& state, int keep) {
  if (!state.shards.is_object()) throw std::logic_error("WriteSnapshotIndex: the state has no shards");
  const std::string path = dir + "/snapshots/" + kPrefix + std::to_string(state.update) + kIndexSuffix;
  WriteFileAtomically(path, state.ToJson().dump() + "\n");
  RemoveAllButNewest(dir, keep);
  return path;
}

NamedTensors LoadSnapshotPart(const std::string& dir, const TrainingState& state, int rank) {
  const int n = state.shards.at("world_size").get<int>();
  const std::string path = SnapshotPartPath(dir, state.update, rank, n);
  if (!PathExists(path)) {
    throw UserError(path + " is not there (the part of rank " + std::to_string(rank) + " of " + std::to_string(n) +
                    " of this snapshot)");
  }
  NamedTensors tensors = safetensors::LoadFile(path, /*to_float32=*/false);
  const std::string want = state.shards.at("checksums").at(rank).get<std::string>();
  if (SnapshotChecksum(tensors, "") != want) throw UserError(path + ": checksum mismatch with its index");
  return tensors;
}

NamedTensors WholeFromParts(const std::string& dir, const TrainingState& state) {
  const int n = state.shards.at("world_size").get<int>();
  std::vector<std::map<std::string, torch::Tensor>> parts(n);
  for (int r = 0; r < n; ++r) {
    for (auto& [name, t] : LoadSnapshotPart(dir, state, r)) parts[r][name] = t;
  }
  NamedTensors whole;
  const nlohmann::json& units = state.shards.at("layout").at("units");
  for (size_t u = 0; u < units.size(); ++u) {
    const int64_t shard = units[u].at("shard_numel").get<int64_t>();
    for (const char* kind : {"param", "exp_avg", "exp_avg_sq"}) {
      const std::string key = "unit" + std::to_string(u) + "/" + kind;
      std::vector<torch::Tensor> blocks;
      for (int r = 0; r < n; ++r) {
        auto it = parts[r].find(key);
        const std::string file = SnapshotPartPath(dir, state.update, r, n);
        if (it == parts[r].end()) throw UserError(file + ": no tensor " + key + ", which its index's layout has");
        if (it->second.dim() != 1 || it->second.numel() != shard || it->second.scalar_type() != torch::kFloat) {
          throw UserError(file + ": " + key + " has " + std::to_string(it->second.numel()) +
                          " elements, its index's layout says " + std::to_string(shard) + " float32");
        }
        blocks.push_back(it->second);
      }
      const torch::Tensor flat = torch::cat(blocks);
      const std::string prefix = std::string(kind) + "/";
      for (const nlohmann::json& p : units[u].at("params")) {
        const std::vector<int64_t> shape = p.at("shape").get<std::vector<int64_t>>();
        const int64_t offset = p.at("offset").get<int64_t>();
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        if (offset < 0 || offset + numel > flat.numel()) {
          throw UserError(dir + "/snapshots: the index of update " + std::to_string(state.update) + " puts " +
                          p.at("name").get<std::string>() + " at elements " + std::to_string(offset) + ".." +
                          std::to_string(offset + numel) + " of unit " + std::to_string(u) + ", which has " +
                          std::to_string(flat.numel()));
        }
        whole.emplace_back(prefix + p.at("name").get<std::string>(), flat.narrow(0, offset, numel).view(shape).clone());
      }
    }
  }
  auto rng = parts[0].find("rng/cpu");
  if (rng == parts[0].end()) throw UserError(SnapshotPartPath(dir, state.update, 0, n) + ": no tensor rng/cpu");
  whole.emplace_back("rng/cpu", rng->second);
  return whole;
}

}  // namespace distlm::train
