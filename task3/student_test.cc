// Task 3's local tests: bazel test //task3:student_test
//
// Each case runs on 2 and 4 real ranks (this binary, re-executed, Gloo over 127.0.0.1) with a
// small network whose expected gradients every rank computes by itself, without communicating:
// the data of rank r is a function of r, so each rank can redo every other rank's backward on
// rank 0's weights and average. A failure says which rank, which parameter and what the numbers
// look like (the sum instead of the mean, the rank's own gradient, ...).
#include <torch/types.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "common/testing/gradient_checks.h"
#include "common/testing/rank_test.h"
#include "task3/ddp.h"
#include "task3/ddp_watch.h"

namespace distlm::task3 {
namespace {

using testing::Fail;
using testing::RankEnv;
using Clock = std::chrono::steady_clock;

// Several buckets on SmallNet, one of them past the cap by its last parameter.
constexpr int64_t kCapBytes = 1024;

using testing::AverageGrads;
using testing::CheckAverage;
using testing::Grads;
using testing::LocalGrads;
using testing::SmallNet;
using Net = SmallNet;

Net MakeNet(int rank, bool with_unused = false) { return testing::MakeSmallNet(rank, with_unused); }
torch::Tensor Loss(Net& net, int rank, int micro) { return testing::SmallNetLoss(net, rank, micro); }

std::vector<NamedParameter> Named(Net& net) {
  std::vector<NamedParameter> out;
  for (const auto& p : net->named_parameters()) out.push_back({p.key(), p.value()});
  return out;
}

// The same parameters listed as a model that registers l1 before l0 would list them (a model
// may register its modules in any order): backward then completes bucket 2 (l1's) before
// bucket 1 (l0's).
std::vector<NamedParameter> NamedL1First(Net& net) {
  std::vector<NamedParameter> all = Named(net), out;
  for (const char* layer : {"l1.", "l0.", "l2.", "head."}) {
    for (const auto& p : all) {
      if (p.name.rfind(layer, 0) == 0) out.push_back(p);
    }
  }
  return out;
}

// True when `sizes` (elements) cut `numels`, in that order, into runs of whole parameters.
bool WholeRuns(const std::vector<int64_t>& sizes, const std::vector<int64_t>& numels) {
  size_t next = 0;
  for (int64_t size : sizes) {
    int64_t held = 0;
    while (next < numels.size() && held < size) held += numels[next++];
    if (held != size) return false;
  }
  return next == numels.size();
}

// The bucket each all-reduce carried, numbered by where its parameters lie in the order backward
// produces them: the launches (each a run of whole parameters) laid end to end from the last
// parameter on, the earliest launch that fits taken first. Empty when they do not lay out so
// (BucketError then names what is wrong). `numels` in registration order.
std::vector<int> BucketOfLaunch(const std::vector<int64_t>& sizes, const std::vector<int64_t>& numels) {
  std::vector<int> bucket(sizes.size(), -1);
  auto from = numels.rbegin();
  for (int b = 0; from != numels.rend(); ++b) {
    bool placed = false;
    for (size_t k = 0; k < sizes.size() && !placed; ++k) {
      if (bucket[k] >= 0) continue;
      int64_t held = 0;
      auto end = from;
      while (end != numels.rend() && held < sizes[k]) held += *end++;
      if (held == sizes[k]) {
        bucket[k] = b;
        from = end;
        placed = true;
      }
    }
    if (!placed) return {};
  }
  return bucket;
}

// "" unless the all-reduces are buckets started out of bucket order; then which bucket started
// before which. (Buckets laid out from the first parameter are BucketError's to name.)
std::string OrderError(const std::vector<int64_t>& sizes, const std::vector<int64_t>& numels) {
  if (WholeRuns(sizes, numels)) return "";
  const std::vector<int> bucket = BucketOfLaunch(sizes, numels);
  for (size_t k = 0; k < bucket.size(); ++k) {
    if (bucket[k] == static_cast<int>(k)) continue;
    const std::string early = std::to_string(bucket[k]);
    return "bucket " + early + " started before bucket " + std::to_string(k) + ": in this model bucket " + early +
           "'s gradients are complete first, but the buckets must start in bucket order on every rank. "
           "Collectives pair up by their order, not by their contents: a rank on which another bucket completed "
           "first would pair different buckets, and Gloo would add them together or abort";
  }
  return "";
}

// "" when the all-reduces' sizes (elements, in launch order) are the buckets of task3/ddp.h,
// else the first property they break. `numels`: the parameters' sizes, in registration order.
std::string BucketError(const std::vector<int64_t>& sizes, const std::vector<int64_t>& numels, int64_t cap_bytes) {
  const std::vector<int64_t> backward_order(numels.rbegin(), numels.rend());  // the last parameter first
  const std::string cap = "the cap of " + std::to_string(cap_bytes) + " bytes";
  size_t next = 0;  // in backward_order: the first parameter not in a bucket yet
  for (size_t b = 0; b < sizes.size(); ++b) {
    const std::string bucket =
        "bucket " + std::to_string(b) + " (all-reduce " + std::to_string(b + 1) + " of " +
        std::to_string(sizes.size()) + ", " + std::to_string(sizes[b] * 4) + " bytes)";
    int64_t held = 0, last = 0;
    while (next < backward_order.size() && held < sizes[b]) {
      last = backward_order[next++];
      held += last;
    }
    if (held != sizes[b]) {
      if (WholeRuns(sizes, numels)) {
        return "your buckets follow the registration order, the first parameter (l0.weight) first: backward "
               "produces the last parameter's gradient first, and bucket 0, launched first, must be the first "
               "to complete";
      }
      return bucket + " is not the next run of whole parameters, the last parameter first: a bucket holds "
             "consecutive whole parameters in the order backward produces them, and the buckets start in "
             "bucket order";
    }
    if (b + 1 < sizes.size() && held * 4 < cap_bytes) {
      return bucket + " is under " + cap + " and is not the last: a bucket closes once it reaches the cap, "
             "so that no more all-reduces run than needed";
    }
    if ((held - last) * 4 >= cap_bytes) {
      const bool cap_in_elements = BucketError(sizes, numels, 4 * cap_bytes).empty();
      return bucket + " had reached " + cap + " before its last parameter joined it: a bucket closes as soon "
             "as it reaches the cap, so it exceeds it by one parameter at most" +
             (cap_in_elements ? " (the cap is in bytes, 4 per float32 element)" : "");
    }
  }
  if (next != backward_order.size()) {
    return "the buckets hold " + std::to_string(next) + " of the " + std::to_string(numels.size()) +
           " parameters: every parameter belongs to a bucket";
  }
  return "";
}

// The DDP under test, over `watch`'s group when there is one.
std::unique_ptr<DataParallel> Make(const std::string& version, std::vector<NamedParameter> params, RankEnv& env,
                                   const DdpWatch* watch = nullptr) {
  const dist::GroupPtr pg = watch ? watch->group() : env.pg;
  if (version == "per_parameter") return MakePerParameterDdp(std::move(params), pg);
  return MakeBucketedDdp(std::move(params), pg, kCapBytes);
}
std::unique_ptr<DataParallel> Make(const std::string& version, Net& net, RankEnv& env) {
  return Make(version, Named(net), env);
}

std::string Join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

// Construction: every rank ends up with rank 0's initial weights.
void Broadcast(RankEnv& env, const std::string& version) {
  Net net = MakeNet(env.rank), rank0 = MakeNet(0);
  auto ddp = Make(version, net, env);
  if (!ddp) Fail("Make...Ddp returned nothing");
  auto want = rank0->named_parameters();
  for (const auto& p : net->named_parameters()) {
    if (!torch::equal(p.value(), want[p.key()])) {
      Fail("parameter " + p.key() + " differs from rank 0's after construction: every rank must start from "
           "rank 0's weights (broadcast them in the constructor)");
    }
  }
}

// What a DDP that skipped the broadcast averages: each rank's gradient at its own initial
// weights (the ranks start apart, so the averages agree but are of the wrong gradients).
testing::KnownMistake WithoutBroadcast(int world, int k) {
  Grads sum;
  for (int r = 0; r < world; ++r) {
    Net own = MakeNet(r);
    for (auto& [name, g] : LocalGrads(own, r, k)) sum[name] = sum.count(name) ? sum[name] + g : g;
  }
  for (auto& [name, g] : sum) g = g / world;
  return {sum, "the average of gradients taken at each rank's own initial weights: every rank must start from rank "
               "0's weights (broadcast them in the constructor)"};
}

// Two updates: the averages, and what was launched and waited when. `l1_first`: the parameters
// listed as NamedL1First lists them.
void Averages(RankEnv& env, const std::string& version, bool l1_first = false) {
  Net net = MakeNet(env.rank), ref = MakeNet(0);
  const std::vector<NamedParameter> params = l1_first ? NamedL1First(net) : Named(net);
  DdpWatch watch(env.pg, env.store);
  auto ddp = Make(version, params, env, &watch);
  watch.TakeFirstWaitBefore(Clock::now());
  env.counting->TakeStats();
  for (int step = 1; step <= 2; ++step) {
    const std::string when = "after update " + std::to_string(step);
    Grads want = AverageGrads(ref, env.world, 1), local = LocalGrads(ref, env.rank, 1);
    std::vector<testing::KnownMistake> known;
    if (step == 1) known.push_back(WithoutBroadcast(env.world, 1));
    ddp->set_require_grad_sync(true);
    env.counting->TakeStats();
    Loss(net, env.rank, 0).backward();
    const Clock::time_point backward_end = Clock::now();
    ddp->FinishGradientSync();
    dist::CommStats stats = env.counting->TakeStats();
    CheckAverage(env, net, want, local, when, stats.calls(), known, step > 1);
    std::vector<int64_t> sizes;
    int64_t late = -1;
    for (size_t i = 0; i < stats.records.size(); ++i) {
      const auto& r = stats.records[i];
      if (r.op != "allreduce") Fail("a " + r.op + " during backward/FinishGradientSync; DDP uses all-reduce only");
      sizes.push_back(r.numel());
      if (late < 0 && r.launched > backward_end) late = static_cast<int64_t>(i);
    }
    const int64_t waited_early = watch.TakeFirstWaitBefore(backward_end);
    std::vector<int64_t> numels;
    for (const auto& p : params) numels.push_back(p.tensor.numel());
    if (version == "per_parameter") {
      std::vector<int64_t> got = sizes, want_sorted = numels;
      std::sort(got.begin(), got.end());
      std::sort(want_sorted.begin(), want_sorted.end());
      if (got != want_sorted) {
        Fail(std::to_string(sizes.size()) + " all-reduce(s) of sizes " + Join(sizes) + " for " +
             std::to_string(numels.size()) + " parameters: 3a sends each parameter's gradient in an all-reduce of "
             "its own");
      }
      if (late >= 0) {
        Fail("all-reduce " + std::to_string(late + 1) + " of " + std::to_string(sizes.size()) +
             " started after backward ended: each all-reduce must travel while backward still computes, or "
             "nothing of it is hidden");
      }
    } else {
      if (const std::string error = OrderError(sizes, numels); !error.empty()) Fail(error);
      if (const std::string error = BucketError(sizes, numels, kCapBytes); !error.empty()) Fail(error);
      if (late >= 0) {
        Fail("the all-reduce of bucket " + std::to_string(late) + " started after backward ended: a bucket's "
             "all-reduce must travel while backward still computes, or nothing of it is hidden");
      }
    }
    if (waited_early >= 0) {
      Fail("the all-reduce " + (version == "per_parameter" ? "number " + std::to_string(waited_early + 1)
                                                           : "of bucket " + std::to_string(waited_early)) +
           " was waited while backward still ran: a wait() in a hook holds backward until that all-reduce has "
           "crossed the network, so nothing overlaps with it. Waiting belongs where the gradients are needed");
    }
    testing::StepBoth(net, ref, want);
  }
}

// 3c: two no_sync micro-batches, then a synchronised one: nothing communicated before the
// last, and the average of the accumulated gradients after it.
void NoSync(RankEnv& env, const std::string& version) {
  Net net = MakeNet(env.rank), ref = MakeNet(0);
  auto ddp = Make(version, net, env);
  Grads want = AverageGrads(ref, env.world, 3), local = LocalGrads(ref, env.rank, 3);
  env.counting->TakeStats();
  for (int m = 0; m < 3; ++m) {
    ddp->set_require_grad_sync(m == 2);
    (Loss(net, env.rank, m) / 3).backward();
    if (m < 2) {
      const int64_t calls = env.counting->TakeStats().calls();
      if (calls > 0) {
        Fail(std::to_string(calls) + " collective(s) launched during micro-batch " + std::to_string(m + 1) +
             "'s backward with set_require_grad_sync(false): inside no_sync nothing may be communicated; "
             "the gradients only accumulate in .grad");
      }
    }
  }
  ddp->FinishGradientSync();
  CheckAverage(env, net, want, local, "after 2 no_sync micro-batches and a synchronised one",
               env.counting->TakeStats().calls(), {WithoutBroadcast(env.world, 3)});
}

// A parameter the loss does not use: FinishGradientSync must name it.
void Unused(RankEnv& env, const std::string& version) {
  Net net = MakeNet(env.rank, /*with_unused=*/true);
  auto ddp = Make(version, net, env);
  ddp->set_require_grad_sync(true);
  Loss(net, env.rank, 0).backward();
  try {
    ddp->FinishGradientSync();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.find("TODO(student)") != std::string::npos) throw;
    for (const char* name : {"never.weight", "never.bias"}) {
      if (what.find(name) == std::string::npos) {
        Fail(std::string("FinishGradientSync threw, but its message does not name ") + name +
             " (which received no gradient): \"" + what + "\"");
      }
    }
    return;
  }
  Fail("FinishGradientSync returned normally although never.weight and never.bias received no gradient: throw "
       "distlm::UserError naming them (their all-reduce never ran, so the ranks would drift apart)");
}

}  // namespace

