// The project's MPI group under a real `mpirun -np N` on localhost: this binary is also the
// worker (test_worker.h); mpirun starts N copies with --backend=mpi.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dist/test_worker.h"
#include "common/testing/subprocess.h"

namespace distlm::dist {
namespace {

// mpirun from PATH; empty when Open MPI's launcher is not installed.
std::string FindMpirun() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  dirs += ":/usr/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/mpirun";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

struct MpiRun {
  distlm::testing::ProcessResult result;
  double seconds = 0;
};

MpiRun Mpirun(int np, const std::string& mode, const std::vector<std::string>& args,
              const std::map<std::string, std::string>& env = {}, double timeout_s = 60) {
  std::string mpirun = FindMpirun();
  // Loopback TCP only (no shared-memory transport, which wants a roomy /dev/shm), no core
  // binding (2 cores, up to 4 ranks), and room for more ranks than cores.
  distlm::testing::Command c;
  c.argv = {mpirun,          "--oversubscribe", "--bind-to", "none",
            "-np",           std::to_string(np), "--mca",    "btl",
            "self,tcp",      "--mca",            "btl_tcp_if_include", "lo",
            "--mca",         "oob_tcp_if_include", "lo",    "-x",
            "DISTLM_DIST_TEST_MODE", ::distlm::testing::SelfPath(), "--backend=mpi"};
  c.argv.insert(c.argv.end(), args.begin(), args.end());
  c.env = env;
  c.env["DISTLM_DIST_TEST_MODE"] = mode;
  c.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
  c.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
  auto t0 = std::chrono::steady_clock::now();
  MpiRun run;
  run.result = distlm::testing::Run(c, timeout_s);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("---- mpirun -np %d (exit %d%s, %.2f s):\n%s\n", np, run.result.exit_code,
              run.result.timed_out ? ", timed out" : "", run.seconds, run.result.output.c_str());
  return run;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class MpiProcessGroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindMpirun().empty()) GTEST_SKIP() << "SKIPPED: mpirun is not installed (openmpi-bin)";
  }
};

void ExpectCollectivesPass(int np) {
  MpiRun run = Mpirun(np, "collectives", {});
  EXPECT_FALSE(run.result.timed_out);
  EXPECT_EQ(run.result.exit_code, 0);
  for (int r = 0; r < np; ++r) {
    std::string rank = "rank " + std::to_string(r);
    EXPECT_TRUE(Contains(run.result.output,
                         rank + " of " + std::to_string(np) + ": backend=mpi source=openmpi"));
    EXPECT_TRUE(Contains(run.result.output, rank + ": collectives took"));
    EXPECT_TRUE(Contains(run.result.output, rank + ": _reduce_scatter_base"));
  }
  EXPECT_FALSE(Contains(run.result.output, "FAIL"));
}

TEST_F(MpiProcessGroupTest, CollectivesOnTwoRanks) { ExpectCollectivesPass(2); }

TEST_F(MpiProcessGroupTest, CollectivesOnFourRanks) { ExpectCollectivesPass(4); }

TEST_F(MpiProcessGroupTest, SubgroupsOfRowsAndColumns) {
  MpiRun run = Mpirun(4, "subgroups", {});
  EXPECT_FALSE(run.result.timed_out);
  EXPECT_EQ(run.result.exit_code, 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(Contains(run.result.output, "rank " + std::to_string(r) + ": subgroups ok"));
  }
}

// Task 7b's pipelines over MPI: sends and receives both ways at once (a blocking send on the
// group's one worker would deadlock here), out of order by tag, in the world and in subgroups;
// a short message named with both sizes.
void ExpectSendRecvPass(int np) {
  MpiRun run = Mpirun(np, "sendrecv", {});
  EXPECT_FALSE(run.result.timed_out);
  EXPECT_EQ(run.result.exit_code, 0);
  for (int r = 0; r < np; ++r) {
    EXPECT_TRUE(Contains(run.result.output, "rank " + std::to_string(r) + ": sendrecv ok"));
  }
  EXPECT_FALSE(Contains(run.result.output, "FAIL"));
}

TEST_F(MpiProcessGroupTest, SendAndRecvBothWaysOnTwoRanks) { ExpectSendRecvPass(2); }

TEST_F(MpiProcessGroupTest, SendAndRecvBothWaysOnFourRanks) { ExpectSendRecvPass(4); }

TEST_F(MpiProcessGroupTest, AWorldSizeThatContradictsMpirunIsOneLine) {
  MpiRun run = Mpirun(2, "init", {"--world_size=3"});
  EXPECT_FALSE(run.result.timed_out);
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_TRUE(Contains(run.result.output,
                       "error: --backend=mpi: MPI started 2 processes with this one as rank 0, "
                       "but OMPI_COMM_WORLD_RANK=0 and --world_size=3 say rank 0 of 3; under "
                       "mpirun leave --rank and --world_size unset\n"));
  EXPECT_LT(run.seconds, 20);
}

TEST_F(MpiProcessGroupTest, ADeadRankEndsTheJobAndMpirunNamesIt) {
  MpiRun run = Mpirun(3, "die", {}, {{"DISTLM_DIST_TEST_DIE_RANK", "1"}});
  EXPECT_FALSE(run.result.timed_out);
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_TRUE(Contains(run.result.output, "process rank 1 with PID"));
  EXPECT_TRUE(Contains(run.result.output, "signal 9"));
  EXPECT_LT(run.seconds, 20);
}

TEST_F(MpiProcessGroupTest, AStuckRankTimesOutInsteadOfHanging) {
  // Rank 1 never joins the all-reduce; rank 0 gives up after --dist_timeout_s and leaves
  // without MPI_Finalize, and mpirun then ends rank 1 too.
  MpiRun run = Mpirun(2, "hang", {"--dist_timeout_s=3"}, {{"DISTLM_DIST_TEST_DIE_RANK", "1"}});
  EXPECT_FALSE(run.result.timed_out);
  EXPECT_NE(run.result.exit_code, 0);
  EXPECT_TRUE(Contains(run.result.output,
                       "error: a collective failed (mpirun names the lost rank when it ends the "
                       "job): MPI allreduce did not finish within 3 s (--dist_timeout_s): a rank is stuck "
                       "or gone\n"));
  EXPECT_LT(run.seconds, 30);
}

}  // namespace
}  // namespace distlm::dist

int main(int argc, char** argv) {
  if (distlm::dist::testing::IsWorker()) return distlm::dist::testing::WorkerMain(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
