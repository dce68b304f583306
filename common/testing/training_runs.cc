#include "common/testing/training_runs.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace distlm::testing {

std::vector<nlohmann::json> LogLines(const std::string& output_dir) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(output_dir + "/train_log.jsonl");
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::vector<double> LoggedLosses(const std::string& output_dir) {
  std::vector<double> out;
  for (const auto& line : LogLines(output_dir)) out.push_back(line.at("loss").get<double>());
  return out;
}

ProcessResult RunAndKillAfterUpdates(const std::vector<std::string>& argv, const std::string& output_dir, int updates,
                                     double timeout_s) {
  std::string cmd;
  for (const auto& a : argv) cmd += a + " ";
  cmd += ">/dev/null 2>&1 & pid=$!; while [ \"$(cat " + output_dir + "/train_log.jsonl 2>/dev/null | wc -l)\" -lt " +
         std::to_string(updates) + " ]; do kill -0 $pid 2>/dev/null || exit 3; sleep 0.01; done; " +
         "kill -9 $pid; wait $pid; sleep 1; exit 0";
  return Run(Command{{"/bin/sh", "-c", cmd}, {}}, timeout_s);
}

}  // namespace distlm::testing
