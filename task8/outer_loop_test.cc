// Task 8a's outer loop on 2 and 4 real ranks (Gloo over 127.0.0.1): each worker's "inner
// training" is a move of the parameters that every rank can compute for every other (a function
// of the rank and the round), so each rank knows what the mean, the pseudo-gradient and the outer
// optimizer's step must be, in double precision, and checks its parameters against them after
// every round, naming the usual mistakes when its parameters match one.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/dist/forwarding_group.h"
#include "common/testing/rank_test.h"
#include "task8/membership.h"
#include "task8/outer_loop.h"

namespace distlm::task8 {
namespace {

using testing::Fail;
using testing::RankEnv;

constexpr int kRounds = 3;
const std::vector<std::vector<int64_t>> kShapes = {{3, 4}, {4}, {2, 2, 2}};

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<torch::Tensor> Initial() {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    const double top = 1.0 + static_cast<double>(i);
    out.push_back(torch::linspace(-1.0, top, Numel(kShapes[i]), torch::kDouble).reshape(kShapes[i]));
  }
  return out;
}

// How far worker `rank` moves tensor `i` in round `round` (its H inner updates, stood in for).
torch::Tensor Move(int rank, int round, size_t i) {
  const double phase = round * 0.7 + static_cast<double>(i);
  return (torch::sin(torch::arange(Numel(kShapes[i]), torch::kDouble) * (rank + 1.0) + phase) * (0.1 * (rank + 1)))
      .reshape(kShapes[i]);
}

std::vector<torch::Tensor> Floats(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> out;
  for (const auto& t : ts) out.push_back(t.to(torch::kFloat));
  return out;
}

// What the parameters must be after each round (double), and what the usual mistakes leave.
struct Expected {
  std::vector<torch::Tensor> want, wrong_sign, summed_not_divided, from_own_parameters;
};

// The outer step from `start` with the mean pseudo-gradient `g` and the momentum buffers `buf`
// (updated; empty: the first round), as torch.optim.SGD takes it.
std::vector<torch::Tensor> OuterStep(const std::vector<torch::Tensor>& from, const std::vector<torch::Tensor>& g,
                                     std::vector<torch::Tensor>& buf, const OuterOptimizerOptions& o, double sign) {
  std::vector<torch::Tensor> out;
  const bool first = buf.empty();
  for (size_t i = 0; i < g.size(); ++i) {
    torch::Tensor d = g[i];
    if (o.momentum != 0) {
      if (first) buf.push_back(g[i].clone());
      else buf[i] = buf[i] * o.momentum + g[i];
      d = o.nesterov ? g[i] + o.momentum * buf[i] : buf[i];
    }
    out.push_back(from[i] - sign * o.lr * d);
  }
  return out;
}

// A group whose first collective throws, on every rank at once, as Gloo's does in a round a
// worker dies in; after that every collective goes through.
class FailsOnce : public dist::ForwardingGroup {
 public:
  using ForwardingGroup::ForwardingGroup;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    ThrowOnce();
    return ForwardingGroup::allreduce(tensors, opts);
  }
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override {
    ThrowOnce();
    return ForwardingGroup::allgather(outputs, inputs, opts);
  }
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    ThrowOnce();
    return ForwardingGroup::broadcast(tensors, opts);
  }
  bool thrown() const { return thrown_; }

 private:
  void ThrowOnce() {
    if (thrown_) return;
    thrown_ = true;
    throw std::runtime_error("[the test] a worker was lost during this collective");
  }
  bool thrown_ = false;
};