RANK_CASE(per_parameter_broadcast) { Broadcast(env, "per_parameter"); }
RANK_CASE(per_parameter_average) { Averages(env, "per_parameter"); }
RANK_CASE(per_parameter_no_sync) { NoSync(env, "per_parameter"); }
RANK_CASE(per_parameter_unused) { Unused(env, "per_parameter"); }
RANK_CASE(buckets_broadcast) { Broadcast(env, "buckets"); }
RANK_CASE(buckets_average) { Averages(env, "buckets"); }
RANK_CASE(buckets_l1_first) { Averages(env, "buckets", /*l1_first=*/true); }
RANK_CASE(buckets_no_sync) { NoSync(env, "buckets"); }
RANK_CASE(buckets_unused) { Unused(env, "buckets"); }

TEST(Task3aPerParameter, BroadcastsRankZerosWeights) {
  EXPECT_RANKS_PASS("per_parameter_broadcast", 2);
  EXPECT_RANKS_PASS("per_parameter_broadcast", 4);
}
TEST(Task3aPerParameter, AveragesWithOneAllReducePerParameterDuringBackward) {
  EXPECT_RANKS_PASS("per_parameter_average", 2);
  EXPECT_RANKS_PASS("per_parameter_average", 4);
}
TEST(Task3bBuckets, BroadcastsRankZerosWeights) {
  EXPECT_RANKS_PASS("buckets_broadcast", 2);
  EXPECT_RANKS_PASS("buckets_broadcast", 4);
}
TEST(Task3bBuckets, AveragesWithBucketsLaunchedDuringBackward) {
  EXPECT_RANKS_PASS("buckets_average", 2);
  EXPECT_RANKS_PASS("buckets_average", 4);
}
TEST(Task3bBuckets, StartInBucketOrderWhenALaterBucketCompletesFirst) { EXPECT_RANKS_PASS("buckets_l1_first", 2); }
TEST(Task3cNoSync, PerParameter) {
  EXPECT_RANKS_PASS("per_parameter_no_sync", 2);
  EXPECT_RANKS_PASS("per_parameter_no_sync", 4);
}
TEST(Task3cNoSync, Buckets) {
  EXPECT_RANKS_PASS("buckets_no_sync", 2);
  EXPECT_RANKS_PASS("buckets_no_sync", 4);
}
TEST(Task3UnusedParameter, PerParameterNamesIt) { EXPECT_RANKS_PASS("per_parameter_unused", 2); }
TEST(Task3UnusedParameter, BucketsNamesIt) { EXPECT_RANKS_PASS("buckets_unused", 2); }

}  // namespace distlm::task3
