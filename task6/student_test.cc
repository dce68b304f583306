// Task 6's local tests: bazel test //task6:student_test
//
// On 2 and 4 real ranks (Gloo over 127.0.0.1), a toy model of three units (in: Linear 5->6;
// mid: Linear 6->4 and a LayerNorm; out: Linear 4->3; 36, 36 and 15 elements, so the last unit
// is padded) checks each of your functions alone, then trains it for three updates through
// the given schedule and compares every parameter with one process training on every rank's
// examples. Each check names the mistake it recognises. 6b and 6c: the Start functions must
// return before their collective completes (the other ranks join it 300 ms late), and the
// training runs again with prefetch, then with the overlapped reduce-scatter, its events'
// order checked.
#include <torch/types.h>
#include <torch/utils.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/functional.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/testing/rank_test.h"
#include "common/train/bert_adamw.h"
#include "task6/fsdp.h"
#include "task6/fsdp_schedule.h"

namespace distlm::task6 {
namespace {

using testing::Fail;
using testing::RankEnv;

struct ToyImpl : torch::nn::Module {
  ToyImpl() {
    torch::manual_seed(3);
    in = register_module("in", torch::nn::Linear(5, 6));
    mid = register_module("mid", torch::nn::Linear(6, 4));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})));
    out = register_module("out", torch::nn::Linear(4, 3));
  }
  torch::Tensor Loss(const torch::Tensor& x, const torch::Tensor& y, const model::UnitHooks* hooks) {
    torch::Tensor h = model::RunUnit(hooks, 0, [&] { return torch::tanh(in(x)); });
    h = model::RunUnit(hooks, 1, [&] { return torch::tanh(norm(mid(h))); });
    torch::Tensor logits = model::RunUnit(hooks, 2, [&] { return out(h); });
    return torch::nn::functional::cross_entropy(logits, y);
  }
  std::vector<model::Unit> Units() const {
    std::vector<std::string> names;
    for (const auto& p : named_parameters()) names.push_back(p.key());
    return model::UnitsByPrefix(names, {{"unit in", {"in."}}, {"unit mid", {"mid.", "norm."}}, {"unit out", {"out."}}});
  }
  NamedTensors Params() const {
    NamedTensors v;
    for (const auto& p : named_parameters()) v.emplace_back(p.key(), p.value());
    return v;
  }
  torch::nn::Linear in{nullptr}, mid{nullptr}, out{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(Toy);

train::AdamWOptions Adam() {
  train::AdamWOptions adam;
  adam.lr = 1e-2;
  adam.weight_decay = 0.1;
  return adam;
}

// What `of` gives for each of a unit's parameters, flat and padded as the unit lays them out.
torch::Tensor UnitFlat(const model::Unit& unit, int64_t padded, const std::function<torch::Tensor(const std::string&)>& of) {
  std::vector<torch::Tensor> v;
  for (const std::string& name : unit.parameters) v.push_back(of(name).detach().reshape(-1));
  torch::Tensor flat = torch::cat(v);
  return torch::cat({flat, torch::zeros({padded - flat.numel()})});
}

// The unit's parameters before any training.
torch::Tensor InitialFull(int u, int64_t padded) {
  Toy toy;
  return UnitFlat(toy->Units()[u], padded, [&](const std::string& name) { return toy->named_parameters()[name]; });
}

std::string Num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", x);
  return buf;
}

bool Close(const torch::Tensor& a, const torch::Tensor& b) { return torch::allclose(a, b, 1e-5, 1e-6); }

