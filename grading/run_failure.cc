#include "grading/run_failure.h"

#include <set>
#include <sstream>

#include "grading/jail/sandbox.h"
#include "grading/text.h"
#include "grading/trace.h"

namespace distlm::grading {
namespace {

// "[rank 2] error: x" -> "rank 2: error: x"; the first few distinct error lines.
std::vector<std::string> ErrorLines(const std::string& output, size_t max) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& line : Lines(output)) {
    std::string body = line, who;
    if (body.rfind("[rank ", 0) == 0) {
      auto close = body.find("] ");
      if (close != std::string::npos) {
        who = body.substr(1, close - 1) + ": ";
        body = body.substr(close + 2);
      }
    }
    if (body.rfind("error: ", 0) != 0 && body.rfind("launch: ", 0) != 0 && body.find("terminate called") == std::string::npos) {
      continue;
    }
    if (body.rfind("launch: started", 0) == 0) continue;
    if (seen.insert(body).second && out.size() < max) out.push_back(QuotedLine(who + body, 400));
  }
  return out;
}

}  // namespace

std::string DiskLimitMessage(bool inodes, const GraderConfig& config) {
  if (inodes) return "it made more than " + std::to_string(config.disk_limit_inodes) + " files and folders";
  return "it wrote more than " + Fmt("%.0f", static_cast<double>(config.disk_limit_bytes) / (1 << 30)) + " GiB to the disk";
}

std::string RunFailureMessage(const StageRun& r, const stages::Row& st, const GraderConfig& config) {
  std::ostringstream m;
  const std::string todo_marker = "TODO(student)";
  std::vector<std::string> errors = ErrorLines(r.output, 6);
  if (r.output.find(todo_marker) != std::string::npos) {
    std::string line;
    for (const auto& l : Lines(r.output)) {
      if (l.find(todo_marker) != std::string::npos) {
        line = l;
        break;
      }
    }
    // "TODO(student): task2a SyncGradients (gather + scatter) is not implemented yet; ..."
    std::string what = st.what;
    const size_t from = line.find(todo_marker + ": "), to = line.find(" is not implemented");
    if (from != std::string::npos && to != std::string::npos && to > from) {
      what = line.substr(from + todo_marker.size() + 2, to - from - todo_marker.size() - 2);
    }
    m << "your " << Printable(what) << " still calls StudentTodo (the stub is still in place):\n" << QuotedLine(Trim(line)) << "\n";
    return m.str();
  }
  const bool oom = r.output.find("can't allocate memory") != std::string::npos ||
                   r.output.find("std::bad_alloc") != std::string::npos ||
                   r.output.find("Cannot allocate memory") != std::string::npos;
  const bool mismatch = r.output.find("gloo::EnforceNotMet") != std::string::npos ||
                        r.output.find("preamble.length") != std::string::npos;
  const bool collective_timeout = r.output.find("Timed out") != std::string::npos ||
                                  r.output.find("timed out waiting") != std::string::npos ||
                                  r.output.find("Connection closed by peer") != std::string::npos;
  if (r.disk_limit_hit) {
    m << "was stopped: " << DiskLimitMessage(r.inode_limit_hit, config) << " (a run here needs a few MiB and files).\n";
  } else if (r.timed_out) {
    m << "no progress within " << Fmt("%.0f", config.run_timeout_s) << " s (" << r.log.size() << " of " << kSteps
      << " updates logged): a rank is probably waiting in a collective the others never called (for example "
         "only rank 0 calls gather or scatter, or the ranks call their collectives in different orders or "
         "with different sizes), or a loop never ends.\n";
  } else if (oom) {
    m << "ran out of memory: each process may use at most "
      << Fmt("%.1f", static_cast<double>(config.memory_limit_bytes) / (1 << 30))
      << " GiB of address space here. Allocate one buffer per update (not per parameter and step), and free "
         "what you gathered once you have the average.\n";
  } else if (mismatch) {
    m << "the ranks' collectives did not match: one rank called a collective (or a size) the others did not, "
         "so Gloo received a message of the wrong size and aborted. Every rank must call the same collectives, "
         "in the same order, on tensors of the same sizes (rank 0 included: `if (rank == 0)` around a "
         "collective is the usual cause).\n";
  } else if (r.signal != 0 || r.exit_code > 128) {
    const int sig = r.signal != 0 ? r.signal : r.exit_code - 128;
    m << "crashed with " << SignalName(sig);
    if (sig == 11) m << " (segmentation fault: an invalid memory access, e.g. reading past a tensor's end)";
    m << ".\n";
  } else if (collective_timeout) {
    m << "a collective failed or timed out: a rank probably waited in a collective the others never called "
         "(for example only rank 0 calls it, or the ranks call collectives in different orders).\n";
  } else if (r.exit_code != 0) {
    m << "exited with code " << r.exit_code << ".\n";
  } else if (!r.bad_log_lines.empty()) {
    m << "train_log.jsonl has lines that are not JSON objects, e.g.:\n" << QuotedLine(r.bad_log_lines[0]) << "\n";
  } else if (r.log.size() < kSteps) {
    m << "finished, but logged " << r.log.size() << " of the " << kSteps << " updates asked for"
      << (r.log_problem.empty() || r.log.size() > 0 ? "" : " (" + r.log_problem + ")") << ".\n";
  }
  // A rank killed by a signal, as the launcher reports it.
  for (const auto& e : errors) {
    if (e.find("was killed by signal") != std::string::npos && m.str().find("crashed") == std::string::npos) {
      m << "a rank crashed:\n" << e << "\n";
      break;
    }
  }
  if (!errors.empty()) {
    m << "errors reported:\n";
    for (const auto& e : errors) m << e << "\n";
  }
  m << "last lines of output (the program's own words, marked |):\n" << Tail(r.output, 15);
  return m.str();
}

}  // namespace distlm::grading
