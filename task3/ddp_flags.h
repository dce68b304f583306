// Task 3's flags, read once into one struct (ddp_stage.cc uses it).
#pragma once

#include <string>

namespace distlm::task3 {

struct DdpFlags {
  std::string kind;            // --ddp: "buckets" (3b) or "per_parameter" (3a)
  double bucket_cap_mb = 25;   // --bucket_cap_mb
  bool unused_parameter = false;  // --ddp_unused_parameter
  bool embedding_rows = false;    // --embedding_sync=rows
};

// The flags as parsed; a UserError naming the flag for a value out of range.
DdpFlags DdpFlagsFromCommandLine();

}  // namespace distlm::task3
