// Task 7b's local test, with real ranks (2 and 4, Gloo over 127.0.0.1): a tiny BERT of 4 layers
// cut into P stages (pipeline_stage.h), one batch of 8 in M micro-batches, run by your
// RunPipelineSteps over your StageSteps, against the same BERT whole on every rank. The last
// stage's losses must add up to the whole batch's loss, and every stage's parameter gradients
// equal the whole model's (1e-5 relative); the steps must run in the schedule's order, and a
// stage must not touch another's parameters. Dropout is off: a stage draws its masks in its
// own order of micro-batches, not the whole model's (docs/handout/part7.md says why).
#include <gtest/gtest.h>

#include "common/testing/rank_test.h"
#include "task7/pipeline_check.h"
#include "task7/pipeline_parallel.h"
#include "task7/pipeline_schedule.h"

namespace distlm::task7 {
namespace {

RANK_CASE(gpipe_m4) { CheckPipeline(env, PipelineSchedule::kAllForwardAllBackward, 4, RunPipelineSteps); }
RANK_CASE(one_f_one_b_m4) { CheckPipeline(env, PipelineSchedule::kOneForwardOneBackward, 4, RunPipelineSteps); }
RANK_CASE(one_f_one_b_m8) { CheckPipeline(env, PipelineSchedule::kOneForwardOneBackward, 8, RunPipelineSteps); }
RANK_CASE(one_f_one_b_m1) { CheckPipeline(env, PipelineSchedule::kOneForwardOneBackward, 1, RunPipelineSteps); }

TEST(Task7b, AllForwardAllBackwardOnTwoAndFourStages) {
  EXPECT_RANKS_PASS("gpipe_m4", 2);
  EXPECT_RANKS_PASS("gpipe_m4", 4);
}

TEST(Task7b, OneForwardOneBackwardOnTwoAndFourStages) {
  EXPECT_RANKS_PASS("one_f_one_b_m4", 2);
  EXPECT_RANKS_PASS("one_f_one_b_m4", 4);
  EXPECT_RANKS_PASS("one_f_one_b_m8", 4);
}

TEST(Task7b, OneMicroBatch) { EXPECT_RANKS_PASS("one_f_one_b_m1", 4); }

}  // namespace
}  // namespace distlm::task7
