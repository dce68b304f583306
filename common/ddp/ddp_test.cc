// DistributedDataParallel with real ranks on 127.0.0.1. This binary is also the worker: the
// tests start copies of it (directly for Gloo, under mpirun for MPI) with DISTLM_DDP_TEST_MODE
// set; each worker checks its own rank's results and exits 0, or 3 on a mismatch, printing
// what it measured.
//
// The reference for every gradient is computed by hand, without communication: the data of
// rank r is a pure function of r, so every worker can rebuild rank 0's initial model, compute
// each rank's local gradient itself and average them. Every worker also checks that its local
// gradient is far from that average, so a synchronisation that did nothing could not pass.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/bert/bert_model.h"
#include "common/ddp/distributed_data_parallel.h"
#include "common/dist/counting_process_group.h"
#include "common/dist/dist.h"
#include "common/runtime/errors.h"
#include "common/testing/subprocess.h"

namespace distlm::ddp {
namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// The model and data every worker can rebuild.

constexpr int64_t kIn = 48, kOut = 6;

class NetImpl : public torch::nn::Module {
 public:
  NetImpl(int64_t width, int64_t depth, bool optional_layers) {
    int64_t in = kIn;
    layers = register_module("layers", torch::nn::ModuleList());
    for (int64_t i = 0; i < depth; ++i) {
      layers->push_back(torch::nn::Linear(in, width));
      in = width;
    }
    head = register_module("head", torch::nn::Linear(in, kOut));
    if (optional_layers) {
      // Used on some ranks only (find_unused_parameters) or nowhere.
      sometimes = register_module("sometimes", torch::nn::Linear(kOut, kOut));
      never = register_module("never", torch::nn::Linear(kOut, kOut));
    }
    // A buffer: broadcast from rank 0 like the parameters.
    stats = register_buffer("stats", torch::randn({5}));
  }
  torch::Tensor forward(torch::Tensor x, bool use_sometimes) {
    for (const auto& layer : *layers) x = torch::tanh(layer->as<torch::nn::Linear>()->forward(x));
    x = head(x);
    if (use_sometimes) x = x + sometimes(x);
    return x;
  }
  torch::nn::ModuleList layers{nullptr};
  torch::nn::Linear head{nullptr}, sometimes{nullptr}, never{nullptr};
  torch::Tensor stats;
};
TORCH_MODULE(Net);

struct Shape {
  int64_t width = 64, depth = 3;
  bool optional_layers = false;  // `sometimes` and `never`
};

// Different initial weights on every rank (DDP must replace them with rank 0's).
Net MakeNet(int seed, Shape s) {
  torch::manual_seed(seed);
  return Net(s.width, s.depth, s.optional_layers);
}
Net InitialNet(int rank, Shape s) { return MakeNet(100 + rank, s); }

struct Batch {
  torch::Tensor x, y;
};

// Micro-batch `micro` of rank `rank`: a pure function of both.
Batch DataOf(int rank, int micro, int64_t batch) {
  torch::manual_seed(1000 + 37 * rank + micro);
  return {torch::randn({batch, kIn}), torch::randn({batch, kOut})};
}

torch::Tensor Loss(Net& net, const Batch& b, bool use_sometimes) {
  return torch::mse_loss(net->forward(b.x, use_sometimes), b.y);
}

using Grads = std::map<std::string, torch::Tensor>;  // name -> gradient (undefined: none)

Grads GradsOf(Net& net) {
  Grads g;
  for (const auto& p : net->named_parameters()) {
    g[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  }
  return g;
}

void ZeroGrads(Net& net) {
  for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
}

// What rank r computes alone from rank 0's weights: the gradient of the mean of its k
// micro-batch losses (each scaled by 1/k), with or without the `sometimes` layer.
Grads LocalGrads(int r, Shape s, int k, int64_t batch, bool use_sometimes) {
  Net net = InitialNet(0, s);
  for (int m = 0; m < k; ++m) (Loss(net, DataOf(r, m, batch), use_sometimes) / k).backward();
  return GradsOf(net);
}

// The average over ranks of LocalGrads; a parameter no rank computed stays undefined, one some
// ranks did not compute counts as zero there.
Grads AverageGrads(int world, Shape s, int k, int64_t batch, const std::function<bool(int)>& uses_sometimes) {
  Grads sum;
  for (int r = 0; r < world; ++r) {
    for (auto& [name, g] : LocalGrads(r, s, k, batch, uses_sometimes(r))) {
      if (!g.defined()) {
        sum.emplace(name, torch::Tensor());
        continue;
      }
      auto& acc = sum[name];
      acc = acc.defined() ? acc + g : g.clone();
    }
  }
  for (auto& [name, g] : sum) {
    if (g.defined()) g = g / world;
  }
  return sum;
}

// Largest |a - b| over every parameter, relative to the largest |b|; reports a parameter that
// has a gradient on one side only as infinitely far.
double RelativeDifference(const Grads& got, const Grads& want, std::string* worst_name) {
  double scale = 0;
  for (const auto& [name, g] : want) {
    if (g.defined()) scale = std::max(scale, g.abs().max().item<double>());
  }
  double worst = 0;
  for (const auto& [name, w] : want) {
    const torch::Tensor& g = got.at(name);
    double d;
    if (g.defined() != w.defined()) {
      d = INFINITY;
    } else if (!g.defined()) {
      d = 0;
    } else {
      d = (g - w).abs().max().item<double>() / scale;
    }
    if (d > worst) {
      worst = d;
      *worst_name = name;
    }
  }
  return worst;
}

// ---------------------------------------------------------------------------------------------
// The worker.

struct Worker {
  int rank = 0, world = 1;
  std::shared_ptr<dist::DistContext> ctx;
  c10::intrusive_ptr<dist::CountingProcessGroup> counting;
  dist::GroupPtr pg;  // counting, as the group DDP is given
  int failures = 0;

  void Check(bool ok, const std::string& what) {
    std::printf("rank %d: %s: %s\n", rank, ok ? "ok" : "FAILED", what.c_str());
    std::fflush(stdout);
    if (!ok) ++failures;
  }
  // got == want within tol, and the local gradient is far from want (the check can fail).
  void CheckGrads(const Grads& got, const Grads& want, const Grads& local, double tol, const std::string& what) {
    std::string name = "-", local_name = "-";
    double d = RelativeDifference(got, want, &name);
    double local_d = RelativeDifference(local, want, &local_name);
    char buf[256];
    std::snprintf(buf, sizeof(buf),
                  "%s: max relative difference from the hand average %.3g (%s); local gradient's %.3g", what.c_str(), d,
                  name.c_str(), local_d);
    Check(d <= tol && (world == 1 || local_d > 1e-3), buf);
  }
};

Worker StartWorker() {
  Worker w;
  dist::DistConfig config;
  const std::string backend = std::getenv("DISTLM_DDP_TEST_BACKEND");
  config.backend = backend;
  config.timeout_s = 60;
  if (backend == "gloo") {
    config.master_ip = "127.0.0.1";
    config.master_port = std::atoi(std::getenv("DISTLM_DDP_TEST_PORT"));
    config.rank = std::atoi(std::getenv("DISTLM_DDP_TEST_RANK"));
    config.world_size = std::atoi(std::getenv("DISTLM_DDP_TEST_WORLD"));
    config.source = "flags";
  }  // mpi: rank and size from mpirun
  w.ctx = std::make_shared<dist::DistContext>(dist::InitDistributed(config));
  w.counting = c10::make_intrusive<dist::CountingProcessGroup>(w.ctx->pg);
  w.pg = dist::AsGroup(w.counting, w.ctx->backend_name);
  w.rank = w.ctx->rank;
  w.world = w.ctx->world_size;
  // One intra-op thread per rank: the ranks share two cores, and the backend's threads need
  // one to make progress while backward computes.
  at::set_num_threads(1);
  return w;
}

// Construction broadcasts rank 0's weights and buffers; two synchronised steps (an SGD step
// between them) give the hand-averaged gradients; one all-reduce per bucket, of its size.
void ModeGrads(Worker& w) {
  const Shape s;
  const int64_t batch = 8;
  Net net = InitialNet(w.rank, s);
  DdpOptions opts;
  opts.first_bucket_cap_bytes = 4 << 10;
  opts.bucket_cap_bytes = 16 << 10;
  DistributedDataParallel ddp(net, w.pg, opts);

  Net rank0 = InitialNet(0, s);
  double weight_diff = 0;
  auto mine = net->named_parameters();
  for (const auto& p : rank0->named_parameters()) {
    weight_diff = std::max(weight_diff, (p.value() - mine[p.key()]).abs().max().item<double>());
  }
  double buffer_diff = (rank0->stats - net->stats).abs().max().item<double>();
  w.Check(weight_diff == 0 && buffer_diff == 0,
          "after construction, parameters and buffer equal rank 0's initial ones exactly (max diff " +
              std::to_string(weight_diff) + ", " + std::to_string(buffer_diff) + ")");
  std::printf("rank %d: buckets:\n%s", w.rank, ddp.DescribeBuckets().c_str());
  w.Check(ddp.buckets().size() >= 3, std::to_string(ddp.buckets().size()) + " buckets with small caps");

  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1));
  Net ref = InitialNet(0, s);  // the same steps by hand
  torch::optim::SGD ref_sgd(ref->parameters(), torch::optim::SGDOptions(0.1));
  auto all_ranks = [](int) { return false; };
  for (int step = 0; step < 2; ++step) {
    w.counting->TakeStats();
    ZeroGrads(net);
    Loss(net, DataOf(w.rank, step, batch), false).backward();
    dist::CommStats comm = w.counting->TakeStats();

    // The hand computation from the current (identical) weights of ref.
    Grads want, local;
    {
      Grads sum;
      for (int r = 0; r < w.world; ++r) {
        ZeroGrads(ref);
        Loss(ref, DataOf(r, step, batch), false).backward();
        Grads g = GradsOf(ref);
        if (r == w.rank) local = g;
        for (auto& [name, t] : g) {
          if (!t.defined()) {
            sum.emplace(name, torch::Tensor());
          } else {
            sum[name] = sum[name].defined() ? sum[name] + t : t;
          }
        }
      }
      for (auto& [name, t] : sum) want[name] = t.defined() ? t / w.world : t;
    }
    w.CheckGrads(GradsOf(net), want, local, 1e-6, "step " + std::to_string(step + 1));

    bool sizes_match = comm.calls() == static_cast<int64_t>(ddp.buckets().size());
    for (size_t b = 0; sizes_match && b < ddp.buckets().size(); ++b) {
      sizes_match = comm.records[b].op == "allreduce" && comm.records[b].shapes.size() == 1 &&
                    comm.records[b].shapes[0] == std::vector<int64_t>{ddp.buckets()[b].numel};
    }
    w.Check(sizes_match, "step " + std::to_string(step + 1) + ": " + std::to_string(comm.calls()) +
                             " collectives, one all_reduce per bucket of the bucket's size, in bucket order");
    sgd.step();
    // ref takes the averaged step too.
    for (auto& p : ref->named_parameters()) p.value().mutable_grad() = want[p.key()];
    ref_sgd.step();
  }
  w.Check(ddp.synced_backwards() == 2, "two synchronised backward passes counted");
}

