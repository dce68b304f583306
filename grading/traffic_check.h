// Evidence from outside the student's process: what a graded run's ranks put on the network,
// counted by the kernel in the run's own network namespace and read by the grader after the run
// (grading/jail/sandbox.h, SandboxResult::loopback_bytes), against the least that the task's
// synchronisation must send (task 4's closed forms, task4_bench/traffic.h). Everything in
// train_log.jsonl is written by the submission itself; this count is not, and a run that
// logged a synchronisation it never sent cannot reach it. Only a lower bound is enforced:
// Gloo's headers, the rendezvous and a submission's own extra traffic only add bytes.
#pragma once

#include <cstddef>
#include <string>

#include "common/stages/stages.h"
#include "grading/autograder.h"
#include "grading/stage_runner.h"

namespace distlm::grading {

// A run must have sent at least this share of the expected payload (the measured runs of the
// references send 1.0x to 1.2x of it; a run that skips half the gradients sends about 0.5x).
inline constexpr double kMinTrafficShare = 0.9;

struct TrafficVerdict {
  bool counted = false;  // the run had a network namespace of its own and the formula applies
  bool enough = true;
  double counted_bytes = 0;
  double least_bytes = 0;  // kMinTrafficShare x expected
  double reference_bytes = 0;  // > 0: expected is what the grader's own run sent, not a formula
  std::string Describe() const;  // one line for a test's output
  // Not enough: a passing parity test scores nothing and says why first (a failing one gets a
  // line more); counted and enough: a line more.
  void Judge(TestResult* parity) const;
};

// `gradient_bytes`: S, the bytes of the model's gradients (the grader's own trace's model);
// `ranks`: the run's; `updates`: the updates it logged.
TrafficVerdict CheckTraffic(const StageRun& run, const stages::Row& st, int ranks, double gradient_bytes,
                            size_t updates);

// The same against `reference_bytes`, what the grader's own reference sent on the same ranks
// and flags (<= 0: not checked).
TrafficVerdict CheckTrafficAgainst(const StageRun& run, double reference_bytes);

// S from the bytes of a model.safetensors the grader itself wrote: its data buffer (everything
// after the header). 0 when they are not a safetensors file.
double TensorBytesOf(const std::string& safetensors_bytes);

}  // namespace distlm::grading
