// //task4_bench:collectives -- Google Benchmark microbenchmarks of the collectives data
// parallelism uses: all_reduce, gather+scatter (task 2a's pattern), broadcast and all_gather,
// on message sizes from 4 KiB to 256 MiB, over gloo or mpi.
//
//   bazel build //task4_bench:collectives
//   bazel-bin/tools/launch --nproc_per_node=4 -- bazel-bin/task4_bench/collectives
//   mpirun -np 4 ... bazel-bin/task4_bench/collectives --backend=mpi --benchmark_format=json
//
// Every rank runs the same benchmarks; only rank 0 reports. Each benchmark:
//   1. allocates its tensors (float32) and runs one collective whose result is checked against
//      the closed form (all ranks agree on the verdict, so a wrong result stops every rank);
//   2. runs --warmup_iterations more (MPI's TCP transport connects on first use);
//   3. after a barrier, times a FIXED number of iterations, the same on every rank (Google
//      Benchmark's adaptive count would let ranks disagree and deadlock): enough for
//      --bytes_per_benchmark bytes, clamped to [--min_iterations, --max_iterations];
//   4. takes the slowest rank's loop time (one allreduce MAX) for the counters.
//
// Counters (nccl-tests' conventions, doc/PERFORMANCE.md there; GB = 1e9 bytes):
//   bytes       S: the buffer all_reduce/gather+scatter average, broadcast's buffer, all_gather's
//               whole output (each rank contributes S/N; S rounded down to a multiple of 4N).
//   time_us     the slowest rank's time per operation. Google Benchmark's own Time column is
//               rank 0's, which can finish a rooted collective before the others do.
//   algbw_GBps  S / time_us.
//   busbw_GBps  algbw * BusBandwidthFactor (task4_bench/traffic.h): all_reduce 2(N-1)/N,
//               all_gather (N-1)/N, broadcast 1, gather+scatter N-1 (the root's link carries
//               (N-1) S each way; one operation alone reaches at most half the link, as its
//               gather and scatter use the two directions in turn). Comparable with the link
//               speed whatever N is.
//   ranks       N.
// gather+scatter times the whole of task 2a's averaging: gather to rank 0, the sum and the
// division there, scatter back, as all_reduce's time includes its reduction.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <torch/types.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dist/dist.h"
#include "common/dist/dist_flags.h"
#include "common/runtime/errors.h"
#include "common/runtime/runtime_flags.h"
#include "task4_bench/traffic.h"

ABSL_FLAG(int64_t, min_bytes, 4096, "smallest message size S in bytes (a multiple of 4, float32 elements)");
ABSL_FLAG(int64_t, max_bytes, int64_t{256} << 20,
          "largest message size S in bytes; lower it for quick runs (256 MiB at 4 ranks needs ~4 GiB)");
ABSL_FLAG(int, size_factor, 4, "each size is this many times the previous one (2 or more)");
ABSL_FLAG(int64_t, bytes_per_benchmark, int64_t{1} << 30,
          "timed iterations per size = this / S, clamped to [--min_iterations, --max_iterations]");
ABSL_FLAG(int, min_iterations, 5, "fewest timed iterations per size");
ABSL_FLAG(int, max_iterations, 2000, "most timed iterations per size");
ABSL_FLAG(int, warmup_iterations, 2, "untimed iterations before timing, after the checked one");

