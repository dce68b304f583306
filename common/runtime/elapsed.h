// Milliseconds since a steady_clock moment: the one way the stages time their phases.
#pragma once

#include <chrono>

namespace distlm {

inline double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace distlm
