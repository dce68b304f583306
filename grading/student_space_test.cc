// The grading's folders as student code sees them (grading/student_space.h): what the grader
// shares with the runs (the ViT's images, #23) can be read by every rank and changed by none,
// at either isolation level. Needs root, like grading/jail_test.cc; elsewhere it skips, saying so.
#include "grading/student_space.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"
#include "grading/sandbox.h"

namespace distlm::grading {
namespace {

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

TEST(StudentSpaceTest, SharedDataIsReadableAndReadOnlyForStudentCode) {
  const IsolationProbe probe = ProbeIsolation();
  if (probe.best == Isolation::kNone) GTEST_SKIP() << "SKIPPED (the jail needs root): " << probe.why_not_user;
  for (Isolation level : {Isolation::kUser, Isolation::kFull}) {
    if (level == Isolation::kFull && probe.best != Isolation::kFull) {
      std::printf("SKIPPED at level full (no namespaces here): %s\n", probe.why_not_full.c_str());
      continue;
    }
    // In /tmp, not the test's folder under root's home: the student's user must reach it.
    const std::string work = MakeTempDir("distlm_space_test", "/tmp");
    {
      GraderConfig config;
      config.isolation = level;
      StudentSpace space(config, work);
      space.Confine();
      const std::string data = space.SharedFolder("cifar10");
      const mode_t old_mask = ::umask(0077);  // files 0600, folders 0700: ShareReadOnly must open them up
      WriteFileMakingDirs(data + "/sub/data_batch_1.bin", "the grader's images\n");
      WriteFileMakingDirs(data + "/test_batch.bin", "held out\n");
      ::umask(old_mask);
      space.ShareReadOnly(data);

      const std::string run = space.StudentFolder("run");
      SandboxCommand c;
      c.argv = {"/bin/bash", "-c",
                "cat " + data + "/sub/data_batch_1.bin " + data + "/test_batch.bin; echo forged > " + data +
                    "/sub/data_batch_1.bin; touch " + data + "/new.bin; rm -f " + data + "/test_batch.bin; mv " + data +
                    " " + run + "/taken; echo done"};
      c.working_dir = run;
      SandboxLimits limits;
      limits.timeout_s = 20;
      limits.jail = space.run_jail();
      const SandboxResult r = RunSandboxed(c, limits);
      const std::string name = IsolationName(level);
      EXPECT_NE(r.output.find("the grader's images\nheld out\n"), std::string::npos)
          << name << ": student code must read the shared data: " << r.output;
      EXPECT_NE(r.output.find("done"), std::string::npos) << name << ": " << r.output;
      EXPECT_EQ(ReadFileOrEmpty(data + "/sub/data_batch_1.bin"), "the grader's images\n") << name << ": " << r.output;
      EXPECT_EQ(ReadFileOrEmpty(data + "/test_batch.bin"), "held out\n") << name << ": " << r.output;
      struct stat st {};
      EXPECT_NE(::stat((data + "/new.bin").c_str(), &st), 0) << name << ": student code added a file to the data";
      std::printf("level %s: shared data read, every change refused\n", name.c_str());
    }
    RemoveTree(work);
  }
}

}  // namespace
}  // namespace distlm::grading
