// Reading a submission: a directory or a .zip in the handout's deliverable layout
// (task2a/grad_sync.cc, task2b/grad_sync.cc, ...; part1/ optional). Only the student files of
// common/stages/stages.h are taken, each copied into the grader's work folder; everything else is
// reported and left alone. Nothing in a submission can make this throw: an unreadable one
// gives `fatal`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/stages/stages.h"

namespace distlm::grading {

// A submitted file larger than this is not taken (a student file is a few KiB).
inline constexpr size_t kMaxStudentFileBytes = 1 << 20;

struct SubmittedStage {
  const stages::Row* spec = nullptr;
  bool folder_present = false;                // the submission has <id>/ (or one of its files)
  std::map<std::string, std::string> files;   // student file name -> the grader's copy of it
  std::vector<std::string> missing;           // student file names not found
};

struct Submission {
  std::map<std::string, SubmittedStage> stages;  // by stage id, every stage of stages::All()
  std::vector<std::string> notes;                // how the submission was read
  std::vector<std::string> ignored;              // "path: why" for everything not taken
  std::string fatal;                             // non-empty: nothing could be read, and why
};

// Reads `path` (a directory, or a file ending in .zip) and copies the accepted files under
// work_dir/accepted/<id>/. A single top-level folder holding the stage folders (a zipped
// folder) is looked into.
Submission LoadSubmission(const std::string& path, const std::string& work_dir);

}  // namespace distlm::grading
