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
// With prefetch (6b), a gather is launched one unit ahead (StartGather(UnitToPrefetch(u))) as
// unit u is about to compute, and waited just before the unit it is for computes; a unit
// nobody prefetched is gathered on the spot (the first of each pass). With the overlapped
// reduce-scatter (6c), StartReduceScatter(u) replaces ReduceScatterGrad(u) and the previous
// unit's is finished right after it (so at most two are in flight, and at most two full
// gradients held), the last at the end of backward, before the step can read the shards.
//
// Every rank runs the same model, so every rank calls the collectives in the same order. After
// each function the schedule checks what it can see (bytes held), so that a mistake is named
// where it is made, not found later as a crash or a wrong loss. Outside training (evaluation,
// saving, a resume from a whole snapshot) WithFullParameters gathers every unit for the
// duration; snapshots are written in parts, each rank its shards, and gather nothing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "common/autograd/grad_ready_hook.h"
#include "common/model/unit_hooks.h"
#include "task6/fsdp.h"
#include "task6/fsdp_unit.h"

namespace distlm::task6 {

// Which of task 6's parts the schedule runs (--fsdp).
enum class Overlap {
  kBlocking,  // 6a: GatherUnit and ReduceScatterGrad, each waited where it is launched
  kPrefetch,  // 6b: gathers launched one unit ahead
  kFull,      // 6c: and reduce-scatters left running while backward goes on
};
// "blocking", "prefetch", "overlap"; ParseOverlap throws UserError naming --fsdp otherwise.
const char* OverlapName(Overlap o);
Overlap ParseOverlap(const std::string& name);

// What is wrong with `got`, UnitToPrefetch's answer for unit u of n in `pass`, in one line ("":
// nothing).
std::string PrefetchMistake(int u, Pass pass, int got, int n);

class FsdpSchedule {
 public:
  FsdpSchedule(c10d::ProcessGroup& pg, FsdpModel& model, Overlap overlap = Overlap::kBlocking);
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
    double wait_ms = 0;           // the main thread blocked on a collective of the schedule's
    int64_t peak_full_bytes = 0;  // most bytes of full parameters and gradients held at once
    int gathers = 0, reduce_scatters = 0;
    int prefetched = 0;           // gathers launched before the unit they are for computes
    // Launched collectives still running when StartGather / StartReduceScatter returned.
    int gathers_running_at_return = 0, reduce_scatters_running_at_return = 0;
  };
  // Since the last call.
  Figures TakeFigures();

  // What happened, in order, for tests; cleared by ClearEvents. "gather 3" (unit 3 gathered and
  // waited for), "prefetch 3" (its gather launched ahead), "wait 3" (that gather waited for),
  // "reshard 3", "backward 3" (the gradient reached unit 3's output), "reduce_scatter 3" (done, or
  // with 6c launched), "reduce_scatter_done 3" (6c: finished).
  const std::vector<std::string>& events() const { return events_; }
  void ClearEvents() { events_.clear(); }

 private:
  enum class State { kSharded, kForward, kBackward };
  void Gather(int u, const char* when);
  void Prefetch(int u, Pass pass);
  void CheckGathered(int u, const char* when, const char* by);
  void Reshard(int u, const char* when);
  void StartReduce(int u);
  void FinishReduce();
  void DropPrefetched(bool reshard);
  void CheckGradFreed(int u, const char* by);
  void BeforeBackward(int u);
  void GradientReady(int u);
  void AfterBackward(int u);
  void NoteFullBytes();

  c10d::ProcessGroup& pg_;
  FsdpModel& model_;
  Overlap overlap_;
  std::vector<c10::intrusive_ptr<c10d::Work>> gathering_;  // per unit: its launched gather, if any
  struct Reducing {
    int unit;
    PendingReduceScatter pending;
  };
  std::vector<Reducing> reducing_;  // 6c: launched reduce-scatters, oldest first
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
