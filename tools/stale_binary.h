// Warns when the launcher is about to start a Bazel-built binary older than its package's
// sources: `bazel run //tools:launch -- ... bazel-bin/task2b/reference` does not rebuild
// task2b/reference, so after an edit the ranks would silently run the old code.
#pragma once

#include <optional>
#include <string>

namespace distlm::tools {

// executable: the file about to run. When it lies in a Bazel output tree (its real path holds
// .../bazel-out/<config>/bin/<package>/<name>) and some file under workspace/<package> was
// modified after it, returns one line naming both and the build command; otherwise nullopt
// (not a Bazel output, no such package in workspace, or up to date). Hidden entries and
// bazel-* links are skipped.
std::optional<std::string> StaleBinaryWarning(const std::string& executable, const std::string& workspace);

// The workspace to compare against: $BUILD_WORKSPACE_DIRECTORY (set by `bazel run`), else the
// nearest folder at or above start that holds a WORKSPACE file; "" when there is none or it
// is a runfiles tree.
std::string FindWorkspace(const std::string& start);

}  // namespace distlm::tools
