// Building a submission: a clean student kit (or a copy of a ready one), the submitted files over
// its stubs, part 1 filled in when not submitted, one `bazel build --keep_going` of every task's
// :student binary, and for each task either its binary or what the compiler said about the
// student's file (grading/README.md, "Pipeline", step 2).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/stages/stages.h"
#include "grading/autograder.h"
#include "grading/jail/student_space.h"
#include "grading/submission.h"

namespace distlm::grading {

struct BuildOutcome {
  bool ok = false;
  std::string binary;
  std::vector<std::string> flags;
  bool from_kit = false;
  std::string message;
};

// Per stage id of `graded`: built, prebuilt (`prebuilt` names a binary for it), missing files, or
// a compile error. The kit, its Bazel output and HOME are in the space's student folder, and
// Bazel runs there as the student (space->Confine() first). Notes on how it was built go to
// `notes`. Throws GraderError when the kit cannot be made or the student code cannot be confined.
std::map<std::string, BuildOutcome> BuildSubmission(const GraderConfig& config,
                                                    const std::vector<const stages::Row*>& graded,
                                                    const Submission& sub, const std::map<std::string, Prebuilt>& prebuilt,
                                                    StudentSpace* space, std::vector<std::string>* notes);

}  // namespace distlm::grading
