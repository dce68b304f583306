// Task 6: fully sharded data parallel (ZeRO stage 3, FSDP). Read docs/handout/part6.md first;
// check your work with: bazel test //task6:student_test
//
// What you are given (task6/fsdp_unit.h): the model cut into units (the embeddings, each
// encoder layer, the head), and per unit an FsdpUnit whose full_params() (N x S floats, N =
// pg.getSize()) every parameter of the unit is a view of, but which has no bytes between uses;
// this rank keeps only its block of it, param_shard() (S floats), its block of the averaged
// gradient, grad_shard(), and the AdamW moments of its block. task6/fsdp_schedule.h calls your
// functions at the right moments of each forward and backward:
//
//   unit u's forward:    GatherUnit(u)  ... the unit computes ...  ReshardUnit(u)
//   unit u's backward:   GatherUnit(u)  ... autograd writes unit.full_grad() ...
//                        ReduceScatterGrad(u)  ReshardUnit(u)
//   once per update:     ShardedStep
//
// That is 6a (--fsdp=blocking): every collective waited where it is launched, so the ranks
// compute nothing while they communicate. 6b (--fsdp=prefetch) launches the next unit's
// all-gather before the current unit computes (StartGather, UnitToPrefetch); 6c (--fsdp=overlap,
// the default) also leaves each reduce-scatter running while backward goes on
// (StartReduceScatter, FinishReduceScatter). The schedule waits for what you launched.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "task6/fsdp_unit.h"

namespace distlm::task6 {

// Before the unit's forward, and again before its backward: when you return,
// unit.full_params() holds every rank's block (rank r's param_shard() at [r*S, (r+1)*S)). Its
// storage has no bytes when you are called: AllocateStorage gives them back. The collective
// that fills N blocks from one block each, and what Gloo in LibTorch 1.13 lacks, are in the
// handout (the same as in task 5).
void GatherUnit(c10d::ProcessGroup& pg, FsdpUnit& unit);

// After the unit's forward and after its backward: free the unit's full parameters, so that
// this rank holds only its shard until the next gather. Autograd keeps views of the parameters
// for backward: freeing a tensor frees nothing while they live (fsdp_unit.h says why).
void ReshardUnit(FsdpUnit& unit);

// After the unit's backward: unit.full_grad() (N x S) holds this rank's gradient for the whole
// unit. Add to unit.grad_shard() this rank's block of the AVERAGE over ranks of full_grad (add:
// with gradient accumulation you are called once per micro-batch, and the shard sums them);
// then free the full gradient (unit.FreeGrad()).
void ReduceScatterGrad(c10d::ProcessGroup& pg, FsdpUnit& unit);

// ---- 6b: prefetch ----

// Launches the all-gather GatherUnit does and returns its handle WITHOUT waiting for it: the
// schedule calls wait() on it just before the unit computes, and until then the ranks compute
// another unit while it travels. Give the storage back before you launch.
c10::intrusive_ptr<c10d::Work> StartGather(c10d::ProcessGroup& pg, FsdpUnit& unit);

enum class Pass { kForward, kBackward };
// Unit u (of num_units, numbered in forward order: 0 is the embeddings) is about to compute in
// `pass`. Returns the unit whose all-gather should start now: it travels while u computes and
// has arrived when that unit's turn comes, and no unit is whole earlier than it needs to be
// (each one gathered ahead is memory held). -1 for none.
int UnitToPrefetch(int u, Pass pass, int num_units);

// ---- 6c: the reduce-scatter overlapped with the rest of backward ----

// What FinishReduceScatter needs of a launched reduce-scatter.
struct PendingReduceScatter {
  c10::intrusive_ptr<c10d::Work> work;
  torch::Tensor result;  // yours to use: e.g. the tensor the collective writes this rank's block into
};

// Launches the reduce-scatter of unit.full_grad() and returns at once, WITHOUT waiting: backward
// goes on with the units before this one while it runs. The collective still reads
// unit.full_grad(): free nothing yet.
PendingReduceScatter StartReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit);

// Called later (when the next unit's reduce-scatter has started, or at the end of backward):
// wait for it, then what ReduceScatterGrad does after its collective (add this rank's block of
// the average to unit.grad_shard(), free the full gradient).
void FinishReduceScatter(c10d::ProcessGroup& pg, FsdpUnit& unit, PendingReduceScatter& pending);

// Once per update, after the last backward. When it returns, the shards have taken exactly one
// AdamW step (model.StepShards()) on grad_shards clipped by the norm of the WHOLE averaged
// gradient, which no rank holds (model.ShardSquaredNorm() is this rank's part of its square).
// Returns that norm before clipping.
double ShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm);

}  // namespace distlm::task6
