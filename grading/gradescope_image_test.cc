// The autograder image (grading/gradescope/Dockerfile, debian:12): where a Docker daemon runs,
// builds it from the package and grades the reference solutions in it (full marks expected);
// where none does, says so and skips. Long where it runs (the image installs packages and
// builds the kit).
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/stages/stages.h"
#include "common/testing/subprocess.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

testing::ProcessResult Shell(const std::string& script, double timeout_s) {
  testing::Command c;
  c.argv = {"/bin/bash", "-c", "export PATH=/usr/local/bin:/usr/bin:/bin; " + script};
  return testing::Run(c, timeout_s);
}

TEST(GradescopeImageTest, BuildsFromDebian12AndGradesTheReferences) {
  const auto info = Shell("docker info", 60);
  if (info.exit_code != 0) {
    GTEST_SKIP() << "SKIPPED: no Docker daemon here (`docker info` exited " << info.exit_code
                 << "): the autograder image was not built or tested";
  }
  const std::string out = testing::MakeTempDir("image");
  testing::Command pack;
  pack.argv = {testing::Runfile("grading/gradescope_package"), "--out=" + out, "--source=" + testing::Checkout(),
               "--kit_revision="};
  auto p = testing::Run(pack, 300);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const std::string tag = "distlm-autograder-test";
  auto build = Shell("docker build -t " + tag + " '" + out + "/autograder' 2>&1", 3600);
  ASSERT_EQ(build.exit_code, 0) << build.output;

  const std::string sub = out + "/submission", results = out + "/results";
  for (const auto& st : stages::All()) {
    for (const auto& f : st.files) {
      testing::WriteFileMakingDirs(sub + "/" + st.id + "/" + f,
                                   testing::ReadFileOrEmpty(testing::Checkout() + "/" + st.id + "/reference/" + f));
    }
  }
  fs::create_directories(results);
  // The full jail needs namespaces: CAP_SYS_ADMIN, and no AppArmor profile that forbids mount.
  auto run = Shell("docker run --rm --cap-add=SYS_ADMIN --security-opt apparmor=unconfined -v '" + sub + "':/autograder/submission -v '" + results +
                       "':/autograder/results " + tag + " /autograder/run_autograder 2>&1",
                   3600);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const nlohmann::json r = nlohmann::json::parse(testing::ReadFileOrEmpty(results + "/results.json"));
  EXPECT_EQ(r["score"].get<double>(), stages::TotalPoints("bert")) << r.dump(1);  // every stage, the optional ones too
  std::printf("graded in the image in %.0f s\n", r["execution_time"].get<double>());
}

}  // namespace
}  // namespace distlm::grading
