#include "task7/grading/schedule_check.h"

#include <algorithm>
#include <map>
#include <random>
#include <sstream>

namespace distlm::task7 {
namespace {

const char* Name(PipelineSchedule s) { return s == PipelineSchedule::kAllForwardAllBackward ? "afab" : "1f1b"; }

std::string Call(PipelineSchedule s, int stages, int stage, int micro_batches) {
  return std::string("StageSteps(") +
         (s == PipelineSchedule::kAllForwardAllBackward ? "kAllForwardAllBackward" : "kOneForwardOneBackward") +
         ", stages=" + std::to_string(stages) + ", stage=" + std::to_string(stage) +
         ", micro_batches=" + std::to_string(micro_batches) + ")";
}

std::string Step(const PipelineStep& s) { return (s.forward ? "F" : "B") + std::to_string(s.micro_batch); }

// "F0 B0 ..." back into steps; false for anything else.
bool ParseSteps(const std::string& text, std::vector<PipelineStep>* steps) {
  std::istringstream in(text);
  for (std::string w; in >> w;) {
    if (w.size() < 2 || (w[0] != 'F' && w[0] != 'B') || w.find_first_not_of("0123456789", 1) != std::string::npos ||
        w.size() > 5) {
      return false;
    }
    steps->push_back({w[0] == 'F', std::stoi(w.substr(1))});
  }
  return true;
}

}  // namespace

std::vector<ProbeLayout> DrawProbeLayouts(uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto in = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const auto one = PipelineSchedule::kOneForwardOneBackward;
  const int a = in(3, 6), b = in(3, 6), c = in(2, 6);
  return {{one, a, in(a + 1, 9)}, {one, b, in(1, b - 1)}, {one, c, c},
          {PipelineSchedule::kAllForwardAllBackward, in(2, 6), in(1, 9)}};
}

std::string ProbeFlag(const std::vector<ProbeLayout>& layouts) {
  std::string flag;
  for (const auto& l : layouts) {
    flag += (flag.empty() ? "" : ",") + std::string(Name(l.schedule)) + ":" + std::to_string(l.stages) + ":" +
            std::to_string(l.micro_batches);
  }
  return flag;
}

std::string ScheduleProblem(PipelineSchedule schedule, int stages, int stage, int micro_batches,
                            const std::vector<PipelineStep>& steps) {
  const int m = micro_batches;
  const bool afab = schedule == PipelineSchedule::kAllForwardAllBackward;
  const int limit = afab ? m : std::min(stages - stage, m);
  int forwards = 0, backwards = 0, held = 0, peak = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PipelineStep& s = steps[i];
    const std::string at = "step " + std::to_string(i + 1) + " (" + Step(s) + ")";
    if (s.micro_batch < 0 || s.micro_batch >= m) return at + " names a micro-batch outside 0 to " + std::to_string(m - 1);
    if (s.forward) {
      if (s.micro_batch != forwards) {
        return at + (s.micro_batch < forwards ? " runs a forward a second time" : " skips a forward") +
               ": a stage runs its forwards once each, in micro-batch order";
      }
      ++forwards;
      peak = std::max(peak, ++held);
      if (held > limit) {
        return at + " makes the stage hold " + std::to_string(held) + " micro-batches between their forward and "
               "backward; " + (afab ? "" : "1F1B's stage s holds at most min(P - s, M) = " + std::to_string(limit));
      }
    } else {
      if (s.micro_batch != backwards) {
        return at + (s.micro_batch < backwards ? " runs a backward a second time" : " skips a backward") +
               ": a stage runs its backwards once each, in micro-batch order";
      }
      if (s.micro_batch >= forwards) return at + " runs a backward before that micro-batch's forward";
      if (afab && forwards < m) return at + " runs a backward before every forward ran: all forward, then all backward";
      if (!afab && held < limit && forwards < m) {
        return at + " runs a backward while the stage holds " + std::to_string(held) + " micro-batches and has "
               "forwards left: 1F1B runs a backward only when it holds min(P - s, M) = " + std::to_string(limit) +
               " or has no forward left";
      }
      ++backwards;
      --held;
    }
  }
  if (forwards < m || backwards < m) {
    return "it has " + std::to_string(forwards) + " forwards and " + std::to_string(backwards) + " backwards for " +
           std::to_string(m) + " micro-batches: every micro-batch runs forward and backward once on every stage";
  }
  if (peak != limit) {
    return "the stage holds at most " + std::to_string(peak) + " micro-batches at once; " +
           (afab ? "all forward all backward holds all M" : "1F1B holds min(P - s, M) = " + std::to_string(limit)) +
           " at its peak";
  }
  return "";
}

std::string JudgeProbe(const std::vector<ProbeLayout>& layouts, const std::string& text) {
  std::map<std::string, std::string> lines;  // "1f1b 5 7 2" -> what follows ": "
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(": ");
    if (colon != std::string::npos) lines.emplace(line.substr(0, colon), line.substr(colon + 2));
  }
  for (const auto& l : layouts) {
    for (int s = 0; s < l.stages; ++s) {
      const std::string call = Call(l.schedule, l.stages, s, l.micro_batches);
      const auto it = lines.find(std::string(Name(l.schedule)) + " " + std::to_string(l.stages) + " " +
                                 std::to_string(l.micro_batches) + " " + std::to_string(s));
      if (it == lines.end()) return call + " gave no answer (schedule_probe.txt has no line for it)";
      if (it->second.rfind("threw: ", 0) == 0) return call + " threw: " + it->second.substr(7);
      std::vector<PipelineStep> steps;
      if (!ParseSteps(it->second, &steps)) return call + " gave steps the grader cannot read";
      if (const std::string p = ScheduleProblem(l.schedule, l.stages, s, l.micro_batches, steps); !p.empty()) {
        return call + ": " + p;
      }
    }
  }
  return "";
}

}  // namespace distlm::task7
