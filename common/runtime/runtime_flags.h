// The preamble's flag, shared by every binary: --num_threads.
#pragma once

#include "absl/flags/declare.h"
#include "common/runtime/preamble.h"

ABSL_DECLARE_FLAG(int, num_threads);

namespace distlm::runtime {

// InitRuntime(--num_threads).
PreambleReport InitRuntimeFromFlags();

}  // namespace distlm::runtime
