// Task 7b's benchmark: one update of a BERT cut into P stages (one per rank, P = the world
// size), for each schedule and micro-batch count asked for, timed step by step. Prints, per
// (schedule, M), the update's time (the slowest stage's, from a barrier), the bubble measured
// (each stage's share of that time spent neither in forward nor in backward, averaged over the
// stages) against (P - 1) / (M + P - 1), and stage 0's memory above what it held before the
// update (runtime::MemoryMeter): held, the most in use at the end of a step (the micro-batches'
// activations it keeps between their forward and backward), and peak, the most at any moment
// (held plus a step's temporaries: the word embedding's dense gradient, 4 V H bytes, dominates).
//
//   bazel build //task7:pipeline_bench //tools:launch
//   bazel-bin/tools/launch --nproc_per_node=4 -- bazel-bin/task7/pipeline_bench --layers=12 --hidden=768
//       --heads=12 --intermediate=3072 --batch=32 --seq=128 --micro_batches=4,8   (one command line)
//
// Random weights and tokens: the figures are time and memory, not accuracy.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <torch/optim/adamw.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/bert/bert_config.h"
#include "common/bert/bert_model.h"
#include "common/runtime/errors.h"
#include "common/runtime/memory_meter.h"
#include "common/trace/recorder.h"
#include "common/runtime/runtime_flags.h"
#include "common/train/distributed.h"
#include "task7/pipeline_parallel.h"
#include "task7/pipeline_schedule.h"
#include "task7/pipeline_stage.h"

ABSL_FLAG(int, layers, 12, "encoder layers (at least the number of stages)");
ABSL_FLAG(int, hidden, 768, "hidden size");
ABSL_FLAG(int, heads, 12, "attention heads");
ABSL_FLAG(int, intermediate, 3072, "intermediate size");
ABSL_FLAG(int, vocab, 28996, "vocabulary size");
ABSL_FLAG(int, batch, 32, "examples per update (M must divide it)");
ABSL_FLAG(int, seq, 128, "tokens per example");
ABSL_FLAG(std::string, micro_batches, "4,8", "micro-batch counts M, comma-separated");
ABSL_FLAG(std::string, schedules, "gpipe,1f1b", "gpipe (all forward, all backward) and/or 1f1b");
ABSL_FLAG(int, updates, 3, "timed updates per (schedule, M), after one untimed");

