// The MPI group's asynchrony (//common/dist:mpi_process_group only): each group has one worker
// thread that makes every MPI call of its collectives, in the order they were issued, and an
// MpiWork per collective that completes when the worker has run it. MPI has no timeout, so
// MpiWork::wait is where a lost rank becomes an error instead of a hang.
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

struct MpiProcessGroup::Worker {
  struct Entry {
    c10::intrusive_ptr<mpi_internal::MpiWork> work;
    std::function<void()> run;
  };

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<Entry> queue;
  bool stop = false;
  bool exited = false;
  MPI_Comm comm = MPI_COMM_NULL;
  std::chrono::milliseconds timeout{0};
  std::thread thread;

  // The thread's body: runs queued entries under the MPI lock until `stop` and an empty queue,
  // then frees the communicator and sets `exited`.
  void Loop();
};

}  // namespace distlm::dist
