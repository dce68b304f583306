// The autograder end to end, with the stages' real binaries standing in for the build (the
// test seam; the kit + Bazel path is autograde_build_test, manual): the reference solutions
// score full marks, the untouched stubs zero, every wrong synchronisation loses the points it
// should with a message that names the mistake, failures (hang, crash, memory, mismatched
// collectives) are messages, and the command writes Gradescope's results.json.
#include "grading/autograder.h"

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

// `side` ("reference" or "student") folders of the given stages, in the handout's layout.
std::string SubmissionFrom(const std::string& side, const std::vector<std::string>& ids) {
  std::string dir = testing::MakeTempDir("submission");
  for (const auto& id : ids) {
    const stages::Stage* st = stages::Find(id);
    for (const auto& f : st->files) WriteFileMakingDirs(dir + "/" + id + "/" + f, ReadFileOrEmpty(testing::Runfile(st->package + "/" + side + "/" + f)));
  }
  return dir;
}

std::string Binary(const std::string& id, const std::string& side) {
  return testing::Runfile(stages::Find(id)->package + "/" + side);
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

// One grader for the whole suite: its single-node trace and known mistakes are made once.
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

const std::string kParity = ": losses and gradient norms match the single-node run";

// The tests of a grading of every stage: part1, task2a, task2b, task3 (3 + 6 DDP tests), task5,
// task6 (4 + prefetch and overlap), on either model.
constexpr size_t kTestsOfEveryStage = 3 + 4 + 4 + 9 + 4 + 6;

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

TEST(AutograderTest, ReferenceSolutionsScoreFullMarks) {
  GradeReport r = GradeReferences(Grader());
  EXPECT_EQ(r.score(), r.max_score());
  EXPECT_EQ(r.max_score(), 115);  // 75, and 20 each for the optional tasks 5 and 6
  for (const auto& t : r.tests) EXPECT_TRUE(t.passed) << t.name << ":\n" << t.output;
  EXPECT_EQ(r.tests.size(), kTestsOfEveryStage);
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
                                                   {"task5", "your part1 Backward still calls StudentTodo"}};
  for (const auto& [id, message] : todo) {
    const stages::Stage* st = stages::Find(id);
    const TestResult& run = Find(r, id + ": runs 5 updates on " + (st->grading.ranks > 1 ? "4 ranks" : "one process"));
    EXPECT_FALSE(run.passed);
    EXPECT_NE(run.output.find(message), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("see docs/handout/"), std::string::npos) << run.output;
    EXPECT_NE(Find(r, id + kParity).output.find("not checked: the run did not complete"), std::string::npos);
  }
  EXPECT_NE(Find(r, "task3: a parameter without a gradient is named in an error").output.find("not checked"),
            std::string::npos);
}

struct Mutation {
  std::string name;
  int parity;   // points the stage keeps for parity
  int comm;     // and for using its collectives
  std::vector<std::string> says;  // in the parity message
};

