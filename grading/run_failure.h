// Why a run of a student's task did not complete, in the student's terms: a stub left in
// place, a hang, running out of memory or disk, collectives that did not match, a crash, an
// exit code, a log that is not what was asked for; then the errors the ranks reported and the
// last lines of output.
#pragma once

#include <string>

#include "common/stages/stages.h"
#include "grading/autograder.h"
#include "grading/stage_runner.h"

namespace distlm::grading {

std::string RunFailureMessage(const StageRun& r, const stages::Row& st, const GraderConfig& config);

// "it wrote more than 4 GiB to the disk" or "it made more than 200000 files and folders".
std::string DiskLimitMessage(bool inodes, const GraderConfig& config);

}  // namespace distlm::grading
