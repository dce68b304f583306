// Sharded snapshots (snapshot.h) on a layout small enough to write out by hand: two units
// over two ranks, one of them padded. Each rank's part and the index written, read back,
// rebuilt whole against the tensors they came from; then each way a part or an index can be
// wrong, with the message that names it; then which files a run keeps.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"
#include "common/testing/user_error.h"
#include "common/train/snapshot.h"

namespace distlm::train {
namespace {

using nlohmann::json;

// a [2, 3] and b [3] in unit 0 (9 elements: shards of 5, one of padding), c [4] in unit 1.
struct Model {
  std::map<std::string, torch::Tensor> whole;  // "param/a", "exp_avg/a", ...
  json layout = {{"units",
                  {{{"name", "embeddings"},
                    {"shard_numel", 5},
                    {"params", {{{"name", "a"}, {"offset", 0}, {"shape", {2, 3}}}, {{"name", "b"}, {"offset", 6}, {"shape", {3}}}}}},
                   {{"name", "head"}, {"shard_numel", 2}, {"params", {{{"name", "c"}, {"offset", 0}, {"shape", {4}}}}}}}}};
  Model() {
    const std::map<std::string, torch::Tensor> params = {{"a", torch::arange(6, torch::kFloat).view({2, 3})},
                                                         {"b", 100 + torch::arange(3, torch::kFloat)},
                                                         {"c", 200 + torch::arange(4, torch::kFloat)}};
    for (const auto& [name, p] : params) {
      whole["param/" + name] = p;
      whole["exp_avg/" + name] = p + 0.5;
      whole["exp_avg_sq/" + name] = p + 0.25;
    }
  }
  // Rank r's part: its block of each unit's tensors laid end to end (zero padding), and a
  // generator state of its own.
  NamedTensors Part(int r) const {
    NamedTensors part;
    const std::vector<std::vector<std::string>> units = {{"a", "b"}, {"c"}};
    const std::vector<int64_t> shard = {5, 2};
    for (size_t u = 0; u < units.size(); ++u) {
      for (const std::string kind : {"param", "exp_avg", "exp_avg_sq"}) {
        std::vector<torch::Tensor> pieces;
        for (const auto& name : units[u]) pieces.push_back(whole.at(kind + "/" + name).reshape({-1}));
        torch::Tensor flat = torch::cat(pieces);
        flat = torch::cat({flat, torch::zeros({2 * shard[u] - flat.numel()})});
        part.emplace_back("unit" + std::to_string(u) + "/" + kind, flat.narrow(0, r * shard[u], shard[u]).clone());
      }
    }
    part.emplace_back("rng/cpu", torch::full({8}, r + 1, torch::kByte));
    return part;
  }
};

// Writes both parts and the index of update `update`; returns the index's state.
TrainingState WriteAll(const std::string& dir, const Model& m, int64_t update) {
  std::vector<std::string> sums;
  for (int r = 0; r < 2; ++r) sums.push_back(WriteSnapshotPart(dir, update, r, 2, m.Part(r)));
  TrainingState s;
  s.update = update;
  s.shards = {{"world_size", 2}, {"layout", m.layout}, {"checksums", sums}};
  WriteSnapshotIndex(dir, s);
  return s;
}

TEST(SnapshotPartsTest, PartsRebuildTheWholeTensors) {
  const std::string dir = testing::MakeTempDir("snapshot_parts");
  const Model m;
  WriteAll(dir, m, 4);
  const auto snap = LoadLatestSnapshot(dir);
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->path, dir + "/snapshots/snapshot-4.index.json");
  EXPECT_TRUE(snap->tensors.empty()) << "a sharded snapshot's parts are read by their ranks";
  EXPECT_EQ(snap->state.shards.at("layout"), m.layout);
  // Each rank's own part, checked against the index.
  std::map<std::string, torch::Tensor> mine;
  for (auto& [name, t] : LoadSnapshotPart(dir, snap->state, 1)) mine[name] = t;
  const NamedTensors want = m.Part(1);
  ASSERT_EQ(mine.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(mine.count(name)) << name;
    EXPECT_TRUE(torch::equal(mine[name], t)) << name;
  }
  // The whole tensors, in the whole snapshot's names, with rank 0's generator.
  std::map<std::string, torch::Tensor> got;
  for (auto& [name, t] : WholeFromParts(dir, snap->state)) got[name] = t;
  ASSERT_EQ(got.size(), m.whole.size() + 1);
  for (const auto& [name, t] : m.whole) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(torch::equal(got[name], t)) << name << ": " << got[name] << " want " << t;
  }
  EXPECT_TRUE(torch::equal(got["rng/cpu"], m.Part(0).back().second));
}

