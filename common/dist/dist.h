// Process groups for the stages: built from a DistConfig (flags or the launcher's
// environment, see dist_config.h and dist_flags.h) over Gloo, the project's own MPI group or
// NCCL, plus the checks that turn a mis-started job into one line instead of a hang.
//
//   auto ctx = distlm::dist::InitDistributed(distlm::dist::DistConfigFromFlagsAndEnv());
//   distlm::dist::CheckAgreement(ctx, "model config", config_json_text);
//   ctx.pg->allreduce(tensors)->wait();
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/dist/c10d_compat.h"
#include "common/dist/dist_config.h"
#include "common/runtime/errors.h"

namespace distlm::dist {

class Heartbeat;  // liveness beacons for LostRankError

struct DistContext {
  GroupPtr pg;  // see c10d_compat.h
  // The rendezvous store: a TCPStore (served by rank 0) for gloo and nccl; an in-process store
  // for a single gloo rank, which therefore never binds a port; null for mpi, where mpirun
  // does the rendezvous.
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0;
  int world_size = 1;
  DistConfig config;
  std::string backend_name;   // pg->getBackendName(): "gloo", "mpi" or "nccl"
  double init_seconds = 0;    // rendezvous and group construction, for logs
  std::shared_ptr<Heartbeat> heartbeat;  // multi-rank gloo/nccl only
};

// Builds the group. gloo and nccl rendezvous through the store on rank 0 (rendezvous.h); Gloo
// binds to --gloo_iface, or to the local address that routes to the master, and its
// collectives give up after --dist_timeout_s. For mpi, rank and size come from MPI itself and
// must agree with the config unless the config is the default one. nccl on a CPU-only LibTorch
// is a UserError. Every failure a user can cause is a distlm::UserError.
DistContext InitDistributed(const DistConfig& config);

// The group of this rank's part of `parts`, a partition of the world's ranks into groups (task
// 7c's tensor and data groups, each a row or a column of a grid). Every rank calls it with the
// same parts and `tag`, at the same point of its collectives; each part becomes a group of its
// own (Gloo and NCCL: over the rendezvous store under the tag and the part's index; MPI:
// MPI_Comm_split), whose rank r is the part's r-th rank. Parts that are not a partition of
// 0..world_size - 1 are a std::invalid_argument naming the first rank missing or repeated,
// raised before any rank waits; ranks passing different parts get CheckAgreement's UserError.
GroupPtr NewSubgroup(DistContext& ctx, const std::vector<std::vector<int>>& parts, const std::string& tag);

// A process that joins a running job late (task 8c): the store (StoreOfRunningJob in rendezvous.h)
// and no group: the ranks it joins make one with it (NewGroupOverStore). No heartbeat either until
// StartHeartbeat: its rank is a slot a lost process held, and beating as that rank while the
// others decide whether it is lost would keep the dead one alive in their eyes.
DistContext ConnectLate(const DistConfig& config);
// ctx's heartbeat as rank ctx.rank (ConnectLate's process, once it is let in).
void StartHeartbeat(DistContext& ctx);
// A Gloo group of `size` ranks that meet under `prefix` in ctx.store, this process its rank
// `rank`: every member calls it with the same prefix and size. Gloo's collectives in it give up
// after --dist_timeout_s.
GroupPtr NewGroupOverStore(const DistContext& ctx, const std::string& prefix, int rank, int size);
// The beats rank `rank` has sent so far (its heartbeat counter in the store): one a second
// while the process lives.
int64_t HeartbeatCount(c10d::Store& store, int rank);

// Every rank passes a (what, value) pair, e.g. ("model config", contents of config.json) or
// ("world size", "4"). Values travel as fixed-size fingerprints (length, two 64-bit hashes
// and the first 100 bytes) in one allgather over ctx.pg, so it works on every backend. When
// they differ, every rank throws the same UserError naming the ranks and their values (short
// values verbatim, long ones by hash), e.g.
//   ranks disagree on model config: ranks 0, 1, 3 have 3f2a09c1d4e5b6a7, rank 2 has 91c0...
void CheckAgreement(DistContext& ctx, const std::string& what, const std::string& value);

// For a collective that failed on this rank (Gloo: a peer closed its connection or the
// --dist_timeout_s deadline passed): finds which ranks are gone and returns the error to
// throw, e.g. "lost rank 2 (no heartbeat for 3 s) during a collective: <Gloo's message>".
// Ranks run a heartbeat through the store once a second; a rank whose heartbeat stops is lost
// (dead or frozen), and a store that no longer answers means rank 0 is lost. The first rank
// to decide records its finding in the store and the others repeat it, so a failure that
// cascades through the ring names the rank that started it. Takes about 3 s; rank 0 then
// stays until every rank not lost has read the finding, at most --dist_timeout_s (clamped to
// 2..10 s), since its exit takes the store with it. With mpi, where mpirun ends the job and
// names the rank itself, the error just carries the failure.
UserError LostRankError(DistContext& ctx, const std::exception& failure);

}  // namespace distlm::dist
