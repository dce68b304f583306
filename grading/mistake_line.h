// The line each mistakes test prints for every mistake it makes, which tools/mistake_table.sh
// gathers into the instructor guide's table: the part, the mistake, the local test, and what
// that test said (on one line).
#pragma once

#include <cstdio>
#include <string>

namespace distlm::grading {

inline void PrintMistake(const std::string& part, const std::string& mistake, const std::string& test,
                         const std::string& message) {
  std::string one;
  for (char c : message) one += c == '\n' ? ' ' : c;
  std::printf("MISTAKE %s | %s | %s | %s\n", part.c_str(), mistake.c_str(), test.c_str(), one.c_str());
}

}  // namespace distlm::grading
