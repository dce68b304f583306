// Task 8a (and 8b's exchange): your code goes here. Read docs/handout/part8.md first.
#include "task8/outer_loop.h"

#include "common/runtime/errors.h"

namespace distlm::task8 {
namespace {

class Rounds : public OuterLoop {
 public:
  Rounds(const OuterOptimizerOptions& options, Compression compression)
      : options_(options), compression_(compression) {}

  void Begin(const std::vector<torch::Tensor>& parameters) override {
    // TODO(student): what must a worker keep to take the outer step at the round's end?
    (void)parameters;
    StudentTodo("task8 OuterLoop::Begin", "docs/handout/part8.md, section 'Task 8a'");
  }

  void End(c10d::ProcessGroup& pg, const std::vector<torch::Tensor>& parameters) override {
    // TODO(student): the contract in task8/outer_loop.h. With Compression::kInt8, what travels
    // is an Int8Message (int8_exchange.h), and what it missed is sent next round.
    (void)pg, (void)parameters;
    StudentTodo("task8 OuterLoop::End", "docs/handout/part8.md, section 'Task 8a'");
  }

  std::vector<torch::Tensor> SharedState() const override {
    // TODO(student): what does a worker that joins between rounds need from the others?
    StudentTodo("task8c OuterLoop::SharedState", "docs/handout/part8.md, section 'Task 8c'");
  }

  void LoadSharedState(const std::vector<torch::Tensor>& state) override {
    (void)state;
    StudentTodo("task8c OuterLoop::LoadSharedState", "docs/handout/part8.md, section 'Task 8c'");
  }

 private:
  OuterOptimizerOptions options_;
  Compression compression_;
};

}  // namespace

std::unique_ptr<OuterLoop> MakeOuterLoop(const OuterOptimizerOptions& options, Compression compression) {
  return std::make_unique<Rounds>(options, compression);
}

}  // namespace distlm::task8
