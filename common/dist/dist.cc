#include "common/dist/dist.h"

#include <ifaddrs.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/dist/host_staging_group.h"
#include "common/dist/mpi_process_group.h"
#include "common/dist/rendezvous.h"
#include "common/runtime/device.h"

namespace distlm::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string Text(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string RankList(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

// ---- CheckAgreement's fingerprints ----

constexpr int kFingerprintBytes = 128;
constexpr int kPrefixBytes = kFingerprintBytes - 24;  // after length and two hashes

uint64_t Fnv1a(const std::string& s, uint64_t basis, bool reverse) {
  uint64_t h = basis;
  for (size_t i = 0; i < s.size(); ++i) {
    h ^= static_cast<unsigned char>(s[reverse ? s.size() - 1 - i : i]);
    h *= 1099511628211ull;
  }
  return h;
}

std::vector<uint8_t> Fingerprint(const std::string& value) {
  std::vector<uint8_t> fp(kFingerprintBytes, 0);
  uint64_t fields[3] = {value.size(), Fnv1a(value, 1469598103934665603ull, false),
                        Fnv1a(value, 0x9e3779b97f4a7c15ull, true)};
  std::memcpy(fp.data(), fields, sizeof(fields));
  std::memcpy(fp.data() + sizeof(fields), value.data(),
              std::min<size_t>(value.size(), kPrefixBytes));
  return fp;
}

// The value itself when it is short and printable, else its first hash in hex.
std::string Describe(const std::vector<uint8_t>& fp) {
  uint64_t fields[3];
  std::memcpy(fields, fp.data(), sizeof(fields));
  if (fields[0] <= static_cast<uint64_t>(kPrefixBytes)) {
    std::string v(fp.begin() + sizeof(fields), fp.begin() + sizeof(fields) + fields[0]);
    bool printable = !v.empty() && std::all_of(v.begin(), v.end(), [](char ch) {
      return ch >= 0x20 && ch < 0x7f;
    });
    if (printable) return v;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(fields[1]));
  return hex;
}

// ---- the Gloo device ----

// Names of this host's network interfaces that have an address.
std::vector<std::string> InterfaceNames() {
  std::vector<std::string> names;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return names;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    if (std::find(names.begin(), names.end(), i->ifa_name) == names.end()) {
      names.push_back(i->ifa_name);
    }
  }
  freeifaddrs(list);
  return names;
}

std::shared_ptr<::gloo::transport::Device> GlooDevice(const DistConfig& c) {
  if (!c.gloo_iface.empty()) {
    std::vector<std::string> names = InterfaceNames();
    if (std::find(names.begin(), names.end(), c.gloo_iface) == names.end()) {
      throw UserError(absl::StrCat("--gloo_iface=", c.gloo_iface, ": no such network interface "
                                   "with an address on this host (have: ",
                                   absl::StrJoin(names, ", "), ")"));
    }
    try {
      return c10d::ProcessGroupGloo::createDeviceForInterface(c.gloo_iface);
    } catch (const std::exception& e) {
      throw UserError(absl::StrCat("--gloo_iface=", c.gloo_iface, ": ", OneLine(e)));
    }
  }
  std::string address = c.world_size == 1 ? "127.0.0.1"
                                          : LocalAddressTowards(c.master_ip, c.master_port);
  try {
    return c10d::ProcessGroupGloo::createDeviceForHostname(address);
  } catch (const std::exception& e) {
    throw UserError(absl::StrCat("Gloo cannot use ", address, ", the local address that "
                                 "reaches --master_ip=", c.master_ip, " (pick one with "
                                 "--gloo_iface): ", OneLine(e)));
  }
}

// On 2.x a group holds one implementation per device type, so an nccl group sends CPU
// tensors through Gloo; on 1.13 an nccl group takes CUDA tensors only.
#ifdef DISTLM_C10D_BACKEND
constexpr bool kNcclGroupsHaveGlooForCpu = true;
#else
constexpr bool kNcclGroupsHaveGlooForCpu = false;
#endif

c10::intrusive_ptr<c10d::ProcessGroupGloo> GlooGroup(
    const DistConfig& config, const c10::intrusive_ptr<c10d::Store>& store,
    const std::shared_ptr<::gloo::transport::Device>& device) {
  auto options = c10d::ProcessGroupGloo::Options::create(Millis(config.timeout_s));
  options->devices.push_back(device);
  try {
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, config.rank, config.world_size,
                                                       options);
  } catch (const std::exception& e) {
    throw UserError(absl::StrCat("Gloo could not connect rank ", config.rank,
                                 " to its peers within --dist_timeout_s=", config.timeout_s,
                                 ": ", OneLine(e)));
  }
}

