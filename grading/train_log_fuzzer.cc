// libFuzzer target (tools/fuzz/run_fuzzers.sh): whatever a submission writes as its
// train_log.jsonl, reading it, judging it and quoting it never crash the grader, and every
// text the grader may quote from it dumps as strict JSON (results.json is always written).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grading/text.h"
#include "grading/trace.h"
#include "grading/train_log.h"

namespace {

void MustDumpStrictly(const std::string& shown) {
  // Throws (and so aborts the fuzzer) if the text is not valid UTF-8.
  (void)nlohmann::json(shown).dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace distlm::grading;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<nlohmann::json> log;
  std::vector<std::string> bad;
  ParseTrainLog(text, &log, &bad);
  const Trace got = TraceOfLog(log);
  Trace want;
  want.losses = {0.69, 0.70, 0.68, 0.71, 0.66};
  want.grad_norms = {1.5, 1.6, 1.4, 1.3, 1.2};
  MustDumpStrictly(ParityDiff(want, got));
  MustDumpStrictly(TraceTable(want, got));
  (void)WorstDifference(want, got);
  for (const auto& line : log) {
    (void)IntegerField(line, "buckets");
    (void)NumberField(line, "comm_busy_ms");
    const auto ops = line.find("comm_ops");
    MustDumpStrictly(DescribeOps(ops == line.end() ? nlohmann::json() : *ops));
  }
  for (const auto& b : bad) MustDumpStrictly(QuotedLine(b));
  MustDumpStrictly(Tail(text, 15));
  MustDumpStrictly(CapText(Printable(text), 100, "[...]"));
  return 0;
}
