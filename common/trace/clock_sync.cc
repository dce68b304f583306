#include "common/trace/clock_sync.h"

#include <limits>
#include <vector>

#include <torch/types.h>

namespace distlm::trace {
namespace {

// Broadcasts `value` from `root`; what every rank received.
int64_t Broadcast(c10d::ProcessGroup& pg, int root, int64_t value) {
  std::vector<at::Tensor> t = {torch::full({1}, value, torch::kLong)};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  pg.broadcast(t, opts)->wait();
  return t[0].item<int64_t>();
}

}  // namespace

ClockMapping SyncClocks(c10d::ProcessGroup& pg, int rounds) {
  const int rank = pg.getRank(), world = pg.getSize();
  ClockMapping m;
  if (world == 1) {
    m.base_ns = NowNs();
    return m;
  }
  for (int r = 1; r < world; ++r) {
    int64_t best_rtt = std::numeric_limits<int64_t>::max();
    for (int k = 0; k < rounds; ++k) {
      // Rank r stamps t0 and sends it; rank 0 answers with its own time; rank r stamps t1. The
      // other ranks only take part in the broadcasts.
      const int64_t t0 = NowNs();
      Broadcast(pg, r, t0);
      const int64_t server = Broadcast(pg, 0, rank == 0 ? NowNs() : 0);
      const int64_t t1 = NowNs();
      if (rank == r && t1 - t0 < best_rtt) {
        best_rtt = t1 - t0;
        m.offset_ns = server - (t0 + t1) / 2;
        m.uncertainty_ns = best_rtt / 2;
      }
    }
  }
  m.base_ns = Broadcast(pg, 0, rank == 0 ? NowNs() : 0);
  m.synced = true;
  return m;
}

}  // namespace distlm::trace
