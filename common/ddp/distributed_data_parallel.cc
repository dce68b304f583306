#include "common/ddp/distributed_data_parallel.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <unordered_set>
#include <utility>

#include "common/runtime/errors.h"

namespace distlm::ddp {
namespace {

using Clock = std::chrono::steady_clock;

// PyTorch's broadcast_bucket_size for _sync_module_states: tensors are flattened into chunks of
// at most this many bytes, one broadcast each.
constexpr int64_t kBroadcastChunkBytes = int64_t{250} << 20;
// How many names an error lists before "and N more".
constexpr size_t kMaxNamesInError = 8;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int64_t Nanos(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string DtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return "float32";
    case c10::ScalarType::Double:
      return "float64";
    case c10::ScalarType::Half:
      return "float16";
    case c10::ScalarType::BFloat16:
      return "bfloat16";
    default:
      return c10::toString(t);
  }
}

std::string MiB(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string NameList(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < kMaxNamesInError; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kMaxNamesInError) out += " and " + std::to_string(names.size() - kMaxNamesInError) + " more";
  return out;
}

// Every rank must hold the same tensors (count, shapes, dtypes), or the broadcast below would
// pair up wrong pieces or hang. One all-reduce of [x, -x] with MAX gives every rank both the
// largest and the smallest value of each x; they agree exactly when all ranks agree.
void CheckSameStructure(c10d::ProcessGroup& pg, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  int64_t numel = 0;
  std::string shapes;
  for (const auto& [name, t] : tensors) {
    numel += t.numel();
    shapes += DtypeName(t.scalar_type()) + c10::str(t.sizes()) + ";";
  }
  // Masked so that negating cannot overflow.
  const int64_t hash = static_cast<int64_t>(std::hash<std::string>{}(shapes) & ((uint64_t{1} << 62) - 1));
  const int64_t count = static_cast<int64_t>(tensors.size());
  std::vector<at::Tensor> v = {torch::tensor({count, numel, hash, -count, -numel, -hash}, torch::kLong)};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::MAX;
  pg.allreduce(v, opts)->wait();
  auto a = v[0].accessor<int64_t, 1>();
  if (a[0] != -a[3] || a[1] != -a[4] || a[2] != -a[5]) {
    throw UserError("DistributedDataParallel: the ranks' modules differ: this rank (" + std::to_string(pg.getRank()) +
                    ") has " + std::to_string(count) + " parameters and buffers with " + std::to_string(numel) +
                    " elements; across ranks the counts range over " + std::to_string(-a[3]) + ".." +
                    std::to_string(a[0]) + " and the elements over " + std::to_string(-a[4]) + ".." +
                    std::to_string(a[1]) +
                    (a[0] == -a[3] && a[1] == -a[4] ? " (same sizes, different shapes or dtypes)" : ""));
  }
}

// rank 0's values into every rank's tensors: consecutive tensors of one dtype are flattened
// into chunks of at most kBroadcastChunkBytes (a tensor bigger than that is a chunk alone),
// one broadcast per chunk.
void BroadcastFromRankZero(c10d::ProcessGroup& pg, const std::vector<at::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  size_t begin = 0;
  while (begin < tensors.size()) {
    size_t end = begin;
    int64_t bytes = 0;
    while (end < tensors.size() && tensors[end].scalar_type() == tensors[begin].scalar_type() &&
           (end == begin || bytes + static_cast<int64_t>(tensors[end].nbytes()) <= kBroadcastChunkBytes)) {
      bytes += static_cast<int64_t>(tensors[end].nbytes());
      ++end;
    }
    std::vector<at::Tensor> pieces;
    for (size_t i = begin; i < end; ++i) pieces.push_back(tensors[i].reshape({-1}));
    std::vector<at::Tensor> flat = {torch::cat(pieces)};
    c10d::BroadcastOptions opts;
    opts.rootRank = 0;
    pg.broadcast(flat, opts)->wait();
    if (pg.getRank() != 0) {
      int64_t offset = 0;
      for (size_t i = begin; i < end; ++i) {
        const int64_t n = tensors[i].numel();
        tensors[i].copy_(flat[0].narrow(0, offset, n).view(tensors[i].sizes()));
        offset += n;
      }
    }
    begin = end;
  }
}

}  // namespace

struct DistributedDataParallel::Param {
  std::string name;
  at::Tensor tensor;
  size_t bucket = 0;
  int64_t offset = 0;  // in the bucket's flat buffer, in elements
};

struct DistributedDataParallel::Bucket {
  std::vector<size_t> params;  // into params_, in the order backward fills them
  at::Tensor flat;             // the all-reduced buffer: every gradient of the bucket, back to back
};