// CUDA tensors (--device=cuda) through host copies, for backends that take host tensors only
// (our MPI group) or only some collectives on CUDA (Gloo: broadcast and allreduce). Registered
// as its own backend type, since a group keeps one implementation per type. A no-op on 1.13.
void StageCudaThroughHost(const GroupPtr& pg, c10::intrusive_ptr<GroupImpl> impl) {
  AddDeviceImpl(pg, c10::DeviceType::CUDA, c10::make_intrusive<HostStagingGroup>(std::move(impl)),
                "host-staging");
}

// ---- heartbeats for LostRankError ----

constexpr char kLostKey[] = "distlm/lost/finding";
constexpr char kLostDoneKey[] = "distlm/lost/done";
constexpr auto kBeatPeriod = std::chrono::seconds(1);
constexpr int kLostWindowSeconds = 3;
std::string BeatKey(int rank) { return absl::StrCat("distlm/hb/", rank); }

}  // namespace

// A thread that bumps this rank's counter in the store once a second, over its own store
// connection with a short timeout so neither a hung master nor shutdown can block it long.
class Heartbeat {
 public:
  explicit Heartbeat(const DistConfig& c) : rank_(c.rank) {
    c10d::TCPStoreOptions opts;
    opts.port = static_cast<uint16_t>(c.master_port);
    opts.isServer = false;
    opts.waitWorkers = false;
    opts.timeout = std::chrono::seconds(5);
    store_ = c10::make_intrusive<c10d::TCPStore>(c.master_ip, opts);
    store_->add(BeatKey(rank_), 1);
    thread_ = std::thread([this] { Loop(); });
  }

  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  c10d::TCPStore& store() { return *store_; }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!cv_.wait_for(lock, kBeatPeriod, [&] { return stop_; })) {
      lock.unlock();
      try {
        store_->add(BeatKey(rank_), 1);
      } catch (const std::exception&) {
        return;  // the store is gone (rank 0 ended): nobody is listening any more
      }
      lock.lock();
    }
  }

  int rank_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

