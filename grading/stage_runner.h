// Running a stage binary the way the course does (one process, the local launcher, or mpirun)
// and reading back what it logged. Used by the parity suites and the autograder.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grading/jail/sandbox.h"
#include "grading/train_log.h"

namespace distlm::grading {

enum class Launcher {
  kSingle,  // the binary itself
  kLaunch,  // //tools:launch --nproc_per_node=N (gloo over 127.0.0.1)
  kMpirun,  // mpirun -np N ... --backend=mpi (loopback TCP)
};

struct StageRun {
  int exit_code = -1;
  bool timed_out = false;            // the launcher's --timeout_s or the sandbox's deadline
  int signal = 0;                    // the signal that ended the launcher (or the binary), if any
  std::string output;                // every rank's console output
  std::string output_dir;
  std::vector<nlohmann::json> log;   // train_log.jsonl, one object per update
  std::vector<std::string> bad_log_lines;  // lines of train_log.jsonl that are not JSON objects
  bool network_isolated = false;
  int64_t network_bytes = -1;        // sent over loopback by all ranks together, counted by the kernel; -1: not counted
  uint64_t loopback_rate = 0;        // bytes a second loopback was limited to (SandboxLimits); 0: not limited
  int64_t peak_memory_bytes = -1;    // the most any one process held resident (sandbox.h); -1: not read
  double peak_cpu_seconds = -1;      // the most CPU time any one process used (sandbox.h); -1: not read
  int64_t run_memory_bytes = -1;     // the whole run's memory in use at most, from its control group (sandbox.h)
  double run_cpu_seconds = -1;       // the whole run's CPU time, from its control group; -1: not accounted
  std::string accounting_note;       // why the run had no control group
  std::string isolation_note;
  double seconds = 0;
  bool disk_limit_hit = false;
  bool inode_limit_hit = false;      // the disk limit hit was the count of files
  std::string log_problem;           // why train_log.jsonl was not read (missing, a link out, not the student's)
  // A file the run wrote in output_dir, read as ReadUntrustedFile does (sandbox.h), its first
  // max_bytes; "" if refused.
  std::string ReadOutput(const std::string& name, size_t max_bytes = 1 << 20) const;
  // The same, false with *why when refused or longer than max_bytes.
  bool ReadOutput(const std::string& name, size_t max_bytes, std::string* out, std::string* why) const;
  std::string trusted_root;          // where its outputs must lie
  DirIdentity root_identity;         // that folder as the grader made it (a replaced one is refused)
  int64_t output_owner = -1;         // whose they must be (-1: anyone's)
  std::vector<double> losses() const;
  std::vector<double> grad_norms() const;
  // Exited 0 within its time, with at least `updates` log lines and none that is not JSON.
  bool Completed(size_t updates) const {
    return exit_code == 0 && !timed_out && log.size() >= updates && bad_log_lines.empty();
  }
};

// Task 8c's run (the launcher only): rank `rank` SIGKILLs itself in its update `update` (the
// trainer's DISTLM_FAULT_KILL), and a joiner of that rank, started with the others, takes its
// place (the launcher's --join_ranks). rank -1: every rank runs to the end.
struct LostWorker {
  int rank = -1;
  int update = 0;
  std::string Key() const { return rank < 0 ? "" : " lost " + std::to_string(rank) + ":" + std::to_string(update); }
  // For a progress line: ", rank R lost in update U and a joiner in its place"; "" for none.
  std::string Said() const {
    return rank < 0 ? "" : ", rank " + std::to_string(rank) + " lost in update " + std::to_string(update) +
                               " and a joiner in its place";
  }
};

// How a run is confined, and where its output goes.
struct StageRunOptions {
  SandboxLimits limits;                       // limits.timeout_s is the whole run's deadline
  std::string output_root;                    // output_dir is made inside; empty: a temp dir
  std::map<std::string, std::string> env;     // added for the run
  std::vector<std::string> unset_env;         // removed for the run
  std::string launcher;                       // "": the grader's //tools:launch
  int64_t output_owner = -1;                  // >= 0: outputs are read only if this uid's (a jailed run)
  // The program may start no process and execute nothing but itself (tools/no_spawn.h): the
  // launcher gets --no_spawn, a single process the same filter from the sandbox.
  bool no_spawn = false;
  LostWorker lost;
};

// Runs `binary` (an absolute path) with `flags` plus --output_dir=<fresh dir>, on nproc ranks.
// The launcher gets --timeout_s a little under the deadline, so a hang is reported by it (and
// its ranks torn down) before the sandbox has to kill anything.
StageRun RunStage(const std::string& binary, int nproc, Launcher launcher, const std::vector<std::string>& flags,
                  const StageRunOptions& options);

// The same with only a deadline.
StageRun RunStage(const std::string& binary, int nproc, Launcher launcher, const std::vector<std::string>& flags,
                  double timeout_s);

// "" when the first n losses of `got` are each within rel_tol (relative) of `expected`;
// otherwise one readable paragraph saying where they part and by how much.
std::string CompareLosses(const std::vector<double>& expected, const std::vector<double>& got, size_t n,
                          double rel_tol);

// The launcher and mpirun paths (for messages and tests).
std::string LaunchBinary();
std::string MpirunBinary();

}  // namespace distlm::grading
