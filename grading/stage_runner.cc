#include "grading/stage_runner.h"

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/runtime/runfiles.h"
#include "grading/train_log.h"

namespace distlm::grading {

std::vector<double> StageRun::losses() const {
  std::vector<double> out;
  for (const auto& line : log) out.push_back(NumberField(line, "loss"));
  return out;
}

std::vector<double> StageRun::grad_norms() const {
  std::vector<double> out;
  for (const auto& line : log) out.push_back(NumberField(line, "grad_norm"));
  return out;
}

std::string StageRun::ReadOutput(const std::string& name, size_t max_bytes) const {
  std::string out, why;
  bool truncated = false;
  return ReadUntrustedFile(trusted_root, output_dir + "/" + name, output_owner, max_bytes, &out, &truncated, &why,
                           root_identity)
             ? out
             : "";
}

bool StageRun::ReadOutput(const std::string& name, size_t max_bytes, std::string* out, std::string* why) const {
  bool truncated = false;
  if (!ReadUntrustedFile(trusted_root, output_dir + "/" + name, output_owner, max_bytes, out, &truncated, why,
                         root_identity)) {
    return false;
  }
  if (truncated) {
    *why = name + " is over " + std::to_string(max_bytes >> 20) + " MiB";
    return false;
  }
  return true;
}

std::string LaunchBinary() { return FindRunfile("tools/launch"); }

std::string MpirunBinary() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    std::string p = std::string(dir) + "/mpirun";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

StageRun RunStage(const std::string& binary, int nproc, Launcher launcher, const std::vector<std::string>& flags,
                  const StageRunOptions& options) {
  StageRun run;
  run.trusted_root = options.output_root.empty() ? MakeTempDir("stage_run") : options.output_root;
  run.output_dir = run.trusted_root + "/out";
  // Taken before any of the run's code starts: the folder as the grader made it.
  run.root_identity = IdentityOf(run.trusted_root);
  run.output_owner = options.output_owner;
  SandboxCommand c;
  // The launcher stops the ranks itself a few seconds before the sandbox would, and says which
  // ones were still running.
  const int launcher_timeout = std::max(1, static_cast<int>(options.limits.timeout_s) - 10);
  switch (launcher) {
    case Launcher::kSingle:
      c.argv = {binary};
      break;
    case Launcher::kLaunch:
      c.argv = {options.launcher.empty() ? LaunchBinary() : options.launcher, "--nproc_per_node=" + std::to_string(nproc),
                "--timeout_s=" + std::to_string(launcher_timeout), "--grace_s=3"};
      if (options.no_spawn) c.argv.push_back("--no_spawn");
      if (options.lost.rank >= 0) c.argv.push_back("--join_ranks=" + std::to_string(options.lost.rank));
      c.argv.insert(c.argv.end(), {"--", binary});
      break;
    case Launcher::kMpirun:
      // Loopback TCP only, no core binding (2 cores, up to 4 ranks), more ranks than cores.
      c.argv = {MpirunBinary(), "--oversubscribe", "--bind-to", "none", "-np", std::to_string(nproc),
                "--mca", "btl", "self,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
                binary, "--backend=mpi"};
      c.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
      c.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
      break;
  }
  for (const auto& f : flags) c.argv.push_back(f);
  c.argv.push_back("--output_dir=" + run.output_dir);
  for (const auto& [k, v] : options.env) c.env[k] = v;
  if (options.lost.rank >= 0) {
    if (launcher != Launcher::kLaunch) throw std::logic_error("RunStage: a lost worker needs the launcher");
    c.env["DISTLM_FAULT_KILL"] = std::to_string(options.lost.rank) + ":" + std::to_string(options.lost.update);
  }
  c.unset_env = options.unset_env;
  SandboxLimits limits = options.limits;
  std::optional<tools::NoSpawnFilter> filter;
  if (options.no_spawn && launcher == Launcher::kSingle) {
    filter = tools::NoSpawnFilter::ExecOnce();
    limits.no_spawn = &*filter;
  }
  SandboxResult r = RunSandboxed(c, limits);
  run.network_bytes = r.loopback_bytes;
  run.peak_memory_bytes = r.peak_memory_bytes;
  run.peak_cpu_seconds = r.peak_cpu_seconds;
  run.run_memory_bytes = r.run_memory_bytes;
  run.run_cpu_seconds = r.run_cpu_seconds;
  run.accounting_note = r.accounting_note;
  run.signal = r.signal;
  run.output = r.output;
  run.network_isolated = r.network_isolated;
  run.loopback_rate = r.loopback_rate;
  run.isolation_note = r.isolation_note;
  run.seconds = r.seconds;
  // The launcher exits 124 when its own --timeout_s passed (tools/launcher.h).
  run.timed_out = r.timed_out || (launcher == Launcher::kLaunch && r.exit_code == 124);
  run.exit_code = r.exit_code;
  run.disk_limit_hit = r.disk_limit_hit;
  run.inode_limit_hit = r.inode_limit_hit;
  // A log is a few hundred bytes per update; what a broken (or hostile) program writes beyond
  // this is not read.
  constexpr size_t kMaxLogBytes = 64 << 20;
  std::string text;
  bool truncated = false;
  if (!ReadUntrustedFile(run.trusted_root, run.output_dir + "/train_log.jsonl", run.output_owner, kMaxLogBytes, &text,
                         &truncated, &run.log_problem, run.root_identity)) {
    text.clear();
  }
  ParseTrainLog(text, &run.log, &run.bad_log_lines);
  if (truncated) run.bad_log_lines.push_back("(train_log.jsonl is larger than 64 MiB; the rest was not read)");
  return run;
}

StageRun RunStage(const std::string& binary, int nproc, Launcher launcher, const std::vector<std::string>& flags,
                  double timeout_s) {
  StageRunOptions options;
  options.limits.timeout_s = timeout_s;
  return RunStage(binary, nproc, launcher, flags, options);
}

std::string CompareLosses(const std::vector<double>& expected, const std::vector<double>& got, size_t n,
                          double rel_tol) {
  std::ostringstream msg;
  if (got.size() < n || expected.size() < n) {
    msg << "expected at least " << n << " logged updates, found " << got.size();
    return msg.str();
  }
  for (size_t i = 0; i < n; ++i) {
    double rel = std::abs(got[i] - expected[i]) / std::max(std::abs(expected[i]), 1e-12);
    if (!(rel <= rel_tol)) {
      msg.precision(9);
      msg << "the loss of update " << i + 1 << " is " << got[i] << " but should be " << expected[i]
          << " (relative difference " << rel << " > " << rel_tol << ")";
      if (i == 0) {
        msg << "; this loss is computed before any optimizer step, so the model, the data or the batch "
               "already differ";
      } else {
        msg << "; " << (i == 1 ? std::string("the loss of update 1 matched") : "the losses of updates 1.." + std::to_string(i) + " matched")
            << ", so optimizer step " << i << " was the first to differ";
      }
      return msg.str();
    }
  }
  return "";
}

}  // namespace distlm::grading
