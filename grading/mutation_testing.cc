#include "grading/mutation_testing.h"

#include <cstdio>

#include "common/testing/subprocess.h"

namespace distlm::grading::testing_support {

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;

// `side` ("reference" or "student") folders of the given stages, in the handout's layout.
std::string SubmissionFrom(const std::string& side, const std::vector<std::string>& ids) {
  std::string dir = testing::MakeTempDir("submission");
  for (const auto& id : ids) {
    const stages::Row* st = stages::Find(id);
    for (const auto& f : st->files) {
      WriteFileMakingDirs(dir + "/" + id + "/" + f, ReadFileOrEmpty(testing::Runfile(id + "/" + side + "/" + f)));
    }
  }
  return dir;
}

std::string Binary(const std::string& id, const std::string& side) {
  return testing::Runfile(id + "/" + side);
}

GraderConfig Config(double run_timeout_s, bool recognise) {
  GraderConfig c;
  c.ranks = 4;
  c.run_timeout_s = run_timeout_s;
  c.recognise_mistakes = recognise;
  c.seed = 20261127;  // fixed, so one grader's traces serve the whole suite (a grading draws its own)
  c.progress = [](const std::string& line) { std::fprintf(stderr, "autograde: %s\n", line.c_str()); };
  return c;
}

Autograder& Grader() {
  static Autograder* g = new Autograder(Config(120, true));
  return *g;
}

const TestResult& Find(const GradeReport& r, const std::string& name) {
  for (const auto& t : r.tests) {
    if (t.name == name) return t;
  }
  static TestResult none{"(missing)", 0, 0, false, ""};
  ADD_FAILURE() << "no test named '" << name << "' in:\n" << r.Summary();
  return none;
}

std::string GradeMutant(const std::string& stage, const std::string& comm_test, int max, const Mutation& m,
                        const std::string& mutant) {
  GradeRequest req;
  req.submission = SubmissionFrom("reference", {stage});
  req.prebuilt[stage] = {testing::Runfile(mutant), {"--mutation=" + m.name}};
  GradeReport r = Grader().Grade(req);
  const TestResult& parity = Find(r, stage + kParity);
  const TestResult& comm = Find(r, stage + ": uses " + comm_test);
  EXPECT_TRUE(Find(r, stage + ": runs 5 updates on 4 ranks").passed) << r.Summary();
  EXPECT_EQ(parity.score, m.parity) << parity.output;
  EXPECT_EQ(comm.score, m.comm) << comm.output;
  for (const auto& s : m.says) EXPECT_NE(parity.output.find(s), std::string::npos) << "want '" << s << "' in:\n" << parity.output;
  // Only `stage` was submitted: part 1 scores nothing, the other tasks say they are missing.
  EXPECT_NE(Find(r, "task3: builds").output.find("missing from the submission: task3/bucketed_ddp.cc"), std::string::npos);
  EXPECT_EQ(r.score(), m.parity + m.comm);
  std::printf("%s: %s %g/%d\n%s\n%s\n", m.name.c_str(), stage.c_str(), r.score(), max, parity.output.c_str(),
              comm.output.c_str());
  return m.name + ": " + stage + " " + std::to_string(static_cast<int>(r.score())) + "/" + std::to_string(max) +
         " -- " + parity.output.substr(0, std::min<size_t>(parity.output.find('\n'), 160));
}

// The grader declines to time overlap where it cannot limit the link or where its own two runs
// come out too close on this host (overlap_check.h): it then credits the test and says so. A timed
// expectation cannot be checked on such a host; the suite says that loudly instead of failing.
bool NotJudgedByTime(const TestResult& t) { return t.output.find("overlap not judged") != std::string::npos; }

void GradeOwnMutant(const std::string& stage, const std::string& mutant, const std::string& flag,
                    const std::map<std::string, std::string>& failing, double score, int max,
                    bool time_overlap) {
  GradeRequest req;
  req.submission = SubmissionFrom("reference", {stage});
  req.prebuilt[stage] = {testing::Runfile(mutant), {flag}};
  req.time_overlap = time_overlap;
  GradeReport r = Grader().Grade(req);
  double kept = 0;
  for (const auto& t : r.tests) {
    if (t.name.rfind(stage + ":", 0) != 0) continue;
    auto f = failing.find(t.name);
    if (f != failing.end() && t.passed && NotJudgedByTime(t)) {
      std::printf("NOT CHECKED on this host (%s): %s should fail, and the grader did not time it: %s", flag.c_str(),
                  t.name.c_str(), t.output.c_str());
      continue;  // its points are not counted either way
    }
    kept += t.score;
    if (f == failing.end()) {
      EXPECT_TRUE(t.passed) << flag << ": " << t.name << " should pass:\n" << t.output;
    } else {
      EXPECT_FALSE(t.passed) << flag << ": " << t.name << " should fail:\n" << t.output;
      EXPECT_NE(t.output.find(f->second), std::string::npos) << flag << ": want '" << f->second << "' in " << t.name
                                                             << ":\n" << t.output;
    }
  }
  for (const auto& [name, says] : failing) Find(r, name);
  EXPECT_EQ(kept, score) << flag << ":\n" << r.Summary();
  std::printf("%s: %s %g/%d\n%s\n", flag.c_str(), stage.c_str(), kept, max, r.Summary().c_str());
}

}  // namespace distlm::grading::testing_support
