#include "common/stages/gradient_sync_stage.h"

#include <chrono>
#include <utility>

#include "common/dist/casting_process_group.h"
#include "common/runtime/elapsed.h"
#include "common/runtime/errors.h"
#include "common/stages/stages.h"
#include "common/train/distributed.h"

namespace distlm::stages {

GradientSyncStage::GradientSyncStage(std::string name, train::TrainStep step, GradientSyncFn sync)
    : Stage(std::move(name), std::move(step)), sync_(std::move(sync)) {}

train::DistInfo GradientSyncStage::Connect() {
  const at::ScalarType comm_dtype = train::CommDtypeFromFlags();
  const Row* row = Find(name());
  if (comm_dtype != at::kFloat && row != nullptr && !row->takes_comm_dtype) {
    // Casting applies to all_reduce; task 2a's gather + scatter would silently stay float32.
    std::string takers;
    for (const Row& s : All()) {
      if (s.takes_comm_dtype) takers += (takers.empty() ? "" : ", ") + s.id;
    }
    throw UserError("--comm_dtype=" + dist::CommDtypeName(comm_dtype) + " applies to all_reduce (" + takers + "); " +
                    name() + "'s gather + scatter sends float32");
  }
  comm_dtype_ = comm_dtype;
  return train::InitDistributedFromFlags(comm_dtype);
}

void GradientSyncStage::BeforeTraining(const train::StageContext& ctx) { train::RecordCommDtype(ctx, comm_dtype_); }

void GradientSyncStage::SyncGradients(const train::StageContext& ctx) {
  dist::CountingProcessGroup& counting = train::CountingGroup(ctx.dist());
  counting.TakeStats();  // drop what came before (loss averaging, evaluation)
  auto start = std::chrono::steady_clock::now();
  train::SetGradientCompression(ctx.dist(), true);
  try {
    sync_(*ctx.dist().pg, ctx.parameters());
  } catch (...) {
    train::SetGradientCompression(ctx.dist(), false);
    throw;
  }
  train::SetGradientCompression(ctx.dist(), false);
  figures_ = {};
  figures_.comm_time_ms = MsSince(start);
  figures_.comm = counting.TakeStats();
}

train::UpdateFigures GradientSyncStage::TakeFigures() { return std::exchange(figures_, {}); }

std::unique_ptr<train::Stage> MakeGradientSyncStage(std::string name, train::TrainStep step, GradientSyncFn sync) {
  return std::make_unique<GradientSyncStage>(std::move(name), std::move(step), std::move(sync));
}

}  // namespace distlm::stages
