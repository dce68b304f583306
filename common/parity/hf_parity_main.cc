// bazel run //common/parity:hf_parity -- --dump=OUT_DIR [--model=MODEL_DIR]
//
// distlm against HuggingFace transformers on one checkpoint: OUT_DIR is what
// tools/peers/hf_dump.sh MODEL_DIR OUT_DIR wrote. Prints one OK / NOT OK line per compared
// tensor (features, logits, loss, every gradient, the 12-step trace) with the worst difference,
// and exits 0 only when every one holds.
#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/parity/hf_parity.h"
#include "common/runtime/errors.h"
#include "common/runtime/runtime_flags.h"

ABSL_FLAG(std::string, dump, "", "folder written by tools/peers/hf_dump.sh (meta.json, dump.safetensors)");
ABSL_FLAG(std::string, model, "", "the checkpoint folder the dump was made from (default: the one meta.json names)");

int main(int argc, char** argv) {
  return distlm::RunMain([&]() -> int {
    absl::ParseCommandLine(argc, argv);
    distlm::runtime::InitRuntimeFromFlags();
    const std::string dump = absl::GetFlag(FLAGS_dump);
    if (dump.empty()) throw distlm::UserError("--dump is required (a folder written by tools/peers/hf_dump.sh)");
    auto report = distlm::bert::CompareWithHfDump(dump, absl::GetFlag(FLAGS_model));
    for (const auto& c : report.checks) std::printf("%s\n", distlm::bert::FormatCheck(c).c_str());
    std::printf("hf_parity: %s against %s: %zu checks, %d NOT OK\n", report.model_dir.c_str(), dump.c_str(),
                report.checks.size(), report.failures());
    return report.all_ok() ? 0 : 1;
  });
}
