// The container around the header JSON: its length prefix, the entries' tiling of the data
// buffer, and writing a header. Reading the JSON itself is header_reader.cc.
#include "common/safetensors/header.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/runtime/errors.h"
#include "common/safetensors/header_internal.h"

namespace distlm::safetensors {
namespace {

using Json = nlohmann::json;
using internal::Fail;
using internal::kMetadataKey;
using internal::Range;

struct DtypeInfo {
  std::string_view name;
  size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"I16", 2},  {"I32", 4},
    {"I64", 8},  {"F16", 2}, {"BF16", 2}, {"F32", 4}, {"F64", 8},
};

// The entries, sorted by position, must tile [0, data_size) exactly.
void CheckCoverage(const std::vector<TensorEntry>& tensors, uint64_t data_size,
                   const std::string& source) {
  uint64_t covered = 0;
  const TensorEntry* previous = nullptr;
  for (const TensorEntry& t : tensors) {
    if (t.begin < covered) {
      Fail(source, "tensors " + Quoted(previous->name) + " " + Range(previous->begin, previous->end) +
                       " and " + Quoted(t.name) + " " + Range(t.begin, t.end) +
                       " overlap in the data buffer");
    }
    if (t.begin > covered) {
      Fail(source, "bytes [" + std::to_string(covered) + ", " + std::to_string(t.begin) +
                       ") of the data buffer belong to no tensor (a hole before tensor " +
                       Quoted(t.name) + ")");
    }
    covered = t.end;
    previous = &t;
  }
  if (covered != data_size) {
    Fail(source, "bytes [" + std::to_string(covered) + ", " + std::to_string(data_size) +
                     ") at the end of the " + std::to_string(data_size) +
                     "-byte data buffer belong to no tensor");
  }
}

// nlohmann's string escaping; a name that is not valid UTF-8 cannot go into the header.
std::string JsonString(const std::string& text, const std::string& what,
                       const std::string& destination) {
  try {
    return Json(text).dump();
  } catch (const Json::type_error&) {
    Fail(destination, what + " " + Quoted(text) + " is not valid UTF-8");
  }
}

}  // namespace

namespace internal {

[[noreturn]] void Fail(const std::string& source, const std::string& what) {
  throw UserError(source + ": " + what);
}

std::string Range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

std::string SupportedDtypes() {
  std::string out;
  for (const auto& d : kDtypes) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

}  // namespace internal

size_t DtypeSize(std::string_view dtype) {
  for (const auto& d : kDtypes) {
    if (d.name == dtype) return d.size;
  }
  return 0;
}

Header ParseHeader(std::string_view json, uint64_t data_size, const std::string& source) {
  Header header = internal::ReadHeaderEntries(json, data_size, source);
  std::stable_sort(header.tensors.begin(), header.tensors.end(),
                   [](const TensorEntry& a, const TensorEntry& b) {
                     return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
                   });
  CheckCoverage(header.tensors, data_size, source);
  return header;
}

uint64_t ParseHeaderLength(std::string_view prefix, uint64_t file_size, const std::string& source) {
  if (file_size < 8 || prefix.size() < 8) {
    Fail(source, "file is " + std::to_string(file_size) +
                     " bytes, too short for a safetensors file (it starts with an 8-byte header length)");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[i]);
  if (n > kMaxHeaderBytes) {
    Fail(source, "header length " + std::to_string(n) + " is over the " +
                     std::to_string(kMaxHeaderBytes) +
                     "-byte limit (corrupt, or not a safetensors file)");
  }
  if (n > file_size - 8) {
    Fail(source, "header length " + std::to_string(n) + " runs past the end of the " +
                     std::to_string(file_size) + "-byte file (truncated?)");
  }
  return n;
}

FileParts SplitFile(std::string_view file, const std::string& source) {
  uint64_t n = ParseHeaderLength(file.substr(0, 8), file.size(), source);
  return FileParts{file.substr(8, n), file.substr(8 + n)};
}

std::string SerializeHeader(const Header& header, const std::string& destination) {
  std::string out = "{";
  if (!header.metadata.empty()) {
    out += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : header.metadata) {
      if (!first) out += ',';
      first = false;
      out += JsonString(key, "metadata key", destination);
      out += ':';
      out += JsonString(value, "metadata value of " + Quoted(key), destination);
    }
    out += '}';
  }
  std::unordered_set<std::string_view> names;
  for (const TensorEntry& t : header.tensors) {
    if (t.name == kMetadataKey) Fail(destination, "\"__metadata__\" cannot name a tensor");
    if (!names.insert(t.name).second) Fail(destination, "tensor " + Quoted(t.name) + " is given twice");
    if (out.size() > 1) out += ',';
    out += JsonString(t.name, "tensor name", destination);
    out += ":{\"dtype\":";
    out += JsonString(t.dtype, "dtype of " + Quoted(t.name), destination);
    out += ",\"shape\":";
    out += Json(t.shape).dump();
    out += ",\"data_offsets\":[" + std::to_string(t.begin) + "," + std::to_string(t.end) + "]}";
  }
  out += '}';
  out.append((8 - out.size() % 8) % 8, ' ');
  if (out.size() > kMaxHeaderBytes) {
    Fail(destination, "header would be " + std::to_string(out.size()) + " bytes, over the " +
                          std::to_string(kMaxHeaderBytes) + "-byte limit readers accept");
  }
  return out;
}

std::string Printable(std::string_view text, size_t limit) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == limit) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string Quoted(std::string_view name) { return "'" + Printable(name) + "'"; }

}  // namespace distlm::safetensors
