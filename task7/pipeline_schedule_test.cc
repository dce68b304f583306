// 7b's schedules checked against the pipeline they drive, simulated: every stage runs its steps
// in its order, a forward of micro-batch k only after the stage before it has sent k's
// activation, a backward only after the stage after it has sent k's gradient back. Both
// schedules must finish (a wrong order deadlocks), run every micro-batch's forward and backward
// once, idle the share the closed form says, (P - 1) / (M + P - 1) of the makespan, with
// forward 1 and backward 2 time units (and with both 1), and hold at most M (all forward, all
// backward) or P - s (1F1B) micro-batches' activations on stage s.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "task7/pipeline_schedule.h"

namespace distlm::task7 {
namespace {

struct Simulated {
  bool finished = false;
  std::string stuck;              // what a stage waited for when nothing could run
  double makespan = 0;
  std::vector<double> busy;       // per stage
  std::vector<int> peak_in_flight;  // per stage: forwards run whose backward has not
};

Simulated Simulate(PipelineSchedule schedule, int P, int M, double tf, double tb) {
  std::vector<std::vector<PipelineStep>> steps(P);
  for (int s = 0; s < P; ++s) steps[s] = StageSteps(schedule, P, s, M);
  std::map<std::tuple<bool, int, int>, double> done;  // (forward, stage, k) -> finish time
  std::vector<size_t> next(P, 0);
  std::vector<double> free_at(P, 0);
  Simulated r;
  r.busy.assign(P, 0);
  r.peak_in_flight.assign(P, 0);
  std::vector<int> in_flight(P, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < P; ++s) {
      if (next[s] == steps[s].size()) continue;
      const PipelineStep st = steps[s][next[s]];
      // What this step waits for: the previous stage's forward, or the next stage's backward
      // (the last stage's backward follows its own forward).
      std::tuple<bool, int, int> need;
      if (st.forward) {
        need = {true, s - 1, st.micro_batch};
      } else {
        need = s == P - 1 ? std::tuple<bool, int, int>{true, s, st.micro_batch}
                          : std::tuple<bool, int, int>{false, s + 1, st.micro_batch};
      }
      double ready = 0;
      if (!(st.forward && s == 0)) {
        auto it = done.find(need);
        if (it == done.end()) continue;
        ready = it->second;
      }
      const double start = std::max(ready, free_at[s]), dur = st.forward ? tf : tb;
      free_at[s] = start + dur;
      r.busy[s] += dur;
      done[{st.forward, s, st.micro_batch}] = free_at[s];
      in_flight[s] += st.forward ? 1 : -1;
      r.peak_in_flight[s] = std::max(r.peak_in_flight[s], in_flight[s]);
      ++next[s];
      progress = true;
    }
  }
  r.finished = true;
  for (int s = 0; s < P; ++s) {
    if (next[s] != steps[s].size()) {
      r.finished = false;
      r.stuck += "stage " + std::to_string(s) + " stuck before step " + std::to_string(next[s]) + " of " +
                 StepsToString(steps[s]) + "; ";
    }
    r.makespan = std::max(r.makespan, free_at[s]);
  }
  return r;
}

void CheckSchedule(PipelineSchedule schedule, const char* name) {
  for (int P : {1, 2, 4}) {
    for (int M : {1, 3, 4, 8}) {
      for (const auto& [tf, tb] : std::vector<std::pair<double, double>>{{1, 1}, {1, 2}}) {
        SCOPED_TRACE(std::string(name) + ", " + std::to_string(P) + " stages, " + std::to_string(M) +
                     " micro-batches, forward " + std::to_string(tf) + " backward " + std::to_string(tb));
        for (int s = 0; s < P; ++s) {
          const auto steps = StageSteps(schedule, P, s, M);
          std::map<std::pair<bool, int>, int> seen;
          for (const auto& st : steps) ++seen[{st.forward, st.micro_batch}];
          EXPECT_EQ(static_cast<int>(steps.size()), 2 * M) << "stage " << s << ": " << StepsToString(steps);
          for (int k = 0; k < M; ++k) {
            EXPECT_EQ((seen[{true, k}]), 1) << "stage " << s << " runs F" << k << " not once: " << StepsToString(steps);
            EXPECT_EQ((seen[{false, k}]), 1) << "stage " << s << " runs B" << k << " not once: " << StepsToString(steps);
          }
        }
        const Simulated r = Simulate(schedule, P, M, tf, tb);
        ASSERT_TRUE(r.finished) << r.stuck;
        const double bubble = static_cast<double>(P - 1) / (M + P - 1);
        for (int s = 0; s < P; ++s) {
          EXPECT_NEAR(1 - r.busy[s] / r.makespan, bubble, 1e-12) << "stage " << s << "'s idle share";
          const int want_peak = schedule == PipelineSchedule::kAllForwardAllBackward ? M : std::min(P - s, M);
          EXPECT_EQ(r.peak_in_flight[s], want_peak) << "stage " << s << "'s activations held at once";
        }
      }
    }
  }
}

TEST(Task7PipelineSchedule, AllForwardAllBackward) {
  CheckSchedule(PipelineSchedule::kAllForwardAllBackward, "all forward, all backward");
}

TEST(Task7PipelineSchedule, OneForwardOneBackward) {
  CheckSchedule(PipelineSchedule::kOneForwardOneBackward, "1F1B");
  // The shape itself, on the middle stage of four with eight micro-batches: two warm-up
  // forwards, then alternating, then the two backwards left.
  EXPECT_EQ(StepsToString(StageSteps(PipelineSchedule::kOneForwardOneBackward, 4, 1, 8)),
            "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
}

TEST(Task7PipelineSchedule, RefusesAStageOutsideThePipeline) {
  EXPECT_THROW(StageSteps(PipelineSchedule::kOneForwardOneBackward, 2, 2, 4), std::invalid_argument);
  EXPECT_THROW(StageSteps(PipelineSchedule::kAllForwardAllBackward, 2, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace distlm::task7