// GatherUnit, then ReshardUnit, on every unit.
void CheckGatherAndReshard(RankEnv& env) {
  Toy toy, fresh;
  FsdpModel m(toy->Units(), toy->Params(), Adam(), env.rank, env.world);
  for (int u = 0; u < m.num_units(); ++u) {
    FsdpUnit& unit = m.unit(u);
    const std::string who = unit.name() + " (" + std::to_string(unit.layout().padded_numel()) + " elements, " +
                            std::to_string(env.world) + " blocks of " + std::to_string(unit.shard_numel()) + ")";
    const torch::Tensor shard_before = unit.param_shard().clone();
    GatherUnit(*env.pg, unit);
    if (!unit.gathered()) {
      Fail("after GatherUnit, " + who + " has no bytes in full_params(): call AllocateStorage(unit.full_params()) "
           "before gathering into it");
    }
    const torch::Tensor want = InitialFull(u, unit.layout().padded_numel());
    const torch::Tensor got = unit.full_params().clone();
    const int64_t S = unit.shard_numel();
    for (int r = 0; r < env.world; ++r) {
      if (Close(got.narrow(0, r * S, S), want.narrow(0, r * S, S))) continue;
      if (r != env.rank && Close(got.narrow(0, r * S, S), want.narrow(0, env.rank * S, S))) {
        Fail("after GatherUnit, block " + std::to_string(r) + " of " + who + " holds this rank's own shard: block r " +
             "must hold rank r's param_shard() (all-gather, not a copy)");
      }
      Fail("after GatherUnit, block " + std::to_string(r) + " of " + who + " (elements " + std::to_string(r * S) +
           ".." + std::to_string((r + 1) * S - 1) + ") is not rank " + std::to_string(r) + "'s param_shard()");
    }
    for (const auto& [name, p] : unit.params()) {
      if (p.data_ptr() == nullptr || !Close(p.detach().reshape(-1), fresh->named_parameters()[name].detach().reshape(-1))) {
        Fail("after GatherUnit, parameter " + name + " does not read its values: gather into unit.full_params() "
             "itself (every parameter is a view of it), not into a new tensor");
      }
    }
    ReshardUnit(unit);
    if (unit.gathered()) {
      Fail(who + "'s parameters were not freed by ReshardUnit: rank " + std::to_string(env.rank) + " held " +
           std::to_string(StorageBytes(unit.full_params())) + " bytes more than its shard (ReleaseStorage: a tensor "
           "dropped frees nothing while the parameters are views of it)");
    }
    if (!torch::equal(unit.param_shard(), shard_before)) Fail("GatherUnit or ReshardUnit changed param_shard() of " + who);
  }
}

// Rank r's full gradient of unit u in micro-batch k.
torch::Tensor FullGradOf(int r, int u, int k, int64_t padded, int64_t real) {
  torch::manual_seed(1000 + 31 * r + 7 * u + k);
  torch::Tensor g = torch::randn({padded}) * (1 + r);
  g.narrow(0, real, padded - real).zero_();  // backward never writes the padding
  return g;
}

