// plot: training runs side by side, for the report.
//
//   bazel run //tools:plot -- RUN_DIR [RUN_DIR...] [--out=DIR]
//
// DIR/loss.png overlays the runs' training losses per update (one line per run, named by its
// folder); DIR/iteration_time.png gives each run's mean iteration time over iterations 2..40 as
// a bar (the handout's figure). Default DIR: ./distlm_plots. Each run also has its own plots in
// RUN_DIR/plots/ (written when it finished).
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/runtime/errors.h"
#include "common/runtime/user_path.h"
#include "common/train/plots.h"

ABSL_FLAG(std::string, out, "distlm_plots", "the folder the plots go to");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("overlays training runs: plot RUN_DIR [RUN_DIR...] [--out=DIR]");
  return distlm::RunMain([&]() -> int {
    auto rest = absl::ParseCommandLine(argc, argv);
    std::vector<std::string> runs;
    for (size_t i = 1; i < rest.size(); ++i) runs.push_back(distlm::FromUserWorkingDirectory(rest[i]));
    if (runs.empty()) throw distlm::UserError("give one or more run folders (each holding train_log.jsonl)");
    const std::string out = distlm::FromUserWorkingDirectory(absl::GetFlag(FLAGS_out));
    for (const auto& f : distlm::train::WriteComparisonPlots(runs, out)) std::printf("wrote %s\n", f.c_str());
    return 0;
  });
}
