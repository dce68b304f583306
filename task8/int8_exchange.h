// Task 8b: the round's pseudo-gradient sent as int8 with one float32 scale per chunk, a quarter
// of float32's bytes and a little more. What int8 cannot say of a worker's pseudo-gradient is
// not dropped: it is added to what the worker sends next round (error feedback), so that over
// many rounds the outer optimizer sees, on average, what it would have seen in float32.
#pragma once

#include <cstdint>
#include <string>

#include <torch/types.h>

namespace distlm::task8 {

// How a round's pseudo-gradient travels (--compression).
enum class Compression { kNone, kInt8 };
// "none" or "int8".
inline std::string CompressionName(Compression c) { return c == Compression::kInt8 ? "int8" : "none"; }

// A chunk is kInt8Chunk consecutive values of the flat tensor (the last may be shorter).
inline constexpr int64_t kInt8Chunk = 256;

// `values` int8 [n]; `scales` float32 [ceil(n / kInt8Chunk)], chunk c's in scales[c].
struct Int8Message {
  torch::Tensor values;
  torch::Tensor scales;
};

// What must hold, for a float32 tensor `flat` of n values (handout part 8, "int8 and its error"):
//   - each value of DequantizeInt8(QuantizeInt8(flat)) is within half of its chunk's step of
//     the value it stands for, where the step is the chunk's largest |value| / 127;
//   - the values are in [-127, 127]; a chunk of zeros comes back as zeros.
Int8Message QuantizeInt8(const torch::Tensor& flat);
// float32 [n].
torch::Tensor DequantizeInt8(const Int8Message& message);

}  // namespace distlm::task8
