#include "common/train/progress.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace distlm::train {

std::string FormatDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  }
  return buf;
}

std::string FormatProgress(const std::string& label, int64_t done, int64_t total, double elapsed_s, double eta_s,
                           double samples_per_s, const std::string& fields, bool bar) {
  std::string line = label;
  const double fraction = total > 0 ? std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0) : 0;
  if (bar) {
    const int width = 20, filled = static_cast<int>(fraction * width);
    line += " [" + std::string(filled, '#') + std::string(width - filled, '-') + "]";
  }
  char buf[96];
  const int digits = static_cast<int>(std::to_string(total).size());
  std::snprintf(buf, sizeof(buf), " %*lld/%lld %3.0f%%", digits, static_cast<long long>(done),
                static_cast<long long>(total), 100 * fraction);
  line += buf;
  if (!fields.empty()) line += " " + fields;
  if (samples_per_s > 0) {
    std::snprintf(buf, sizeof(buf), " | %.1f samples/s", samples_per_s);
    line += buf;
  }
  line += " | " + FormatDuration(elapsed_s) + " elapsed";
  if (eta_s >= 0 && done < total) line += ", ETA " + FormatDuration(eta_s);
  return line;
}

ProgressLine::ProgressLine(std::string label, int64_t total, bool terminal, int64_t every, bool enabled, int64_t first,
                           FILE* out)
    : label_(std::move(label)),
      total_(total),
      first_(first),
      terminal_(terminal),
      every_(std::max<int64_t>(every, 1)),
      enabled_(enabled),
      out_(out),
      start_(std::chrono::steady_clock::now()) {}

ProgressLine::~ProgressLine() { Finish(); }

void ProgressLine::Update(int64_t done, int64_t samples, const std::string& fields) {
  if (!enabled_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(samples) / elapsed : 0;
  const int64_t since = done - first_;
  const double eta = since > 0 ? elapsed / static_cast<double>(since) * static_cast<double>(total_ - done) : -1;
  if (terminal_) {
    const std::string line = FormatProgress(label_, done, total_, elapsed, eta, rate, fields, /*bar=*/true);
    // Redrawn in place; a shorter line than the last one erases what is left of it.
    std::fprintf(out_, "\r\033[K%s", line.c_str());
    drawn_ = true;
    if (done >= total_) Finish();
  } else if (done % every_ == 0 || done >= total_) {
    std::fprintf(out_, "%s\n", FormatProgress(label_, done, total_, elapsed, eta, rate, fields, /*bar=*/false).c_str());
  }
  std::fflush(out_);
}

void ProgressLine::Finish() {
  if (enabled_ && terminal_ && drawn_) {
    std::fputc('\n', out_);
    std::fflush(out_);
  }
  drawn_ = false;
}


}  // namespace distlm::train
