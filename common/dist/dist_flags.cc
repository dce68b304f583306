#include "common/dist/dist_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, backend, "gloo", "collective backend: gloo, mpi (under mpirun) or nccl");
ABSL_FLAG(std::string, master_ip, "",
          "address of rank 0, which hosts the rendezvous store; empty = MASTER_ADDR, else "
          "127.0.0.1");
ABSL_FLAG(int, master_port, 0,
          "TCP port of the rendezvous store on rank 0; 0 = MASTER_PORT, else 29500");
ABSL_FLAG(int, world_size, 0,
          "number of ranks; 0 = from the launcher (WORLD_SIZE, OMPI_COMM_WORLD_SIZE, "
          "SLURM_NTASKS), else 1");
ABSL_FLAG(int, local_rank, -1,
          "rank on this host; also the global rank when --rank and the launcher's rank are "
          "absent (one rank per node, as on CloudLab); -1 = not given");
ABSL_FLAG(int, rank, -1,
          "global rank; wins over --local_rank and the launcher's variables; -1 = not given");
ABSL_FLAG(double, dist_timeout_s, 300,
          "seconds to wait for the rendezvous, for a Gloo collective and for an MPI wait before "
          "giving up with an error");
ABSL_FLAG(std::string, gloo_iface, "",
          "network interface Gloo binds to (e.g. eth1); empty = the local address that routes "
          "to --master_ip");

namespace distlm::dist {

DistFlagValues DistFlagValuesFromFlags() {
  DistFlagValues v;
  v.backend = absl::GetFlag(FLAGS_backend);
  v.master_ip = absl::GetFlag(FLAGS_master_ip);
  v.master_port = absl::GetFlag(FLAGS_master_port);
  v.world_size = absl::GetFlag(FLAGS_world_size);
  v.local_rank = absl::GetFlag(FLAGS_local_rank);
  v.rank = absl::GetFlag(FLAGS_rank);
  v.dist_timeout_s = absl::GetFlag(FLAGS_dist_timeout_s);
  v.gloo_iface = absl::GetFlag(FLAGS_gloo_iface);
  return v;
}

DistConfig DistConfigFromFlagsAndEnv() {
  return ResolveDistConfig(DistFlagValuesFromFlags(), LauncherEnvironment());
}

}  // namespace distlm::dist
