// Test helpers: run real processes with a bounded time, pick free loopback ports, and find the
// reference data in ../shared/reference.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace distlm::testing {

struct Command {
  std::vector<std::string> argv;             // argv[0] is a path
  std::map<std::string, std::string> env;    // added to (or replacing in) the parent's environment
};

struct ProcessResult {
  int exit_code = -1;       // the exit status, or 128 + signal number
  bool timed_out = false;   // killed because the deadline passed
  std::string output;       // stdout and stderr, interleaved
};

// Starts every command at once, each in its own process group, and waits for all of them. At
// the deadline, the ones still running are killed (SIGKILL to their group) and marked timed_out.
std::vector<ProcessResult> RunAll(const std::vector<Command>& commands, double timeout_s);

// One command.
ProcessResult Run(const Command& command, double timeout_s);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
int FreePort();

// This binary's path (/proc/self/exe), for tests that re-execute themselves as workers.
std::string SelfPath();

// ../shared/reference beside the checkout, or $DISTLM_SHARED_DIR/reference; nullopt when it is
// absent. Tests that need it call SKIP_WITHOUT_REFERENCE().
std::optional<std::string> SharedReferenceDir();

// $DISTLM_PEERS_DIR: what tools/peers/make_dumps.sh wrote (transformers dumps, BertTokenizerFast
// features); nullopt when unset. The tests that read it skip, saying so, without it.
std::optional<std::string> PeersDir();

// Path of a runfile (workspace-relative, e.g. "common/testdata/vocab.txt").
std::string Runfile(const std::string& workspace_relative);

// The checkout the test was built from, for the tests that read it where it is (tagged
// "external"): the folder of the WORKSPACE runfile's target; "" when it cannot be resolved.
std::string Checkout();

// A file's bytes; "" when it cannot be read (the test then fails on the content it expects).
std::string ReadFileOrEmpty(const std::string& path);

// Writes `bytes` to `path`, creating the folders on the way.
void WriteFileMakingDirs(const std::string& path, const std::string& bytes);

// A fresh empty directory under the test's temporary directory.
std::string MakeTempDir(const std::string& prefix);

}  // namespace distlm::testing

// Skips the current GoogleTest test, loudly, when ../shared/reference is not there.
#define SKIP_WITHOUT_REFERENCE(dir_var)                                                      \
  auto dir_var##_opt = ::distlm::testing::SharedReferenceDir();                             \
  if (!dir_var##_opt) {                                                                      \
    GTEST_SKIP() << "SKIPPED: ../shared/reference is absent (set DISTLM_SHARED_DIR to the " \
                    "folder holding reference/); this parity check did not run";             \
  }                                                                                          \
  const std::string dir_var = *dir_var##_opt
