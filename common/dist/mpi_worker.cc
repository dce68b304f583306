#include "common/dist/mpi_worker.h"

#include <ATen/core/grad_mode.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/runtime/errors.h"

namespace distlm::dist {
namespace mpi_internal {

MpiWork::MpiWork(c10d::OpType op, std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
    : Work(-1, op),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      future_(c10::make_intrusive<at::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

bool MpiWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto limit = timeout > std::chrono::milliseconds(0) ? timeout : timeout_;
  if (!cv_.wait_for(lock, limit, [&] { return completed_; })) {
    g_abandoned = true;
    throw UserError(absl::StrCat(
        "MPI ", absl::AsciiStrToLower(c10d::opTypeToString(opType_)), " did not finish within ",
        std::chrono::duration<double>(limit).count(),
        " s (--dist_timeout_s): a rank is stuck or gone"));
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

void MpiWork::Finish(std::exception_ptr error) {
  // The future first, so whoever wakes from wait() finds it complete too.
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

}  // namespace mpi_internal

void MpiProcessGroup::Worker::Loop() {
  using mpi_internal::g_mpi_mutex;
  // Output slots may be leaves that require grad; the copies into them are not autograd's.
  at::NoGradGuard no_grad;
  for (;;) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(mutex);
      auto ready = [&] { return stop || !queue.empty(); };
      if (pending_.empty()) {
        cv.wait(lock, ready);
      } else {
        // Sends and receives in flight: test them again soon, or as soon as more is queued.
        cv.wait_for(lock, std::chrono::microseconds(50), ready);
      }
      if (!queue.empty()) {
        entry = std::move(queue.front());
        queue.pop_front();
      } else if (stop && pending_.empty()) {
        break;  // stopping, and everything queued has run
      }
    }
    if (entry.work) {
      std::exception_ptr error;
      try {
        std::lock_guard<std::mutex> mpi(g_mpi_mutex);
        if (entry.run) {
          entry.run();
        } else {
          pending_.push_back({entry.work, entry.post()});
        }
      } catch (...) {
        error = std::current_exception();
      }
      if (entry.run || error) entry.work->Finish(error);
    }
    if (!pending_.empty()) TestPending();
  }
  {
    std::lock_guard<std::mutex> mpi(g_mpi_mutex);
    MPI_Comm_free(&comm);
  }
  std::lock_guard<std::mutex> lock(mutex);
  exited = true;
  cv.notify_all();
}

void MpiProcessGroup::Worker::TestPending() {
  using mpi_internal::g_mpi_mutex;
  std::vector<Pending> still;
  for (Pending& p : pending_) {
    int completed = 0;
    MPI_Status status;
    std::exception_ptr error;
    try {
      {
        std::lock_guard<std::mutex> mpi(g_mpi_mutex);
        mpi_internal::CheckMpi(MPI_Test(&p.posted.request, &completed, &status), "MPI_Test");
      }
      if (completed) p.posted.done(status);
    } catch (...) {
      error = std::current_exception();
      completed = 1;
    }
    if (completed) {
      p.work->Finish(error);
    } else {
      still.push_back(std::move(p));
    }
  }
  pending_ = std::move(still);
}

}  // namespace distlm::dist
