// The safetensors container without the tensors: the 8-byte length prefix and the JSON header,
// parsed and checked against the data buffer. Nothing here depends on LibTorch, so the fuzzer
// links only this file, nlohmann-json and the UserError class.
//
// Layout (the public format): a little-endian u64 N, then N bytes of UTF-8 JSON mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} plus an optional
// "__metadata__" object of strings, then the data buffer the offsets point into.
//
// What this reader accepts, and why where it differs from a bare JSON reader:
// - a duplicate key anywhere (tensor name, metadata key, field of a tensor) is an error: the file
//   would mean different things to readers that keep the first or the last copy;
// - unknown fields inside a tensor entry are ignored, as the reference reader ignores them;
// - the header may have whitespace around the object (writers pad it with spaces);
// - tensors must cover the data buffer exactly: no overlap, no hole, nothing left at the end
//   (zero-byte tensors may sit at any boundary), as the reference reader requires.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace distlm::safetensors {

// The reference reader refuses headers above 100 MB; so do we, before allocating anything.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorEntry {
  std::string name;
  std::string dtype;            // as written in the file: "F32", "BF16", ...
  std::vector<int64_t> shape;   // every dimension >= 0; the element count fits in int64_t
  uint64_t begin = 0;           // data_offsets: [begin, end) within the data buffer
  uint64_t end = 0;

  bool operator==(const TensorEntry& o) const {
    return name == o.name && dtype == o.dtype && shape == o.shape && begin == o.begin &&
           end == o.end;
  }
};

struct Header {
  // Ordered as the bytes lie in the data buffer (by begin, then end; ties keep header order).
  std::vector<TensorEntry> tensors;
  std::map<std::string, std::string> metadata;

  bool operator==(const Header& o) const {
    return tensors == o.tensors && metadata == o.metadata;
  }
};

// Bytes per element of a dtype this project supports (BOOL, U8, I8, I16, I32, I64, F16, BF16,
// F32, F64); 0 for anything else.
size_t DtypeSize(std::string_view dtype);

// Parses the header JSON and checks it against a data buffer of data_size bytes: dtypes,
// shapes, offsets in range and matching the shape, and the buffer covered exactly once.
// `source` names the file in errors. Throws distlm::UserError with one line, e.g.
// "model.safetensors: tensor 'bert.pooler.dense.weight' has data_offsets [10, 20] past the end
// of the 16-byte data buffer".
Header ParseHeader(std::string_view json, uint64_t data_size, const std::string& source);

// Reads the header length N from the first 8 bytes of a file of file_size bytes (prefix holds
// the first min(8, file_size) bytes) and checks it: the file holds at least 8 bytes, N is under
// kMaxHeaderBytes, and 8 + N <= file_size. Returns N.
uint64_t ParseHeaderLength(std::string_view prefix, uint64_t file_size, const std::string& source);

// A whole file in memory, split into its header JSON and data buffer (views into `file`),
// after ParseHeaderLength's checks. Nothing is parsed yet.
struct FileParts {
  std::string_view header_json;
  std::string_view data;
};
FileParts SplitFile(std::string_view file, const std::string& source);

// The header's JSON as a writer puts it in a file: "__metadata__" first (left out when empty),
// then the tensors in the given order, compact, padded with spaces to a multiple of 8 bytes so
// the data buffer starts 8-byte aligned. Throws UserError naming `destination` for a name that
// is not valid UTF-8, a duplicate or reserved name, or a header over kMaxHeaderBytes.
std::string SerializeHeader(const Header& header, const std::string& destination);

// Text from a file or a caller, made safe for a one-line error: bytes outside printable ASCII
// become \xNN, and anything past `limit` bytes is cut and marked with "...".
std::string Printable(std::string_view text, size_t limit = 120);

// A tensor name for an error message: Printable, in single quotes.
std::string Quoted(std::string_view name);

}  // namespace distlm::safetensors
