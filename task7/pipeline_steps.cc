// Given code of task 7b: a schedule's steps as text, for messages.
#include "task7/pipeline_schedule.h"

namespace distlm::task7 {

std::string StepsToString(const std::vector<PipelineStep>& steps) {
  std::string out;
  for (const auto& s : steps) out += (out.empty() ? "" : " ") + std::string(s.forward ? "F" : "B") + std::to_string(s.micro_batch);
  return out;
}

}  // namespace distlm::task7
