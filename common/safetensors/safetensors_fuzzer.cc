// libFuzzer target for the safetensors header parser: the input is a whole file (length prefix,
// header JSON, data buffer). Only header.cc, header_reader.cc and nlohmann-json are linked, no
// LibTorch, and no tensor is allocated, so the fuzzer is fast and its memory stays bounded by the
// input.
//
// Bazel's default toolchain is gcc (no libFuzzer); //common/safetensors:safetensors_fuzzer_seed_test
// runs this entry over the seed corpus in every `bazel test`. The real fuzzer is built with clang
// outside Bazel; common/safetensors/fuzz.sh [SECONDS] does all of this. By hand, from the
// workspace root:
//
//   clang++-14 -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. common/safetensors/safetensors_fuzzer.cc common/safetensors/header.cc common/safetensors/header_reader.cc -o /tmp/safetensors_fuzzer
//   bazel build //common/safetensors:safetensors_fuzzer_seed_test
//   mkdir -p /tmp/safetensors_corpus
//   DISTLM_FUZZ_SEED_DIR=/tmp/safetensors_corpus bazel-bin/common/safetensors/safetensors_fuzzer_seed_test   # writes the seed files
//   /tmp/safetensors_fuzzer -max_total_time=180 -rss_limit_mb=2048 -max_len=4096 -dict=common/safetensors/safetensors_fuzzer.dict /tmp/safetensors_corpus
//   /tmp/safetensors_fuzzer -max_total_time=120 -rss_limit_mb=2048 -max_len=65536 -dict=common/safetensors/safetensors_fuzzer.dict /tmp/safetensors_corpus
//
// (UserError is defined inline in common/runtime/errors.h, so errors.cc and its c10 include are
// not needed; nlohmann-json is header-only in /usr/include.)
//
// Beyond "no crash", every input checks: a rejection is a UserError whose message is one
// printable line starting with the file name; an accepted header tiles the data buffer exactly
// with entries whose sizes match their shapes; and writing the header back and parsing it again
// gives the same header.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/runtime/errors.h"
#include "common/safetensors/header.h"

namespace {

constexpr char kSource[] = "fuzz.safetensors";

#define FUZZ_CHECK(cond)                                                         \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

void CheckMessage(std::string_view message) {
  FUZZ_CHECK(message.rfind(std::string(kSource) + ": ", 0) == 0);
  for (char c : message) {
    FUZZ_CHECK(c >= 0x20 && c < 0x7f);  // one printable line
  }
}

uint64_t ElementCount(const distlm::safetensors::TensorEntry& t) {
  unsigned __int128 n = 1;
  for (int64_t d : t.shape) {
    FUZZ_CHECK(d >= 0);
    n *= static_cast<uint64_t>(d);
    if (n == 0) return 0;
    FUZZ_CHECK(n <= static_cast<uint64_t>(INT64_MAX));
  }
  return static_cast<uint64_t>(n);
}

void CheckAccepted(const distlm::safetensors::Header& header, uint64_t data_size) {
  using distlm::safetensors::DtypeSize;
  uint64_t covered = 0;
  for (const auto& t : header.tensors) {
    FUZZ_CHECK(t.begin == covered);
    FUZZ_CHECK(t.end >= t.begin && t.end <= data_size);
    size_t item = DtypeSize(t.dtype);
    FUZZ_CHECK(item > 0);
    FUZZ_CHECK(static_cast<unsigned __int128>(ElementCount(t)) * item == t.end - t.begin);
    covered = t.end;
  }
  FUZZ_CHECK(covered == data_size);

  std::string json = distlm::safetensors::SerializeHeader(header, kSource);
  FUZZ_CHECK(json.size() % 8 == 0 && !json.empty() && json[0] == '{');
  FUZZ_CHECK(distlm::safetensors::ParseHeader(json, data_size, kSource) == header);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view file(reinterpret_cast<const char*>(data), size);
  distlm::safetensors::Header header;
  uint64_t data_size = 0;
  try {
    auto parts = distlm::safetensors::SplitFile(file, kSource);
    data_size = parts.data.size();
    header = distlm::safetensors::ParseHeader(parts.header_json, data_size, kSource);
  } catch (const distlm::UserError& e) {
    CheckMessage(e.what());
    return 0;
  }
  // Any other exception escapes and libFuzzer reports it.
  CheckAccepted(header, data_size);
  return 0;
}