// ReduceScatterGrad twice (two micro-batches) on every unit.
void CheckReduceScatter(RankEnv& env) {
  Toy toy;
  FsdpModel m(toy->Units(), toy->Params(), Adam(), env.rank, env.world);
  const int N = env.world, me = env.rank;
  for (int u = 0; u < m.num_units(); ++u) {
    FsdpUnit& unit = m.unit(u);
    const int64_t S = unit.shard_numel(), padded = unit.layout().padded_numel(), real = unit.layout().total_numel();
    auto mean = [&](int k) {
      torch::Tensor sum = torch::zeros({padded});
      for (int r = 0; r < N; ++r) sum += FullGradOf(r, u, k, padded, real);
      return sum / N;
    };
    auto block = [&](const torch::Tensor& t, int r) { return t.narrow(0, r * S, S); };
    for (int k = 0; k < 2; ++k) {
      unit.AllocateGrad();
      {
        torch::NoGradGuard no_grad;
        unit.full_grad().copy_(FullGradOf(me, u, k, padded, real));
      }
      ReduceScatterGrad(*env.pg, unit);
      if (unit.holds_full_grad()) {
        Fail("the full gradient of " + unit.name() + " was not freed after ReduceScatterGrad: rank " +
             std::to_string(me) + " held " + std::to_string(unit.FullBytes()) + " bytes more than its shard "
             "(unit.FreeGrad())");
      }
    }
    const torch::Tensor got = unit.grad_shard();
    const torch::Tensor want = block(mean(0) + mean(1), me);
    if (Close(got, want)) continue;
    const std::string yours = unit.name() + "'s grad_shard() on rank " + std::to_string(me) + " after two micro-batches ";
    if (N != 2 && Close(got, want * 2)) {
      Fail(yours + "holds twice the average: this rank's block of each micro-batch's average reached grad_shard() "
           "twice (added where the collective is launched and again where it is finished?)");
    }
    if (Close(got, want * N)) {
      Fail(yours + "holds the SUM of the ranks' gradients, not their mean: the gradient of " + unit.name() +
           " was summed, not averaged (divide by the world size, " + std::to_string(N) + ")");
    }
    if (Close(got, block(mean(1), me)) || Close(got, block(mean(1), me) * N)) {
      Fail(yours + "holds only the second micro-batch's gradient: add into grad_shard() (it sums the "
           "micro-batches of an update), do not overwrite it");
    }
    if (Close(got, block(FullGradOf(me, u, 0, padded, real) + FullGradOf(me, u, 1, padded, real), me))) {
      Fail(yours + "holds this rank's own gradient, not the average over ranks: reduce across ranks "
           "(reduce-scatter, or all-reduce and narrow)");
    }
    for (int r = 0; r < N; ++r) {
      if (r != me && Close(got, block(mean(0) + mean(1), r))) {
        Fail(yours + "holds block " + std::to_string(r) + " of the average, not block " + std::to_string(me) +
             ": rank r keeps elements [r*S, (r+1)*S)");
      }
    }
    if (Close(got, want / N)) {
      Fail(yours + "holds the mean divided by the world size once too often: divide the sum once");
    }
    Fail(yours + "differs from this rank's block of the averaged gradient summed over the micro-batches");
  }
}

// ShardedStep on known averaged gradients, against one process's clipped AdamW.
void CheckStep(RankEnv& env, double max_norm) {
  Toy toy;
  FsdpModel m(toy->Units(), toy->Params(), Adam(), env.rank, env.world);
  const std::vector<model::Unit> units = toy->Units();
  Toy one;
  train::BertAdamW adam(one->Params(), Adam());
  std::vector<torch::Tensor> ps;
  for (auto& [name, p] : one->Params()) {
    p.mutable_grad() = 0.3 * p.detach() + 0.1;  // any fixed gradient
    ps.push_back(p);
  }
  // The shards get their blocks of the same gradients (the schedule's reduce-scatter, done here).
  for (int u = 0; u < m.num_units(); ++u) {
    FsdpUnit& unit = m.unit(u);
    const torch::Tensor flat = UnitFlat(units[u], unit.layout().padded_numel(),
                                        [&](const std::string& name) { return one->named_parameters()[name].grad(); });
    torch::NoGradGuard no_grad;
    unit.grad_shard().copy_(flat.narrow(0, env.rank * unit.shard_numel(), unit.shard_numel()));
  }
  const double want_norm = train::ClipGradNorm(ps, max_norm);
  adam.Step();
  const int64_t steps = m.adam().step_count();
  const double norm = ShardedStep(*env.pg, m, max_norm);
  if (m.adam().step_count() != steps + 1) {
    Fail("ShardedStep called model.StepShards() " + std::to_string(m.adam().step_count() - steps) +
         " time(s); call it exactly once per update");
  }
  auto near = [&](double x) { return std::abs(norm - x) <= 1e-5 * std::abs(x) + 1e-9; };
  if (!near(want_norm)) {
    const std::string returned = "ShardedStep returned " + Num(norm) + ", but the norm of the whole gradient is " +
                                 Num(want_norm) + ": ";
    if (near(std::sqrt(m.ShardSquaredNorm()))) {
      Fail(returned + "you returned this rank's part only; all-reduce the squared norms of every rank's shards first");
    }
    if (near(want_norm * want_norm)) Fail(returned + "you returned its square");
    Fail(returned + "return the norm before clipping");
  }
  for (int u = 0; u < m.num_units(); ++u) {
    FsdpUnit& unit = m.unit(u);
    const torch::Tensor flat = UnitFlat(units[u], unit.layout().padded_numel(),
                                        [&](const std::string& name) { return one->named_parameters()[name]; });
    const torch::Tensor want = flat.narrow(0, env.rank * unit.shard_numel(), unit.shard_numel());
    if (!Close(unit.param_shard(), want)) {
      Fail(unit.name() + "'s param_shard() after ShardedStep differs from one process's clipped AdamW step (max_norm " +
           Num(max_norm) + "): clip every shard by the global norm (model.ScaleGradShards) before model.StepShards()");
    }
  }
}

