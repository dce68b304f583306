// Reading BUILD files without Bazel, as the student kit does (tools/student_kit.h): statements,
// the strings in them, which of those are workspace labels, and which functions a statement
// calls (the helpers of //common/stages:stages.bzl).
#pragma once

#include <string>
#include <vector>

namespace distlm::tools {

// One top-level statement of a BUILD file, with the comment lines right above it.
struct BuildStatement {
  std::string text;                  // exactly as in the file, with its final newline
  std::string name;                  // the name = "..." argument of a rule; "" otherwise
  std::vector<std::string> strings;  // every string literal in it
  bool is_comment_or_blank = false;  // free comment lines and blank lines between statements
};

// Splits a BUILD file into statements (brackets, strings and comments are understood);
// concatenating the texts gives the file back.
std::vector<BuildStatement> SplitBuildFile(const std::string& text);

struct Label {
  std::string package;  // workspace-relative folder
  std::string name;
  bool bare = false;    // "x" or "dir/x": a file or a rule of the same package
};

// Parses a string of a BUILD file as a workspace label; false for external repositories,
// //visibility:..., //conditions:... and anything that is not a label at all (spaces, globs,
// make variables).
bool ParseLabel(const std::string& s, const std::string& package, Label* out);

// True when `text` calls `name`: the name as a whole word, then optional spaces, then '('.
bool CallsFunction(const std::string& text, const std::string& name);

// The rule distlm_stage() of //common/stages:stages.bzl makes a stage's targets out of sight of
// a reader of the BUILD file. Its names, kept in step with the macro: those made from student/
// (which the kit keeps) and those made from reference/ (which the kit has no source for, so
// the macro makes none there).
inline constexpr const char* kStageMacro = "distlm_stage";
inline constexpr const char* kStageMacroStudentTargets[] = {"student_impl", "student", "student_test"};
inline constexpr const char* kStageMacroReferenceTargets[] = {"reference_impl", "reference", "reference_student_test"};

// The rule names a statement defines: its name = "..." argument, or, for a distlm_stage() call,
// the names the macro makes from student/ (and, with `with_reference`, from reference/).
std::vector<std::string> DefinedNames(const BuildStatement& st, bool with_reference);

// The non-empty parts of a '/'-separated path.
std::vector<std::string> SplitPath(const std::string& path);

}  // namespace distlm::tools
