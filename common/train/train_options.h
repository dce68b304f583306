// The run_glue command line every stage shares, and what it resolves to.
//
// Flag names mirror HuggingFace's run_glue.py (pytorch_transformers 1.2) so students and
// instructors can move between the Python assignment and this one. Defaults differ where a
// no-flag run must do something useful: --do_train, --do_eval and --do_lower_case default to
// true, --data_dir and --model_name_or_path to the built-in sample and tiny model, and
// --output_dir to a fresh timestamped folder.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/train/bert_adamw.h"

namespace distlm::train {

struct TrainOptions {
  std::string model_type = "bert";
  std::string model_name_or_path;  // "" = a tiny random BERT over the built-in vocabulary
  std::string task_name = "rte";
  std::string data_dir;            // "" = the built-in RTE-style sample
  std::string output_dir;          // "" = ./distlm_output/<stage>/<timestamp>
  bool do_train = true;
  bool do_eval = true;
  bool do_lower_case = true;
  bool overwrite_output_dir = false;
  bool pad_to_max_length = true;
  int64_t max_seq_length = 128;
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_epsilon = 1e-8;
  // bert_adamw: pytorch_transformers 1.2's AdamW (the 2019 reference); adamw_torch:
  // torch.optim.AdamW, today's transformers Trainer default. See common/train/bert_adamw.h.
  std::string optim = "bert_adamw";
  double max_grad_norm = 1.0;
  double num_train_epochs = 3.0;
  int64_t max_steps = -1;
  int64_t warmup_steps = 0;
  int64_t gradient_accumulation_steps = 1;
  std::string device = "cpu";  // cpu | cuda (cuda:LOCAL_RANK); see common/runtime/device.h
  uint64_t seed = 42;
  int64_t logging_steps = 50;
  bool plots = true;  // OUTPUT_DIR/plots/*.png at the end (common/train/plots.h)
  // --report_to=tensorboard (or all): TensorBoard event files as the run goes, in
  // logging_dir (--logging_dir; empty: OUTPUT_DIR/runs/<the run's name>, transformers' layout).
  bool tensorboard = false;
  std::string logging_dir;
  // --trace: updates trace_first..trace_last (1-based) as a timeline per rank,
  // OUTPUT_DIR/trace/rank-R-of-N.json (common/trace/recorder.h); --trace_steps=A:B.
  bool trace = false;
  int64_t trace_first = 2, trace_last = 4;
  // Every rank writes its final model too (OUTPUT_DIR/rank_R/; rank 0's is OUTPUT_DIR's own):
  // after a correct synchronisation they are the same, bit for bit (the autograder checks).
  bool save_every_rank = false;
  // Mixed precision (common/train/mixed_precision.h): autocast forward passes, float32 weights.
  bool bf16 = false;
  bool fp16 = false;  // with dynamic loss scaling
  int64_t save_steps = 0;
  // Model overrides for experiments and tests: < 0 keeps the checkpoint's value.
  double hidden_dropout_prob = -1;
  double attention_probs_dropout_prob = -1;

  nlohmann::json ToJson() const;
};

// Reads the flags and checks them; a bad value is a UserError naming the flag.
TrainOptions TrainOptionsFromFlags();

// The optimizer settings the options ask for (lr, eps, weight decay, --optim).
AdamWOptions AdamWOptionsFor(const TrainOptions& options);

// The checks alone (for tests).
void ValidateTrainOptions(const TrainOptions& options);

}  // namespace distlm::train
