// The grader's count of what a command's processes held and used (grading/jail/process_watch.h),
// through RunSandboxed: a program that holds 96 MiB is seen holding that much, whether it is the
// command, its child, or (jailed) a process that left the command's tree; the grader's own forks,
// which share its pages until they execute something, are not counted; the CPU time of the
// busiest of three children is its own, not the others' nor their sum; a process whose first
// thread ended is counted through the others; files it maps are not its memory. The run's
// control group (run_cgroup.h) counts the run as a whole: every process it ever had, however
// short its life, and whatever its threads did.
#include "grading/jail/process_watch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"
#include "grading/jail/jail.h"
#include "grading/jail/run_cgroup.h"
#include "grading/jail/sandbox.h"

namespace distlm::grading {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

std::string Hog() { return testing::Runfile("grading/jail/memory_hog"); }

SandboxResult RunCommand(const std::vector<std::string>& argv, const PreparedJail* jail = nullptr) {
  SandboxCommand c;
  c.argv = argv;
  SandboxLimits limits;
  limits.timeout_s = 30;
  limits.jail = jail;
  return RunSandboxed(c, limits);
}

// What a 96 MiB hog must show: the 96 MiB and its program, not much more.
void ExpectAbout96MiB(const SandboxResult& r, const std::string& what) {
  ASSERT_EQ(r.exit_code, 0) << what << ": " << r.output;
  EXPECT_GE(r.peak_memory_bytes, 96 * kMiB) << what;
  EXPECT_LT(r.peak_memory_bytes, 96 * kMiB + 32 * kMiB) << what;
}

TEST(ProcessWatchTest, TheCommandItself) {
  ExpectAbout96MiB(RunCommand({Hog(), "96", "300"}), "the command");
  const SandboxResult small = RunCommand({Hog(), "4", "300"});
  ASSERT_EQ(small.exit_code, 0) << small.output;
  EXPECT_GT(small.peak_memory_bytes, 4 * kMiB);
  EXPECT_LT(small.peak_memory_bytes, 40 * kMiB);
}

// A launcher's ranks are its children: the largest one counts, not the launcher.
TEST(ProcessWatchTest, TheLargestOfTheCommandsChildren) {
  const std::string hog = Hog();
  ExpectAbout96MiB(RunCommand({"/bin/sh", "-c", hog + " 8 300 & " + hog + " 96 300 & " + hog + " 16 300 & wait"}),
                   "three children");
}

// The busiest process's CPU time, not the sum: a rank that did the work of all is told from
// ranks that each did their share by its own count.
TEST(ProcessWatchTest, TheCpuTimeOfTheBusiestProcess) {
  const std::string hog = Hog();
  const SandboxResult r =
      RunCommand({"/bin/sh", "-c", hog + " 4 0 200 & " + hog + " 4 0 900 & " + hog + " 4 0 300 & wait"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The last sample can come up to 20 ms before the busiest one ends.
  EXPECT_GE(r.peak_cpu_seconds, 0.85) << "the busiest child used 0.9 s";
  EXPECT_LT(r.peak_cpu_seconds, 1.2) << "not the busiest child's alone (the three used 1.4 s)";
  const SandboxResult idle = RunCommand({hog, "4", "500"});
  ASSERT_EQ(idle.exit_code, 0) << idle.output;
  EXPECT_GE(idle.peak_cpu_seconds, 0);
  EXPECT_LT(idle.peak_cpu_seconds, 0.3) << "a process that sleeps 0.5 s";
  EXPECT_EQ(CpuSecondsOf(999999999), -1);
  EXPECT_GT(CpuSecondsOf(getpid()), 0);
}

// A process whose first thread ends at once while a second does the work (pthread_exit in main;
// a student's own __libc_start_main can do the same before main): its memory and CPU time are
// still its own, read through the live thread.
TEST(ProcessWatchTest, AProcessWhoseFirstThreadEndedIsStillCounted) {
  const SandboxResult r = RunCommand({Hog(), "96", "300", "900", "leader_exits"});
  ExpectAbout96MiB(r, "a process whose first thread ended");
  EXPECT_GE(r.peak_cpu_seconds, 0.85) << "its second thread used 0.9 s";
  EXPECT_LT(r.peak_cpu_seconds, 1.3);
}

// Mapped files (a program's libraries) are not its own memory: a hog that reads 64 MiB of a
// mapped file holds its 16 MiB.
TEST(ProcessWatchTest, MappedFilesAreNotCounted) {
  const std::string file = ::testing::TempDir() + "mapped_64mib";
  {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    const std::vector<char> mib(kMiB, 'x');
    for (int i = 0; i < 64; ++i) ASSERT_EQ(std::fwrite(mib.data(), 1, mib.size(), f), mib.size());
    std::fclose(f);
  }
  const SandboxResult r = RunCommand({Hog(), "16", "300", "0", "maps=" + file});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(r.peak_memory_bytes, 16 * kMiB);
  EXPECT_LT(r.peak_memory_bytes, 16 * kMiB + 24 * kMiB) << "the 64 MiB file it mapped and read counted";
  std::remove(file.c_str());
}

// A command that ended at once reads as not measured, never as a made-up number.
TEST(ProcessWatchTest, NothingMeasuredIsMinusOneOrTheProgramsOwn) {
  const SandboxResult r = RunCommand({"/bin/true"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_TRUE(r.peak_memory_bytes == -1 || r.peak_memory_bytes < 16 * kMiB) << r.peak_memory_bytes;
  EXPECT_EQ(OwnMemoryPeakOf(999999999), -1);
  EXPECT_GT(OwnMemoryPeakOf(getpid()), 0);
}

void NeedControlGroups() {
  const RunCgroup probe;
  if (!probe.made()) GTEST_SKIP() << "SKIPPED (no control group for a run here): " << probe.why_not();
}

// The whole run: the CPU time of every process it ever had, summed, and the memory they held at
// once. Forty processes that each live 20 ms, less than the watch's sampling interval, are all
// in it.
TEST(RunControlGroupTest, CountsEveryProcessTheRunEverHad) {
  NeedControlGroups();
  const std::string hog = Hog();
  const SandboxResult r = RunCommand(
      {"/bin/sh", "-c", hog + " 32 400 300 & " + hog + " 64 400 300 & wait; for i in $(seq 40); do " + hog + " 1 0 20; done"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(r.run_cpu_seconds, 1.3) << "two of 0.3 s and forty of 0.02 s";
  EXPECT_LT(r.run_cpu_seconds, 2.2);
  EXPECT_GE(r.run_memory_bytes, 90 * kMiB) << "32 and 64 MiB held at once";
  EXPECT_LT(r.run_memory_bytes, 96 * kMiB + 32 * kMiB);
  EXPECT_LT(r.peak_cpu_seconds, 0.5) << "the per-process watch sees the busiest process alone";
  EXPECT_TRUE(r.accounting_note.empty()) << r.accounting_note;
}

TEST(RunControlGroupTest, AProcessWhoseFirstThreadEndedAndThatLeftTheTreeIsInIt) {
  NeedControlGroups();
  const SandboxResult r = RunCommand({"/bin/bash", "-c", "(" + Hog() + " 96 300 900 leader_exits &); sleep 1.6"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GE(r.run_cpu_seconds, 0.85);
  EXPECT_GE(r.run_memory_bytes, 90 * kMiB);
}

class JailedProcessWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    probe_ = ProbeIsolation();
    if (probe_.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe_.why_not_user;
    // The student's user must be able to execute the hog: a copy in /tmp.
    dir_ = MakeTempDir("distlm_process_watch", "/tmp");
    chmod(dir_.c_str(), 0755);
    hog_ = dir_ + "/memory_hog";
    std::filesystem::copy_file(Hog(), hog_);
    chmod(hog_.c_str(), 0755);
  }
  void TearDown() override {
    if (!dir_.empty()) RemoveTree(dir_);
  }
  JailSpec Spec(Isolation level) const {
    JailSpec spec;
    spec.level = level;
    spec.user = probe_.user;
    spec.binds = {{dir_, dir_, true}};  // a full jail's /tmp is its own
    spec.max_processes = 64;
    spec.env = {{"HOME", dir_}, {"TMPDIR", "/tmp"}};
    return spec;
  }

  IsolationProbe probe_;
  std::string dir_, hog_;
};

// A process that left the command's tree (its parent ended, so it was handed to the machine's
// init) is still the student's: counted by its user.
TEST_F(JailedProcessWatchTest, AProcessThatLeftTheTreeIsCountedByItsUser) {
  for (Isolation level : {Isolation::kUser, Isolation::kFull}) {
    if (level == Isolation::kFull && probe_.best != Isolation::kFull) continue;
    PreparedJail jail(Spec(level));
    ExpectAbout96MiB(RunCommand({"/bin/bash", "-c", "(" + hog_ + " 96 800 &); sleep 1.2"}, &jail), IsolationName(level));
  }
}

// A full jail starts with two forks of the grader that execute nothing (the PID namespace's
// waiting parent and its init): they share the grader's pages, here 256 MiB more than a small
// command holds, and must not be taken for the command's.
TEST_F(JailedProcessWatchTest, TheGradersOwnForksAreNotCounted) {
  if (probe_.best != Isolation::kFull) GTEST_SKIP() << "SKIPPED (no namespaces here): " << probe_.why_not_full;
  std::vector<char> ballast(256 * kMiB);
  std::memset(ballast.data(), 1, ballast.size());
  PreparedJail jail(Spec(Isolation::kFull));
  const SandboxResult r = RunCommand({hog_, "4", "400"}, &jail);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_GT(r.peak_memory_bytes, 4 * kMiB);
  EXPECT_LT(r.peak_memory_bytes, 64 * kMiB) << "the grader's " << ballast.size() / kMiB << " MiB were counted";
}

}  // namespace
}  // namespace distlm::grading
