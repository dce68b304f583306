// The progress of a loop of known length (training updates, evaluation batches), on rank 0:
// on a terminal one line redrawn in place; elsewhere (CI, a file) a plain line every `every`
// steps and at the last one, so logs stay readable.
//
//   train [##########----------]  20/40  50% loss 0.6931 | 95.2 samples/s | 0:12 elapsed, ETA 0:12
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace distlm::train {

// "0:07", "3:05", "1:02:09".
std::string FormatDuration(double seconds);

// One progress line without the terminal's control characters.
// `eta_s` < 0: none shown.
std::string FormatProgress(const std::string& label, int64_t done, int64_t total, double elapsed_s, double eta_s,
                           double samples_per_s, const std::string& fields, bool bar);

class ProgressLine {
 public:
  // `enabled` false (a rank other than 0) prints nothing at all. `first`: steps already done
  // when it starts (a resumed run), left out of the rate and the ETA.
  ProgressLine(std::string label, int64_t total, bool terminal, int64_t every, bool enabled, int64_t first = 0,
               FILE* out = stdout);
  ~ProgressLine();

  // `done` of `total` steps finished, `samples` examples processed since it started (for
  // samples/s), and what else to show ("loss 0.6931").
  void Update(int64_t done, int64_t samples, const std::string& fields);

  // Ends the line on a terminal (so what is printed next starts on its own line: call it before
  // printing anything else); idempotent. The next Update draws a new line.
  void Finish();


 private:
  std::string label_;
  int64_t total_;
  int64_t first_;
  bool terminal_;
  int64_t every_;
  bool enabled_;
  FILE* out_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace distlm::train
