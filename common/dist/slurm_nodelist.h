// Slurm's node lists (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST) are compressed host lists:
// "node[01-04,07],login2", "rack[1-2]-gpu[1-8]". Rank 0 of an srun step runs on the first host
// of its step (with Slurm's block and cyclic distributions alike), so that host is the master.
#pragma once

#include <string>

namespace distlm::dist {

// The first host of a Slurm host list: "node[01-04,07],login2" -> "node01" (zero padding kept,
// as Slurm names the nodes), "rack[1-2]-gpu[3-8]" -> "rack1-gpu3". Throws distlm::UserError
// naming `variable` when the list is empty or its brackets do not close.
std::string FirstSlurmHost(const std::string& nodelist, const std::string& variable);

// The master's port for a Slurm job: every rank of the job computes the same one from
// SLURM_JOB_ID, and jobs sharing a node get different ones. 10000 + id mod 20000 stays below
// Linux's ephemeral range (32768 and up), where a connection's local port could take it first.
int SlurmMasterPort(long long job_id);

}  // namespace distlm::dist
