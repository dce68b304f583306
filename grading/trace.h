// A graded run's numbers (losses, rank 0's gradient norms, learning rates, what it sent) and
// how the grader compares them with its own single-node run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "grading/stage_runner.h"

namespace distlm::grading {

// Every graded run trains this many updates on a total batch of kTotalBatch.
inline constexpr size_t kSteps = 5;
inline constexpr int kTotalBatch = 8;
// A correct synchronisation differs from one process only in the order of float32 sums
// (~1e-7 relative over 5 updates; a gradient norm near zero is compared against the trace's
// largest, NormScale); a wrong one by >1e-3 from the second update on.
inline constexpr double kParityTol = 1e-5;
// A known mistake is recognised when a trace is this close to the grader's own run of it
// (the same mistake made with other collectives sums in another order).
inline constexpr double kMistakeTol = 1e-4;

struct Trace {
  std::vector<double> losses, grad_norms, lrs;
  std::vector<int64_t> comm_calls;  // per update; -1 when the log has no communication record
};

Trace TraceOf(const StageRun& run);
// The same from the log's records alone.
Trace TraceOfLog(const std::vector<nlohmann::json>& log);

// printf of one number, for messages.
std::string Fmt(const char* format, double v);
double RelDiff(double got, double want);
// |got - want| relative to the larger of |want| and `scale`.
double ScaledDiff(double got, double want, double scale);
// What a gradient norm's difference is measured against: the largest norm of the grader's
// trace. A correct synchronisation sums float32 gradients in another order, an error of about
// 1e-7 of the per-rank gradients; where the averaged gradient nearly cancels (a norm 100 times
// below the run's largest, as at the loss's saddle), that error can exceed 1e-5 of the small
// norm itself (seen: 1.8e-5, one grading in four of task 2b's reference on 4 ranks), while
// every mistake the grader looks for moves the norms by far more than 1e-5 of the largest.
double NormScale(const Trace& want);
// The first n entries of a and b each within tol (relative).
bool Close(const std::vector<double>& a, const std::vector<double>& b, size_t n, double tol);

// Feedback never shows the grader's own numbers: each grading draws a secret seed, and a
// message that printed the expected values would hand them to a submission graded again on the
// same draw (task 3's later runs) or to whoever reads results.json. It says where, which way and
// how far off a value is.
//
// "1.2 times" / "0.25 times": got against want, three significant digits.
std::string Times(double got, double want);
// "2.3e-03 relative above" / "below" (or "not a number").
std::string OffBy(double got, double want);

// "" when the losses and the gradient norms (rank 0's, before clipping) all match; else where
// they first part (the submitted value and how far off, never the expected one), against
// `yardstick`, what `want` is the trace of.
std::string ParityDiff(const Trace& want, const Trace& got,
                       const std::string& yardstick = "the grader's single-node run");
// The largest relative difference over the losses and gradient norms (for a passing message).
double WorstDifference(const Trace& want, const Trace& got);
// The submitted numbers per update with how far each is from the grader's (signed relative
// difference; the expected values are not shown).
std::string TraceTable(const Trace& want, const Trace& got);

}  // namespace distlm::grading
