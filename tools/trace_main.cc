// trace: one run's per-rank timelines merged, and what they say of each update.
//
//   bazel run //tools:trace -- RUN_DIR      (or --run_dir=RUN_DIR)
//
// RUN_DIR is a stage's --output_dir of a run with --trace (RUN_DIR/trace/rank-R-of-N.json, one
// file per rank). Writes RUN_DIR/trace/merged.json, one Chrome trace with a process per rank
// (open it in https://ui.perfetto.dev or chrome://tracing), and RUN_DIR/trace/overlap.json (its
// "updates" and "memory" below), and
// prints per update and rank: compute time, communication busy time, the part compute hid, the
// exposed rest, idle time, and the time this rank's collectives waited for a later rank
// (common/trace/overlap.h defines each). Draws RUN_DIR/trace/timeline.png and memory.png
// (common/trace/trace_plots.h) for the report.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/runtime/user_path.h"
#include "common/trace/memory.h"
#include "common/trace/merge.h"
#include "common/trace/overlap.h"
#include "common/trace/trace_plots.h"

ABSL_FLAG(std::string, run_dir, "", "the run folder (or give it as the one argument)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("merges a run's --trace files and analyses the overlap: trace RUN_DIR");
  return distlm::RunMain([&]() -> int {
    auto rest = absl::ParseCommandLine(argc, argv);
    const std::string flag = absl::GetFlag(FLAGS_run_dir);
    if (rest.size() != (flag.empty() ? 2u : 1u)) {
      throw distlm::UserError("give one run folder (a stage's --output_dir of a run with --trace), as --run_dir=DIR or as the argument");
    }
    const std::string run = distlm::FromUserWorkingDirectory(flag.empty() ? std::string(rest[1]) : flag);
    const nlohmann::json merged = distlm::trace::MergeRankTraces(run + "/trace");
    const auto rows = distlm::trace::AnalyseOverlap(merged);
    distlm::WriteFileAtomically(run + "/trace/merged.json", merged.dump() + "\n");
    nlohmann::json overlap = {{"updates", nlohmann::json::array()}, {"memory", nlohmann::json::array()}};
    for (const auto& r : rows) overlap["updates"].push_back(r.ToJson());
    const nlohmann::json& other = merged["otherData"];
    std::printf("%s: %s on %d rank(s), updates %s (times in ms)\n", run.c_str(),
                other.value("stage", std::string("?")).c_str(), other.value("world_size", 0),
                other.value("updates", nlohmann::json::array()).dump().c_str());
    std::fputs(distlm::trace::OverlapTable(rows).c_str(), stdout);
    const auto peaks = distlm::trace::MemoryPeaks(merged);
    if (!peaks.empty()) {
      std::printf("memory: each rank's peak in the traced updates, and what the model's state was of it (MiB)\n%s",
                  distlm::trace::MemoryTable(peaks).c_str());
      for (const auto& p : peaks) overlap["memory"].push_back(p.ToJson());
    }
    distlm::WriteFileAtomically(run + "/trace/overlap.json", overlap.dump(1) + "\n");
    std::printf("wrote %s/trace/merged.json (open in https://ui.perfetto.dev or chrome://tracing) and overlap.json\n",
                run.c_str());
    std::string why;
    for (const auto& f : distlm::trace::WriteTracePlots(merged, run + "/trace", &why)) std::printf("wrote %s\n", f.c_str());
    if (!why.empty()) std::printf("%s\n", why.c_str());
    return 0;
  });
}
