#include "task6/fsdp_schedule.h"

#include <chrono>
#include <cstdio>

#include <torch/csrc/autograd/engine.h>
#include <torch/utils.h>
#include <torch/autograd.h>

#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "task6/fsdp.h"

namespace distlm::task6 {
namespace {

std::string Bytes(int64_t bytes) {
  if (bytes < 1000000) return std::to_string(bytes) + " bytes";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

}  // namespace

const char* OverlapName(Overlap o) {
  switch (o) {
    case Overlap::kBlocking: return "blocking";
    case Overlap::kPrefetch: return "prefetch";
    case Overlap::kFull: return "overlap";
  }
  return "?";
}

Overlap ParseOverlap(const std::string& name) {
  for (Overlap o : {Overlap::kBlocking, Overlap::kPrefetch, Overlap::kFull}) {
    if (name == OverlapName(o)) return o;
  }
  throw UserError("--fsdp=" + name + " is not one of blocking (6a), prefetch (6b), overlap (6c)");
}

FsdpSchedule::FsdpSchedule(c10d::ProcessGroup& pg, FsdpModel& model, Overlap overlap)
    : pg_(pg),
      model_(model),
      overlap_(overlap),
      gathering_(model.num_units()),
      state_(model.num_units(), State::kSharded),
      arrived_(model.num_units(), 0),
      expected_(model.num_units(), 0) {
  hooks_.before_forward = [this](int u) {
    if (full_depth_ > 0) return;
    Gather(u, "before its forward");
    Prefetch(u, Pass::kForward);
    state_[u] = State::kForward;
  };
  hooks_.after_forward = [this](int u, torch::Tensor out) {
    if (full_depth_ > 0) return out;
    Reshard(u, "after its forward");
    state_[u] = State::kSharded;
    if (out.requires_grad()) out.register_hook([this, u](const torch::Tensor&) { BeforeBackward(u); });
    return out;
  };
  for (int u = 0; u < model_.num_units(); ++u) {
    for (const auto& [name, p] : model_.unit(u).params()) {
      if (!p.requires_grad()) continue;
      grad_hooks_.emplace_back(p, [this, u] { GradientReady(u); });
      ++expected_[u];
    }
  }
}

void FsdpSchedule::Gather(int u, const char* when) {
  const auto start = std::chrono::steady_clock::now();
  if (gathering_[u]) {
    // Launched ahead (6b): only what is left of it is waited for.
    std::exchange(gathering_[u], {})->wait();
    figures_.wait_ms += MsSince(start);
    events_.push_back("wait " + std::to_string(u));
    CheckGathered(u, when, "the all-gather StartGather launched");
  } else {
    GatherUnit(pg_, model_.unit(u));
    figures_.wait_ms += MsSince(start);
    events_.push_back("gather " + std::to_string(u));
    CheckGathered(u, when, "GatherUnit");
  }
  ++figures_.gathers;
  NoteFullBytes();
}

void FsdpSchedule::CheckGathered(int u, const char* when, const char* by) {
  if (model_.unit(u).gathered()) return;
  throw UserError("task6: " + std::string(by) + " finished, " + when + ", but " + model_.unit(u).name() +
                  "'s full parameters have no bytes: give unit.full_params() its storage back "
                  "(AllocateStorage) before gathering into it");
}

namespace {
int RightPrefetch(int u, Pass pass, int n) { return pass == Pass::kForward ? (u + 1 < n ? u + 1 : -1) : u - 1; }
}  // namespace

std::string PrefetchMistake(int u, Pass pass, int got, int n) {
  const int want = RightPrefetch(u, pass, n);
  if (got == want) return "";
  const bool fwd = pass == Pass::kForward;
  const std::string call = "task6: UnitToPrefetch(" + std::to_string(u) + ", " + (fwd ? "kForward" : "kBackward") +
                           ", " + std::to_string(n) + ") returned " + std::to_string(got) + ": ";
  if (got < -1 || got >= n) return call + "not a unit (0.." + std::to_string(n - 1) + ") nor -1";
  if (got == -1) {
    return call + "nothing is prefetched, so unit " + std::to_string(want) + " is gathered only when its turn comes " +
           "and every rank waits for it; the unit to gather ahead is the one " + (fwd ? "forward" : "backward") +
           " runs next";
  }
  if (want == -1) {
    return call + "unit " + std::to_string(u) + " is the last to compute in " + (fwd ? "forward" : "backward") +
           " (return -1)";
  }
  if (got == u) return call + "unit " + std::to_string(u) + " itself, which is gathered already";
  if (fwd ? got < u : got > u) {
    return call + "unit " + std::to_string(got) + "'s " + (fwd ? "forward" : "backward") + " is over: " +
           (fwd ? "forward runs the units first to last" : "backward runs the units last to first");
  }
  return call + "more than one unit ahead: unit " + std::to_string(want) + " would be gathered only when its turn " +
         "comes, and two units' parameters would wait whole; prefetch the next one";
}

void FsdpSchedule::Prefetch(int u, Pass pass) {
  if (overlap_ == Overlap::kBlocking) return;
  const int n = model_.num_units();
  const int v = UnitToPrefetch(u, pass, n);
  if (const std::string wrong = PrefetchMistake(u, pass, v, n); !wrong.empty()) throw UserError(wrong);
  if (v < 0 || gathering_[v] || model_.unit(v).gathered()) return;
  c10::intrusive_ptr<c10d::Work> work = StartGather(pg_, model_.unit(v));
  events_.push_back("prefetch " + std::to_string(v));
  if (!work) {
    throw UserError("task6: StartGather returned no Work for " + model_.unit(v).name() +
                    ": return the handle the all-gather gave you, without waiting for it");
  }
  if (!work->isCompleted()) ++figures_.gathers_running_at_return;
  ++figures_.prefetched;
  gathering_[v] = std::move(work);
  CheckGathered(v, "when it launched a prefetch", "StartGather");
  NoteFullBytes();
}

void FsdpSchedule::DropPrefetched(bool reshard) {
  for (int u = 0; u < model_.num_units(); ++u) {
    if (!gathering_[u]) continue;
    std::exchange(gathering_[u], {})->wait();
    if (reshard) Reshard(u, "when its prefetch went unused");
  }
}

void FsdpSchedule::Reshard(int u, const char* when) {
  FsdpUnit& unit = model_.unit(u);
  ReshardUnit(unit);
  events_.push_back("reshard " + std::to_string(u));
  if (unit.gathered()) {
    throw UserError("task6: " + unit.name() + "'s parameters were not freed " + when + ": rank " +
                    std::to_string(model_.rank()) + " held " + Bytes(StorageBytes(unit.full_params())) +
                    " more than its shard (release the storage of unit.full_params(): autograd keeps views of "
                    "the parameters, so a tensor dropped frees nothing)");
  }
}

void FsdpSchedule::BeforeBackward(int u) {
  events_.push_back("backward " + std::to_string(u));
  if (!callback_queued_) {
    // Runs once this backward is over, on its thread: the units left unfinished.
    torch::autograd::Engine::get_default_engine().queue_callback([this] { FinishBackward(); });
    callback_queued_ = true;
  }
  Gather(u, "before its backward");
  Prefetch(u, Pass::kBackward);
  model_.unit(u).AllocateGrad();
  NoteFullBytes();
  arrived_[u] = 0;
  state_[u] = State::kBackward;
}

void FsdpSchedule::GradientReady(int u) {
  if (full_depth_ > 0) return;
  if (state_[u] != State::kBackward) {
    throw std::logic_error("task6: a gradient of " + model_.unit(u).name() + " arrived outside its backward");
  }
  if (++arrived_[u] == expected_[u]) AfterBackward(u);
}

void FsdpSchedule::CheckGradFreed(int u, const char* by) {
  const FsdpUnit& unit = model_.unit(u);
  if (!unit.holds_full_grad()) return;
  throw UserError("task6: the full gradient of " + unit.name() + " was not freed by " + by + ": rank " +
                  std::to_string(model_.rank()) + " held " + Bytes(unit.FullBytes()) +
                  " more than its shard (unit.FreeGrad())");
}

void FsdpSchedule::AfterBackward(int u) {
  ++figures_.reduce_scatters;
  if (overlap_ == Overlap::kFull) {
    StartReduce(u);
  } else {
    const auto start = std::chrono::steady_clock::now();
    ReduceScatterGrad(pg_, model_.unit(u));
    figures_.wait_ms += MsSince(start);
    events_.push_back("reduce_scatter " + std::to_string(u));
    CheckGradFreed(u, "ReduceScatterGrad");
  }
  Reshard(u, "after its backward");
  state_[u] = State::kSharded;
  // The previous unit's reduce-scatter ran behind this unit's backward; at most two in flight.
  while (reducing_.size() > 1) FinishReduce();
}

void FsdpSchedule::StartReduce(int u) {
  FsdpUnit& unit = model_.unit(u);
  PendingReduceScatter pending = StartReduceScatter(pg_, unit);
  events_.push_back("reduce_scatter " + std::to_string(u));
  if (!pending.work) {
    throw UserError("task6: StartReduceScatter returned no Work for " + unit.name() +
                    ": return the handle of the collective you launched, without waiting for it");
  }
  if (!unit.holds_full_grad()) {
    pending.work->wait();
    throw UserError("task6: StartReduceScatter freed the full gradient of " + unit.name() +
                    " while its reduce-scatter was still reading it: free it in FinishReduceScatter, after wait()");
  }
  if (!pending.work->isCompleted()) ++figures_.reduce_scatters_running_at_return;
  reducing_.push_back({u, std::move(pending)});
}

void FsdpSchedule::FinishReduce() {
  Reducing r = std::move(reducing_.front());
  reducing_.erase(reducing_.begin());
  const auto start = std::chrono::steady_clock::now();
  FinishReduceScatter(pg_, model_.unit(r.unit), r.pending);
  figures_.wait_ms += MsSince(start);
  events_.push_back("reduce_scatter_done " + std::to_string(r.unit));
  if (!r.pending.work->isCompleted()) {
    throw UserError("task6: FinishReduceScatter returned before the reduce-scatter of " + model_.unit(r.unit).name() +
                    " completed: wait() for it before reading its result");
  }
  CheckGradFreed(r.unit, "FinishReduceScatter");
}

void FsdpSchedule::FinishBackward() {
  callback_queued_ = false;
  // In backward's order (the last unit first), as the ranks would have met them.
  for (int u = model_.num_units() - 1; u >= 0; --u) {
    if (state_[u] == State::kBackward) AfterBackward(u);
  }
  while (!reducing_.empty()) FinishReduce();
  DropPrefetched(/*reshard=*/true);
}

void FsdpSchedule::NoteFullBytes() {
  int64_t held = 0;
  for (int u = 0; u < model_.num_units(); ++u) {
    held += StorageBytes(model_.unit(u).full_params()) + StorageBytes(model_.unit(u).full_grad());
  }
  figures_.peak_full_bytes = std::max(figures_.peak_full_bytes, held);
}

void FsdpSchedule::WithFullParameters(const std::function<void()>& use) {
  if (full_depth_ > 0) return use();
  DropPrefetched(/*reshard=*/false);
  for (int u = 0; u < model_.num_units(); ++u) {
    if (!model_.unit(u).gathered()) Gather(u, "for a use of the whole model");
  }
  ++full_depth_;
  try {
    use();
  } catch (...) {
    --full_depth_;
    throw;
  }
  --full_depth_;
  torch::NoGradGuard no_grad;
  for (int u = 0; u < model_.num_units(); ++u) {
    FsdpUnit& unit = model_.unit(u);
    unit.param_shard().copy_(unit.full_params().narrow(0, unit.layout().shard_begin(unit.rank()), unit.shard_numel()));
    Reshard(u, "after a use of the whole model");
  }
}

FsdpSchedule::Figures FsdpSchedule::TakeFigures() { return std::exchange(figures_, {}); }

}  // namespace distlm::task6
