#include "common/dist/counting_process_group.h"

#include <algorithm>
#include <map>

#include "common/trace/recorder.h"

namespace distlm::dist {
namespace {

// PyTorch's Python names for dtypes, as students see them.
std::string DtypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kHalf: return "float16";
    case at::kBFloat16: return "bfloat16";
    case at::kDouble: return "float64";
    case at::kLong: return "int64";
    case at::kInt: return "int32";
    case at::kByte: return "uint8";
    case at::kChar: return "int8";
    case at::kBool: return "bool";
    default: return c10::toString(t);
  }
}

}  // namespace

int64_t CollectiveRecord::numel() const {
  int64_t n = 0;
  for (const auto& shape : shapes) {
    int64_t e = 1;
    for (int64_t d : shape) e *= d;
    n += e;
  }
  return n;
}

int64_t CommStats::tensors() const {
  int64_t n = 0;
  for (const auto& r : records) n += static_cast<int64_t>(r.shapes.size());
  return n;
}

int64_t CommStats::bytes() const {
  int64_t n = 0;
  for (const auto& r : records) n += r.bytes;
  return n;
}

nlohmann::json CommStats::ToJson(size_t max_shapes) const {
  std::map<std::string, int64_t> ops;
  nlohmann::json shapes = nlohmann::json::array();
  size_t listed = 0, total = 0;
  std::string dtype;
  for (const auto& r : records) {
    ++ops[r.op];
    if (dtype.empty()) dtype = r.dtype;
    for (const auto& s : r.shapes) {
      ++total;
      if (listed < max_shapes) {
        shapes.push_back(s);
        ++listed;
      }
    }
  }
  nlohmann::json j = {{"comm_calls", calls()},   {"comm_tensors", tensors()}, {"comm_bytes", bytes()},
                      {"comm_dtype", dtype},     {"comm_ops", ops},           {"comm_shapes", shapes}};
  if (total > listed) j["comm_shapes_more"] = total - listed;
  return j;
}

CountingProcessGroup::CountingProcessGroup(c10::intrusive_ptr<c10d::ProcessGroup> inner)
    : ForwardingGroup(std::move(inner)) {}

CommStats CountingProcessGroup::TakeStats() {
  CommStats out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = std::move(stats_);
    stats_ = CommStats{};
  }
  // --trace: the update's collectives on the communication lanes (stages take their stats once
  // an update's collectives are done, so their completions are known by now).
  if (trace::Recorder* r = trace::Recorder::Active()) {
    for (const auto& c : out.records) {
      r->Collective(c.op, c.launched.time_since_epoch().count(), c.completed_ns->load(),
                    {{"bytes", c.bytes}, {"dtype", c.dtype}, {"tensors", c.shapes.size()}, {"numel", c.numel()}});
    }
  }
  return out;
}

namespace {

// `work`, its completion time to be stored in `completed` (for the stages' overlap figures),
// on the backend's thread.
c10::intrusive_ptr<c10d::Work> WithCompletion(c10::intrusive_ptr<c10d::Work> work,
                                              std::shared_ptr<std::atomic<int64_t>> completed) {
  try {
    work->getFuture()->addCallback([completed](c10::ivalue::Future&) {
      completed->store(std::chrono::steady_clock::now().time_since_epoch().count());
    });
  } catch (const std::exception&) {
    // A backend without futures: the completion stays unknown (0).
  }
  return work;
}

}  // namespace

double CommStats::BusyMs() const {
  using Clock = std::chrono::steady_clock;
  std::vector<std::pair<Clock::time_point, Clock::time_point>> spans;
  for (const auto& r : records) {
    const int64_t done = r.completed_ns->load();
    if (done > 0) spans.emplace_back(r.launched, std::max(r.launched, Clock::time_point(Clock::duration(done))));
  }
  std::sort(spans.begin(), spans.end());
  double ms = 0;
  Clock::time_point covered = Clock::time_point::min();
  for (const auto& [a, b] : spans) {
    const Clock::time_point from = std::max(a, covered);
    if (b <= from) continue;
    ms += std::chrono::duration<double, std::milli>(b - from).count();
    covered = b;
  }
  return ms;
}

std::shared_ptr<std::atomic<int64_t>> CountingProcessGroup::Record(const std::string& op,
                                                                   const std::vector<at::Tensor>& tensors) {
  CollectiveRecord r;
  r.op = op;
  r.launched = std::chrono::steady_clock::now();
  auto completed = r.completed_ns;
  for (const auto& t : tensors) {
    r.shapes.emplace_back(t.sizes().begin(), t.sizes().end());
    r.bytes += static_cast<int64_t>(t.nbytes());
    if (r.dtype.empty()) r.dtype = DtypeName(t.scalar_type());
  }
  std::lock_guard<std::mutex> lock(mu_);
  stats_.records.push_back(std::move(r));
  return completed;
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  Record("broadcast", tensors);
  return inner_->broadcast(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  auto completed = Record("allreduce", tensors);
  return WithCompletion(inner_->allreduce(tensors, opts), completed);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  Record("allreduce_coalesced", tensors);
  return inner_->allreduce_coalesced(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  Record("reduce", tensors);
  return inner_->reduce(tensors, opts);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                               std::vector<at::Tensor>& inputs,
                                                               const c10d::AllgatherOptions& opts) {
  auto completed = Record("allgather", inputs);
  return WithCompletion(inner_->allgather(outputs, inputs, opts), completed);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                     const c10d::AllgatherOptions& opts) {
  auto completed = Record("allgather", {input});
  return WithCompletion(inner_->_allgather_base(output, input, opts), completed);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::GatherOptions& opts) {
  Record("gather", inputs);
  return inner_->gather(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::scatter(std::vector<at::Tensor>& outputs,
                                                             std::vector<std::vector<at::Tensor>>& inputs,
                                                             const c10d::ScatterOptions& opts) {
  std::vector<at::Tensor> sent;
  for (const auto& list : inputs) sent.insert(sent.end(), list.begin(), list.end());
  Record("scatter", sent);
  return inner_->scatter(outputs, inputs, opts);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  std::vector<at::Tensor> sent;
  for (const auto& list : inputs) sent.insert(sent.end(), list.begin(), list.end());
  auto completed = Record("reduce_scatter", sent);
  return WithCompletion(inner_->reduce_scatter(outputs, inputs, opts), completed);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                          const c10d::ReduceScatterOptions& opts) {
  auto completed = Record("reduce_scatter", {input});
  return WithCompletion(inner_->_reduce_scatter_base(output, input, opts), completed);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  Record("send", tensors);
  return inner_->send(tensors, dst, tag);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  Record("recv", {});
  return inner_->recv(tensors, src, tag);
}

c10::intrusive_ptr<c10d::Work> CountingProcessGroup::barrier(const c10d::BarrierOptions& opts) {
  return inner_->barrier(opts);
}

}  // namespace distlm::dist
