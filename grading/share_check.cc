#include "grading/share_check.h"

#include "grading/trace.h"

namespace distlm::grading {
namespace {

std::string Mb(double bytes) { return Fmt("%.1f", bytes / 1e6) + " MB"; }
std::string Sec(double s) { return Fmt("%.2f", s) + " s"; }

}  // namespace

void ShareVerdict::Judge(TestResult* parity) const {
  if (message.empty()) return;
  if (ok) {
    parity->output += message;
    return;
  }
  parity->passed = false;
  parity->score = 0;
  parity->output = message + "\n" + parity->output;
}

ShareVerdict CheckShare(const ShareFigures& run, const ShareYardstick& y) {
  ShareVerdict v;
  const int others = y.ranks - 1;
  if (others < 1) return v;
  const std::string each = Fmt("%g", 8.0 / y.ranks);
  std::string figures, problems;

  const ShareFigures &dp = y.data_parallel, &one = y.single;
  if (dp.peak_memory_bytes > 0 && one.peak_memory_bytes > 0 &&
      (one.peak_memory_bytes - dp.peak_memory_bytes) / others >= kMinShareBytes) {
    const double share = static_cast<double>(one.peak_memory_bytes - dp.peak_memory_bytes) / others;
    const std::string theirs = "the grader's own data-parallel run " + Mb(dp.peak_memory_bytes) +
                               ", the whole batch on one process " + Mb(one.peak_memory_bytes) + ": about " + Mb(share) +
                               " a rank's share";
    if (run.peak_memory_bytes < 0) {
      v.ok = false;
      problems += "the grader could not read the memory of your ranks while they ran (" + theirs + ")\n";
    } else {
      v.memory_judged = true;
      const double over = static_cast<double>(run.peak_memory_bytes - dp.peak_memory_bytes);
      if (over > kMemoryAllowanceShares * share) {
        v.ok = false;
        problems += "your largest rank held " + Mb(run.peak_memory_bytes) + " at its peak (the kernel's count, read by "
                    "the grader outside your processes), the activations of " + Fmt("%.1f", over / share) +
                    " ranks' shares more than the grader's largest rank (" + theirs + ")\n";
      } else {
        figures += "your largest rank held " + Mb(run.peak_memory_bytes) + " at its peak; " + theirs + "\n";
      }
    }
  }
  if (dp.peak_cpu_seconds > 0 && one.peak_cpu_seconds - dp.peak_cpu_seconds >= kMinCpuGapSeconds) {
    const double gap = one.peak_cpu_seconds - dp.peak_cpu_seconds;
    const std::string theirs = "the grader's own data-parallel run's busiest rank " + Sec(dp.peak_cpu_seconds) +
                               ", the whole batch on one process " + Sec(one.peak_cpu_seconds);
    if (run.peak_cpu_seconds < 0) {
      v.ok = false;
      problems += "the grader could not read the CPU time of your ranks while they ran (" + theirs + ")\n";
    } else {
      v.cpu_judged = true;
      if (run.peak_cpu_seconds > dp.peak_cpu_seconds + kCpuAllowanceOfGap * gap) {
        v.ok = false;
        problems += "your busiest rank used " + Sec(run.peak_cpu_seconds) + " of CPU time (the kernel's count), " +
                    Fmt("%.0f", 100 * (run.peak_cpu_seconds - dp.peak_cpu_seconds) / gap) +
                    " % of the way from the grader's own data-parallel run to the whole batch on one process (" +
                    theirs + ")\n";
      } else {
        figures += "your busiest rank used " + Sec(run.peak_cpu_seconds) + " of CPU time; " + theirs + "\n";
      }
    }
  }
  if (!v.ok) {
    v.message = "not credited: at 512 tokens a sequence, where a rank's share of the batch (" + each +
                " examples) outweighs the rest of its work, " + problems +
                "so at least one rank trained on more than its own share: a data-parallel rank computes the "
                "gradients of its " + each + " examples and gets the others' through the synchronisation; "
                "whatever the log says, the grader counts what the ranks held and computed\n";
  } else if (!figures.empty()) {
    v.message = "each rank's share, at 512 tokens a sequence (measured by the grader, outside your processes): " + figures;
  } else {
    v.message = "each rank's share: not judged here (the grader's own runs were not measured, or too close to tell "
                "apart)\n";
  }
  return v;
}

}  // namespace distlm::grading
