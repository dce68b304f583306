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
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) break;  // stopping, and everything queued has run
      entry = std::move(queue.front());
      queue.pop_front();
    }
    std::exception_ptr error;
    try {
      std::lock_guard<std::mutex> mpi(g_mpi_mutex);
      entry.run();
    } catch (...) {
      error = std::current_exception();
    }
    entry.work->Finish(error);
  }
  {
    std::lock_guard<std::mutex> mpi(g_mpi_mutex);
    MPI_Comm_free(&comm);
  }
  std::lock_guard<std::mutex> lock(mutex);
  exited = true;
  cv.notify_all();
}

}  // namespace distlm::dist
