// One rank's timeline while it traces (--trace): spans of the main thread (forward, backward,
// the stage's synchronisation, clipping, the optimizer, evaluation, snapshots), the collectives
// (each from launch to completion, with its bytes and dtype) and counters (memory), written as a
// Chrome trace: the JSON that chrome://tracing, Perfetto and PyTorch's profiler use
// (docs/design/trace_and_tensorboard.md has the format's facts).
//
// Why not LibTorch's profiler: Debian's 1.13 build has no Kineto, its legacy profiler records
// operators but not distlm's phases or Gloo's work on its own threads, and the timeline must
// be the same on both LibTorch lines. This records what distlm already knows (the Trainer's
// phases, the counting process group's collectives) on one clock.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace distlm::trace {

// steady_clock, in nanoseconds: the clock every event is stamped with.
int64_t NowNs();

// How this rank's clock maps onto rank 0's (clock_sync.h): t_rank0 = t_local + offset_ns, known
// to within uncertainty_ns. base_ns (rank 0's clock) is the trace's time 0.
struct ClockMapping {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;
  int64_t base_ns = 0;
  bool synced = false;  // false: the ranks' clocks were taken as one (one process, or no sync)
};

// The categories of main-thread spans, which the overlap analysis (overlap.h) keys on.
namespace cat {
inline constexpr char kUpdate[] = "update";        // one update, all its phases (args.update)
inline constexpr char kData[] = "data";
inline constexpr char kForward[] = "forward";
inline constexpr char kBackward[] = "backward";
inline constexpr char kSync[] = "grad_sync";       // the stage's synchronisation after backward
inline constexpr char kStep[] = "optimizer_step";  // the stage's optimizer step (clip and step inside)
inline constexpr char kClip[] = "clip";
inline constexpr char kOptimizer[] = "optimizer";
inline constexpr char kEval[] = "eval";
inline constexpr char kSnapshot[] = "snapshot";
inline constexpr char kComm[] = "comm";            // a collective, launch to completion
// A stage's unit hooks around a unit's forward (task 6 gathers the unit's parameters there):
// inside forward, but not computing it; the overlap analysis takes it out of compute time.
inline constexpr char kUnitHook[] = "unit_hook";
}  // namespace cat

class Recorder {
 public:
  Recorder(int rank, int world_size);

  void SetClock(const ClockMapping& clock) { clock_ = clock; }
  const ClockMapping& clock() const { return clock_; }
  int rank() const { return rank_; }

  // A span of the main thread (spans there nest: a phase inside its update).
  void Span(const std::string& category, const std::string& name, int64_t begin_ns, int64_t end_ns,
            nlohmann::json args = nullptr);
  // A collective from launch to completion (done_ns 0: completion unknown, drawn as a point).
  // Safe from any thread.
  void Collective(const std::string& op, int64_t launch_ns, int64_t done_ns, nlohmann::json args);
  // The moment unit `unit`'s backward starts (its output's gradient arrived; from autograd's
  // thread). EndBackward turns the marks since the last call into one span per unit, each to the
  // next unit's start and the last to `end_ns`, the end of the backward pass.
  void MarkUnitBackward(int unit, int64_t t_ns);
  void EndBackward(int64_t end_ns);
  // A counter's values at t_ns (memory, in bytes).
  void Counter(const std::string& name, int64_t t_ns, nlohmann::json values);

  size_t size() const;
  // The Chrome trace, object form: traceEvents (this rank as process `rank`, the main thread and
  // one lane per collective that overlaps another), displayTimeUnit, otherData (`other` and the
  // clock).
  nlohmann::json ToJson(const nlohmann::json& other) const;

  // The recorder the library's scopes write to: set by the Trainer while an update it traces
  // runs, null otherwise (then a Scope costs one atomic load).
  static Recorder* Active() { return active_.load(std::memory_order_acquire); }
  static void SetActive(Recorder* r) { active_.store(r, std::memory_order_release); }

 private:
  struct Event {
    char ph;  // 'X' span or collective, 'C' counter
    bool comm = false;
    std::string category, name;
    int64_t begin = 0, end = 0;
    nlohmann::json args;
  };
  double Micros(int64_t t_ns) const;

  const int rank_, world_size_;
  ClockMapping clock_;
  mutable std::mutex mu_;
  std::vector<Event> events_;
  std::vector<std::pair<int64_t, int>> backward_marks_;  // (time, unit)
  static std::atomic<Recorder*> active_;
};

// A main-thread span from construction to destruction, recorded when a recorder is active.
class Scope {
 public:
  Scope(const char* category, std::string name, nlohmann::json args = nullptr);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Recorder* recorder_;
  const char* category_;
  std::string name_;
  nlohmann::json args_;
  int64_t begin_ = 0;
};

}  // namespace distlm::trace
