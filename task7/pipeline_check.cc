#include "task7/pipeline_check.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "common/bert/bert_config.h"
#include "common/bert/bert_model.h"
#include "task7/pipeline_schedule.h"
#include "task7/pipeline_stage.h"
#include "task7/pipeline_watch.h"

namespace distlm::task7 {
namespace {

using testing::Fail;
using testing::RankEnv;

constexpr int64_t kVocab = 100, kBatch = 8, kSeq = 12;

bert::BertForSequenceClassification MakeModel() {
  bert::BertConfig c = bert::TinyBertConfig(kVocab);
  c.num_hidden_layers = 4;  // so that 4 stages hold a layer each
  c.hidden_dropout_prob = 0;
  c.attention_probs_dropout_prob = 0;
  torch::manual_seed(11);
  bert::BertForSequenceClassification m(c);
  m->train();
  return m;
}

PipelineBatch MakeBatch() {
  torch::manual_seed(3);
  PipelineBatch b;
  b.input_ids = torch::randint(1, kVocab, {kBatch, kSeq}, torch::kLong);
  b.token_type_ids = (torch::arange(kSeq).unsqueeze(0) >= kSeq / 2).to(torch::kLong).expand({kBatch, kSeq}).contiguous();
  b.attention_mask = torch::ones({kBatch, kSeq}, torch::kLong);
  b.attention_mask.narrow(1, kSeq - 3, 3).select(0, 5).zero_();  // one example padded
  b.labels = torch::randint(0, 2, {kBatch}, torch::kLong);
  return b;
}

double Relative(const torch::Tensor& a, const torch::Tensor& b) {
  const double scale = std::max(b.abs().max().item<double>(), 1e-12);
  return (a - b).abs().max().item<double>() / scale;
}

std::string Percent(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g %%", 100 * r);
  return buf;
}

std::string TimingsToString(const std::vector<StepTiming>& t) {
  std::vector<PipelineStep> steps;
  for (const auto& s : t) steps.push_back(s.step);
  return StepsToString(steps);
}

}  // namespace

void CheckPipeline(RankEnv& env, PipelineSchedule schedule, int micro_batches, const PipelineLoop& loop) {
  const std::string name = std::string(schedule == PipelineSchedule::kAllForwardAllBackward ? "all-forward-all-backward"
                                                                                            : "1F1B") +
                           " with M = " + std::to_string(micro_batches);
  const PipelineBatch batch = MakeBatch();
  bert::BertForSequenceClassification whole = MakeModel();
  torch::Tensor want_loss = whole->forward(batch.input_ids, batch.token_type_ids, batch.attention_mask, batch.labels).loss;
  want_loss.backward();

  bert::BertForSequenceClassification model = MakeModel();
  std::vector<StepTiming> timings;
  PipelineWatch watch;
  const PipelineStage stage = watch.Watch(MakeBertPipelineStage(model, batch, micro_batches, env.pg, &timings));
  const std::vector<PipelineStep> steps = StageSteps(schedule, env.world, env.rank, micro_batches);
  const double loss = loop(stage, steps);

  if (TimingsToString(timings) != StepsToString(steps)) {
    Fail(name + ": stage " + std::to_string(env.rank) + " ran " + TimingsToString(timings) +
         " but its schedule is " + StepsToString(steps) + " (run the steps in the order given, each once)");
  }
  if (env.rank == env.world - 1 && Relative(torch::tensor(loss), want_loss.detach()) > 1e-5) {
    Fail(name + ": the last stage's losses add up to " + std::to_string(loss) + ", the whole batch's loss is " +
         std::to_string(want_loss.item<double>()) + " (return the sum of what the last stage's forward returned)");
  }
  const UnitRange mine = StageUnits(4, env.world, env.rank);
  const auto units = model->Units();
  const auto want = whole->named_parameters();
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    for (const std::string& p : units[u].parameters) {
      const torch::Tensor got = model->named_parameters()[p].grad();
      const bool held = u >= mine.first && u <= mine.last;
      if (!held) {
        if (got.defined() && got.abs().max().item<double>() != 0) {
          Fail(name + ": stage " + std::to_string(env.rank) + " has a gradient for " + p + ", which is stage " +
               "another's (" + units[u].name + ")");
        }
        continue;
      }
      if (!got.defined()) {
        Fail(name + ": stage " + std::to_string(env.rank) + "'s " + p + " has no gradient: its backward never ran (" +
             "or the gradient it was given from the next stage did not reach it)");
      }
      // Key biases get a gradient of rounding noise only (adding a constant to a row of scores
      // leaves the softmax unchanged): a floor of 1e-7 absolute keeps noise from failing them.
      const double r = Relative(got, want[p].grad());
      if ((got - want[p].grad()).abs().max().item<double>() > 1e-5 * want[p].grad().abs().max().item<double>() + 1e-7) {
        Fail(name + ": stage " + std::to_string(env.rank) + "'s gradient of " + p + " differs from the whole model's by " +
             Percent(r) + (env.rank < env.world - 1 ? " (the gradient received from the next stage, or the micro-batch it was applied to, is wrong)" : ""));
      }
    }
  }
}

}  // namespace distlm::task7
