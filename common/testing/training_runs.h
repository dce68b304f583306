// Test helpers for whole training runs: the losses a run logged, and a run killed midway
// (SIGKILL, no clean-up) for the resume tests.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/testing/subprocess.h"

namespace distlm::testing {

// Every line of <output_dir>/train_log.jsonl, parsed, in order.
std::vector<nlohmann::json> LogLines(const std::string& output_dir);

// The "loss" of every line of <output_dir>/train_log.jsonl, in order.
std::vector<double> LoggedLosses(const std::string& output_dir);

// Starts `argv` (a run writing <output_dir>/train_log.jsonl) and SIGKILLs it once the log has
// `updates` lines, then waits a second for what it started (a launcher's ranks) to go. Exit
// code 0 when it was killed; 3 when it ended first.
ProcessResult RunAndKillAfterUpdates(const std::vector<std::string>& argv, const std::string& output_dir, int updates,
                                     double timeout_s);

}  // namespace distlm::testing
