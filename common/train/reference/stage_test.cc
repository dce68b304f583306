// The stage contract (stage.h) as the Trainer keeps it, seen from a stage that records every
// call: the order of the hooks, that the optimizer the stage made is the one stepped,
// snapshotted and resumed (the Trainer has no optimizer of its own), that a stage's own figures
// reach the log line, and that the context is what the Trainer has.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "common/train/bert_adamw.h"
#include "common/train/stage.h"
#include "common/train/trainer.h"

namespace distlm::train {
namespace {

struct Record {
  std::vector<std::string> calls;  // hooks in order (consecutive repeats kept)
  int gathers = 0;
  std::vector<OptimizerState> loads;
  torch::Tensor last_exp_avg;      // the optimizer's first moment of the first parameter, at its last Step
};

// BertAdamW, counted: what the Trainer does with the stage's optimizer.
class CountedAdamW : public BertAdamW {
 public:
  CountedAdamW(NamedParameters params, AdamWOptions options, Record& r) : BertAdamW(std::move(params), options), r_(r) {}
  void Step() override {
    BertAdamW::Step();
    r_.last_exp_avg = state().exp_avg[0].clone();
  }
  OptimizerState GatherState() override {
    ++r_.gathers;
    return BertAdamW::GatherState();
  }
  void LoadState(const OptimizerState& s) override {
    r_.loads.push_back(s);
    BertAdamW::LoadState(s);
  }

 private:
  Record& r_;
};

TrainStep RecordingStep(Record& r) {
  TrainStep step;
  step.backward = [&r](const torch::Tensor& loss) {
    r.calls.push_back("Backward");
    loss.backward();
  };
  step.optimizer_step = [&r](UpdateContext& u) {
    r.calls.push_back("OptimizerStep");
    const double norm = ClipGradNorm(u.parameters, u.max_grad_norm);
    u.optimizer.Step();
    u.optimizer.set_lr(u.schedule.Step());
    u.optimizer.ZeroGrad();
    return norm;
  };
  step.end_of_epoch = [&r](const StageContext& ctx, int64_t epoch) {
    r.calls.push_back("EndOfEpoch " + std::to_string(epoch));
    if (ctx.options().do_eval) ctx.Evaluate(epoch);
  };
  return step;
}

class RecordingStage : public Stage {
 public:
  explicit RecordingStage(Record& r) : Stage("recording", RecordingStep(r)), r_(r) {}
  std::unique_ptr<Optimizer> MakeOptimizer(const StageContext& ctx) override {
    r_.calls.push_back("MakeOptimizer");
    EXPECT_EQ(ctx.stage(), "recording");
    EXPECT_TRUE(ctx.is_main_rank());
    EXPECT_EQ(ctx.named_parameters().size(), ctx.parameters().size());
    EXPECT_FALSE(ctx.named_parameters().empty());
    for (size_t i = 0; i < ctx.parameters().size(); ++i) {
      EXPECT_TRUE(ctx.named_parameters()[i].second.is_same(ctx.parameters()[i])) << "parameter " << i;
    }
    return std::make_unique<CountedAdamW>(ctx.named_parameters(), AdamWOptionsFor(ctx.options()), r_);
  }
  void BeforeTraining(const StageContext& ctx) override {
    r_.calls.push_back("BeforeTraining");
    EXPECT_TRUE(std::filesystem::exists(ctx.output_dir() + "/training_args.json")) << ctx.output_dir();
  }
  void BeforeBackward(const StageContext&, bool will_sync) override {
    r_.calls.push_back(will_sync ? "BeforeBackward sync" : "BeforeBackward no_sync");
  }
  void SyncGradients(const StageContext&) override { r_.calls.push_back("SyncGradients"); }
  UpdateFigures TakeFigures() override {
    UpdateFigures f;
    f.fields["recorded_update"] = ++updates_;
    return f;
  }

