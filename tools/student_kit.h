// The student release of the repository: every tracked file except the reference solutions
// (each `reference/` folder), the grader (`grading/`), the instructor guide
// (`docs/instructor.md`, which lists the grader's mutants), and whatever only they use.
//
// BUILD files are edited in the copy, not in the repository: a rule that names a left-out
// file or depends on a removed rule is removed too (with the comment lines right above it),
// until nothing refers to what is gone; then a source file (code, not documents) that only
// removed rules used is left out as well (part1's tests of the reference binary). The result is
// checked before it is reported: no `reference` folder, no file equal to a left-out one, and
// every workspace label in the remaining BUILD files names a rule or file that exists.
#pragma once

#include <string>
#include <vector>

#include "tools/build_file.h"  // SplitBuildFile, which the kit and its tests use

namespace distlm::tools {

struct KitOptions {
  std::string source_root;  // a checkout (or, without git, a plain tree: all its files)
  std::string out_dir;      // created; must not exist or be empty
  // In a git checkout, the commit the kit is made from; "" = the working tree's tracked files
  // (uncommitted edits included).
  std::string revision = "HEAD";
};

struct KitReport {
  std::vector<std::string> copied;         // relative paths written to out_dir
  std::vector<std::string> left_out;       // "path: why"
  std::vector<std::string> removed_rules;  // "//pkg:name (why)"
  std::vector<std::string> warnings;       // e.g. a document naming a removed target
};

// Writes the kit; throws distlm::UserError (one line) when the source cannot be read, out_dir
// is not empty, or the kit fails its own checks.
KitReport MakeStudentKit(const KitOptions& options);

// True for a path (relative, '/'-separated) the kit never contains: inside a `reference`
// folder, grading/, or an instructor-only document (docs/instructor.md).
bool IsPrivatePath(const std::string& path);

}  // namespace distlm::tools
