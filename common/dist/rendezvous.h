// How the ranks find each other: a c10d TCPStore hosted by rank 0 at --master_ip:--master_port,
// and a short protocol on top of it that turns every way a start can go wrong into one line.
//
// Protocol (keys under "distlm/rdzv/"):
//   1. Rank 0 starts the store (waitWorkers off: c10d's own wait would only say "timed out")
//      and publishes a protocol tag; the others connect, retrying until --dist_timeout_s, and
//      read the tag, so a port that answers but is not a distlm rank 0 is caught.
//   2. Each rank claims its rank with an atomic add (a second claimant is told the rank is
//      taken) and then publishes its world size.
//   3. Rank 0 polls for ranks 1..W-1, comparing world sizes as they arrive, and publishes a
//      verdict: ok, "ranks disagree on world size: ...", or "only K of W ranks joined ...".
//      Every rank reads it, so all fail with the same message; rank 0 lingers (at most 2 s)
//      until they have read a bad verdict, since its exit takes the store with it.
// A rank whose world size is larger than rank 0's, with a rank outside rank 0's world, is not
// waited for; it reads the verdict and fails on its own with the same kind of message.
#pragma once

#include <string>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "common/dist/dist_config.h"

namespace distlm::dist {

// Runs the protocol above and returns the store (a TCPStore: the server on rank 0). Throws
// distlm::UserError: unreachable master, port in use on rank 0, rank taken, missing ranks,
// world-size disagreement.
c10::intrusive_ptr<c10d::Store> Rendezvous(const DistConfig& config);

// The store of a job that is already running, for a process that starts after the others (task
// 8c's joiner): a client of rank 0's store, checked to be a distlm rank 0's as in step 1; no rank
// is claimed and nothing waits for the others. Throws UserError as step 1 does.
c10::intrusive_ptr<c10d::Store> StoreOfRunningJob(const DistConfig& config);

// How many processes have claimed `rank` in this rendezvous store (1 in a healthy job).
int64_t RankClaims(c10d::Store& store, int rank);

// The local address (IPv4 or IPv6 text) this host uses to reach host:port. Nothing is sent:
// a UDP socket is connected and asked for its own address. Throws UserError naming
// --master_ip when the host does not resolve or has no route.
std::string LocalAddressTowards(const std::string& host, int port);

}  // namespace distlm::dist
