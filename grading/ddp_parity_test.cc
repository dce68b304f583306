// Task 3 against task 2b: the model wrapped in DistributedDataParallel must train exactly as
// the hand-written all_reduce of task 2b does, with 2 and 4 ranks, over Gloo (the launcher)
// and MPI (mpirun); with gradient accumulation too (DDP's no_sync). And what task 3 logs: the
// bucket layout once, per update the buckets' all-reduces started before backward ended.
//
// Tolerance 1e-5 relative, as parity_test.cc: both average the same gradients; DDP divides
// before summing and all-reduces buckets instead of single tensors, so at most the order of
// float32 additions differs (with 2 and 4 ranks the division by a power of two is exact, and
// the losses usually agree to the last bit).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"
#include "grading/parity_cases.h"
#include "grading/stage_runner.h"

namespace distlm::grading {
namespace {

// The tiny built-in BERT's parameters, float32 (see //common/ddp:ddp_test for the count):
// every update must all-reduce each gradient byte exactly once.
constexpr int64_t kTinyBertBytes = 2244104;

// The same run with task 2b, once per case.
const StageRun& Task2b(const Case& c) {
  static std::map<std::string, StageRun> runs;
  auto it = runs.find(Name(c));
  if (it == runs.end()) {
    StageRun r = RunStage(Bin("task2b/reference"), c.ranks, c.launcher,
                          Flags(8 / c.ranks / c.accumulation, c.accumulation), 180);
    EXPECT_EQ(r.exit_code, 0) << "task2b " << Name(c) << ":\n" << r.output;
    it = runs.emplace(Name(c), std::move(r)).first;
  }
  return it->second;
}

class DdpParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(DdpParityTest, Task3MatchesTask2b) {
  const Case& c = GetParam();
  if (c.launcher == Launcher::kMpirun && MpirunBinary().empty()) GTEST_SKIP() << "SKIPPED: no mpirun";
  const StageRun& want = Task2b(c);
  ASSERT_EQ(want.losses().size(), kSteps) << want.output;
  StageRun r =
      RunStage(Bin("task3/reference"), c.ranks, c.launcher, Flags(8 / c.ranks / c.accumulation, c.accumulation), 180);
  ASSERT_FALSE(r.timed_out) << Name(c) << " hung:\n" << r.output;
  ASSERT_EQ(r.exit_code, 0) << Name(c) << ":\n" << r.output;
  EXPECT_EQ(CompareLosses(want.losses(), r.losses(), kSteps, kTol), "") << Name(c);
  double worst = 0;
  for (size_t i = 0; i < kSteps && i < r.losses().size(); ++i) {
    worst = std::max(worst, std::abs(r.losses()[i] - want.losses()[i]) / want.losses()[i]);
  }
  std::printf("task3 vs task2b %s: worst relative loss difference over %zu updates %.3g\n", Name(c).c_str(), kSteps,
              worst);

  // Per update: every bucket all-reduced once (no_sync: nothing for the other micro-batches),
  // each started before backward ended.
  for (const auto& line : r.log) {
    ASSERT_TRUE(line.contains("buckets")) << line.dump();
    const int64_t buckets = line["buckets"].get<int64_t>();
    EXPECT_EQ(buckets, 2) << line.dump();
    EXPECT_EQ(line["buckets_started_before_backward_end"].get<int64_t>(), buckets) << line.dump();
    EXPECT_EQ(line["comm_ops"]["allreduce"].get<int64_t>(), buckets) << line.dump();
    EXPECT_EQ(line["comm_bytes"].get<int64_t>(), kTinyBertBytes) << line.dump();
    for (const char* field : {"comm_time_ms", "comm_busy_ms", "comm_hidden_ms", "comm_exposed_ms", "compute_time_ms"}) {
      EXPECT_TRUE(line.contains(field) && line[field].get<double>() >= 0) << field << " in " << line.dump();
    }
  }
  // The layout, once: in the console and in ddp_buckets.json (41 tensors, 2 buckets).
  EXPECT_NE(r.output.find("task3: DistributedDataParallel over " + std::to_string(c.ranks) + " rank(s)"),
            std::string::npos)
      << r.output;
  std::ifstream in(r.output_dir + "/ddp_buckets.json");
  ASSERT_TRUE(in.good()) << "no ddp_buckets.json in " << r.output_dir;
  nlohmann::json layout = nlohmann::json::parse(in);
  ASSERT_EQ(layout.size(), 2u) << layout.dump();
  EXPECT_EQ(layout[0]["tensors"].get<int>() + layout[1]["tensors"].get<int>(), 41);
  EXPECT_EQ(layout[0]["cap_bytes"].get<int64_t>(), 1 << 20);
  EXPECT_EQ(layout[0]["names"][0], "classifier.bias");
  EXPECT_EQ(layout[0]["bytes"].get<int64_t>() + layout[1]["bytes"].get<int64_t>(), kTinyBertBytes);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DdpParityTest,
                         ::testing::Values(Case{2, Launcher::kLaunch}, Case{4, Launcher::kLaunch},
                                           Case{2, Launcher::kMpirun}, Case{4, Launcher::kMpirun},
                                           Case{2, Launcher::kLaunch, 2}));

TEST(DdpStudentKitTest, TheStubSaysWhatToDo) {
  StageRun r = RunStage(Bin("task3/student"), 2, Launcher::kLaunch, Flags(4), 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("TODO(student): task3 WrapModel (DistributedDataParallel) is not implemented yet; see "
                          "docs/handout/part3.md, section 'Task 3'"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace distlm::grading
