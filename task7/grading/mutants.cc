// //task7/grading:mutants -- task 7's functions as the reference's (task7/reference/*.cc,
// under the names of reference_tensor_parallel.h) with one deliberate mistake, chosen by
// Mutation(): linked into the grader's mutant stage (mutant_stage.cc) and into the local tests
// run on the mistakes (local_test_mistakes_test.cc). Grader-private, as all of grading/.
#include "task7/grading/mutants.h"

#include <torch/nn/functional/linear.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "task7/device_mesh.h"
#include "task7/grading/reference_tensor_parallel.h"
#include "task7/pipeline_parallel.h"
#include "task7/pipeline_schedule.h"
#include "task7/tensor_parallel.h"

namespace distlm::task7 {

const char* const kMutations[] = {"tp_none",          "tp_f_no_backward", "tp_g_no_reduce", "tp_g_backward_reduced",
                                  "tp_bias_per_rank", "dp_no_average",    "dp_sum_not_mean", "mesh_coordinates_swapped",
                                  "pp_loss_last_only", "pp_no_grad_back",  "pp_input_without_grad",
                                  "pp_1f1b_warmup_too_long", "pp_afab_logged_as_1f1b", "pp_recompute_logged_as_1f1b"};

const size_t kMutationCount = sizeof(kMutations) / sizeof(kMutations[0]);

std::string& Mutation() {
  static std::string m = "tp_none";
  return m;
}

namespace {

bool Is(const char* m) { return Mutation() == m; }

}  // namespace

// tp_f_no_backward: f the plain identity, so backward never sums the input's gradient.
torch::Tensor CopyToTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg) {
  return Is("tp_f_no_backward") ? x : ReferenceCopyToTensorParallel(x, pg);
}

// tp_g_no_reduce: each rank keeps its partial product. tp_g_backward_reduced: g's backward sums
// the gradient too (f then g: forward the sum, backward the sum of the gradients).
torch::Tensor ReduceFromTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg) {
  if (Is("tp_g_no_reduce")) return x;
  if (Is("tp_g_backward_reduced")) return ReferenceReduceFromTensorParallel(ReferenceCopyToTensorParallel(x, pg), pg);
  return ReferenceReduceFromTensorParallel(x, pg);
}

torch::Tensor ColumnParallelLinear(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                   const torch::Tensor& bias_shard, const dist::GroupPtr& pg) {
  return torch::linear(CopyToTensorParallel(x, pg), weight_shard, bias_shard);
}

// tp_bias_per_rank: every rank adds the bias to its partial product, so the sum holds it T times.
torch::Tensor RowParallelLinear(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                const torch::Tensor& bias, const dist::GroupPtr& pg) {
  if (Is("tp_bias_per_rank")) return ReduceFromTensorParallel(torch::linear(x_shard, weight_shard, bias), pg);
  return ReduceFromTensorParallel(torch::linear(x_shard, weight_shard), pg) + bias;
}

// mesh_coordinates_swapped: the tensor-first groups, but this rank's place read the other way
// round (tensor_rank = rank / T, data_rank = rank % T).
MeshLayout MakeMeshLayout(int rank, int world_size, int tensor_size) {
  MeshLayout m = ReferenceMakeMeshLayout(rank, world_size, tensor_size);
  if (Is("mesh_coordinates_swapped")) {
    m.tensor_rank = rank / tensor_size;
    m.data_rank = rank % tensor_size;
  }
  return m;
}

// dp_no_average: each replica keeps its own gradients. dp_sum_not_mean: summed, not divided.
void AverageOverDataGroup(const std::vector<torch::Tensor>& parameters, const dist::GroupPtr& data_group) {
  if (Is("dp_no_average")) return;
  ReferenceAverageOverDataGroup(parameters, data_group);
  if (Is("dp_sum_not_mean")) {
    torch::NoGradGuard no_grad;
    for (const auto& p : parameters) {
      if (p.grad().defined()) p.grad().mul_(data_group->getSize());
    }
  }
}

