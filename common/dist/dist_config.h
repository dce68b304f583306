// Where this process sits in the job: backend, master address, rank and world size, resolved
// from explicit flag values and the launcher's environment (torchrun, Open MPI, Slurm).
//
// Resolution, field by field (the first that applies wins):
//   rank        --rank; the launcher's global rank (RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID);
//               --local_rank (the handout runs one rank per CloudLab node, so there the local
//               rank is the global rank); 0.
//   world_size  --world_size (> 0); the launcher's size (WORLD_SIZE, OMPI_COMM_WORLD_SIZE,
//               SLURM_NTASKS); 1.
//   local_rank  --local_rank; LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID; 0.
//   master      --master_ip / --master_port; MASTER_ADDR / MASTER_PORT; when Slurm started
//               the ranks, the first host of SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST) and
//               a port from SLURM_JOB_ID (slurm_nodelist.h); 127.0.0.1:29500.
// When several launchers' variables are present the innermost launcher wins: torchrun (run
// inside an allocation) over Open MPI over Slurm, because the outer launcher's variables then
// describe its tasks, not the ranks.
#pragma once

#include <map>
#include <string>

namespace distlm::dist {

// The raw values of the dist flags (see dist_flags.h); the sentinels mean "not given".
struct DistFlagValues {
  std::string backend = "gloo";
  std::string master_ip;        // "" = MASTER_ADDR, else 127.0.0.1
  int master_port = 0;          // 0 = MASTER_PORT, else 29500
  int world_size = 0;           // 0 = from the launcher's environment, else 1
  int local_rank = -1;          // -1 = not given
  int rank = -1;                // -1 = not given
  double dist_timeout_s = 300;  // rendezvous, Gloo collectives, MPI waits
  std::string gloo_iface;       // "" = the local address that routes to the master
};

struct DistConfig {
  std::string backend = "gloo";  // "gloo", "mpi" or "nccl"
  std::string master_ip = "127.0.0.1";
  int master_port = 29500;
  int world_size = 1;
  int rank = 0;
  int local_rank = 0;
  double timeout_s = 300;
  std::string gloo_iface;
  // Where the rank came from: "flags", "torchrun", "openmpi", "slurm" or "default".
  std::string source = "default";
  // How rank and world size were given, for error messages, e.g. "--rank=3" or "RANK=3".
  std::string rank_origin = "default rank 0";
  std::string world_size_origin = "default world size 1";
  // Where the master's address and port came from: "--master_ip", "MASTER_ADDR",
  // "SLURM_STEP_NODELIST", "default"; "--master_port", "MASTER_PORT", "SLURM_JOB_ID", "default".
  std::string master_ip_origin = "default";
  std::string master_port_origin = "default";
};

// One line for rank 0's start-up: "4 ranks (slurm: SLURM_PROCID, SLURM_NTASKS=4), master
// node01 (SLURM_STEP_NODELIST) port 12345 (SLURM_JOB_ID)".
std::string DescribeDistConfig(const DistConfig& c);

// Resolves and validates. Throws distlm::UserError naming the flag or variable at fault: bad
// backend, negative or non-numeric values, rank >= world size, a port outside 1..65535, a
// launcher that set a rank without a size, nccl without a CUDA LibTorch.
DistConfig ResolveDistConfig(const DistFlagValues& flags,
                             const std::map<std::string, std::string>& env);

// The variables ResolveDistConfig reads, taken from this process's environment.
std::map<std::string, std::string> LauncherEnvironment();

// True when this LibTorch was built with c10d's NCCL backend (a CUDA build).
bool NcclAvailable();

}  // namespace distlm::dist
