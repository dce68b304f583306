// --report_to=tensorboard: the Trainer's TensorBoard event file.
#include <cstdio>
#include <string>

#include "common/train/trainer.h"

namespace distlm::train {

namespace {

using json = nlohmann::json;

// The run's arguments as a Markdown table (TensorBoard's Text tab renders it), one row each.
std::string ArgsTable(const json& args) {
  std::string out = "| argument | value |\n| --- | --- |\n";
  for (const auto& [key, value] : args.items()) {
    std::string v = value.is_string() ? value.get<std::string>() : value.dump();
    if (v.empty()) v = "(empty)";
    for (char& c : v) {
      if (c == '|' || c == '\n') c = ' ';  // one cell, whatever a path holds
    }
    out += "| " + key + " | " + v + " |\n";
  }
  return out;
}

}  // namespace

void Trainer::StartTensorBoard() {
  if (!options_.tensorboard || !is_main_rank()) return;
  std::string dir = options_.logging_dir;
  if (dir.empty()) {
    // One folder per stage and settings, so that `tensorboard --logdir` over several output
    // folders (or one reused with --overwrite_output_dir) names each curve by what it ran.
    char name[256];
    std::snprintf(name, sizeof(name), "%s_%drank%s%s%s_%s_b%lld_lr%g", stage_.name().c_str(), dist_.world_size,
                  dist_.world_size == 1 ? "" : "s", dist_.world_size == 1 ? "" : "_",
                  dist_.world_size == 1 ? "" : dist_.backend.c_str(), PrecisionName(precision_).c_str(),
                  static_cast<long long>(options_.per_device_train_batch_size), options_.learning_rate);
    dir = options_.output_dir + "/runs/" + name;
  }
  tensorboard_ = std::make_unique<tensorboard::EventWriter>(dir);
  tensorboard_->AddText(0, "args", ArgsTable(RunArgs()));
  std::printf("tensorboard: %s (tensorboard --logdir %s)\n", dir.c_str(), options_.output_dir.c_str());
  std::fflush(stdout);
}

void Trainer::AddScalars(const std::string& prefix, int64_t step, const json& fields) {
  if (!tensorboard_) return;
  tensorboard::Scalars scalars;
  for (const auto& [k, v] : fields.items()) {
    if (k != "step" && v.is_number()) scalars.emplace_back(prefix + k, v.get<float>());
  }
  tensorboard_->Add(step, scalars);
}

}  // namespace distlm::train
