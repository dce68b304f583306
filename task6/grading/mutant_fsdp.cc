// //task6/grading:mutant_fsdp -- see mutant_fsdp.h. The reference (task6/reference/fsdp.cc,
// under the names of reference_fsdp.h) with the mistake put in where a student makes it.
#include "task6/grading/mutant_fsdp.h"

#include <torch/utils.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/runtime/errors.h"
#include "task6/fsdp.h"
#include "task6/grading/reference_fsdp.h"

namespace distlm::task6 {
namespace {

bool Is(const char* m) {
  const std::vector<std::string>& all = FsdpMutations();
  if (std::find(all.begin(), all.end(), FsdpMutation()) == all.end()) {
    throw UserError("--mutation=" + FsdpMutation() + " is not a known mistake of task 6");
  }
  return FsdpMutation() == m;
}

}  // namespace

std::string& FsdpMutation() {
  static std::string m = "fsdp_none";
  return m;
}

const std::vector<std::string>& FsdpMutations() {
  static const std::vector<std::string> all = {
      "fsdp_none",          "fsdp_no_average",      "fsdp_wrong_shard", "fsdp_reduced_twice",
      "fsdp_no_reshard",    "fsdp_no_prefetch",     "fsdp_reduce_waited", "fsdp_overwrite_shard",
      "fsdp_grad_kept",     "fsdp_prefetch_forward_only"};
  return all;
}

void GatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit) { ReferenceGatherUnit(pg, unit); }

// fsdp_no_reshard: the full parameters stay.
void ReshardUnit(FsdpUnit& unit) {
  if (!Is("fsdp_no_reshard")) ReferenceReshardUnit(unit);
}

// fsdp_no_prefetch: the all-gather waited inside, so nothing travels while a unit computes.
c10::intrusive_ptr<c10d::Work> StartGather(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  c10::intrusive_ptr<c10d::Work> work = ReferenceStartGather(pg, unit);
  if (Is("fsdp_no_prefetch")) work->wait();
  return work;
}

int UnitToPrefetch(int u, Pass pass, int num_units) {
  if (Is("fsdp_prefetch_forward_only")) return u + 1 < num_units ? u + 1 : -1;
  return ReferenceUnitToPrefetch(u, pass, num_units);
}

PendingReduceScatter StartReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  if (Is("fsdp_wrong_shard")) {
    // The whole sum, and the NEXT rank's block of it.
    std::vector<torch::Tensor> t = {unit.full_grad()};
    c10::intrusive_ptr<c10d::Work> work = pg.allreduce(t);
    const int64_t s = unit.shard_numel();
    return {work, unit.full_grad().narrow(0, ((pg.getRank() + 1) % pg.getSize()) * s, s)};
  }
  PendingReduceScatter pending = ReferenceStartReduceScatter(pg, unit);
  if (Is("fsdp_reduce_waited")) pending.work->wait();  // backward waits for every reduce-scatter
  return pending;
}

void FinishReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit, PendingReduceScatter& pending) {
  torch::NoGradGuard no_grad;
  const torch::Tensor before = unit.grad_shard().clone();
  if (Is("fsdp_grad_kept")) {
    // Everything but the free: the full gradient stays until the next AllocateGrad.
    pending.work->wait();
    unit.grad_shard().add_(pending.result.div_(pg.getSize()));
    return;
  }
  ReferenceFinishReduceScatter(pg, unit, pending);
  const torch::Tensor added = unit.grad_shard() - before;  // this micro-batch's averaged block
  // fsdp_no_average: the sum over ranks (N times the average); fsdp_reduced_twice: added twice;
  // fsdp_overwrite_shard: only this micro-batch's.
  if (Is("fsdp_no_average")) unit.grad_shard().add_(added, pg.getSize() - 1);
  if (Is("fsdp_reduced_twice")) unit.grad_shard().add_(added);
  if (Is("fsdp_overwrite_shard")) unit.grad_shard().copy_(added);
}

void ReduceScatterGrad(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  PendingReduceScatter pending = StartReduceScatter(pg, unit);
  FinishReduceScatter(pg, unit, pending);
}

double ShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm) {
  return ReferenceShardedStep(pg, model, max_grad_norm);
}

}  // namespace distlm::task6
