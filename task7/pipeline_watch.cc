#include "task7/pipeline_watch.h"

#include <chrono>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include "common/dist/forwarding_group.h"
#include "common/testing/rank_test.h"

namespace distlm::task7 {

// One point-to-point operation the loop posted.
struct Op {
  bool send = true;
  int peer = 0;
  int tag = 0;
  std::string what;  // "micro-batch 1's activation", or "a tensor" when not known
  bool done = false;
};

struct PipelineWatch::State {
  int stage = 0;
  double stuck_after_s = 10;
  std::mutex mu;
  std::vector<Op> ops;
  // What each tensor the steps made or were handed is: by data pointer, its micro-batch and kind.
  // Each entry holds its tensor, so that no other tensor takes its address while it is known.
  struct Known {
    int micro_batch;
    std::string kind;  // "activation" or "gradient"
    torch::Tensor tensor;
  };
  struct Received {
    int tag;
    torch::Tensor tensor;
  };
  std::map<const void*, Known> produced;   // forward's outputs, backward's input gradients
  std::map<const void*, Received> received;  // recv buffers, with the tag they were received with
  std::map<int, torch::Tensor> inputs;    // each micro-batch's input, for its gradient after backward

  std::string Describe(const Op& op) const {
    return std::string(op.send ? "send of " : "recv of ") + op.what + (op.send ? " to" : " from") + " stage " +
           std::to_string(op.peer) + " (tag " + std::to_string(op.tag) + ")";
  }
  std::string Pending(size_t except) const {
    std::string out;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (i == except || ops[i].done) continue;
      out += (out.empty() ? "" : ", ") + Describe(ops[i]);
    }
    return out.empty() ? "none" : out;
  }
};

namespace {

using State = PipelineWatch::State;

std::string StageName(int s) { return "stage " + std::to_string(s); }

class WatchedWork : public dist::ForwardingWork {
 public:
  WatchedWork(c10::intrusive_ptr<c10d::Work> inner, std::shared_ptr<State> state, size_t op)
      : ForwardingWork(std::move(inner)), state_(std::move(state)), op_(op) {}

  bool wait(std::chrono::milliseconds timeout) override {
    std::string described;
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      described = state_->Describe(state_->ops[op_]);
      if (waited_) {
        testing::Fail(StageName(state_->stage) + " waited twice on its " + described +
                      ": a Work completes once, and waiting it again waits for an operation that was never posted");
      }
    }
    waited_ = true;
    const auto limit = std::chrono::milliseconds(static_cast<int64_t>(state_->stuck_after_s * 1000));
    const auto wait_for = timeout == kNoTimeout || timeout > limit ? limit : timeout;
    // Gloo's works throw when the time is up (and count as completed then, with an error).
    bool ok = false;
    try {
      ok = inner_->wait(wait_for);
    } catch (const std::exception&) {
      ok = false;
    }
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!ok) {
      const Op& op = state_->ops[op_];
      testing::Fail(StageName(state_->stage) + " waits on its " + described + ", which did not complete in " +
                    std::to_string(static_cast<int>(state_->stuck_after_s)) + " s; its other pending operations: " +
                    state_->Pending(op_) +
                    (op.send ? ". A send completes when its peer posts the matching recv: a stage that waits a send "
                               "before its peer can post that recv (the peer waiting on a send of its own) deadlocks"
                             : ". A recv completes when its peer sends the matching message: check that " +
                                   StageName(op.peer) + " sends it, with this tag, before waiting on anything that "
                                   "needs this stage"));
    }
    state_->ops[op_].done = true;
    return true;
  }

 private:
  std::shared_ptr<State> state_;
  size_t op_;
  bool waited_ = false;
};

class WatchedGroup : public dist::ForwardingGroup {
 public:
  WatchedGroup(dist::GroupPtr inner, std::shared_ptr<State> state)
      : ForwardingGroup(std::move(inner)), state_(std::move(state)) {}

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    Op op{true, dst, tag, "a tensor"};
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      auto it = tensors.empty() ? state_->produced.end() : state_->produced.find(tensors[0].data_ptr());
      if (it != state_->produced.end()) {
        op.what = "micro-batch " + std::to_string(it->second.micro_batch) + "'s " + it->second.kind;
        if (tag != it->second.micro_batch) {
          testing::Fail(StageName(state_->stage) + " sent " + op.what + " with tag " + std::to_string(tag) +
                        ": a micro-batch's messages carry its number as their tag, so that one cannot be taken for "
                        "another's");
        }
      }
    }
    auto work = inner_->send(tensors, dst, tag);
    return Record(std::move(op), std::move(work));
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    Op op{false, src, tag,
          "micro-batch " + std::to_string(tag) + "'s " + (src < state_->stage ? "activation" : "gradient")};
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      if (!tensors.empty()) state_->received[tensors[0].data_ptr()] = {tag, tensors[0]};
    }
    auto work = inner_->recv(tensors, src, tag);
    return Record(std::move(op), std::move(work));
  }

 private:
  c10::intrusive_ptr<c10d::Work> Record(Op op, c10::intrusive_ptr<c10d::Work> work) {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->ops.push_back(std::move(op));
    return c10::make_intrusive<WatchedWork>(std::move(work), state_, state_->ops.size() - 1);
  }

  std::shared_ptr<State> state_;
};

// A step handed `t` for micro-batch m: if t was received, its tag must be m.
void CheckHanded(State& state, const torch::Tensor& t, int m, const char* step, const char* kind) {
  if (!t.defined()) return;
  std::lock_guard<std::mutex> lock(state.mu);
  auto it = state.received.find(t.data_ptr());
  if (it == state.received.end() || it->second.tag == m) return;
  testing::Fail(StageName(state.stage) + " ran " + step + std::to_string(m) + " on " + kind + " received with tag " +
                std::to_string(it->second.tag) + ": a micro-batch's messages carry its number as their tag, so that " +
                "one cannot be taken for another's");
}

}  // namespace

PipelineWatch::PipelineWatch(double stuck_after_s) : state_(std::make_shared<State>()) {
  state_->stuck_after_s = stuck_after_s;
}

PipelineWatch::~PipelineWatch() = default;

PipelineStage PipelineWatch::Watch(PipelineStage stage) {
  state_->stage = stage.stage;
  std::shared_ptr<State> state = state_;
  stage.pg = dist::AsGroup(c10::make_intrusive<WatchedGroup>(stage.pg, state), stage.pg->getBackendName());
  auto forward = stage.forward;
  stage.forward = [state, forward](int m, const torch::Tensor& input) {
    CheckHanded(*state, input, m, "F", "an activation");
    torch::Tensor out = forward(m, input);
    std::lock_guard<std::mutex> lock(state->mu);
    if (out.defined()) state->produced[out.data_ptr()] = {m, "activation", out};
    state->inputs[m] = input;
    return out;
  };
  auto backward = stage.backward;
  stage.backward = [state, backward](int m, const torch::Tensor& output, const torch::Tensor& grad_output) {
    CheckHanded(*state, grad_output, m, "B", "a gradient");
    backward(m, output, grad_output);
    std::lock_guard<std::mutex> lock(state->mu);
    auto it = state->inputs.find(m);
    if (it != state->inputs.end() && it->second.defined() && it->second.grad().defined()) {
      state->produced[it->second.grad().data_ptr()] = {m, "gradient", it->second.grad()};
    }
    if (it != state->inputs.end()) state->inputs.erase(it);
  };
  return stage;
}

}  // namespace distlm::task7
