// The linear warmup-then-decay learning-rate schedule of run_glue (WarmupLinearSchedule).
#pragma once

#include <cstdint>

namespace distlm::train {

class LinearSchedule {
 public:
  // total_updates T >= 1, warmup_updates W >= 0.
  LinearSchedule(double base_lr, int64_t total_updates, int64_t warmup_updates);

  // The factor after `updates_done` updates: k / W during warmup, then (T - k) / (T - W),
  // never below 0. Update k (1-based) uses base_lr * Factor(k - 1): stepping happens after each
  // optimizer step, as LambdaLR does.
  double Factor(int64_t updates_done) const;
  double LrAfter(int64_t updates_done) const { return base_lr_ * Factor(updates_done); }

  int64_t total_updates() const { return total_; }

  // LambdaLR's step(): one more update is done; returns the learning rate for the next one.
  double Step() { return LrAfter(++updates_done_); }
  double current_lr() const { return LrAfter(updates_done_); }
  int64_t updates_done() const { return updates_done_; }
  void set_updates_done(int64_t k) { updates_done_ = k; }

 private:
  double base_lr_;
  int64_t total_;
  int64_t warmup_;
  int64_t updates_done_ = 0;
};

}  // namespace distlm::train
