// The ranks' traces of one run (OUTPUT_DIR/trace/rank-R-of-N.json, written by --trace) as one
// Chrome trace: one process per rank, already on rank 0's clock (each rank's file maps its own
// clock onto it), so merging is concatenation once the files are known to belong together.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace distlm::trace {

// Reads every rank-R-of-N.json in `trace_dir`. Throws a one-line UserError naming the file when
// one is unreadable or not a trace, when ranks are missing or files of two world sizes are
// mixed, or when the files disagree on the stage or the updates traced.
nlohmann::json MergeRankTraces(const std::string& trace_dir);

}  // namespace distlm::trace
