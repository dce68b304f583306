// 7b judged by what the schedule is: the grader calls the submission's StageSteps directly
// (task7/schedule_probe.h) on layouts it draws for each grading, which no local test names, and
// checks every stage's steps against the contract's properties (task7/pipeline_schedule.h), not
// against a list: the message names the layout, the stage and the first property broken, never
// the steps the grader expected.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "task7/pipeline_schedule.h"

namespace distlm::task7 {

struct ProbeLayout {
  PipelineSchedule schedule = PipelineSchedule::kOneForwardOneBackward;
  int stages = 2;
  int micro_batches = 4;
};

// Four layouts from `seed`: 1F1B with more micro-batches than stages, with fewer, with as many,
// and all forward all backward; 2 to 6 stages, 1 to 9 micro-batches.
std::vector<ProbeLayout> DrawProbeLayouts(uint64_t seed);
// The value of --schedule_probe for them.
std::string ProbeFlag(const std::vector<ProbeLayout>& layouts);

// "" when `steps` (stage `stage` of `stages`) has every property the contract gives `schedule`;
// otherwise the first one broken, in a sentence.
std::string ScheduleProblem(PipelineSchedule schedule, int stages, int stage, int micro_batches,
                            const std::vector<PipelineStep>& steps);

// "" when schedule_probe.txt's text gives every stage of every layout a schedule with the
// contract's properties; otherwise what is wrong, naming the call (StageSteps(...)).
std::string JudgeProbe(const std::vector<ProbeLayout>& layouts, const std::string& text);

}  // namespace distlm::task7
