// student_kit: write the student release of this repository.
//
//   bazel run //tools:student_kit -- --out=DIR [--source=CHECKOUT]
//
// The kit is the repository without reference solutions, without the grader, and without
// what only they use; it builds, and its stubs fail with TODO(student) messages. See
// tools/student_kit.h for what is left out and how BUILD files are edited in the copy.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/runtime/errors.h"
#include "common/runtime/user_path.h"
#include "tools/student_kit.h"

ABSL_FLAG(std::string, out, "", "folder to write the kit to (created; must be empty)");
ABSL_FLAG(std::string, source, "",
          "the checkout to make the kit from; default: the workspace `bazel run` was called in");
ABSL_FLAG(std::string, revision, "HEAD",
          "the commit of --source to make the kit from; empty: the working tree's tracked files");
ABSL_FLAG(bool, verbose, false, "list every file left out and every rule removed");

namespace {

int Main(int argc, char** argv) {
  auto rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) throw distlm::UserError("unexpected argument '" + std::string(rest[1]) + "'");
  distlm::tools::KitOptions options;
  options.out_dir = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_out));
  options.source_root = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_source));
  options.revision = absl::GetFlag(FLAGS_revision);
  if (options.source_root.empty()) {
    const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY");
    if (ws == nullptr || *ws == '\0') throw distlm::UserError("--source: not given, and not run by `bazel run`");
    options.source_root = ws;
  }
  if (options.out_dir.empty()) throw distlm::UserError("--out: required (the folder to write the kit to)");
  distlm::tools::KitReport r = distlm::tools::MakeStudentKit(options);
  const bool verbose = absl::GetFlag(FLAGS_verbose);
  std::printf("student kit: %zu files written to %s\n", r.copied.size(), options.out_dir.c_str());
  std::printf("left out: %zu files%s\n", r.left_out.size(), verbose ? ":" : " (--verbose lists them)");
  if (verbose) {
    for (const auto& l : r.left_out) std::printf("  %s\n", l.c_str());
  }
  std::printf("removed from BUILD files: %zu rules%s\n", r.removed_rules.size(), verbose ? ":" : "");
  if (verbose) {
    for (const auto& l : r.removed_rules) std::printf("  %s\n", l.c_str());
  }
  for (const auto& w : r.warnings) std::printf("note: %s\n", w.c_str());
  std::printf("checked: no reference/ folder, no file equal to a left-out one, every label resolves\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "writes the student release: the repository without reference solutions and the grader.\n"
      "usage: student_kit --out=DIR [--source=CHECKOUT] [--revision=HEAD] [--verbose]");
  return distlm::RunMain([&] { return Main(argc, argv); });
}
