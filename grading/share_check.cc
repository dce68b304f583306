#include "grading/share_check.h"

#include <algorithm>

#include "grading/trace.h"

namespace distlm::grading {
namespace {

std::string Mb(double bytes) { return Fmt("%.1f", bytes / 1e6) + " MB"; }
std::string Sec(double s) { return Fmt("%.2f", s) + " s"; }

// The run as a whole (its control group), as its mean rank: held to the bounds a rank is, from
// above. Adds to `figures` and `problems` as CheckShare does.
void JudgeRunAsAWhole(const ShareFigures& run, const ShareYardstick& y, std::string* figures, std::string* problems,
                      bool* more, ShareVerdict* v) {
  const ShareFigures &dp = y.split, &one = y.single;
  const double n = y.ranks;
  const std::string split = "the grader's own " + y.split_name;
  const std::string unaccounted = "the grader could not account your run as a whole (its control group, which holds "
                                  "every process and thread a run has) while ";
  if (dp.run_memory_bytes > 0 && one.run_memory_bytes > 0) {
    const double mean = dp.run_memory_bytes / n;
    const double share = (one.run_memory_bytes - mean) / (n - 1);
    const std::string theirs = split + " " + Mb(dp.run_memory_bytes) + " in all (" + Mb(mean) +
                               " a rank), the whole batch on one process " + Mb(one.run_memory_bytes) + ": about " +
                               Mb(share) + " a rank's share";
    if (share < kMinShareBytes) {
    } else if (run.run_memory_bytes < 0) {
      v->ok = false;
      *problems += unaccounted + "it accounted its own (" + theirs + ")\n";
    } else if (const double over = run.run_memory_bytes / n - mean; over > kMemoryAllowanceShares * share) {
      v->ok = false;
      *more = true;
      *problems += "your run held " + Mb(run.run_memory_bytes) + " in all at its peak (the kernel's account of the "
                   "whole run, every process and thread it had), the activations of " + Fmt("%.1f", over / share) +
                   " ranks' shares more a rank than " + theirs + "\n";
    } else {
      *figures += "your run held " + Mb(run.run_memory_bytes) + " in all at its peak; " + theirs + "\n";
    }
  }
  if (dp.run_cpu_seconds > 0 && one.run_cpu_seconds > 0) {
    const double mean = dp.run_cpu_seconds / n;
    const double gap = one.run_cpu_seconds - mean;
    const double allowance = std::max(kCpuAllowanceOfGap * gap, kCpuAllowanceOfSplit * mean);
    const std::string theirs = split + " " + Sec(dp.run_cpu_seconds) + " in all (" + Sec(mean) +
                               " a rank), the whole batch on one process " + Sec(one.run_cpu_seconds);
    if (gap < kMinCpuGapSeconds || allowance > kCpuJudgedUpToGap * gap) {
    } else if (run.run_cpu_seconds < 0) {
      v->ok = false;
      *problems += unaccounted + "it accounted its own (" + theirs + ")\n";
    } else if (run.run_cpu_seconds / n > mean + allowance) {
      v->ok = false;
      *more = true;
      *problems += "your run used " + Sec(run.run_cpu_seconds) + " of CPU time in all (the kernel's account of the "
                   "whole run), a rank's mean " + Fmt("%.0f", 100 * (run.run_cpu_seconds / n - mean) / gap) +
                   " % of the way from " + split + " to the whole batch on one process (" + theirs + ")\n";
    } else {
      *figures += "your run used " + Sec(run.run_cpu_seconds) + " of CPU time in all; " + theirs + "\n";
    }
  }
}

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
  JudgeRunAsAWhole(run, y, &figures, &problems, &more, &v);
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
