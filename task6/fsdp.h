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

// Once per update, after the last backward: clip every unit's grad_shard by the norm of the
// WHOLE averaged gradient (model.ShardSquaredNorm() is this rank's part of its square), one
// AdamW step of the shards (model.StepShards()), and return the norm before clipping.
double ShardedStep(c10d::ProcessGroup& pg, FsdpModel& model, double max_grad_norm);

}  // namespace distlm::task6
