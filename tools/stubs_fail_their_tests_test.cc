// The kit's stubs cannot pass: each stage's local test (//STAGE:student_test, built on the
// stubs) fails naming the stub, and each stage's :student binary, asked to train one update,
// stops with the stub's TODO(student) line. Together with //STAGE:reference_student_test
// (the same tests passing on the reference), this shows the local tests tell a right answer
// from an unwritten one, and that nothing else in the kit trains in the stubs' place.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "common/testing/subprocess.h"

namespace distlm::tools {
namespace {

using ::distlm::testing::Command;
using ::distlm::testing::ProcessResult;
using ::distlm::testing::Runfile;

class StageStubTest : public ::testing::TestWithParam<std::string> {};

// Every stage's folder (common/stages/stages.h; the BUILD takes the binaries from stages.bzl).
std::vector<std::string> StageFolders() {
  std::vector<std::string> folders;
  for (const auto& s : stages::All()) folders.push_back(s.id);
  return folders;
}

INSTANTIATE_TEST_SUITE_P(Stages, StageStubTest, ::testing::ValuesIn(StageFolders()));

TEST_P(StageStubTest, LocalTestFailsWithTheStubsMessage) {
  Command c;
  c.argv = {Runfile(GetParam() + "/student_test")};
  c.env = {{"GTEST_COLOR", "no"}};
  ProcessResult r = testing::Run(c, 120);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.exit_code, 0) << GetParam() << ":student_test passed on the stubs:\n" << r.output;
  EXPECT_NE(r.output.find("TODO(student)"), std::string::npos)
      << GetParam() << ":student_test failed without naming the stub:\n"
      << r.output;
}

TEST_P(StageStubTest, StudentBinaryCannotTrainOneUpdate) {
  const std::string out = testing::MakeTempDir("stub_run");
  Command c;
  c.argv = {Runfile(GetParam() + "/student"), "--max_steps=1", "--world_size=1", "--output_dir=" + out + "/run",
            "--num_threads=1"};
  ProcessResult r = testing::Run(c, 120);
  if (r.output.find("trains 2 or more workers") != std::string::npos) {
    // A stage of workers (task 8) says so before any student code runs: two of them, launched.
    c.argv = {Runfile("tools/launch"), "--nproc_per_node=2", "--", Runfile(GetParam() + "/student"), "--max_steps=1",
              "--output_dir=" + out + "/run2", "--num_threads=1"};
    r = testing::Run(c, 120);
  }
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("TODO(student)"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace distlm::tools
