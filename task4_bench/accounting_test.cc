// Traffic accounting: the expected-traffic sums and the log summary against closed forms, and
// what real 2-rank runs of tasks 2a, 2b and 3 log as communicated against the model's own
// parameter list (numel x 4 bytes each).
#include "task4_bench/accounting.h"
#include "task4_bench/traffic.h"

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/bert/bert_config.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"

namespace distlm::task4_bench {
namespace {

using nlohmann::json;

TEST(AccountingTest, RingAndGatherScatterSendTheSameTotalButNotTheSameMaximum) {
  // S = 1000 bytes, N = 4. Ring: each rank 2 * 3/4 * 1000 = 1500. Gather + scatter: rank 0
  // sends 3 * 1000 (the scatter), the others 1000 each (the gather).
  ExpectedUpdateTraffic ring = ExpectedTrafficPerUpdate(SyncPattern::kRingAllreduce, 1000, 4);
  EXPECT_DOUBLE_EQ(ring.total_sent, 6000);
  EXPECT_DOUBLE_EQ(ring.per_rank_mean, 1500);
  EXPECT_DOUBLE_EQ(ring.busiest_rank, 1500);
  ExpectedUpdateTraffic gs = ExpectedTrafficPerUpdate(SyncPattern::kGatherScatter, 1000, 4);
  EXPECT_DOUBLE_EQ(gs.total_sent, 6000);
  EXPECT_DOUBLE_EQ(gs.per_rank_mean, 1500);
  EXPECT_DOUBLE_EQ(gs.busiest_rank, 3000);
  // Two ranks: both patterns send S per rank; one rank sends nothing.
  EXPECT_DOUBLE_EQ(ExpectedTrafficPerUpdate(SyncPattern::kRingAllreduce, 1000, 2).per_rank_mean, 1000);
  EXPECT_DOUBLE_EQ(ExpectedTrafficPerUpdate(SyncPattern::kGatherScatter, 1000, 2).busiest_rank, 1000);
  EXPECT_DOUBLE_EQ(ExpectedTrafficPerUpdate(SyncPattern::kRingAllreduce, 1000, 1).total_sent, 0);
  EXPECT_DOUBLE_EQ(ExpectedTrafficPerUpdate(SyncPattern::kGatherScatter, 1000, 1).total_sent, 0);
}

// Task 5: a native reduce-scatter + all-gather moves a ring all_reduce's bytes (each half of
// it); Gloo's fallback (a whole all_reduce, then the all-gather) moves half as much again.
TEST(AccountingTest, ShardedPatterns) {
  // S = 1000, N = 4: reduce-scatter 3/4 * 1000 + all-gather 3/4 * 1000 = 1500 per rank.
  EXPECT_DOUBLE_EQ(ExpectedTrafficPerUpdate(SyncPattern::kReduceScatterAllGather, 1000, 4).per_rank_mean, 1500);
  // all_reduce 1500 + all-gather 750 = 2250 = 3(N-1)/N * S, on every rank.
  ExpectedUpdateTraffic fallback = ExpectedTrafficPerUpdate(SyncPattern::kAllreduceAllGather, 1000, 4);
  EXPECT_DOUBLE_EQ(fallback.per_rank_mean, 2250);
  EXPECT_DOUBLE_EQ(fallback.busiest_rank, 2250);
  EXPECT_DOUBLE_EQ(ExpectedTrafficPerUpdate(SyncPattern::kAllreduceAllGather, 1000, 1).total_sent, 0);
  EXPECT_TRUE(IsSharded(SyncPattern::kAllreduceAllGather));
  // Task 6 over Gloo: 2 x (N-1)/N x S all-gathered and 2 x (N-1)/N x S all_reduced per rank.
  EXPECT_DOUBLE_EQ(ExpectedTrafficPerUpdate(SyncPattern::kAllreduceTwoAllGathers, 1000, 4).per_rank_mean, 3000);
  EXPECT_TRUE(IsSharded(SyncPattern::kAllreduceTwoAllGathers));
  EXPECT_FALSE(IsSharded(SyncPattern::kRingAllreduce));
}

TEST(AccountingTest, CommDtypeBytes) {
  EXPECT_EQ(CommDtypeBytes("fp32"), 4);
  EXPECT_EQ(CommDtypeBytes("fp16"), 2);
  EXPECT_EQ(CommDtypeBytes("bf16"), 2);
  EXPECT_THROW(CommDtypeBytes("int8"), UserError);
}

TEST(AccountingTest, SummaryAveragesUpdatesAfterTheFirst) {
  // Three updates of 8 samples each: the first (slow) is left out of the times.
  const std::string log =
      R"({"step":1,"loss":0.7,"step_time_ms":500,"samples_per_s":16,"comm_time_ms":100,"comm_bytes":4000,"comm_calls":3,"comm_tensors":3,"comm_dtype":"float32"})"
      "\n"
      R"({"step":2,"loss":0.6,"step_time_ms":100,"samples_per_s":80,"comm_time_ms":20,"comm_bytes":4000})"
      "\n"
      R"({"step":3,"loss":0.5,"step_time_ms":300,"samples_per_s":26.666666666666668,"comm_time_ms":30,"comm_bytes":4000})"
      "\n";
  LogSummary s = SummarizeTrainLog(log, "test");
  EXPECT_EQ(s.updates, 3);
  EXPECT_DOUBLE_EQ(s.step_ms, 200);
  EXPECT_DOUBLE_EQ(s.comm_ms, 25);
  EXPECT_DOUBLE_EQ(s.comm_share, 0.125);
  EXPECT_NEAR(s.samples_per_s, 16 / 0.4, 1e-9);  // 16 samples in 400 ms
  EXPECT_EQ(s.comm_bytes, 4000);
  EXPECT_EQ(s.comm_dtype, "float32");
  EXPECT_EQ(s.losses, (std::vector<double>{0.7, 0.6, 0.5}));

  LogSummary one = SummarizeTrainLog(R"({"loss":1,"step_time_ms":50,"samples_per_s":160})", "one");
  EXPECT_DOUBLE_EQ(one.step_ms, 50);
  EXPECT_DOUBLE_EQ(one.samples_per_s, 160);

  try {
    SummarizeTrainLog("{\"loss\":1}\n", "runs/x/train_log.jsonl");
    ADD_FAILURE() << "accepted a line without step_time_ms";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "runs/x/train_log.jsonl: line 1 is not an update's log line");
  }
  EXPECT_THROW(SummarizeTrainLog("", "empty"), UserError);
}

TEST(AccountingTest, ScalingEfficiency) {
  EXPECT_DOUBLE_EQ(ScalingEfficiency(100, 1, 100), 1);
  EXPECT_DOUBLE_EQ(ScalingEfficiency(150, 2, 100), 0.75);
  EXPECT_DOUBLE_EQ(ScalingEfficiency(100, 4, 100), 0.25);
  EXPECT_DOUBLE_EQ(ScalingEfficiency(100, 2, 0), 0);
}

// One update of `stage` on 2 Gloo ranks; returns rank 0's first log line and the output dir.
json TrainOneUpdate(const std::string& stage, std::string* out_dir) {
  *out_dir = distlm::testing::MakeTempDir(stage);
  const int port = distlm::testing::FreePort();
  std::vector<distlm::testing::Command> cmds;
  for (int r = 0; r < 2; ++r) {
    distlm::testing::Command c;
    c.argv = {distlm::testing::Runfile(stage + "/reference"), "--master_ip=127.0.0.1",
              "--master_port=" + std::to_string(port), "--world_size=2", "--local_rank=" + std::to_string(r),
              "--max_steps=1", "--per_gpu_train_batch_size=2", "--max_seq_length=16", "--num_threads=1",
              "--do_eval=false", "--output_dir=" + *out_dir};
    c.env["LOCAL_WORLD_SIZE"] = "2";
    cmds.push_back(c);
  }
  auto results = distlm::testing::RunAll(cmds, 120);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 0) << stage << " rank " << r << ":\n" << results[r].output;
  }
  std::ifstream in(*out_dir + "/train_log.jsonl");
  std::string line;
  std::getline(in, line);
  return line.empty() ? json() : json::parse(line);
}

