// A run's output folder: where it is, whether a run may write into it, and the record of how it
// was started. Apart from the Trainer so the rules a user meets (an existing folder, a resume, a
// fresh start) read in one place.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace distlm::train {

// --output_dir as given, or distlm_output/<stage>/<timestamp> under the user's working folder.
std::string ResolveOutputDir(const std::string& given, const std::string& stage);

// Makes `dir` ready for a training run (main rank only). An empty or missing folder is made; a
// folder with a snapshot is left for the resume; --overwrite_output_dir removes the previous
// run's log, evaluation results and snapshots (nothing else); any other non-empty folder is a
// UserError naming the flag. `training` false (evaluation only) writes into any folder.
void PrepareRunDir(const std::string& dir, bool training, bool overwrite);

// <dir>/training_args.json, written atomically.
void WriteTrainingArgs(const std::string& dir, const nlohmann::json& args);

}  // namespace distlm::train
