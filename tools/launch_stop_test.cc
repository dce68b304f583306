// The launcher with real processes, stopping them: a failing rank stops the others, a death
// by signal, the grace before SIGKILL, the timeout, what finished ranks leave behind, signals
// to the launcher and a killed launcher. Every scenario has a bounded time, and every process
// it starts is checked to be gone afterwards (tools/launch_testing.h).
#include <signal.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"
#include "tools/launch_testing.h"
#include "tools/launcher.h"

namespace distlm::tools {
namespace {

using launch_testing::Captured;
using launch_testing::Clock;
using launch_testing::Contains;
using launch_testing::ExpectAllGone;
using launch_testing::ExpectChildrenGot;
using launch_testing::GoneWithin;
using launch_testing::LaunchCaptured;
using launch_testing::PidsOf;
using launch_testing::ProcessResult;
using launch_testing::RunLauncher;
using launch_testing::RunScenario;
using launch_testing::SecondsSince;
using launch_testing::Testee;

// ---- Failures ----------------------------------------------------------------------------------

TEST(LaunchTest, AFailingRankStopsTheOthersAndIsNamed) {
  std::string dir = distlm::testing::MakeTempDir("fail");
  Captured c = LaunchCaptured(RunScenario(3, dir, {"fail_rank=1", "code=3", "after_ms=200"}));
  EXPECT_EQ(c.code, 3) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: rank 1 exited with code 3\n")) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: stopping rank(s) 0, 2 (SIGTERM")) << c.err;
  // The sleepers (60 s) were stopped by SIGTERM at once, not by the 5 s SIGKILL.
  EXPECT_LT(c.seconds, 4.0);
  EXPECT_FALSE(Contains(c.err, "SIGKILL;")) << c.err;
  ExpectChildrenGot(dir, {0, 2}, SIGTERM);
  // Rank 1's own child went with it.
  ExpectAllGone(dir, {0, 1, 2});
}

TEST(LaunchTest, ADeathBySignalIsNamed) {
  std::string dir = distlm::testing::MakeTempDir("signal");
  Captured c = LaunchCaptured(RunScenario(2, dir, {"fail_rank=0", "code=-9"}));
  EXPECT_EQ(c.code, 128 + SIGKILL) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: rank 0 was killed by signal 9 (SIGKILL)\n")) << c.err;
  ExpectAllGone(dir, {0, 1});
}

TEST(LaunchTest, ARankWithAJoinerMayDieAndTheJobGoesOn) {
  std::string dir = distlm::testing::MakeTempDir("joiner");
  // Ranks 0 and 1 sleep 2 s; rank 2 kills itself at once; its joiner runs 1 s and exits 0.
  LaunchOptions o = RunScenario(3, dir, {"fail_rank=2", "code=-9", "sleep_s=2"});
  o.join_ranks = {2};
  Captured c = LaunchCaptured(o);
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_TRUE(Contains(c.err, "and a joiner of rank(s) 2")) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: rank 2 was killed by signal 9 (SIGKILL); its joiner takes its place (--join_ranks)\n"))
      << c.err;
  EXPECT_TRUE(Contains(c.err, JoinerTakesPlaceLine(2, "was killed by signal 9 (SIGKILL)") + "\n")) << c.err;
  EXPECT_TRUE(Contains(c.out, "[rank 2 joiner] rank 2 joiner ready\n")) << c.out;
  EXPECT_FALSE(Contains(c.err, "stopping rank(s)")) << c.err;
  EXPECT_GE(c.seconds, 2.0) << "the others ran to their end";
  ExpectAllGone(dir, {0, 1, 2});
}

TEST(LaunchTest, AJoinerThatFailsEndsTheJob) {
  std::string dir = distlm::testing::MakeTempDir("joiner_fails");
  LaunchOptions o = RunScenario(2, dir, {"joiner_ms=500", "joiner_code=4"});
  o.join_ranks = {1};
  Captured c = LaunchCaptured(o);
  EXPECT_EQ(c.code, 4) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: rank 1's joiner exited with code 4\n")) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: stopping rank(s) 0, 1 (SIGTERM")) << c.err;
  EXPECT_LT(c.seconds, 8.0) << "the sleepers (60 s) were stopped";
  ExpectAllGone(dir, {0, 1});
}

TEST(LaunchTest, RanksIgnoringSigtermAreKilledAfterTheGrace) {
  std::string dir = distlm::testing::MakeTempDir("grace");
  LaunchOptions o = RunScenario(2, dir, {"fail_rank=1", "code=5", "ignore_term=1"});
  o.grace_s = 0.5;
  Captured c = LaunchCaptured(o);
  EXPECT_EQ(c.code, 5) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: rank(s) 0 still running 0.5 s after the stop signal (--grace_s); sending SIGKILL"))
      << c.err;
  EXPECT_GE(c.seconds, 0.5);
  EXPECT_LT(c.seconds, 4.0);
  ExpectAllGone(dir, {0, 1});
}

