// MpiProcessGroup: each collective's arguments checked on the caller's thread, then its MPI
// calls queued for the group's worker (mpi_worker.h). MPI itself is mpi_runtime.h, reduction
// types mpi_datatypes.h, argument checks and staging mpi_arguments.h.
#include "common/dist/mpi_process_group.h"

#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "common/dist/mpi_arguments.h"
#include "common/dist/mpi_datatypes.h"
#include "common/dist/mpi_runtime.h"
#include "common/dist/mpi_worker.h"

namespace distlm::dist {
namespace {

using mpi_internal::CheckMpi;
using mpi_internal::CheckRoot;
using mpi_internal::CheckSingle;
using mpi_internal::CheckSlots;
using mpi_internal::CheckTensor;
using mpi_internal::Count;
using mpi_internal::g_abandoned;
using mpi_internal::g_mpi_mutex;
using mpi_internal::MpiWork;
using mpi_internal::Pack;
using mpi_internal::ReductionOp;
using mpi_internal::ReductionType;
using mpi_internal::Rows;
using mpi_internal::Stage;
using mpi_internal::Staged;
using mpi_internal::Unpack;

}  // namespace

c10::intrusive_ptr<MpiProcessGroup> MpiProcessGroup::CreateWorld(
    std::chrono::milliseconds timeout) {
  mpi_internal::InitMpiOnce();
  auto worker = std::make_shared<Worker>();
  worker->timeout = timeout;
  int rank = 0, size = 0;
  {
    std::lock_guard<std::mutex> mpi(g_mpi_mutex);
    CheckMpi(MPI_Comm_dup(MPI_COMM_WORLD, &worker->comm), "MPI_Comm_dup");
    // Errors come back as codes (and then exceptions on the Work) instead of aborting the job
    // with MPI's own message.
    CheckMpi(MPI_Comm_set_errhandler(worker->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    CheckMpi(MPI_Comm_rank(worker->comm, &rank), "MPI_Comm_rank");
    CheckMpi(MPI_Comm_size(worker->comm, &size), "MPI_Comm_size");
  }
  worker->thread = std::thread([w = worker] { w->Loop(); });
  return c10::make_intrusive<MpiProcessGroup>(rank, size, std::move(worker));
}

c10::intrusive_ptr<MpiProcessGroup> MpiProcessGroup::CreateSplit(MpiProcessGroup& parent, int color, int key) {
  auto worker = std::make_shared<Worker>();
  worker->timeout = parent.worker_->timeout;
  int rank = 0, size = 0;
  {
    // Under the process-wide lock, as every MPI call: the parent's worker makes none meanwhile.
    std::lock_guard<std::mutex> mpi(g_mpi_mutex);
    CheckMpi(MPI_Comm_split(parent.worker_->comm, color, key, &worker->comm), "MPI_Comm_split");
    CheckMpi(MPI_Comm_set_errhandler(worker->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    CheckMpi(MPI_Comm_rank(worker->comm, &rank), "MPI_Comm_rank");
    CheckMpi(MPI_Comm_size(worker->comm, &size), "MPI_Comm_size");
  }
  worker->thread = std::thread([w = worker] { w->Loop(); });
  return c10::make_intrusive<MpiProcessGroup>(rank, size, std::move(worker));
}

MpiProcessGroup::MpiProcessGroup(int rank, int size, std::shared_ptr<Worker> worker)
    : GroupImpl(rank, size), worker_(std::move(worker)) {
  init();
}

MpiProcessGroup::~MpiProcessGroup() {
  // Torn down by an exception: the other ranks may be inside a collective this rank will never
  // join, so queued work is dropped and the process must not finalise (see the header).
  const bool unwinding = std::uncaught_exceptions() > 0;
  std::deque<Worker::Entry> dropped;
  {
    std::lock_guard<std::mutex> lock(worker_->mutex);
    worker_->stop = true;
    if (unwinding) dropped.swap(worker_->queue);
  }
  worker_->cv.notify_all();
  for (auto& e : dropped) {
    e.work->Finish(std::make_exception_ptr(
        std::runtime_error("MPI group destroyed before this collective ran")));
  }
  if (unwinding) g_abandoned = true;
  // Queued work drains first; a worker still inside MPI after the timeout is stuck for good.
  std::unique_lock<std::mutex> lock(worker_->mutex);
  auto limit = unwinding ? std::chrono::milliseconds(1000) : worker_->timeout;
  if (worker_->cv.wait_for(lock, limit, [&] { return worker_->exited; })) {
    lock.unlock();
    worker_->thread.join();
  } else {
    lock.unlock();
    g_abandoned = true;
    worker_->thread.detach();
  }
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::Enqueue(c10d::OpType op,
                                                        std::vector<at::Tensor> outputs,
                                                        std::function<void()> run) {
  auto work = c10::make_intrusive<MpiWork>(op, std::move(outputs), worker_->timeout);
  {
    std::lock_guard<std::mutex> lock(worker_->mutex);
    TORCH_CHECK(!worker_->stop, "MpiProcessGroup: the group is shutting down");
    worker_->queue.push_back({work, std::move(run)});
  }
  worker_->cv.notify_all();
  return work;
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::EnqueuePosted(c10d::OpType op, std::vector<at::Tensor> outputs,
                                                              std::function<Posted()> post) {
  auto work = c10::make_intrusive<MpiWork>(op, std::move(outputs), worker_->timeout);
  {
    std::lock_guard<std::mutex> lock(worker_->mutex);
    TORCH_CHECK(!worker_->stop, "MpiProcessGroup: the group is shutting down");
    worker_->queue.push_back({work, nullptr, std::move(post)});
  }
  worker_->cv.notify_all();
  return work;
}

// A send's or recv's arguments: one tensor, another rank of the group, a tag MPI accepts.
void MpiProcessGroup::CheckPointToPoint(const std::vector<at::Tensor>& tensors, int peer, int tag,
                                        const char* op) const {
  CheckSingle(tensors, op);
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "MpiProcessGroup::", op, ": rank ", rank_,
              " of 0..", size_ - 1, " cannot exchange with rank ", peer);
  TORCH_CHECK(tag >= 0, "MpiProcessGroup::", op, ": tag ", tag, " is negative");
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  CheckPointToPoint(tensors, dstRank, tag, "send");
  at::Tensor in = tensors[0].contiguous();
  int bytes = Count(in.nbytes(), "send");
  MPI_Comm comm = worker_->comm;
  return EnqueuePosted(c10d::OpType::SEND, tensors, [in, bytes, dstRank, tag, comm]() {
    Posted p;
    CheckMpi(MPI_Isend(in.data_ptr(), bytes, MPI_BYTE, dstRank, tag, comm, &p.request), "MPI_Isend");
    p.done = [in](const MPI_Status&) {};  // `in` stays alive until the send completed
    return p;
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  CheckPointToPoint(tensors, srcRank, tag, "recv");
  Staged out = Stage(tensors[0]);
  int bytes = Count(out.buffer.nbytes(), "recv");
  MPI_Comm comm = worker_->comm;
  return EnqueuePosted(c10d::OpType::RECV, tensors, [out, bytes, srcRank, tag, comm]() {
    Posted p;
    CheckMpi(MPI_Irecv(out.buffer.data_ptr(), bytes, MPI_BYTE, srcRank, tag, comm, &p.request), "MPI_Irecv");
    p.done = [out, bytes, srcRank, tag](const MPI_Status& status) mutable {
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      // A message larger than the buffer is an MPI error (MPI_ERR_TRUNCATE, from MPI_Test); a
      // smaller one would leave the rest of the tensor as it was.
      TORCH_CHECK(got == bytes, "MpiProcessGroup::recv: received ", got, " bytes from rank ", srcRank, " with tag ",
                  tag, ", the tensor holds ", bytes);
      out.CopyBack();
    };
    return p;
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::broadcast(std::vector<at::Tensor>& tensors,
                                                          const c10d::BroadcastOptions& opts) {
  CheckSingle(tensors, "broadcast");
  CheckRoot(opts.rootRank, size_, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "MpiProcessGroup::broadcast: rootTensor must be 0");
  Staged t = Stage(tensors[0]);
  int bytes = Count(t.buffer.nbytes(), "broadcast");
  int root = static_cast<int>(opts.rootRank);
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::BROADCAST, tensors, [t, bytes, root, comm]() mutable {
    CheckMpi(MPI_Bcast(t.buffer.data_ptr(), bytes, MPI_BYTE, root, comm), "MPI_Bcast");
    t.CopyBack();
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::allreduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::AllreduceOptions& opts) {
  CheckSingle(tensors, "allreduce");
  MPI_Datatype type = ReductionType(tensors[0].scalar_type(), "allreduce");
  MPI_Op op = ReductionOp(opts.reduceOp, tensors[0].scalar_type(), "allreduce");
  Staged t = Stage(tensors[0]);
  int n = Count(t.buffer.numel(), "allreduce");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::ALLREDUCE, tensors, [t, n, type, op, comm]() mutable {
    CheckMpi(MPI_Allreduce(MPI_IN_PLACE, t.buffer.data_ptr(), n, type, op, comm),
             "MPI_Allreduce");
    t.CopyBack();
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOptions& opts) {
  CheckSingle(tensors, "reduce");
  CheckRoot(opts.rootRank, size_, "reduce");
  MPI_Datatype type = ReductionType(tensors[0].scalar_type(), "reduce");
  MPI_Op op = ReductionOp(opts.reduceOp, tensors[0].scalar_type(), "reduce");
  Staged t = Stage(tensors[0]);
  int n = Count(t.buffer.numel(), "reduce");
  int root = static_cast<int>(opts.rootRank);
  bool is_root = root == rank_;
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::REDUCE, tensors, [t, n, type, op, root, is_root, comm]() mutable {
    void* data = t.buffer.data_ptr();
    if (is_root) {
      CheckMpi(MPI_Reduce(MPI_IN_PLACE, data, n, type, op, root, comm), "MPI_Reduce");
      t.CopyBack();
    } else {
      CheckMpi(MPI_Reduce(data, nullptr, n, type, op, root, comm), "MPI_Reduce");
    }
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  CheckSingle(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "MpiProcessGroup::allgather: takes one output list, got ",
              outputs.size());
  CheckSlots(outputs[0], inputs[0], size_, "allgather", "output");
  at::Tensor in = inputs[0].contiguous();
  int bytes = Count(in.nbytes(), "allgather");
  std::vector<at::Tensor> slots = outputs[0];
  int size = size_;
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::ALLGATHER, slots, [in, bytes, slots, size, comm]() mutable {
    at::Tensor rows = Rows(size, in);
    CheckMpi(MPI_Allgather(in.data_ptr(), bytes, MPI_BYTE, rows.data_ptr(), bytes, MPI_BYTE,
                           comm),
             "MPI_Allgather");
    Unpack(rows, slots);
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions&) {
  CheckTensor(input, "_allgather_base");
  CheckTensor(output, "_allgather_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "MpiProcessGroup::_allgather_base: output is ", output.scalar_type(),
              ", input is ", input.scalar_type());
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "MpiProcessGroup::_allgather_base: output has ", output.numel(),
              " elements, expected world size ", size_, " x input ", input.numel());
  at::Tensor in = input.contiguous();
  Staged out = Stage(output);
  int bytes = Count(in.nbytes(), "_allgather_base");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [in, out, bytes, comm]() mutable {
    CheckMpi(MPI_Allgather(in.data_ptr(), bytes, MPI_BYTE, out.buffer.data_ptr(), bytes,
                           MPI_BYTE, comm),
             "MPI_Allgather");
    out.CopyBack();
  });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  CheckSingle(inputs, "gather");
  CheckRoot(opts.rootRank, size_, "gather");
  int root = static_cast<int>(opts.rootRank);
  bool is_root = root == rank_;
  std::vector<at::Tensor> slots;
  if (is_root) {
    TORCH_CHECK(outputs.size() == 1, "MpiProcessGroup::gather: the root takes one output list, "
                "got ", outputs.size());
    CheckSlots(outputs[0], inputs[0], size_, "gather", "output");
    slots = outputs[0];
  } else {
    // As in Gloo, so code that runs on one backend runs on the other.
    TORCH_CHECK(outputs.empty(), "MpiProcessGroup::gather: rank ", rank_,
                " is not the root and must pass an empty output list");
  }
  at::Tensor in = inputs[0].contiguous();
  int bytes = Count(in.nbytes(), "gather");
  int size = size_;
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::GATHER, slots,
                 [in, bytes, slots, size, root, is_root, comm]() mutable {
                   at::Tensor rows = is_root ? Rows(size, in) : at::Tensor();
                   CheckMpi(MPI_Gather(in.data_ptr(), bytes, MPI_BYTE,
                                       is_root ? rows.data_ptr() : nullptr, bytes, MPI_BYTE,
                                       root, comm),
                            "MPI_Gather");
                   if (is_root) Unpack(rows, slots);
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  CheckSingle(outputs, "scatter");
  CheckRoot(opts.rootRank, size_, "scatter");
  int root = static_cast<int>(opts.rootRank);
  bool is_root = root == rank_;
  at::Tensor rows;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1, "MpiProcessGroup::scatter: the root takes one input list, "
                "got ", inputs.size());
    CheckSlots(inputs[0], outputs[0], size_, "scatter", "input");
    rows = Pack(inputs[0]);
  } else {
    TORCH_CHECK(inputs.empty(), "MpiProcessGroup::scatter: rank ", rank_,
                " is not the root and must pass an empty input list");
  }
  Staged out = Stage(outputs[0]);
  int bytes = Count(out.buffer.nbytes(), "scatter");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::SCATTER, outputs,
                 [rows, out, bytes, root, is_root, comm]() mutable {
                   CheckMpi(MPI_Scatter(is_root ? rows.data_ptr() : nullptr, bytes, MPI_BYTE,
                                        out.buffer.data_ptr(), bytes, MPI_BYTE, root, comm),
                            "MPI_Scatter");
                   out.CopyBack();
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  CheckSingle(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "MpiProcessGroup::reduce_scatter: takes one input list, got ",
              inputs.size());
  CheckSlots(inputs[0], outputs[0], size_, "reduce_scatter", "input");
  MPI_Datatype type = ReductionType(outputs[0].scalar_type(), "reduce_scatter");
  MPI_Op op = ReductionOp(opts.reduceOp, outputs[0].scalar_type(), "reduce_scatter");
  at::Tensor rows = Pack(inputs[0]);
  Staged out = Stage(outputs[0]);
  int n = Count(out.buffer.numel(), "reduce_scatter");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::REDUCE_SCATTER, outputs,
                 [rows, out, n, type, op, comm]() mutable {
                   CheckMpi(MPI_Reduce_scatter_block(rows.data_ptr(), out.buffer.data_ptr(), n,
                                                     type, op, comm),
                            "MPI_Reduce_scatter_block");
                   out.CopyBack();
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckTensor(input, "_reduce_scatter_base");
  CheckTensor(output, "_reduce_scatter_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "MpiProcessGroup::_reduce_scatter_base: output is ", output.scalar_type(),
              ", input is ", input.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "MpiProcessGroup::_reduce_scatter_base: input has ", input.numel(),
              " elements, expected world size ", size_, " x output ", output.numel());
  MPI_Datatype type = ReductionType(output.scalar_type(), "_reduce_scatter_base");
  MPI_Op op = ReductionOp(opts.reduceOp, output.scalar_type(), "_reduce_scatter_base");
  at::Tensor in = input.contiguous();
  Staged out = Stage(output);
  int n = Count(out.buffer.numel(), "_reduce_scatter_base");
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                 [in, out, n, type, op, comm]() mutable {
                   CheckMpi(MPI_Reduce_scatter_block(in.data_ptr(), out.buffer.data_ptr(), n,
                                                     type, op, comm),
                            "MPI_Reduce_scatter_block");
                   out.CopyBack();
                 });
}

c10::intrusive_ptr<c10d::Work> MpiProcessGroup::barrier(const c10d::BarrierOptions&) {
  MPI_Comm comm = worker_->comm;
  return Enqueue(c10d::OpType::BARRIER, {},
                 [comm] { CheckMpi(MPI_Barrier(comm), "MPI_Barrier"); });
}

}  // namespace distlm::dist
