#include "common/dist/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/runtime/errors.h"

namespace distlm::dist {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kProtocolKey[] = "distlm/rdzv/protocol";
constexpr char kProtocolTag[] = "distlm-rendezvous-1";
constexpr char kVerdictKey[] = "distlm/rdzv/verdict";
constexpr char kVerdictReadKey[] = "distlm/rdzv/verdict_read";

std::string ClaimKey(int rank) { return absl::StrCat("distlm/rdzv/claim/", rank); }
std::string JoinKey(int rank) { return absl::StrCat("distlm/rdzv/join/", rank); }

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string Seconds(double s) { return absl::StrCat(s); }

std::string Master(const DistConfig& c) { return absl::StrCat(c.master_ip, ":", c.master_port); }

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

c10::intrusive_ptr<c10d::TCPStore> StartServer(const DistConfig& c) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(c.master_port);
  opts.isServer = true;
  opts.waitWorkers = false;
  opts.timeout = Millis(c.timeout_s);
  try {
    return c10::make_intrusive<c10d::TCPStore>(c.master_ip, opts);
  } catch (const std::exception& e) {
    std::string why = OneLine(e);
    // LibTorch 1.13 says "Address already in use", 2.x "EADDRINUSE ... address already in use".
    if (why.find("Address already in use") != std::string::npos ||
        why.find("EADDRINUSE") != std::string::npos) {
      throw UserError(absl::StrCat("rank 0 cannot host the rendezvous on port ", c.master_port,
                                   " (--master_port): the port is already in use on this "
                                   "host; pick another or stop whatever holds it"));
    }
    throw UserError(absl::StrCat("rank 0 cannot host the rendezvous on port ", c.master_port,
                                 " (--master_port): ", why));
  }
}

c10::intrusive_ptr<c10d::TCPStore> Connect(const DistConfig& c) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<uint16_t>(c.master_port);
  opts.isServer = false;
  opts.waitWorkers = false;
  opts.timeout = Millis(c.timeout_s);
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(c.master_ip, opts);
  } catch (const std::exception& e) {
    throw UserError(absl::StrCat("cannot reach the master at ", Master(c), " within ",
                                 Seconds(c.timeout_s), " s (--master_ip/--master_port): ",
                                 OneLine(e)));
  }
  // Something answered; make sure it is a distlm rank 0 and not another service.
  std::string tag;
  try {
    store->wait({kProtocolKey});
    tag = Text(store->get(kProtocolKey));
  } catch (const std::exception& e) {
    throw UserError(absl::StrCat("the master at ", Master(c), " (--master_ip/--master_port) ",
                                 "accepted the connection but did not answer as a distlm "
                                 "rank 0 within ", Seconds(c.timeout_s), " s: ", OneLine(e)));
  }
  if (tag != kProtocolTag) {
    throw UserError(absl::StrCat("the master at ", Master(c), " (--master_ip/--master_port) is "
                                 "not a distlm rank 0 (it answered \"",
                                 tag.substr(0, 40), "\")"));
  }
  return store;
}

// "rank 3" or "ranks 2, 3" (the first ten).
std::string RankList(const std::vector<int>& ranks) {
  std::vector<int> shown(ranks.begin(), ranks.begin() + std::min<size_t>(ranks.size(), 10));
  std::string s = absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(shown, ", "));
  if (ranks.size() > shown.size()) absl::StrAppend(&s, ", ...");
  return s;
}

