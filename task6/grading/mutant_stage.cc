// //task6/grading:mutant_stage -- task 6's stage with the reference (task6/reference/fsdp.cc,
// under the names of reference_fsdp.h) carrying one deliberate mistake, chosen by --mutation.
// The grader runs the mistakes that change the losses (grading.cc: OwnMistakes) to recognise a
// submission's by its trace; the grading suite grades every one as a task 6 submission and
// checks what it loses, and with which message.
//
// Grader-private, as all of grading/: --mutation=fsdp_none is the reference.
#include <torch/utils.h>

#include <string>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"
#include "common/train/run_stage.h"
#include "grading/mutation_flag.h"
#include "part1/train_step.h"
#include "task6/fsdp.h"
#include "task6/fsdp_stage.h"
#include "task6/grading/reference_fsdp.h"

ABSL_FLAG(std::string, mutation, "fsdp_none",
          "fsdp_none (correct), fsdp_no_average, fsdp_wrong_shard, fsdp_reduced_twice, fsdp_no_reshard, "
          "fsdp_no_prefetch, fsdp_reduce_waited");

namespace distlm::task6 {
namespace {

const char* const kMutations[] = {"fsdp_none",          "fsdp_no_average", "fsdp_wrong_shard", "fsdp_reduced_twice",
                                  "fsdp_no_reshard",    "fsdp_no_prefetch", "fsdp_reduce_waited"};

std::string& Mutation() {
  static std::string m = "fsdp_none";
  return m;
}

bool Is(const char* m) { return Mutation() == m; }

}  // namespace

void GatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit) { ReferenceGatherUnit(pg, unit); }

// fsdp_no_reshard: the full parameters stay (the schedule names it after the first forward).
void ReshardUnit(FsdpUnit& unit) {
  if (!Is("fsdp_no_reshard")) ReferenceReshardUnit(unit);
}

// fsdp_no_prefetch: the all-gather waited inside, so nothing travels while a unit computes.
c10::intrusive_ptr<c10d::Work> StartGather(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  c10::intrusive_ptr<c10d::Work> work = ReferenceStartGather(pg, unit);
  if (Is("fsdp_no_prefetch")) work->wait();
  return work;
}

int UnitToPrefetch(int u, Pass pass, int num_units) { return ReferenceUnitToPrefetch(u, pass, num_units); }

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
  ReferenceFinishReduceScatter(pg, unit, pending);
  const torch::Tensor added = unit.grad_shard() - before;  // this micro-batch's averaged block
  // fsdp_no_average: the sum over ranks (N times the average); fsdp_reduced_twice: added twice.
  if (Is("fsdp_no_average")) unit.grad_shard().add_(added, pg.getSize() - 1);
  if (Is("fsdp_reduced_twice")) unit.grad_shard().add_(added);
}

void ReduceScatterGrad(c10d::ProcessGroup& pg, FsdpUnit& unit) {
  PendingReduceScatter pending = StartReduceScatter(pg, unit);
  FinishReduceScatter(pg, unit, pending);
}

double ShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm) {
  return ReferenceShardedStep(pg, model, max_grad_norm);
}

}  // namespace distlm::task6

int main(int argc, char** argv) {
  const std::string mutation = distlm::grading::FlagFromArgv(argc, argv, "--mutation", "fsdp_none");
  bool known = false;
  for (const char* k : distlm::task6::kMutations) known = known || mutation == k;
  if (!known) {
    return distlm::RunMain([&]() -> int {
      throw distlm::UserError("--mutation=" + mutation +
                              " is not one of fsdp_none, fsdp_no_average, fsdp_wrong_shard, fsdp_reduced_twice, "
                              "fsdp_no_reshard, fsdp_no_prefetch, fsdp_reduce_waited");
    });
  }
  distlm::task6::Mutation() = mutation;
  return distlm::train::RunStageMain(argc, argv,
                                     distlm::task6::MakeFsdpStage("task6", distlm::part1::MakeTrainStep()));
}
