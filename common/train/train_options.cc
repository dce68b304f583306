#include "common/train/train_options.h"

#include <cstdio>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "common/runtime/errors.h"

ABSL_FLAG(std::string, model_type, "bert",
          "model family: bert (GLUE tasks) or vit (--task_name=cifar10: a Vision Transformer on CIFAR-10)");
ABSL_FLAG(std::string, model_name_or_path, "",
          "HuggingFace-layout model folder (config.json, model.safetensors, vocab.txt); empty: a tiny "
          "random BERT over the built-in vocabulary");
ABSL_FLAG(std::string, task_name, "rte", "GLUE task (rte, ...), or cifar10 with --model_type=vit");
ABSL_FLAG(std::string, data_dir, "", "folder with the task's train.tsv/dev.tsv; empty: the built-in sample");
ABSL_FLAG(std::string, output_dir, "",
          "where logs, evaluation results and the model go; empty: ./distlm_output/<stage>/<time>");
ABSL_FLAG(bool, do_train, true, "train");
ABSL_FLAG(bool, do_eval, true, "evaluate on the dev split after every epoch");
ABSL_FLAG(bool, do_lower_case, true, "lower-case and strip accents (uncased vocabularies)");
ABSL_FLAG(bool, overwrite_output_dir, false, "start afresh in a non-empty --output_dir");
ABSL_FLAG(bool, pad_to_max_length, true,
          "pad every batch to --max_seq_length; false pads each batch to its longest row");
ABSL_FLAG(int64_t, max_seq_length, 128, "tokens per example after [CLS]/[SEP] and truncation");
ABSL_FLAG(int64_t, per_gpu_train_batch_size, 8, "training batch size per rank");
ABSL_FLAG(int64_t, per_device_train_batch_size, -1, "alias of --per_gpu_train_batch_size");
ABSL_FLAG(int64_t, per_gpu_eval_batch_size, 8, "evaluation batch size");
ABSL_FLAG(double, learning_rate, 5e-5, "peak learning rate of AdamW");
ABSL_FLAG(double, weight_decay, 0.0, "decoupled weight decay (not on biases and LayerNorm weights)");
ABSL_FLAG(double, adam_epsilon, 1e-8, "AdamW epsilon");
ABSL_FLAG(std::string, optim, "bert_adamw",
          "bert_adamw (pytorch_transformers 1.2's AdamW: eps inside the bias correction) or adamw_torch "
          "(torch.optim.AdamW, today's transformers Trainer default)");
ABSL_FLAG(double, max_grad_norm, 1.0, "clip gradients to this global L2 norm (<= 0: no clipping)");
ABSL_FLAG(double, num_train_epochs, 3.0, "epochs (whole epochs; --max_steps wins when > 0)");
ABSL_FLAG(int64_t, max_steps, -1, "exactly this many optimizer updates when > 0");
ABSL_FLAG(int64_t, warmup_steps, 0, "linear warmup updates");
ABSL_FLAG(int64_t, gradient_accumulation_steps, 1, "micro-batches per optimizer update");
ABSL_FLAG(std::string, device, "cpu",
          "cpu, cuda (cuda:LOCAL_RANK: one GPU per rank) or cuda:N (GPU N for every rank of the "
          "host; gloo or mpi): where model, batches, loss and optimizer state live");
ABSL_FLAG(uint64_t, seed, 42, "random seed (model init, shuffling, dropout)");
ABSL_FLAG(int64_t, logging_steps, 50, "print a progress line every this many updates");
ABSL_FLAG(bool, plots, true, "write PNG plots of the run into OUTPUT_DIR/plots when it ends (needs gnuplot)");
ABSL_FLAG(std::string, report_to, "none",
          "tensorboard (or all, the same here) writes every logged number of each update and evaluation, and the "
          "run's arguments as text, as TensorBoard event files while the run goes, into --logging_dir; none: not "
          "(transformers' flag; distlm has no other integration, nothing goes over the network)");
ABSL_FLAG(std::string, logging_dir, "",
          "where --report_to=tensorboard writes (default OUTPUT_DIR/runs/STAGE_NRANKS_BACKEND_PRECISION_bBATCH_lrLR, "
          "so that tensorboard --logdir over several output folders tells the runs apart)");
ABSL_FLAG(bool, trace, false,
          "write a timeline of each rank (its phases, each collective from launch to completion, memory) as a Chrome "
          "trace, OUTPUT_DIR/trace/rank-R-of-N.json, for the updates --trace_steps names; bazel run //tools:trace -- "
          "OUTPUT_DIR merges the ranks and prints how much communication compute hid");
