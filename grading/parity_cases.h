// What the stage-against-stage parity tests (ddp_parity_test, zero_parity_test) share: the
// flags of a short, deterministic run and the cases they run it in.
#pragma once

#include <string>
#include <vector>

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
