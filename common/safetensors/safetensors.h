// Reading and writing safetensors files as LibTorch tensors. The container format and all its
// checks live in header.h; this adds the tensors.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

#include "common/safetensors/header.h"

namespace distlm::safetensors {

// Loads every tensor of a safetensors file, in the order their bytes lie in the file. F16 and
// BF16 become float32 when to_float32 is true (exactly: every half value is a float); every
// other dtype keeps its LibTorch equivalent (F64 -> kDouble, I64 -> kLong, I32 -> kInt,
// I16 -> kShort, I8 -> kChar, U8 -> kByte, BOOL -> kBool). Each tensor owns fresh memory that
// its bytes are read into directly, once. Throws distlm::UserError with one line naming the
// file: missing or unreadable, shorter than 8 bytes, header length past the end or over the
// limit, bad JSON, unknown dtype, bad shape, offsets out of range, overlapping or leaving holes,
// BOOL bytes other than 0 and 1.
std::vector<std::pair<std::string, torch::Tensor>> LoadFile(const std::string& path,
                                                             bool to_float32 = true);

// Reads and checks only the header of a file (tensor names, dtypes, shapes, offsets and the
// metadata), with the same checks and errors as LoadFile, without reading the data.
Header ReadHeader(const std::string& path);

// Writes tensors (any device; copied to contiguous CPU memory; the dtypes LoadFile reads) and
// optional metadata to path atomically (distlm::WriteFileAtomically): sorted by name, so the
// same tensors always give the same bytes; header padded to a multiple of 8 bytes. Any
// safetensors reader can read the result. Throws UserError naming the file and the tensor for
// an undefined, sparse or unsupported-dtype tensor, a duplicate or reserved name.
void SaveFile(const std::string& path,
              const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
              const std::map<std::string, std::string>& metadata = {});

// The LibTorch type of a safetensors dtype name (one DtypeSize knows).
c10::ScalarType TorchDtype(const std::string& dtype);

// The safetensors name of a LibTorch type, or "" when the format has none that we support.
std::string SafetensorsDtype(c10::ScalarType type);

}  // namespace distlm::safetensors
