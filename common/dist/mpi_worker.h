// The MPI group's asynchrony (//common/dist:mpi_process_group only): each group has one worker
// thread that makes every MPI call of its collectives, in the order they were issued, and an
// MpiWork per collective that completes when the worker has run it. MPI has no timeout, so
// MpiWork::wait is where a lost rank becomes an error instead of a hang.
//
// Send and recv cannot run to completion on the worker as a collective does: two ranks that
// each send to the other before receiving (a pipeline's activations forward while gradients come
// back) would both sit in MPI_Send, each waiting for the other's receive. So the worker only
// posts them (MPI_Isend, MPI_Irecv), keeps their requests, and tests them between queued entries
// (polling while any is pending); a send or recv's Work completes when MPI_Test says so. MPI
// matches messages of one source, tag and communicator in the order they were posted, and
// posting happens in the order they were issued.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include "common/dist/c10d_compat.h"
#include "common/dist/mpi_process_group.h"
#include "common/dist/mpi_runtime.h"

namespace distlm::dist {
namespace mpi_internal {

class MpiWork : public c10d::Work {
 public:
  MpiWork(c10d::OpType op, std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout);

  // Waits at most `timeout` (the group's --dist_timeout_s when none is given): MPI has no
  // timeout of its own, so this is where a lost rank turns into an error instead of a hang.
  bool wait(std::chrono::milliseconds timeout) override;

  std::vector<at::Tensor> result() override { return outputs_; }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Called by the worker once the collective ran (error: what it threw, or null).
  void Finish(std::exception_ptr error);

 private:
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<at::ivalue::Future> future_;
};

}  // namespace mpi_internal

// A posted send or recv: its request, and what to do once it completed (copy a staged buffer
// back; check the received size), which also keeps its buffer alive until then.
struct MpiProcessGroup::Posted {
  MPI_Request request = MPI_REQUEST_NULL;
  std::function<void(const MPI_Status&)> done;
};

struct MpiProcessGroup::Worker {
  struct Entry {
    c10::intrusive_ptr<mpi_internal::MpiWork> work;
    std::function<void()> run;     // a collective: runs to completion
    std::function<Posted()> post;  // a send or recv: posted, completed later (when `run` is empty)
  };

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Entry> queue;
  bool stop = false;
  bool exited = false;
  MPI_Comm comm = MPI_COMM_NULL;
  std::chrono::milliseconds timeout{0};
  std::thread thread;

  // The thread's body: runs or posts queued entries under the MPI lock, and tests the posted
  // ones, until `stop` with nothing queued or pending; then frees the communicator and sets
  // `exited`.
  void Loop();

 private:
  struct Pending {
    c10::intrusive_ptr<mpi_internal::MpiWork> work;
    Posted posted;
  };
  // Finishes the pending entries whose requests completed. Worker thread only.
  void TestPending();
  std::vector<Pending> pending_;
};

}  // namespace distlm::dist
