// Task 7c: your code goes here. Read docs/handout/part7.md first, and the contract in
// task7/device_mesh.h. Check your work with: bazel test //task7:mesh_student_test
#include "task7/device_mesh.h"

#include "common/runtime/errors.h"

namespace distlm::task7 {

MeshLayout MakeMeshLayout(int rank, int world_size, int tensor_size) {
  // TODO(student): the D tensor groups (adjacent ranks) and T data groups (every T-th rank), and
  // this rank's place in each.
  StudentTodo("task7 MakeMeshLayout", "docs/handout/part7.md, section 'Task 7c'");
}

void AverageOverDataGroup(const std::vector<torch::Tensor>& parameters, const dist::GroupPtr& data_group) {
  // TODO(student): each gradient's mean over the data group.
  StudentTodo("task7 AverageOverDataGroup", "docs/handout/part7.md, section 'Task 7c'");
}

}  // namespace distlm::task7