// One synchronised backward in progress.
struct DistributedDataParallel::Pass {
  SyncStats stats;
  std::vector<uint8_t> ready;   // per parameter: its gradient is in the bucket
  std::vector<size_t> pending;  // per bucket: gradients still missing
  size_t next_bucket = 0;       // buckets are launched in order; this one is next
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  // Completion times (ns since the clock's epoch, 0 = not yet), written by the backend's
  // threads; shared with their callbacks so a late one never writes into freed memory.
  std::shared_ptr<std::vector<std::atomic<int64_t>>> completed_ns;
  // Held by the final callback queued on the autograd engine: it expires when that backward's
  // graph task is gone. A pass whose token expired without finishing belongs to a backward
  // that failed part-way.
  std::weak_ptr<void> alive;
};

int64_t SyncStats::buckets_started_before_backward_end() const {
  int64_t n = 0;
  for (const auto& t : launched) n += t < backward_end ? 1 : 0;
  return n;
}

double SyncStats::backward_ms() const { return Ms(backward_end - first_gradient); }

namespace {

// Length of the union of [launched[i], completed[i]] intersected with [from, to].
double UnionMs(const std::vector<Clock::time_point>& launched, const std::vector<Clock::time_point>& completed,
               Clock::time_point from, Clock::time_point to) {
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  for (size_t i = 0; i < launched.size() && i < completed.size(); ++i) {
    auto a = std::max(launched[i], from), b = std::min(completed[i], to);
    if (a < b) spans.emplace_back(a, b);
  }
  std::sort(spans.begin(), spans.end());
  double total = 0;
  Clock::time_point covered = Clock::time_point::min();
  for (const auto& [a, b] : spans) {
    auto start = std::max(a, covered);
    if (b > start) {
      total += Ms(b - start);
      covered = b;
    }
  }
  return total;
}

}  // namespace

double SyncStats::comm_busy_ms() const {
  return UnionMs(launched, completed, Clock::time_point::min(), Clock::time_point::max());
}
double SyncStats::comm_hidden_ms() const {
  return UnionMs(launched, completed, Clock::time_point::min(), backward_end);
}
double SyncStats::comm_exposed_ms() const {
  return UnionMs(launched, completed, backward_end, Clock::time_point::max());
}

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                 c10::intrusive_ptr<c10d::ProcessGroup> pg, DdpOptions options)
    : module_(std::move(module)), pg_(std::move(pg)), options_(options) {
  if (!module_) throw UserError("DistributedDataParallel: the module is null");
  if (!pg_) throw UserError("DistributedDataParallel: the process group is null (initialise it first)");

  // Parameters once each (a shared parameter is registered under several names), then buffers.
  std::vector<std::pair<std::string, at::Tensor>> state;
  std::unordered_set<const void*> seen;
  for (const auto& p : module_->named_parameters(/*recurse=*/true)) {
    if (seen.insert(p.value().unsafeGetTensorImpl()).second) state.emplace_back(p.key(), p.value());
  }
  const size_t num_params = state.size();
  for (const auto& b : module_->named_buffers(/*recurse=*/true)) {
    if (seen.insert(b.value().unsafeGetTensorImpl()).second) state.emplace_back(b.key(), b.value());
  }
  // One device for the whole module (--device): the buckets live there too.
  const at::Device device = state.empty() ? at::Device(at::kCPU) : state.front().second.device();
  for (const auto& [name, t] : state) {
    if (t.device() != device) {
      throw UserError("DistributedDataParallel: " + name + " is on " + t.device().str() + ", " +
                      state.front().first + " on " + device.str() + "; put the whole module on one device");
    }
    if (t.is_sparse()) throw UserError("DistributedDataParallel: " + name + " is sparse; not supported");
  }

  // Same model everywhere, then rank 0's values everywhere.
  if (pg_->getSize() > 1) {
    CheckSameStructure(*pg_, state);
    std::vector<at::Tensor> tensors;
    for (const auto& [name, t] : state) tensors.push_back(t);
    BroadcastFromRankZero(*pg_, tensors);
  }

  std::vector<ParamSize> sizes;
  for (size_t i = 0; i < num_params; ++i) {
    const at::Tensor& t = state[i].second;
    if (!t.requires_grad()) continue;  // frozen: nothing to synchronise
    Param p;
    p.name = state[i].first;
    p.tensor = t;
    params_.push_back(std::move(p));
    sizes.push_back({static_cast<int64_t>(t.nbytes()), t.scalar_type()});
  }
  if (params_.empty()) throw UserError("DistributedDataParallel: the module has no parameters that require grad");

  for (const BucketPlan& plan : AssignBuckets(sizes, options_.first_bucket_cap_bytes, options_.bucket_cap_bytes)) {
    Bucket b;
    BucketInfo info;
    int64_t numel = 0;
    for (size_t i : plan.params) {
      params_[i].bucket = buckets_.size();
      params_[i].offset = numel;
      numel += params_[i].tensor.numel();
      info.names.push_back(params_[i].name);
    }
    b.params = plan.params;
    b.flat = torch::zeros({numel}, torch::TensorOptions().dtype(plan.dtype).device(device));
    info.numel = numel;
    info.bytes = plan.bytes;
    info.cap = plan.cap;
    info.dtype = DtypeName(plan.dtype);
    buckets_.push_back(std::move(b));
    bucket_info_.push_back(std::move(info));
  }

  used_since_sync_.assign(params_.size(), 0);
  // hooks_ is the last member: if a hook cannot be installed, the ones already installed (which
  // point at this object) are removed first while the constructor unwinds.
  hooks_.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].tensor.is_leaf()) {
      throw UserError("DistributedDataParallel: parameter " + params_[i].name +
                      " is not a leaf tensor; cannot hook its gradient");
    }
    hooks_.emplace_back(params_[i].tensor, [this, i] { OnGradientAccumulated(i); });
  }
}

