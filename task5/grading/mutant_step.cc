// //task5/grading:mutant_step -- see mutant_step.h. The reference's own arithmetic and
// collectives (task5/reference/sharded_step.cc, compiled as ReferenceShardedStep), with the
// mistake put in where a student makes it.
#include "task5/grading/mutant_step.h"

#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/runtime/errors.h"
#include "task5/grading/reference_sharded_step.h"
#include "task5/sharded_step.h"

namespace distlm::task5 {
namespace {

bool Is(const char* m) { return ZeroMutation() == m; }

// The norm of the whole averaged gradient as it stands (every rank's part of its square, summed).
double GlobalNorm(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt) {
  std::vector<torch::Tensor> sq = {torch::tensor({opt.ShardSquaredNorm()}, torch::kDouble)};
  pg.allreduce(sq)->wait();
  return std::sqrt(sq[0].item<double>());
}

}  // namespace

std::string& ZeroMutation() {
  static std::string m = "zero_none";
  return m;
}

const std::vector<std::string>& ZeroMutations() {
  static const std::vector<std::string> all = {
      "zero_none",         "zero_no_allgather", "zero_wrong_shard", "zero_local_norm",  "zero_no_division",
      "zero_own_gradient", "zero_no_clip",      "zero_clipped_norm", "zero_gather_first"};
  return all;
}

double ShardedStep(c10d::ProcessGroup& pg, zero::ShardedAdamW& opt, double max_grad_norm) {
  const std::vector<std::string>& all = ZeroMutations();
  if (std::find(all.begin(), all.end(), ZeroMutation()) == all.end()) {
    throw UserError("--mutation=" + ZeroMutation() + " is not a known mistake of task 5");
  }
  if (Is("zero_none")) return ReferenceShardedStep(pg, opt, max_grad_norm);
  const int64_t S = opt.layout().shard_numel();
  torch::NoGradGuard no_grad;
  if (Is("zero_wrong_shard")) {
    // The all-reduce + slice fallback with the slice at the next rank's offset.
    std::vector<torch::Tensor> t = {opt.flat_grad()};
    pg.allreduce(t)->wait();
    opt.grad_shard().copy_(opt.flat_grad().narrow(0, ((pg.getRank() + 1) % pg.getSize()) * S, S));
  } else if (Is("zero_own_gradient")) {
    opt.grad_shard().copy_(opt.flat_grad().narrow(0, pg.getRank() * S, S));
  } else {
    zero::ReduceScatterSum(pg, opt.flat_grad(), opt.grad_shard());
  }
  if (!Is("zero_no_division") && !Is("zero_own_gradient")) opt.grad_shard().div_(pg.getSize());
  double norm = 0;
  if (Is("zero_local_norm")) {
    // Each rank clips by its own shard's norm: each scales by its own coefficient.
    norm = std::sqrt(opt.ShardSquaredNorm());
    opt.ScaleGradShard(norm, max_grad_norm);
  } else if (Is("zero_no_clip")) {
    norm = GlobalNorm(pg, opt);
  } else {
    norm = opt.ClipGradShard(pg, max_grad_norm);
  }
  if (Is("zero_clipped_norm")) norm = GlobalNorm(pg, opt);
  if (Is("zero_gather_first")) zero::AllGather(pg, opt.param_shard(), opt.flat_params());
  opt.StepShard();
  // zero_no_allgather: each rank keeps the old values of every block but its own.
  if (!Is("zero_no_allgather") && !Is("zero_gather_first")) zero::AllGather(pg, opt.param_shard(), opt.flat_params());
  return norm;
}

}  // namespace distlm::task5
