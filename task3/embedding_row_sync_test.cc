// --embedding_sync=rows against the dense all-reduce, on real ranks: the same training (the
// average of a row nobody touched is zero either way), for the bytes of the touched rows.
//
// Two ranks add two numbers, which is the same sum in either order: the losses and weights
// must be equal bit for bit. Three ranks may add in another order once a row moves from the
// bucket's chunk to the rows' (Gloo's ring sums each chunk starting at a different rank), so
// there the bound is a float32 rounding, 1e-6 relative.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"

namespace {

using distlm::testing::Command;

std::vector<std::string> Argv(int ranks, const std::string& out, const std::string& sync) {
  return {distlm::testing::Runfile("tools/launch"),
          "--nproc_per_node=" + std::to_string(ranks),
          "--",
          distlm::testing::Runfile("task3/reference"),
          "--max_steps=6",
          "--num_threads=1",
          "--max_seq_length=32",
          "--per_gpu_train_batch_size=2",
          "--do_eval=false",
          "--plots=false",
          "--bucket_cap_mb=0.25",
          "--embedding_sync=" + sync,
          "--output_dir=" + out};
}

struct Pair {
  std::string dense, rows;
};

Pair RunBoth(int ranks) {
  Pair p{distlm::testing::MakeTempDir("dense"), distlm::testing::MakeTempDir("rows")};
  auto d = distlm::testing::Run(Command{Argv(ranks, p.dense, "dense"), {}}, 240);
  EXPECT_EQ(d.exit_code, 0) << d.output;
  auto r = distlm::testing::Run(Command{Argv(ranks, p.rows, "rows"), {}}, 240);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("word_embeddings.weight averaged by rows"), std::string::npos) << r.output;
  return p;
}

// The bytes all-reduced per update: the dense run's less the table, plus the mask (4 bytes a
// row of the vocabulary) and the rows sent (hidden x 4 bytes each).
void ExpectBytesOfTheRowsOnly(const Pair& p) {
  std::ifstream cfg(p.rows + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(cfg);
  const int64_t vocab = config.at("vocab_size"), hidden = config.at("hidden_size");
  const auto dense = distlm::testing::LogLines(p.dense), rows = distlm::testing::LogLines(p.rows);
  ASSERT_EQ(dense.size(), 6u);
  ASSERT_EQ(rows.size(), 6u);
  for (size_t u = 0; u < rows.size(); ++u) {
    const int64_t sent = rows[u].at("embedding_rows_sent");
    EXPECT_GT(sent, 0) << "update " << u + 1;
    EXPECT_LT(sent, vocab) << "update " << u + 1;
    const int64_t expected = dense[u].at("comm_bytes").get<int64_t>() - vocab * hidden * 4 + vocab * 4 + sent * hidden * 4;
    EXPECT_EQ(rows[u].at("comm_bytes").get<int64_t>(), expected) << "update " << u + 1;
    EXPECT_FALSE(dense[u].contains("embedding_rows_sent"));
  }
}

// Every tensor of the saved models within `rel` of the dense run's scale (0: bit for bit).
void ExpectSameWeights(const Pair& p, double rel) {
  auto a = distlm::safetensors::LoadFile(p.dense + "/model.safetensors");
  auto b = distlm::safetensors::LoadFile(p.rows + "/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].first, b[i].first);
    const double worst = (a[i].second - b[i].second).abs().max().item<double>();
    const double scale = std::max(a[i].second.abs().max().item<double>(), 1e-30);
    EXPECT_LE(worst, rel * scale) << a[i].first << ": worst difference " << worst;
  }
}

TEST(EmbeddingRowSyncTest, TwoRanksTrainBitForBitAsTheDenseAllReduce) {
  const Pair p = RunBoth(2);
  EXPECT_EQ(distlm::testing::LoggedLosses(p.rows), distlm::testing::LoggedLosses(p.dense));
  ExpectBytesOfTheRowsOnly(p);
  ExpectSameWeights(p, 0);
}

TEST(EmbeddingRowSyncTest, ThreeRanksTrainAsTheDenseAllReduceWithinFloatRounding) {
  const Pair p = RunBoth(3);
  const auto dense = distlm::testing::LoggedLosses(p.dense), rows = distlm::testing::LoggedLosses(p.rows);
  ASSERT_EQ(dense.size(), rows.size());
  for (size_t u = 0; u < dense.size(); ++u) {
    EXPECT_LE(std::abs(rows[u] - dense[u]), 1e-6 * std::abs(dense[u])) << "update " << u + 1;
  }
  ExpectBytesOfTheRowsOnly(p);
  ExpectSameWeights(p, 1e-6);
}

TEST(EmbeddingRowSyncTest, AnUnknownWayIsRefusedNamingTheFlag) {
  const std::string out = distlm::testing::MakeTempDir("bad");
  auto r = distlm::testing::Run(Command{Argv(2, out, "sparse"), {}}, 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--embedding_sync=sparse is not a way to sync the embedding"), std::string::npos)
      << r.output;
}

}  // namespace