 private:
  Record& r_;
  int updates_ = 0;
};

TrainOptions Options(const std::string& dir) {
  TrainOptions o;  // the built-in sample (48 examples) and the tiny random BERT
  o.output_dir = dir;
  o.per_device_train_batch_size = 8;
  o.gradient_accumulation_steps = 2;  // 3 updates per epoch
  o.max_steps = 4;                    // 2 epochs, the second cut short
  o.save_steps = 2;
  o.plots = false;
  o.logging_steps = 1000;
  return o;
}

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::vector<nlohmann::json> LogLines(const std::string& dir) {
  std::ifstream in(dir + "/train_log.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// A recording stage's whole run (training, snapshots, the model saved) over `dir`.
Record RunRecording(const std::string& dir) {
  Record r;
  RecordingStage stage(r);
  Trainer trainer(Options(dir), stage, DistInfo{});
  trainer.Run();
  return r;
}

TEST(StageContract, HooksRunInTheDocumentedOrder) {
  const Record r = RunRecording(FreshDir("order"));

  std::vector<std::string> want = {"MakeOptimizer", "BeforeTraining"};
  const std::vector<std::string> update = {"BeforeBackward no_sync", "Backward", "BeforeBackward sync", "Backward",
                                           "SyncGradients", "OptimizerStep"};
  for (int u = 1; u <= 4; ++u) {
    want.insert(want.end(), update.begin(), update.end());
    if (u == 3) want.push_back("EndOfEpoch 1");
  }
  want.push_back("EndOfEpoch 2");
  EXPECT_EQ(r.calls, want);
}

TEST(StageContract, TheStagesOptimizerIsSnapshottedAndResumed) {
  const std::string dir = FreshDir("resume");
  const Record r = RunRecording(dir);
  // Snapshots after updates 2 and 3 (save_steps, end of epoch 1) and 4 (end of epoch 2): each
  // gathered the stage's optimizer state. Nothing was resumed.
  EXPECT_EQ(r.gathers, 3);
  EXPECT_TRUE(r.loads.empty());
  const torch::Tensor trained = r.last_exp_avg;
  ASSERT_TRUE(trained.defined());
  ASSERT_GT(trained.abs().max().item<double>(), 0.0);

  // A second run over the same folder resumes from the newest snapshot (after update 4): one
  // gather (the tensors the snapshot is read into), then LoadState with them and the step count.
  const Record again = RunRecording(dir);
  EXPECT_EQ(again.gathers, 1);
  ASSERT_EQ(again.loads.size(), 1u);
  EXPECT_EQ(again.loads[0].step, 4);
  EXPECT_TRUE(torch::equal(again.loads[0].exp_avg[0], trained))
      << "the resumed first moment differs from the one the first run ended with";
}

TEST(StageContract, TheStagesFiguresReachTheLogLine) {
  const std::string dir = FreshDir("figures");
  RunRecording(dir);
  const std::vector<nlohmann::json> lines = LogLines(dir);
  ASSERT_EQ(lines.size(), 4u);
  for (size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].value("recorded_update", -1), static_cast<int>(i) + 1) << lines[i].dump();
    // No communication reported: no comm_* fields, and no compute_time_ms split.
    EXPECT_FALSE(lines[i].contains("compute_time_ms")) << lines[i].dump();
    EXPECT_FALSE(lines[i].contains("comm_time_ms")) << lines[i].dump();
  }
}

// A stage that wraps the model's units (what task 6 will do): records every hook and, through an
// autograd hook on each unit's output, the moment each unit's backward is about to start.
class UnitRecordingStage : public RecordingStage {
 public:
  UnitRecordingStage(Record& r, std::vector<std::string>& events) : RecordingStage(r), events_(events) {
    hooks_.before_forward = [this](int u) { events_.push_back("before " + std::to_string(u)); };
    hooks_.after_forward = [this](int u, torch::Tensor out) {
      events_.push_back("after " + std::to_string(u));
      if (out.requires_grad()) {
        out.register_hook([this, u](torch::Tensor grad) {
          events_.push_back("grad " + std::to_string(u));
          return grad;
        });
      }
      return out;
    };
  }
  void BeforeTraining(const StageContext& ctx) override {
    RecordingStage::BeforeTraining(ctx);
    units = ctx.units();
    for (const auto& p : ctx.named_parameters()) registered.push_back(p.first);
    ctx.SetUnitHooks(&hooks_);
  }
  std::vector<model::Unit> units;
  std::vector<std::string> registered;

 private:
  std::vector<std::string>& events_;
  model::UnitHooks hooks_;
};

TEST(StageContract, AStageCanWrapTheModelsUnits) {
  std::vector<std::string> events;
  Record r;
  UnitRecordingStage stage(r, events);
  const std::string dir = FreshDir("units");
  Trainer trainer(Options(dir), stage, DistInfo{});
  trainer.Run();

  // The tiny BERT's units: the embeddings, its 2 layers, the head; every parameter in exactly
  // one, in registration order.
  std::vector<std::string> names, in_units;
  for (const auto& unit : stage.units) {
    names.push_back(unit.name);
    in_units.insert(in_units.end(), unit.parameters.begin(), unit.parameters.end());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"embeddings", "layer 0", "layer 1", "head"}));
  EXPECT_EQ(in_units, stage.registered);

  // Every forward runs the 4 units in order between their hooks; every backward reaches each
  // unit's output from the head down, before that unit's own backward.
  const std::vector<std::string> forward = {"before 0", "after 0", "before 1", "after 1",
                                            "before 2", "after 2", "before 3", "after 3"};
  const std::vector<std::string> backward = {"grad 3", "grad 2", "grad 1", "grad 0"};
  size_t i = 0, forwards = 0, backwards = 0;
  while (i < events.size()) {
    ASSERT_LE(i + 8, events.size()) << "a forward cut short at event " << i;
    ASSERT_EQ(std::vector<std::string>(events.begin() + i, events.begin() + i + 8), forward) << "forward " << forwards;
    i += 8;
    ++forwards;
    if (i < events.size() && events[i] == "grad 3") {
      ASSERT_LE(i + 4, events.size());
      ASSERT_EQ(std::vector<std::string>(events.begin() + i, events.begin() + i + 4), backward) << "backward " << backwards;
      i += 4;
      ++backwards;
    }
  }
  // 4 updates of 2 micro-batches: 8 forwards with a backward; the evaluations' forwards
  // (without) wrapped as well.
  EXPECT_EQ(backwards, 8u);
  EXPECT_GT(forwards, backwards) << "the evaluations ran no wrapped forward";

  // The hooks hand back each output unchanged: the losses are those of a run without hooks.
  const std::string plain = FreshDir("units_plain");
  RunRecording(plain);
  const std::vector<nlohmann::json> a = LogLines(dir), b = LogLines(plain);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k]["loss"], b[k]["loss"]) << "update " << k + 1;
}

TEST(StageContract, AStageWithoutAnOptimizerIsALogicError) {
  Record r;
  class NoOptimizer : public RecordingStage {
   public:
    using RecordingStage::RecordingStage;
    std::unique_ptr<Optimizer> MakeOptimizer(const StageContext&) override { return nullptr; }
  } stage(r);
  Trainer trainer(Options(FreshDir("none")), stage, DistInfo{});
  EXPECT_THROW(trainer.Run(), std::logic_error);
}

}  // namespace
}  // namespace distlm::train