// Position of the first `event` in `events` at or after `from`; Fail when there is none.
size_t Find(const std::vector<std::string>& events, const std::string& event, size_t from = 0) {
  for (size_t i = from; i < events.size(); ++i) {
    if (events[i] == event) return i;
  }
  std::string all;
  for (const auto& e : events) all += (all.empty() ? "" : ", ") + e;
  Fail("the schedule never recorded \"" + event + "\" in the first update: " + all);
}

// One update's forward and backward, as the schedule recorded them (fsdp_schedule.h).
void CheckEvents(const std::vector<std::string>& ev, int n, Overlap overlap) {
  auto at = [&](const std::string& e, int u, size_t from = 0) { return Find(ev, e + " " + std::to_string(u), from); };
  const size_t backward_start = at("backward", n - 1);
  if (overlap == Overlap::kBlocking) return;
  for (int u = 0; u + 1 < n; ++u) {
    if (at("prefetch", u + 1) > at("reshard", u)) {
      Fail("unit " + std::to_string(u + 1) + "'s all-gather was launched after unit " + std::to_string(u) +
           "'s forward ended: it should travel while unit " + std::to_string(u) + " computes");
    }
  }
  for (int u = n - 1; u > 0; --u) {
    const size_t prefetch = at("prefetch", u - 1, backward_start);
    if (prefetch < at("backward", u) || prefetch > at("reduce_scatter", u, backward_start)) {
      Fail("in backward, unit " + std::to_string(u - 1) + "'s all-gather was not launched while unit " +
           std::to_string(u) + "'s backward ran");
    }
  }
  if (overlap != Overlap::kFull) return;
  for (int u = n - 1; u > 0; --u) {
    if (at("reduce_scatter_done", u, backward_start) < at("reduce_scatter", u - 1, backward_start)) {
      Fail("unit " + std::to_string(u) + "'s reduce-scatter was finished before unit " + std::to_string(u - 1) +
           "'s backward ended: it should run behind it");
    }
  }
}

// Three updates of the toy model through the schedule, each rank on its own 4 examples,
// against one process on all of them; the order of the schedule's events checked after the
// first (prefetch and overlap, when the schedule runs them).
void CheckTraining(RankEnv& env, Overlap overlap) {
  auto batch = [](int r, int update) {
    torch::manual_seed(500 + 13 * r + update);
    return std::pair{torch::randn({4, 5}), torch::randint(0, 3, {4})};
  };
  Toy toy;
  FsdpModel m(toy->Units(), toy->Params(), Adam(), env.rank, env.world);
  FsdpSchedule schedule(*env.pg, m, overlap);
  Toy one;
  train::BertAdamW adam(one->Params(), Adam());
  std::vector<torch::Tensor> ps;
  for (auto& [name, p] : one->Params()) ps.push_back(p);
  for (int update = 0; update < 3; ++update) {
    auto [x, y] = batch(env.rank, update);
    torch::Tensor loss = toy->Loss(x, y, schedule.hooks());
    for (int u = 0; u < m.num_units(); ++u) {
      if (m.unit(u).gathered()) Fail("after the forward, " + m.unit(u).name() + " is still gathered");
    }
    loss.backward();
    for (int u = 0; u < m.num_units(); ++u) {
      if (m.unit(u).gathered() || m.unit(u).holds_full_grad()) {
        Fail("after the backward, " + m.unit(u).name() + " still holds its full parameters or gradient");
      }
    }
    if (update == 0) CheckEvents(schedule.events(), m.num_units(), overlap);
    ShardedStep(*env.pg, m, 1.0);
    m.ZeroGradShards();
    // One process: the mean of the ranks' losses is the loss of all their examples.
    std::vector<torch::Tensor> xs, ys;
    for (int r = 0; r < env.world; ++r) {
      auto [xr, yr] = batch(r, update);
      xs.push_back(xr);
      ys.push_back(yr);
    }
    one->zero_grad();
    one->Loss(torch::cat(xs), torch::cat(ys), nullptr).backward();
    train::ClipGradNorm(ps, 1.0);
    adam.Step();
  }
  schedule.WithFullParameters([&] {
    for (const auto& [name, p] : toy->Params()) {
      const torch::Tensor want = one->named_parameters()[name].detach();
      if (!Close(p.detach(), want)) {
        Fail("after 3 updates through the schedule, " + name + " differs from one process training on every rank's "
             "examples by " + Num((p.detach() - want).abs().max().item<double>()));
      }
    }
  });
}