// no_sync over k micro-batches, then one synchronised backward == one batch k times larger.
void ModeNoSync(Worker& w) {
  const Shape s;
  const int k = 3;
  const int64_t batch = 4;
  Net net = InitialNet(w.rank, s);
  DistributedDataParallel ddp(net, w.pg);
  w.counting->TakeStats();
  {
    auto guard = ddp.no_sync();
    for (int m = 0; m + 1 < k; ++m) (Loss(net, DataOf(w.rank, m, batch), false) / k).backward();
  }
  dist::CommStats during = w.counting->TakeStats();
  w.Check(during.calls() == 0, "no collective during no_sync (" + std::to_string(during.calls()) + ")");
  w.Check(ddp.require_backward_grad_sync(), "the guard restored synchronisation");
  (Loss(net, DataOf(w.rank, k - 1, batch), false) / k).backward();
  w.Check(w.counting->TakeStats().calls() == static_cast<int64_t>(ddp.buckets().size()),
          "the synchronised backward all-reduced every bucket once");

  // A batch k times larger, by hand: the mean loss over k*batch examples.
  auto big_batch_grads = [&](int r) {
    Net ref = InitialNet(0, s);
    std::vector<torch::Tensor> xs, ys;
    for (int m = 0; m < k; ++m) {
      Batch b = DataOf(r, m, batch);
      xs.push_back(b.x);
      ys.push_back(b.y);
    }
    Loss(ref, {torch::cat(xs), torch::cat(ys)}, false).backward();
    return GradsOf(ref);
  };
  Grads want;
  for (int r = 0; r < w.world; ++r) {
    for (auto& [name, g] : big_batch_grads(r)) {
      if (!g.defined()) {
        want.emplace(name, g);
      } else {
        want[name] = want[name].defined() ? want[name] + g / w.world : g / w.world;
      }
    }
  }
  w.CheckGrads(GradsOf(net), want, big_batch_grads(w.rank), 1e-5,
               "no_sync x" + std::to_string(k - 1) + " + sync vs one batch of " + std::to_string(k * batch));
}

