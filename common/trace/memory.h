// What a trace says about each rank's memory: its peak over the traced updates (the "memory"
// counter, bytes in use on the device), the phase running when it was reached, and what of it
// the model's state was (the "model state" counter: parameters, gradients, optimizer state as
// the rank holds them); the rest is activations, communication buffers and workspace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace distlm::trace {

struct MemoryPeak {
  int rank = 0;
  int64_t peak_bytes = -1;  // the allocator's peak; -1: no memory counter
  double at_ms = 0;         // the highest sample of bytes in use, since the first traced update began
  std::string during;       // the phase it followed ("after backward", ...) or was inside
  int64_t param_bytes = -1, grad_bytes = -1, opt_bytes = -1;  // the last "model state" counter
  int64_t other_bytes() const;  // the peak less the model's state (-1 when either is unknown)
  nlohmann::json ToJson() const;
};

// One per rank of a Chrome trace (one rank's file or a merged one).
std::vector<MemoryPeak> MemoryPeaks(const nlohmann::json& trace);

// A line per rank: the peak, when, and what it held, in MiB.
std::string MemoryTable(const std::vector<MemoryPeak>& peaks);

}  // namespace distlm::trace
