#include "task7/grading/cpu_check.h"

#include "grading/trace.h"

namespace distlm::task7 {
namespace {

std::string Seconds(double s) { return grading::Fmt("%.2f", s) + " s"; }
std::string Percent(double fraction) { return grading::Fmt("%.0f", 100 * fraction) + " %"; }

}  // namespace

CpuVerdict JudgePipelineCpu(CpuPair first, const std::function<std::optional<CpuPair>()>& again) {
  CpuVerdict v;
  if (first.grader <= 0) return v;
  v.judged = true;
  if (first.mine < 0) {
    v.ok = false;
    v.message = "the grader could not account the CPU time of your 1F1B run as a whole (its control group), while it "
                "accounted its own (" + Seconds(first.grader) + "), so the run is not credited";
    return v;
  }
  CpuPair best = first;
  int pairs = 1;
  const auto over = [](const CpuPair& p) { return p.mine / p.grader - 1; };
  while (pairs < kPipelineCpuPairs && over(best) > kPipelineCpuAllowance) {
    const std::optional<CpuPair> next = again();
    if (!next || next->mine < 0 || next->grader <= 0) break;
    ++pairs;
    if (over(*next) < over(best)) best = *next;
  }
  const std::string figures =
      "your 1F1B run used " + Seconds(best.mine) + " of CPU time in all (the kernel's account of the whole run), the "
      "grader's own 1F1B of this layout " + Seconds(best.grader) +
      (pairs > 1 ? " (the closest of " + std::to_string(pairs) + " pairs, each run one after the other)" : "");
  if (over(best) > kPipelineCpuAllowance) {
    v.ok = false;
    v.message = "at 512 tokens a sequence " + figures + ": " + Percent(over(best)) + " more, where the grader allows " +
                Percent(kPipelineCpuAllowance) + ": the forwards and backwards are the given stage's, so a 1F1B that "
                "computes more ran some of them twice (a forward again at backward time is recomputation, not 1F1B), "
                "and it is not credited";
    return v;
  }
  v.message = "CPU time at 512 tokens a sequence: " + figures;
  return v;
}

}  // namespace distlm::task7
