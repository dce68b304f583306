// launch --no_spawn: every way a rank could start a process or run another program, or leave a
// key or message queue for a later run, is refused (tools/no_spawn.h), threads still start, and the same program under plain `launch` shows
// that each way works when unfiltered, so the refusals are the filter's doing.
#include <string>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"

namespace {

using distlm::testing::Command;
using distlm::testing::Run;
using distlm::testing::Runfile;

std::string Launch(bool no_spawn, int ranks) {
  Command c;
  c.argv = {Runfile("tools/launch"), "--nproc_per_node=" + std::to_string(ranks), "--timeout_s=60"};
  if (no_spawn) c.argv.push_back("--no_spawn");
  c.argv.insert(c.argv.end(), {"--", Runfile("tools/no_spawn_testee")});
  auto r = Run(c, 90);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(NoSpawnTest, RanksCanStartThreadsButNoProcessNoProgramAndNoLastingKernelObject) {
  const std::string out = Launch(true, 2);
  for (const char* refused : {"fork: Operation not permitted", "vfork: Operation not permitted",
                              "clone: Operation not permitted", "clone3: Function not implemented",
                              "posix_spawn: Operation not permitted", "system: ",
                              "process_vm_readv: Operation not permitted", "execveat: Operation not permitted",
                              "add_key: Operation not permitted", "keyctl: Operation not permitted",
                              "mq_open: Operation not permitted",
                              "execve: Operation not permitted", "thread: ran", "done"}) {
    for (const char* rank : {"[rank 0] ", "[rank 1] "}) {
      EXPECT_EQ(Count(out, std::string(rank) + refused), 1u) << "want '" << rank << refused << "' in:\n" << out;
    }
  }
  EXPECT_EQ(out.find("ALLOWED"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

TEST(NoSpawnTest, WithoutTheFilterEveryWayWorks) {
  const std::string out = Launch(false, 1);
  for (const char* allowed : {"fork: ALLOWED", "vfork: ALLOWED", "clone: ALLOWED", "clone3: ALLOWED",
                              "posix_spawn: ALLOWED", "system: ALLOWED", "thread: ran", "process_vm_readv: ALLOWED",
                              "mq_open: ALLOWED"}) {
    EXPECT_NE(out.find(allowed), std::string::npos) << "want '" << allowed << "' in:\n" << out;
  }
  // Container runtimes' default seccomp profiles (Docker's among them) refuse the key calls
  // themselves; there the refusal under --no_spawn above is not shown to be the filter's.
  for (const char* key_call : {"add_key", "keyctl"}) {
    if (out.find(std::string(key_call) + ": ALLOWED") == std::string::npos) {
      std::printf("NOTE: this machine refuses %s without the filter (a container's own policy?), so "
                  "the test cannot show that the filter is what refuses it:\n%s", key_call, out.c_str());
    }
  }
  // execveat replaced the program with /bin/true, which ends it without a word.
  EXPECT_EQ(out.find("done"), std::string::npos) << out;
}

}  // namespace
