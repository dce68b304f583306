// Smoke test of //task4_bench:collectives with real ranks: 2 gloo ranks through //tools:launch
// and 4 mpi ranks through mpirun, on tiny sizes, with --benchmark_format=json. The JSON must
// parse and hold every collective at every size with the planned iteration count, positive
// counters, and bus/algorithm bandwidth ratios equal to nccl-tests' factors.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/runtime/atomic_file.h"
#include "common/testing/subprocess.h"

namespace distlm::task4_bench {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// Tiny sizes and a small, size-dependent iteration plan: 64 KiB of traffic per size, at least
// 2 and at most 10 iterations, so 4 KiB runs 10 (16 would be the budget's) and 16 KiB runs 4.
const std::vector<std::string> kQuickFlags = {"--min_bytes=4096",          "--max_bytes=16384",
                                              "--size_factor=4",           "--bytes_per_benchmark=65536",
                                              "--min_iterations=2",        "--max_iterations=10",
                                              "--warmup_iterations=1",     "--benchmark_format=json"};
const std::map<int64_t, int64_t> kIterations = {{4096, 10}, {16384, 4}};

std::string Binary() { return testing::Runfile("task4_bench/collectives"); }

std::string FindMpirun() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    std::string p = std::string(dir) + "/mpirun";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// The JSON document in the output: the lines from a line "{" to the next line "}", after
// stripping `prefix` (the launcher's "[rank 0] "). Lines without the prefix are skipped.
Json ExtractJson(const std::string& output, const std::string& prefix) {
  std::istringstream in(output);
  std::string line, doc;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size(), prefix) != 0) continue;
    line = line.substr(prefix.size());
    if (!inside && line == "{") inside = true;
    if (inside) doc += line + "\n";
    if (inside && line == "}") break;
  }
  return Json::parse(doc, nullptr, /*allow_exceptions=*/false);
}

double BusFactor(const std::string& collective, int n) {
  if (collective == "all_reduce") return 2.0 * (n - 1) / n;
  if (collective == "all_gather") return (n - 1.0) / n;
  if (collective == "broadcast") return 1.0;
  if (collective == "gather_scatter") return n - 1.0;
  return NAN;
}

// Everything a report from `world` ranks of `backend` must hold.
void CheckReport(const Json& report, const std::string& backend, int world, const std::string& output) {
  ASSERT_FALSE(report.is_discarded()) << "no parsable JSON in:\n" << output;
  EXPECT_EQ(report["context"]["backend"], backend);
  EXPECT_EQ(report["context"]["world_size"], std::to_string(world));
  const Json& runs = report["benchmarks"];
  ASSERT_EQ(runs.size(), 8u) << runs.dump(1);
  size_t i = 0;
  for (const char* collective : {"all_reduce", "gather_scatter", "broadcast", "all_gather"}) {
    for (const auto& [bytes, iterations] : kIterations) {
      const Json& run = runs[i++];
      const std::string name = run["name"];
      SCOPED_TRACE(name);
      EXPECT_EQ(name, std::string(collective) + "/bytes:" + std::to_string(bytes) + "/iterations:" +
                          std::to_string(iterations) + "/real_time");
      EXPECT_FALSE(run.contains("error_occurred") && run["error_occurred"].get<bool>()) << run.dump(1);
      EXPECT_EQ(run["iterations"], iterations);
      EXPECT_EQ(run["time_unit"], "us");
      for (const char* counter : {"algbw_GBps", "busbw_GBps", "time_us", "bytes", "ranks"}) {
        ASSERT_TRUE(run.contains(counter)) << counter;
        EXPECT_GT(run[counter].get<double>(), 0) << counter;
      }
      EXPECT_EQ(run["bytes"].get<double>(), static_cast<double>(bytes));
      EXPECT_EQ(run["ranks"].get<double>(), world);
      const double algbw = run["algbw_GBps"], busbw = run["busbw_GBps"], time_us = run["time_us"];
      // GB/s = bytes / (us * 1e-6) / 1e9.
      EXPECT_NEAR(algbw, bytes / time_us / 1e3, 1e-9 * algbw);
      EXPECT_NEAR(busbw / algbw, BusFactor(collective, world), 1e-12);
      // time_us is the slowest rank's loop, which encloses rank 0's timed loop.
      EXPECT_GE(time_us, run["real_time"].get<double>() * 0.999);
    }
  }
}

