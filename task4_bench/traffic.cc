#include "task4_bench/traffic.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"

namespace distlm::task4_bench {
namespace {

void CheckSizeAndWorld(double bytes, int world_size, const char* what) {
  if (!(bytes >= 0)) throw UserError(absl::StrCat(what, ": bytes must be >= 0, got ", bytes));
  if (world_size < 1) throw UserError(absl::StrCat(what, ": world size must be >= 1, got ", world_size));
}

}  // namespace

Traffic ExpectedRingAllreduceBytesPerRank(double bytes, int world_size) {
  CheckSizeAndWorld(bytes, world_size, "ExpectedRingAllreduceBytesPerRank");
  const double n = world_size;
  // N-1 chunk sends in the reduce-scatter and N-1 in the all-gather, each chunk S/N.
  const double each_way = 2.0 * (n - 1) / n * bytes;
  return {each_way, each_way};
}

Traffic ExpectedGatherScatterBytes(double bytes, int world_size, int rank, int root) {
  CheckSizeAndWorld(bytes, world_size, "ExpectedGatherScatterBytes");
  if (rank < 0 || rank >= world_size) {
    throw UserError(absl::StrCat("ExpectedGatherScatterBytes: rank ", rank, " is outside 0..", world_size - 1));
  }
  if (root < 0 || root >= world_size) {
    throw UserError(absl::StrCat("ExpectedGatherScatterBytes: root ", root, " is outside 0..", world_size - 1));
  }
  if (rank == root) {
    const double others = (world_size - 1) * bytes;
    return {/*sent=*/others, /*received=*/others};
  }
  if (world_size == 1) return {};
  return {/*sent=*/bytes, /*received=*/bytes};
}

std::string CollectiveName(Collective c) {
  switch (c) {
    case Collective::kAllReduce:
      return "all_reduce";
    case Collective::kAllGather:
      return "all_gather";
    case Collective::kBroadcast:
      return "broadcast";
    case Collective::kGatherScatter:
      return "gather_scatter";
  }
  return "unknown";
}

double BusBandwidthFactor(Collective c, int world_size) {
  if (world_size < 1) throw UserError(absl::StrCat("BusBandwidthFactor: world size must be >= 1, got ", world_size));
  const double n = world_size;
  switch (c) {
    case Collective::kAllReduce:
      return 2.0 * (n - 1) / n;
    case Collective::kAllGather:
      return (n - 1) / n;
    case Collective::kBroadcast:
      return 1.0;
    case Collective::kGatherScatter:
      return n - 1;
  }
  return 0;
}

InterfaceCounters ParseInterfaceCounters(const std::string& text, const std::string& iface,
                                         const std::string& source) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  std::vector<std::string> seen;
  bool found = false;
  InterfaceCounters match;
  // The first two lines are the column headers; the kernel has printed the same sixteen
  // columns since 2.6, so positions are safe to rely on. Every line is checked, not just
  // iface's, so a file that is not /proc/net/dev is rejected rather than half-read.
  for (size_t i = 2; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) {
      throw UserError(absl::StrCat(source, " line ", i + 1, ": no 'iface:' in '", line, "'"));
    }
    const std::string name(absl::StripAsciiWhitespace(line.substr(0, colon)));
    seen.push_back(name);
    std::vector<std::string> fields =
        absl::StrSplit(line.substr(colon + 1), absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 10) {
      throw UserError(absl::StrCat(source, " line ", i + 1, ": interface ", name, " has ", fields.size(),
                                   " counters, expected 16"));
    }
    uint64_t v[10];
    for (int k = 0; k < 10; ++k) {
      if (!absl::SimpleAtoi(fields[k], &v[k])) {
        throw UserError(absl::StrCat(source, " line ", i + 1, ": counter ", k + 1, " of interface ", name,
                                     " is '", fields[k], "', not a number"));
      }
    }
    if (name == iface && !found) {
      found = true;
      match.rx_bytes = v[0];
      match.rx_packets = v[1];
      match.tx_bytes = v[8];
      match.tx_packets = v[9];
    }
  }
  if (!found) {
    throw UserError(absl::StrCat("no interface '", iface, "' in ", source, " (this network namespace has: ",
                                 seen.empty() ? "none" : absl::StrJoin(seen, ", "), ")"));
  }
  return match;
}

InterfaceCounters ReadInterfaceCounters(const std::string& iface) {
  return ParseInterfaceCounters(ReadFile("/proc/net/dev"), iface, "/proc/net/dev");
}

ExpectedUpdateTraffic ExpectedTrafficPerUpdate(stages::SyncPattern pattern, double gradient_bytes, int world_size) {
  ExpectedUpdateTraffic e;
  for (int r = 0; r < world_size; ++r) {
    Traffic t;
    if (pattern == stages::SyncPattern::kGatherScatter) {
      t = ExpectedGatherScatterBytes(gradient_bytes, world_size, r);
    } else {
      // A ring all_reduce is a reduce-scatter then an all-gather, (N-1)/N x S each: so is
      // task 5's native pattern; its Gloo fallback adds one more all-gather to a full all_reduce.
      t = ExpectedRingAllreduceBytesPerRank(gradient_bytes, world_size);
      // Task 6's Gloo fallback: the all_reduce and two all-gathers of every unit.
      const double times = pattern == stages::SyncPattern::kAllreduceAllGather       ? 1.5
                           : pattern == stages::SyncPattern::kAllreduceTwoAllGathers ? 2.0
                                                                                     : 1.0;
      t.sent_bytes *= times;
      t.received_bytes *= times;
    }
    e.total_sent += t.sent_bytes;
    e.busiest_rank = std::max(e.busiest_rank, t.sent_bytes);
  }
  e.per_rank_mean = e.total_sent / world_size;
  return e;
}

}  // namespace distlm::task4_bench