// Rank 0's half of step 3: the verdict, "" when everyone joined and agrees.
std::string AwaitRanks(c10d::Store& store, const DistConfig& c) {
  const auto deadline = Clock::now() + Millis(c.timeout_s);
  std::vector<bool> joined(c.world_size, false);
  joined[0] = true;
  int remaining = c.world_size - 1;
  while (remaining > 0) {
    for (int r = 1; r < c.world_size; ++r) {
      if (joined[r] || !store.check({JoinKey(r)})) continue;
      joined[r] = true;
      --remaining;
      std::string theirs = Text(store.get(JoinKey(r)));
      int their_size = 0;
      if (!absl::SimpleAtoi(theirs, &their_size) || their_size != c.world_size) {
        return absl::StrCat("ranks disagree on world size: rank 0 has ", c.world_size, " (",
                            c.world_size_origin, "), rank ", r, " has ", theirs);
      }
    }
    if (remaining == 0) break;
    if (Clock::now() > deadline) {
      std::vector<int> missing;
      for (int r = 1; r < c.world_size; ++r) {
        if (!joined[r]) missing.push_back(r);
      }
      return absl::StrCat("only ", c.world_size - remaining, " of ", c.world_size,
                          " ranks joined within --dist_timeout_s=", Seconds(c.timeout_s),
                          " (missing: ", RankList(missing), ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return "";
}

}  // namespace

c10::intrusive_ptr<c10d::Store> StoreOfRunningJob(const DistConfig& config) { return Connect(config); }

int64_t RankClaims(c10d::Store& store, int rank) { return store.add(ClaimKey(rank), 0); }

std::string LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0 || found == nullptr) {
    throw UserError(absl::StrCat("--master_ip=", host, " does not resolve: ", gai_strerror(rc)));
  }
  std::string error;
  std::string address;
  for (addrinfo* a = found; a != nullptr && address.empty(); a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET6_ADDRSTRLEN] = {0};
      const void* raw = local.ss_family == AF_INET
                            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) address = text;
    } else {
      error = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (address.empty()) {
    throw UserError(absl::StrCat("no local address reaches --master_ip=", host, ": ", error));
  }
  return address;
}

c10::intrusive_ptr<c10d::Store> Rendezvous(const DistConfig& c) {
  c10::intrusive_ptr<c10d::TCPStore> store;
  if (c.rank == 0) {
    store = StartServer(c);
    store->set(kProtocolKey, Bytes(kProtocolTag));
  } else {
    store = Connect(c);
  }

  if (store->add(ClaimKey(c.rank), 1) != 1) {
    throw UserError(absl::StrCat("rank ", c.rank, " (", c.rank_origin,
                                 ") is taken: another process already joined the master at ",
                                 Master(c), " as rank ", c.rank));
  }
  store->set(JoinKey(c.rank), Bytes(std::to_string(c.world_size)));

  if (c.rank == 0) {
    std::string verdict = AwaitRanks(*store, c);
    store->set(kVerdictKey, Bytes(verdict.empty() ? absl::StrCat("ok ", c.world_size)
                                                  : "error " + verdict));
    if (!verdict.empty()) {
      // The others learn why only if the store outlives their read of the verdict.
      const auto linger = Clock::now() + std::chrono::seconds(2);
      int others = 0;
      for (int r = 1; r < c.world_size; ++r) others += store->check({JoinKey(r)}) ? 1 : 0;
      while (store->add(kVerdictReadKey, 0) < others && Clock::now() < linger) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      throw UserError(verdict);
    }
    return store;
  }

  std::string verdict;
  try {
    // Rank 0 may take the whole timeout to give up on a missing rank; allow for that.
    store->wait({kVerdictKey}, Millis(c.timeout_s + 5));
    verdict = Text(store->get(kVerdictKey));
    store->add(kVerdictReadKey, 1);
  } catch (const std::exception& e) {
    throw UserError(absl::StrCat("rank 0 at ", Master(c), " did not finish the rendezvous "
                                 "within --dist_timeout_s=", Seconds(c.timeout_s), " (+5 s): ",
                                 OneLine(e)));
  }
  if (verdict.rfind("error ", 0) == 0) throw UserError(verdict.substr(6));
  if (verdict != absl::StrCat("ok ", c.world_size)) {
    throw UserError(absl::StrCat("ranks disagree on world size: rank 0 has ", verdict.substr(3),
                                 ", rank ", c.rank, " has ", c.world_size, " (",
                                 c.world_size_origin, ")"));
  }
  return store;
}

}  // namespace distlm::dist
