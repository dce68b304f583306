// The launcher's warning for a binary older than its package's sources, on a folder laid out
// like a workspace and its bazel-out tree, with modification times set by the test.
#include "tools/stale_binary.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace distlm::tools {
namespace {

namespace fs = std::filesystem;

class StaleBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") / "stale_binary_test";
    fs::remove_all(root_);
    ws_ = root_ / "ws";
    Touch(ws_ / "WORKSPACE");
    Touch(ws_ / "task2b" / "BUILD");
    Touch(ws_ / "task2b" / "reference" / "grad_sync.cc");
    binary_ = root_ / "execroot" / "bazel-out" / "k8-opt" / "bin" / "task2b" / "reference";
    Touch(binary_);
    // bazel-bin is a link into bazel-out, as in a real checkout.
    fs::create_directory_symlink(root_ / "execroot" / "bazel-out" / "k8-opt" / "bin", ws_ / "bazel-bin");
  }
  static void Touch(const fs::path& p) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << "x";
  }
  static void Age(const fs::path& p, int seconds) {
    fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::seconds(seconds));
  }
  fs::path root_, ws_, binary_;
};

TEST_F(StaleBinaryTest, ASourceEditedAfterTheBuildIsNamed) {
  Age(ws_ / "task2b" / "BUILD", 100);
  Age(binary_, 50);  // built after BUILD, before grad_sync.cc (now)
  auto warning = StaleBinaryWarning((ws_ / "bazel-bin" / "task2b" / "reference").string(), ws_.string());
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("task2b/reference/grad_sync.cc"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("bazel build //task2b:reference"), std::string::npos) << *warning;
}

TEST_F(StaleBinaryTest, AFreshBuildGivesNoWarning) {
  Age(ws_ / "task2b" / "BUILD", 100);
  Age(ws_ / "task2b" / "reference" / "grad_sync.cc", 100);
  EXPECT_FALSE(StaleBinaryWarning((ws_ / "bazel-bin" / "task2b" / "reference").string(), ws_.string()));
}

TEST_F(StaleBinaryTest, HiddenFilesAndOtherBinariesAreIgnored) {
  Age(ws_ / "task2b" / "BUILD", 100);
  Age(ws_ / "task2b" / "reference" / "grad_sync.cc", 100);
  Touch(ws_ / "task2b" / ".swap");  // an editor's file, newer than the binary
  Age(binary_, 50);
  EXPECT_FALSE(StaleBinaryWarning(binary_.string(), ws_.string()));
  Touch(root_ / "elsewhere" / "tool");  // not in a bazel-out tree
  EXPECT_FALSE(StaleBinaryWarning((root_ / "elsewhere" / "tool").string(), ws_.string()));
  EXPECT_FALSE(StaleBinaryWarning(binary_.string(), ""));
}

TEST_F(StaleBinaryTest, TheWorkspaceIsFoundAboveTheStart) {
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
  EXPECT_EQ(FindWorkspace((ws_ / "task2b" / "reference").string()), ws_.string());
  Touch(root_ / "t.runfiles" / "distlm" / "WORKSPACE");  // a test's runfiles: not the user's workspace
  EXPECT_EQ(FindWorkspace((root_ / "t.runfiles" / "distlm").string()), "");
  setenv("BUILD_WORKSPACE_DIRECTORY", "/somewhere", 1);  // bazel run's word wins
  EXPECT_EQ(FindWorkspace((ws_ / "task2b").string()), "/somewhere");
  unsetenv("BUILD_WORKSPACE_DIRECTORY");
}

}  // namespace
}  // namespace distlm::tools