// UnitToPrefetch for every unit of a 5-unit model in both passes (no ranks needed).
void CheckPrefetchChoice() {
  for (Pass pass : {Pass::kForward, Pass::kBackward}) {
    for (int u = 0; u < 5; ++u) {
      const std::string wrong = PrefetchMistake(u, pass, UnitToPrefetch(u, pass, 5), 5);
      if (!wrong.empty()) Fail(wrong);
    }
  }
}

// Rank 0 launches first; the others join `ms` later. A Start function that waits inside returns
// only when they have joined, with its collective complete; one that launches returns at once.
void JoinLate(RankEnv& env, int ms) {
  if (env.rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void CheckStartGather(RankEnv& env) {
  Toy toy, fresh;
  FsdpModel m(toy->Units(), toy->Params(), Adam(), env.rank, env.world);
  FsdpUnit& unit = m.unit(1);
  JoinLate(env, 300);
  c10::intrusive_ptr<c10d::Work> work = StartGather(*env.pg, unit);
  if (!work) Fail("StartGather returned no Work: return the handle of the all-gather you launched");
  if (env.rank == 0 && work->isCompleted()) {
    Fail("StartGather on rank 0 returned with its all-gather complete, though the other ranks joined it 300 ms "
         "later: it waited inside, so nothing can compute while it travels. Return the handle unwaited.");
  }
  work->wait();
  if (!unit.gathered()) Fail("after StartGather, " + unit.name() + "'s full_params() has no bytes: AllocateStorage first");
  if (!Close(unit.full_params(), InitialFull(1, unit.layout().padded_numel()))) {
    Fail("after StartGather's work completed, " + unit.name() + "'s full_params() is not every rank's block in rank order");
  }
  ReshardUnit(unit);
}

void CheckStartReduceScatter(RankEnv& env) {
  Toy toy;
  FsdpModel m(toy->Units(), toy->Params(), Adam(), env.rank, env.world);
  FsdpUnit& unit = m.unit(2);  // the padded one
  const int64_t S = unit.shard_numel(), padded = unit.layout().padded_numel(), real = unit.layout().total_numel();
  unit.AllocateGrad();
  {
    torch::NoGradGuard no_grad;
    unit.full_grad().copy_(FullGradOf(env.rank, 2, 0, padded, real));
  }
  JoinLate(env, 300);
  PendingReduceScatter pending = StartReduceScatter(*env.pg, unit);
  if (!pending.work) Fail("StartReduceScatter returned no Work: return the handle of the collective you launched");
  if (env.rank == 0 && pending.work->isCompleted()) {
    Fail("StartReduceScatter on rank 0 returned with its collective complete, though the other ranks joined it 300 ms "
         "later: it waited inside, so backward cannot go on while it runs. Return the handle unwaited.");
  }
  if (!unit.holds_full_grad()) {
    pending.work->wait();
    Fail("StartReduceScatter freed the full gradient while its collective still reads it: free it in "
         "FinishReduceScatter, after wait()");
  }
  FinishReduceScatter(*env.pg, unit, pending);
  if (unit.holds_full_grad()) Fail("after FinishReduceScatter, " + unit.name() + "'s full gradient is still held (unit.FreeGrad())");
  torch::Tensor sum = torch::zeros({padded});
  for (int r = 0; r < env.world; ++r) sum += FullGradOf(r, 2, 0, padded, real);
  const torch::Tensor want = (sum / env.world).narrow(0, env.rank * S, S);
  if (Close(unit.grad_shard(), want)) return;
  if (Close(unit.grad_shard(), want * env.world)) {
    Fail("after FinishReduceScatter, " + unit.name() + "'s grad_shard() holds the SUM over ranks: the gradient of " +
         unit.name() + " was summed, not averaged (divide by the world size, " + std::to_string(env.world) + ")");
  }
  Fail("after FinishReduceScatter, " + unit.name() + "'s grad_shard() on rank " + std::to_string(env.rank) +
       " is not its block of the averaged gradient (read the result after wait(), not before)");
}

}  // namespace

RANK_CASE(start_gather) { CheckStartGather(env); }
RANK_CASE(start_reduce_scatter) { CheckStartReduceScatter(env); }
RANK_CASE(training_prefetch) { CheckTraining(env, Overlap::kPrefetch); }
RANK_CASE(training_overlap) { CheckTraining(env, Overlap::kFull); }

RANK_CASE(gather_and_reshard) { CheckGatherAndReshard(env); }
RANK_CASE(reduce_scatter) { CheckReduceScatter(env); }
RANK_CASE(step_clipped) { CheckStep(env, /*max_norm=*/0.05); }
RANK_CASE(step_unclipped) { CheckStep(env, /*max_norm=*/100.0); }
RANK_CASE(training) { CheckTraining(env, Overlap::kBlocking); }

TEST(Task6Gather, EveryBlockGatheredThenFreed) {
  EXPECT_RANKS_PASS("gather_and_reshard", 2);
  EXPECT_RANKS_PASS("gather_and_reshard", 4);
}
TEST(Task6ReduceScatter, AveragedAndAccumulated) {
  EXPECT_RANKS_PASS("reduce_scatter", 2);
  EXPECT_RANKS_PASS("reduce_scatter", 4);
}
TEST(Task6Step, ClippedByTheGlobalNorm) {
  EXPECT_RANKS_PASS("step_clipped", 2);
  EXPECT_RANKS_PASS("step_clipped", 4);
  EXPECT_RANKS_PASS("step_unclipped", 2);
}
TEST(Task6Training, ThreeUpdatesMatchOneProcess) {
  EXPECT_RANKS_PASS("training", 2);
  EXPECT_RANKS_PASS("training", 4);
}


// 6b
TEST(Task6bPrefetch, TheNextUnitInEachPass) {
  // The schedule's own check of the answer, on every unit (no ranks).
  try {
    CheckPrefetchChoice();
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
}
TEST(Task6bPrefetch, StartGatherReturnsBeforeItsAllGatherCompletes) {
  EXPECT_RANKS_PASS("start_gather", 2);
  EXPECT_RANKS_PASS("start_gather", 4);
}
TEST(Task6bPrefetch, ThreeUpdatesMatchOneProcessWithEachGatherLaunchedAhead) {
  EXPECT_RANKS_PASS("training_prefetch", 2);
  EXPECT_RANKS_PASS("training_prefetch", 4);
}

// 6c
TEST(Task6cOverlap, StartReduceScatterReturnsBeforeItCompletes) {
  EXPECT_RANKS_PASS("start_reduce_scatter", 2);
  EXPECT_RANKS_PASS("start_reduce_scatter", 4);
}
TEST(Task6cOverlap, ThreeUpdatesMatchOneProcessWithEachReduceScatterBehindBackward) {
  EXPECT_RANKS_PASS("training_overlap", 2);
  EXPECT_RANKS_PASS("training_overlap", 4);
}

}  // namespace distlm::task6