ABSL_FLAG(std::string, trace_steps, "2:4", "with --trace: the updates traced, A:B (1-based, inclusive)");
ABSL_FLAG(bool, bf16, false,
          "mixed precision in bfloat16: forward passes under autocast, weights, gradients and optimizer in float32");
ABSL_FLAG(bool, fp16, false,
          "mixed precision in float16 with dynamic loss scaling (as run_glue's --fp16); needs --device=cuda "
          "(or LibTorch 2.4+ on CPU, slow)");
ABSL_FLAG(bool, save_every_rank, false,
          "every rank also writes its final model to OUTPUT_DIR/rank_R/ (rank 0's is OUTPUT_DIR's): after a correct "
          "synchronisation all ranks end with the same weights, bit for bit");
ABSL_FLAG(int64_t, save_steps, 0, "snapshot every this many updates (0: only at epoch ends)");
ABSL_FLAG(double, hidden_dropout_prob, -1, "override the model's hidden dropout (< 0: keep)");
ABSL_FLAG(double, attention_probs_dropout_prob, -1, "override the model's attention dropout (< 0: keep)");

namespace distlm::train {

nlohmann::json TrainOptions::ToJson() const {
  return {
      {"model_type", model_type},
      {"model_name_or_path", model_name_or_path},
      {"task_name", task_name},
      {"data_dir", data_dir},
      {"output_dir", output_dir},
      {"do_train", do_train},
      {"do_eval", do_eval},
      {"do_lower_case", do_lower_case},
      {"overwrite_output_dir", overwrite_output_dir},
      {"pad_to_max_length", pad_to_max_length},
      {"max_seq_length", max_seq_length},
      {"per_gpu_train_batch_size", per_device_train_batch_size},
      {"per_gpu_eval_batch_size", per_device_eval_batch_size},
      {"learning_rate", learning_rate},
      {"weight_decay", weight_decay},
      {"adam_epsilon", adam_epsilon},
      {"optim", optim},
      {"max_grad_norm", max_grad_norm},
      {"num_train_epochs", num_train_epochs},
      {"max_steps", max_steps},
      {"warmup_steps", warmup_steps},
      {"gradient_accumulation_steps", gradient_accumulation_steps},
      {"seed", seed},
      {"device", device},
      {"logging_steps", logging_steps},
      {"save_steps", save_steps},
      {"bf16", bf16},
      {"fp16", fp16},
      {"hidden_dropout_prob", hidden_dropout_prob},
      {"attention_probs_dropout_prob", attention_probs_dropout_prob},
  };
}

void ValidateTrainOptions(const TrainOptions& o) {
  auto fail = [](const std::string& msg) { throw UserError(msg); };
  if (o.model_type != "bert" && o.model_type != "vit") {
    fail("--model_type=" + o.model_type + ": use bert (GLUE tasks) or vit (CIFAR-10)");
  }
  if ((o.model_type == "vit") != (o.task_name == "cifar10")) {
    fail(o.model_type == "vit" ? "--model_type=vit trains on --task_name=cifar10, not " + o.task_name
                               : "--task_name=cifar10 needs --model_type=vit (BERT reads text)");
  }
  if (o.per_device_train_batch_size < 1) {
    fail("--per_gpu_train_batch_size must be >= 1, got " + std::to_string(o.per_device_train_batch_size));
  }
  if (o.per_device_eval_batch_size < 1) {
    fail("--per_gpu_eval_batch_size must be >= 1, got " + std::to_string(o.per_device_eval_batch_size));
  }
  if (!(o.learning_rate > 0)) fail("--learning_rate must be > 0, got " + std::to_string(o.learning_rate));
  if (!(o.weight_decay >= 0)) fail("--weight_decay must be >= 0");
  if (!(o.adam_epsilon >= 0)) fail("--adam_epsilon must be >= 0");
  if (o.optim != "bert_adamw" && o.optim != "adamw_torch") {
    fail("--optim must be bert_adamw or adamw_torch, got '" + o.optim + "'");
  }
  if (o.max_seq_length < 3) {
    fail("--max_seq_length must be >= 3 ([CLS] A [SEP] B [SEP] needs 3 special tokens), got " +
         std::to_string(o.max_seq_length));
  }
  if (o.gradient_accumulation_steps < 1) fail("--gradient_accumulation_steps must be >= 1");
  if (o.max_steps <= 0 && !(o.num_train_epochs >= 1)) {
    fail("--num_train_epochs must be >= 1 when --max_steps is not set");
  }
  if (o.warmup_steps < 0) fail("--warmup_steps must be >= 0");
  if (o.logging_steps < 1) fail("--logging_steps must be >= 1");
  if (o.save_steps < 0) fail("--save_steps must be >= 0");
  if (!o.do_train && !o.do_eval) fail("nothing to do: both --do_train and --do_eval are false");
  for (double p : {o.hidden_dropout_prob, o.attention_probs_dropout_prob}) {
    if (p >= 1.0) fail("dropout overrides must be < 1");
  }
}

AdamWOptions AdamWOptionsFor(const TrainOptions& o) {
  AdamWOptions adam;
  adam.lr = o.learning_rate;
  adam.eps = o.adam_epsilon;
  adam.weight_decay = o.weight_decay;
  adam.torch_semantics = o.optim == "adamw_torch";
  return adam;
}

TrainOptions TrainOptionsFromFlags() {
  TrainOptions o;
  o.model_type = absl::GetFlag(FLAGS_model_type);
  o.model_name_or_path = absl::GetFlag(FLAGS_model_name_or_path);
  o.task_name = absl::GetFlag(FLAGS_task_name);
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  o.output_dir = absl::GetFlag(FLAGS_output_dir);
  o.do_train = absl::GetFlag(FLAGS_do_train);
  o.do_eval = absl::GetFlag(FLAGS_do_eval);
  o.do_lower_case = absl::GetFlag(FLAGS_do_lower_case);
  o.overwrite_output_dir = absl::GetFlag(FLAGS_overwrite_output_dir);
  o.pad_to_max_length = absl::GetFlag(FLAGS_pad_to_max_length);
  o.max_seq_length = absl::GetFlag(FLAGS_max_seq_length);
  o.per_device_train_batch_size = absl::GetFlag(FLAGS_per_gpu_train_batch_size);
  if (int64_t alias = absl::GetFlag(FLAGS_per_device_train_batch_size); alias != -1) {
    o.per_device_train_batch_size = alias;
  }
  o.per_device_eval_batch_size = absl::GetFlag(FLAGS_per_gpu_eval_batch_size);
  o.learning_rate = absl::GetFlag(FLAGS_learning_rate);
  o.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  o.adam_epsilon = absl::GetFlag(FLAGS_adam_epsilon);
  o.optim = absl::GetFlag(FLAGS_optim);
  o.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
  o.num_train_epochs = absl::GetFlag(FLAGS_num_train_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  o.gradient_accumulation_steps = absl::GetFlag(FLAGS_gradient_accumulation_steps);
  o.device = absl::GetFlag(FLAGS_device);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.logging_steps = absl::GetFlag(FLAGS_logging_steps);
  o.plots = absl::GetFlag(FLAGS_plots);
  {
    const std::string report_to = absl::GetFlag(FLAGS_report_to);
    if (report_to != "none" && report_to != "tensorboard" && report_to != "all") {
      throw UserError("--report_to=" + report_to + ": want tensorboard, all (the same: TensorBoard is the one "
                      "integration, written to files) or none");
    }
    o.tensorboard = report_to != "none";
    o.logging_dir = absl::GetFlag(FLAGS_logging_dir);
  }
  o.trace = absl::GetFlag(FLAGS_trace);
  {
    const std::string steps = absl::GetFlag(FLAGS_trace_steps);
    long long a = 0, b = 0;
    char rest = 0;
    if (std::sscanf(steps.c_str(), "%lld:%lld%c", &a, &b, &rest) != 2 || a < 1 || b < a) {
      throw UserError("--trace_steps=" + steps + ": want A:B, the first and last update traced (1 <= A <= B)");
    }
    o.trace_first = a;
    o.trace_last = b;
  }
  o.save_every_rank = absl::GetFlag(FLAGS_save_every_rank);
  o.bf16 = absl::GetFlag(FLAGS_bf16);
  o.fp16 = absl::GetFlag(FLAGS_fp16);
  o.save_steps = absl::GetFlag(FLAGS_save_steps);
  o.hidden_dropout_prob = absl::GetFlag(FLAGS_hidden_dropout_prob);
  o.attention_probs_dropout_prob = absl::GetFlag(FLAGS_attention_probs_dropout_prob);
  // Under `bazel run` the working directory is the runfiles tree: relative paths mean the
  // folder the user typed the command in.
  if (const char* wd = std::getenv("BUILD_WORKING_DIRECTORY"); wd != nullptr && *wd != '\0') {
    for (std::string* path : {&o.data_dir, &o.model_name_or_path, &o.output_dir, &o.logging_dir}) {
      if (!path->empty() && (*path)[0] != '/') *path = std::string(wd) + "/" + *path;
    }
  }
  ValidateTrainOptions(o);
  return o;
}

}  // namespace distlm::train
