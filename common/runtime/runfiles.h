// Finding files that Bazel ships next to a binary (its runfiles): the built-in data set and
// vocabulary, from `bazel run`, from bazel-bin/ directly, and from tests.
#pragma once

#include <string>

namespace distlm {

// The path of workspace-relative `path` among this binary's runfiles; throws UserError when it
// is not there. Looks in $RUNFILES_DIR, $TEST_SRCDIR, <binary>.runfiles, then the working
// directory.
std::string FindRunfile(const std::string& path);

// The folder the user ran the command from: $BUILD_WORKING_DIRECTORY under `bazel run`, else
// the current directory.
std::string UserWorkingDirectory();

}  // namespace distlm
