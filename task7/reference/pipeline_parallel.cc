// Task 7b reference: one stage's loop over its steps, sending and receiving as it goes.
#include <map>
#include <vector>

#include "task7/pipeline_parallel.h"

namespace distlm::task7 {

double RunPipelineSteps(const PipelineStage& stage, const std::vector<PipelineStep>& steps) {
  const bool first = stage.stage == 0, last = stage.stage == stage.stages - 1;
  const auto options = torch::TensorOptions().dtype(stage.dtype);
  struct Held {
    torch::Tensor input, output;
  };
  std::map<int, Held> held;  // the micro-batches between their forward and their backward
  std::vector<c10::intrusive_ptr<c10d::Work>> sends;
  std::vector<std::vector<torch::Tensor>> sent;  // what the sends read, alive until they complete
  auto send = [&](const torch::Tensor& t, int to, int m) {
    sent.push_back({t.detach().contiguous()});
    sends.push_back(stage.pg->send(sent.back(), to, m));
  };
  auto receive = [&](int from, int m) {
    std::vector<torch::Tensor> buffer = {torch::empty(stage.activation_shape, options)};
    stage.pg->recv(buffer, from, m)->wait();
    return buffer[0];
  };
  double loss = 0;
  for (const PipelineStep& step : steps) {
    const int m = step.micro_batch;
    if (step.forward) {
      Held h;
      if (!first) h.input = receive(stage.stage - 1, m).requires_grad_(true);
      h.output = stage.forward(m, h.input);
      if (last) {
        loss += h.output.item<double>();
      } else {
        send(h.output, stage.stage + 1, m);
      }
      held[m] = std::move(h);
    } else {
      Held h = std::move(held.at(m));
      held.erase(m);
      stage.backward(m, h.output, last ? torch::Tensor() : receive(stage.stage + 1, m));
      if (!first) send(h.input.grad(), stage.stage - 1, m);
    }
  }
  for (auto& w : sends) w->wait();
  return loss;
}

}  // namespace distlm::task7
