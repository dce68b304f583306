// Hand-assembled safetensors files for tests and the fuzzer's seed corpus: a table of corrupt
// files with the error each must give, and a few valid ones. Built byte by byte from the
// format's description, independently of SerializeHeader and SaveFile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace distlm::safetensors::testing {

// The 8-byte little-endian length of header_json, header_json, then data.
std::string AssembleFile(std::string_view header_json, std::string_view data);

// Little-endian bytes of values, as the data buffer holds them.
std::string FloatBytes(const std::vector<float>& values);

struct SampleFile {
  std::string name;      // short, usable as a file name
  std::string bytes;     // the whole file
  std::string expected;  // for a corrupt file: a part of the one-line error it must give
  // For a corrupt file whose header is fine and whose data is not (only LoadFile can tell).
  bool header_ok = false;
};

std::vector<SampleFile> CorruptFiles();
std::vector<SampleFile> ValidFiles();

}  // namespace distlm::safetensors::testing
