// Running a stage whose student wraps the model in DistributedDataParallel (task 3).
//
// The stage's hooks: before training, the student's wrap function builds the
// ddp::DistributedDataParallel over the trainer's model and process group (rank 0's weights
// are broadcast, buckets built, hooks installed) and rank 0 prints the bucket layout and
// writes it to <output_dir>/ddp_buckets.json. Before each mini-batch's backward the wrapper is
// told whether this backward ends a gradient-accumulation group (no_sync otherwise). The
// backward itself averages the gradients; the sync hook only checks that it did and collects
// the figures for the update's log line:
//   comm_time_ms      time the step was blocked waiting for all-reduces (after backward), the
//                     same meaning as in tasks 2a/2b, so compute_time_ms = step - comm_time_ms
//   comm_busy_ms      time some bucket's all-reduce was in flight (launch to completion)
//   comm_hidden_ms    the part of comm_busy_ms before backward ended (overlapped)
//   comm_exposed_ms   the part after
//   backward_overlap_ms  from the first hooked gradient to the end of backward
//   buckets, buckets_started_before_backward_end
//   comm_calls, comm_tensors, comm_bytes, comm_dtype, comm_ops, comm_shapes (as 2a/2b)
// --comm_dtype=fp16|bf16 (distributed.h) casts each bucket to that dtype for its all-reduce and
// back into the float32 bucket after (PyTorch's fp16_compress_hook): the casting process group
// is enabled from the synchronised backward's start to the sync hook, so the student's code
// does not change and comm_bytes counts the narrow buckets.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "absl/flags/declare.h"
#include "common/ddp/distributed_data_parallel.h"

ABSL_DECLARE_FLAG(double, bucket_cap_mb);

namespace distlm::train {

// The student's part: model = DDP(model).
using WrapModelFn = std::function<std::unique_ptr<ddp::DistributedDataParallel>(
    std::shared_ptr<torch::nn::Module> model, c10::intrusive_ptr<c10d::ProcessGroup> pg,
    const ddp::DdpOptions& options)>;

// The bucket layout as written to ddp_buckets.json: one object per bucket, in launch order,
// {"bucket", "tensors", "numel", "bytes", "cap_bytes", "dtype", "names"}.
nlohmann::json BucketLayoutJson(const ddp::DistributedDataParallel& ddp);

// The DDP fields of an update's log line (see above; without the comm_* counts).
nlohmann::json SyncStatsJson(const ddp::SyncStats& stats);

// main() of task 3. Flags as tasks 2a/2b, plus --bucket_cap_mb (PyTorch's bucket_cap_mb) and --comm_dtype.
int RunDdpStage(int argc, char** argv, const std::string& stage, WrapModelFn wrap);

}  // namespace distlm::train
