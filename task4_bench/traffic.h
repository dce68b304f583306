// What a collective should put on the network, per rank, and what the network interfaces say
// it did: the expected-traffic formulas behind task 4's accounting and the bus-bandwidth
// factors of the collectives benchmark, plus a reader of the kernel's /proc/net/dev counters.
//
// Conventions. `bytes` is the size S of the buffer the collective works on (for all_reduce and
// gather+scatter the gradient buffer every rank holds; for all_gather the whole output, of
// which each rank contributes S/N; for broadcast the root's buffer). Figures are payload bytes:
// what the algorithm must move, without TCP/IP headers, handshakes or the backend's own
// control messages, so measured interface counters are somewhat larger. "sent" is what leaves
// a rank, "received" what arrives at it; on a full-duplex link the two directions do not
// compete, which is why the bus bandwidth below counts one direction.
#pragma once

#include <cstdint>
#include <string>

#include "common/stages/stages.h"

namespace distlm::task4_bench {

struct Traffic {
  double sent_bytes = 0;
  double received_bytes = 0;
};

// Ring all_reduce (reduce-scatter then all-gather, each N-1 steps of one S/N chunk): every
// rank sends 2(N-1)/N * S and receives the same. Exact when N divides S; otherwise the chunks
// differ by at most one element and this is the average over ranks. N = 1 moves nothing.
// Throws distlm::UserError for bytes < 0 or world_size < 1.
Traffic ExpectedRingAllreduceBytesPerRank(double bytes, int world_size);

// Task 2a's gather to `root` then scatter from it: every non-root rank sends its S bytes and
// receives S back (the average); the root receives (N-1) * S and sends (N-1) * S (its own
// share stays in memory). Throws distlm::UserError for a rank or root outside 0..N-1.
Traffic ExpectedGatherScatterBytes(double bytes, int world_size, int rank, int root = 0);

// Payload bytes sent per update for a gradient buffer of S bytes at world size N (below),
// summed over all ranks, and the busiest rank's share. Ring all_reduce: every rank 2(N-1)/N S,
// total 2(N-1) S. Gather + scatter: rank 0 (N-1) S, the others S each: total 2(N-1) S as well;
// the two patterns put the same bytes on the network, gather + scatter all through one link.
struct ExpectedUpdateTraffic {
  double total_sent = 0;     // all ranks
  double per_rank_mean = 0;  // total / N
  double busiest_rank = 0;   // what the busiest rank sends
};
ExpectedUpdateTraffic ExpectedTrafficPerUpdate(stages::SyncPattern pattern, double gradient_bytes, int world_size);

// The collectives of //task4_bench:collectives.
enum class Collective { kAllReduce, kAllGather, kBroadcast, kGatherScatter };

// "all_reduce", "all_gather", "broadcast", "gather_scatter".
std::string CollectiveName(Collective c);

// Bus bandwidth = algorithm bandwidth (S / time) * this factor. For the first three these are
// nccl-tests' definitions (doc/PERFORMANCE.md): all_reduce 2(N-1)/N, all_gather (N-1)/N (with
// S the whole output), broadcast 1. Each is the bytes the busiest rank must send over its link
// per byte of S under the optimal (ring or pipelined) algorithm, so busbw is comparable to the
// link's speed whatever N is. gather+scatter is ours, defined the same way: the root sends
// (N-1) * S (and receives as much), so the factor is N-1, and busbw can never exceed the
// root's link speed. One gather+scatter alone reaches only half of it, because its phases use
// the root's two directions one after the other (receive, then send); back-to-back operations
// overlap one's scatter with the next one's gather and come closer. At best its algorithm
// bandwidth is 2/N of ring all_reduce's. N = 1 gives 0 for all but broadcast (1).
double BusBandwidthFactor(Collective c, int world_size);

// One interface's line of /proc/net/dev (cumulative since the interface appeared).
struct InterfaceCounters {
  uint64_t rx_bytes = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t tx_packets = 0;
};

// Parses the text of /proc/net/dev (two header lines, then "  iface: rx_bytes rx_packets errs
// drop fifo frame compressed multicast tx_bytes tx_packets ...") and returns iface's counters.
// Throws distlm::UserError naming `source` (the file's name, for the message) and the line
// when a line is malformed, or the interfaces present when iface is absent.
InterfaceCounters ParseInterfaceCounters(const std::string& proc_net_dev_text, const std::string& iface,
                                         const std::string& source = "/proc/net/dev");

// The counters of iface in this process's network namespace, from /proc/net/dev.
InterfaceCounters ReadInterfaceCounters(const std::string& iface);

}  // namespace distlm::task4_bench