TEST(AccountingTest, BytesPerUpdateAreTheSumOfTheGradientSizes) {
  int64_t numel = 0;
  size_t tensors = 0;
  for (const std::string stage : {"task2b", "task3", "task2a"}) {
    std::string dir;
    json line = TrainOneUpdate(stage, &dir);
    ASSERT_TRUE(line.contains("comm_bytes")) << stage << ": " << line.dump();
    // The model the run trained (saved at the end), its parameters listed independently.
    std::vector<GradientTensor> grads = GradientTensors(bert::LoadBertConfig(dir + "/config.json"));
    numel = TotalNumel(grads);
    tensors = grads.size();
    const int64_t s = 4 * numel;
    const int64_t logged = line["comm_bytes"].get<int64_t>();
    std::printf("%s: %zu gradient tensors, %lld parameters, S = %lld bytes; rank 0 logged comm_bytes %lld in %lld "
                "call(s)\n",
                stage.c_str(), tensors, static_cast<long long>(numel), static_cast<long long>(s),
                static_cast<long long>(logged), static_cast<long long>(line["comm_calls"].get<int64_t>()));
    if (stage == "task2b") {
      // One all_reduce per parameter.
      EXPECT_EQ(logged, s);
      EXPECT_EQ(line["comm_tensors"].get<size_t>(), tensors);
      EXPECT_EQ(line["comm_calls"].get<size_t>(), tensors);
    } else if (stage == "task3") {
      // The buckets hold every gradient once.
      EXPECT_EQ(logged, s);
      json buckets = json::parse(ReadFile(dir + "/ddp_buckets.json"));
      int64_t bucket_numel = 0;
      for (const auto& b : buckets) bucket_numel += b["numel"].get<int64_t>();
      EXPECT_EQ(bucket_numel, numel);
      EXPECT_EQ(line["comm_calls"].get<size_t>(), buckets.size());
    } else {
      // Rank 0 gathers its flat buffer (S) and scatters N = 2 pieces of S.
      EXPECT_EQ(logged, s + 2 * s);
      EXPECT_EQ(line["comm_calls"].get<int64_t>(), 2);
    }
  }
  // The tiny BERT: hidden 128, 2 layers, its vocabulary: at least one tensor per layer's parts.
  EXPECT_GT(tensors, 20u);
  EXPECT_GT(numel, 100000);
}

}  // namespace
}  // namespace distlm::task4_bench