// A parameter without a gradient: a one-line error naming it (exit 2 through RunMain).
void ModeUnused(Worker& w) {
  Net net = InitialNet(w.rank, Shape{64, 3, true});
  DistributedDataParallel ddp(net, w.pg);
  Loss(net, DataOf(w.rank, 0, 4), w.rank == 0).backward();  // rank 0 uses `sometimes`, the others do not
  w.Check(false, "backward should have thrown");
}

// find_unused_parameters: `sometimes` used on rank 1 only (then on rank 0 only), `never`
// nowhere; gradients as the hand average, where a rank that did not use a parameter
// contributes zero and a parameter nobody used keeps no gradient.
void ModeFindUnused(Worker& w) {
  const Shape s{64, 3, true};
  const int64_t batch = 6;
  Net net = InitialNet(w.rank, s);
  DdpOptions opts;
  opts.find_unused_parameters = true;
  opts.first_bucket_cap_bytes = 1 << 10;  // `never` and `sometimes` in their own early buckets
  opts.bucket_cap_bytes = 8 << 10;
  DistributedDataParallel ddp(net, w.pg, opts);
  for (int round = 0; round < 2; ++round) {
    const int user = round == 0 ? 1 : 0;
    auto uses = [user](int r) { return r == user; };
    ZeroGrads(net);
    Loss(net, DataOf(w.rank, 0, batch), uses(w.rank)).backward();  // the same data, another user
    Grads got = GradsOf(net);
    Grads want = AverageGrads(w.world, s, 1, batch, uses);
    w.CheckGrads(got, want, LocalGrads(w.rank, s, 1, batch, uses(w.rank)), 1e-6,
                 "round " + std::to_string(round + 1) + " (sometimes used by rank " + std::to_string(user) + ")");
    w.Check(!got.at("never.weight").defined() && !got.at("never.bias").defined(),
            "round " + std::to_string(round + 1) + ": the parameter no rank used has no gradient");
    w.Check(got.at("sometimes.weight").defined() && got.at("sometimes.weight").abs().max().item<double>() > 0,
            "round " + std::to_string(round + 1) + ": the one rank " + std::to_string(user) +
                " used has its averaged gradient on every rank");
    w.Check(ddp.last_sync().unused_parameters == (uses(w.rank) ? 2 : 4),
            "round " + std::to_string(round + 1) + ": " + std::to_string(ddp.last_sync().unused_parameters) +
                " locally unused parameters seen");
  }
}

