// The message a test expects a function to fail with.
#pragma once

#include <functional>
#include <string>

#include "common/runtime/errors.h"

namespace distlm::testing {

// The message of the UserError `f` throws; "" when it throws none (any other exception goes on
// and fails the test with its own message).
inline std::string UserErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace distlm::testing