TEST(SnapshotPartsTest, EachWrongPartOrIndexIsNamed) {
  const Model m;
  const std::string dir = testing::MakeTempDir("snapshot_parts_bad");
  const TrainingState s = WriteAll(dir, m, 4);
  const std::string part1 = SnapshotPartPath(dir, 4, 1, 2);

  // The index puts a parameter past its unit's end.
  TrainingState far = s;
  far.shards["layout"]["units"][1]["params"][0]["offset"] = 1;
  EXPECT_NE(::distlm::testing::UserErrorOf([&] { WholeFromParts(dir, far); }).find("puts c at elements 1..5 of unit 1, which has 4"),
            std::string::npos)
      << ::distlm::testing::UserErrorOf([&] { WholeFromParts(dir, far); });

  // The index's shard size is not the parts'.
  TrainingState wide = s;
  wide.shards["layout"]["units"][1]["shard_numel"] = 3;
  EXPECT_NE(::distlm::testing::UserErrorOf([&] { WholeFromParts(dir, wide); })
                .find("snapshot-4.rank-0-of-2.safetensors: unit1/param has 2 elements, its index's layout says 3"),
            std::string::npos)
      << ::distlm::testing::UserErrorOf([&] { WholeFromParts(dir, wide); });

  // A part whose bytes changed after it was written.
  std::string bytes = ReadFile(part1);
  bytes[bytes.size() - 3] ^= 0x40;
  WriteFileAtomically(part1, bytes);
  EXPECT_NE(::distlm::testing::UserErrorOf([&] { LoadSnapshotPart(dir, s, 1); }).find(part1 + ": checksum mismatch with its index"),
            std::string::npos);
  EXPECT_NE(::distlm::testing::UserErrorOf([&] { WholeFromParts(dir, s); }).find("checksum mismatch"), std::string::npos);

  // A part that is not there.
  std::remove(part1.c_str());
  EXPECT_NE(::distlm::testing::UserErrorOf([&] { WholeFromParts(dir, s); }).find(part1 + " is not there (the part of rank 1 of 2"),
            std::string::npos)
      << ::distlm::testing::UserErrorOf([&] { WholeFromParts(dir, s); });

  // An index that is not one: skipped for the snapshot before it.
  WriteAll(dir, m, 6);
  WriteFileAtomically(dir + "/snapshots/snapshot-6.index.json", "{\"update\": 6}");
  const auto snap = LoadLatestSnapshot(dir);
  ASSERT_TRUE(snap.has_value());
  EXPECT_EQ(snap->state.update, 4);
}

TEST(SnapshotPartsTest, KeepsTheNewestIndexesAndOneMorePart) {
  const std::string dir = testing::MakeTempDir("snapshot_parts_keep");
  const Model m;
  for (int64_t u : {2, 4, 6, 8}) WriteAll(dir, m, u);
  for (int64_t u : {2, 4, 6, 8}) {
    const bool index = u >= 6, part = u >= 4;  // an index being written may still need the part before
    EXPECT_EQ(PathExists(dir + "/snapshots/snapshot-" + std::to_string(u) + ".index.json"), index) << u;
    for (int r = 0; r < 2; ++r) EXPECT_EQ(PathExists(SnapshotPartPath(dir, u, r, 2)), part) << u << " rank " << r;
  }
  EXPECT_EQ(LoadLatestSnapshot(dir, /*below=*/8)->state.update, 6);
  EXPECT_FALSE(LoadLatestSnapshot(dir, /*below=*/6).has_value());
}

}  // namespace
}  // namespace distlm::train
