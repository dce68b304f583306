// The message of a failed parity test: why a completed run's losses and gradient norms differ
// from the grader's single-node trace. The grader's runs of the usual mistakes
// (grading/mutant_stage) come first: a trace that matches one is named for it; then what the
// numbers themselves say (a gradient norm N times too large, nothing communicated, a learning
// rate off the schedule, ...). The messages are grading/README.md's "Messages".
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/stage_grading.h"
#include "grading/trace.h"

namespace distlm::grading {

// The grader's traces of the known mistakes, made on first call (they cost runs: only a failing
// trace asks for them).
using MistakeRuns = std::function<const std::vector<KnownMistake>&()>;

// `ranks`: of the graded run (1 for part 1). `own_mistakes`: the runs of the stage's own known
// mistakes (StageGrading::OwnMistakes), asked for only when `grading` may need them.
std::string Diagnose(const Trace& got, const Trace& want, const stages::Row& st, const StageGrading& grading,
                     int ranks, const MistakeRuns& mistakes, const MistakeRuns& own_mistakes);

}  // namespace distlm::grading
