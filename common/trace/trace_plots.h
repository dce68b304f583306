// Pictures of a merged trace, for the report (gnuplot, as a run's own plots are drawn):
//
//   DIR/timeline.png  a row per rank's main thread and per communication lane, each span a box
//                     coloured by phase (forward, backward, synchronisation, optimizer step with
//                     clipping and AdamW inside it, snapshot; collectives), updates marked
//   DIR/memory.png    each rank's bytes in use through the traced updates (the memory counter), and
//                     the model state it holds after each update (dashed: parameters, gradients, AdamW)
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace distlm::trace {

// Writes the pictures of `merged` (MergeRankTraces) into `dir`. Returns the files written;
// *why says why none were (no gnuplot) or what failed.
std::vector<std::string> WriteTracePlots(const nlohmann::json& merged, const std::string& dir, std::string* why);

}  // namespace distlm::trace