namespace {

// --backend=mpi: the world mpirun started, which must be the one the flags describe.
void InitMpi(const DistConfig& config, DistContext* out) {
  DistContext& ctx = *out;
  auto pg = MpiProcessGroup::CreateWorld(Millis(config.timeout_s));
  if (config.source != "default" &&
      (pg->getSize() != config.world_size || pg->getRank() != config.rank)) {
    throw UserError(absl::StrCat(
        "--backend=mpi: MPI started ", pg->getSize(), " processes with this one as rank ",
        pg->getRank(), ", but ", config.rank_origin, " and ", config.world_size_origin,
        " say rank ", config.rank, " of ", config.world_size,
        "; under mpirun leave --rank and --world_size unset"));
  }
  ctx.pg = AsGroup(pg, "mpi", {c10::DeviceType::CPU});
  StageCudaThroughHost(ctx.pg, pg);
}

// --backend=nccl: a CUDA build and a GPU for this rank, or a one-line error saying what is missing.
void CheckNcclCanRun(const DistConfig& config) {
  if (config.backend == "nccl" && !NcclAvailable()) {
    throw UserError(
        "--backend=nccl needs a CUDA build of LibTorch; this one is CPU-only: use gloo or "
        "mpi");
  }
  if (config.backend == "nccl") {
    const int gpus = runtime::CudaDeviceCount();
    if (gpus == 0) {
      throw UserError(
          "--backend=nccl needs a GPU per rank, and this CUDA build of LibTorch sees none (no "
          "GPU, no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them): use gloo or mpi");
    }
    if (config.local_rank >= gpus) {
      throw UserError(absl::StrCat(
          "--backend=nccl: local rank ", config.local_rank, " needs cuda:", config.local_rank,
          ", but this host has ", gpus, gpus == 1 ? " GPU" : " GPUs",
          "; NCCL cannot run two ranks on one GPU: start one rank per GPU, or use gloo"));
    }
  }
}

// --backend=gloo or nccl: the store (rendezvous at the master), the groups over it, the heartbeat.
void InitOverStore(const DistConfig& config, DistContext* out) {
  DistContext& ctx = *out;
  // Gloo's device: for the gloo backend, and on 2.x for an nccl group's CPU tensors too.
  std::shared_ptr<::gloo::transport::Device> device;
  if (config.backend == "gloo" || kNcclGroupsHaveGlooForCpu) device = GlooDevice(config);
  if (config.world_size == 1) {
    ctx.store = c10::make_intrusive<c10d::HashStore>();
  } else {
    ctx.store = Rendezvous(config);
  }
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("distlm/pg", ctx.store);
  if (config.backend == "gloo") {
    auto gloo = GlooGroup(config, prefixed, device);
    ctx.pg = AsGroup(gloo, "gloo", {c10::DeviceType::CPU});
    StageCudaThroughHost(ctx.pg, gloo);
  } else {
#ifdef USE_C10D_NCCL
    // One GPU per rank on a host: the local rank picks it.
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(config.local_rank));
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = Millis(config.timeout_s);
    auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(
        c10::make_intrusive<c10d::PrefixStore>("nccl", prefixed), config.rank,
        config.world_size, options);
    ctx.pg = AsGroup(nccl, "nccl", {c10::DeviceType::CUDA});
    // CPU tensors (the loss averaged for the log, agreement checks) through Gloo, as
    // PyTorch's "cuda:nccl,cpu:gloo".
    if (kNcclGroupsHaveGlooForCpu) {
      AddDeviceImpl(ctx.pg, c10::DeviceType::CPU,
                    GlooGroup(config, c10::make_intrusive<c10d::PrefixStore>("gloo", prefixed),
                              device),
                    "gloo");
    }
#endif
  }
  if (config.world_size > 1) {
    try {
      ctx.heartbeat = std::make_shared<Heartbeat>(config);
    } catch (const std::exception& e) {
      throw UserError(absl::StrCat("lost the master at ", config.master_ip, ":",
                                   config.master_port, " right after the rendezvous: ",
                                   OneLine(e)));
    }
  }
}

}  // namespace

DistContext InitDistributed(const DistConfig& config) {
  const auto start = Clock::now();
  DistContext ctx;
  ctx.config = config;
  if (config.backend == "mpi") {
    InitMpi(config, &ctx);
  } else if (config.backend == "gloo" || config.backend == "nccl") {
    CheckNcclCanRun(config);
    InitOverStore(config, &ctx);
  } else {
    throw UserError(absl::StrCat("--backend=", config.backend, " is not a backend: use gloo, mpi or nccl"));
  }
  ctx.rank = ctx.pg->getRank();
  ctx.world_size = ctx.pg->getSize();
  ctx.backend_name = ctx.pg->getBackendName();
  ctx.init_seconds = SecondsSince(start);
  return ctx;
}