TEST(CollectivesBenchTest, TwoGlooRanksThroughTheLauncherReportJson) {
  const std::string out_file = testing::MakeTempDir("collectives") + "/out.json";
  testing::Command c;
  c.argv = {testing::Runfile("tools/launch"), "--nproc_per_node=2", "--timeout_s=100", "--", Binary(),
            "--backend=gloo", "--benchmark_out=" + out_file, "--benchmark_out_format=json"};
  c.argv.insert(c.argv.end(), kQuickFlags.begin(), kQuickFlags.end());
  testing::ProcessResult r = testing::Run(c, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  CheckReport(ExtractJson(r.output, "[rank 0] "), "gloo", 2, r.output);
  // Rank 1 runs every benchmark in lockstep but reports nothing.
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("[rank 1] {")));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("[rank 1]     \"name\"")));
  // --benchmark_out is written by rank 0 alone: one whole document.
  CheckReport(Json::parse(ReadFile(out_file), nullptr, false), "gloo", 2, ReadFile(out_file));
}

TEST(CollectivesBenchTest, FourMpiRanksUnderMpirunReportJson) {
  const std::string mpirun = FindMpirun();
  if (mpirun.empty()) GTEST_SKIP() << "SKIPPED: no mpirun in /usr/bin or /usr/local/bin; the mpi run did not happen";
  testing::Command c;
  // Loopback TCP only, no core binding, more ranks than the 2 cores.
  c.argv = {mpirun, "--oversubscribe", "--bind-to", "none", "-np", "4", "--mca", "btl", "self,tcp",
            "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", Binary(), "--backend=mpi"};
  c.argv.insert(c.argv.end(), kQuickFlags.begin(), kQuickFlags.end());
  c.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
  c.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  testing::ProcessResult r = testing::Run(c, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  CheckReport(ExtractJson(r.output, ""), "mpi", 4, r.output);
}

// Ranks started with different plans would call different collectives and hang; instead every
// rank stops at start-up with one line naming what differs.
TEST(CollectivesBenchTest, RanksWithDifferentPlansStopWithOneLine) {
  const int port = testing::FreePort();
  std::vector<testing::Command> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].argv = {Binary(), "--backend=gloo", "--dist_timeout_s=30", "--min_bytes=4096",
                     r == 0 ? "--max_bytes=4096" : "--max_bytes=16384"};
    ranks[r].env = {{"RANK", std::to_string(r)},
                    {"WORLD_SIZE", "2"},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(port)}};
  }
  std::vector<testing::ProcessResult> results = testing::RunAll(ranks, 60);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r].exit_code, 2) << "rank " << r << ":\n" << results[r].output;
    EXPECT_THAT(results[r].output, HasSubstr("error: ranks disagree on benchmark plan")) << "rank " << r;
    EXPECT_THAT(results[r].output, ::testing::Not(HasSubstr("all_reduce/bytes"))) << "rank " << r;
  }
}

TEST(CollectivesBenchTest, BadFlagsAreOneLineErrors) {
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  } cases[] = {
      {{"--min_bytes=6"}, "error: --min_bytes must be a positive multiple of 4, got 6"},
      {{"--min_bytes=8192", "--max_bytes=4096"}, "error: --max_bytes (4096) is below --min_bytes (8192)"},
      {{"--size_factor=1"}, "error: --size_factor must be 2 or more, got 1"},
      {{"--min_iterations=5", "--max_iterations=3"}, "error: need 1 <= --min_iterations <= --max_iterations"},
      {{"--benchmark_enable_random_interleaving=true"},
       "error: --benchmark_enable_random_interleaving would let the ranks run different collectives"},
  };
  for (const Case& c : cases) {
    testing::Command cmd;
    cmd.argv = {Binary()};
    cmd.argv.insert(cmd.argv.end(), c.flags.begin(), c.flags.end());
    testing::ProcessResult r = testing::Run(cmd, 60);
    EXPECT_EQ(r.exit_code, 2) << c.flags[0] << ":\n" << r.output;
    EXPECT_THAT(r.output, HasSubstr(c.message)) << c.flags[0];
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
}

}  // namespace
}  // namespace distlm::task4_bench
