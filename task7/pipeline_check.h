// 7b's check of a loop, on the ranks of a rank test (common/testing/rank_test.h): a tiny BERT of
// 4 layers cut into as many stages as ranks (pipeline_stage.h), one batch of 8 in M
// micro-batches, run by `loop` over StageSteps, its messages watched (pipeline_watch.h), against
// the same BERT whole on every rank. The last stage's losses must add up to the whole batch's
// loss and every stage's parameter gradients equal the whole model's (1e-5 relative); the steps
// run in the schedule's order; a stage touches no other stage's parameters. Fails (testing::Fail)
// naming the first property broken.
#pragma once

#include <functional>
#include <vector>

#include "common/testing/rank_test.h"
#include "task7/pipeline_parallel.h"
#include "task7/pipeline_schedule.h"

namespace distlm::task7 {

using PipelineLoop = std::function<double(const PipelineStage&, const std::vector<PipelineStep>&)>;

void CheckPipeline(testing::RankEnv& env, PipelineSchedule schedule, int micro_batches, const PipelineLoop& loop);

}  // namespace distlm::task7
