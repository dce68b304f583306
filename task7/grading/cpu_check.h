// Task 7b's CPU time, judged from outside the processes: a 1F1B run's whole CPU time (its
// control group's count, grading/jail/run_cgroup.h) against the grader's own 1F1B of the same
// layout. The forwards and backwards are the given stage's, so a 1F1B that computes more ran some
// of them twice (a forward again at backward time is recomputation, which holds less than 1F1B).
#ifndef DISTLM_TASK7_GRADING_CPU_CHECK_H_
#define DISTLM_TASK7_GRADING_CPU_CHECK_H_

#include <functional>
#include <optional>
#include <string>

namespace distlm::task7 {

// How much more CPU time than the grader's own 1F1B of the layout a 1F1B run may use in all.
// docs/results.md ("Task 7b's CPU time") measures the reference's runs against one another and
// the recompute forgery's against them: the bar sits above the first spread and inside the
// second on an idle machine, so it catches the forgery only some of the time. The memory held
// decides 7b; this is a second witness.
inline constexpr double kPipelineCpuAllowance = 0.2;

// A busy host inflates one run and not the next (the reference's 1F1B measured 26 % over the
// grader's run beside it while other tests ran); recomputation costs more every time. So a run
// over the allowance is measured again, up to this many pairs in all, and the closest is judged.
inline constexpr int kPipelineCpuPairs = 3;

// Seconds of CPU time of one pair: the student's run, then the grader's; -1: not accounted.
struct CpuPair {
  double mine = -1;
  double grader = -1;
};

struct CpuVerdict {
  bool judged = false;  // false: the grader's own run was not accounted, so CPU time says nothing
  bool ok = true;
  std::string message;  // why not credited, or the figures for the student
};

// `first` is the pair already measured; `again` measures another (nullopt: a run failed, judge
// what was measured).
CpuVerdict JudgePipelineCpu(CpuPair first, const std::function<std::optional<CpuPair>()>& again);

}  // namespace distlm::task7

#endif  // DISTLM_TASK7_GRADING_CPU_CHECK_H_
