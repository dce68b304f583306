// GradeReport: the verdict as Gradescope's results.json and as a terminal summary.
#include "grading/autograder.h"

#include <sstream>

#include "grading/trace.h"

namespace distlm::grading {

double GradeReport::score() const {
  double s = 0;
  for (const auto& t : tests) s += t.score;
  return s;
}

double GradeReport::max_score() const {
  double s = 0;
  for (const auto& t : tests) s += t.max_score;
  return s;
}

nlohmann::json GradeReport::ToGradescope() const {
  nlohmann::json tests_json = nlohmann::json::array();
  for (const auto& t : tests) {
    tests_json.push_back({{"name", t.name},
                          {"score", t.score},
                          {"max_score", t.max_score},
                          {"status", t.passed ? "passed" : "failed"},
                          {"output", t.output},
                          {"visibility", "visible"}});
  }
  std::string output;
  for (const auto& n : notes) output += n + "\n";
  // Plain text everywhere: a message quotes what a submission printed, which must not become
  // HTML or Markdown on Gradescope's page.
  return {{"score", score()},
          {"execution_time", execution_time_s},
          {"output", output},
          {"output_format", "text"},
          {"test_output_format", "text"},
          {"test_name_format", "text"},
          {"visibility", "visible"},
          {"tests", tests_json}};
}

std::string GradeReport::Summary() const {
  std::ostringstream s;
  s << "distlm autograder: " << Fmt("%g", score()) << " / " << Fmt("%g", max_score()) << " points\n";
  for (const auto& t : tests) {
    s << "  " << (t.passed ? "PASS" : "FAIL") << "  " << Fmt("%4g", t.score) << "/" << Fmt("%-3g", t.max_score) << " "
      << t.name << "\n";
  }
  if (!notes.empty()) {
    s << "notes:\n";
    for (const auto& n : notes) s << "  " << n << "\n";
  }
  for (const auto& t : tests) {
    if (t.passed) continue;
    s << "\n--- " << t.name << " (" << Fmt("%g", t.score) << "/" << Fmt("%g", t.max_score) << ")\n" << t.output;
  }
  return s.str();
}

}  // namespace distlm::grading
