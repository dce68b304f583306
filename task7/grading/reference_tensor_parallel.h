// Task 7's reference solution (task7/reference/*.cc) compiled under other names
// (BUILD's renamed_reference), for the mutant: task7/tensor_parallel.h's functions with
// "Reference" in front. Grader-private, as every grading/ folder.
#pragma once

#include <torch/types.h>

#include "task7/device_mesh.h"
#include "task7/pipeline_parallel.h"
#include "task7/tensor_parallel.h"

namespace distlm::task7 {

torch::Tensor ReferenceCopyToTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg);
torch::Tensor ReferenceReduceFromTensorParallel(const torch::Tensor& x, const dist::GroupPtr& pg);
torch::Tensor ReferenceColumnParallelLinear(const torch::Tensor& x, const torch::Tensor& weight_shard,
                                            const torch::Tensor& bias_shard, const dist::GroupPtr& pg);
torch::Tensor ReferenceRowParallelLinear(const torch::Tensor& x_shard, const torch::Tensor& weight_shard,
                                         const torch::Tensor& bias, const dist::GroupPtr& pg);
std::vector<PipelineStep> ReferenceStageSteps(PipelineSchedule schedule, int stages, int stage, int micro_batches);
double ReferenceRunPipelineSteps(const PipelineStage& stage, const std::vector<PipelineStep>& steps);
MeshLayout ReferenceMakeMeshLayout(int rank, int world_size, int tensor_size);
void ReferenceAverageOverDataGroup(const std::vector<torch::Tensor>& parameters, const dist::GroupPtr& data_group);

}  // namespace distlm::task7