namespace distlm::task7 {
namespace {

std::vector<int> ParseCounts(const std::string& text) {
  std::vector<int> out;
  for (const auto& piece : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(piece, &v) || v < 1) throw UserError("--micro_batches: '" + std::string(piece) + "' is not a count >= 1");
    out.push_back(v);
  }
  return out;
}

double Reduce(const dist::GroupPtr& pg, double v, c10d::ReduceOp op) {
  std::vector<torch::Tensor> t = {torch::tensor({v}, torch::kDouble)};
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  pg->allreduce(t, o)->wait();
  return t[0].item<double>();
}

void Barrier(const dist::GroupPtr& pg) { Reduce(pg, 0, c10d::ReduceOp::SUM); }

int Main() {
  runtime::MemoryMeter::Install();
  runtime::InitRuntimeFromFlags();
  bert::BertConfig c;
  c.num_hidden_layers = absl::GetFlag(FLAGS_layers);
  c.hidden_size = absl::GetFlag(FLAGS_hidden);
  c.num_attention_heads = absl::GetFlag(FLAGS_heads);
  c.intermediate_size = absl::GetFlag(FLAGS_intermediate);
  c.vocab_size = absl::GetFlag(FLAGS_vocab);
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = 0;
  c.Validate("the flags");
  const int64_t batch = absl::GetFlag(FLAGS_batch), seq = absl::GetFlag(FLAGS_seq);
  const std::vector<int> counts = ParseCounts(absl::GetFlag(FLAGS_micro_batches));
  for (int m : counts) {
    if (batch % m != 0) throw UserError("--micro_batches=" + std::to_string(m) + " does not divide --batch=" + std::to_string(batch));
  }
  std::vector<std::pair<std::string, PipelineSchedule>> schedules;
  for (const auto& s : absl::StrSplit(absl::GetFlag(FLAGS_schedules), ',', absl::SkipEmpty())) {
    if (s == "gpipe") {
      schedules.push_back({"all-forward-all-backward", PipelineSchedule::kAllForwardAllBackward});
    } else if (s == "1f1b") {
      schedules.push_back({"1F1B", PipelineSchedule::kOneForwardOneBackward});
    } else {
      throw UserError("--schedules: '" + std::string(s) + "' is neither gpipe nor 1f1b");
    }
  }
  const int updates = absl::GetFlag(FLAGS_updates);
  if (updates < 1) throw UserError("--updates must be at least 1");
  // The flags are checked before the ranks meet; the world size only after.
  const train::DistInfo dist = train::InitDistributedFromFlags();
  if (dist.world_size < 2 || !dist.pg) {
    throw UserError("the pipeline needs 2 or more ranks, one per stage: start it with tools/launch --nproc_per_node=P");
  }
  const int stages = dist.world_size, stage = dist.rank;
  if (c.num_hidden_layers < stages) {
    throw UserError("--layers=" + std::to_string(c.num_hidden_layers) + " is fewer than the " + std::to_string(stages) +
                    " stages (ranks): a stage holds at least one layer");
  }

  torch::manual_seed(1);
  bert::BertForSequenceClassification model(c);
  model->train();
  PipelineBatch b;
  b.input_ids = torch::randint(1, c.vocab_size, {batch, seq}, torch::kLong);
  b.token_type_ids = torch::zeros({batch, seq}, torch::kLong);
  b.attention_mask = torch::ones({batch, seq}, torch::kLong);
  b.labels = torch::randint(0, c.num_labels, {batch}, torch::kLong);
  // What each stage's block holds: its parameters (a stage trains only these: with their
  // gradients and AdamW's two moments, 4x this between updates).
  const UnitRange mine = StageUnits(static_cast<int>(c.num_hidden_layers), stages, stage);
  const auto units = model->Units();
  double param_bytes = 0;
  const auto named = model->named_parameters();
  for (int u = mine.first; u <= mine.last; ++u) {
    for (const auto& name : units[u].parameters) param_bytes += static_cast<double>(named[name].nbytes());
  }
  // The update ends with AdamW on the stage's own parameters (what the stage trains).
  std::vector<torch::Tensor> own;
  for (int u = mine.first; u <= mine.last; ++u) {
    for (const auto& name : units[u].parameters) own.push_back(named[name]);
  }
  torch::optim::AdamW adamw(own, torch::optim::AdamWOptions(1e-5));
  const double most_params = Reduce(dist.pg, param_bytes, c10d::ReduceOp::MAX) / (1 << 20);
  const double stage0_params = Reduce(dist.pg, stage == 0 ? param_bytes : 0, c10d::ReduceOp::SUM) / (1 << 20);
  if (stage == 0) {
    std::printf("parameters per stage: stage 0 %.1f MiB, the most %.1f MiB\n", stage0_params, most_params);
  }
  if (stage == 0) {
    std::printf("pipeline of %d stages: BERT of %lld layers, hidden %lld, batch %lld x %lld tokens, %d timed update(s) each\n",
                stages, static_cast<long long>(c.num_hidden_layers), static_cast<long long>(c.hidden_size),
                static_cast<long long>(batch), static_cast<long long>(seq), updates);
    std::printf("%-26s %4s %10s %9s %14s %9s %16s %16s %14s\n", "schedule", "M", "update ms", "AdamW ms", "bubble (mean)", "formula",
                "stage 0 held MiB", "stage 0 peak MiB", "sent/stage MiB");
  }
  for (const auto& [name, schedule] : schedules) {
    for (int m : counts) {
      double update_ms = 0, adamw_ms = 0, bubble = 0, held0 = 0, peak0 = 0;
      for (int u = 0; u <= updates; ++u) {
        for (auto& p : model->parameters()) {
          if (p.grad().defined()) p.grad().zero_();
        }
        std::vector<StepTiming> timings;
        const PipelineStage st = MakeBertPipelineStage(model, b, m, dist.pg, &timings);
        Barrier(dist.pg);
        runtime::MemoryMeter::ResetPeak();
        const int64_t before = runtime::MemoryMeter::BytesInUse();
        const int64_t start = trace::NowNs();
        RunPipelineSteps(st, StageSteps(schedule, stages, stage, m));
        const int64_t end = trace::NowNs();
        adamw.step();
        const double step_ms =
            Reduce(dist.pg, static_cast<double>(trace::NowNs() - end) / 1e6, c10d::ReduceOp::MAX);
        const double peak = static_cast<double>(runtime::MemoryMeter::PeakBytes() - before) / (1 << 20);
        int64_t held = 0;
        for (const StepTiming& t : timings) held = std::max(held, t.bytes_in_use - before);
        const StageFigures f = FiguresOf(timings, start, end);
        const double span = Reduce(dist.pg, static_cast<double>(end - start) / 1e6, c10d::ReduceOp::MAX);
        const double idle = Reduce(dist.pg, 1 - f.busy_ms / span, c10d::ReduceOp::SUM) / stages;
        if (u == 0) continue;  // the first: allocations, caches
        update_ms += (span + step_ms) / updates;
        adamw_ms += step_ms / updates;
        bubble += idle / updates;
        held0 = std::max(held0, static_cast<double>(held) / (1 << 20));
        peak0 = std::max(peak0, peak);
      }
      if (stage == 0) {
        const double formula = static_cast<double>(stages - 1) / (m + stages - 1);
        // A middle stage sends every micro-batch's activation forward and its gradient back.
        const double sent = 2.0 * batch * seq * c.hidden_size * 4 / (1 << 20);
        std::printf("%-26s %4d %10.1f %9.1f %13.1f%% %8.1f%% %16.1f %16.1f %14.1f\n", name.c_str(), m, update_ms, adamw_ms, 100 * bubble,
                    100 * formula, held0, peak0, sent);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace distlm::task7

int main(int argc, char** argv) {
  return distlm::RunMain([&] {
    absl::ParseCommandLine(argc, argv);
    return distlm::task7::Main();
  });
}
