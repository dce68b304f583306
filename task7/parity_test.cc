// Task 7a (tensor parallel BERT) against part 1: splitting every encoder layer's products over
// the ranks must not change training. Every rank reads the whole batch of 8 that part 1 reads;
// 5 updates of the tiny BERT (2 heads) on 2 ranks over Gloo and MPI, with dropout on (the
// attention's masks drawn per head as part 1 draws them, the hidden ones whole); a random BERT
// of 4 heads on 4 ranks; the same losses and gradient norms within 1e-5 relative. Then what an
// update sends (4 all-reduces of batch x sequence x hidden per layer, the norm's, the loss's),
// evaluation and the saved model through the whole weights, exact resume, and bad input. Task 7c:
// 2 x 2 (data x tensor) on 4 ranks against part 1, and what its update sends. Task 7b: the
// pipeline (--model_parallel=pipeline) on 2 and 4 stages, both schedules, against part 1; its
// evaluation, saved model and resume; 2 x 2 (data x pipeline, task 7c) against part 1.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/safetensors/safetensors.h"
#include "common/testing/subprocess.h"
#include "common/testing/training_runs.h"
#include "grading/parity_cases.h"
#include "grading/stage_runner.h"

namespace distlm::grading {
namespace {

void ExpectSame(const StageRun& want, const StageRun& got, const std::string& name) {
  ASSERT_EQ(want.exit_code, 0) << want.output;
  ASSERT_FALSE(got.timed_out) << name << " hung:\n" << got.output;
  ASSERT_EQ(got.exit_code, 0) << name << ":\n" << got.output;
  ASSERT_EQ(want.losses().size(), kSteps) << want.output;
  EXPECT_EQ(CompareLosses(want.losses(), got.losses(), kSteps, kTol), "") << name;
  EXPECT_LT(WorstRelative(want.grad_norms(), got.grad_norms()), kTol) << name;
  std::printf("task7 %s: worst relative difference over %zu updates: loss %.3g, gradient norm %.3g\n", name.c_str(),
              kSteps, WorstRelative(want.losses(), got.losses()), WorstRelative(want.grad_norms(), got.grad_norms()));
}

std::vector<std::string> WithDropout(std::vector<std::string> flags) {
  for (std::string& f : flags) {
    if (f == "--hidden_dropout_prob=0") f = "--hidden_dropout_prob=0.1";
    if (f == "--attention_probs_dropout_prob=0") f = "--attention_probs_dropout_prob=0.1";
  }
  return flags;
}

// Killed after 7 of 10 updates on 2 ranks and started again: the run resumes from its snapshot and
// goes on bit for bit as one never interrupted.
void ExpectResumesBitForBit(const std::vector<std::string>& extra, const std::string& name) {
  auto argv = [&](const std::string& out) {
    std::vector<std::string> a = {Bin("tools/launch"), "--nproc_per_node=2", "--", Bin("task7/reference"),
                                  "--max_steps=10", "--save_steps=2", "--num_threads=1", "--max_seq_length=32",
                                  "--per_gpu_train_batch_size=4", "--output_dir=" + out};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  const std::string whole = testing::MakeTempDir(name + "_whole");
  auto r = testing::Run({argv(whole), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string out = testing::MakeTempDir(name + "_killed");
  auto k = testing::RunAndKillAfterUpdates(argv(out), out, 7, 180);
  ASSERT_EQ(k.exit_code, 0) << "finished before it could be killed: " << k.output;
  r = testing::Run({argv(out), {}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resuming from"), std::string::npos) << r.output;
  EXPECT_EQ(testing::LoggedLosses(out), testing::LoggedLosses(whole));
}

// One epoch (6 updates of the 48 examples) with evaluation, on `ranks` with `extra`: the
// evaluation line and the saved weights must be part 1's.
void ExpectWholeForEvaluationAndSaving(int ranks, const std::vector<std::string>& extra) {
  std::vector<std::string> flags = Flags(8);
  for (std::string& f : flags) {
    if (f == "--do_eval=false") f = "--do_eval=true";
    if (f == "--max_steps=5") f = "--max_steps=6";
  }
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, flags, 120);
  flags.insert(flags.end(), extra.begin(), extra.end());
  const StageRun r = RunStage(Bin("task7/reference"), ranks, Launcher::kLaunch, flags, 180);
  ASSERT_EQ(want.exit_code, 0) << want.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto eval_line = [](const std::string& out) {
    const size_t at = out.find("eval after epoch 1:");
    return at == std::string::npos ? std::string("(none)") : out.substr(at, out.find(" (", at) - at);
  };
  EXPECT_EQ(eval_line(r.output), eval_line(want.output));
  std::string why;
  const double worst = WorstSavedWeightDifference(want.output_dir, r.output_dir, &why);
  ASSERT_GE(worst, 0) << why;
  EXPECT_LT(worst, 1e-5) << "the saved weights differ from part 1's";
  std::printf("task7's saved model against part 1's: worst difference %.3g\n", worst);
}

TEST(TensorParallelParityTest, TwoRanksWithDropoutMatchPart1OverGlooAndMpi) {
  const std::vector<std::string> flags = WithDropout(Flags(8));
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, flags, 120);
  for (Launcher l : {Launcher::kLaunch, Launcher::kMpirun}) {
    if (l == Launcher::kMpirun && MpirunBinary().empty()) {
      std::printf("SKIPPED: no mpirun, the MPI case did not run\n");
      continue;
    }
    const StageRun r = RunStage(Bin("task7/reference"), 2, l, flags, 180);
    ExpectSame(want, r, Name({2, l}) + " with dropout");
    EXPECT_NE(r.output.find("task7: tensor parallel over 2 rank(s)"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("2 rank(s) sharing each batch of 8 x accumulation 1 = 8 per update"), std::string::npos)
        << r.output;
  }
}

// The communication of an update, from the formula: per layer and micro-batch, two all-reduces
// forward (attention output, MLP output) and two backward (the inputs of query/key/value and of
// the intermediate linear), each of batch x sequence x hidden float32; one of the cut tensors'
// squared norms (10 per layer); one of the previous update's loss (from the second update on).
TEST(TensorParallelParityTest, AnUpdateSendsWhatTheFormulaSays) {
  const StageRun r = RunStage(Bin("task7/reference"), 2, Launcher::kLaunch, Flags(8), 180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(r.log.size(), kSteps);
  const int64_t layers = 2, batch = 8, seq = 64, hidden = 128;
  const int64_t activation = batch * seq * hidden * 4;
  for (size_t u = 1; u < r.log.size(); ++u) {
    const auto& line = r.log[u];
    EXPECT_EQ(line["comm_ops"].value("allreduce", 0), 4 * layers + 2) << line.dump();
    EXPECT_EQ(line["comm_bytes"].get<int64_t>(), 4 * layers * activation + 10 * layers * 4 + 8) << line.dump();
  }
}

TEST(TensorParallelParityTest, FourRanksOfAFourHeadBertMatchPart1) {
  const std::string model = testing::MakeTempDir("bert4heads");
  const auto made = testing::Run({{Bin("task3/make_bench_model"), "--output_dir=" + model, "--hidden_size=128",
                                   "--num_hidden_layers=2", "--num_attention_heads=4", "--intermediate_size=512"},
                                  {}},
                                 120);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  std::vector<std::string> flags = Flags(8);
  flags.push_back("--model_name_or_path=" + model);
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, flags, 120);
  ExpectSame(want, RunStage(Bin("task7/reference"), 4, Launcher::kLaunch, flags, 240), "x4 (gloo), 4 heads");
}

// Evaluation and the saved model go through the whole weights: part 1's accuracy and weights.
TEST(TensorParallelParityTest, EvaluationAndSavedModelAreWhole) { ExpectWholeForEvaluationAndSaving(2, {}); }

// Killed after 7 updates and started again: the snapshot's whole optimizer state is cut again,
// and the run goes on bit for bit as one never interrupted.
TEST(TensorParallelParityTest, KilledAndResumedRunIsBitForBitTheSame) { ExpectResumesBitForBit({}, "task7"); }

// Task 7c: 2 replicas of 2 ranks (data x tensor) on 4 ranks, each replica reading its half of
// part 1's batch of 8. Dropout off: a replica draws the masks of its half as part 1 draws those of
// a whole batch of 4 (as in every data-parallel stage's parity).
TEST(DataTensorParityTest, TwoByTwoMatchesPart1OverGlooAndMpi) {
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, Flags(8), 120);
  std::vector<std::string> flags = Flags(4);
  flags.push_back("--tensor_parallel_size=2");
  for (Launcher l : {Launcher::kLaunch, Launcher::kMpirun}) {
    if (l == Launcher::kMpirun && MpirunBinary().empty()) {
      std::printf("SKIPPED: no mpirun, the MPI case did not run\n");
      continue;
    }
    const StageRun r = RunStage(Bin("task7/reference"), 4, l, flags, 240);
    ExpectSame(want, r, Name({4, l}) + ", 2 x 2 (data x tensor)");
    EXPECT_NE(r.output.find("task7: tensor parallel over 2 rank(s) x 2 data-parallel replica(s)"), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("2 replica(s) of 2 rank(s), each sharing a batch of 4 x accumulation 1 = 8 per update"),
              std::string::npos)
        << r.output;
    if (l != Launcher::kLaunch || r.log.size() < 2) continue;
    // An update's traffic on rank 0: the tensor group's 4 all-reduces per layer of its replica's
    // activations (batch 4), one all-reduce in the data group of this rank's gradients (its
    // shards and the replicated parameters), the norm's and the loss's.
    const auto model = safetensors::LoadFile(want.output_dir + "/model.safetensors");
    int64_t whole = 0, cut = 0;
    for (const auto& [name, t] : model) {
      whole += t.numel();
      const bool split = name.find(".attention.self.") != std::string::npos ||
                         name.find(".attention.output.dense.weight") != std::string::npos ||
                         name.find(".intermediate.dense.") != std::string::npos ||
                         (name.find(".output.dense.weight") != std::string::npos &&
                          name.find(".attention.") == std::string::npos);
      if (split) cut += t.numel();
    }
    const int64_t layers = 2, seq = 64, hidden = 128, replica_batch = 4;
    const int64_t gradient_bytes = 4 * (whole - cut / 2);
    const auto& line = r.log[1];
    EXPECT_EQ(line["comm_ops"].value("allreduce", 0), 4 * layers + 3) << line.dump();
    EXPECT_EQ(line["comm_bytes"].get<int64_t>(),
              4 * layers * replica_batch * seq * hidden * 4 + gradient_bytes + 10 * layers * 4 + 8)
        << line.dump() << "\nwhole model " << whole << " values, " << cut << " of them cut";
    EXPECT_EQ(line.value("tensor_parallel", 0), 2) << line.dump();
    EXPECT_EQ(line.value("data_parallel", 0), 2) << line.dump();
  }
}

TEST(DataTensorParityTest, TheStubLayoutSaysWhatToDo) {
  std::vector<std::string> flags = Flags(4);
  flags.push_back("--tensor_parallel_size=2");
  const StageRun r = RunStage(Bin("task7/student"), 4, Launcher::kLaunch, flags, 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("TODO(student): task7 MakeMeshLayout is not implemented yet; see docs/handout/part7.md, "
                          "section 'Task 7c'"),
            std::string::npos)
      << r.output;
}

// Task 7b: the pipeline of 2 stages (the tiny BERT's 2 layers) with both schedules and 1, 4 and
// 8 micro-batches, and of 4 stages on a 4-layer BERT, against part 1. Dropout off: each stage
// draws its masks micro-batch by micro-batch, not for the whole batch at once.
std::vector<std::string> Pipeline(std::vector<std::string> flags, int micro_batches, const std::string& schedule) {
  flags.push_back("--model_parallel=pipeline");
  flags.push_back("--micro_batches=" + std::to_string(micro_batches));
  flags.push_back("--pipeline_schedule=" + schedule);
  return flags;
}

TEST(PipelineParityTest, TwoStagesMatchPart1WithBothSchedules) {
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, Flags(8), 120);
  for (const std::string schedule : {"1f1b", "afab"}) {
    for (int m : {1, 4, 8}) {
      if (schedule == "afab" && m == 8) continue;
      const StageRun r = RunStage(Bin("task7/reference"), 2, Launcher::kLaunch, Pipeline(Flags(8), m, schedule), 180);
      ExpectSame(want, r, "pipeline x2, " + schedule + ", M = " + std::to_string(m));
      if (r.log.size() < 2) continue;
      // Stage 0 computes no loss: its log has the last stage's, broadcast (checked above), and
      // what it sent: M activations forward, the norm's P numbers, the loss's broadcast.
      const auto& line = r.log[1];
      EXPECT_EQ(line["comm_ops"].value("send", 0), m) << line.dump();
      EXPECT_EQ(line["comm_ops"].value("recv", 0), m) << line.dump();
      EXPECT_EQ(line.value("micro_batches", 0), m) << line.dump();
    }
  }
}

TEST(PipelineParityTest, FourStagesOfAFourLayerBertMatchPart1) {
  const std::string model = testing::MakeTempDir("bert4layers");
  const auto made = testing::Run({{Bin("task3/make_bench_model"), "--output_dir=" + model, "--hidden_size=128",
                                   "--num_hidden_layers=4", "--num_attention_heads=2", "--intermediate_size=512"},
                                  {}},
                                 120);
  ASSERT_EQ(made.exit_code, 0) << made.output;
  std::vector<std::string> flags = Flags(8);
  flags.push_back("--model_name_or_path=" + model);
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, flags, 120);
  const StageRun r = RunStage(Bin("task7/reference"), 4, Launcher::kLaunch, Pipeline(flags, 4, "1f1b"), 240);
  ExpectSame(want, r, "pipeline x4, 1f1b, M = 4");
  EXPECT_NE(r.output.find("task7: pipeline of 4 stages (gloo), 1F1B over 4 micro-batches"), std::string::npos)
      << r.output;
}

// A batch of 5 in 5 micro-batches: the epoch's 48 examples end with a batch of 3, which the stage
// cuts into 3; all 10 updates (beyond the epoch's end) against part 1's.
TEST(PipelineParityTest, AShortLastBatchIsCutEvenly) {
  std::vector<std::string> flags = Flags(5);
  for (std::string& f : flags) {
    if (f == "--max_steps=5") f = "--max_steps=12";
  }
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, flags, 120);
  const StageRun r = RunStage(Bin("task7/reference"), 2, Launcher::kLaunch, Pipeline(flags, 5, "1f1b"), 180);
  ASSERT_EQ(want.exit_code, 0) << want.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_EQ(want.losses().size(), 12u) << want.output;
  ASSERT_EQ(r.losses().size(), 12u) << r.output;
  EXPECT_LT(WorstRelative(want.losses(), r.losses()), kTol);
  EXPECT_LT(WorstRelative(want.grad_norms(), r.grad_norms()), kTol);
}

// Task 7c, data x pipeline: 2 pipelines of 2 stages on 4 ranks (--pipeline_parallel_size=2),
// each reading its half of part 1's batch of 8 in 2 micro-batches, over MPI and Gloo.
TEST(DataPipelineParityTest, TwoByTwoMatchesPart1OverMpiAndGloo) {
  const StageRun want = RunStage(Bin("part1/reference"), 1, Launcher::kSingle, Flags(8), 120);
  std::vector<std::string> flags = Pipeline(Flags(4), 2, "1f1b");
  flags.push_back("--pipeline_parallel_size=2");
  if (MpirunBinary().empty()) {
    std::printf("SKIPPED: no mpirun, the MPI case did not run\n");
  } else {
    const StageRun m = RunStage(Bin("task7/reference"), 4, Launcher::kMpirun, flags, 240);
    ExpectSame(want, m, Name({4, Launcher::kMpirun}) + ", 2 x 2 (data x pipeline), 1f1b, M = 2");
    EXPECT_NE(m.output.find("task7: pipeline of 2 stages (mpi)"), std::string::npos) << m.output;
  }
  const StageRun r = RunStage(Bin("task7/reference"), 4, Launcher::kLaunch, flags, 240);
  ExpectSame(want, r, "4 ranks, 2 x 2 (data x pipeline), 1f1b, M = 2");
  EXPECT_NE(r.output.find("task7: pipeline of 2 stages (gloo), 1F1B over 2 micro-batches of each batch; stage 0 "
                          "holds units 0..1"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("x 2 data-parallel replica(s), each reading its share of every batch"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("2 replica(s) of 2 rank(s), each sharing a batch of 4 x accumulation 1 = 8 per update"),
            std::string::npos)
      << r.output;
  if (r.log.size() < 2) return;
  // An update's traffic on rank 0, stage 0 of pipeline 0, as comm_bytes counts it (what this
  // rank sends; a receive is counted by its sender): its 2 micro-batches' activations sent
  // forward (2 x 64 x 128 floats each; their gradients come back as 2 receives); stage 0's
  // gradients (the embeddings and layer 0) averaged in its data group; the norm's 2 numbers in
  // the pipeline; the batch's loss broadcast from the last stage; the world's average of the loss.
  const auto model = safetensors::LoadFile(want.output_dir + "/model.safetensors");
  int64_t stage0 = 0;
  for (const auto& [name, t] : model) {
    if (name.find("embeddings.") != std::string::npos || name.find("encoder.layer.0.") != std::string::npos) {
      stage0 += t.numel();
    }
  }
  const int64_t micro_batches = 2, activation = 2 * 64 * 128 * 4;
  const auto& line = r.log[1];
  EXPECT_EQ(line["comm_ops"].value("send", 0), micro_batches) << line.dump();
  EXPECT_EQ(line["comm_ops"].value("recv", 0), micro_batches) << line.dump();
  EXPECT_EQ(line["comm_ops"].value("allreduce", 0), 3) << line.dump();
  EXPECT_EQ(line["comm_ops"].value("broadcast", 0), 1) << line.dump();
  EXPECT_EQ(line["comm_bytes"].get<int64_t>(), micro_batches * activation + 4 * stage0 + 2 * 4 + 8 + 8)
      << line.dump() << "\nstage 0 holds " << stage0 << " values";
  EXPECT_EQ(line.value("pipeline_parallel", 0), 2) << line.dump();
  EXPECT_EQ(line.value("data_parallel", 0), 2) << line.dump();
  // What rank 0 holds: its own stage's parameters only (the others' released once the model is
  // cut), and their gradients.
  EXPECT_EQ(line["held_param_bytes"].get<int64_t>(), 4 * stage0) << line.dump();
  EXPECT_EQ(line["held_grad_bytes"].get<int64_t>(), 4 * stage0) << line.dump();
}

// Evaluation and the saved model see the whole model (each stage's parameters from its stage),
// and a run killed after 7 updates resumes bit for bit (the snapshot's optimizer state gathered
// whole from the stages, then each stage's part taken back).
TEST(PipelineParityTest, EvaluationSavedModelAndResumeAreWhole) {
  ExpectWholeForEvaluationAndSaving(2, {"--model_parallel=pipeline", "--micro_batches=2"});
  ExpectResumesBitForBit({"--model_parallel=pipeline", "--micro_batches=2"}, "task7b");
}

TEST(PipelineParityTest, TheStubScheduleSaysWhatToDo) {
  const StageRun r = RunStage(Bin("task7/student"), 2, Launcher::kLaunch, Pipeline(Flags(8), 4, "1f1b"), 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("TODO(student): task7 StageSteps"), std::string::npos) << r.output;
}

// What task 7a cannot split is refused in one line, exit 2, before any update.
TEST(TensorParallelBadInputTest, RefusedInOneLine) {
  struct BadCase {
    int ranks;
    std::string flag, want;
  };
  const std::vector<BadCase> cases = {
      {4, "", "error: tensor parallelism over 4 ranks needs the BERT's heads (2) and intermediate size (512) to divide by it"},
      {2, "--comm_dtype=bf16", "error: --comm_dtype=bf16 is not supported by task7"},
      {4, "--tensor_parallel_size=3",
       "error: --tensor_parallel_size=3 does not divide the world size 4 (WORLD_SIZE=4): the ranks form replicas of "
       "--tensor_parallel_size ranks each"},
      {2, "--tensor_parallel_size=-1", "error: --tensor_parallel_size=-1 does not divide the world size 2"},
      {2, "--model_parallel=data", "error: --model_parallel=data is not tensor or pipeline"},
      {2, "--model_parallel=pipeline --micro_batches=3",
       "error: --micro_batches=3 does not divide --per_gpu_train_batch_size=8"},
      {2, "--model_parallel=pipeline --micro_batches=0", "error: --micro_batches=0 must be at least 1"},
      {2, "--model_parallel=pipeline --pipeline_schedule=gpipe", "error: --pipeline_schedule=gpipe is not 1f1b or afab"},
      {4, "--model_parallel=pipeline",
       "error: a pipeline of 4 stages needs at least as many encoder layers; the model has 2"},
      {4, "--model_parallel=pipeline --pipeline_parallel_size=3",
       "error: --pipeline_parallel_size=3 does not divide the world size 4 (WORLD_SIZE=4): the ranks form replicas "
       "of --pipeline_parallel_size ranks each"}};
  for (const auto& c : cases) {
    std::vector<std::string> flags = Flags(8);
    for (size_t at = 0; at < c.flag.size();) {  // one or two flags, space-separated
      const size_t space = c.flag.find(' ', at);
      flags.push_back(c.flag.substr(at, space == std::string::npos ? std::string::npos : space - at));
      at = space == std::string::npos ? c.flag.size() : space + 1;
    }
    const StageRun r = RunStage(Bin("task7/reference"), c.ranks, Launcher::kLaunch, flags, 120);
    EXPECT_EQ(r.exit_code, 2) << c.flag << ":\n" << r.output;
    EXPECT_NE(r.output.find(c.want), std::string::npos) << c.flag << ":\n" << r.output;
    EXPECT_TRUE(r.log.empty()) << c.flag << ": an update was logged";
  }
}

TEST(TensorParallelStudentKitTest, TheStubSaysWhatToDo) {
  const StageRun r = RunStage(Bin("task7/student"), 2, Launcher::kLaunch, Flags(8), 120);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("TODO(student): task7 ColumnParallelLinear is not implemented yet; see docs/handout/part7.md, "
                          "section 'Task 7a'"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace distlm::grading
