// 7b's schedule, asked directly. The grader runs the stage's binary with
//   --schedule_probe=SCHEDULE:STAGES:MICRO_BATCHES[,...]   (SCHEDULE: afab or 1f1b)
// on layouts it draws for each grading, and reads from schedule_probe.txt in --output_dir what
// StageSteps returned for every stage of each: one line a stage,
//   "1f1b 5 7 2: F0 F1 F2 B0 F3 B1 ..."   (schedule, stages, micro-batches, stage: its steps)
//   "1f1b 5 7 2: threw: <what()>"
// Nothing is trained; under a launcher rank 0 answers and the others exit. Given code: the
// stage's main runs it before anything else.
#pragma once

#include <vector>

#include "task7/pipeline_schedule.h"

namespace distlm::task7 {

using StageStepsFunction = std::vector<PipelineStep> (*)(PipelineSchedule, int, int, int);

// When argv holds --schedule_probe: answers it with `steps` (the binary's StageSteps) and returns
// true with the process's exit code in *exit_code (2, with one line on stderr, for a probe or
// folder it cannot use).
bool RunScheduleProbeIfAsked(int argc, char** argv, StageStepsFunction steps, int* exit_code);

}  // namespace distlm::task7
