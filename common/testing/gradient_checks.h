// For the students' local tests of gradient synchronisation (tasks 2a, 2b, 3): a small network
// whose data is a function of the rank, so every rank can compute by itself what each rank's
// gradient is and their average, and a comparison that says what a wrong .grad looks like.
#pragma once

#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/testing/rank_test.h"

namespace distlm::testing {

inline constexpr int64_t kNetIn = 16, kNetOut = 4;

// Four Linear layers (l0, l1, l2, head; 1,360 parameters in 8 tensors) and, when asked, a
// layer `never` the loss does not use.
struct SmallNetImpl : torch::nn::Module {
  explicit SmallNetImpl(bool with_unused);
  torch::Tensor forward(torch::Tensor x);
  torch::nn::Linear l0{nullptr}, l1{nullptr}, l2{nullptr}, head{nullptr}, never{nullptr};
};
TORCH_MODULE(SmallNet);

// Rank r's initial weights (they differ between ranks).
SmallNet MakeSmallNet(int rank, bool with_unused = false);

// The loss of rank r's micro-batch `micro` (a function of both).
torch::Tensor SmallNetLoss(SmallNet& net, int rank, int micro);

using Grads = std::map<std::string, torch::Tensor>;  // parameter name -> gradient

// Drops every .grad (as the Trainer's zero_grad does).
void ClearGrads(SmallNet& net);

// The same SGD step (lr 0.1) on `net` from its own .grad and on `ref` from `want`: when .grad
// was the average, the two stay equal for the next update's expectations. Clears net's .grad.
void StepBoth(SmallNet& net, SmallNet& ref, const Grads& want);

// Rank r's gradient on `weights` over micro-batches 0..k-1, each loss divided by k (leaves
// weights' .grad empty).
Grads LocalGrads(SmallNet& weights, int rank, int k);
// The average over `world` ranks of LocalGrads.
Grads AverageGrads(SmallNet& weights, int world, int k);

// A wrong synchronisation the caller can compute, and what to tell a student whose .grad
// equals it: e.g. the average of gradients taken at each rank's own initial weights.
struct KnownMistake {
  Grads grads;
  std::string diagnosis;  // the message after "parameter P <when>: "
};

// Fail()s, naming the parameter, unless every .grad of `net` equals `want` (1e-5 relative).
// A wrong .grad is compared with what the usual mistakes would leave there, computed here or
// given in `known`: the sum, the mean divided twice, this rank's own gradient (told apart by
// `collectives`, the collectives the synchronisation called, when >= 0: nothing sent, or a
// result that never reached .grad), zeros; when only some parameters are wrong, says how many.
// `earlier_updates_right`: an earlier update of the same run passed this check (a result wrong
// only now points at state kept between updates).
void CheckAverage(const RankEnv& env, SmallNet& net, const Grads& want, const Grads& local, const std::string& when,
                  int64_t collectives = -1, const std::vector<KnownMistake>& known = {},
                  bool earlier_updates_right = false);

// Tasks 2a/2b: two updates of SmallNet with `sync` after each backward, on the ranks of env:
// each update must call none of `forbidden` and every op of `required` (e.g. {"allreduce"}
// and {"gather", "scatter"}), checked first because a wrong or missing collective explains a
// wrong gradient; then every .grad must be the average (CheckAverage).
using GradSyncFn = std::function<void(c10d::ProcessGroup&, const std::vector<torch::Tensor>&)>;
void CheckGradientSync(RankEnv& env, const GradSyncFn& sync, const std::vector<std::string>& required,
                       const std::vector<std::string>& forbidden);

}  // namespace distlm::testing
