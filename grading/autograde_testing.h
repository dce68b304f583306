// For the tests that grade through the autograde command on the real path (a kit of this
// checkout, a nested Bazel build, the runs): one grading, its results.json, a test by name.
#pragma once

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"
#include "grading/jail/sandbox.h"

namespace distlm::grading {

// The disk cache of the user running the tests (Bazel gives tests a HOME of their own): the
// kit's libraries come from it, as they come from setup.sh's build on Gradescope.
inline std::string UsersDiskCache() {
  const passwd* pw = getpwuid(getuid());
  return pw == nullptr ? "" : std::string(pw->pw_dir) + "/.cache/distlm/bazel-disk";
}

// The strongest jail this machine gives: --sandbox=full as root with namespaces (CI, the
// Gradescope image), --sandbox=user as root without them (a plain container), and
// --unsafe_no_sandbox when not root, so the real path is tested wherever the tests run.
inline std::string SandboxFlag() {
  switch (ProbeIsolation().best) {
    case Isolation::kFull: return "--sandbox=full";
    case Isolation::kUser: return "--sandbox=user";
    case Isolation::kNone: break;
  }
  std::printf("autograde_testing: no jail here (not root): grading with --unsafe_no_sandbox\n");
  return "--unsafe_no_sandbox";
}

struct Graded {
  int exit_code = -1;
  std::string output;      // the command's
  std::string results_dir; // holds results.json
  nlohmann::json results;  // null when results.json is not JSON
};

// Grades `submission` through //grading:autograde with the working tree as the kit's source.
inline Graded GradeWithCommand(const std::string& submission, const std::vector<std::string>& flags,
                               const std::string& results_dir = testing::MakeTempDir("results")) {
  Graded g;
  g.results_dir = results_dir;
  testing::Command c;
  const std::string sandbox = SandboxFlag();
  // Without namespaces the student's user must reach its folder by itself: not under root's home.
  const std::string work = sandbox == "--sandbox=user" ? "/tmp" : testing::MakeTempDir("work");
  // mkdtemp's 0700 would stop the student's user on its way to the kit wherever no cover of the
  // jail hides this folder's parents (a HOME that is not root's passwd home: every build then
  // failed with "cannot enter .../student/kit: Permission denied").
  if (work != "/tmp") chmod(work.c_str(), 0711);
  c.argv = {testing::Runfile("grading/autograde"), "--submission=" + submission,
            "--results=" + results_dir + "/results.json", "--source=" + testing::Checkout(), "--kit_revision=",
            "--work_dir=" + work, "--disk_cache=" + UsersDiskCache(), sandbox};
  c.argv.insert(c.argv.end(), flags.begin(), flags.end());
  auto p = testing::Run(c, 3600);
  g.exit_code = p.exit_code;
  g.output = p.output;
  std::printf("%s\n", p.output.c_str());
  g.results = nlohmann::json::parse(testing::ReadFileOrEmpty(results_dir + "/results.json"), nullptr, false);
  return g;
}

// The test called `name` in results.json (a failure, and a stand-in, when there is none).
inline const nlohmann::json& Named(const nlohmann::json& results, const std::string& name) {
  if (results.is_object() && results.contains("tests")) {
    for (const auto& t : results["tests"]) {
      if (t["name"] == name) return t;
    }
  }
  static const nlohmann::json none = {{"score", -1}, {"output", "(no such test)"}};
  ADD_FAILURE() << "no test " << name;
  return none;
}

}  // namespace distlm::grading
