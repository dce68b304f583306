// Running a stage on several ranks: the process group from flags or the launcher's
// environment, communication accounting, and the gradient-synchronisation hook of tasks 2a/2b.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include "common/dist/counting_process_group.h"
#include "common/train/stage.h"
#include "common/train/trainer.h"

namespace distlm::train {

// A stage's gradient synchronisation: afterwards every parameter's .grad on every rank holds
// the average over ranks of the gradients they computed.
using GradientSyncFn =
    std::function<void(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters)>;

// The process group of --backend/--master_ip/--master_port/--world_size/--rank (or torchrun's,
// Open MPI's, Slurm's variables), wrapped so that what goes through it is counted. With a
// comm_dtype other than float32, wrapped once more in a dist::CastingProcessGroup (outside the
// counting one, so the counts are of the narrow tensors actually sent), disabled until
// SetGradientCompression(info, true). Throws a UserError naming --comm_dtype and --backend
// for bf16 on gloo (Gloo in LibTorch 1.13 cannot reduce bfloat16).
DistInfo InitDistributedFromFlags(at::ScalarType comm_dtype = at::kFloat);

// --comm_dtype (tasks 2b and 3): fp32, fp16 or bf16; a UserError naming the flag otherwise.
at::ScalarType CommDtypeFromFlags();

// The counting layer of a DistInfo made by InitDistributedFromFlags.
dist::CountingProcessGroup& CountingGroup(const DistInfo& info);

// Turns gradient compression on (around the gradient synchronisation) and off again; nothing
// when the run communicates in float32.
void SetGradientCompression(const DistInfo& info, bool enabled);

// Adds "comm_dtype" to <output_dir>/training_args.json (main rank), so the record of a run
// says in which dtype its gradients travelled.
void RecordCommDtype(Trainer& t, at::ScalarType comm_dtype);

// Part 1 accepts the distributed flags but runs on one process: world size 1 or a one-line
// error pointing at the distributed stages.
DistInfo SingleProcessFromFlags(const std::string& stage);

// Tasks 2a and 2b: a stage whose student writes the gradient synchronisation. Per update its
// figures are comm_time_ms (compute_time_ms follows) and the communicated tensors (count,
// shapes, dtype, bytes). --comm_dtype applies to all_reduce only, so task2a (gather + scatter)
// refuses anything but fp32.
class GradientSyncStage : public Stage {
 public:
  GradientSyncStage(std::string name, TrainStep step, GradientSyncFn sync);

  void BeforeTraining(Trainer& t) override;  // records --comm_dtype in training_args.json
  void SyncGradients(Trainer& t) override;
  UpdateFigures TakeFigures() override;

  void set_comm_dtype(at::ScalarType dtype) { comm_dtype_ = dtype; }

 private:
  GradientSyncFn sync_;
  at::ScalarType comm_dtype_ = at::kFloat;
  UpdateFigures figures_;
};

// main() of tasks 2a and 2b.
int RunGradientSyncStage(int argc, char** argv, GradientSyncStage& stage);

}  // namespace distlm::train