// Grades `mutant` (grading/mutant_stage, or a stage's own) --mutation=<m.name> as a submission
// of `stage` alone (the other tasks missing) and checks the points each of its two tests keeps
// and what the parity test says. Returns the line the suites print at their end.
std::string GradeMutant(const std::string& stage, const std::string& comm_test, int max, const Mutation& m,
                        const std::string& mutant = "grading/mutant_stage") {
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

// A suite of mutations graded as one stage; prints what each scored at its end.
template <const char* kStage>
class MutationSuite : public ::testing::TestWithParam<Mutation> {
 protected:
  static std::vector<std::string>& Scores() {
    static std::vector<std::string> s;
    return s;
  }
  static void TearDownTestSuite() {
    std::printf("\nwhat each mutation of %s scored:\n", kStage);
    for (const auto& s : Scores()) std::printf("  %s\n", s.c_str());
  }
};

constexpr char kTask2a[] = "task2a", kTask2b[] = "task2b", kTask5[] = "task5";
using MutationTest = MutationSuite<kTask2b>;            // task 2b: 8 + 2 points
using GatherScatterMutationTest = MutationSuite<kTask2a>;  // task 2a's own mistakes: 12 + 3
using ZeroMutationTest = MutationSuite<kTask5>;         // task 5: 16 + 4

TEST_P(MutationTest, LosesItsPointsWithAMessageThatNamesTheMistake) {
  Scores().push_back(GradeMutant("task2b", "allreduce", 10, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, MutationTest,
    ::testing::Values(
        Mutation{"none", 8, 2, {"match the grader's single-node run"}},
        Mutation{"no_sync", 0, 0, {"never synchronise their gradients"}},
        Mutation{"sum_without_average", 0, 2, {"summed but not divided by the world size", "divide the sum by 4"}},
        // Half the gradients cross the network: the grader's own count says so, and the
        // all_reduce it does call earns nothing.
        Mutation{"some_params_only", 0, 0, {"only some of the parameters are synchronised", "the grader counted"}},
        Mutation{"rank0_keeps_own", 0, 2, {"rank 0 keeps its own gradient"}},
        Mutation{"sync_after_step", 0, 2, {"synchronise before the optimizer step, not after it"}},
        Mutation{"same_data", 0, 2, {"very first loss", "every rank reads the whole data set in the same order"}}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return info.param.name; });

TEST_P(ZeroMutationTest, LosesItsPointsWithAMessageThatNamesTheMistake) {
  Scores().push_back(GradeMutant("task5", "allgather", 20, GetParam(), "task5/grading/mutant_stage"));
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, ZeroMutationTest,
    ::testing::Values(Mutation{"zero_none", 16, 4, {"match the grader's single-node run"}},
                      Mutation{"zero_no_allgather", 0, 0, {"never share their updated shards", "zero::AllGather"}},
                      Mutation{"zero_wrong_shard", 0, 4, {"another rank's block of the gradient", "[r*S, (r+1)*S)"}},
                      Mutation{"zero_local_norm", 0, 4, {"clip by the norm of this rank's shard only"}}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return info.param.name; });

TEST_P(GatherScatterMutationTest, LosesItsPointsWithItsOwnMessage) {
  Scores().push_back(GradeMutant("task2a", "gather and scatter", 15, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(
    Mutations, GatherScatterMutationTest,
    ::testing::Values(Mutation{"root_only_average", 0, 0, {"only rank 0 ends with the average", "scatter the average back"}},
                      Mutation{"scatter_sum", 0, 3, {"summed but not divided", "on rank 0, before the scatter"}}),
    [](const ::testing::TestParamInfo<Mutation>& info) { return info.param.name; });

// Task 3's mistakes, each in a DDP that is otherwise right (task3/grading/mutant_ddp_stage), graded as
// a task 3 submission (40 points): each loses exactly the tests it should, each with its message.
struct DdpMutation {
  std::string name;
  double score;                                // of the stage's points (task 3: 40)
  std::map<std::string, std::string> failing;  // test name -> what its output says
};

class DdpMutationTest : public ::testing::TestWithParam<DdpMutation> {};

// Grades `mutant` (a stage's own, run with `flag`) as a submission of `stage` alone: every test
// of the stage not in `failing` passes, each in it fails saying what it maps to, and the stage
// keeps `score` of `max` points.
void GradeOwnMutant(const std::string& stage, const std::string& mutant, const std::string& flag,
                    const std::map<std::string, std::string>& failing, double score, int max) {
  GradeRequest req;
  req.submission = SubmissionFrom("reference", {stage});
  req.prebuilt[stage] = {testing::Runfile(mutant), {flag}};
  GradeReport r = Grader().Grade(req);
  double kept = 0;
  for (const auto& t : r.tests) {
    if (t.name.rfind(stage + ":", 0) != 0) continue;
    kept += t.score;
    auto f = failing.find(t.name);
    if (f == failing.end()) {
      EXPECT_TRUE(t.passed) << t.name << ":\n" << t.output;
    } else {
      EXPECT_FALSE(t.passed) << t.name;
      EXPECT_NE(t.output.find(f->second), std::string::npos) << "want '" << f->second << "' in " << t.name << ":\n"
                                                             << t.output;
    }
  }
  for (const auto& [name, says] : failing) Find(r, name);
  EXPECT_EQ(kept, score) << r.Summary();
  std::printf("%s: %s %g/%d\n%s\n", flag.c_str(), stage.c_str(), kept, max, r.Summary().c_str());
}

TEST_P(DdpMutationTest, LosesItsTestsWithTheirMessages) {
  const DdpMutation& m = GetParam();
  GradeOwnMutant("task3", "task3/grading/mutant_ddp_stage", "--ddp_mutation=" + m.name, m.failing, m.score, 40);
}

const std::string kLayout = "task3: buckets in reverse order, closed at the cap (3b)";
const std::string kOverlap = "task3: bucket all-reduces start while backward runs (3b)";
const std::string kPerParameter = "task3: per-parameter DDP matches the single-node run (3a)";
const std::string kPerParameterShape = "task3: per-parameter DDP sends one all-reduce per parameter during backward (3a)";
const std::string kNoSync = "task3: no_sync: gradient accumulation sends each gradient once per update (3c)";
const std::string kUnused = "task3: a parameter without a gradient is named in an error";

INSTANTIATE_TEST_SUITE_P(
    Mutations, DdpMutationTest,
    ::testing::Values(
        DdpMutation{"launch_at_finish", 32,
                    {{kOverlap, "the all-reduce of bucket 0 started after backward ended"},
                     {kPerParameterShape, "the all-reduce of parameter 0 started after backward ended"}}},
        DdpMutation{"forward_order", 36, {{kLayout, "filled from the FIRST parameter"}}},
        DdpMutation{"no_division", 12,
                    {{"task3" + kParity, "divide the sum by 4 (pg.getSize()) in FinishGradientSync"},
                     {kPerParameter, "summed but not divided"},
                     {kPerParameterShape, "not checked"},
                     {kNoSync, "summed but not divided"}}},
        DdpMutation{"ignore_no_sync", 32, {{kNoSync, "during the backward of update 1 that only accumulates"}}},
        DdpMutation{"silent_unused", 38, {{kUnused, "trained on without complaint"}}}),
    [](const ::testing::TestParamInfo<DdpMutation>& info) { return info.param.name; });

// Task 6's mistakes, each in the reference otherwise (task6/grading/mutant_stage), graded as a
// task 6 submission (20 points): each loses exactly the tests it should, each with its message.
using FsdpMutation = DdpMutation;  // of 20 points

class FsdpMutationTest : public ::testing::TestWithParam<FsdpMutation> {};

TEST_P(FsdpMutationTest, LosesItsTestsWithTheirMessages) {
  const FsdpMutation& m = GetParam();
  GradeOwnMutant("task6", "task6/grading/mutant_stage", "--mutation=" + m.name, m.failing, m.score, 20);
}

const std::string kFsdpRuns = "task6: runs 5 updates on 4 ranks";
const std::string kFsdpComm = "task6: uses allgather";
const std::string kFsdpPrefetch = "task6: prefetched all-gathers travel while a unit computes (6b)";
const std::string kFsdpOverlap = "task6: reduce-scatters run behind the rest of backward (6c)";

INSTANTIATE_TEST_SUITE_P(
    Mutations, FsdpMutationTest,
    ::testing::Values(
        FsdpMutation{"fsdp_none", 20, {}},
        FsdpMutation{"fsdp_no_average", 8, {{"task6" + kParity, "summed over the ranks, not averaged"}}},
        FsdpMutation{"fsdp_wrong_shard", 8, {{"task6" + kParity, "another rank's block of the gradient"}}},
        FsdpMutation{"fsdp_reduced_twice", 8, {{"task6" + kParity, "reaches its shard twice"}}},
        FsdpMutation{"fsdp_no_reshard", 0,
                     {{kFsdpRuns, "parameters were not freed after its forward"},
                      {"task6" + kParity, "not checked: the run did not complete"},
                      {kFsdpComm, "not checked"},
                      {kFsdpPrefetch, ""},
                      {kFsdpOverlap, ""}}},
        FsdpMutation{"fsdp_no_prefetch", 18, {{kFsdpPrefetch, "StartGather returned: it waits for its collective"}}},
        FsdpMutation{"fsdp_reduce_waited", 18,
                     {{kFsdpOverlap, "StartReduceScatter returned: it waits for its collective"}}}),
    [](const ::testing::TestParamInfo<FsdpMutation>& info) { return info.param.name; });

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
  EXPECT_EQ(empty.max_score(), 75);
  EXPECT_NE(Find(empty, "task3: builds").output.find("missing from the submission: task3/bucketed_ddp.cc"), std::string::npos);
  EXPECT_NE(Find(empty, "task3" + kParity).output.find("not run: the build step did not succeed"), std::string::npos);
  EXPECT_NE(Find(empty, kNoSync).output.find("not run: the build step did not succeed"), std::string::npos);
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

// The same grader on the second model (#23): every run, the grader's own included, trains the
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
  EXPECT_EQ(r.score(), 115);
  EXPECT_EQ(r.max_score(), 115);
  for (const auto& t : r.tests) EXPECT_TRUE(t.passed) << t.name << ":\n" << t.output;
  EXPECT_EQ(r.tests.size(), kTestsOfEveryStage);
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

}  // namespace
}  // namespace distlm::grading
