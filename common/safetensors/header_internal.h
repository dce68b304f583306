// The parts of //common/safetensors:header that header.cc and header_reader.cc share; not a
// public API (header.h is). The reader is its own file because it is most of the code: a SAX
// state machine that checks each tensor entry as it is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/safetensors/header.h"

namespace distlm::safetensors::internal {

inline constexpr std::string_view kMetadataKey = "__metadata__";

// Throws UserError("<source>: <what>"): every error of a header is one line naming its file.
[[noreturn]] void Fail(const std::string& source, const std::string& what);

// "[begin, end]", as errors show data_offsets.
std::string Range(uint64_t begin, uint64_t end);

// "BOOL, U8, ...": the dtypes DtypeSize knows, for an error about one it does not.
std::string SupportedDtypes();

// The header JSON read into entries, in file order, each checked on its own (fields, dtype,
// shape, offsets within data_size and matching the shape), duplicates refused; how the
// entries fit together is left to the caller. Throws UserError naming `source`.
Header ReadHeaderEntries(std::string_view json, uint64_t data_size, const std::string& source);

}  // namespace distlm::safetensors::internal
