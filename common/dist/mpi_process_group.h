// The project's own c10d::ProcessGroup over Open MPI, because Debian's LibTorch is built
// without ProcessGroupMPI. Run the ranks with `mpirun -np N`.
//
// Threading. c10d hands out asynchronous Work objects, so collectives must run off the
// caller's thread. MPI is initialised with MPI_THREAD_SERIALIZED and every MPI call of every
// MpiProcessGroup runs on its group's one worker thread, in the order the collectives were
// issued, under a process-wide mutex (so two groups in one process never call MPI at the same
// time). The caller's thread only validates arguments (bad arguments throw at once, before
// anything is queued) and enqueues. Work::wait() blocks on the work's completion; a
// collective's tensors must not be touched until it has completed, as with every c10d group.
//
// Supported, CPU tensors of any dtype for data movement and float/double/int8/16/32/64/uint8
// for reductions (SUM, PRODUCT, MIN, MAX; BAND/BOR/BXOR on integers), and float16/bfloat16
// for SUM (added in float32, rounded to the narrow type per pair, like Gloo's float16 sum;
// for --comm_dtype):
//   broadcast, allreduce, reduce, allgather, _allgather_base, gather, scatter,
//   reduce_scatter, _reduce_scatter_base, barrier,
// and point to point (task 7b's pipelines), of one tensor of any dtype, tag >= 0:
//   send, recv (from a given rank; the received size must be the tensor's).
// Non-contiguous tensors are staged through contiguous copies. Everything else (recv from any
// source, alltoall, coalesced forms, AVG like Gloo) throws c10d's "does not support" error.
//
// Failures. MPI itself has no timeout, so Work::wait() gives up after the group's timeout
// (--dist_timeout_s) with an error naming the operation. A group whose worker is stuck in an
// MPI call, or that is destroyed while an exception is unwinding, is abandoned: the process
// then exits without MPI_Finalize (which would wait for the missing ranks), and mpirun, on
// seeing a rank end without finalising or die from a signal, kills the remaining ranks and
// names the rank ("mpirun noticed that process rank 1 with PID ... exited on signal 9").
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/dist/c10d_compat.h"

namespace distlm::dist {

class MpiProcessGroup : public GroupImpl {
 public:
  // Initialises MPI on first use (MPI_Init_thread, MPI_THREAD_SERIALIZED; MPI_Finalize at
  // exit) and returns a group over all ranks of the job (a duplicate of MPI_COMM_WORLD).
  // Throws distlm::UserError when MPI cannot give the thread level.
  static c10::intrusive_ptr<MpiProcessGroup> CreateWorld(std::chrono::milliseconds timeout);
  // A group over the ranks of `parent` that pass the same `color`, numbered by `key`
  // (MPI_Comm_split: every rank of `parent` calls it, with no collective of `parent` pending).
  static c10::intrusive_ptr<MpiProcessGroup> CreateSplit(MpiProcessGroup& parent, int color, int key);

  ~MpiProcessGroup() override;

  const std::string getBackendName() const override { return "mpi"; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors,
      const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;

  // The worker's queue and thread; shared with the thread so an abandoned worker never
  // touches a destroyed group.
  struct Worker;
  // A posted send or recv, as the worker tests it (mpi_worker.h).
  struct Posted;

  // Use CreateWorld; public only for c10::make_intrusive.
  MpiProcessGroup(int rank, int size, std::shared_ptr<Worker> worker);

 private:
  // Queues `run` (which makes the MPI calls) and returns the Work that completes after it.
  c10::intrusive_ptr<c10d::Work> Enqueue(c10d::OpType op, std::vector<at::Tensor> outputs,
                                         std::function<void()> run);
  // A send's or recv's arguments, checked on the caller's thread.
  void CheckPointToPoint(const std::vector<at::Tensor>& tensors, int peer, int tag, const char* op) const;
  // Queues `post` (which posts a nonblocking send or receive): its Work completes when the
  // request does (mpi_worker.h).
  c10::intrusive_ptr<c10d::Work> EnqueuePosted(c10d::OpType op, std::vector<at::Tensor> outputs,
                                               std::function<Posted()> post);

  std::shared_ptr<Worker> worker_;
};

}  // namespace distlm::dist