TEST(LaunchTest, TheTimeoutStopsEverythingAndNamesTheRanks) {
  // Rank 1 finishes early (exit 0 is no failure) but leaves a child; 0 and 2 sleep.
  std::string dir = distlm::testing::MakeTempDir("timeout");
  LaunchOptions o = RunScenario(3, dir, {"fail_rank=1", "code=0"});
  o.timeout_s = 1;
  Captured c = LaunchCaptured(o);
  EXPECT_EQ(c.code, kTimeoutExitCode) << c.err;
  EXPECT_TRUE(Contains(c.err, "launch: timed out after 1 s (--timeout_s); ranks still running: 0, 2\n")) << c.err;
  EXPECT_FALSE(Contains(c.err, "launch: rank 1")) << c.err;
  EXPECT_GE(c.seconds, 1.0);
  EXPECT_LT(c.seconds, 4.0);
  // Rank 1's child, left behind when rank 1 exited, got SIGTERM then.
  ExpectChildrenGot(dir, {1}, SIGTERM);
  ExpectAllGone(dir, {0, 1, 2});
}

TEST(LaunchTest, WhatFinishedRanksLeaveBehindIsStopped) {
  // Both ranks exit 0 at once, each leaving a child that would sleep 60 s.
  std::string dir = distlm::testing::MakeTempDir("leftover");
  Captured c = LaunchCaptured(RunScenario(2, dir, {"fail_rank=all", "code=0"}));
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_LT(c.seconds, 3.0);
  ExpectChildrenGot(dir, {0, 1}, SIGTERM);
  ExpectAllGone(dir, {0, 1});

  // Children that ignore SIGTERM get SIGKILL after the grace; the exit code stays the ranks'.
  dir = distlm::testing::MakeTempDir("leftover");
  LaunchOptions o = RunScenario(2, dir, {"fail_rank=all", "code=0", "ignore_term=1"});
  o.grace_s = 0.3;
  c = LaunchCaptured(o);
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_GE(c.seconds, 0.3);
  EXPECT_LT(c.seconds, 3.0);
  EXPECT_TRUE(Contains(c.err, "launch: processes started by rank 0 still running 0.3 s after it exited")) << c.err;
  ExpectAllGone(dir, {0, 1});
}

// ---- Signals to the launcher -------------------------------------------------------------------

void CheckForwarded(int signo, const std::string& name) {
  std::string dir = distlm::testing::MakeTempDir("forward");
  auto start = Clock::now();
  ProcessResult r = RunLauncher(
      {"--nproc_per_node=2", "--", Testee(), "run", dir, "kill_parent=" + std::to_string(signo)}, 20);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 128 + signo) << r.output;
  EXPECT_TRUE(Contains(r.output, "launch: received " + name + "; forwarding it to the ranks\n")) << r.output;
  // The ranks ended on the forwarded signal itself, well before the 5 s grace.
  EXPECT_FALSE(Contains(r.output, "sending SIGKILL")) << r.output;
  EXPECT_LT(SecondsSince(start), 4.5);
  // As Ctrl-C in a terminal, the signal reached everything the ranks started.
  ExpectChildrenGot(dir, {0, 1}, signo);
  ExpectAllGone(dir, {0, 1});
}

TEST(LaunchTest, SigtermToTheLauncherIsForwarded) { CheckForwarded(SIGTERM, "SIGTERM"); }

TEST(LaunchTest, SigintToTheLauncherIsForwarded) { CheckForwarded(SIGINT, "SIGINT"); }

TEST(LaunchTest, ASignalTheCallerIgnoresStaysIgnored) {
  // As under nohup: SIGHUP is ignored, so the launcher (here, this process) neither catches nor
  // forwards it; only the timeout ends the ranks.
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGHUP, &ignore, &old);
  std::string dir = distlm::testing::MakeTempDir("nohup");
  LaunchOptions o = RunScenario(2, dir, {"kill_parent=" + std::to_string(SIGHUP)});
  o.timeout_s = 1;
  Captured c = LaunchCaptured(o);
  struct sigaction after {};
  sigaction(SIGHUP, &old, &after);
  EXPECT_EQ(after.sa_handler, SIG_IGN) << "Launch() did not restore the caller's disposition";
  EXPECT_EQ(c.code, kTimeoutExitCode) << c.err;
  EXPECT_FALSE(Contains(c.err, "SIGHUP")) << c.err;
  ExpectAllGone(dir, {0, 1});
}

TEST(LaunchTest, RanksDieWithAKilledLauncher) {
  std::string dir = distlm::testing::MakeTempDir("orphan");
  ProcessResult r = RunLauncher({"--nproc_per_node=2", "--", Testee(), "run", dir, "kill_parent=9"}, 20);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.output;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<pid_t> pids = PidsOf(dir, rank);
    ASSERT_EQ(pids.size(), 2u) << rank;
    EXPECT_TRUE(GoneWithin(pids[0], 3)) << "rank " << rank << " outlived its SIGKILLed launcher";
    // The ranks' own children are theirs to look after (see launcher.h); clean up.
    kill(pids[1], SIGKILL);
  }
}

}  // namespace
}  // namespace distlm::tools