// The overlap evidence: with several buckets, the first ones are launched while backward still
// computes. The test's own hook on the first layer's weight (registered first, so its gradient
// comes last) timestamps the end of the gradient computation independently of DDP.
void ModeOverlap(Worker& w) {
  const Shape s{384, 6, false};
  const int64_t batch = 192;
  Net net = InitialNet(w.rank, s);
  DdpOptions opts;
  opts.first_bucket_cap_bytes = 256 << 10;
  opts.bucket_cap_bytes = 1 << 20;
  DistributedDataParallel ddp(net, w.pg, opts);
  std::printf("rank %d: buckets:\n%s", w.rank, ddp.DescribeBuckets().c_str());
  Clock::time_point last_gradient;
  auto first_weight = net->layers[0]->as<torch::nn::Linear>()->weight;
  first_weight.register_hook([&last_gradient](torch::Tensor g) {
    last_gradient = Clock::now();
    return g;
  });
  for (int step = 0; step < 3; ++step) {
    ZeroGrads(net);
    w.pg->barrier(c10d::BarrierOptions())->wait();  // start together, so that the timeline shows overlap, not skew
    Loss(net, DataOf(w.rank, step, batch), false).backward();
    const SyncStats& st = ddp.last_sync();
    auto ms = [&](Clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t - st.first_gradient).count();
    };
    int before_last_gradient = 0;
    std::string timeline;
    for (int64_t b = 0; b < st.buckets(); ++b) {
      before_last_gradient += st.launched[b] < last_gradient ? 1 : 0;
      char buf[96];
      std::snprintf(buf, sizeof(buf), " [%.2f, %.2f]", ms(st.launched[b]), ms(st.completed[b]));
      timeline += buf;
    }
    char buf[512];
    std::snprintf(buf, sizeof(buf),
                  "step %d: %lld buckets, %d launched before the last gradient (at %.2f ms; backward end %.2f ms); "
                  "all-reduce [launch, done] ms:%s; busy %.2f ms, hidden %.2f, exposed %.2f, waited %.2f",
                  step + 1, static_cast<long long>(st.buckets()), before_last_gradient, ms(last_gradient),
                  ms(st.backward_end), timeline.c_str(), st.comm_busy_ms(), st.comm_hidden_ms(), st.comm_exposed_ms(),
                  st.wait_ms);
    // Every bucket but the last (which holds the first layer's weight) starts before the last
    // gradient is computed. When they complete is printed, not checked: an all-reduce ends only
    // once the slowest rank has joined it, which on a loaded machine can be any time.
    w.Check(st.buckets() >= 3 && before_last_gradient == st.buckets() - 1 &&
                st.buckets_started_before_backward_end() == st.buckets() && st.completion_exact,
            buf);
  }
}

