#include "common/dist/copy_back_work.h"

#include <ATen/core/ivalue.h>

namespace distlm::dist {

CopyBackWork::CopyBackWork(c10::intrusive_ptr<c10d::Work> inner, std::vector<at::Tensor> originals,
                           std::vector<at::Tensor> stand_ins)
    : Work(-1, inner->retrieveOpType()),
      inner_(std::move(inner)),
      originals_(std::move(originals)),
      stand_ins_(std::move(stand_ins)) {
  c10::intrusive_ptr<c10::ivalue::Future> inner_future;
  try {
    inner_future = inner_->getFuture();
  } catch (const std::exception&) {
    return;  // no futures: wait() copies
  }
  future_ = inner_future->then(
      [originals = originals_, stand_ins = stand_ins_](c10::ivalue::Future& done) {
        done.value();  // rethrows the collective's error
        CopyBack(originals, stand_ins);
        return c10::IValue(originals);
      },
      c10::ListType::create(c10::TensorType::get()));
}

bool CopyBackWork::wait(std::chrono::milliseconds timeout) {
  inner_->wait(timeout);  // the backend's own timeout and error reporting
  if (future_) {
    future_->wait();
    if (future_->hasError()) std::rethrow_exception(future_->exception_ptr());
  } else {
    std::call_once(copied_, [this] { CopyBack(originals_, stand_ins_); });
  }
  return true;
}

bool CopyBackWork::isCompleted() { return future_ ? future_->completed() : inner_->isCompleted(); }
bool CopyBackWork::isSuccess() const { return inner_->isSuccess(); }
std::exception_ptr CopyBackWork::exception() const { return inner_->exception(); }

c10::intrusive_ptr<c10::ivalue::Future> CopyBackWork::getFuture() {
  if (!future_) return Work::getFuture();  // throws: the backend has none
  return future_;
}

void CopyBackWork::CopyBack(const std::vector<at::Tensor>& originals, const std::vector<at::Tensor>& stand_ins) {
  for (size_t i = 0; i < originals.size(); ++i) originals[i].copy_(stand_ins[i]);
}

}  // namespace distlm::dist
