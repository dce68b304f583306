#include "common/trace/overlap.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "common/runtime/errors.h"
#include "common/trace/intervals.h"
#include "common/trace/recorder.h"

namespace distlm::trace {
namespace {

// A span of the trace in nanoseconds (the file's microseconds, three decimals).
Interval SpanOf(const nlohmann::json& e) {
  const int64_t begin = std::llround(e.value("ts", 0.0) * 1000.0);
  return {begin, begin + std::llround(e.value("dur", 0.0) * 1000.0)};
}

struct RankEvents {
  std::vector<std::pair<int64_t, Interval>> updates;  // (update, span)
  std::vector<Interval> compute, comm, hooks;
};

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

nlohmann::json UpdateOverlap::ToJson() const {
  nlohmann::json j = {{"rank", rank},
                      {"update", update},
                      {"collectives", collectives},
                      {"step_ms", step_ms},
                      {"compute_ms", compute_ms},
                      {"comm_busy_ms", comm_busy_ms},
                      {"comm_hidden_ms", comm_hidden_ms},
                      {"comm_exposed_ms", comm_exposed_ms},
                      {"idle_ms", idle_ms}};
  if (waiting_ms >= 0) j["waiting_ms"] = waiting_ms;
  return j;
}

std::vector<UpdateOverlap> AnalyseOverlap(const nlohmann::json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    throw UserError("not a Chrome trace: no traceEvents array");
  }
  std::map<int, RankEvents> ranks;
  for (const auto& e : trace["traceEvents"]) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    const int pid = e.value("pid", 0);
    const std::string c = e.value("cat", "");
    RankEvents& r = ranks[pid];
    if (c == cat::kUpdate) {
      const auto args = e.value("args", nlohmann::json::object());
      r.updates.emplace_back(args.value("update", static_cast<int64_t>(r.updates.size() + 1)), SpanOf(e));
    } else if (c == cat::kForward || c == cat::kBackward || c == cat::kStep) {
      r.compute.push_back(SpanOf(e));
    } else if (c == cat::kComm) {
      r.comm.push_back(SpanOf(e));
    } else if (c == cat::kUnitHook) {
      r.hooks.push_back(SpanOf(e));
    }
  }
  std::vector<UpdateOverlap> rows;
  // Each update's collectives by rank, in launch order, to pair them up across ranks.
  std::map<int64_t, std::map<int, std::vector<int64_t>>> launches;
  for (auto& [rank, r] : ranks) {
    std::sort(r.comm.begin(), r.comm.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
    for (const auto& [update, w] : r.updates) {
      UpdateOverlap row;
      row.rank = rank;
      row.update = update;
      const auto c = Subtract(UnionWithin(r.compute, w), UnionWithin(r.hooks, w)), m = UnionWithin(r.comm, w);
      std::vector<Interval> both = c;
      both.insert(both.end(), m.begin(), m.end());
      row.step_ms = Ms(w.end - w.begin);
      row.compute_ms = Ms(Length(c));
      row.comm_busy_ms = Ms(Length(m));
      row.comm_hidden_ms = Ms(Length(Intersect(m, c)));
      row.comm_exposed_ms = row.comm_busy_ms - row.comm_hidden_ms;
      row.idle_ms = Ms(w.end - w.begin - Length(Union(both)));
      for (const Interval& s : r.comm) {
        if (s.begin >= w.begin && s.begin < w.end) {
          ++row.collectives;
          launches[update][rank].push_back(s.begin);
        }
      }
      rows.push_back(row);
    }
  }
  if (rows.empty()) throw UserError("the trace holds no update span (cat \"update\"): was it written with --trace?");
  for (UpdateOverlap& row : rows) {
    const auto& by_rank = launches[row.update];
    row.waiting_ms = -1;
    if (ranks.size() < 2 || by_rank.size() != ranks.size()) continue;
    const size_t n = by_rank.begin()->second.size();
    bool paired = true;
    for (const auto& [rank, l] : by_rank) paired = paired && l.size() == n;
    if (!paired) continue;
    // A union, not a sum: collectives launched together wait for the slower rank together.
    std::vector<Interval> waits;
    const auto& mine = by_rank.at(row.rank);
    for (size_t i = 0; i < n; ++i) {
      int64_t last = mine[i];
      for (const auto& [rank, l] : by_rank) last = std::max(last, l[i]);
      waits.push_back({mine[i], last});
    }
    row.waiting_ms = Ms(Length(Union(waits)));
  }
  std::sort(rows.begin(), rows.end(), [](const UpdateOverlap& a, const UpdateOverlap& b) {
    return a.update < b.update || (a.update == b.update && a.rank < b.rank);
  });
  return rows;
}

std::string OverlapTable(const std::vector<UpdateOverlap>& rows) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof(line), "%6s %4s %9s %10s %9s %9s %10s %8s %9s %9s %5s\n", "update", "rank", "step_ms",
                "compute_ms", "comm_busy", "hidden", "exposed", "hidden%", "idle_ms", "waiting", "comms");
  out += line;
  auto add = [&](const std::string& update, int rank, const UpdateOverlap& r) {
    const double share = r.comm_busy_ms > 0 ? 100.0 * r.comm_hidden_ms / r.comm_busy_ms : 0.0;
    char waiting[32];
    if (r.waiting_ms >= 0) {
      std::snprintf(waiting, sizeof(waiting), "%.2f", r.waiting_ms);
    } else {
      std::snprintf(waiting, sizeof(waiting), "-");
    }
    std::snprintf(line, sizeof(line), "%6s %4d %9.2f %10.2f %9.2f %9.2f %10.2f %7.1f%% %9.2f %9s %5d\n",
                  update.c_str(), rank, r.step_ms, r.compute_ms, r.comm_busy_ms, r.comm_hidden_ms, r.comm_exposed_ms,
                  share, r.idle_ms, waiting, r.collectives);
    out += line;
  };
  std::map<int, std::pair<UpdateOverlap, int>> mean;
  for (const auto& r : rows) {
    add(std::to_string(r.update), r.rank, r);
    auto& [m, n] = mean[r.rank];
    m.step_ms += r.step_ms;
    m.compute_ms += r.compute_ms;
    m.comm_busy_ms += r.comm_busy_ms;
    m.comm_hidden_ms += r.comm_hidden_ms;
    m.comm_exposed_ms += r.comm_exposed_ms;
    m.idle_ms += r.idle_ms;
    m.waiting_ms = (n == 0 || m.waiting_ms >= 0) && r.waiting_ms >= 0 ? m.waiting_ms + r.waiting_ms : -1;
    m.collectives += r.collectives;
    ++n;
  }
  for (auto& [rank, mn] : mean) {
    auto& [m, n] = mn;
    for (double* v : {&m.step_ms, &m.compute_ms, &m.comm_busy_ms, &m.comm_hidden_ms, &m.comm_exposed_ms, &m.idle_ms}) {
      *v /= n;
    }
    if (m.waiting_ms >= 0) m.waiting_ms /= n;
    m.collectives /= n;
    add("mean", rank, m);
  }
  return out;
}

}  // namespace distlm::trace
