#include "common/trace/recorder.h"

#include <algorithm>
#include <chrono>

namespace distlm::trace {

std::atomic<Recorder*> Recorder::active_{nullptr};

int64_t NowNs() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

Recorder::Recorder(int rank, int world_size) : rank_(rank), world_size_(world_size) {
  clock_.base_ns = NowNs();
}

void Recorder::Span(const std::string& category, const std::string& name, int64_t begin_ns, int64_t end_ns,
                    nlohmann::json args) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({'X', false, category, name, begin_ns, std::max(begin_ns, end_ns), std::move(args)});
}

void Recorder::Collective(const std::string& op, int64_t launch_ns, int64_t done_ns, nlohmann::json args) {
  if (done_ns <= 0) args["completion"] = "unknown";
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({'X', true, cat::kComm, op, launch_ns, std::max(launch_ns, done_ns), std::move(args)});
}

void Recorder::MarkUnitBackward(int unit, int64_t t_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  backward_marks_.emplace_back(t_ns, unit);
}

void Recorder::EndBackward(int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  std::sort(backward_marks_.begin(), backward_marks_.end());
  for (size_t i = 0; i < backward_marks_.size(); ++i) {
    const auto& [t, unit] = backward_marks_[i];
    const int64_t until = i + 1 < backward_marks_.size() ? backward_marks_[i + 1].first : std::max(t, end_ns);
    events_.push_back({'X', false, cat::kBackward, "backward, unit " + std::to_string(unit), t, until, nullptr});
  }
  backward_marks_.clear();
}

void Recorder::Counter(const std::string& name, int64_t t_ns, nlohmann::json values) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.push_back({'C', false, "", name, t_ns, t_ns, std::move(values)});
}

size_t Recorder::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

// Microseconds since the trace's time 0 on rank 0's clock, to the nanosecond (three decimals):
// small numbers, which a double holds exactly enough.
double Recorder::Micros(int64_t t_ns) const {
  return static_cast<double>(t_ns + clock_.offset_ns - clock_.base_ns) / 1000.0;
}

nlohmann::json Recorder::ToJson(const nlohmann::json& other) const {
  std::vector<Event> events;
  {
    std::lock_guard<std::mutex> lock(mu_);
    events = events_;
  }
  using nlohmann::json;
  constexpr int kMainThread = 1, kFirstLane = 10;
  json out = json::array();
  auto meta = [&](const char* name, int tid, json args) {
    out.push_back({{"name", name}, {"ph", "M"}, {"pid", rank_}, {"tid", tid}, {"args", std::move(args)}});
  };
  meta("process_name", 0, {{"name", "rank " + std::to_string(rank_)}});
  meta("process_sort_index", 0, {{"sort_index", rank_}});
  meta("thread_name", kMainThread, {{"name", "main thread"}});
  meta("thread_sort_index", kMainThread, {{"sort_index", 0}});
  // Collectives whose spans overlap cannot share a track (a viewer nests what shares one): each
  // goes to the first lane free at its launch, in launch order.
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) { return a.begin < b.begin; });
  std::vector<int64_t> lane_free_at;
  for (const Event& e : events) {
    if (e.ph == 'C') {
      out.push_back({{"name", e.name}, {"ph", "C"}, {"pid", rank_}, {"tid", 0}, {"ts", Micros(e.begin)}, {"args", e.args}});
      continue;
    }
    int tid = kMainThread;
    if (e.comm) {
      size_t lane = 0;
      while (lane < lane_free_at.size() && lane_free_at[lane] > e.begin) ++lane;
      if (lane == lane_free_at.size()) {
        lane_free_at.push_back(0);
        meta("thread_name", kFirstLane + static_cast<int>(lane), {{"name", "communication " + std::to_string(lane)}});
        meta("thread_sort_index", kFirstLane + static_cast<int>(lane), {{"sort_index", 1 + static_cast<int>(lane)}});
      }
      lane_free_at[lane] = std::max(e.end, e.begin + 1);
      tid = kFirstLane + static_cast<int>(lane);
    }
    json ev = {{"name", e.name}, {"cat", e.category}, {"ph", "X"},  {"pid", rank_},
               {"tid", tid},     {"ts", Micros(e.begin)}, {"dur", (e.end - e.begin) / 1000.0}};
    if (!e.args.is_null()) ev["args"] = e.args;
    out.push_back(std::move(ev));
  }
  json other_data = other.is_object() ? other : json::object();
  other_data["rank"] = rank_;
  other_data["world_size"] = world_size_;
  other_data["clock"] = {{"offset_ns", clock_.offset_ns},
                         {"uncertainty_ns", clock_.uncertainty_ns},
                         {"base_ns", clock_.base_ns},
                         {"synced", clock_.synced}};
  // Kineto's top-level key for the rank, which HolisticTraceAnalysis reads to tell the files of
  // a run's ranks apart (without it every file counts as rank 0).
  json distributed = {{"rank", rank_}, {"world_size", world_size_}};
  if (other_data.contains("backend")) distributed["backend"] = other_data["backend"];
  return {{"traceEvents", std::move(out)},
          {"displayTimeUnit", "ms"},
          {"distributedInfo", std::move(distributed)},
          {"otherData", std::move(other_data)}};
}

Scope::Scope(const char* category, std::string name, nlohmann::json args)
    : recorder_(Recorder::Active()), category_(category) {
  if (recorder_ == nullptr) return;
  name_ = std::move(name);
  args_ = std::move(args);
  begin_ = NowNs();
}

Scope::~Scope() {
  if (recorder_ != nullptr) recorder_->Span(category_, name_, begin_, NowNs(), std::move(args_));
}

}  // namespace distlm::trace
