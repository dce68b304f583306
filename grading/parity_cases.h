// What the stage-against-stage parity tests (task3/, task5/, task6/ and task7/parity_test) share: the
// flags of a short, deterministic run and the cases they run it in.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <torch/types.h>

#include "common/safetensors/safetensors.h"

#include "common/testing/subprocess.h"
#include "grading/stage_runner.h"

namespace distlm::grading {

constexpr double kTol = 1e-5;  // relative, as parity_test.cc
constexpr size_t kSteps = 5;

// 5 updates of the tiny built-in BERT without dropout, one thread per rank.
inline std::vector<std::string> Flags(int per_rank_batch, int accumulation = 1) {
  return {"--max_steps=5",
          "--per_gpu_train_batch_size=" + std::to_string(per_rank_batch),
          "--gradient_accumulation_steps=" + std::to_string(accumulation),
          "--max_seq_length=64",
          "--learning_rate=1e-3",
          "--hidden_dropout_prob=0",
          "--attention_probs_dropout_prob=0",
          "--do_eval=false",
          "--num_threads=1",
          "--dist_timeout_s=60"};
}

inline std::string Bin(const std::string& target) { return testing::Runfile(target); }

// The largest |got - want| / |want| over the first min(sizes) values (losses, norms).
inline double WorstRelative(const std::vector<double>& want, const std::vector<double>& got) {
  double worst = 0;
  for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::abs(want[i]));
  }
  return worst;
}

// The largest absolute difference between two runs' saved models (<dir>/model.safetensors),
// tensor by tensor; *why says what does not match (names, order, shapes), and then -1.
inline double WorstSavedWeightDifference(const std::string& want_dir, const std::string& got_dir, std::string* why) {
  const auto want = safetensors::LoadFile(want_dir + "/model.safetensors");
  const auto got = safetensors::LoadFile(got_dir + "/model.safetensors");
  if (want.size() != got.size()) {
    *why = std::to_string(got.size()) + " tensors saved, " + std::to_string(want.size()) + " expected";
    return -1;
  }
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i].first != got[i].first || want[i].second.sizes() != got[i].second.sizes()) {
      *why = "tensor " + std::to_string(i) + " is " + got[i].first + " " + c10::str(got[i].second.sizes()) + ", not " +
             want[i].first + " " + c10::str(want[i].second.sizes());
      return -1;
    }
    worst = std::max(worst, (want[i].second - got[i].second).abs().max().item<double>());
  }
  return worst;
}

struct Case {
  int ranks;
  Launcher launcher;
  int accumulation = 1;
};

inline std::string Name(const Case& c) {
  return "x" + std::to_string(c.ranks) + (c.launcher == Launcher::kMpirun ? " (mpi)" : " (gloo)") +
         (c.accumulation > 1 ? " accumulation " + std::to_string(c.accumulation) : "");
}

}  // namespace distlm::grading
