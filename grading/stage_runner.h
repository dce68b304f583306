// Running a stage binary the way the course does (one process, the local launcher, or mpirun)
// and reading back what it logged. Used by the parity suite and the autograder.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace distlm::grading {

enum class Launcher {
  kSingle,  // the binary itself
  kLaunch,  // //tools:launch --nproc_per_node=N (gloo over 127.0.0.1)
  kMpirun,  // mpirun -np N ... --backend=mpi (loopback TCP)
};

struct StageRun {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;                // every rank's console output
  std::string output_dir;
  std::vector<nlohmann::json> log;   // train_log.jsonl, one object per update
  std::vector<double> losses() const;
};

// Runs `binary` (an absolute path) with `flags` plus --output_dir=<fresh temp dir>, on nproc
// ranks, within timeout_s.
StageRun RunStage(const std::string& binary, int nproc, Launcher launcher,
                  const std::vector<std::string>& flags, double timeout_s);

// "" when the first n losses of `got` are each within rel_tol (relative) of `expected`;
// otherwise one readable paragraph saying where they part and by how much.
std::string CompareLosses(const std::vector<double>& expected, const std::vector<double>& got, size_t n,
                          double rel_tol);

// The launcher and mpirun paths (for messages and tests).
std::string LaunchBinary();
std::string MpirunBinary();

}  // namespace distlm::grading
