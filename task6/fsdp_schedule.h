// When task 6's functions (fsdp.h) run, given code: the unit hooks the model runs each unit
// through (model/unit_hooks.h), and a hook on each parameter's gradient.
//
//   before unit u's forward      GatherUnit(u)
//   after it                     ReshardUnit(u); a hook on u's output, if it needs a gradient
//   that hook (the gradient reached u's output: u's backward is next)
//                                GatherUnit(u); unit.AllocateGrad()
//   the last of u's parameters' gradients written (autograd's AccumulateGrad post-hooks)
//                                ReduceScatterGrad(u); ReshardUnit(u)
//   the end of backward          the same for a unit some of whose parameters got no gradient
//
// Every rank runs the same model, so every rank calls the collectives in the same order. After
// each function the schedule checks what it can see (bytes held), so that a mistake is named
// where it is made, not found later as a crash or a wrong loss. Outside training (evaluation,
// snapshots, saving) WithFullParameters gathers every unit for the duration.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/autograd/grad_ready_hook.h"
#include "common/model/unit_hooks.h"
#include "task6/fsdp_unit.h"

namespace distlm::task6 {

class FsdpSchedule {
 public:
  FsdpSchedule(c10d::ProcessGroup& pg, FsdpModel& model);
  FsdpSchedule(const FsdpSchedule&) = delete;
  FsdpSchedule& operator=(const FsdpSchedule&) = delete;

  // What the model runs its units through (for StageContext::SetUnitHooks).
  const model::UnitHooks* hooks() const { return &hooks_; }

  // Finishes the units whose backward started but whose gradients did not all arrive (runs at
  // the end of every backward by itself; calling it again does nothing).
  void FinishBackward();

  // `use` with every unit's full parameters (a collective: every rank calls it); the hooks do
  // nothing meanwhile. Afterwards each rank keeps its block of what the parameters then hold
  // (what `use` wrote: a resume), and frees the rest.
  void WithFullParameters(const std::function<void()>& use);

  struct Figures {
    double comm_ms = 0;           // time in GatherUnit and ReduceScatterGrad
    int64_t peak_full_bytes = 0;  // most bytes of full parameters and gradients held at once
    int gathers = 0, reduce_scatters = 0;
  };
  // Since the last call.
  Figures TakeFigures();

  // What happened, in order ("gather 3", "reshard 3", "reduce_scatter 3", "backward 3" for the
  // gradient reaching unit 3's output), for tests; cleared by ClearEvents.
  const std::vector<std::string>& events() const { return events_; }
  void ClearEvents() { events_.clear(); }

 private:
  enum class State { kSharded, kForward, kBackward };
  void Gather(int u, const char* when);
  void Reshard(int u, const char* when);
  void BeforeBackward(int u);
  void GradientReady(int u);
  void AfterBackward(int u);
  void NoteFullBytes();

  c10d::ProcessGroup& pg_;
  FsdpModel& model_;
  model::UnitHooks hooks_;
  std::vector<autograd::GradReadyHook> grad_hooks_;
  std::vector<State> state_;
  std::vector<int> arrived_;   // per unit: gradients written in this backward
  std::vector<int> expected_;  // per unit: its parameters that get one (those with a hook)
  bool callback_queued_ = false;
  int full_depth_ = 0;
  Figures figures_;
  std::vector<std::string> events_;
};

}  // namespace distlm::task6
