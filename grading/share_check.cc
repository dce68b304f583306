#include "grading/share_check.h"

#include <algorithm>

#include "grading/trace.h"

namespace distlm::grading {
namespace {

std::string Mb(double bytes) { return Fmt("%.1f", bytes / 1e6) + " MB"; }
std::string Sec(double s) { return Fmt("%.2f", s) + " s"; }

}  // namespace

ShareVerdict CheckShare(const ShareFigures& run, const ShareYardstick& y) {
  ShareVerdict v;
  const int others = y.ranks - 1;
  if (others < 1) return v;
  std::string figures, problems;
  bool more = false;  // a rank over its share, not only figures missing
  const std::string split = "the grader's own " + y.split_name;
  const ShareFigures &dp = y.split, &one = y.single;
  if (dp.peak_memory_bytes > 0 && one.peak_memory_bytes > 0 &&
      (one.peak_memory_bytes - dp.peak_memory_bytes) / others >= kMinShareBytes) {
    const double share = static_cast<double>(one.peak_memory_bytes - dp.peak_memory_bytes) / others;
    const std::string theirs = split + " " + Mb(dp.peak_memory_bytes) + ", the whole batch on one process " +
                               Mb(one.peak_memory_bytes) + ": about " + Mb(share) + " a rank's share";
    if (run.peak_memory_bytes < 0) {
      v.ok = false;
      problems += "the grader could not read the memory of your ranks while they ran (" + theirs + ")\n";
    } else {
      v.memory_judged = true;
      const double over = static_cast<double>(run.peak_memory_bytes - dp.peak_memory_bytes);
      if (-over > kMemoryAllowanceShares * share) {
        v.ok = false;
        problems += "your largest rank held only " + Mb(run.peak_memory_bytes) + " at its peak (the kernel's count, "
                    "read by the grader outside your processes), " + Fmt("%.1f", -over / share) + " ranks' shares less "
                    "than the grader's largest rank (" + theirs + "): a rank holds at least its own share's "
                    "activations, so some of what your ranks held was out of the grader's sight, and what the grader "
                    "cannot see is not credited\n";
      } else if (over > kMemoryAllowanceShares * share) {
        v.ok = false;
        more = true;
        problems += "your largest rank held " + Mb(run.peak_memory_bytes) + " at its peak (the kernel's count, read by "
                    "the grader outside your processes), the activations of " + Fmt("%.1f", over / share) +
                    " ranks' shares more than the grader's largest rank (" + theirs + ")\n";
      } else {
        figures += "your largest rank held " + Mb(run.peak_memory_bytes) + " at its peak; " + theirs + "\n";
      }
    }
  }
  const double gap = one.peak_cpu_seconds - dp.peak_cpu_seconds;
  const double cpu_allowance = std::max(kCpuAllowanceOfGap * gap, kCpuAllowanceOfSplit * dp.peak_cpu_seconds);
  if (dp.peak_cpu_seconds > 0 && gap >= kMinCpuGapSeconds) {
    const std::string theirs = split + "'s busiest rank " + Sec(dp.peak_cpu_seconds) +
                               ", the whole batch on one process " + Sec(one.peak_cpu_seconds);
    if (cpu_allowance > kCpuJudgedUpToGap * gap) {
      figures += "your busiest rank used " + Sec(run.peak_cpu_seconds) + " of CPU time (not judged: " + theirs +
                 " are too close to tell apart from the noise of the count)\n";
    } else if (run.peak_cpu_seconds < 0) {
      v.ok = false;
      problems += "the grader could not read the CPU time of your ranks while they ran (" + theirs + ")\n";
    } else {
      v.cpu_judged = true;
      if (run.peak_cpu_seconds > dp.peak_cpu_seconds + cpu_allowance) {
        v.ok = false;
        more = true;
        problems += "your busiest rank used " + Sec(run.peak_cpu_seconds) + " of CPU time (the kernel's count), " +
                    Fmt("%.0f", 100 * (run.peak_cpu_seconds - dp.peak_cpu_seconds) / gap) +
                    " % of the way from " + split + " to the whole batch on one process (" +
                    theirs + ")\n";
      } else {
        figures += "your busiest rank used " + Sec(run.peak_cpu_seconds) + " of CPU time; " + theirs + "\n";
      }
    }
  }
  if (!v.ok) {
    v.message = "not credited: at 512 tokens a sequence, where " + y.share_name +
                " outweighs the rest of its work, " + problems +
                (more ? "so at least one rank computed more than its own share: " + y.advice + "; " : "") +
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
