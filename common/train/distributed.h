// Running a stage on several ranks: the process group from flags or the launcher's
// environment, communication accounting, gradient compression. What a stage's Connect() and
// hooks use; no stage lives here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/types.h>

#include "common/dist/counting_process_group.h"
#include "common/dist/dist.h"
#include "common/train/dist_info.h"
#include "common/train/stage.h"

namespace distlm::train {

// The process group of --backend/--master_ip/--master_port/--world_size/--rank (or torchrun's,
// Open MPI's, Slurm's variables), wrapped so that what goes through it is counted. With a
// comm_dtype other than float32, wrapped once more in a dist::CastingProcessGroup (outside the
// counting one, so the counts are of the narrow tensors actually sent), disabled until
// SetGradientCompression(info, true). Throws a UserError naming --comm_dtype and --backend
// for bf16 on gloo (Gloo in LibTorch 1.13 cannot reduce bfloat16).
DistInfo InitDistributedFromFlags(at::ScalarType comm_dtype = at::kFloat);

// The Connect() of a stage whose collectives stay float32 (tasks 5 to 7): a UserError naming
// --comm_dtype, the stage and `why` (what it sends) when the flag asks for another dtype; then
// InitDistributedFromFlags().
DistInfo InitDistributedFloat32Only(const std::string& stage, const std::string& why);

// --comm_dtype: fp32, fp16 or bf16; a UserError naming the flag otherwise. Which stages take
// it is each stage's Connect() to decide.
at::ScalarType CommDtypeFromFlags();

// The rendezvous, store and heartbeat behind a DistInfo made by InitDistributedFromFlags (or by
// a stage the same way): what task 8c's membership meets through.
dist::DistContext& DistContextOf(const DistInfo& info);
// `pg` behind a counting layer, as InitDistributedFromFlags wraps the world's group (task 8c's
// generations, so that CountingGroup counts what goes through them).
c10::intrusive_ptr<c10d::ProcessGroup> Counted(c10::intrusive_ptr<c10d::ProcessGroup> pg);

// The counting layer of a DistInfo made by InitDistributedFromFlags.
dist::CountingProcessGroup& CountingGroup(const DistInfo& info);

// Turns gradient compression on (around the gradient synchronisation) and off again; nothing
// when the run communicates in float32.
void SetGradientCompression(const DistInfo& info, bool enabled);

// Adds "comm_dtype" to <output_dir>/training_args.json (main rank), so the record of a run
// says in which dtype its gradients travelled.
void RecordCommDtype(const StageContext& ctx, at::ScalarType comm_dtype);

}  // namespace distlm::train
