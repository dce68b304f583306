#include "common/train/schedule.h"

#include <algorithm>

#include "common/runtime/errors.h"

namespace distlm::train {

LinearSchedule::LinearSchedule(double base_lr, int64_t total_updates, int64_t warmup_updates)
    : base_lr_(base_lr), total_(total_updates), warmup_(warmup_updates) {
  if (total_updates < 1) throw UserError("training would make no update: check --num_train_epochs/--max_steps");
  if (warmup_updates < 0) throw UserError("--warmup_steps must be >= 0");
}

double LinearSchedule::Factor(int64_t k) const {
  if (k < warmup_) return static_cast<double>(k) / static_cast<double>(std::max<int64_t>(1, warmup_));
  return std::max(0.0, static_cast<double>(total_ - k) / static_cast<double>(std::max<int64_t>(1, total_ - warmup_)));
}

}  // namespace distlm::train