GroupPtr NewSubgroup(DistContext& ctx, const std::vector<std::vector<int>>& parts, const std::string& tag) {
  std::vector<int> part_of(ctx.world_size, -1), index_in(ctx.world_size, -1);
  std::string described;
  for (size_t p = 0; p < parts.size(); ++p) {
    for (size_t i = 0; i < parts[p].size(); ++i) {
      const int r = parts[p][i];
      if (r < 0 || r >= ctx.world_size || part_of[r] >= 0) {
        throw std::invalid_argument(absl::StrCat("subgroups '", tag, "': rank ", r, " is ",
                                                 r < 0 || r >= ctx.world_size ? "not a rank of the world of "
                                                                              : "in two parts of the world of ",
                                                 ctx.world_size));
      }
      part_of[r] = static_cast<int>(p);
      index_in[r] = static_cast<int>(i);
    }
    absl::StrAppend(&described, p == 0 ? "" : " | ", absl::StrJoin(parts[p], ","));
  }
  for (int r = 0; r < ctx.world_size; ++r) {
    if (part_of[r] < 0) {
      throw std::invalid_argument(absl::StrCat("subgroups '", tag, "': rank ", r, " is in no part"));
    }
  }
  // Ranks that disagree on the parts would each wait for a different group: one line instead.
  if (ctx.world_size > 1) CheckAgreement(ctx, "subgroups '" + tag + "'", described);
  const int part = part_of[ctx.rank];
  const int size = static_cast<int>(parts[part].size());
  if (ctx.backend_name == "mpi") {
    auto* world = ImplOf<MpiProcessGroup>(ctx.pg);
    if (world == nullptr) throw std::logic_error("NewSubgroup: an mpi context without its MPI group");
    auto pg = MpiProcessGroup::CreateSplit(*world, part, index_in[ctx.rank]);
    GroupPtr group = AsGroup(pg, "mpi", {c10::DeviceType::CPU});
    StageCudaThroughHost(group, pg);
    return group;
  }
  DistConfig config = ctx.config;
  config.rank = index_in[ctx.rank];
  config.world_size = size;
  auto store = c10::make_intrusive<c10d::PrefixStore>(absl::StrCat("distlm/sub/", tag, "/", part), ctx.store);
  std::shared_ptr<::gloo::transport::Device> device;
  if (ctx.backend_name == "gloo" || kNcclGroupsHaveGlooForCpu) device = GlooDevice(ctx.config);
  if (ctx.backend_name == "gloo") {
    auto gloo = GlooGroup(config, store, device);
    GroupPtr group = AsGroup(gloo, "gloo", {c10::DeviceType::CPU});
    StageCudaThroughHost(group, gloo);
    return group;
  }
#ifdef USE_C10D_NCCL
  // As the world's nccl group (InitOverStore), over the part's ranks. Built, not run: no GPU here.
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = Millis(config.timeout_s);
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>("nccl", store),
                                                          config.rank, config.world_size, options);
  GroupPtr group = AsGroup(nccl, "nccl", {c10::DeviceType::CUDA});
  if (kNcclGroupsHaveGlooForCpu) {
    AddDeviceImpl(group, c10::DeviceType::CPU,
                  GlooGroup(config, c10::make_intrusive<c10d::PrefixStore>("gloo", store), device), "gloo");
  }
  return group;
#else
  throw UserError(absl::StrCat("subgroups over --backend=", ctx.backend_name, " are not supported"));
#endif
}

void CheckAgreement(DistContext& ctx, const std::string& what, const std::string& value) {
  auto options = at::TensorOptions().dtype(at::kByte);
  if (ctx.backend_name == "nccl") {
    options = options.device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(
                                                       ctx.config.local_rank)));
  }
  std::vector<uint8_t> mine = Fingerprint(value);
  std::vector<at::Tensor> input = {
      at::from_blob(mine.data(), {kFingerprintBytes}, at::TensorOptions().dtype(at::kByte))
          .to(options, /*non_blocking=*/false, /*copy=*/true)};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < ctx.world_size; ++r) output[0].push_back(at::empty({kFingerprintBytes}, options));
  ctx.pg->allgather(output, input)->wait();

  // Group the ranks by fingerprint, in order of each value's first rank.
  std::vector<std::vector<uint8_t>> values;
  std::vector<std::vector<int>> holders;
  for (int r = 0; r < ctx.world_size; ++r) {
    at::Tensor t = output[0][r].cpu().contiguous();
    std::vector<uint8_t> fp(t.data_ptr<uint8_t>(), t.data_ptr<uint8_t>() + kFingerprintBytes);
    auto it = std::find(values.begin(), values.end(), fp);
    if (it == values.end()) {
      values.push_back(fp);
      holders.push_back({r});
    } else {
      holders[it - values.begin()].push_back(r);
    }
  }
  if (values.size() == 1) return;
  std::vector<std::string> parts;
  for (size_t i = 0; i < values.size(); ++i) {
    parts.push_back(absl::StrCat(RankList(holders[i]), holders[i].size() == 1 ? " has " : " have ",
                                 Describe(values[i])));
  }
  throw UserError(absl::StrCat("ranks disagree on ", what, ": ", absl::StrJoin(parts, ", ")));
}

