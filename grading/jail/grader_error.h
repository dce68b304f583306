// The error the grader throws when it cannot work itself (its own runs fail, the kit cannot be
// made, the jail this machine can give is less than asked): never for what a submission does.
#pragma once

#include <stdexcept>
#include <string>

namespace distlm::grading {

class GraderError : public std::runtime_error {
 public:
  explicit GraderError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace distlm::grading
