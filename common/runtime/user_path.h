// Paths a user typed on a command line, taken from where they typed it rather than from the
// folder `bazel run` starts the binary in.
#pragma once

#include <cstdlib>
#include <string>

namespace distlm {

// `path` as given when it is absolute, empty or not under `bazel run`; otherwise
// $BUILD_WORKING_DIRECTORY/path.
inline std::string FromUserWorkingDirectory(const std::string& path) {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  if (path.empty() || path[0] == '/' || dir == nullptr || *dir == '\0') return path;
  return std::string(dir) + "/" + path;
}

}  // namespace distlm
