// Task 3b: your code goes here. Read docs/handout/part3.md, section 'Task 3b', and the
// contract in task3/ddp.h (which parameters share a bucket, and in which order buckets go).
// Check your work with: bazel test //task3:student_test
#include <utility>

#include "common/autograd/grad_ready_hook.h"
#include "common/runtime/errors.h"
#include "task3/ddp.h"

namespace distlm::task3 {
namespace {

class BucketedDdp : public DataParallel {
 public:
  BucketedDdp(std::vector<NamedParameter> params, c10::intrusive_ptr<c10d::ProcessGroup> pg, int64_t cap_bytes)
      : params_(std::move(params)), pg_(std::move(pg)) {
    // TODO(student): what must hold from construction on (task3/ddp.h: rank 0's weights, and
    // which parameters share a bucket).
    StudentTodo("task3b BucketedDdp (constructor)", "docs/handout/part3.md, section 'Task 3b'");
  }

  void set_require_grad_sync(bool sync) override {
    // TODO(student): 3c, as in 3a.
    StudentTodo("task3c BucketedDdp::set_require_grad_sync", "docs/handout/part3.md, section 'Task 3c'");
  }

  void FinishGradientSync() override {
    // TODO(student): every .grad the average over ranks; name every parameter whose gradient
    // never arrived (distlm::UserError).
    StudentTodo("task3b BucketedDdp::FinishGradientSync", "docs/handout/part3.md, section 'Task 3b'");
  }

 private:
  void OnGradReady(size_t i) {
    // TODO(student): runs inside backward, once parameter i's gradient is complete. What may
    // start now, and what must still wait?
    StudentTodo("task3b BucketedDdp::OnGradReady", "docs/handout/part3.md, section 'Task 3b'");
  }

  std::vector<NamedParameter> params_;
  c10::intrusive_ptr<c10d::ProcessGroup> pg_;
  // TODO(student): your buckets and whatever else the hooks and FinishGradientSync share.
};

}  // namespace

std::unique_ptr<DataParallel> MakeBucketedDdp(std::vector<NamedParameter> params,
                                              c10::intrusive_ptr<c10d::ProcessGroup> pg, int64_t bucket_cap_bytes) {
  return std::make_unique<BucketedDdp>(std::move(params), std::move(pg), bucket_cap_bytes);
}

}  // namespace distlm::task3
