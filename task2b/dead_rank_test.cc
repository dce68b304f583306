// Dead ranks: when one rank dies mid-training the others stop within --dist_timeout_s with a
// message naming the lost rank, the launcher exits non-zero, and no process is left behind.
#include <dirent.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"

namespace {

using distlm::testing::Command;

const std::vector<std::string> kFlags = {"--max_steps=50", "--per_gpu_train_batch_size=2", "--max_seq_length=32",
                                         "--num_threads=1", "--do_eval=false", "--dist_timeout_s=5"};

// Processes whose command line mentions `marker`.
int CountProcesses(const std::string& marker) {
  int n = 0;
  DIR* d = opendir("/proc");
  while (auto* e = readdir(d)) {
    std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in("/proc/" + pid + "/cmdline");
    std::stringstream ss;
    ss << in.rdbuf();
    if (ss.str().find(marker) != std::string::npos) ++n;
  }
  closedir(d);
  return n;
}

TEST(DeadRankTest, TheLauncherStopsEveryRankAndNamesTheDeadOne) {
  std::string out = distlm::testing::MakeTempDir("dead_launch");
  Command c;
  c.argv = {distlm::testing::Runfile("tools/launch"), "--nproc_per_node=4", "--",
            distlm::testing::Runfile("task2b/reference")};
  c.argv.insert(c.argv.end(), kFlags.begin(), kFlags.end());
  c.argv.push_back("--output_dir=" + out);
  c.env["DISTLM_FAULT_KILL"] = "2:3";
  auto start = std::chrono::steady_clock::now();
  auto r = distlm::testing::Run(c, 120);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("launch: rank 2 was killed by signal 9"), std::string::npos) << r.output;
  EXPECT_EQ(CountProcesses(out), 0) << "ranks left behind";
  std::printf("launcher run with rank 2 killed after update 3 ended in %.1f s\n", secs);
}

TEST(DeadRankTest, SurvivorsNameTheLostRankWithinTheTimeout) {
  // No launcher: each rank on its own, as on a cluster where every node starts its own process.
  std::string out = distlm::testing::MakeTempDir("dead_alone");
  int port = distlm::testing::FreePort();
  std::vector<Command> ranks;
  for (int r = 0; r < 4; ++r) {
    Command c;
    c.argv = {distlm::testing::Runfile("task2b/reference"), "--master_ip=127.0.0.1",
              "--master_port=" + std::to_string(port), "--world_size=4", "--local_rank=" + std::to_string(r)};
    c.argv.insert(c.argv.end(), kFlags.begin(), kFlags.end());
    c.argv.push_back("--output_dir=" + out + "/rank" + std::to_string(r));
    c.env["DISTLM_FAULT_KILL"] = "2:3";
    c.env["LOCAL_WORLD_SIZE"] = "4";
    ranks.push_back(c);
  }
  auto start = std::chrono::steady_clock::now();
  auto results = distlm::testing::RunAll(ranks, 120);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(results[2].exit_code, 128 + 9);
  for (int r : {0, 1, 3}) {
    EXPECT_FALSE(results[r].timed_out) << "rank " << r << " hung:\n" << results[r].output;
    EXPECT_NE(results[r].exit_code, 0) << "rank " << r << ":\n" << results[r].output;
    EXPECT_NE(results[r].output.find("lost rank 2"), std::string::npos) << "rank " << r << ":\n" << results[r].output;
  }
  std::printf("survivors stopped %.1f s after start (rank 2 died after update 3; --dist_timeout_s=5)\n", secs);
}

}  // namespace