namespace {

using distlm::UserError;
using distlm::task4_bench::BusBandwidthFactor;
using distlm::task4_bench::Collective;
using distlm::task4_bench::CollectiveName;
using Clock = std::chrono::steady_clock;

// One collective at one size, with its buffers allocated once: Run() is what is timed.
class Op {
 public:
  Op(Collective kind, int64_t bytes, c10d::ProcessGroup& pg)
      : kind_(kind), pg_(pg), rank_(pg.getRank()), world_(pg.getSize()) {
    const int64_t elems = bytes / 4;
    if (kind == Collective::kAllGather) {
      chunk_ = std::max<int64_t>(1, elems / world_);
      bytes_ = chunk_ * world_ * 4;
    } else {
      chunk_ = elems;
      bytes_ = elems * 4;
    }
    buffer_ = torch::empty({chunk_}, torch::kFloat32);
    switch (kind) {
      case Collective::kAllReduce:
      case Collective::kBroadcast:
        break;
      case Collective::kAllGather:
        gathered_.emplace_back();
        for (int r = 0; r < world_; ++r) gathered_[0].push_back(torch::empty({chunk_}, torch::kFloat32));
        break;
      case Collective::kGatherScatter:
        received_ = torch::empty({chunk_}, torch::kFloat32);
        if (rank_ == 0) {
          gathered_.emplace_back();
          for (int r = 0; r < world_; ++r) gathered_[0].push_back(torch::empty({chunk_}, torch::kFloat32));
          // Rank 0 sends every rank's piece straight back: the round trip task 2a pays, without
          // its arithmetic (which is the student's to write, and costs little next to it).
          to_scatter_ = gathered_;
        }
        break;
    }
  }

  int64_t bytes() const { return bytes_; }

  void Run() {
    std::vector<torch::Tensor> one = {buffer_};
    switch (kind_) {
      case Collective::kAllReduce:
        pg_.allreduce(one)->wait();
        break;
      case Collective::kBroadcast:
        pg_.broadcast(one)->wait();  // root 0
        break;
      case Collective::kAllGather:
        pg_.allgather(gathered_, one)->wait();
        break;
      case Collective::kGatherScatter: {
        c10d::GatherOptions to_root;  // root 0
        pg_.gather(gathered_, one, to_root)->wait();
        std::vector<torch::Tensor> out = {received_};
        c10d::ScatterOptions from_root;  // root 0
        pg_.scatter(out, to_scatter_, from_root)->wait();
        break;
      }
    }
  }

  // Runs once on inputs whose result has a closed form (rank r contributes r + 1) and returns
  // "" or what came out wrong. Leaves the buffers in a state that stays finite when repeated.
  std::string RunChecked() {
    const float n = static_cast<float>(world_);
    buffer_.fill_(static_cast<float>(rank_ + 1));
    if (kind_ == Collective::kBroadcast && rank_ != 0) buffer_.fill_(-1.0f);
    Run();
    std::string wrong;
    auto expect = [&](const torch::Tensor& t, float value, const std::string& what) {
      if (wrong.empty() && !torch::equal(t, torch::full_like(t, value))) {
        wrong = absl::StrCat(what, " should be all ", value, " but holds values from ", t.min().item<float>(),
                             " to ", t.max().item<float>());
      }
    };
    switch (kind_) {
      case Collective::kAllReduce:
        expect(buffer_, n * (n + 1) / 2, "the all_reduce sum");
        buffer_.zero_();  // sums of zeros stay zero over thousands of iterations
        break;
      case Collective::kBroadcast:
        expect(buffer_, 1.0f, "the broadcast buffer");
        break;
      case Collective::kAllGather:
        for (int r = 0; r < world_; ++r) expect(gathered_[0][r], r + 1.0f, absl::StrCat("all_gather's slot ", r));
        break;
      case Collective::kGatherScatter:
        expect(received_, rank_ + 1.0f, "the gather+scatter round trip (this rank's own piece)");
        break;
    }
    return wrong;
  }

