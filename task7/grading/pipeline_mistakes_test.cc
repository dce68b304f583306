// The mistakes of a 7b loop that Gloo alone reports only as a timeout, made on purpose and run
// through the local test's check (task7/pipeline_check.h): each must fail with a message of its
// own, naming the stage, the operation and the peer, well within 30 s.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/testing/rank_test.h"
#include "grading/mistake_line.h"
#include "task7/pipeline_check.h"
#include "task7/pipeline_parallel.h"
#include "task7/pipeline_schedule.h"

namespace distlm::task7 {
namespace {

struct Mistakes {
  bool wait_each_send = false;  // every send waited as soon as it is posted
  bool wait_twice = false;      // the sends waited at the end, twice
  bool tag_zero = false;        // every message tagged 0
};

// A loop over the steps with one of the mistakes.
double Loop(const PipelineStage& stage, const std::vector<PipelineStep>& steps, Mistakes mistakes) {
  const bool first = stage.stage == 0, last = stage.stage == stage.stages - 1;
  std::map<int, std::pair<torch::Tensor, torch::Tensor>> held;  // input, output
  std::vector<c10::intrusive_ptr<c10d::Work>> sends;
  std::vector<std::vector<torch::Tensor>> buffers;
  auto tag = [&](int m) { return mistakes.tag_zero ? 0 : m; };
  auto send = [&](const torch::Tensor& t, int to, int m) {
    buffers.push_back({t.detach().contiguous()});
    sends.push_back(stage.pg->send(buffers.back(), to, tag(m)));
    if (mistakes.wait_each_send) sends.back()->wait();
  };
  auto receive = [&](int from, int m) {
    std::vector<torch::Tensor> buffer = {torch::empty(stage.activation_shape, torch::dtype(stage.dtype))};
    stage.pg->recv(buffer, from, tag(m))->wait();
    return buffer[0];
  };
  double loss = 0;
  for (const PipelineStep& step : steps) {
    const int m = step.micro_batch;
    if (step.forward) {
      torch::Tensor input = first ? torch::Tensor() : receive(stage.stage - 1, m).requires_grad_(true);
      torch::Tensor output = stage.forward(m, input);
      if (last) loss += output.item<double>();
      if (!last) send(output, stage.stage + 1, m);
      held[m] = {input, output};
    } else {
      auto [input, output] = held.at(m);
      held.erase(m);
      stage.backward(m, output, last ? torch::Tensor() : receive(stage.stage + 1, m));
      if (!first) send(input.grad(), stage.stage - 1, m);
    }
  }
  if (!mistakes.wait_each_send) {
    for (auto& w : sends) w->wait();
  }
  if (mistakes.wait_twice) {
    for (auto& w : sends) w->wait();
  }
  return loss;
}

PipelineLoop With(bool Mistakes::*mistake) {
  Mistakes m;
  if (mistake != nullptr) m.*mistake = true;
  return [m](const PipelineStage& stage, const std::vector<PipelineStep>& steps) { return Loop(stage, steps, m); };
}

RANK_CASE(correct) { CheckPipeline(env, PipelineSchedule::kOneForwardOneBackward, 4, With(nullptr)); }
RANK_CASE(wait_each_send) {
  CheckPipeline(env, PipelineSchedule::kOneForwardOneBackward, 4, With(&Mistakes::wait_each_send));
}
RANK_CASE(wait_twice) { CheckPipeline(env, PipelineSchedule::kOneForwardOneBackward, 4, With(&Mistakes::wait_twice)); }
RANK_CASE(tag_zero) { CheckPipeline(env, PipelineSchedule::kOneForwardOneBackward, 4, With(&Mistakes::tag_zero)); }

// The message of `name` on 2 ranks, and how long it took.
std::string RunTimed(const std::string& name, double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  std::string message = testing::RunRanks(name, 2);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  grading::PrintMistake("7b", name, "//task7:pipeline_student_test", message);
  return message;
}

TEST(PipelineMistakesTest, TheLoopWithoutAMistakePasses) {
  double s = 0;
  EXPECT_EQ(RunTimed("correct", &s), "");
}

TEST(PipelineMistakesTest, ASendWaitedAtOnceDeadlocksAndEachStageSaysOnWhat) {
  double s = 0;
  const std::string m = RunTimed("wait_each_send", &s);
  EXPECT_NE(m.find("rank 0: stage 0 waits on its send of micro-batch 1's activation to stage 1 (tag 1)"),
            std::string::npos) << m;
  EXPECT_NE(m.find("rank 1: stage 1 waits on its send of micro-batch 0's gradient to stage 0 (tag 0)"),
            std::string::npos) << m;
  EXPECT_NE(m.find("A send completes when its peer posts the matching recv"), std::string::npos) << m;
  EXPECT_LT(s, 30);
}

TEST(PipelineMistakesTest, AWorkWaitedTwiceIsNamed) {
  double s = 0;
  const std::string m = RunTimed("wait_twice", &s);
  EXPECT_NE(m.find("waited twice on its send of micro-batch"), std::string::npos) << m;
  EXPECT_LT(s, 30);
}

TEST(PipelineMistakesTest, ATagThatIsNotTheMicroBatchIsNamed) {
  double s = 0;
  const std::string m = RunTimed("tag_zero", &s);
  EXPECT_NE(m.find("rank 0: stage 0 sent micro-batch 1's activation with tag 0"), std::string::npos) << m;
  EXPECT_LT(s, 30);
}

}  // namespace
}  // namespace distlm::task7
