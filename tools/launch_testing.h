// What the launcher's tests share (launch_test.cc: what a run gives its ranks and relays;
// launch_stop_test.cc: how ranks are stopped): the ranks are //tools:launch_testee (and
// /bin/sh), the launcher is either Launch() in this process or the //tools:launch binary.
// Every process a scenario starts is checked to be gone afterwards, by the pids the ranks
// wrote to files.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/testing/subprocess.h"
#include "tools/launcher.h"

namespace distlm::tools::launch_testing {

using distlm::testing::Command;
using distlm::testing::ProcessResult;
using Clock = std::chrono::steady_clock;

inline std::string Testee() { return distlm::testing::Runfile("tools/launch_testee"); }
inline std::string LaunchBinary() { return distlm::testing::Runfile("tools/launch"); }

inline double SecondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Launch() in this process with the ranks' output captured in files.
struct Captured {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

inline Captured LaunchCaptured(LaunchOptions options) {
  std::string dir = distlm::testing::MakeTempDir("capture");
  int out = open((dir + "/out").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = open((dir + "/err").c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  options.out_fd = out;
  options.err_fd = err;
  Captured c;
  auto start = Clock::now();
  c.code = Launch(options);
  c.seconds = SecondsSince(start);
  close(out);
  close(err);
  c.out = ReadFile(dir + "/out");
  c.err = ReadFile(dir + "/err");
  return c;
}

// The launcher binary, as a user runs it.
inline ProcessResult RunLauncher(const std::vector<std::string>& args, double timeout_s,
                                 const std::map<std::string, std::string>& env = {}) {
  Command c{{LaunchBinary()}, env};
  c.argv.insert(c.argv.end(), args.begin(), args.end());
  return distlm::testing::Run(c, timeout_s);
}

// Alive and not a zombie: a rank whose launcher died is reparented and may linger as a zombie
// until its new parent reaps it, which kill(pid, 0) alone would count as alive.
inline bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  char state = text[paren + 2];
  return state != 'Z' && state != 'X';
}

inline bool GoneWithin(pid_t pid, double seconds) {
  auto start = Clock::now();
  while (Alive(pid)) {
    if (SecondsSince(start) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// The pids rank r of a `launch_testee run DIR` scenario wrote: the rank and its child.
inline std::vector<pid_t> PidsOf(const std::string& dir, int rank) {
  std::string path = dir + "/rank_" + std::to_string(rank) + ".pid";
  if (!PathExists(path)) return {};
  std::istringstream in(ReadFile(path));
  int rank_pid = 0, child_pid = 0;
  in >> rank_pid >> child_pid;
  return {rank_pid, child_pid};
}

// Every process the listed ranks started is gone (within a moment, for the reparented ones).
inline void ExpectAllGone(const std::string& dir, const std::vector<int>& ranks) {
  for (int r : ranks) {
    std::vector<pid_t> pids = PidsOf(dir, r);
    ASSERT_EQ(pids.size(), 2u) << "rank " << r << " wrote no pid file in " << dir;
    EXPECT_TRUE(GoneWithin(pids[0], 3)) << "rank " << r << " (pid " << pids[0] << ") is still running";
    EXPECT_TRUE(GoneWithin(pids[1], 3)) << "rank " << r << "'s child (pid " << pids[1] << ") is still running";
  }
}

// Signal signo reached the child of each listed rank: it went to the rank's process group.
inline void ExpectChildrenGot(const std::string& dir, const std::vector<int>& ranks, int signo) {
  for (int r : ranks) {
    EXPECT_TRUE(PathExists(dir + "/rank_" + std::to_string(r) + ".child_got_" + std::to_string(signo)))
        << "signal " << signo << " did not reach rank " << r << "'s child";
  }
}

// A launch_testee `run DIR` scenario on nproc ranks, with its key=value settings.
inline LaunchOptions RunScenario(int nproc, const std::string& dir, const std::vector<std::string>& keys) {
  LaunchOptions o;
  o.nproc_per_node = nproc;
  o.command = {Testee(), "run", dir};
  o.command.insert(o.command.end(), keys.begin(), keys.end());
  return o;
}

}  // namespace distlm::tools::launch_testing
