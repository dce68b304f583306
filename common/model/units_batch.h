// A batch as a pipeline runs it (task 7b): cut into equal micro-batches along the batch, and a
// block of the model's units (unit_hooks.h's numbering: 0 the embeddings, 1..L the layers, L + 1
// the head) run on one micro-batch. The model builds it (its inputs and labels stay inside), so
// a pipeline stage needs to know neither the model nor what its examples are made of.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

namespace distlm::model {

struct UnitsBatch {
  int parts = 1;                          // the micro-batches
  std::vector<int64_t> activation_shape;  // what one unit hands the next, per micro-batch
  // Units first..last on micro-batch `part`: `input` is unit first - 1's output (unused when
  // first is 0). Returns unit last's output or, when last is the head, the micro-batch's mean
  // loss.
  std::function<torch::Tensor(int first, int last, const torch::Tensor& input, int part)> forward;
};

}  // namespace distlm::model
