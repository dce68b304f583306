// Evidence beside the log: the weights every rank ends with (--save_every_rank). Each
// all-reduce and all-gather hands every rank the same result, so after a correct
// synchronisation the ranks' final models are identical, bit for bit; and they are the
// grader's own single-node run's up to the order of float sums. A run whose ranks drifted
// apart (no synchronisation, some parameters only, rank 0 keeping its own) cannot show that,
// whatever its log says; a log copied from elsewhere comes without the weights to match it.
// (The files are still written by the submission's processes: see the threat model in
// grading/README.md.)
#pragma once

#include <string>

#include "grading/autograder.h"
#include "grading/stage_runner.h"

namespace distlm::grading {

// Rank 0's weights may differ from the grader's by this much: ||w - w_grader|| / ||w_grader||
// over every tensor together. The references differ by 7e-8 (measured: README); a wrong
// synchronisation moves every weight by about the learning rate each update (~1e-2 here).
inline constexpr double kWeightsTol = 1e-5;

struct WeightsVerdict {
  bool checked = false;   // a distributed run, and the grader's own model to compare with
  bool ok = true;
  double rel_diff = 0;    // rank 0 against the grader's run
  std::string message;    // why not ok; or a line for a passing test's output
  // Not ok: a passing parity test scores nothing and says why first (a failing one adds it).
  void Judge(TestResult* parity) const;
};

// Reads OUT/model.safetensors (rank 0) and OUT/rank_R/model.safetensors (R = 1..ranks-1) of
// `run`, as ReadUntrustedFile does; `grader_model` holds the bytes of the grader's own run's
// model.safetensors ("": not checked).
WeightsVerdict CheckFinalWeights(const StageRun& run, int ranks, const std::string& grader_model);

}  // namespace distlm::grading
