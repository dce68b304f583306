// The launcher with real processes, running them: the environment and port each rank gets,
// commands found on PATH, output lines whole and in order (and teed), bad input as one-line
// errors, and paths under `bazel run`. How ranks are stopped is launch_stop_test.cc; both use
// tools/launch_testing.h.
#include "tools/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"
#include "tools/launch_testing.h"

namespace distlm::tools {
namespace {

using launch_testing::Captured;
using launch_testing::Contains;
using launch_testing::LaunchCaptured;
using launch_testing::ProcessResult;
using launch_testing::RunLauncher;
using launch_testing::SplitLines;
using launch_testing::Testee;

// ---- Environment and port ---------------------------------------------------------------------

// Rank r's "RANK=..." line; the port is returned separately since the launcher picks it.
void CheckEnvLines(const std::string& out, int world, int expected_port) {
  std::vector<std::string> lines = SplitLines(out);
  int port = -1;
  for (int r = 0; r < world; ++r) {
    std::string prefix = "[rank " + std::to_string(r) + "] RANK=" + std::to_string(r) +
                         " LOCAL_RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) +
                         " LOCAL_WORLD_SIZE=" + std::to_string(world) +
                         " GROUP_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=";
    int found = 0;
    for (const std::string& line : lines) {
      if (line.rfind(prefix, 0) != 0) continue;
      ++found;
      int rank_port = std::stoi(line.substr(prefix.size()));
      if (port < 0) port = rank_port;
      EXPECT_EQ(rank_port, port) << "ranks were given different ports:\n" << out;
    }
    EXPECT_EQ(found, 1) << "rank " << r << ":\n" << out;
  }
  EXPECT_GT(port, 0);
  EXPECT_LE(port, 65535);
  if (expected_port > 0) {
    EXPECT_EQ(port, expected_port);
  }
  // Rank 0 could listen on the port while every rank was running: it was free, as a TCPStore
  // needs it to be.
  EXPECT_NE(std::find(lines.begin(), lines.end(), "[rank 0] listen=ok"), lines.end()) << out;
}

TEST(LaunchTest, TwoRanksGetTorchrunVariablesAndOneFreePort) {
  // The launcher's values replace whatever the parent had.
  setenv("RANK", "7", 1);
  setenv("WORLD_SIZE", "9", 1);
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {Testee(), "env"};
  Captured c = LaunchCaptured(o);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  EXPECT_EQ(c.code, 0) << c.err;
  CheckEnvLines(c.out, 2, /*expected_port=*/0);
}

TEST(LaunchTest, APortInUseIsNeverPicked) {
  // Hold the port a first launch picked: a second launch must pick another one, which its
  // rank 0 can listen on. (A fixed default port would fail here.)
  LaunchOptions o;
  o.command = {Testee(), "env"};
  Captured first = LaunchCaptured(o);
  ASSERT_EQ(first.code, 0) << first.err;
  int port = std::stoi(first.out.substr(first.out.find("MASTER_PORT=") + 12));
  int holder = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << "port " << port;
  ASSERT_EQ(listen(holder, 1), 0);
  Captured second = LaunchCaptured(o);
  close(holder);
  EXPECT_EQ(second.code, 0) << second.err;
  EXPECT_FALSE(Contains(second.out, "MASTER_PORT=" + std::to_string(port) + "\n")) << second.out;
  EXPECT_TRUE(Contains(second.out, "[rank 0] listen=ok\n")) << second.out;
}

TEST(LaunchTest, FourRanksThroughTheBinaryWithAGivenPort) {
  int port = distlm::testing::FreePort();
  ProcessResult r = RunLauncher(
      {"--nproc_per_node=4", "--master_port=" + std::to_string(port), "--", Testee(), "env"}, 20);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  CheckEnvLines(r.output, 4, port);
}

TEST(LaunchTest, GlooRanksRendezvousOnTheLaunchersVariables) {
  // What the launcher is for: c10d's TCPStore on the picked port, then a Gloo all-reduce.
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.timeout_s = 40;  // a broken rendezvous fails here, not at the test's deadline
  o.command = {distlm::testing::Runfile("tools/launch_gloo_testee")};
  Captured c = LaunchCaptured(o);
  EXPECT_EQ(c.code, 0) << c.out << c.err;
  EXPECT_TRUE(Contains(c.out, "[rank 0] allreduce ok\n")) << c.out << c.err;
  EXPECT_TRUE(Contains(c.out, "[rank 1] allreduce ok\n")) << c.out << c.err;
}

TEST(LaunchTest, CommandsAreFoundOnPathAndKeepTheEnvironment) {
  setenv("DISTLM_LAUNCH_TEST_MARK", "kept", 1);
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {"sh", "-c", "echo \"$RANK of $WORLD_SIZE $DISTLM_LAUNCH_TEST_MARK\"; echo oops >&2"};
  Captured c = LaunchCaptured(o);
  unsetenv("DISTLM_LAUNCH_TEST_MARK");
  EXPECT_EQ(c.code, 0) << c.err;
  std::vector<std::string> out = SplitLines(c.out);
  std::sort(out.begin(), out.end());
  EXPECT_EQ(out, (std::vector<std::string>{"[rank 0] 0 of 2 kept", "[rank 1] 1 of 2 kept"}));
  // stderr lines go to err_fd, prefixed the same way.
  EXPECT_TRUE(Contains(c.err, "[rank 0] oops\n")) << c.err;
  EXPECT_TRUE(Contains(c.err, "[rank 1] oops\n")) << c.err;
  EXPECT_FALSE(Contains(c.out, "oops"));
}

// ---- Output ------------------------------------------------------------------------------------

std::string ExpectedLines(int rank, int n) {
  std::string text;
  for (int i = 0; i < n; ++i) {
    text += "rank " + std::to_string(rank) + " line " + std::to_string(i) + " " + std::string(i % 97, 'x') + "\n";
  }
  return text;
}

TEST(LaunchTest, LinesAreWholeInOrderPrefixedAndTeed) {
  constexpr int kLines = 1000;
  std::string tee = distlm::testing::MakeTempDir("tee");
  ProcessResult r = RunLauncher({"--nproc_per_node=2", "--tee=" + tee, "--", Testee(), "lines", "1000"}, 20);
  ASSERT_FALSE(r.timed_out) << r.output.substr(0, 2000);
  ASSERT_EQ(r.exit_code, 0) << r.output.substr(0, 2000);

  // Every line of the merged output is one of: the launcher's banner, or a whole line of one
  // rank with that rank's prefix. A line cut by another rank's output would match neither.
  std::map<int, std::vector<std::string>> stdout_lines;
  std::map<int, int> stderr_lines;
  for (const std::string& line : SplitLines(r.output)) {
    if (line.rfind("launch: started 2 rank(s)", 0) == 0) continue;
    bool known = false;
    for (int rank = 0; rank < 2; ++rank) {
      std::string prefix = "[rank " + std::to_string(rank) + "] ";
      if (line.rfind(prefix, 0) != 0) continue;
      std::string body = line.substr(prefix.size());
      if (body == "rank " + std::to_string(rank) + " to stderr") {
        ++stderr_lines[rank];
      } else {
        stdout_lines[rank].push_back(body);
      }
      known = true;
    }
    EXPECT_TRUE(known) << "unexpected line: '" << line.substr(0, 200) << "'";
  }
  for (int rank = 0; rank < 2; ++rank) {
    // All 1000 lines, in order, then the last line that had no '\n', flushed at exit.
    std::vector<std::string> expected = SplitLines(ExpectedLines(rank, kLines));
    expected.push_back("rank " + std::to_string(rank) + " tail");
    EXPECT_EQ(stdout_lines[rank], expected) << "rank " << rank;
    EXPECT_EQ(stderr_lines[rank], 1) << "rank " << rank;

    // The tee file holds the rank's own lines, unprefixed: stdout's, with stderr's line at
    // whatever point it was read.
    std::string log = ReadFile(tee + "/rank_" + std::to_string(rank) + ".log");
    std::string err_line = "rank " + std::to_string(rank) + " to stderr\n";
    auto at = log.find(err_line);
    ASSERT_NE(at, std::string::npos) << "rank " << rank;
    log.erase(at, err_line.size());
    EXPECT_EQ(log, ExpectedLines(rank, kLines) + "rank " + std::to_string(rank) + " tail\n");
  }
}

TEST(LaunchTest, OverlongLinesAreCutAtTheLimit) {
  LaunchOptions o;
  o.command = {Testee(), "long", std::to_string(2 * kMaxLineBytes + 100)};
  Captured c = LaunchCaptured(o);
  EXPECT_EQ(c.code, 0) << c.err;
  std::vector<std::string> lines = SplitLines(c.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "[rank 0] " + std::string(kMaxLineBytes, 'a'));
  EXPECT_EQ(lines[1], "[rank 0] " + std::string(kMaxLineBytes, 'a'));
  EXPECT_EQ(lines[2], "[rank 0] " + std::string(100, 'a'));
}

// ---- Bad input ---------------------------------------------------------------------------------

// Exit 2 and exactly one line, "error: ...", containing every one of needles.
void ExpectOneLineError(const ProcessResult& r, const std::vector<std::string>& needles) {
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  std::vector<std::string> lines = SplitLines(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_EQ(lines[0].rfind("error: ", 0), 0u) << r.output;
  for (const std::string& n : needles) EXPECT_TRUE(Contains(lines[0], n)) << lines[0] << " lacks " << n;
}

TEST(LaunchTest, AMissingBinaryIsAOneLineError) {
  ExpectOneLineError(RunLauncher({"--nproc_per_node=2", "--", "/nonexistent/distlm_rank", "--x"}, 20),
                     {"/nonexistent/distlm_rank", "No such file"});
  ExpectOneLineError(RunLauncher({"--", "distlm_no_such_command"}, 20), {"distlm_no_such_command", "PATH"});
  EXPECT_THROW(ResolveExecutable("/", ""), UserError);  // a directory
  std::string dir = distlm::testing::MakeTempDir("exec");
  WriteFileAtomically(dir + "/data.txt", "not a program\n");
  try {
    ResolveExecutable(dir + "/data.txt", "");
    FAIL() << "a file without the x bit was accepted";
  } catch (const UserError& e) {
    EXPECT_TRUE(Contains(e.what(), "not executable")) << e.what();
  }
}

TEST(LaunchTest, AFileThatCannotBeExecutedIsAOneLineError) {
  // Executable bits but no valid format (no ELF header, no #!): execve fails with ENOEXEC,
  // which the child reports back before the launcher goes on.
  std::string dir = distlm::testing::MakeTempDir("exec");
  std::string junk = dir + "/junk";
  WriteFileAtomically(junk, std::string("\x7f\x01\x02\x03", 4));
  chmod(junk.c_str(), 0755);
  LaunchOptions o;
  o.nproc_per_node = 2;
  o.command = {junk};
  try {
    Launch(o);
    FAIL() << "launched a file that is not a program";
  } catch (const UserError& e) {
    EXPECT_TRUE(Contains(e.what(), "cannot execute " + junk + ": Exec format error")) << e.what();
  }
}

TEST(LaunchTest, FlagsAreValidatedWithOneLineErrors) {
  ExpectOneLineError(RunLauncher({"--nproc_per_node=0", "--", Testee(), "env"}, 20), {"--nproc_per_node=0"});
  ExpectOneLineError(RunLauncher({"--nproc_per_node=2", Testee(), "env"}, 20), {"before '--'", "usage"});
  ExpectOneLineError(RunLauncher({"--nproc_per_node=2"}, 20), {"no '--'"});
  ExpectOneLineError(RunLauncher({"--nproc_per_node=2", "--"}, 20), {"no command"});

  auto error_of = [](const LaunchOptions& o) -> std::string {
    try {
      ValidateOptions(o);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  };
  LaunchOptions good;
  good.command = {"x"};
  EXPECT_EQ(error_of(good), "");
  LaunchOptions o = good;
  o.nproc_per_node = 257;
  EXPECT_TRUE(Contains(error_of(o), "--nproc_per_node=257"));
  o = good;
  o.master_port = 65536;
  EXPECT_TRUE(Contains(error_of(o), "--master_port=65536"));
  o = good;
  o.master_port = -1;
  EXPECT_TRUE(Contains(error_of(o), "--master_port=-1"));
  o = good;
  o.timeout_s = -1;
  EXPECT_TRUE(Contains(error_of(o), "--timeout_s=-1"));
  o = good;
  o.grace_s = std::nan("");
  EXPECT_TRUE(Contains(error_of(o), "--grace_s=nan"));
  o = good;
  o.master_addr = "";
  EXPECT_TRUE(Contains(error_of(o), "--master_addr"));
  o = good;
  o.join_ranks = {1};
  EXPECT_TRUE(Contains(error_of(o), "--join_ranks: rank 1 is not one of ranks 0..0")) << error_of(o);
  o.nproc_per_node = 3;
  o.join_ranks = {2, 2};
  EXPECT_TRUE(Contains(error_of(o), "--join_ranks: rank 2 is listed twice")) << error_of(o);
  ExpectOneLineError(RunLauncher({"--nproc_per_node=2", "--join_ranks=x", "--", Testee(), "env"}, 20),
                     {"--join_ranks: 'x' is not a rank number"});
  // An address that is not this machine's cannot host the port the launcher would pick.
  try {
    PickFreePort("192.0.2.1");  // TEST-NET-1, never local
    FAIL() << "picked a port on a foreign address";
  } catch (const UserError& e) {
    EXPECT_TRUE(Contains(e.what(), "--master_addr=192.0.2.1")) << e.what();
  }
}

// ---- bazel run -------------------------------------------------------------------------------

TEST(LaunchTest, RelativePathsAreTheUsersUnderBazelRun) {
  // `bazel run` starts the launcher in the runfiles tree and names the user's directory in
  // BUILD_WORKING_DIRECTORY: a relative binary, --tee and the ranks' directory follow it.
  std::string user_dir = distlm::testing::MakeTempDir("user");
  char resolved[4096];
  ASSERT_NE(realpath(user_dir.c_str(), resolved), nullptr);
  user_dir = resolved;
  ASSERT_EQ(symlink(Testee().c_str(), (user_dir + "/my_rank").c_str()), 0);
  ProcessResult r = RunLauncher({"--nproc_per_node=2", "--tee=logs", "--", "./my_rank", "env"}, 20,
                                {{"BUILD_WORKING_DIRECTORY", user_dir}});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "[rank 0] cwd=" + user_dir + "\n")) << r.output;
  EXPECT_TRUE(Contains(r.output, "[rank 1] cwd=" + user_dir + "\n")) << r.output;
  EXPECT_TRUE(Contains(ReadFile(user_dir + "/logs/rank_1.log"), "RANK=1 "));
}

}  // namespace
}  // namespace distlm::tools