int WorkerMain() {
  return RunMain([]() -> int {
    Worker w = StartWorker();
    const std::string mode = std::getenv("DISTLM_DDP_TEST_MODE");
    if (mode == "grads") {
      ModeGrads(w);
    } else if (mode == "no_sync") {
      ModeNoSync(w);
    } else if (mode == "unused") {
      ModeUnused(w);
    } else if (mode == "find_unused") {
      ModeFindUnused(w);
    } else if (mode == "overlap") {
      ModeOverlap(w);
    } else {
      throw UserError("unknown DISTLM_DDP_TEST_MODE=" + mode);
    }
    std::printf("rank %d: %d failure(s)\n", w.rank, w.failures);
    return w.failures == 0 ? 0 : 3;
  });
}

// ---------------------------------------------------------------------------------------------
// The tests.

std::string Mpirun() {
  for (const char* p : {"/usr/bin/mpirun", "/usr/local/bin/mpirun"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

// Every rank's (exit code, output); for mpi, one entry for the whole job.
std::vector<testing::ProcessResult> RunRanks(const std::string& mode, const std::string& backend, int world) {
  std::vector<testing::Command> cmds;
  std::map<std::string, std::string> env = {{"DISTLM_DDP_TEST_MODE", mode}, {"DISTLM_DDP_TEST_BACKEND", backend}};
  if (backend == "gloo") {
    env["DISTLM_DDP_TEST_PORT"] = std::to_string(testing::FreePort());
    env["DISTLM_DDP_TEST_WORLD"] = std::to_string(world);
    for (int r = 0; r < world; ++r) {
      testing::Command c{{testing::SelfPath()}, env};
      c.env["DISTLM_DDP_TEST_RANK"] = std::to_string(r);
      cmds.push_back(c);
    }
  } else {
    // Loopback TCP only, no core binding (2 cores), more ranks than cores.
    testing::Command c{{Mpirun(),
                        "--oversubscribe",
                        "--bind-to",
                        "none",
                        "-np",
                        std::to_string(world),
                        "--mca",
                        "btl",
                        "self,tcp",
                        "--mca",
                        "btl_tcp_if_include",
                        "lo",
                        "--mca",
                        "oob_tcp_if_include",
                        "lo",
                        "-x",
                        "DISTLM_DDP_TEST_MODE",
                        "-x",
                        "DISTLM_DDP_TEST_BACKEND",
                        testing::SelfPath()},
                       env};
    c.env["OMPI_ALLOW_RUN_AS_ROOT"] = "1";
    c.env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1";
    cmds.push_back(c);
  }
  auto results = testing::RunAll(cmds, 120);
  for (size_t i = 0; i < results.size(); ++i) {
    std::printf("---- %s %s process %zu (exit %d%s):\n%s", mode.c_str(), backend.c_str(), i, results[i].exit_code,
                results[i].timed_out ? ", timed out" : "", results[i].output.c_str());
  }
  return results;
}

void ExpectAllPass(const std::vector<testing::ProcessResult>& results) {
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_FALSE(results[i].timed_out) << "process " << i << " hung";
    EXPECT_EQ(results[i].exit_code, 0) << "process " << i << " (see its output above)";
  }
}

struct Case {
  std::string mode, backend;
  int world;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.mode << " over " << c.backend << " x" << c.world; }

class DdpRanksTest : public ::testing::TestWithParam<Case> {};

TEST_P(DdpRanksTest, Passes) {
  const Case& c = GetParam();
  if (c.backend == "mpi" && Mpirun().empty()) GTEST_SKIP() << "SKIPPED: mpirun is not installed (openmpi-bin)";
  ExpectAllPass(RunRanks(c.mode, c.backend, c.world));
}

INSTANTIATE_TEST_SUITE_P(Modes, DdpRanksTest,
                         ::testing::Values(Case{"grads", "gloo", 2}, Case{"grads", "gloo", 4}, Case{"grads", "mpi", 2},
                                           Case{"no_sync", "gloo", 2}, Case{"find_unused", "gloo", 3},
                                           Case{"overlap", "gloo", 2}, Case{"overlap", "mpi", 2}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.mode + "_" + info.param.backend + "_" + std::to_string(info.param.world);
                         });

TEST(DdpTest, AParameterWithoutGradientIsAnErrorNamingIt) {
  auto results = RunRanks("unused", "gloo", 2);
  // Rank 0 used `sometimes`, rank 1 did not: rank 1 names it, and `never` everywhere.
  for (int r = 0; r < 2; ++r) {
    EXPECT_FALSE(results[r].timed_out);
    EXPECT_EQ(results[r].exit_code, 2) << results[r].output;
  }
  EXPECT_NE(results[0].output.find("error: DistributedDataParallel: 2 of 12 parameters received no gradient in this "
                                   "backward pass: never.weight, never.bias; make every parameter take part in the "
                                   "loss, or construct DistributedDataParallel with find_unused_parameters = true\n"),
            std::string::npos)
      << results[0].output;
  EXPECT_NE(results[1].output.find("error: DistributedDataParallel: 4 of 12 parameters received no gradient in this "
                                   "backward pass: sometimes.weight, sometimes.bias, never.weight, never.bias; "),
            std::string::npos)
      << results[1].output;
}

// In-process, one rank (an in-process store, no network).
class DdpSingleRankTest : public ::testing::Test {
 protected:
  void SetUp() override { ctx_ = std::make_shared<dist::DistContext>(dist::InitDistributed(dist::DistConfig{})); }
  std::shared_ptr<dist::DistContext> ctx_;
};

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(DdpSingleRankTest, TinyBertBucketsAsComputedByHand) {
  // TinyBertConfig: hidden 128, 2 layers, intermediate 512, vocabulary 638, 2 labels. Walking
  // back from classifier.bias (float32 bytes): classifier 8 + 1024, pooler 512 + 65536, one
  // layer 793088 (4 x (65536 + 512) attention + 1024 LayerNorm + 262144 + 2048 intermediate
  // + 262144 + 512 output + 1024 LayerNorm), so after layer 1 the sum is 860168; layer 0's
  // output LayerNorm (1024) and dense bias (512) bring 861704, and its dense weight (262144)
  // 1123848 >= 1 MiB: bucket 0 has 24 tensors. The remaining 17 tensors (529408 bytes of
  // layer 0 and 590848 of embeddings: word 326656, position 262144, token type 1024,
  // LayerNorm 1024) stay under 25 MiB: bucket 1.
  bert::BertConfig config = bert::TinyBertConfig(638);
  config.num_labels = 2;
  bert::BertForSequenceClassification model(config);
  DistributedDataParallel ddp(model, ctx_->pg);
  ASSERT_EQ(ddp.buckets().size(), 2u) << ddp.DescribeBuckets();
  const BucketInfo& b0 = ddp.buckets()[0];
  const BucketInfo& b1 = ddp.buckets()[1];
  EXPECT_EQ(b0.names.size(), 24u);
  EXPECT_EQ(b0.bytes, 1123848);
  EXPECT_EQ(b0.cap, 1 << 20);
  EXPECT_EQ(b0.names.front(), "classifier.bias");
  EXPECT_EQ(b0.names.back(), "bert.encoder.layer.0.output.dense.weight");
  EXPECT_EQ(b1.names.size(), 17u);
  EXPECT_EQ(b1.bytes, 1120256);
  EXPECT_EQ(b1.cap, 25 << 20);
  EXPECT_EQ(b1.names.front(), "bert.encoder.layer.0.intermediate.dense.bias");
  EXPECT_EQ(b1.names.back(), "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(b0.numel * 4, b0.bytes);
  std::printf("%s", ddp.DescribeBuckets().c_str());
}

TEST_F(DdpSingleRankTest, OneRankLeavesTheGradientsAsTheyAre) {
  const Shape s{64, 3, true};
  Net net = InitialNet(0, s);
  DdpOptions opts;
  opts.find_unused_parameters = true;
  DistributedDataParallel ddp(net, ctx_->pg, opts);
  Loss(net, DataOf(0, 0, 4), true).backward();
  Grads got = GradsOf(net);
  Grads want = LocalGrads(0, s, 1, 4, true);
  for (auto& [name, g] : want) {
    ASSERT_EQ(got[name].defined(), g.defined()) << name;
    if (g.defined()) EXPECT_TRUE(torch::equal(got[name], g)) << name;
  }
  EXPECT_FALSE(got["never.weight"].defined());
}

TEST_F(DdpSingleRankTest, BadArgumentsAreOneLineErrors) {
  Net net = InitialNet(0, Shape{});
  EXPECT_EQ(ErrorOf([&] { DistributedDataParallel(nullptr, ctx_->pg); }),
            "DistributedDataParallel: the module is null");
  EXPECT_EQ(ErrorOf([&] { DistributedDataParallel(net, c10::intrusive_ptr<c10d::ProcessGroup>()); }),
            "DistributedDataParallel: the process group is null (initialise it first)");
  auto frozen = std::make_shared<torch::nn::Module>();
  frozen->register_parameter("w", torch::zeros({3}), /*requires_grad=*/false);
  EXPECT_EQ(ErrorOf([&] { DistributedDataParallel(frozen, ctx_->pg); }),
            "DistributedDataParallel: the module has no parameters that require grad");
  DdpOptions bad;
  bad.bucket_cap_bytes = 0;
  EXPECT_EQ(ErrorOf([&] { DistributedDataParallel(net, ctx_->pg, bad); }),
            "DistributedDataParallel: bucket caps must be positive (first bucket 1048576 bytes, others 0 bytes)");
}

TEST_F(DdpSingleRankTest, TheHooksGoWithTheWrapper) {
  Net net = InitialNet(0, Shape{64, 3, true});
  {
    DistributedDataParallel ddp(net, ctx_->pg);
    EXPECT_EQ(ErrorOf([&] { Loss(net, DataOf(0, 0, 4), true).backward(); }),
              "DistributedDataParallel: 2 of 12 parameters received no gradient in this backward pass: never.weight, "
              "never.bias; make every parameter take part in the loss, or construct DistributedDataParallel with "
              "find_unused_parameters = true");
    EXPECT_EQ(ddp.synced_backwards(), 0);
  }
  // Without the wrapper, an unused parameter is no longer an error.
  ZeroGrads(net);
  Loss(net, DataOf(0, 0, 4), true).backward();
  EXPECT_TRUE(net->head->weight.grad().defined());
}

// Identity forward, a failing backward: a backward pass that dies part-way.
struct Boom : public torch::autograd::Function<Boom> {
  static torch::Tensor forward(torch::autograd::AutogradContext*, torch::Tensor x) { return x.clone(); }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list) {
    throw std::runtime_error("boom in backward");
  }
};

struct TwoLinear {
  std::shared_ptr<torch::nn::Module> module = std::make_shared<torch::nn::Module>();
  torch::nn::Linear first{4, 4}, second{4, 4};
  TwoLinear() {
    module->register_module("first", first);
    module->register_module("second", second);
  }
  // second's gradients are computed before Boom's backward runs, first's after.
  torch::Tensor Loss(bool boom) {
    torch::Tensor h = first(torch::ones({2, 4}));
    if (boom) h = Boom::apply(h);
    return second(h).sum();
  }
};

std::string AnyErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return OneLine(e);
  }
  return "(no error)";
}