// The hooks go first (hooks_ is the last member). An all-reduce still in flight (after a failed
// backward) holds its own reference to its bucket's buffer, so nothing here needs to wait for it.
DistributedDataParallel::~DistributedDataParallel() = default;

std::string DistributedDataParallel::DescribeBuckets() const {
  std::string out;
  for (size_t b = 0; b < bucket_info_.size(); ++b) {
    const BucketInfo& info = bucket_info_[b];
    out += "bucket " + std::to_string(b) + ": " + std::to_string(info.names.size()) + " tensors, " + MiB(info.bytes) +
           " " + info.dtype + " (cap " + MiB(info.cap) + "): " + info.names.front() +
           (info.names.size() > 1 ? " .. " + info.names.back() : "") + "\n";
  }
  return out;
}

void DistributedDataParallel::OnGradientAccumulated(size_t index) {
  if (require_sync_ && !broken_.empty()) throw UserError(broken_);
  if (require_sync_ && pass_ && pass_->alive.expired()) {
    // The backward that started this pass failed before its end. If it launched all-reduces,
    // this rank is ahead of the others by those collectives (and they may still be writing
    // into the buckets): there is no safe way on.
    if (pass_->next_bucket > 0) {
      broken_ = "DistributedDataParallel: a backward pass failed after launching " +
                std::to_string(pass_->next_bucket) + " of " + std::to_string(buckets_.size()) +
                " bucket all-reduces; the ranks' collectives are out of step, so training cannot go on";
      ResetPass();
      throw UserError(broken_);
    }
    ResetPass();
  }
  if (options_.find_unused_parameters) used_since_sync_[index] = 1;
  if (!require_sync_) return;  // no_sync: the gradient stays in .grad and accumulates
  if (!pass_) {
    pass_ = std::make_unique<Pass>();
    pass_->stats.first_gradient = Clock::now();
    pass_->stats.launched.resize(buckets_.size());
    pass_->stats.completed.resize(buckets_.size());
    pass_->ready.assign(params_.size(), 0);
    for (const Bucket& b : buckets_) pass_->pending.push_back(b.params.size());
    pass_->completed_ns = std::make_shared<std::vector<std::atomic<int64_t>>>(buckets_.size());
    for (auto& c : *pass_->completed_ns) c.store(0);
    auto token = std::make_shared<int>(0);
    pass_->alive = token;
    // Runs when the engine has finished every node of this backward.
    torch::autograd::Engine::get_default_engine().queue_callback([this, token] { FinishBackward(); });
  }
  if (pass_->ready[index]) {
    throw UserError("DistributedDataParallel: parameter " + params_[index].name +
                    " received its gradient twice in one backward pass (backward through the same graph twice "
                    "between synchronisations is not supported)");
  }
  CopyIntoBucket(index);
  pass_->ready[index] = 1;
  --pass_->pending[params_[index].bucket];
  LaunchReadyBuckets();
}

void DistributedDataParallel::CopyIntoBucket(size_t index) {
  torch::NoGradGuard no_grad;
  const Param& p = params_[index];
  at::Tensor view = buckets_[p.bucket].flat.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.sizes());
  const at::Tensor& grad = p.tensor.grad();
  if (!grad.defined()) {
    view.zero_();
    return;
  }
  // Averaged as it goes in (as PyTorch does), in the same pass as the copy: the all-reduce
  // then sums averages.
  if (pg_->getSize() > 1) {
    at::div_out(view, grad, at::scalar_tensor(pg_->getSize(), view.options()));
  } else {
    view.copy_(grad);
  }
}

