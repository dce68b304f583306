// Task 3a: your code goes here. Read docs/handout/part3.md, section 'Task 3a', and the
// contract in task3/ddp.h. Check your work with: bazel test //task3:student_test
#include <utility>

#include "common/autograd/grad_ready_hook.h"
#include "common/runtime/errors.h"
#include "task3/ddp.h"

namespace distlm::task3 {
namespace {

class PerParameterDdp : public DataParallel {
 public:
  PerParameterDdp(std::vector<NamedParameter> params, c10::intrusive_ptr<c10d::ProcessGroup> pg)
      : params_(std::move(params)), pg_(std::move(pg)) {
    // TODO(student): every rank must start from rank 0's weights, and backward must call
    // OnGradReady(i) once parameter i's gradient is in its .grad.
    StudentTodo("task3a PerParameterDdp (constructor)", "docs/handout/part3.md, section 'Task 3a'");
  }

  void set_require_grad_sync(bool sync) override {
    // TODO(student): 3c. Remember it; the hooks must communicate nothing while it is false.
    StudentTodo("task3c PerParameterDdp::set_require_grad_sync", "docs/handout/part3.md, section 'Task 3c'");
  }

  void FinishGradientSync() override {
    // TODO(student): every .grad the average over ranks; name every parameter whose gradient
    // never arrived (distlm::UserError).
    StudentTodo("task3a PerParameterDdp::FinishGradientSync", "docs/handout/part3.md, section 'Task 3a'");
  }

 private:
  void OnGradReady(size_t i) {
    // TODO(student): runs inside backward. Start communicating parameter i's gradient, without
    // waiting for it to finish.
    StudentTodo("task3a PerParameterDdp::OnGradReady", "docs/handout/part3.md, section 'Task 3a'");
  }

  std::vector<NamedParameter> params_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  // TODO(student): what must the hooks and FinishGradientSync share?
};

}  // namespace

std::unique_ptr<DataParallel> MakePerParameterDdp(std::vector<NamedParameter> params,
                                                  c10::intrusive_ptr<c10d::ProcessGroup> pg) {
  return std::make_unique<PerParameterDdp>(std::move(params), std::move(pg));
}

}  // namespace distlm::task3
