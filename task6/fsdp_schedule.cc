#include "task6/fsdp_schedule.h"

#include <chrono>
#include <cstdio>

#include <torch/csrc/autograd/engine.h>

#include "common/runtime/errors.h"
#include "task6/fsdp.h"

namespace distlm::task6 {
namespace {

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

std::string Bytes(int64_t bytes) {
  if (bytes < 1000000) return std::to_string(bytes) + " bytes";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

}  // namespace

FsdpSchedule::FsdpSchedule(c10d::ProcessGroup& pg, FsdpModel& model)
    : pg_(pg),
      model_(model),
      state_(model.num_units(), State::kSharded),
      arrived_(model.num_units(), 0),
      expected_(model.num_units(), 0) {
  hooks_.before_forward = [this](int u) {
    if (full_depth_ > 0) return;
    Gather(u, "before its forward");
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
  FsdpUnit& unit = model_.unit(u);
  const auto start = std::chrono::steady_clock::now();
  GatherUnit(pg_, unit);
  figures_.comm_ms += MsSince(start);
  ++figures_.gathers;
  events_.push_back("gather " + std::to_string(u));
  if (!unit.gathered()) {
    throw UserError("task6: GatherUnit returned, " + std::string(when) + ", but " + unit.name() +
                    "'s full parameters have no bytes: give unit.full_params() its storage back "
                    "(AllocateStorage) before gathering into it");
  }
  NoteFullBytes();
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

void FsdpSchedule::AfterBackward(int u) {
  FsdpUnit& unit = model_.unit(u);
  const auto start = std::chrono::steady_clock::now();
  ReduceScatterGrad(pg_, unit);
  figures_.comm_ms += MsSince(start);
  ++figures_.reduce_scatters;
  events_.push_back("reduce_scatter " + std::to_string(u));
  if (unit.holds_full_grad()) {
    throw UserError("task6: the full gradient of " + unit.name() + " was not freed after its reduce-scatter: rank " +
                    std::to_string(model_.rank()) + " held " + Bytes(unit.FullBytes()) +
                    " more than its shard (unit.FreeGrad())");
  }
  Reshard(u, "after its backward");
  state_[u] = State::kSharded;
}

void FsdpSchedule::FinishBackward() {
  callback_queued_ = false;
  // In backward's order (the last unit first), as the ranks would have met them.
  for (int u = model_.num_units() - 1; u >= 0; --u) {
    if (state_[u] == State::kBackward) AfterBackward(u);
  }
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
