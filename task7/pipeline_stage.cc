// Task 7b's given code: BERT cut into blocks of units, and the timings of the loop's steps.
#include "task7/pipeline_stage.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "common/runtime/memory_meter.h"
#include "common/trace/recorder.h"

namespace distlm::task7 {
UnitRange StageUnits(int layers, int stages, int stage) {
  if (stages < 1 || layers < stages || stage < 0 || stage >= stages) {
    throw std::invalid_argument("a pipeline of " + std::to_string(stages) + " stages needs at least as many encoder layers; the model has " +
                                std::to_string(layers));
  }
  // Layers [s L / P, (s + 1) L / P) are units 1 + s L / P ..; the embeddings join stage 0, the head stage P - 1.
  UnitRange r;
  r.first = stage == 0 ? 0 : 1 + stage * layers / stages;
  r.last = stage == stages - 1 ? layers + 1 : (stage + 1) * layers / stages;
  return r;
}

PipelineStage MakePipelineStage(const model::UnitsBatch& batch, UnitRange units, double loss_divisor,
                                const dist::GroupPtr& pg, std::vector<StepTiming>* timings) {
  PipelineStage st;
  st.stage = pg->getRank();
  st.stages = pg->getSize();
  st.micro_batches = batch.parts;
  st.pg = pg;
  st.activation_shape = batch.activation_shape;
  auto record = [timings](bool forward, int m, int64_t start) {
    if (timings != nullptr) {
      timings->push_back({{forward, m}, start, trace::NowNs(), runtime::MemoryMeter::BytesInUse()});
    }
  };
  const bool last = st.stage == st.stages - 1;
  const int index = st.stage;
  const double divisor = batch.parts * loss_divisor;
  st.forward = [=](int m, const torch::Tensor& input) {
    const int64_t start = trace::NowNs();
    if (index > 0 && !(input.defined() && input.requires_grad())) {
      // Backward would give stage s - 1 nothing to send back: say so here, not as a null tensor later.
      throw std::invalid_argument("stage " + std::to_string(index) + ", forward of micro-batch " + std::to_string(m) +
                                  ": the input received from stage " + std::to_string(index - 1) +
                                  (input.defined() ? " does not require its gradient (call requires_grad_(true) on "
                                                     "it before forward, so that backward fills its .grad())"
                                                   : " is undefined (receive it into a tensor of activation_shape)"));
    }
    torch::Tensor out = batch.forward(units.first, units.last, input, m);
    if (last) out = out / divisor;
    record(true, m, start);
    return out;
  };
  st.backward = [=](int m, const torch::Tensor& output, const torch::Tensor& grad_output) {
    const int64_t start = trace::NowNs();
    if (grad_output.defined()) {
      output.backward(grad_output);
    } else {
      output.backward();
    }
    record(false, m, start);
  };
  return st;
}

PipelineStage MakeBertPipelineStage(bert::BertForSequenceClassification& model, const PipelineBatch& batch,
                                    int micro_batches, const dist::GroupPtr& pg, std::vector<StepTiming>* timings) {
  const int64_t b = batch.input_ids.size(0);
  if (micro_batches < 1 || b % micro_batches != 0) {
    throw std::invalid_argument("--micro_batches=" + std::to_string(micro_batches) + " must divide the batch of " +
                                std::to_string(b));
  }
  const UnitRange units =
      StageUnits(static_cast<int>(model->config().num_hidden_layers), pg->getSize(), pg->getRank());
  return MakePipelineStage(
      model->BatchForUnits(batch.input_ids, batch.token_type_ids, batch.attention_mask, batch.labels, micro_batches),
      units, 1.0, pg, timings);
}

StageFigures FiguresOf(const std::vector<StepTiming>& timings, int64_t start_ns, int64_t end_ns) {
  StageFigures f;
  for (const StepTiming& t : timings) {
    const double ms = static_cast<double>(t.end_ns - t.start_ns) / 1e6;
    (t.step.forward ? f.forward_ms : f.backward_ms) += ms;
  }
  f.busy_ms = f.forward_ms + f.backward_ms;
  const double span_ms = static_cast<double>(end_ns - start_ns) / 1e6;
  f.idle_share = span_ms > 0 ? 1 - f.busy_ms / span_ms : 0;
  return f;
}

}  // namespace distlm::task7
