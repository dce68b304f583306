// A mutant's flag as written on its command line, read before absl parses the flags: the
// mutants pick their stage's class or step from it before RunStageMain runs, then check that
// absl parsed the same value.
#pragma once

#include <string>

namespace distlm::grading {

// The value of `flag` (e.g. "--mutation") in argv ("--flag=v" or "--flag v"; the last one
// wins; nothing after "--"), or `default_value`.
inline std::string FlagFromArgv(int argc, char** argv, const std::string& flag, const std::string& default_value) {
  std::string value = default_value;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a.rfind(flag + "=", 0) == 0) value = a.substr(flag.size() + 1);
    if (a == flag && i + 1 < argc) value = argv[i + 1];
  }
  return value;
}

}  // namespace distlm::grading
