// One line of a grading's results: what results.json's "tests" holds, and what a stage's own
// checks (grading/stage_grading.h) return.
#pragma once

#include <string>

namespace distlm::grading {

struct TestResult {
  std::string name;
  double score = 0;
  double max_score = 0;
  bool passed = false;
  std::string output;
};

}  // namespace distlm::grading