void DistributedDataParallel::LaunchReadyBuckets() {
  Pass& pass = *pass_;
  while (pass.next_bucket < buckets_.size() && pass.pending[pass.next_bucket] == 0) {
    const size_t b = pass.next_bucket++;
    pass.stats.launched[b] = Clock::now();
    std::vector<at::Tensor> tensors = {buckets_[b].flat};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::SUM;
    c10::intrusive_ptr<c10d::Work> work = pg_->allreduce(tensors, opts);
    try {
      // Runs on the backend's thread as it completes the work (or here, if it already has).
      work->getFuture()->addCallback(
          [done = pass.completed_ns, b](c10::ivalue::Future&) { (*done)[b].store(Nanos(Clock::now())); });
    } catch (const std::exception&) {
      pass.stats.completion_exact = false;  // a backend without futures
    }
    pass.works.push_back(std::move(work));
  }
}

void DistributedDataParallel::ResetPass() {
  pass_.reset();
  if (options_.find_unused_parameters) std::fill(used_since_sync_.begin(), used_since_sync_.end(), 0);
}

void DistributedDataParallel::ThrowUnused() {
  std::vector<std::string> names;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!pass_->ready[i]) names.push_back(params_[i].name);
  }
  const size_t total = params_.size();
  std::string message = "DistributedDataParallel: " + std::to_string(names.size()) + " of " + std::to_string(total) +
                        " parameters received no gradient in this backward pass: " + NameList(names) +
                        "; make every parameter take part in the loss, or construct DistributedDataParallel with "
                        "find_unused_parameters = true";
  // Buckets already launched are ahead of the ranks that did not fail (if any).
  if (pass_->next_bucket > 0) broken_ = message;
  ResetPass();
  throw UserError(message);
}

void DistributedDataParallel::FinishBackward() {
  Pass& pass = *pass_;
  SyncStats& st = pass.stats;
  st.backward_end = Clock::now();

  // Parameters whose hook did not run: an error, or (find_unused_parameters) they join with
  // whatever .grad holds, so that their buckets can go.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (pass.ready[i]) continue;
    if (!options_.find_unused_parameters) ThrowUnused();
    CopyIntoBucket(i);
    pass.ready[i] = 1;
    --pass.pending[params_[i].bucket];
    ++st.unused_parameters;
  }
  LaunchReadyBuckets();

  try {
    // Which parameters some rank used since the last sync; the others keep their .grad as is.
    std::vector<int32_t> used_anywhere;
    if (options_.find_unused_parameters) {
      std::vector<at::Tensor> used = {
          torch::from_blob(used_since_sync_.data(), {static_cast<int64_t>(used_since_sync_.size())}, torch::kUInt8)
              .to(torch::kInt)};
      c10d::AllreduceOptions opts;
      opts.reduceOp = c10d::ReduceOp::MAX;
      pg_->allreduce(used, opts)->wait();
      used_anywhere.assign(used[0].data_ptr<int32_t>(), used[0].data_ptr<int32_t>() + used[0].numel());
    }
    auto wait_start = Clock::now();
    for (size_t b = 0; b < pass.works.size(); ++b) {
      pass.works[b]->wait();
      int64_t ns = (*pass.completed_ns)[b].load();
      if (ns == 0) {
        st.completion_exact = false;
        st.completed[b] = Clock::now();
      } else {
        st.completed[b] = Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::nanoseconds(ns)));
      }
    }
    auto copy_start = Clock::now();
    st.wait_ms = Ms(copy_start - wait_start);

    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!used_anywhere.empty() && used_anywhere[i] == 0) continue;  // no rank computed it: leave .grad alone
      Param& p = params_[i];
      at::Tensor avg = buckets_[p.bucket].flat.narrow(0, p.offset, p.tensor.numel()).view(p.tensor.sizes());
      at::Tensor& grad = p.tensor.mutable_grad();
      if (grad.defined()) {
        grad.copy_(avg);
      } else {
        grad = avg.clone();
      }
    }
    st.copy_back_ms = Ms(Clock::now() - copy_start);
  } catch (const std::exception& e) {
    broken_ = "DistributedDataParallel: an earlier gradient synchronisation failed (" + OneLine(e) +
              "); the ranks' collectives are out of step, so training cannot go on";
    ResetPass();
    throw;
  }
  last_ = std::move(st);
  ++synced_backwards_;
  ResetPass();
}

}  // namespace distlm::ddp
