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
#include <vector>

#include "grading/stage_runner.h"
#include "grading/test_result.h"

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
// model.safetensors ("": not checked), which messages call `yardstick`.
WeightsVerdict CheckFinalWeights(const StageRun& run, int ranks, const std::string& grader_model,
                                 const std::string& yardstick = "the grader's single-node run");

// Whether rank 0's final weights of `run` are within kWeightsTol (relative L2) of `model`'s (the
// bytes of a model.safetensors): false where not, or where a file cannot be read. Whether the
// ranks agree is not asked: a run is named as a known mistake's by it even where only another
// rank's weights went astray.
bool RankZeroMatches(const StageRun& run, const std::string& model);

// The bytes of a model.safetensors whose float32 tensors are the element-wise means (taken in
// double, rounded once) of those of `models` (the grader's own files, of one layout); the first
// file's layout and other tensors. Throws on files that do not have the same float32 tensors.
std::string MeanOfModels(const std::vector<std::string>& models);

// How far rank 0 of `run` moved from `start` along the way from `start` to `mean` (all
// model.safetensors bytes): <w - start, mean - start> / |mean - start|^2 over every float32
// tensor, 1 where it ended at `mean`. False (and `why`) where a file cannot be read or compared.
bool MovedAlong(const StageRun& run, const std::string& start, const std::string& mean, double* along,
                std::string* why);

}  // namespace distlm::grading
