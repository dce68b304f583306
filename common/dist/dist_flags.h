// The distributed flags every stage shares, and the config they resolve to.
//
//   --backend=gloo|mpi|nccl   --master_ip --master_port   --world_size   --rank --local_rank
//   --dist_timeout_s          --gloo_iface
//
// Flags win over the launcher's environment field by field; see dist_config.h for the order.
#pragma once

#include <string>

#include "absl/flags/declare.h"
#include "common/dist/dist_config.h"

ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(std::string, master_ip);
ABSL_DECLARE_FLAG(int, master_port);
ABSL_DECLARE_FLAG(int, world_size);
ABSL_DECLARE_FLAG(int, local_rank);
ABSL_DECLARE_FLAG(int, rank);
ABSL_DECLARE_FLAG(double, dist_timeout_s);
ABSL_DECLARE_FLAG(std::string, gloo_iface);

namespace distlm::dist {

// The current values of the flags above.
DistFlagValues DistFlagValuesFromFlags();

// ResolveDistConfig(flags, this process's environment). Throws distlm::UserError.
DistConfig DistConfigFromFlagsAndEnv();

}  // namespace distlm::dist
