#include "common/trace/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace distlm::trace {

namespace {

// What a peak is said to fall in: the innermost span around it, unless that is a whole update
// (then the phase that ended last before it, "after <phase>"); the update itself when nothing
// ended before it inside.
std::string PhaseName(const std::string& inside, const std::string& after) {
  const bool in_phase = !inside.empty() && inside.rfind("update", 0) != 0;
  if (in_phase || after.empty()) return inside;
  return "after " + after;
}

}  // namespace

int64_t MemoryPeak::other_bytes() const {
  if (peak_bytes < 0 || param_bytes < 0 || grad_bytes < 0) return -1;
  return peak_bytes - param_bytes - grad_bytes - std::max<int64_t>(opt_bytes, 0);
}

nlohmann::json MemoryPeak::ToJson() const {
  return {{"rank", rank},         {"peak_bytes", peak_bytes}, {"at_ms", at_ms},         {"during", during},
          {"param_bytes", param_bytes}, {"grad_bytes", grad_bytes}, {"opt_bytes", opt_bytes},
          {"other_bytes", other_bytes()}};
}

std::vector<MemoryPeak> MemoryPeaks(const nlohmann::json& trace) {
  struct Span {
    double begin, end;
    std::string name;
  };
  std::map<int, MemoryPeak> peaks;
  std::map<int, std::vector<Span>> spans;  // the main thread's
  std::map<int, double> last_state;
  std::map<int, int64_t> highest;  // the highest sample of bytes in use
  double t0 = std::numeric_limits<double>::infinity();
  for (const auto& e : trace.value("traceEvents", nlohmann::json::array())) {
    const int pid = e.value("pid", 0);
    const std::string ph = e.value("ph", "");
    const double ts = e.value("ts", 0.0);
    if (ph == "X" && e.value("tid", 0) == 1) {
      spans[pid].push_back({ts, ts + e.value("dur", 0.0), e.value("name", "")});
      if (e.value("cat", "") == "update") t0 = std::min(t0, ts);
    }
    if (ph != "C") continue;
    MemoryPeak& p = peaks[pid];
    p.rank = pid;
    const auto args = e.value("args", nlohmann::json::object());
    if (e.value("name", "") == "memory") {
      // The allocator's own peak since the update began is the true peak; the samples (taken
      // between phases) say when memory stood highest.
      const int64_t in_use = args.value("in_use_bytes", static_cast<int64_t>(-1));
      p.peak_bytes = std::max({p.peak_bytes, in_use, args.value("peak_bytes", static_cast<int64_t>(-1))});
      if (in_use > highest[pid]) {
        highest[pid] = in_use;
        p.at_ms = ts;
      }
    } else if (e.value("name", "") == "model state" && ts >= last_state[pid]) {
      last_state[pid] = ts;
      p.param_bytes = args.value("held_param_bytes", static_cast<int64_t>(-1));
      p.grad_bytes = args.value("held_grad_bytes", static_cast<int64_t>(-1));
      p.opt_bytes = args.value("held_opt_bytes", static_cast<int64_t>(-1));
    }
  }
  std::vector<MemoryPeak> out;
  for (auto& [pid, p] : peaks) {
    // The samples are taken between phases: name the phase that ended last before the highest
    // one (the innermost span around it, when it fell inside one that is not a whole update).
    double shortest = std::numeric_limits<double>::infinity(), latest_end = -shortest;
    std::string inside, after;
    for (const Span& s : spans[pid]) {
      if (s.begin <= p.at_ms && p.at_ms <= s.end && s.end - s.begin < shortest) {
        shortest = s.end - s.begin;
        inside = s.name;
      }
      if (s.end <= p.at_ms && s.end >= latest_end && s.name.rfind("update", 0) != 0) {
        latest_end = s.end;
        after = s.name;
      }
    }
    p.during = PhaseName(inside, after);
    p.at_ms = std::isfinite(t0) ? (p.at_ms - t0) / 1000.0 : p.at_ms / 1000.0;
    out.push_back(p);
  }
  return out;
}

std::string MemoryTable(const std::vector<MemoryPeak>& peaks) {
  auto mib = [](int64_t b) {
    if (b < 0) return std::string("-");
    char s[32];
    std::snprintf(s, sizeof(s), "%.1f", b / 1048576.0);
    return std::string(s);
  };
  std::string out;
  char line[320];
  std::snprintf(line, sizeof(line), "%4s %9s %9s  %-28s %9s %9s %9s %9s\n", "rank", "peak_MiB", "at_ms", "during",
                "params", "grads", "opt", "other");
  out += line;
  for (const auto& p : peaks) {
    std::snprintf(line, sizeof(line), "%4d %9s %9.2f  %-28s %9s %9s %9s %9s\n", p.rank, mib(p.peak_bytes).c_str(),
                  p.at_ms, p.during.substr(0, 28).c_str(), mib(p.param_bytes).c_str(), mib(p.grad_bytes).c_str(),
                  mib(p.opt_bytes).c_str(), mib(p.other_bytes()).c_str());
    out += line;
  }
  return out;
}

}  // namespace distlm::trace
