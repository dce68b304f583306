// The autograder's real path, with no test seam: a fresh student kit of this checkout (or of a
// copy of it elsewhere), the submission copied in, `bazel build` in it (its own output base, the
// user's disk cache), the runs, the results; student code jailed as on Gradescope where this runs
// as root. Minutes.
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"
#include "common/stages/stages.h"
#include "grading/autograde_testing.h"
#include "grading/jail/sandbox.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

std::string Ref(const std::string& id) {
  const stages::Row* st = stages::Find(id);
  return ReadFileOrEmpty(testing::Checkout() + "/" + st->id + "/reference/" + st->files[0]);
}

// Grades `submission` through the command; returns results.json.
nlohmann::json Grade(const std::string& submission, std::string* output, const std::vector<std::string>& flags = {}) {
  Graded g = GradeWithCommand(submission, flags);
  *output = g.output;
  EXPECT_EQ(g.exit_code, 0) << g.output;
  return g.results;
}

// A copy of this checkout's files (not Bazel's links, not .git) in a fresh folder under `parent`.
std::string CopyOfCheckoutUnder(const std::string& parent) {
  const std::string copy = MakeTempDir("distlm_checkout", parent);
  const fs::path from = testing::Checkout();
  for (fs::recursive_directory_iterator it(from), end; it != end; ++it) {
    const fs::path rel = it->path().lexically_relative(from);
    const std::string top = rel.begin()->string();
    if (top == ".git" || top.rfind("bazel-", 0) == 0) {
      if (it->is_directory() && !it->is_symlink()) it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink()) {
      fs::copy_symlink(it->path(), copy / rel);
    } else if (it->is_directory()) {
      fs::create_directories(copy / rel);
    } else {
      fs::copy_file(it->path(), copy / rel);
    }
  }
  return copy;
}

// Graded from a copy of the checkout under /tmp (the kit made from it, the submission built and
// run in the jail): where the grader's sources lie changes nothing. DISTLM_CHECKOUT_COPY_PARENT
// puts the copy elsewhere (--test_env=DISTLM_CHECKOUT_COPY_PARENT=/srv, or a home folder).
TEST(AutogradeBuildTest, TheReferenceZipBuiltOnACleanKitScoresFullMarks) {
  ASSERT_FALSE(testing::Checkout().empty());
  const char* parent = std::getenv("DISTLM_CHECKOUT_COPY_PARENT");
  const std::string source = CopyOfCheckoutUnder(parent != nullptr && *parent != '\0' ? parent : "/tmp");
  const std::string dir = testing::MakeTempDir("refsub");
  for (const auto& st : stages::All()) {
    for (const auto& f : st.files) WriteFileMakingDirs(dir + "/tree/" + st.id + "/" + f, ReadFileOrEmpty(testing::Checkout() + "/" + st.id + "/reference/" + f));
  }
  testing::Command zip;
  zip.argv = {"/bin/sh", "-c", "cd '" + dir + "/tree' && /usr/bin/zip -qr ../submission.zip ."};
  ASSERT_EQ(testing::Run(zip, 60).exit_code, 0);
  std::string out;
  // Overlap is not timed: a verdict read from a clock is the grader's benchmark
  // (tools/overlap_margin.sh grades this same path with it timed), not a check a busy host may fail.
  nlohmann::json r = Grade(dir + "/submission.zip", &out, {"--source=" + source, "--time_overlap=false"});
  RemoveTree(source);
  const std::string overlap = Named(r, "task3: bucket all-reduces start while backward runs (3b)")["output"];
  EXPECT_NE(overlap.find("not judged by time"), std::string::npos) << overlap;
  // Every stage was submitted, optional ones included: full marks are every test's points.
  double full = 0;
  for (const auto& t : r["tests"]) full += t["max_score"].get<double>();
  EXPECT_EQ(full, stages::TotalPoints("bert")) << "every stage's tests, as common/stages/stages.bzl states them";
  EXPECT_EQ(r["score"], full) << out;
  // Every test passed, those of no points too (the builds, the runs, what is told for feedback).
  size_t tests = 0;
  for (const auto& st : stages::All()) tests += 2 + st.grading.tests.size();  // + builds, runs
  EXPECT_EQ(r["tests"].size(), tests);
  for (const auto& t : r["tests"]) EXPECT_EQ(t["status"], "passed") << t["name"] << ":\n" << t["output"];
  for (const auto& st : stages::All()) {
    EXPECT_NE(Named(r, st.id + ": builds")["output"].get<std::string>().find("on a clean student kit"), std::string::npos);
  }
}

TEST(AutogradeBuildTest, ACompileErrorASumWithoutAverageAndAStub) {
  ASSERT_FALSE(testing::Checkout().empty());
  const std::string dir = testing::MakeTempDir("mixed");
  WriteFileMakingDirs(dir + "/task2a/grad_sync.cc", Ref("task2a") + "\nint this_does_not_compile = ;\n");
  std::string sum = Ref("task2b");
  const std::string divide = "div_(pg.getSize())";
  ASSERT_NE(sum.find(divide), std::string::npos) << "the task2b reference changed; update this mutation";
  sum.replace(sum.find(divide), divide.size(), "div_(1)");
  WriteFileMakingDirs(dir + "/task2b/grad_sync.cc", sum);
  const stages::Row* t3 = stages::Find("task3");
  for (const auto& f : t3->files) WriteFileMakingDirs(dir + "/task3/" + f, ReadFileOrEmpty(testing::Checkout() + "/task3/student/" + f));
  std::string out;
  nlohmann::json r = Grade(dir, &out, {"--recognise_mistakes=false"});
  const std::string build2a = Named(r, "task2a: builds")["output"];
  EXPECT_NE(build2a.find("does not compile"), std::string::npos) << build2a;
  EXPECT_NE(build2a.find("task2a/student/grad_sync.cc:"), std::string::npos) << build2a;
  EXPECT_NE(build2a.find("this_does_not_compile"), std::string::npos) << build2a;
  EXPECT_EQ(build2a.find("linux-sandbox"), std::string::npos) << "Bazel's command lines are noise:\n" << build2a;
  const nlohmann::json& parity2b = Named(r, "task2b: losses and gradient norms match the single-node run");
  EXPECT_EQ(parity2b["score"], 0.0);
  EXPECT_NE(parity2b["output"].get<std::string>().find("summed but not divided by the world size"), std::string::npos)
      << parity2b["output"];
  EXPECT_EQ(Named(r, "task2b: uses allreduce")["score"], 2.0);
  EXPECT_NE(Named(r, "task3: runs 5 updates on 4 ranks")["output"].get<std::string>().find("still calls StudentTodo"),
            std::string::npos);
  EXPECT_EQ(r["score"], 2.0);
}

}  // namespace
}  // namespace distlm::grading
