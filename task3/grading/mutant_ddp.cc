// //task3/grading:mutant_ddp -- a DDP of the grader's own (task3/ddp.h's MakePerParameterDdp and
// MakeBucketedDdp) with one deliberate mistake, chosen by DdpMutation(): linked into the grader's
// mutant stage (mutant_ddp_stage.cc) and into task 3's local test run on the mistakes
// (ddp_mistakes_test.cc). Grader-private, as all of grading/: with "none" it is a correct DDP.
//
// Simpler than a student's: each group's gradients are packed with one torch::cat when the
// group is launched, rather than copied into a standing buffer as they arrive. The numbers are
// the same; only the memory traffic differs, which the grader does not measure.
#include "task3/grading/mutant_ddp.h"

#include <torch/utils.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/autograd/grad_ready_hook.h"
#include "common/runtime/errors.h"
#include "task3/ddp.h"

namespace distlm::task3 {
namespace {

const std::set<std::string> kMutations = {"none",           "launch_at_finish", "forward_order",  "no_division",
                                          "ignore_no_sync", "silent_unused",    "wait_in_hook",   "fill_order",
                                          "cap_by_rank",    "forged_overlap",   "forged_no_sync", "honest_slow",
                                          "unbucketed",     "junk_overlap"};

class MutantDdp : public DataParallel {
 public:
  // cap_bytes <= 0: one group per parameter (3a).
  MutantDdp(std::vector<NamedParameter> params, c10::intrusive_ptr<c10d::ProcessGroup> pg, int64_t cap_bytes,
            std::string mutation)
      : params_(std::move(params)), pg_(std::move(pg)), m_(std::move(mutation)) {
    if (kMutations.count(m_) == 0) throw UserError("--ddp_mutation=" + m_ + " is not a known mistake");
    torch::NoGradGuard no_grad;
    for (auto& p : params_) {
      std::vector<torch::Tensor> one = {p.tensor.data()};
      pg_->broadcast(one)->wait();
    }
    std::vector<size_t> order(params_.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = m_ == "forward_order" ? i : order.size() - 1 - i;
    group_of_.resize(params_.size());
    if (m_ == "cap_by_rank" && cap_bytes > 0) cap_bytes *= pg_->getRank() + 1;
    if (m_ == "unbucketed") cap_bytes = 0;
    int64_t bytes = 0;
    for (size_t i : order) {
      if (groups_.empty() || cap_bytes <= 0 || bytes >= cap_bytes) {
        groups_.push_back({});
        bytes = 0;
      }
      groups_.back().members.push_back(i);
      group_of_[i] = groups_.size() - 1;
      bytes += params_[i].tensor.numel() * 4;
    }
    arrived_.assign(params_.size(), false);
    for (size_t i = 0; i < params_.size(); ++i) hooks_.emplace_back(params_[i].tensor, [this, i] { Arrived(i); });
  }

  void set_require_grad_sync(bool sync) override { sync_ = sync; }

  void FinishGradientSync() override {
    std::vector<std::string> missing;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!arrived_[i]) missing.push_back(params_[i].name);
    }
    if (!missing.empty() && m_ != "silent_unused") {
      for (auto& g : groups_) {
        if (g.work) g.work->wait();
      }
      Clear();
      throw UserError("no gradient for " + missing.front() + " in this backward");
    }
    torch::NoGradGuard no_grad;
    for (auto& w : junk_) w->wait();
    junk_.clear();
    for (size_t k = 0; k < groups_.size(); ++k) {
      if (!groups_[k].work) Launch(k);
    }
    for (auto& g : groups_) {
      g.work->wait();
      if (m_ == "honest_slow") {
        // The mean in double precision, through a copy each way: slower, the same numbers.
        g.flat.copy_(g.flat.to(torch::kDouble).div(pg_->getSize()).to(torch::kFloat));
      } else if (m_ != "no_division") {
        g.flat.div_(pg_->getSize());
      }
      int64_t at = 0;
      for (size_t i : g.members) {
        torch::Tensor grad = params_[i].tensor.mutable_grad();
        if (!grad.defined()) continue;  // silent_unused: nothing to write into
        grad.copy_(g.flat.narrow(0, at, grad.numel()).view_as(grad));
        at += grad.numel();
      }
    }
    Clear();
  }

 private:
  struct Group {
    std::vector<size_t> members;
    size_t arrived = 0;
    torch::Tensor flat;
    c10::intrusive_ptr<c10d::Work> work;
  };

  void Arrived(size_t i) {
    if (!sync_ && m_ != "ignore_no_sync" && m_ != "forged_no_sync") return;
    if (!arrived_[i]) ++groups_[group_of_[i]].arrived;
    arrived_[i] = true;
    if (m_ == "junk_overlap") {
      // Bytes on the wire while backward runs, as many as the gradient's, that carry nothing.
      std::vector<torch::Tensor> junk = {torch::zeros_like(params_[i].tensor)};
      junk_.push_back(pg_->allreduce(junk));
    }
    if (m_ == "launch_at_finish" || m_ == "forged_overlap" || m_ == "junk_overlap") return;
    if (m_ == "fill_order") {
      // Each bucket the moment it is complete, whatever the buckets before it have done.
      Group& g = groups_[group_of_[i]];
      if (g.arrived == g.members.size()) Launch(group_of_[i]);
      return;
    }
    // ignore_no_sync: a no_sync backward launches too; the synchronised one starts over.
    while (next_ < groups_.size() && groups_[next_].arrived == groups_[next_].members.size()) Launch(next_++);
    if (!sync_ && next_ == groups_.size()) {
      for (auto& g : groups_) g.work->wait();
      Clear();
    }
  }

  void Launch(size_t k) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> pieces;
    for (size_t i : groups_[k].members) {
      const torch::Tensor& grad = params_[i].tensor.grad();
      if (grad.defined()) pieces.push_back(m_ == "honest_slow" ? grad.reshape(-1).clone() : grad.reshape(-1));
    }
    groups_[k].flat = pieces.empty() ? torch::zeros({1}) : torch::cat(pieces);
    std::vector<torch::Tensor> t = {groups_[k].flat};
    groups_[k].work = pg_->allreduce(t);
    if (m_ == "wait_in_hook") groups_[k].work->wait();
  }

  void Clear() {
    for (auto& g : groups_) {
      g.arrived = 0;
      g.work.reset();
    }
    arrived_.assign(params_.size(), false);
    next_ = 0;
  }

  std::vector<NamedParameter> params_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  std::string m_;
  std::vector<Group> groups_;
  std::vector<size_t> group_of_;
  std::vector<bool> arrived_;
  size_t next_ = 0;
  bool sync_ = true;
  std::vector<autograd::GradReadyHook> hooks_;
  std::vector<c10::intrusive_ptr<c10d::Work>> junk_;
};

}  // namespace

std::string& DdpMutation() {
  static std::string m = "none";
  return m;
}

std::unique_ptr<DataParallel> MakePerParameterDdp(std::vector<NamedParameter> params,
                                                  c10::intrusive_ptr<c10d::ProcessGroup> pg) {
  return std::make_unique<MutantDdp>(std::move(params), std::move(pg), 0, DdpMutation());
}

std::unique_ptr<DataParallel> MakeBucketedDdp(std::vector<NamedParameter> params,
                                              c10::intrusive_ptr<c10d::ProcessGroup> pg, int64_t bucket_cap_bytes) {
  return std::make_unique<MutantDdp>(std::move(params), std::move(pg), bucket_cap_bytes,
                                     DdpMutation());
}

}  // namespace distlm::task3