TEST_F(DdpSingleRankTest, ABackwardThatFailsAfterLaunchingAllReducesStopsTraining) {
  TwoLinear net;
  DdpOptions opts;
  opts.first_bucket_cap_bytes = 1;  // one parameter per bucket: second's two launch before Boom
  opts.bucket_cap_bytes = 1;
  DistributedDataParallel ddp(net.module, ctx_->pg, opts);
  ASSERT_EQ(ddp.buckets().size(), 4u);
  EXPECT_NE(AnyErrorOf([&] { net.Loss(true).backward(); }).find("boom in backward"), std::string::npos);
  const std::string out_of_step =
      "DistributedDataParallel: a backward pass failed after launching 2 of 4 bucket all-reduces; the ranks' "
      "collectives are out of step, so training cannot go on";
  EXPECT_EQ(AnyErrorOf([&] { net.Loss(false).backward(); }), out_of_step);
  EXPECT_EQ(AnyErrorOf([&] { net.Loss(false).backward(); }), out_of_step);  // and stays so
  {
    auto guard = ddp.no_sync();  // local accumulation communicates nothing: still allowed
    EXPECT_EQ(AnyErrorOf([&] { net.Loss(false).backward(); }), "(no error)");
  }
}

TEST_F(DdpSingleRankTest, ABackwardThatFailsBeforeLaunchingIsForgotten) {
  TwoLinear net;
  DistributedDataParallel ddp(net.module, ctx_->pg);  // one bucket: nothing launches before Boom
  EXPECT_NE(AnyErrorOf([&] { net.Loss(true).backward(); }).find("boom in backward"), std::string::npos);
  for (auto& p : net.module->parameters()) p.mutable_grad() = torch::Tensor();
  net.Loss(false).backward();
  EXPECT_EQ(ddp.synced_backwards(), 1);
  // One rank: the average is the local gradient, d(sum of second(h))/d second.bias = batch size.
  EXPECT_TRUE(torch::equal(net.second->bias.grad(), torch::full({4}, 2.0)));
}

}  // namespace
}  // namespace distlm::ddp

int main(int argc, char** argv) {
  if (std::getenv("DISTLM_DDP_TEST_MODE") != nullptr) return distlm::ddp::WorkerMain();
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
