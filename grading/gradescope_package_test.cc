// The Gradescope package (//grading:gradescope_package): what the zip holds (setup.sh and
// run_autograder at its root, executable; the kit; the compiled grader; no reference source,
// no grader source), and that the grader runs from the unpacked zip alone, outside Bazel,
// writing results.json with Gradescope's fields. Building the kit inside the package
// (setup.sh) and a grading with builds is the long end-to-end test (grading/gradescope/e2e_debootstrap.sh): not here.
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <libtorch_info.h>

#include "common/testing/subprocess.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

testing::ProcessResult Shell(const std::string& script, double timeout_s) {
  testing::Command c;
  c.argv = {"/bin/bash", "-c", script};
  return testing::Run(c, timeout_s);
}

TEST(GradescopePackageTest, HoldsTheKitAndTheCompiledGraderAndGradesFromTheZip) {
  ASSERT_FALSE(testing::Checkout().empty());
  const std::string out = testing::MakeTempDir("package");
  testing::Command pack;
  // The working tree: this test must see the package as the checkout is now.
  pack.argv = {testing::Runfile("grading/gradescope_package"), "--out=" + out, "--source=" + testing::Checkout(),
               "--kit_revision="};
  auto p = testing::Run(pack, 300);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const std::string zip = out + "/autograder.zip";
  ASSERT_TRUE(fs::exists(zip)) << p.output;

  auto listing = Shell("/usr/bin/unzip -Z1 '" + zip + "'", 60);
  ASSERT_EQ(listing.exit_code, 0) << listing.output;
  std::set<std::string> entries;
  std::istringstream lines(listing.output);
  for (std::string e; std::getline(lines, e);) entries.insert(e);
  for (const char* want : {"setup.sh", "run_autograder", "Dockerfile", "grader/autograde", "kit/WORKSPACE",
                           "kit/task3/student/bucketed_ddp.cc", "kit/task3/ddp.h",
                           "grader/autograde.runfiles/distlm/part1/reference",
                           "grader/autograde.runfiles/distlm/grading/mutant_stage",
                           "grader/autograde.runfiles/distlm/task5/grading/mutant_stage",
                           "grader/autograde.runfiles/distlm/task6/grading/mutant_stage",
                           "grader/autograde.runfiles/distlm/tools/launch",
                           "grader/autograde.runfiles/distlm/common/vision/make_sample_cifar10"}) {
    EXPECT_EQ(entries.count(want), 1u) << want << " missing from the zip";
  }
  for (const auto& e : entries) {
    const bool source = e.size() > 3 && (e.substr(e.size() - 3) == ".cc" || e.substr(e.size() - 2) == ".h");
    EXPECT_FALSE(source && e.find("/reference/") != std::string::npos) << "reference source in the zip: " << e;
    EXPECT_FALSE(source && e.rfind("grader/", 0) == 0) << "grader source in the zip: " << e;
    EXPECT_FALSE(e.rfind("kit/", 0) == 0 && e.find("grading/") != std::string::npos) << "a grading folder in the kit: " << e;
  }

  // Which LibTorch the grader is linked against, for setup.sh and run_autograder: Debian's, or
  // the wheel this build used (tools/torch_wheel.sh's folder is torch-VERSION/torch).
  const std::string env = testing::ReadFileOrEmpty(out + "/autograder/grader/libtorch.env");
  const std::string libtorch_source = DISTLM_LIBTORCH_SOURCE;
  std::string wheel;
  if (libtorch_source != "system") {
    const std::string folder = fs::path(DISTLM_LIBTORCH_ROOT).parent_path().filename().string();
    ASSERT_EQ(folder.rfind("torch-", 0), 0u) << "this build's LibTorch is not from tools/torch_wheel.sh: " << folder;
    wheel = folder.substr(6);
  }
  EXPECT_NE(env.find("\nDISTLM_TORCH_WHEEL=" + wheel + "\n"), std::string::npos)
      << "grader/libtorch.env should name " << (wheel.empty() ? "no wheel (Debian's LibTorch)" : "wheel " + wheel)
      << ":\n" << env;

  // Unpacked elsewhere, run_autograder grades with the package's own binaries (task 2b's build
  // stands in through the grader's test seam: no Bazel here).
  const std::string root = testing::MakeTempDir("unpacked");
  ASSERT_EQ(Shell("cd '" + root + "' && /usr/bin/unzip -q '" + zip + "'", 60).exit_code, 0);
  EXPECT_TRUE(access((root + "/run_autograder").c_str(), X_OK) == 0);
  EXPECT_TRUE(access((root + "/setup.sh").c_str(), X_OK) == 0);
  const std::string sub = testing::MakeTempDir("submission");
  testing::WriteFileMakingDirs(sub + "/task2b/grad_sync.cc", "// graded through --prebuilt: not compiled here\n");
  testing::Command grade;
  // Without this test's runfiles in the environment: the grader must find its binaries in the
  // package.
  grade.argv = {"/usr/bin/env", "-u", "TEST_SRCDIR", "-u", "RUNFILES_DIR", "-u", "RUNFILES_MANIFEST_FILE",
                root + "/run_autograder", "--prebuilt=task2b=" + testing::Runfile("task2b/reference"),
                "--recognise_mistakes=false"};
  grade.env = {{"DISTLM_SUBMISSION", sub}, {"DISTLM_RESULTS", out + "/results.json"}};
  // The wheel lives where this machine installed it, not in the image's /opt/distlm.
  if (!wheel.empty()) grade.env["DISTLM_LIBTORCH"] = DISTLM_LIBTORCH_ROOT;
  auto g = testing::Run(grade, 240);
  ASSERT_EQ(g.exit_code, 0) << g.output;
  const nlohmann::json r = nlohmann::json::parse(testing::ReadFileOrEmpty(out + "/results.json"));
  EXPECT_EQ(r["score"].get<double>(), 10) << r.dump(1);
  EXPECT_TRUE(r["execution_time"].is_number());
  EXPECT_EQ(r["visibility"], "visible");
  double max_total = 0;
  for (const auto& t : r["tests"]) {
    for (const char* key : {"name", "score", "max_score", "status", "output", "visibility"}) {
      EXPECT_TRUE(t.contains(key)) << key << " in " << t.dump();
    }
    max_total += t["max_score"].get<double>();
  }
  EXPECT_EQ(max_total, 75);
}

}  // namespace
}  // namespace distlm::grading