// pp_1f1b_warmup_too_long: 1F1B with P - s warm-up forwards instead of P - s - 1. It trains
// correctly (the sends do not wait), but stage s holds one micro-batch more than 1F1B's P - s.
//
// pp_afab_logged_as_1f1b, a forgery rather than a mistake: its StageSteps is right (the grader
// calls it directly), but asked for 1F1B its loop runs all forward all backward (the same sums in
// the same order: the same numbers), and rank 0 rewrites its log's in-flight count to 1F1B's 2
// once training ended (ForgeInFlightPeak). Only the memory it held gives it away.
//
// pp_recompute_logged_as_1f1b, the forgery that holds less than 1F1B: all forward all backward,
// each forward run without autograd (only the micro-batch's input kept) and run again, with it,
// at the micro-batch's backward (RunPipelineSteps). The same numbers; one micro-batch's
// activations at a time; the log rewritten as pp_afab_logged_as_1f1b's.
std::vector<PipelineStep> StageSteps(PipelineSchedule schedule, int stages, int stage, int micro_batches) {
  if (!Is("pp_1f1b_warmup_too_long") || schedule != PipelineSchedule::kOneForwardOneBackward) {
    return ReferenceStageSteps(schedule, stages, stage, micro_batches);
  }
  std::vector<PipelineStep> steps;
  int f = 0, b = 0;
  for (; f < std::min(micro_batches, stages - stage); ++f) steps.push_back({true, f});
  while (b < micro_batches) {
    if (f < micro_batches) steps.push_back({true, f++});
    steps.push_back({false, b++});
  }
  return steps;
}

// The reference loop around a stage whose steps carry the mistake. pp_loss_last_only: returns the
// last micro-batch's loss, not the sum. pp_no_grad_back: the gradient sent back to stage s - 1 is
// zeros. pp_input_without_grad: the received input is handed on without requires_grad_.
double RunPipelineSteps(const PipelineStage& stage, const std::vector<PipelineStep>& steps) {
  PipelineStage mutated = stage;
  auto inputs = std::make_shared<std::map<int, torch::Tensor>>();
  auto last_loss = std::make_shared<double>(0);
  mutated.forward = [stage, inputs, last_loss](int m, const torch::Tensor& input) {
    (*inputs)[m] = input;
    if (Is("pp_recompute_logged_as_1f1b")) {
      torch::NoGradGuard no_graph;
      return stage.forward(m, input);
    }
    torch::Tensor out = stage.forward(m, Is("pp_input_without_grad") && input.defined() ? input.detach() : input);
    if (stage.stage == stage.stages - 1) *last_loss = out.item<double>();
    return out;
  };
  mutated.backward = [stage, inputs](int m, const torch::Tensor& output, const torch::Tensor& grad_output) {
    if (Is("pp_recompute_logged_as_1f1b")) {
      stage.backward(m, stage.forward(m, inputs->at(m)), grad_output);
    } else {
      stage.backward(m, output, grad_output);
    }
    const torch::Tensor input = inputs->at(m);
    inputs->erase(m);
    if (Is("pp_no_grad_back") && input.defined() && input.grad().defined()) input.grad().zero_();
  };
  // The forgeries run all forward all backward whatever the steps they are handed.
  std::vector<PipelineStep> run = steps;
  if (Is("pp_afab_logged_as_1f1b") || Is("pp_recompute_logged_as_1f1b")) {
    const int micro_batches = static_cast<int>(std::count_if(steps.begin(), steps.end(), [](const PipelineStep& s) {
      return s.forward;
    }));
    run = ReferenceStageSteps(PipelineSchedule::kAllForwardAllBackward, stage.stages, stage.stage, micro_batches);
  }
  const double sum = ReferenceRunPipelineSteps(mutated, run);
  return Is("pp_loss_last_only") && stage.stage == stage.stages - 1 ? *last_loss : sum;
}

}  // namespace distlm::task7
