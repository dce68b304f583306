#include "common/testing/gradient_checks.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

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

namespace {

// Why a parameter's .grad is not the average, or "" when it is.
std::string Diagnose(const RankEnv& env, const torch::Tensor& got, const torch::Tensor& want, const torch::Tensor& local,
                     const std::vector<std::pair<const torch::Tensor*, const std::string*>>& known,
                     int64_t collectives, bool earlier_updates_right) {
  if (!got.defined()) return ".grad is empty";
  if (RelDiff(got, want) < 1e-5) return "";
  if (RelDiff(got, want * env.world) < 1e-5) {
    return "the sum over ranks, not the mean: divide by the number of ranks (" + std::to_string(env.world) + ")";
  }
  if (RelDiff(got, want / env.world) < 1e-5) return "the mean, divided by the number of ranks once too often";
  for (const auto& [grad, diagnosis] : known) {
    if (grad->defined() && RelDiff(got, *grad) < 1e-5) return *diagnosis;
  }
  if (RelDiff(got, local) < 1e-5) {
    if (collectives == 0) return "still this rank's own gradient, not the average over ranks: no collective was called";
    if (collectives > 0) {
      return "still this rank's own gradient, not the average over ranks, though " + std::to_string(collectives) +
             " collective(s) ran: their result never reached .grad (write it into p.grad() itself, e.g. with "
             "copy_, not into a copy of it)";
    }
    return "still this rank's own gradient, not the average over ranks: was it communicated, waited for, and the "
           "result written into .grad?";
  }
  // The division ran, on a .grad the collective's sum never reached: a copy was reduced, or the
  // result was not waited for.
  if (RelDiff(got, local / env.world) < 1e-5) {
    return "this rank's own gradient divided by the number of ranks, not the average over ranks: the sum never "
           "reached .grad before the division (reduce p.grad() itself, not a copy of it, and wait() before dividing)";
  }
  if (got.abs().max().item<double>() == 0) {
    return "all zeros, not the average over ranks: what reached .grad was never filled with the gradients";
  }
  // The element furthest off, so the numbers shown are ones that differ.
  const int64_t at = (got - want).abs().reshape(-1).argmax().item<int64_t>();
  char buf[300];
  std::snprintf(buf, sizeof(buf), "differs from the average over ranks by %.3g (relative; element %lld is %.6g, expected %.6g)",
                RelDiff(got, want), static_cast<long long>(at), got.reshape(-1)[at].item<double>(),
                want.reshape(-1)[at].item<double>());
  // Right once, wrong the next time: what the first update left behind is the usual cause.
  return std::string(buf) + (earlier_updates_right
                                 ? ", while the earlier update was right: does your code keep state from one update to "
                                   "the next (a count, a bucket, a flag) that it must reset?"
                                 : ": was a collective's result read or divided before its wait()?");
}

// What the task asks each collective for, after "never called OP, which this task asks for".
std::string OpHint(const std::string& op) {
  if (op == "gather") return ": every rank's gradients go to rank 0 with gather";
  if (op == "scatter") return ": rank 0 sends the average back to every rank with scatter";
  if (op == "allreduce") return ": all-reduce every .grad (SUM), then divide by the number of ranks";
  return "";
}

}  // namespace

void CheckAverage(const RankEnv& env, SmallNet& net, const Grads& want, const Grads& local, const std::string& when,
                  int64_t collectives, const std::vector<KnownMistake>& known, bool earlier_updates_right) {
  std::string first_name, first_why;
  int checked = 0, averaged = 0;
  for (const auto& p : net->named_parameters()) {
    const std::string& name = p.key();
    const torch::Tensor& w = want.at(name);
    if (!w.defined()) continue;  // no gradient expected (a parameter the loss does not use)
    std::vector<std::pair<const torch::Tensor*, const std::string*>> candidates;
    for (const auto& k : known) {
      auto it = k.grads.find(name);
      if (it != k.grads.end()) candidates.emplace_back(&it->second, &k.diagnosis);
    }
    const std::string why =
        Diagnose(env, p.value().grad(), w, local.at(name), candidates, collectives, earlier_updates_right);
    ++checked;
    if (why.empty()) {
      ++averaged;
    } else if (first_name.empty()) {
      first_name = name;
      first_why = why;
    }
  }
  if (first_name.empty()) return;
  // A loop that stops early or skips some parameters: the others being right is the clue.
  if (averaged > 0 && first_why.rfind("still this rank's own gradient", 0) == 0) {
    first_why = "still this rank's own gradient, not the average over ranks, while " + std::to_string(averaged) +
                " of the " + std::to_string(checked) + " parameters hold the average: synchronise every parameter";
  }
  if (averaged > 0 && first_why.rfind("this rank's own gradient divided", 0) == 0) {
    first_why = "this rank's own gradient divided by the number of ranks, while " + std::to_string(averaged) +
                " of the " + std::to_string(checked) + " parameters hold the average: this one was never " +
                "communicated; synchronise every parameter";
  }
  Fail("parameter " + first_name + " " + when + ": " + first_why);
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
    int64_t calls = 0;
    for (const auto& r : env.counting->TakeStats().records) {
      ++ops[r.op];
      ++calls;
    }
    // A forbidden collective first: it is usually what replaced the missing one.
    for (const auto& op : forbidden) {
      if (ops[op] > 0) {
        Fail("update " + std::to_string(update) + " called " + op + " " + std::to_string(ops[op]) +
             " time(s); this task must do without it");
      }
    }
    for (const auto& op : required) {
      if (ops[op] == 0) {
        Fail("update " + std::to_string(update) + " never called " + op + ", which this task asks for" + OpHint(op));
      }
    }
    CheckAverage(env, net, want, local, when, calls, {}, update > 1);
    StepBoth(net, ref, want);
  }
}

}  // namespace distlm::testing
