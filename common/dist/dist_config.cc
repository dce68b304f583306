#include "common/dist/dist_config.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/dist/slurm_nodelist.h"
#include "common/runtime/errors.h"

namespace distlm::dist {
namespace {

// One launcher's description of this process, when its variables are present.
struct Launcher {
  std::string name;           // "torchrun", "openmpi", "slurm"
  std::string rank_var, size_var, local_rank_var;
};

const std::vector<Launcher>& Launchers() {
  // Innermost first: see the header for why.
  static const std::vector<Launcher> kLaunchers = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
  };
  return kLaunchers;
}

std::optional<std::string> Lookup(const std::map<std::string, std::string>& env,
                                  const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// An integer from the environment; `who` names the launcher for the message.
std::optional<int> EnvInt(const std::map<std::string, std::string>& env, const std::string& name,
                          const std::string& who, int min_value) {
  auto value = Lookup(env, name);
  if (!value) return std::nullopt;
  int parsed = 0;
  if (!absl::SimpleAtoi(*value, &parsed)) {
    throw UserError(absl::StrCat("environment variable ", name, "=\"", *value, "\" (", who,
                                 ") is not an integer"));
  }
  if (parsed < min_value) {
    throw UserError(absl::StrCat("environment variable ", name, "=", parsed, " (", who,
                                 ") must be at least ", min_value));
  }
  return parsed;
}

void CheckBackend(const std::string& backend) {
  if (backend == "gloo" || backend == "mpi") return;
  if (backend == "nccl") {
    if (NcclAvailable()) return;
    throw UserError(
        "--backend=nccl needs a CUDA build of LibTorch; this one is CPU-only: use gloo or mpi");
  }
  throw UserError(absl::StrCat("--backend=", backend, " is not a backend: use gloo, mpi or nccl"));
}

}  // namespace

bool NcclAvailable() {
#ifdef USE_C10D_NCCL
  return true;
#else
  return false;
#endif
}

std::map<std::string, std::string> LauncherEnvironment() {
  std::vector<std::string> names = {"MASTER_ADDR", "MASTER_PORT", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                    "SLURM_JOB_ID"};
  for (const Launcher& l : Launchers()) {
    names.push_back(l.rank_var);
    names.push_back(l.size_var);
    names.push_back(l.local_rank_var);
  }
  std::map<std::string, std::string> env;
  for (const std::string& name : names) {
    if (const char* v = std::getenv(name.c_str())) env[name] = v;
  }
  return env;
}

DistConfig ResolveDistConfig(const DistFlagValues& flags,
                             const std::map<std::string, std::string>& env) {
  DistConfig c;
  CheckBackend(flags.backend);
  c.backend = flags.backend;

  // Flags first: -1 and 0 are the "not given" sentinels, anything below them is a mistake.
  if (flags.rank < -1) throw UserError(absl::StrCat("--rank=", flags.rank, " is negative"));
  if (flags.local_rank < -1) {
    throw UserError(absl::StrCat("--local_rank=", flags.local_rank, " is negative"));
  }
  if (flags.world_size < 0) {
    throw UserError(absl::StrCat("--world_size=", flags.world_size,
                                 " is negative (0 = take it from the launcher's environment)"));
  }
  if (flags.master_port < 0 || flags.master_port > 65535) {
    throw UserError(absl::StrCat("--master_port=", flags.master_port,
                                 " is not a TCP port (1..65535; 0 = MASTER_PORT or 29500)"));
  }
  if (!(flags.dist_timeout_s > 0) || !std::isfinite(flags.dist_timeout_s)) {
    throw UserError(absl::StrCat("--dist_timeout_s=", flags.dist_timeout_s,
                                 " must be a positive number of seconds"));
  }
  c.timeout_s = flags.dist_timeout_s;
  c.gloo_iface = flags.gloo_iface;

  // The innermost launcher whose variables are present.
  const Launcher* launcher = nullptr;
  for (const Launcher& l : Launchers()) {
    if (Lookup(env, l.rank_var) || Lookup(env, l.size_var)) {
      launcher = &l;
      break;
    }
  }
  std::optional<int> env_rank, env_size, env_local_rank;
  if (launcher != nullptr) {
    env_rank = EnvInt(env, launcher->rank_var, launcher->name, 0);
    env_size = EnvInt(env, launcher->size_var, launcher->name, 1);
    env_local_rank = EnvInt(env, launcher->local_rank_var, launcher->name, 0);
  }

  if (flags.world_size > 0) {
    c.world_size = flags.world_size;
    c.world_size_origin = absl::StrCat("--world_size=", flags.world_size);
  } else if (env_size) {
    c.world_size = *env_size;
    c.world_size_origin = absl::StrCat(launcher->size_var, "=", *env_size);
  }

  if (flags.rank >= 0) {
    c.rank = flags.rank;
    c.source = "flags";
    c.rank_origin = absl::StrCat("--rank=", flags.rank);
  } else if (env_rank) {
    c.rank = *env_rank;
    c.source = launcher->name;
    c.rank_origin = absl::StrCat(launcher->rank_var, "=", *env_rank);
  } else if (flags.local_rank >= 0) {
    // The handout's command line: one rank per node, so the local rank is the global one.
    c.rank = flags.local_rank;
    c.source = "flags";
    c.rank_origin = absl::StrCat("--local_rank=", flags.local_rank,
                                 ", used as the global rank since --rank is absent");
  }

  if (flags.local_rank >= 0) {
    c.local_rank = flags.local_rank;
  } else if (env_local_rank) {
    c.local_rank = *env_local_rank;
  }

  if (launcher != nullptr && c.source == launcher->name && flags.world_size <= 0 && !env_size) {
    throw UserError(absl::StrCat(launcher->rank_var, "=", c.rank, " (", launcher->name,
                                 ") is set but ", launcher->size_var,
                                 " is not: set it or pass --world_size"));
  }
  if (c.source == "default" && c.world_size > 1) {
    throw UserError(absl::StrCat(c.world_size_origin,
                                 " but no rank was given: pass --rank (or --local_rank), or "
                                 "start the ranks with torchrun, mpirun or srun"));
  }
  if (c.rank >= c.world_size) {
    throw UserError(absl::StrCat("rank ", c.rank, " (", c.rank_origin,
                                 ") is not below the world size ", c.world_size, " (",
                                 c.world_size_origin, ")"));
  }

  // Slurm sets no MASTER_ADDR/PORT: when it started the ranks, the master is the first host of
  // the step (rank 0's) and the port comes from the job id, the same on every rank.
  const bool slurm = c.source == "slurm";
  if (!flags.master_ip.empty()) {
    c.master_ip = flags.master_ip;
    c.master_ip_origin = "--master_ip";
  } else if (auto addr = Lookup(env, "MASTER_ADDR")) {
    c.master_ip = *addr;
    c.master_ip_origin = "MASTER_ADDR";
  } else if (slurm) {
    for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}) {
      if (auto nodes = Lookup(env, name)) {
        c.master_ip = FirstSlurmHost(*nodes, name);
        c.master_ip_origin = name;
        break;
      }
    }
  }
  if (flags.master_port > 0) {
    c.master_port = flags.master_port;
    c.master_port_origin = "--master_port";
  } else if (auto port = EnvInt(env, "MASTER_PORT", "the master's port", 1)) {
    if (*port > 65535) {
      throw UserError(absl::StrCat("environment variable MASTER_PORT=", *port,
                                   " is not a TCP port (1..65535)"));
    }
    c.master_port = *port;
    c.master_port_origin = "MASTER_PORT";
  } else if (slurm) {
    if (auto id = EnvInt(env, "SLURM_JOB_ID", "slurm", 0)) {
      c.master_port = SlurmMasterPort(*id);
      c.master_port_origin = "SLURM_JOB_ID";
    }
  }
  return c;
}

std::string DescribeDistConfig(const DistConfig& c) {
  return absl::StrCat(c.world_size, " ranks (", c.source, ": ", c.world_size_origin, "), master ", c.master_ip, " (",
                      c.master_ip_origin, ") port ", c.master_port, " (", c.master_port_origin, ")");
}

}  // namespace distlm::dist