DistContext ConnectLate(const DistConfig& config) {
  if (config.backend != "gloo") {
    throw UserError(absl::StrCat("--backend=", config.backend, ": joining a running job needs gloo"));
  }
  const auto start = Clock::now();
  DistContext ctx;
  ctx.config = config;
  ctx.rank = config.rank;
  ctx.world_size = config.world_size;
  ctx.backend_name = "gloo";
  ctx.store = StoreOfRunningJob(config);
  ctx.init_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return ctx;
}

void StartHeartbeat(DistContext& ctx) {
  try {
    ctx.heartbeat = std::make_shared<Heartbeat>(ctx.config);
  } catch (const std::exception& e) {
    throw UserError(absl::StrCat("lost the master at ", ctx.config.master_ip, ":", ctx.config.master_port, ": ",
                                 OneLine(e)));
  }
}

GroupPtr NewGroupOverStore(const DistContext& ctx, const std::string& prefix, int rank, int size) {
  DistConfig config = ctx.config;
  config.rank = rank;
  config.world_size = size;
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, ctx.store);
  auto gloo = GlooGroup(config, store, GlooDevice(ctx.config));
  GroupPtr group = AsGroup(gloo, "gloo", {c10::DeviceType::CPU});
  StageCudaThroughHost(group, gloo);
  return group;
}

int64_t HeartbeatCount(c10d::Store& store, int rank) { return store.add(BeatKey(rank), 0); }

UserError LostRankError(DistContext& ctx, const std::exception& failure) {
  const std::string cause = OneLine(failure);
  if (!ctx.heartbeat) {
    if (ctx.backend_name == "mpi") {
      return UserError(absl::StrCat("a collective failed (mpirun names the lost rank when it "
                                    "ends the job): ", cause));
    }
    return UserError(absl::StrCat("a collective failed: ", cause));
  }
  c10d::TCPStore& store = ctx.heartbeat->store();
  std::string finding;
  try {
    if (store.check({kLostKey})) {
      finding = Text(store.get(kLostKey));
    } else {
      auto beats = [&] {
        std::vector<int64_t> b(ctx.world_size, 0);
        for (int r = 0; r < ctx.world_size; ++r) {
          if (r != ctx.rank) b[r] = store.add(BeatKey(r), 0);
        }
        return b;
      };
      std::vector<int64_t> before = beats();
      std::this_thread::sleep_for(std::chrono::seconds(kLostWindowSeconds));
      std::vector<int64_t> after = beats();
      std::vector<int> lost;
      for (int r = 0; r < ctx.world_size; ++r) {
        if (r != ctx.rank && after[r] == before[r]) lost.push_back(r);
      }
      // Someone may have decided meanwhile; the first finding stands.
      std::string mine = lost.empty() ? std::string("none")
                                      : absl::StrCat(lost.size(), " ", RankList(lost),
                                                     " (no heartbeat for ",
                                                     kLostWindowSeconds, " s)");
      finding = Text(store.compareSet(kLostKey, {}, Bytes(mine)));
    }
    store.add(kLostDoneKey, 1);
    if (ctx.rank == 0) {
      // Keep the store up while the others come to read the finding.
      int lost_count = 0;
      absl::SimpleAtoi(finding.substr(0, finding.find(' ')), &lost_count);
      // Ranks still inside a collective fail within --dist_timeout_s (Gloo's deadline) or
      // as soon as a neighbour exits, so waiting longer than that serves nobody.
      const auto linger = Clock::now() + Millis(std::clamp(ctx.config.timeout_s, 2.0, 10.0));
      while (store.add(kLostDoneKey, 0) < ctx.world_size - lost_count &&
             Clock::now() < linger) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  } catch (const std::exception& e) {
    finding = absl::StrCat("1 rank 0 (its store at ", ctx.config.master_ip, ":",
                           ctx.config.master_port, " stopped answering: ", OneLine(e), ")");
  }
  if (finding == "none") {
    return UserError(absl::StrCat("a collective failed while every rank still answers: ", cause));
  }
  return UserError(
      absl::StrCat("lost ", finding.substr(finding.find(' ') + 1), " during a collective: ", cause));
}

}  // namespace distlm::dist
