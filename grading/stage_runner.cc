#include "grading/stage_runner.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/testing/subprocess.h"

namespace distlm::grading {

std::vector<double> StageRun::losses() const {
  std::vector<double> out;
  for (const auto& line : log) out.push_back(line.value("loss", NAN));
  return out;
}

std::string LaunchBinary() { return testing::Runfile("tools/launch"); }

std::string MpirunBinary() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
    std::string p = std::string(dir) + "/mpirun";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

StageRun RunStage(const std::string& binary, int nproc, Launcher launcher,
                  const std::vector<std::string>& flags, double timeout_s) {
  StageRun run;
  run.output_dir = testing::MakeTempDir("stage_run") + "/out";
  testing::Command c;
  switch (launcher) {
    case Launcher::kSingle:
      c.argv = {binary};
      break;
    case Launcher::kLaunch:
      c.argv = {LaunchBinary(), "--nproc_per_node=" + std::to_string(nproc), "--timeout_s=" + std::to_string(static_cast<int>(timeout_s)), "--", binary};
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
  auto r = testing::Run(c, timeout_s);
  run.exit_code = r.exit_code;
  run.timed_out = r.timed_out;
  run.output = r.output;
  std::ifstream in(run.output_dir + "/train_log.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) run.log.push_back(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
  }
  return run;
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
      if (i > 0) msg << "; updates 1.." << i << " matched, so the first optimizer step already differed";
      return msg.str();
    }
  }
  return "";
}

}  // namespace distlm::grading
