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

// "" when `steps` is 1F1B's order for stage s of P with M micro-batches, else the first step
// that breaks it: forwards and backwards each in micro-batch order, at most min(P - s, M)
// micro-batches in flight, and a backward only at that many or once the forwards are done.
std::string FirstOneFOneBViolation(const std::vector<PipelineStep>& steps, int P, int s, int M) {
  const int cap = std::min(P - s, M);
  const std::string stage = "stage " + std::to_string(s) + " of " + std::to_string(P);
  int forwards = 0, backwards = 0;  // run so far; the next of each is micro-batch `forwards`, `backwards`
  for (const PipelineStep& st : steps) {
    const std::string step = (st.forward ? "F" : "B") + std::to_string(st.micro_batch);
    const int in_flight = forwards - backwards;
    if (st.forward) {
      if (st.micro_batch != forwards) {
        return stage + " ran " + step + " as its forward number " + std::to_string(forwards + 1) +
               ": forwards run in micro-batch order";
      }
      if (in_flight >= cap) {
        return stage + " ran " + step + " while holding " + std::to_string(in_flight) +
               " micro-batches: 1F1B holds at most min(P - s, M) = " + std::to_string(cap) + " on this stage";
      }
      ++forwards;
    } else {
      if (st.micro_batch >= forwards) return stage + " ran " + step + " before F" + std::to_string(st.micro_batch);
      if (st.micro_batch != backwards) {
        return stage + " ran " + step + " before B" + std::to_string(backwards) +
               ": backwards run in micro-batch order";
      }
      if (forwards < M && in_flight < cap) {
        return stage + " ran " + step + " holding " + std::to_string(in_flight) +
               " micro-batch(es) with forwards left: 1F1B runs a backward only at min(P - s, M) = " +
               std::to_string(cap) + " in flight or once its forwards are done, since an early backward delays "
               "the forwards the later stages wait for";
      }
      ++backwards;
    }
  }
  if (forwards != M || backwards != M) {
    return stage + " ran " + std::to_string(forwards) + " forwards and " + std::to_string(backwards) +
           " backwards of " + std::to_string(M) + " micro-batches";
  }
  return "";
}

TEST(Task7PipelineSchedule, OneForwardOneBackward) {
  CheckSchedule(PipelineSchedule::kOneForwardOneBackward, "1F1B");
  // The shape itself on every stage, beyond what the simulation measures.
  for (int P : {1, 2, 4}) {
    for (int M : {1, 3, 4, 8}) {
      for (int s = 0; s < P; ++s) {
        const std::string violation =
            FirstOneFOneBViolation(StageSteps(PipelineSchedule::kOneForwardOneBackward, P, s, M), P, s, M);
        EXPECT_TRUE(violation.empty()) << M << " micro-batches: " << violation;
      }
    }
  }
}

TEST(Task7PipelineSchedule, RefusesAStageOutsideThePipeline) {
  EXPECT_THROW(StageSteps(PipelineSchedule::kOneForwardOneBackward, 2, 2, 4), std::invalid_argument);
  EXPECT_THROW(StageSteps(PipelineSchedule::kAllForwardAllBackward, 2, 0, 0), std::invalid_argument);
}

}  // namespace
}  // namespace distlm::task7
