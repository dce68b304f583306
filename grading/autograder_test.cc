// The autograder end to end, with the stages' real binaries standing in for the build (the
// test seam; the kit + Bazel path is autograde_build_test, whose reference zip scores full
// marks on BERT, every test passed): the reference solutions score full marks on the ViT, the
// untouched stubs zero, every wrong synchronisation loses the points it
// should with a message that names the mistake, failures (hang, crash, memory, mismatched
// collectives) are messages, and the command writes Gradescope's results.json.
#include "common/stages/stages.h"
#include "grading/autograder.h"
#include "grading/mutation_testing.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"

namespace distlm::grading {
namespace {

namespace fs = std::filesystem;

using ::distlm::testing::ReadFileOrEmpty;
using ::distlm::testing::WriteFileMakingDirs;
using testing_support::Binary;
using testing_support::Config;
using testing_support::Find;
using testing_support::GradeMutant;
using testing_support::Grader;
using testing_support::kParity;
using testing_support::Mutation;
using testing_support::MutationSuite;
using testing_support::SubmissionFrom;

// The tests of a grading of every stage: each row's build and run, and the tests it names.
size_t TestsOfEveryStage() {
  size_t n = 0;
  for (const auto& st : stages::All()) n += 2 + st.grading.tests.size();
  return n;
}

// Every stage's reference solution, as a submission and as its prebuilt binary.
GradeReport GradeReferences(Autograder& grader) {
  GradeRequest req;
  std::vector<std::string> ids;
  for (const auto& st : stages::All()) {
    ids.push_back(st.id);
    req.prebuilt[st.id] = {Binary(st.id, "reference"), {}};
  }
  req.submission = SubmissionFrom("reference", ids);
  GradeReport r = grader.Grade(req);
  std::printf("%s\n", r.Summary().c_str());
  return r;
}

TEST(AutograderTest, UntouchedStubsScoreZeroAndSaySo) {
  GradeRequest req;
  std::vector<std::string> ids;
  for (const auto& st : stages::All()) {
    ids.push_back(st.id);
    req.prebuilt[st.id] = {Binary(st.id, "student"), {}};
  }
  req.submission = SubmissionFrom("student", ids);
  GradeReport r = Grader().Grade(req);
  std::printf("%s\n", r.Summary().c_str());
  EXPECT_EQ(r.score(), 0);
  // Every stage trains with the submitted part 1 (a stub here): its Backward is the first stub
  // a run reaches, except in task 3, whose DDP is built before training starts.
  const std::map<std::string, std::string> todo = {{"part1", "your part1 Backward still calls StudentTodo"},
                                                   {"task2a", "your part1 Backward still calls StudentTodo"},
                                                   {"task2b", "your part1 Backward still calls StudentTodo"},
                                                   {"task3", "your task3b BucketedDdp (constructor) still calls StudentTodo"},
                                                   {"task5", "your part1 Backward still calls StudentTodo"},
                                                   // the split model's forward reaches task 7's linears first
                                                   {"task7", "your task7 ColumnParallelLinear still calls StudentTodo"}};
  for (const auto& [id, message] : todo) {
    const stages::Row* st = stages::Find(id);
    const int ranks = st->RunRanks(4);
    const TestResult& run =
        Find(r, id + ": runs 5 updates on " + (ranks > 1 ? std::to_string(ranks) + " ranks" : "one process"));
    EXPECT_FALSE(run.passed);
    EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("see docs/handout/"), std::string::npos) << run.output;
    EXPECT_NE(Find(r, id + kParity).output.find("not checked: the run did not complete"), std::string::npos);
  }
  EXPECT_NE(Find(r, "task3: a parameter without a gradient is named in an error").output.find("not checked"),
            std::string::npos);
}

// The mistakes any gradient synchronisation can make (grading/mutant_stage, the grader's own
// known mistakes), graded as task 2b: 8 + 2 points. The stages' own mistakes are graded by
// their <stage>/grading:mutation_suite, linked into this test.
constexpr char kTask2b[] = "task2b";
using MutationTest = MutationSuite<kTask2b>;

TEST_P(MutationTest, LosesItsPointsWithAMessageThatNamesTheMistake) {
  Scores().push_back(GradeMutant("task2b", "allreduce", 10, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, MutationTest,
    ::testing::Values(
        Mutation{"none", 8, 2, {"match the grader's single-node run", "each rank's share, at 512 tokens a sequence"}},
        Mutation{"no_sync", 0, 0, {"never synchronise their gradients"}},
        Mutation{"sum_without_average", 0, 2, {"summed but not divided by the world size", "divide the sum by 4"}},
        // Half the gradients cross the network: the grader's own count says so, and the
        // all_reduce it does call earns nothing.
        Mutation{"some_params_only", 0, 0, {"only some of the parameters are synchronised", "the grader counted"}},
        Mutation{"rank0_keeps_own", 0, 2, {"rank 0 keeps its own gradient"}},
        Mutation{"sync_after_step", 0, 2, {"synchronise before the optimizer step, not after it"}},
        Mutation{"same_data", 0, 2, {"very first loss", "every rank reads the whole data set in the same order"}},
        // The forgeries: every rank trains the whole batch and pads the network, so the trace,
        // the weights and the byte count are right; what each rank held, or computed, is not.
        Mutation{"trains_alone", 0, 0, {"not credited: at 512 tokens", "ranks' shares more than the grader's largest rank"}},
        Mutation{"trains_alone_in_shares", 0, 0, {"not credited: at 512 tokens", "of CPU time (the kernel's count)"}},
        // The same, its first thread ended so that its own /proc entry shows nothing: counted
        // through its live thread all the same.
        Mutation{"trains_alone_hidden", 0, 0, {"not credited: at 512 tokens", "ranks' shares more than the grader's largest rank"}}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return info.param.name; });

struct Failure {
  std::string mutation;
  std::vector<std::string> says;  // in the "runs" test's output
};

class FailureTest : public ::testing::TestWithParam<Failure> {};

TEST_P(FailureTest, IsAMessageNotAGraderCrash) {
  const Failure& f = GetParam();
  // A short deadline, so the hang costs 30 s rather than 120.
  static Autograder* quick = new Autograder(Config(30, false));
  GradeRequest req;
  req.submission = SubmissionFrom("reference", {"task2b"});
  req.prebuilt["task2b"] = {testing::Runfile("grading/mutant_stage"), {"--mutation=" + f.mutation}};
  GradeReport r = quick->Grade(req);
  const TestResult& run = Find(r, "task2b: runs 5 updates on 4 ranks");
  EXPECT_FALSE(run.passed);
  EXPECT_EQ(r.score(), 0);
  for (const auto& s : f.says) EXPECT_NE(run.output.find(s), std::string::npos) << "want '" << s << "' in:\n" << run.output;
  std::printf("%s:\n%s\n", f.mutation.c_str(), run.output.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Failures, FailureTest,
    ::testing::Values(Failure{"hang", {"no progress within 30 s", "waiting in a collective the others never called"}},
                      Failure{"crash", {"SIGSEGV", "rank 1 was killed by signal 11"}},
                      Failure{"memory_hog", {"ran out of memory", "4.0 GiB"}},
                      Failure{"deadlock", {"collectives did not match"}}),
    [](const ::testing::TestParamInfo<Failure>& info) { return info.param.mutation; });

TEST(AutograderTest, AnEmptyOrUnreadableSubmissionIsGradedNotFatal) {
  GradeReport empty = Grader().Grade({testing::MakeTempDir("empty"), {}});
  EXPECT_EQ(empty.score(), 0);
  EXPECT_EQ(empty.max_score(), stages::TotalPoints("bert", /*with_optional=*/false));
  EXPECT_NE(Find(empty, "task3: builds").output.find("missing from the submission: task3/bucketed_ddp.cc"), std::string::npos);
  EXPECT_NE(Find(empty, "task3" + kParity).output.find("not run: the build step did not succeed"), std::string::npos);
  EXPECT_NE(Find(empty, "task3: no_sync: gradient accumulation sends each gradient once per update (3c)").output.find("not run: the build step did not succeed"), std::string::npos);
  EXPECT_NE(Find(empty, "part1: builds").output.find("missing from the submission: part1/train_step.cc"),
            std::string::npos);
  bool optional_note = false;
  for (const auto& n : empty.notes) optional_note = optional_note || n == "task5/ is optional and was not submitted: not graded";
  EXPECT_TRUE(optional_note) << empty.Summary();

  GradeReport gone = Grader().Grade({"/nonexistent/submission.zip", {}});
  EXPECT_EQ(gone.score(), 0);
  EXPECT_NE(Find(gone, "task2a: builds").output.find("the submission could not be read: the submission "
                                                     "/nonexistent/submission.zip does not exist"),
            std::string::npos);
}

// The same grader on the second model: every run, the grader's own included, trains the
// tiny ViT on images the grader writes. The students' files are the same, so the same tests
// must come out with the same points, and a mistake must be named as it is on BERT.
Autograder& VitGrader() {
  static Autograder* g = [] {
    GraderConfig c = Config(120, true);
    c.model_type = "vit";
    return new Autograder(c);
  }();
  return *g;
}

// The grader's own first loss, from a parity test's table ("    1             0.693147181  ...").
double FirstExpectedLoss(const TestResult& parity) {
  const size_t at = parity.output.find("\n    1 ");
  if (at == std::string::npos) return -1;
  return std::stod(parity.output.substr(at + 6));
}

TEST(AutograderVitTest, ReferenceSolutionsScoreFullMarksInTheSameTests) {
  GradeReport r = GradeReferences(VitGrader());
  EXPECT_EQ(r.max_score(), stages::TotalPoints("vit"));  // task 7 too: the ViT's heads and MLP split as BERT's
  EXPECT_EQ(r.score(), r.max_score());
  for (const auto& t : r.tests) EXPECT_TRUE(t.passed) << t.name << ":\n" << t.output;
  EXPECT_EQ(r.tests.size(), TestsOfEveryStage());
  // It trained the ViT: a random 10-class head starts near ln 10 = 2.303 (the tiny BERT's two
  // labels near ln 2 = 0.693).
  const double first = FirstExpectedLoss(Find(r, "task2b" + kParity));
  EXPECT_GT(first, 1.8) << Find(r, "task2b" + kParity).output;
  EXPECT_LT(first, 2.8) << Find(r, "task2b" + kParity).output;
  // Task 3's cap shrank with the model: several buckets to order and overlap, not one.
  const TestResult& buckets = Find(r, "task3: buckets in reverse order, closed at the cap (3b)");
  EXPECT_GE(std::atoi(buckets.output.c_str()), 3) << buckets.output;
  bool said = false;
  for (const auto& n : r.notes) said = said || n.find("trained the tiny ViT") != std::string::npos;
  EXPECT_TRUE(said) << r.Summary();
}

TEST(AutograderVitTest, AMistakeIsNamedAsOnBert) {
  GradeRequest req;
  req.submission = SubmissionFrom("reference", {"task2b"});
  req.prebuilt["task2b"] = {testing::Runfile("grading/mutant_stage"), {"--mutation=no_sync"}};
  GradeReport r = VitGrader().Grade(req);
  const TestResult& parity = Find(r, "task2b" + kParity);
  EXPECT_TRUE(Find(r, "task2b: runs 5 updates on 4 ranks").passed) << r.Summary();
  EXPECT_EQ(parity.score, 0) << parity.output;
  EXPECT_NE(parity.output.find("never synchronise their gradients"), std::string::npos) << parity.output;
  std::printf("ViT, no_sync: %s\n", parity.output.substr(0, parity.output.find('\n')).c_str());
}

TEST(AutograderVitTest, AnUnknownModelIsRefused) {
  GraderConfig c = Config(120, false);
  c.model_type = "resnet";
  try {
    Autograder g(c);
    ADD_FAILURE() << "--model_type=resnet was accepted";
  } catch (const GraderError& e) {
    EXPECT_STREQ(e.what(), "--model_type must be bert or vit, got 'resnet'");
  }
}

TEST(AutogradeCommandTest, WritesGradescopeResultsAndASummary) {
  const std::string dir = testing::MakeTempDir("cli");
  const std::string sub = SubmissionFrom("student", {"task2b"});
  WriteFileMakingDirs(sub + "/task2b/notes.txt", "extra\n");
  testing::Command c;
  c.argv = {testing::Runfile("grading/autograde"), "--submission=" + sub, "--results=" + dir + "/results.json",
            "--prebuilt=task2b=" + Binary("task2b", "student"), "--recognise_mistakes=false"};
  auto p = testing::Run(c, 120);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("distlm autograder: 0 / 75 points"), std::string::npos) << p.output;
  EXPECT_NE(p.output.find("ignored: task2b/notes.txt: not a student file"), std::string::npos) << p.output;
  nlohmann::json j = nlohmann::json::parse(ReadFileOrEmpty(dir + "/results.json"));
  EXPECT_EQ(j["score"], 0.0);
  ASSERT_TRUE(j["tests"].is_array());
  double max_total = 0;
  for (const auto& t : j["tests"]) {
    for (const char* key : {"name", "score", "max_score", "output"}) EXPECT_TRUE(t.contains(key)) << t.dump();
    max_total += t["max_score"].get<double>();
  }
  EXPECT_EQ(max_total, 75);
  EXPECT_NE(j["output"].get<std::string>().find("task2b/notes.txt"), std::string::npos);

  testing::Command bad;
  bad.argv = {testing::Runfile("grading/autograde"), "--submission=" + sub, "--results=" + dir + "/r.json",
              "--prebuilt=task9=/bin/true"};
  auto b = testing::Run(bad, 30);
  EXPECT_EQ(b.exit_code, 2);
  EXPECT_NE(b.output.find("error: --prebuilt: 'task9=/bin/true' is not STAGE=VALUE"), std::string::npos) << b.output;
}

// `bazel run //grading:autograde` from any folder: the caller's folder (BUILD_WORKING_DIRECTORY)
// is the grader's, not the runs'. One that no run could enter (gone, as any folder a jail does
// not hold is to a jailed rank) changes nothing.
TEST(AutogradeCommandTest, GradesTheSameFromAnyFolder) {
  const std::string dir = testing::MakeTempDir("cli_folder");
  const std::string sub = SubmissionFrom("reference", {"task2b"});
  testing::Command c;
  c.argv = {testing::Runfile("grading/autograde"), "--submission=" + sub, "--results=" + dir + "/results.json",
            "--prebuilt=task2b=" + Binary("task2b", "reference"), "--recognise_mistakes=false"};
  c.env = {{"BUILD_WORKING_DIRECTORY", dir + "/gone"}, {"BUILD_WORKSPACE_DIRECTORY", dir + "/gone"}};
  auto p = testing::Run(c, 300);
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("PASS     0/0   task2b: runs 5 updates on 4 ranks"), std::string::npos) << p.output;
  EXPECT_EQ(p.output.find("cannot enter"), std::string::npos) << p.output;
}

}  // namespace
}  // namespace distlm::grading
