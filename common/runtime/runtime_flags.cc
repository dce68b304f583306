#include "common/runtime/runtime_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(int, num_threads, 0,
          "LibTorch intra-op threads; 0 = this host's cores divided by the ranks running on it "
          "(at least 1)");

namespace distlm::runtime {

PreambleReport InitRuntimeFromFlags() { return InitRuntime(absl::GetFlag(FLAGS_num_threads)); }

}  // namespace distlm::runtime