// `join_after` >= 0: after that round (0-based) the last rank starts a new OuterLoop, as a worker
// that joins does (membership.h): Begin with the parameters every worker holds, then
// LoadSharedState with what rank 0's SharedState() gave. Its rounds must go on as before.
// `fail_in` >= 0: in that round End is first called with a group whose first collective throws
// (FailsOnce), then again with the working one, as the stage does after a worker was lost.
void CheckRounds(RankEnv& env, const OuterOptimizerOptions& options, int join_after = -1, int fail_in = -1) {
  std::vector<torch::Tensor> start = Initial();  // double: the truth
  std::vector<torch::Tensor> params = Floats(start);
  std::vector<torch::Tensor> buf, buf_sign, buf_sum, buf_own;
  std::unique_ptr<OuterLoop> loop = MakeOuterLoop(options);
  loop->Begin(params);
  for (int round = 0; round < kRounds; ++round) {
    std::vector<torch::Tensor> g, g_sum, mine_at_end;
    for (size_t i = 0; i < start.size(); ++i) {
      torch::Tensor mean = torch::zeros_like(start[i]);
      for (int r = 0; r < env.world; ++r) mean += start[i] + Move(r, round, i);
      mine_at_end.push_back(start[i] + Move(env.rank, round, i));
      mean /= env.world;
      g.push_back(start[i] - mean);
      g_sum.push_back((start[i] - mean) * env.world);
      params[i].copy_(mine_at_end.back());
    }
    if (round == fail_in) {
      auto failing = c10::make_intrusive<FailsOnce>(env.pg);
      const dist::GroupPtr group = dist::AsGroup(failing, env.pg->getBackendName());
      bool threw = false;
      try {
        loop->End(*group, params);
      } catch (const std::exception&) {
        threw = true;
      }
      if (!failing->thrown()) Fail("End sent nothing through the group it was given");
      if (!threw) Fail("End returned normally although its collective threw: the caller must learn that a worker was lost");
    }
    loop->End(*env.pg, params);
    Expected e;
    std::vector<torch::Tensor> no_state;
    const std::vector<torch::Tensor> joiner_afresh = OuterStep(start, g, no_state, options, 1);
    e.want = OuterStep(start, g, buf, options, 1);
    e.wrong_sign = OuterStep(start, g, buf_sign, options, -1);
    e.summed_not_divided = OuterStep(start, g_sum, buf_sum, options, 1);
    e.from_own_parameters = OuterStep(mine_at_end, g, buf_own, options, 1);
    const auto close = [](const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want) {
      for (size_t i = 0; i < got.size(); ++i) {
        if (!torch::allclose(got[i].to(torch::kDouble), want[i], 1e-5, 1e-5)) return false;
      }
      return true;
    };
    if (!close(params, e.want)) {
      char said[160];
      std::snprintf(said, sizeof said, "after round %d on %d workers (outer lr %g, momentum %g%s): ", round + 1,
                    env.world, options.lr, options.momentum, options.nesterov ? ", Nesterov" : "");
      const std::string where = said;
      if (round == fail_in) {
        Fail(where + "End was called once with a group whose collective threw, then again: what the first call "
             "changed before the collective threw was changed twice (a failed End must leave the worker as it was)");
      }
      if (join_after >= 0 && round == join_after + 1 && env.rank == env.world - 1 && close(params, joiner_afresh)) {
        Fail(where + "on the worker that joined after round " + std::to_string(join_after + 1) +
             ", the outer step started afresh: what LoadSharedState received did not carry the outer optimizer's state");
      }
      if (close(params, e.wrong_sign)) Fail(where + "the step went the wrong way: the pseudo-gradient is start - mean, and the optimizer subtracts it");
      if (close(params, e.summed_not_divided)) Fail(where + "the pseudo-gradients were summed over the workers, not averaged");
      if (close(params, e.from_own_parameters)) Fail(where + "the outer step was taken from this worker's own parameters, not from the round's start");
      // The element furthest from its due value, to show what the numbers look like.
      size_t worst_t = 0;
      int64_t worst_k = 0;
      double worst = -1;
      for (size_t i = 0; i < params.size(); ++i) {
        const torch::Tensor diff = (params[i].to(torch::kDouble) - e.want[i]).abs().flatten();
        const int64_t k = diff.argmax().item<int64_t>();
        if (diff[k].item<double>() > worst) worst = diff[k].item<double>(), worst_t = i, worst_k = k;
      }
      char numbers[160];
      std::snprintf(numbers, sizeof numbers, "tensor %zu, element %lld, holds %.6g where %.6g was due", worst_t,
                    static_cast<long long>(worst_k), params[worst_t].flatten()[worst_k].item<double>(),
                    e.want[worst_t].flatten()[worst_k].item<double>());
      Fail(where + "the parameters are not the outer optimizer's step from the round's start (" + numbers + ")");
    }
    start = e.want;
    if (round == join_after) {
      std::vector<torch::Tensor> state;
      if (env.rank == 0) state = loop->SharedState();
      ShareTensors(*env.pg, state);
      if (env.rank == env.world - 1) {
        loop = MakeOuterLoop(options);
        loop->Begin(params);
        loop->LoadSharedState(state);
      }
    }
  }
}

RANK_CASE(local_sgd) { CheckRounds(env, {1.0, 0.0, false}); }
RANK_CASE(momentum) { CheckRounds(env, {0.5, 0.9, false}); }
RANK_CASE(diloco) { CheckRounds(env, {0.7, 0.9, true}); }
RANK_CASE(diloco_joiner) { CheckRounds(env, {0.7, 0.9, true}, 0); }
RANK_CASE(diloco_retried) { CheckRounds(env, {0.7, 0.9, true}, -1, 1); }

// With outer SGD at lr 1 and no momentum a round ends on the workers' average.
TEST(Task8OuterLoop, LocalSgdEndsEachRoundOnTheWorkersAverage) {
  EXPECT_RANKS_PASS("local_sgd", 2);
  EXPECT_RANKS_PASS("local_sgd", 4);
}
TEST(Task8OuterLoop, MomentumCarriesFromRoundToRound) { EXPECT_RANKS_PASS("momentum", 2); }
TEST(Task8OuterLoop, DiLoCosNesterovStep) {
  EXPECT_RANKS_PASS("diloco", 2);
  EXPECT_RANKS_PASS("diloco", 4);
}
// 8c: a worker that joins between rounds takes the next ones as if it had trained from the start.
TEST(Task8OuterLoop, AJoinerGoesOnWithTheOuterStateItReceives) { EXPECT_RANKS_PASS("diloco_joiner", 3); }
// 8c: an End whose collective threw (a worker lost) is called again with the survivors' group.
TEST(Task8OuterLoop, AFailedEndLeavesTheWorkerAsItWas) { EXPECT_RANKS_PASS("diloco_retried", 2); }

}  // namespace
}  // namespace distlm::task8
