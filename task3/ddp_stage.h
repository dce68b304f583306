// Task 3's stage: the Trainer driving the student's DataParallel (task3/ddp.h). Given code, not
// the student's.
//
// Before training, --ddp picks the version (buckets: 3b, the default; per_parameter: 3a) and
// builds it over the model's parameters and the process group. Before each backward it is told
// whether this backward ends the update (no_sync otherwise); after the update's last backward
// FinishGradientSync is timed. Per update the log line carries, besides 2a/2b's fields:
//   comm_time_ms      time the step was blocked in FinishGradientSync (so compute_time_ms keeps
//                     its 2a/2b meaning)
//   comm_busy_ms      time some all-reduce was in flight (launch to completion)
//   comm_hidden_ms    the part of comm_busy_ms before backward ended (overlapped with it)
//   comm_exposed_ms   the part after
//   backward_overlap_ms  the last backward, from its start to its end
//   buckets           all-reduces launched in the update (3a: one per parameter)
//   buckets_started_before_backward_end
//   no_sync_calls     collectives launched during the update's no_sync backward passes (must be 0)
// The process group records each all-reduce's launch and completion time
// (dist::CountingProcessGroup); the student's code does none of the measuring. Rank 0 writes
// the all-reduces of the first update to <output_dir>/ddp_buckets.json and prints them, and
// the parameters it handed the DDP, in order, to <output_dir>/ddp_parameters.json
// ([{name, numel}]). --ddp_unused_parameter adds one that no loss uses
// (kUnusedParameterName), to see FinishGradientSync name it.
// --embedding_sync=rows keeps the word embedding out of the DDP and averages its gradient by
// rows after FinishGradientSync (task3/embedding_row_sync.h); its two all-reduces count in the
// update's figures like the DDP's.
// --comm_dtype=fp16|bf16 casts the all-reduces launched from the synchronised backward to that
// dtype and back (PyTorch's fp16_compress_hook), without the student's code changing.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <ATen/ATen.h>

#include "common/train/stage.h"
#include "task3/ddp.h"
#include "task3/embedding_row_sync.h"

namespace distlm::task3 {

inline constexpr char kUnusedParameterName[] = "unused_by_the_loss.weight";

// Task 3's stage: builds the student's DataParallel before training (flags: ddp_flags.h),
// tells it before each backward whether to synchronise, and times FinishGradientSync.
class DdpStage : public train::Stage {
 public:
  DdpStage(std::string name, train::TrainStep step);
  ~DdpStage() override;

  train::DistInfo Connect() override;  // --comm_dtype (any), then the ranks
  void BeforeTraining(const train::StageContext& ctx) override;
  void BeforeBackward(const train::StageContext& ctx, bool will_sync) override;
  void SyncGradients(const train::StageContext& ctx) override;
  train::UpdateFigures TakeFigures() override;

 private:
  using Clock = std::chrono::steady_clock;
  void WriteLayout(const train::StageContext& ctx, const dist::CommStats& stats);

  at::ScalarType comm_dtype_ = at::kFloat;
  std::unique_ptr<DataParallel> ddp_;
  std::unique_ptr<EmbeddingRowSync> embedding_rows_;  // --embedding_sync=rows
  bool in_update_ = false;        // a backward of the current update has been seen
  Clock::time_point sync_start_;  // the update's synchronised backward began
  int64_t no_sync_calls_ = 0;     // collectives during the update's no_sync backward passes
  bool layout_written_ = false;
  train::UpdateFigures figures_;  // the current update's
};

// Task 3's stage (`name`: task3, or the grader's mutants) with part 1's step. Flags as tasks
// 2a/2b, plus ddp_flags.h's and --comm_dtype.
std::unique_ptr<train::Stage> MakeDdpStage(std::string name, train::TrainStep step);

}  // namespace distlm::task3
