#include "common/runtime/runfiles.h"

#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"

namespace distlm {

std::string FindRunfile(const std::string& path) {
  std::vector<std::string> roots;
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* v = std::getenv(var); v && *v) roots.push_back(v);
  }
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    roots.push_back(std::string(exe) + ".runfiles");
  }
  for (const auto& root : roots) {
    std::string candidate = root + "/distlm/" + path;
    if (PathExists(candidate)) return candidate;
  }
  if (PathExists(path)) return path;
  throw UserError("cannot find the built-in file " + path +
                  " (run through bazel run, or from the workspace root)");
}

std::string UserWorkingDirectory() {
  if (const char* d = std::getenv("BUILD_WORKING_DIRECTORY"); d && *d) return d;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr) return cwd;
  return ".";
}

}  // namespace distlm
