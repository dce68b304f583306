// Task 8c: who trains now, when workers leave and join. Given code.
//
// A worker is known by its slot: the rank it was started with (--local_rank or --rank; a worker
// started later takes the slot of one that left). A generation is the slots that train
// together, with a Gloo group of its own whose rank i is the i-th slot in order. Generation 0 is
// the world that started; each change makes the next:
//   - Regroup: a collective of the round failed (a worker died, or froze past --dist_timeout_s).
//     Every survivor says so in the store; the ones whose heartbeat stopped are counted lost;
//     the survivors go on as the next generation and finish the round among themselves.
//   - Admit: at the end of every round, workers waiting to join (Join) are let in, and receive
//     what the others hold from the new generation's rank 0 (ShareTensors).
// The workers meet through the rendezvous store only. The store lives in slot 0's process (rank
// 0 hosts the rendezvous), which also decides each change, in the store: slot 0 cannot leave.
// If its process goes, the store goes with it, and every other worker stops at its next use of
// the store with one line saying so.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "common/dist/dist.h"

namespace distlm::task8 {

class Membership {
 public:
  // A worker of the world that started: generation 0, its group the world's.
  explicit Membership(dist::DistContext& world);

  // A worker started late (ctx from dist::ConnectLate, ctx.rank its slot): waits in the store
  // until the workers end a round and admit it, at most `timeout_s`. `fingerprint` ("what=value"
  // lines: the model's config, the vocabulary) must equal theirs. A UserError names why it was
  // refused: a fingerprint line that differs, slot 0 (the store's), a slot outside the job, or
  // no round end within the time (its slot still trains, say).
  static std::unique_ptr<Membership> Join(dist::DistContext& ctx, const std::string& fingerprint, double timeout_s);

  dist::GroupPtr group() const { return group_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(slots_.size()); }
  int slot() const { return ctx_.rank; }
  int generation() const { return generation_; }
  const std::vector<int>& slots() const { return slots_; }

  // Every member, at the end of every round: lets in the workers waiting to join (whose
  // `fingerprint` equals this one); returns their slots, empty when none. The caller then
  // shares the state with them (ShareTensors, on every member of the new group()).
  std::vector<int> Admit(const std::string& fingerprint);

  // Every survivor, after a collective of group() failed: the next generation, without the
  // workers whose heartbeat stopped; returns their slots. A UserError where this worker was
  // itself counted lost (it came too late) or the store is gone.
  std::vector<int> Regroup();

  // Every member, after the run's last round. Slot 0's process hosts the store: it returns only
  // once every other member has said it is done with the store (or after --dist_timeout_s), so
  // that its exit does not take the store from a worker still reading the last round's
  // decision across a slow link. A UserError where the store is gone.
  void Finish();

 private:
  Membership(dist::DistContext& ctx, int generation, std::vector<int> slots);
  void Enter(int generation, std::vector<int> slots);
  // Slot 0's decision under `key`, or this worker's wait for it.
  std::string Decided(const std::string& key, const std::function<std::string()>& decide);

  dist::DistContext& ctx_;
  int generation_ = 0;
  std::vector<int> slots_;
  int rank_ = 0;
  dist::GroupPtr group_;
  int admits_ = 0;           // Admit calls in this generation: each decision's key
  int64_t tickets_seen_ = 0;  // slot 0: the join requests decided so far
};

// Rank 0 of `pg` sends `tensors` (float32 or int64, any shapes) to every rank; the others' vector
// is replaced by what arrives.
void ShareTensors(c10d::ProcessGroup& pg, std::vector<torch::Tensor>& tensors);

}  // namespace distlm::task8
