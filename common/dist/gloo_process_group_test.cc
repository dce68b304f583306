// Real ranks on 127.0.0.1 over Gloo: this binary re-executes itself as the workers
// (test_worker.h), started from flags like the handout's command or from torchrun's
// variables, and checks their exit codes, one-line errors and timing.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dist/dist_config.h"
#include "common/dist/test_worker.h"
#include "common/runtime/device.h"
#include "common/testing/subprocess.h"

namespace distlm::dist {
namespace {

using distlm::testing::Command;
using distlm::testing::ProcessResult;

struct Ranks {
  std::vector<ProcessResult> results;
  double seconds = 0;
};

// One worker per entry of `args`, all in `mode`, with `env` added.
Ranks Start(const std::string& mode, const std::vector<std::vector<std::string>>& args,
          const std::vector<std::map<std::string, std::string>>& envs = {},
          double timeout_s = 60) {
  std::vector<Command> cmds;
  for (size_t i = 0; i < args.size(); ++i) {
    Command c;
    c.argv = {::distlm::testing::SelfPath()};
    c.argv.insert(c.argv.end(), args[i].begin(), args[i].end());
    c.env = i < envs.size() ? envs[i] : std::map<std::string, std::string>{};
    c.env["DISTLM_DIST_TEST_MODE"] = mode;
    cmds.push_back(c);
  }
  auto t0 = std::chrono::steady_clock::now();
  Ranks run;
  run.results = distlm::testing::RunAll(cmds, timeout_s);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t i = 0; i < run.results.size(); ++i) {
    std::printf("---- process %zu (exit %d%s):\n%s", i, run.results[i].exit_code,
                run.results[i].timed_out ? ", timed out" : "", run.results[i].output.c_str());
  }
  std::printf("---- all done in %.2f s\n", run.seconds);
  return run;
}

// Flags for rank r of w, handout style (--local_rank), on a fresh port.
std::vector<std::vector<std::string>> HandoutArgs(int w, int port,
                                                  const std::vector<std::string>& extra = {}) {
  std::vector<std::vector<std::string>> args;
  for (int r = 0; r < w; ++r) {
    std::vector<std::string> a = {"--master_ip=127.0.0.1", "--master_port=" + std::to_string(port),
                                  "--world_size=" + std::to_string(w),
                                  "--local_rank=" + std::to_string(r)};
    a.insert(a.end(), extra.begin(), extra.end());
    args.push_back(a);
  }
  return args;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

void ExpectAllExit(const Ranks& run, int code) {
  for (size_t i = 0; i < run.results.size(); ++i) {
    EXPECT_FALSE(run.results[i].timed_out) << "process " << i << " hung";
    EXPECT_EQ(run.results[i].exit_code, code) << "process " << i << ":\n" << run.results[i].output;
  }
}

TEST(GlooProcessGroupTest, TwoRanksFromTheHandoutCommand) {
  // With the interface named (the four-rank case below finds it from the master's address).
  Ranks run = Start("collectives", HandoutArgs(2, distlm::testing::FreePort(), {"--gloo_iface=lo"}));
  ExpectAllExit(run, 0);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(Contains(run.results[r].output,
                         "rank " + std::to_string(r) + " of 2: backend=gloo source=flags"))
        << run.results[r].output;
    EXPECT_TRUE(Contains(run.results[r].output, "0 failures")) << run.results[r].output;
    EXPECT_TRUE(Contains(run.results[r].output, "agreement ok")) << run.results[r].output;
  }
}

TEST(GlooProcessGroupTest, FourRanksFromTorchrunVariables) {
  int port = distlm::testing::FreePort();
  std::vector<std::map<std::string, std::string>> envs;
  for (int r = 0; r < 4; ++r) {
    envs.push_back({{"RANK", std::to_string(r)},
                    {"LOCAL_RANK", std::to_string(r)},
                    {"WORLD_SIZE", "4"},
                    {"MASTER_ADDR", "127.0.0.1"},
                    {"MASTER_PORT", std::to_string(port)}});
  }
  Ranks run = Start("collectives", {{}, {}, {}, {}}, envs);
  ExpectAllExit(run, 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(Contains(run.results[r].output, "backend=gloo source=torchrun local_rank=" +
                                                    std::to_string(r)))
        << run.results[r].output;
  }
}

TEST(GlooProcessGroupTest, SubgroupsOfRowsAndColumns) {
  Ranks run = Start("subgroups", HandoutArgs(4, distlm::testing::FreePort()));
  ExpectAllExit(run, 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(Contains(run.results[r].output, "rank " + std::to_string(r) + ": subgroups ok"))
        << run.results[r].output;
  }
}

// Sends and receives both ways at once, out of order by tag, in the world and in subgroups.
TEST(GlooProcessGroupTest, SendAndRecvBothWaysOnFourRanks) {
  Ranks run = Start("sendrecv", HandoutArgs(4, distlm::testing::FreePort()));
  ExpectAllExit(run, 0);
  for (int r = 0; r < 4; ++r) {
    EXPECT_TRUE(Contains(run.results[r].output, "rank " + std::to_string(r) + ": sendrecv ok"))
        << run.results[r].output;
  }
}

TEST(GlooProcessGroupTest, OneRankNeedsNoPort) {
  // The default master port may be taken by anything; a single rank must not care.
  Ranks run = Start("collectives", {{}});
  ExpectAllExit(run, 0);
}

// (Agreement passing when values are equal is part of every "collectives" run.)
TEST(GlooProcessGroupTest, AgreementFailsEverywhereNamingTheRanks) {
  // Rank 1's long value differs from rank 2's only in its last byte; short values are shown
  // as they are, long ones by hash.
  std::string long_value(500, 'x');
  std::string other = long_value;
  other.back() = 'y';
  Ranks run = Start("agree", HandoutArgs(4, distlm::testing::FreePort()),
                    {{{"DISTLM_DIST_TEST_VALUE", "cfg-1"}},
                     {{"DISTLM_DIST_TEST_VALUE", long_value}},
                     {{"DISTLM_DIST_TEST_VALUE", other}},
                     {{"DISTLM_DIST_TEST_VALUE", "cfg-1"}}});
  ExpectAllExit(run, 2);
  const std::string want_prefix =
      "error: ranks disagree on model config: ranks 0, 3 have cfg-1, rank 1 has ";
  std::string first_line;
  for (const auto& r : run.results) {
    size_t at = r.output.find(want_prefix);
    ASSERT_NE(at, std::string::npos) << r.output;
    std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    if (first_line.empty()) first_line = line;
    EXPECT_EQ(line, first_line);  // every rank says the same
  }
  // "<16 hex digits>, rank 2 has <16 other hex digits>"
  std::string tail = first_line.substr(want_prefix.size());
  const std::string middle = ", rank 2 has ";
  ASSERT_EQ(tail.size(), 16 + middle.size() + 16) << tail;
  EXPECT_EQ(tail.substr(16, middle.size()), middle);
  EXPECT_NE(tail.substr(0, 16), tail.substr(16 + middle.size()));
}

TEST(GlooProcessGroupTest, BadStartsAreOneLineAndQuick) {
  // Three independent processes, each wrong in its own way; none needs the network.
  Ranks run = Start("init", {{"--rank=2", "--world_size=2"},
                             {"--backend=nccl"},
                             {"--backend=tcp"},
                             {"--gloo_iface=nosuch0"}});
  EXPECT_EQ(run.results[0].exit_code, 2);
  EXPECT_TRUE(Contains(run.results[0].output,
                       "error: rank 2 (--rank=2) is not below the world size 2 (--world_size=2)\n"))
      << run.results[0].output;
  const bool nccl_usable = NcclAvailable() && runtime::CudaDeviceCount() > 0;
  EXPECT_EQ(run.results[1].exit_code, nccl_usable ? 0 : 2);
  if (!NcclAvailable()) {
    EXPECT_TRUE(Contains(run.results[1].output,
                         "error: --backend=nccl needs a CUDA build of LibTorch; this one is "
                         "CPU-only: use gloo or mpi\n"))
        << run.results[1].output;
  } else if (!nccl_usable) {
    // The CUDA build (LibTorch 2.x wheel) on a machine without a GPU.
    EXPECT_TRUE(Contains(run.results[1].output,
                         "error: --backend=nccl needs a GPU per rank, and this CUDA build of "
                         "LibTorch sees none"))
        << run.results[1].output;
  }
  EXPECT_EQ(run.results[2].exit_code, 2);
  EXPECT_TRUE(Contains(run.results[2].output,
                       "error: --backend=tcp is not a backend: use gloo, mpi or nccl\n"))
      << run.results[2].output;
  EXPECT_EQ(run.results[3].exit_code, 2);
  EXPECT_TRUE(Contains(run.results[3].output, "error: --gloo_iface=nosuch0: no such network interface with an address on "
                       "this host (have: lo"))
      << run.results[3].output;
  EXPECT_LT(run.seconds, 10);
}

TEST(GlooProcessGroupTest, UnreachableMaster) {
  int port = distlm::testing::FreePort();  // nobody listens there
  Ranks run = Start("init", {{"--master_ip=127.0.0.1", "--master_port=" + std::to_string(port),
                            "--world_size=2", "--rank=1", "--dist_timeout_s=2"}});
  ExpectAllExit(run, 2);
  EXPECT_TRUE(Contains(run.results[0].output,
                       "error: cannot reach the master at 127.0.0.1:" + std::to_string(port) +
                           " within 2 s (--master_ip/--master_port): "))
      << run.results[0].output;
  EXPECT_LT(run.seconds, 15);
}

TEST(GlooProcessGroupTest, MissingRanks) {
  // Rank 0 of three starts alone; it gives up after the timeout and says who is missing.
  Ranks run = Start("init", {HandoutArgs(3, distlm::testing::FreePort(), {"--dist_timeout_s=3"})[0]});
  ExpectAllExit(run, 2);
  EXPECT_TRUE(Contains(run.results[0].output,
                       "error: only 1 of 3 ranks joined within --dist_timeout_s=3 (missing: ranks "
                       "1, 2)\n"))
      << run.results[0].output;
  EXPECT_GE(run.seconds, 3);
  EXPECT_LT(run.seconds, 15);
}

TEST(GlooProcessGroupTest, WorldSizeDisagreement) {
  int port = distlm::testing::FreePort();
  auto args = HandoutArgs(2, port);
  args[1] = HandoutArgs(3, port)[1];  // rank 1 believes in three ranks
  Ranks run = Start("init", args);
  ExpectAllExit(run, 2);
  for (const auto& r : run.results) {
    EXPECT_TRUE(Contains(r.output,
                         "error: ranks disagree on world size: rank 0 has 2 (--world_size=2), "
                         "rank 1 has 3\n"))
        << r.output;
  }
  EXPECT_LT(run.seconds, 15);
}

TEST(GlooProcessGroupTest, PortInUseOnRankZero) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  Ranks run = Start("init", {HandoutArgs(2, port)[0]});
  close(fd);
  ExpectAllExit(run, 2);
  EXPECT_TRUE(Contains(run.results[0].output,
                       "error: rank 0 cannot host the rendezvous on port " + std::to_string(port) +
                           " (--master_port): the port is already in use on this host"))
      << run.results[0].output;
  EXPECT_LT(run.seconds, 10);
}

