// What a submission writes can neither crash the grader nor buy points. Each mode of
// grading/forged_log_stage (a train_log.jsonl a hostile task 2b could write) is graded through
// the autograde command, as Gradescope runs it: results.json is always written and valid, the
// task scores nothing, and the message says why, quoting the submission's own words behind "|".
// A log copied from a correct single-node run (the numbers a replay would produce) passes the
// parity comparison but not the grader's count of what went over the network.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"
#include "grading/autograde_testing.h"
#include "grading/autograder.h"
#include "grading/text.h"

namespace distlm::grading {
namespace {

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::Runfile;
using ::distlm::testing::WriteFileMakingDirs;

constexpr uint64_t kSeed = 777;

// Task 2b's reference as the submitted file (so it "builds"), the forger as its binary.
Graded GradeForged(const std::string& stage, const std::string& binary, const std::string& flag) {
  const std::string sub = testing::MakeTempDir("forged");
  const stages::Row* st = stages::Find(stage);
  for (const auto& f : st->files) {
    WriteFileMakingDirs(sub + "/" + stage + "/" + f, ReadFileOrEmpty(Runfile(st->id + "/reference/" + f)));
  }
  return GradeWithCommand(sub, {"--prebuilt=" + stage + "=" + binary, "--prebuilt_flags=" + stage + "=" + flag,
                                "--recognise_mistakes=false", "--run_timeout_s=40", "--seed=" + std::to_string(kSeed)});
}

std::string TaskOutput(const Graded& g, const std::string& stage) {
  std::string s;
  for (const auto& t : g.results["tests"]) {
    if (t["name"].get<std::string>().rfind(stage + ": ", 0) == 0) s += t["output"].get<std::string>() + "\n";
  }
  return s;
}

double TaskScore(const Graded& g, const std::string& stage) {
  double s = 0;
  for (const auto& t : g.results["tests"]) {
    if (t["name"].get<std::string>().rfind(stage + ": ", 0) == 0) s += t["score"].get<double>();
  }
  return s;
}

void ExpectGraded(const Graded& g) {
  ASSERT_EQ(g.exit_code, 0) << g.output;
  ASSERT_TRUE(g.results.is_object()) << "results.json missing or not JSON:\n" << g.output;
  const std::string raw = ReadFileOrEmpty(g.results_dir + "/results.json");
  EXPECT_EQ(raw.find('\x1b'), std::string::npos);
  EXPECT_EQ(g.results["output_format"], "text");
}

struct Case {
  std::string mode;
  std::vector<std::string> says;
};

class ForgedLogTest : public ::testing::TestWithParam<Case> {};

TEST_P(ForgedLogTest, ScoresNothingWithAMessageAndResultsAreWritten) {
  const Case& c = GetParam();
  const Graded g = GradeForged("task2b", Runfile("grading/forged_log_stage"), "--forge=" + c.mode);
  ExpectGraded(g);
  const std::string out = TaskOutput(g, "task2b");
  EXPECT_EQ(TaskScore(g, "task2b"), 0) << out;
  for (const auto& s : c.says) EXPECT_NE(out.find(s), std::string::npos) << "want '" << s << "' in:\n" << out;
  std::printf("--forge=%s:\n%s\n", c.mode.c_str(), out.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ForgedLogTest,
    ::testing::Values(Case{"nan", {"your loss is not a number"}},
                      Case{"wrong_types", {"your loss is not a number", "has no record of its communication"}},
                      Case{"huge", {"the loss of update 1 is 1e+308"}},
                      Case{"deep", {"your loss is not a number"}},
                      Case{"not_objects", {"has lines that are not JSON objects", "    | [0.69, 1.5]"}},
                      Case{"invalid_utf8", {"has lines that are not JSON objects", "    | {\"loss\":0.69,\"note\":\"??\?(\"}"}},
                      Case{"duplicate", {"the loss of update 1 is 0.69,", "9.0000000"}},  // the last of each key
                      Case{"fifo", {"is not a regular file"}},
                      Case{"link_out", {"out is a symbolic link (the grader follows none)"}},
                      Case{"imitate", {"exited with code 3", "    | rank 0: error: distlm autograder: 95 / 95 points"}}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.mode; });

// Every line the submission printed is quoted: none of its imitations of the grader's verdict
// stands on a line of its own.
TEST(ForgedOutputTest, ImitationsOfTheGraderAreQuoted) {
  const Graded g = GradeForged("task2b", Runfile("grading/forged_log_stage"), "--forge=imitate");
  ExpectGraded(g);
  for (const auto& t : g.results["tests"]) {
    for (const std::string& line : Lines(t["output"].get<std::string>())) {
      if (line.find("95 / 95") != std::string::npos || line.find("PASS    8/8") != std::string::npos ||
          line.find("full marks") != std::string::npos) {
        EXPECT_EQ(line.rfind("    | ", 0), 0u) << "an unquoted line of the submission's: " << line;
      }
      EXPECT_EQ(line.find('\r'), std::string::npos) << line;
    }
  }
}

// An honest NaN from a real stage binary (part 1's reference with a learning rate that blows
// the weights up): logged as null, judged as "not a number", never a crash.
TEST(ForgedOutputTest, AnHonestNanIsAMessage) {
  const Graded g = GradeForged("part1", Runfile("part1/reference"), "--learning_rate=1e38");
  ExpectGraded(g);
  const std::string out = TaskOutput(g, "part1");
  EXPECT_EQ(TaskScore(g, "part1"), 0) << out;
  EXPECT_NE(out.find("your loss is not a number"), std::string::npos) << out;
}

// The replay's product: a log that is the grader's own single-node trace for this seed, copied
// by a binary that sends nothing, graded as `stage`. Its numbers match; the network says no
// synchronisation ran. Empty output when the traffic cannot be counted here (skipped, said).
std::string ReplayedPart1As(const std::string& stage) {
  const std::string out_dir = testing::MakeTempDir("replayed");
  testing::Command c;
  c.argv = {Runfile("part1/reference")};
  for (const auto& f : Autograder::RunFlags(1, "bert", "", kSeed)) c.argv.push_back(f);
  c.argv.push_back("--output_dir=" + out_dir);
  auto p = testing::Run(c, 120);
  EXPECT_EQ(p.exit_code, 0) << p.output;
  const Graded g = GradeForged(stage, Runfile("grading/forged_log_stage"), "--forge=copy:" + out_dir + "/train_log.jsonl");
  ExpectGraded(g);
  const std::string out = TaskOutput(g, stage);
  EXPECT_EQ(TaskScore(g, stage), 0) << out;
  EXPECT_NE(out.find("the grader counted 0.0 MB sent over the ranks' network"), std::string::npos) << out;
  EXPECT_NE(out.find("is not credited"), std::string::npos) << out;
  // Without the count the numbers alone would have passed: the trace table shows no difference.
  EXPECT_NE(out.find("+0.0e+00"), std::string::npos) << out;
  return out;
}

TEST(ForgedOutputTest, APerfectTraceWithoutTrafficIsNotCredited) {
  if (ProbeIsolation().best != Isolation::kFull) {
    GTEST_SKIP() << "SKIPPED: the runs' traffic is counted in a network namespace of their own (root with "
                    "namespaces)";
  }
  ReplayedPart1As("task2b");
}

// Task 7's collectives carry activations, with no closed form of task 4's: a run is held to the
// bytes the grader's own reference sent on the same layout. Part 1's trace handed in as task 7's
// (what a rank 0 training the whole batch alone would log) sends nothing.
TEST(ForgedOutputTest, APerfectTask7TraceWithoutTrafficIsNotCredited) {
  if (ProbeIsolation().best != Isolation::kFull) {
    GTEST_SKIP() << "SKIPPED: the runs' traffic is counted in a network namespace of their own (root with "
                    "namespaces)";
  }
  const std::string out = ReplayedPart1As("task7");
  EXPECT_NE(out.find("but its own run of the same layout sent"), std::string::npos) << out;
}

// Whatever escapes the grading (an exception of any type) still ends in a results.json that
// says the grader failed, with exit 1.
TEST(ForgedOutputTest, AnythingThatEscapesStillWritesResults) {
  for (const char* fault : {"exception", "other"}) {
    const std::string sub = testing::MakeTempDir("fault");
    const std::string results = testing::MakeTempDir("fault_results");
    testing::Command c;
    c.argv = {Runfile("grading/autograde"), "--submission=" + sub, "--results=" + results + "/results.json",
              "--unsafe_no_sandbox", "--source=" + testing::Checkout()};
    c.env["DISTLM_AUTOGRADE_FAULT"] = fault;
    const auto p = testing::Run(c, 60);
    EXPECT_EQ(p.exit_code, 1) << fault << ": " << p.output;
    const nlohmann::json r = nlohmann::json::parse(ReadFileOrEmpty(results + "/results.json"), nullptr, false);
    ASSERT_TRUE(r.is_object()) << fault << ": no results.json\n" << p.output;
    EXPECT_EQ(r["score"], 0);
    EXPECT_NE(r["output"].get<std::string>().find("grader error (not your fault"), std::string::npos) << r.dump();
  }
}

}  // namespace
}  // namespace distlm::grading
