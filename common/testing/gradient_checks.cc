#include "common/testing/gradient_checks.h"

#include <algorithm>
#include <cstdio>

namespace distlm::testing {
namespace {

constexpr int64_t kBatch = 6;

double RelDiff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-12);
}

}  // namespace

void ClearGrads(SmallNet& net) {
  for (auto& p : net->parameters()) p.mutable_grad() = torch::Tensor();
}

void StepBoth(SmallNet& net, SmallNet& ref, const Grads& want) {
  torch::NoGradGuard no_grad;
  auto ref_params = ref->named_parameters();
  for (const auto& p : net->named_parameters()) {
    p.value().sub_(0.1 * p.value().grad());
    ref_params[p.key()].sub_(0.1 * want.at(p.key()));
  }
  ClearGrads(net);
}

SmallNetImpl::SmallNetImpl(bool with_unused) {
  l0 = register_module("l0", torch::nn::Linear(kNetIn, 24));
  l1 = register_module("l1", torch::nn::Linear(24, 24));
  l2 = register_module("l2", torch::nn::Linear(24, 12));
  head = register_module("head", torch::nn::Linear(12, kNetOut));
  if (with_unused) never = register_module("never", torch::nn::Linear(kNetOut, kNetOut));
}

torch::Tensor SmallNetImpl::forward(torch::Tensor x) {
  return head(torch::tanh(l2(torch::tanh(l1(torch::tanh(l0(x)))))));
}

SmallNet MakeSmallNet(int rank, bool with_unused) {
  torch::manual_seed(100 + rank);
  return SmallNet(with_unused);
}

torch::Tensor SmallNetLoss(SmallNet& net, int rank, int micro) {
  torch::manual_seed(1000 + 37 * rank + micro);
  torch::Tensor x = torch::randn({kBatch, kNetIn}), y = torch::randn({kBatch, kNetOut});
  return torch::mse_loss(net->forward(x), y);
}

Grads LocalGrads(SmallNet& weights, int rank, int k) {
  ClearGrads(weights);
  for (int m = 0; m < k; ++m) (SmallNetLoss(weights, rank, m) / k).backward();
  Grads g;
  for (const auto& p : weights->named_parameters()) {
    g[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  }
  ClearGrads(weights);
  return g;
}

Grads AverageGrads(SmallNet& weights, int world, int k) {
  Grads sum;
  for (int r = 0; r < world; ++r) {
    for (auto& [name, g] : LocalGrads(weights, r, k)) sum[name] = sum.count(name) ? sum[name] + g : g;
  }
  for (auto& [name, g] : sum) g = g / world;
  return sum;
}

void CheckAverage(const RankEnv& env, SmallNet& net, const Grads& want, const Grads& local, const std::string& when) {
  for (const auto& p : net->named_parameters()) {
    const std::string& name = p.key();
    const torch::Tensor got = p.value().grad();
    const std::string where = "parameter " + name + " " + when + ": ";
    if (!got.defined()) Fail(where + ".grad is empty");
    const torch::Tensor& w = want.at(name);
    if (!w.defined()) continue;
    if (RelDiff(got, w) < 1e-5) continue;
    if (RelDiff(got, w * env.world) < 1e-5) {
      Fail(where + "the sum over ranks, not the mean: divide by the number of ranks (" + std::to_string(env.world) + ")");
    }
    if (RelDiff(got, w / env.world) < 1e-5) Fail(where + "the mean, divided by the number of ranks once too often");
    if (RelDiff(got, local.at(name)) < 1e-5) {
      Fail(where + "still this rank's own gradient, not the average over ranks: was it communicated, waited for, "
                   "and the result written into .grad?");
    }
    if (got.abs().max().item<double>() == 0) Fail(where + "all zeros");
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "differs from the average over ranks by %.3g (relative; first element %.6g, expected %.6g)",
                  RelDiff(got, w), got.reshape(-1)[0].item<double>(), w.reshape(-1)[0].item<double>());
    Fail(where + buf);
  }
}

void CheckGradientSync(RankEnv& env, const GradSyncFn& sync, const std::vector<std::string>& required,
                       const std::vector<std::string>& forbidden) {
  SmallNet net = MakeSmallNet(0), ref = MakeSmallNet(0);  // the Trainer starts every rank alike
  for (int update = 1; update <= 2; ++update) {
    const std::string when = "after update " + std::to_string(update);
    Grads want = AverageGrads(ref, env.world, 1), local = LocalGrads(ref, env.rank, 1);
    SmallNetLoss(net, env.rank, 0).backward();
    env.counting->TakeStats();
    sync(*env.pg, net->parameters());
    std::map<std::string, int> ops;
    for (const auto& r : env.counting->TakeStats().records) ++ops[r.op];
    CheckAverage(env, net, want, local, when);
    for (const auto& op : required) {
      if (ops[op] == 0) Fail("update " + std::to_string(update) + " never called " + op + ", which this task asks for");
    }
    for (const auto& op : forbidden) {
      if (ops[op] > 0) {
        Fail("update " + std::to_string(update) + " called " + op + " " + std::to_string(ops[op]) +
             " time(s); this task must do without it");
      }
    }
    StepBoth(net, ref, want);
  }
}

}  // namespace distlm::testing