 private:
  Collective kind_;
  c10d::ProcessGroup& pg_;
  int rank_, world_;
  int64_t chunk_ = 0, bytes_ = 0;
  torch::Tensor buffer_, received_;
  std::vector<std::vector<torch::Tensor>> gathered_, to_scatter_;
};

// One value from every rank, reduced; used outside the timed loop only.
double Reduce(c10d::ProcessGroup& pg, double value, c10d::ReduceOp op) {
  std::vector<torch::Tensor> t = {torch::full({1}, value, torch::kFloat64)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = op;
  pg.allreduce(t, opts)->wait();
  return t[0].item<double>();
}

struct Shared {
  distlm::dist::DistContext* ctx = nullptr;
  std::string error;  // the first failure; later benchmarks skip at once
};

void BenchmarkCollective(benchmark::State& state, Shared* shared, Collective kind, int64_t bytes,
                         int warmup_iterations) {
  if (!shared->error.empty()) {
    state.SkipWithError("skipped after an earlier failure");
    return;
  }
  c10d::ProcessGroup& pg = *shared->ctx->pg;
  try {
    Op op(kind, bytes, pg);
    std::string wrong = op.RunChecked();
    // Every rank learns whether any rank saw a wrong result, so all of them stop together.
    if (Reduce(pg, wrong.empty() ? 1.0 : 0.0, c10d::ReduceOp::MIN) == 0.0) {
      shared->error = wrong.empty()
                          ? absl::StrCat(CollectiveName(kind), " of ", bytes, " bytes gave a wrong result on another rank")
                          : absl::StrCat(CollectiveName(kind), " of ", bytes, " bytes on rank ", pg.getRank(), ": ",
                                         wrong);
      state.SkipWithError(shared->error.c_str());
      return;
    }
    for (int i = 0; i < warmup_iterations; ++i) op.Run();
    pg.barrier()->wait();

    const auto start = Clock::now();
    for (auto _ : state) op.Run();
    const double mine = std::chrono::duration<double>(Clock::now() - start).count();

    const double slowest = Reduce(pg, mine, c10d::ReduceOp::MAX);
    const double per_op = slowest / static_cast<double>(state.iterations());
    const double algbw = static_cast<double>(op.bytes()) / per_op / 1e9;
    state.counters["bytes"] = static_cast<double>(op.bytes());
    state.counters["ranks"] = pg.getSize();
    state.counters["time_us"] = per_op * 1e6;
    state.counters["algbw_GBps"] = algbw;
    state.counters["busbw_GBps"] = algbw * BusBandwidthFactor(kind, pg.getSize());
  } catch (const std::exception& e) {
    shared->error = distlm::OneLine(distlm::dist::LostRankError(*shared->ctx, e));
    state.SkipWithError(shared->error.c_str());
  }
}

// Ranks other than 0 run every benchmark but print nothing.
class NullReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

std::vector<int64_t> MessageSizes() {
  const int64_t lo = absl::GetFlag(FLAGS_min_bytes), hi = absl::GetFlag(FLAGS_max_bytes);
  const int factor = absl::GetFlag(FLAGS_size_factor);
  if (lo < 4 || lo % 4 != 0) throw UserError(absl::StrCat("--min_bytes must be a positive multiple of 4, got ", lo));
  if (hi < lo) throw UserError(absl::StrCat("--max_bytes (", hi, ") is below --min_bytes (", lo, ")"));
  // The MPI group counts bytes in an int; keep every buffer (all_gather's output too) below it.
  if (hi > (int64_t{1} << 30)) throw UserError(absl::StrCat("--max_bytes must be at most 1 GiB, got ", hi));
  if (factor < 2) throw UserError(absl::StrCat("--size_factor must be 2 or more, got ", factor));
  std::vector<int64_t> sizes;
  for (int64_t s = lo; s <= hi; s *= factor) sizes.push_back(s);
  return sizes;
}

int64_t IterationsFor(int64_t bytes) {
  const int64_t budget = absl::GetFlag(FLAGS_bytes_per_benchmark);
  const int lo = absl::GetFlag(FLAGS_min_iterations), hi = absl::GetFlag(FLAGS_max_iterations);
  if (lo < 1 || hi < lo) {
    throw UserError(absl::StrCat("need 1 <= --min_iterations <= --max_iterations, got ", lo, " and ", hi));
  }
  if (budget < 1) throw UserError(absl::StrCat("--bytes_per_benchmark must be positive, got ", budget));
  return std::clamp<int64_t>((budget + bytes - 1) / bytes, lo, hi);
}

int Main(int argc, char** argv) {
  // Google Benchmark's flags go to it, the rest to absl; neither accepts the other's.
  std::vector<char*> ours = {argv[0]}, theirs = {argv[0]};
  for (int i = 1; i < argc; ++i) (absl::StartsWith(argv[i], "--benchmark_") ? theirs : ours).push_back(argv[i]);
  absl::ParseCommandLine(static_cast<int>(ours.size()), ours.data());
  distlm::runtime::InitRuntimeFromFlags();
  const distlm::dist::DistConfig config = distlm::dist::DistConfigFromFlagsAndEnv();

  std::vector<std::string> bench_args;
  for (size_t i = 1; i < theirs.size(); ++i) {
    const std::string arg = theirs[i];
    // A random order and a warm-up timed by the clock differ from rank to rank, so ranks would
    // call different collectives.
    for (const char* flag : {"--benchmark_enable_random_interleaving", "--benchmark_min_warmup_time"}) {
      const bool off = absl::EndsWith(arg, "=false") || absl::EndsWith(arg, "=0");
      if (absl::StartsWith(arg, flag) && !off) {
        throw UserError(absl::StrCat(flag,
                                     " would let the ranks run different collectives and deadlock; "
                                     "use --warmup_iterations instead"));
      }
    }
    // Only rank 0 writes --benchmark_out; others would truncate and interleave the same file.
    if (config.rank != 0 && absl::StartsWith(arg, "--benchmark_out")) continue;
    bench_args.push_back(arg);
  }
  std::vector<char*> bench_argv = {argv[0]};
  for (auto& a : bench_args) bench_argv.push_back(a.data());
  int bench_argc = static_cast<int>(bench_argv.size());
  benchmark::Initialize(&bench_argc, bench_argv.data());
  if (benchmark::ReportUnrecognizedArguments(bench_argc, bench_argv.data())) {
    throw UserError("unrecognized --benchmark_* flag (named above); see Google Benchmark's README for its flags");
  }

  const std::vector<int64_t> sizes = MessageSizes();
  const int warmup = absl::GetFlag(FLAGS_warmup_iterations);
  if (warmup < 0) throw UserError(absl::StrCat("--warmup_iterations must be >= 0, got ", warmup));
  std::vector<int64_t> iterations;
  for (int64_t s : sizes) iterations.push_back(IterationsFor(s));

  distlm::dist::DistContext ctx = distlm::dist::InitDistributed(config);
  // Lockstep needs the same plan everywhere: a rank started with other flags fails here, by
  // name, instead of deadlocking in the middle of a benchmark.
  std::vector<std::string> shared_args;
  for (const auto& a : bench_args) {
    if (!absl::StartsWith(a, "--benchmark_out")) shared_args.push_back(a);
  }
  distlm::dist::CheckAgreement(ctx, "benchmark plan",
                               absl::StrCat(absl::StrJoin(sizes, ","), ";", absl::StrJoin(iterations, ","), ";",
                                            warmup, ";", absl::StrJoin(shared_args, " ")));

  Shared shared;
  shared.ctx = &ctx;
  for (Collective kind :
       {Collective::kAllReduce, Collective::kGatherScatter, Collective::kBroadcast, Collective::kAllGather}) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      benchmark::RegisterBenchmark(absl::StrCat(CollectiveName(kind), "/bytes:", sizes[i]).c_str(),
                                   BenchmarkCollective, &shared, kind, sizes[i], warmup)
          ->Iterations(iterations[i])
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  benchmark::AddCustomContext("backend", ctx.backend_name);
  benchmark::AddCustomContext("world_size", std::to_string(ctx.world_size));
  benchmark::AddCustomContext("counters", "time_us/algbw/busbw use the slowest rank's time; GB = 1e9 bytes");

  if (ctx.rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    // --benchmark_list_tests writes to the display reporter's stream: silence that too.
    std::ostream nowhere(nullptr);
    NullReporter quiet;
    quiet.SetOutputStream(&nowhere);
    quiet.SetErrorStream(&nowhere);
    benchmark::RunSpecifiedBenchmarks(&quiet);
  }
  benchmark::Shutdown();
  if (!shared.error.empty()) throw UserError(shared.error);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "times all_reduce, gather+scatter, broadcast and all_gather on every rank of the job.\n"
      "usage: launch --nproc_per_node=N -- collectives [--backend=gloo|mpi] [--min_bytes=4096]\n"
      "       [--max_bytes=268435456] [--size_factor=4] [--benchmark_format=json] [--benchmark_filter=RE]\n"
      "       [--benchmark_out=FILE] (Google Benchmark's --benchmark_* flags, rank 0 reports)");
  return distlm::RunMain([&] { return Main(argc, argv); });
}
