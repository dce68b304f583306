#include "task3/ddp_watch.h"

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/dist/forwarding_group.h"
#include "common/testing/rank_test.h"

namespace distlm::task3 {

using Clock = std::chrono::steady_clock;

struct DdpWatch::State {
  int watch = 0;  // this watch's number in its process (the same on every rank)
  int rank = 0, world = 1;
  c10::intrusive_ptr<c10d::Store> store;
  std::chrono::milliseconds peers_within{10000};
  std::mutex mu;
  int64_t launched = 0;                  // all-reduces launched through this watch
  int64_t taken = 0;                     // launched before the last TakeFirstWaitBefore
  std::vector<Clock::time_point> waits;  // per all-reduce: when its wait() began (max(): not yet)
};

namespace {

using State = DdpWatch::State;

std::string Key(const State& s, int64_t n, int rank) {
  return "ddp_watch/" + std::to_string(s.watch) + "/" + std::to_string(n) + "/" + std::to_string(rank);
}

class WatchedWork : public dist::ForwardingWork {
 public:
  WatchedWork(c10::intrusive_ptr<c10d::Work> inner, std::shared_ptr<State> state, int64_t n)
      : ForwardingWork(std::move(inner)), state_(std::move(state)), n_(n) {}

  bool wait(std::chrono::milliseconds timeout) override {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->waits[n_] = std::min(state_->waits[n_], Clock::now());
    }
    return inner_->wait(timeout);
  }

 private:
  std::shared_ptr<State> state_;
  int64_t n_;
};

class WatchedGroup : public dist::ForwardingGroup {
 public:
  WatchedGroup(dist::GroupPtr inner, std::shared_ptr<State> state)
      : ForwardingGroup(std::move(inner)), state_(std::move(state)) {}

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    int64_t n = 0;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      n = state_->launched++;
      state_->waits.push_back(Clock::time_point::max());
    }
    int64_t numel = 0;
    for (const auto& t : tensors) numel += t.numel();
    MatchPeers(n, numel);
    return c10::make_intrusive<WatchedWork>(inner_->allreduce(tensors, opts), state_, n);
  }

 private:
  // Every rank's all-reduce number n must have this rank's size: collectives pair up by their
  // order, and Gloo, handed different sizes, aborts the process.
  void MatchPeers(int64_t n, int64_t numel) {
    const State& s = *state_;
    const std::string mine = std::to_string(numel);
    s.store->set(Key(s, n, s.rank), std::vector<uint8_t>(mine.begin(), mine.end()));
    const std::string which = "all-reduce " + std::to_string(n + 1 - s.taken) + " of the update";
    for (int r = 0; r < s.world; ++r) {
      if (r == s.rank) continue;
      const std::string key = Key(s, n, r);
      try {
        s.store->wait({key}, s.peers_within);
      } catch (const std::exception&) {
        testing::Fail(which + " (" + mine + " elements on this rank) has no counterpart on rank " + std::to_string(r) +
                      " after " + std::to_string(s.peers_within.count() / 1000) + " s: the ranks launch different "
                      "numbers of all-reduces. Every rank must cut the same buckets and launch each once");
      }
      const std::vector<uint8_t> got = s.store->get(key);
      const std::string theirs(got.begin(), got.end());
      if (theirs != mine) {
        testing::Fail(which + " has " + mine + " elements on this rank and " + theirs + " on rank " +
                      std::to_string(r) + ": the ranks' buckets differ. Collectives pair up by their order, so "
                      "every rank must cut the same buckets (from what every rank has alike: the parameters and "
                      "the cap) and launch them in the same order");
      }
    }
  }

  std::shared_ptr<State> state_;
};

int NextWatchNumber() {
  static int n = 0;
  return n++;
}

}  // namespace

DdpWatch::DdpWatch(c10::intrusive_ptr<c10d::ProcessGroup> pg, c10::intrusive_ptr<c10d::Store> store,
                   double peers_within_s)
    : state_(std::make_shared<State>()) {
  state_->watch = NextWatchNumber();
  state_->rank = pg->getRank();
  state_->world = pg->getSize();
  state_->store = std::move(store);
  state_->peers_within = std::chrono::milliseconds(static_cast<int64_t>(peers_within_s * 1000));
  const std::string backend = pg->getBackendName();
  group_ = dist::AsGroup(c10::make_intrusive<WatchedGroup>(std::move(pg), state_), backend);
}

DdpWatch::~DdpWatch() = default;

int64_t DdpWatch::TakeFirstWaitBefore(Clock::time_point t) {
  std::lock_guard<std::mutex> lock(state_->mu);
  int64_t first = -1;
  for (int64_t n = state_->taken; n < state_->launched && first < 0; ++n) {
    if (state_->waits[n] < t) first = n - state_->taken;
  }
  state_->taken = state_->launched;
  return first;
}

}  // namespace distlm::task3
