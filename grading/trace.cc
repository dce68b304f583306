#include "grading/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace distlm::grading {
namespace {

// The first update whose value differs from the single-node one beyond the tolerance, or
// kSteps when all match. `scale`: what a difference is relative to (at least |want|).
size_t FirstDifference(const std::vector<double>& want, const std::vector<double>& got, double scale = 0) {
  for (size_t i = 0; i < kSteps; ++i) {
    if (i >= got.size() || i >= want.size() || !(ScaledDiff(got[i], want[i], scale) <= kParityTol)) return i;
  }
  return kSteps;
}

}  // namespace

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

double RelDiff(double got, double want) { return std::abs(got - want) / std::max(std::abs(want), 1e-12); }

double ScaledDiff(double got, double want, double scale) {
  return std::abs(got - want) / std::max({std::abs(want), scale, 1e-12});
}

double NormScale(const Trace& want) {
  double scale = 0;
  for (size_t i = 0; i < kSteps && i < want.grad_norms.size(); ++i) {
    if (std::isfinite(want.grad_norms[i])) scale = std::max(scale, std::abs(want.grad_norms[i]));
  }
  return scale;
}

bool Close(const std::vector<double>& a, const std::vector<double>& b, size_t n, double tol) {
  if (a.size() < n || b.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    if (!(RelDiff(a[i], b[i]) <= tol)) return false;
  }
  return true;
}

Trace TraceOf(const StageRun& run) { return TraceOfLog(run.log); }

Trace TraceOfLog(const std::vector<nlohmann::json>& log) {
  Trace t;
  for (const auto& line : log) {
    t.losses.push_back(NumberField(line, "loss"));
    t.grad_norms.push_back(NumberField(line, "grad_norm"));
    t.lrs.push_back(NumberField(line, "lr"));
    t.comm_calls.push_back(IntegerField(line, "comm_calls"));
  }
  return t;
}

std::string Times(double got, double want) {
  if (!std::isfinite(got) || !std::isfinite(want) || want == 0) return "not comparable with";
  return Fmt("%.3g", got / want) + " times";
}

std::string OffBy(double got, double want) {
  if (!std::isfinite(got)) return "not a number";
  const double rel = (got - want) / std::max(std::abs(want), 1e-12);
  return Fmt("%.1e", std::abs(rel)) + (rel >= 0 ? " relative above" : " relative below");
}

std::string TraceTable(const Trace& want, const Trace& got) {
  std::string s = "    update  your loss     off by      your grad norm  off by\n";
  auto signed_rel = [](double g, double w) {
    if (!std::isfinite(g)) return std::string("   (NaN)");
    return Fmt("%+.1e", (g - w) / std::max(std::abs(w), 1e-12));
  };
  for (size_t i = 0; i < kSteps && i < want.losses.size(); ++i) {
    s += "    " + std::to_string(i + 1) + "       ";
    if (i < got.losses.size() && i < got.grad_norms.size() && i < want.grad_norms.size()) {
      s += Fmt("%.9f", got.losses[i]) + "  " + signed_rel(got.losses[i], want.losses[i]) + "    " +
           Fmt("%14.7f", got.grad_norms[i]) + "  " + signed_rel(got.grad_norms[i], want.grad_norms[i]);
    } else {
      s += "(not logged)";
    }
    s += "\n";
  }
  s += "    (off by: your value against the grader's run, relative; within " + Fmt("%.0e", kParityTol) +
       " passes, for a gradient norm within that much of the run's largest norm. The grader's values are not "
       "shown: they come from a seed drawn for this grading.)\n";
  return s;
}

// "" when the losses and the gradient norms (rank 0's, before clipping) all match; else where
// they first part. After a correct synchronisation rank 0 holds the single-node gradient, so
// its norm matches too; a gradient off by a constant factor can leave the losses nearly
// unchanged (clipping and Adam normalise it away) while its norm shows the factor at once.
std::string ParityDiff(const Trace& want, const Trace& got, const std::string& yardstick) {
  const size_t loss_at = FirstDifference(want.losses, got.losses);
  const size_t norm_at = FirstDifference(want.grad_norms, got.grad_norms, NormScale(want));
  if (loss_at == kSteps && norm_at == kSteps) return "";
  if (want.losses.size() < kSteps || want.grad_norms.size() < kSteps) {
    return yardstick + " logged " + std::to_string(std::min(want.losses.size(), want.grad_norms.size())) +
           " updates, not " + std::to_string(kSteps) + ": nothing to compare with";
  }
  if (got.losses.size() < kSteps) {
    return "expected " + std::to_string(kSteps) + " logged updates, found " + std::to_string(got.losses.size());
  }
  if (loss_at <= norm_at) {
    std::string s = "the loss of update " + std::to_string(loss_at + 1) + " is " + Fmt("%.9g", got.losses[loss_at]) +
                    ", " + OffBy(got.losses[loss_at], want.losses[loss_at]) + " " + yardstick + " (more than " +
                    Fmt("%.0e", kParityTol) + ")";
    if (loss_at == 0) {
      s += "; this loss is computed before any optimizer step, so the model, the data or the batch already differ";
    } else {
      s += "; " + (loss_at == 1 ? std::string("the loss of update 1 matched")
                                : "the losses of updates 1.." + std::to_string(loss_at) + " matched") +
           ", so optimizer step " + std::to_string(loss_at) + " was the first to differ";
    }
    return s;
  }
  std::string s = "the gradient norm before clipping of update " + std::to_string(norm_at + 1) + " is " +
                  Fmt("%.9g", got.grad_norms[norm_at]) + ", " +
                  OffBy(got.grad_norms[norm_at], want.grad_norms[norm_at]) + " " + yardstick + "'s";
  s += loss_at == kSteps ? std::string("; the losses all match")
                         : "; the losses differ from update " + std::to_string(loss_at + 1) + " on";
  return s;
}

double WorstDifference(const Trace& want, const Trace& got) {
  double worst = 0;
  const double norm_scale = NormScale(want);
  for (size_t i = 0; i < kSteps && i < got.losses.size() && i < got.grad_norms.size(); ++i) {
    worst = std::max({worst, RelDiff(got.losses[i], want.losses[i]),
                      ScaledDiff(got.grad_norms[i], want.grad_norms[i], norm_scale)});
  }
  return worst;
}

}  // namespace distlm::grading