TEST(GlooProcessGroupTest, SecondClaimOfARankIsRefused) {
  int port = distlm::testing::FreePort();
  auto args = HandoutArgs(2, port);
  // Rank 0 stays until both claims of rank 1 are in, however late the second one starts.
  Ranks run = Start("init", {args[0], args[1], args[1]},
                    {{{"DISTLM_DIST_TEST_AWAIT_CLAIMS", "2"}}});
  int refused = 0, fine = 0;
  for (const auto& r : run.results) {
    EXPECT_FALSE(r.timed_out);
    if (r.exit_code == 0) ++fine;
    if (r.exit_code == 2 &&
        Contains(r.output, "error: rank 1 (--local_rank=1, used as the global rank since --rank "
                           "is absent) is taken: another process already joined the master at "
                           "127.0.0.1:" + std::to_string(port) + " as rank 1\n")) {
      ++refused;
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(fine, 2);
}

TEST(GlooProcessGroupTest, ALostRankIsNamedAndNobodyHangs) {
  // Four ranks in Gloo's ring: rank 3 dies; ranks 0 and 2 (its neighbours) see the broken
  // connection first, rank 1 only when they give up. All three must name rank 3.
  Ranks run = Start("die", HandoutArgs(4, distlm::testing::FreePort(), {"--dist_timeout_s=30"}),
                  {{{"DISTLM_DIST_TEST_DIE_RANK", "3"}},
                   {{"DISTLM_DIST_TEST_DIE_RANK", "3"}},
                   {{"DISTLM_DIST_TEST_DIE_RANK", "3"}},
                   {{"DISTLM_DIST_TEST_DIE_RANK", "3"}}},
                  /*timeout_s=*/60);
  EXPECT_EQ(run.results[3].exit_code, 128 + 9);
  for (int r = 0; r < 3; ++r) {
    EXPECT_FALSE(run.results[r].timed_out);
    EXPECT_EQ(run.results[r].exit_code, 2) << run.results[r].output;
    EXPECT_TRUE(Contains(run.results[r].output,
                         "error: lost rank 3 (no heartbeat for 3 s) during a collective: "))
        << run.results[r].output;
  }
  EXPECT_LT(run.seconds, 25);  // well inside --dist_timeout_s=30: the failure is noticed, not waited out
}

TEST(GlooProcessGroupTest, AStuckRankTimesOutInsteadOfHanging) {
  // Rank 1 is alive (its heartbeat goes on) but never joins the all-reduce: Gloo's deadline
  // (--dist_timeout_s) ends rank 0's wait, and the report says that nobody was lost. The same
  // deadline bounds the rendezvous: at 2 s, a rank started late on a loaded machine (a CPU hog
  // on both cores, load 10) missed it (1 of 5 runs), so 8.
  Ranks run = Start("hang", HandoutArgs(2, distlm::testing::FreePort(), {"--dist_timeout_s=8"}),
                    {{{"DISTLM_DIST_TEST_DIE_RANK", "1"}}, {{"DISTLM_DIST_TEST_DIE_RANK", "1"}}});
  for (const auto& r : run.results) EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(run.results[0].exit_code, 2) << run.results[0].output;
  EXPECT_TRUE(Contains(run.results[0].output,
                       "error: a collective failed while every rank still answers: "))
      << run.results[0].output;
  EXPECT_TRUE(Contains(run.results[0].output, "Timed out")) << run.results[0].output;
  EXPECT_EQ(run.results[1].exit_code, 0) << run.results[1].output;  // left when the store went
  EXPECT_LT(run.seconds, 45);  // the 8 s deadline, not Start's 60 s kill
}

}  // namespace
}  // namespace distlm::dist

int main(int argc, char** argv) {
  if (distlm::dist::testing::IsWorker()) return distlm::dist::testing::WorkerMain(argc, argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
