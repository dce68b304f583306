#include "common/dist/host_staging_group.h"

#include "common/dist/copy_back_work.h"

namespace distlm::dist {
namespace {

at::Tensor ToHost(const at::Tensor& t) { return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true); }
at::Tensor HostLike(const at::Tensor& t) { return at::empty(t.sizes(), t.options().device(at::kCPU)); }

std::vector<at::Tensor> Map(const std::vector<at::Tensor>& ts, at::Tensor (*f)(const at::Tensor&)) {
  std::vector<at::Tensor> out;
  out.reserve(ts.size());
  for (const auto& t : ts) out.push_back(f(t));
  return out;
}

std::vector<std::vector<at::Tensor>> Map(const std::vector<std::vector<at::Tensor>>& ts,
                                         at::Tensor (*f)(const at::Tensor&)) {
  std::vector<std::vector<at::Tensor>> out;
  for (const auto& list : ts) out.push_back(Map(list, f));
  return out;
}

std::vector<at::Tensor> Flatten(const std::vector<std::vector<at::Tensor>>& ts) {
  std::vector<at::Tensor> out;
  for (const auto& list : ts) out.insert(out.end(), list.begin(), list.end());
  return out;
}

c10::intrusive_ptr<c10d::Work> CopyBack(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> originals,
                                        std::vector<at::Tensor> host) {
  return c10::make_intrusive<CopyBackWork>(std::move(work), std::move(originals), std::move(host));
}

}  // namespace

HostStagingGroup::HostStagingGroup(c10::intrusive_ptr<GroupImpl> inner)
    : GroupImpl(inner->getRank(), inner->getSize()), inner_(std::move(inner)) {}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  auto host = Map(tensors, ToHost);
  return CopyBack(inner_->broadcast(host, opts), tensors, host);
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  auto host = Map(tensors, ToHost);
  return CopyBack(inner_->allreduce(host, opts), tensors, host);
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  auto host = Map(tensors, ToHost);
  return CopyBack(inner_->reduce(host, opts), tensors, host);
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions& opts) {
  auto host_in = Map(inputs, ToHost);
  auto host_out = Map(outputs, HostLike);
  return CopyBack(inner_->allgather(host_out, host_in, opts), Flatten(outputs), Flatten(host_out));
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions& opts) {
  at::Tensor host_in = ToHost(input), host_out = HostLike(output);
  return CopyBack(inner_->_allgather_base(host_out, host_in, opts), {output}, {host_out});
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  auto host_in = Map(inputs, ToHost);
  auto host_out = Map(outputs, HostLike);  // empty except on the root
  return CopyBack(inner_->gather(host_out, host_in, opts), Flatten(outputs), Flatten(host_out));
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  auto host_in = Map(inputs, ToHost);  // empty except on the root
  auto host_out = Map(outputs, HostLike);
  return CopyBack(inner_->scatter(host_out, host_in, opts), outputs, host_out);
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  auto host_in = Map(inputs, ToHost);
  auto host_out = Map(outputs, HostLike);
  return CopyBack(inner_->reduce_scatter(host_out, host_in, opts), outputs, host_out);
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  at::Tensor host_in = ToHost(input), host_out = HostLike(output);
  return CopyBack(inner_->_reduce_scatter_base(host_out, host_in, opts), {output}, {host_out});
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::barrier(const c10d::BarrierOptions& opts) {
  return inner_->barrier(opts);
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  auto host = Map(tensors, ToHost);
  return inner_->send(host, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> HostStagingGroup::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  auto host = Map(tensors, HostLike);
  return CopyBack(inner_->recv(host, src_rank, tag), tensors, host);
}

}  // namespace distlm::dist
