// Task 3's local tests watch the all-reduces your DDP launches, so that two mistakes are named
// in the DDP's terms: one Gloo reports only by aborting the process, one it does not report at
// all.
//   - Buckets that differ between ranks: before an all-reduce goes out, its size on this rank is
//     compared, through the rendezvous store, with the same all-reduce's size on every other
//     rank, and a difference is named with both sizes (Gloo would abort with
//     "op.preamble.length <= op.nbytes").
//   - A wait() while backward runs (in a hook): each all-reduce's wait is timed, so that the test
//     can compare it with the end of backward.
// Given code: the local tests wrap the group they hand your DDP with it.
#pragma once

#include <chrono>
#include <memory>

#include "common/dist/c10d_compat.h"

namespace distlm::task3 {

class DdpWatch {
 public:
  // Each rank builds its watches in the same order (the all-reduces are matched by the watch's
  // number and their own). `peers_within_s`: how long an all-reduce waits for the other ranks'
  // sizes before the rank that launched no such all-reduce is named.
  DdpWatch(c10::intrusive_ptr<c10d::ProcessGroup> pg, c10::intrusive_ptr<c10d::Store> store,
           double peers_within_s = 10);
  ~DdpWatch();

  // The group to hand the DDP: pg, watched.
  c10::intrusive_ptr<c10d::ProcessGroup> group() const { return group_; }

  // Of the all-reduces launched since the last call, in launch order: the index of the first one
  // whose wait() began before `t`, or -1. Starts afresh.
  int64_t TakeFirstWaitBefore(std::chrono::steady_clock::time_point t);

  struct State;  // what the watched group and its works share

 private:
  std::shared_ptr<State> state_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
};

}  // namespace distlm::task3
