// Where a grading's time went, from its progress lines: each line starts a step that lasts until
// the next one (or the end), and the step is put under what the line says it does: building,
// the submission's runs of a stage, or the grader's own runs (for a stage, or shared by all: the
// single-node traces). Printed at the end of every grading, so that an instructor sees what a
// slow grading spent its time on without reading the log's timestamps.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace distlm::grading {

class TimeLedger {
 public:
  // A progress line said `seconds` after the grading began.
  void Add(const std::string& line, double seconds);
  // The steps' seconds by what they did, up to `end_seconds`: lines like
  //   "build 26 s; your runs 31 s (part1 1, task3 30); the grader's own runs 40 s (shared 3, task3 37)"
  std::string Summary(double end_seconds) const;

  // What a progress line is counted under: {"build" | "yours" | "grader" | "other", stage or ""}.
  static std::pair<std::string, std::string> Kind(const std::string& line);

 private:
  std::vector<std::pair<std::string, double>> lines_;
};

}  // namespace distlm::grading
