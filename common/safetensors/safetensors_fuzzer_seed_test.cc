// Runs the fuzz entry over the seed corpus (the hand-assembled corrupt and valid files) in every
// `bazel test`, where no libFuzzer is available; the entry's own checks abort on a violation.
// With DISTLM_FUZZ_SEED_DIR set, it also writes the seeds there to start the real fuzzer from.
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/runtime/errors.h"
#include "common/safetensors/header.h"
#include "common/safetensors/sample_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace distlm::safetensors {
namespace {

int RunEntry(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

// Parses a whole file as the fuzz entry does; returns the error, or "" when accepted.
std::string HeaderError(const std::string& bytes) {
  try {
    auto parts = SplitFile(bytes, "seed");
    ParseHeader(parts.header_json, parts.data.size(), "seed");
    return "";
  } catch (const UserError& e) {
    return e.what();
  }
}

TEST(SafetensorsFuzzerSeedTest, CorruptSeedsAreRejectedAndPassTheEntry) {
  for (const auto& seed : testing::CorruptFiles()) {
    SCOPED_TRACE(seed.name);
    std::string error = HeaderError(seed.bytes);
    if (seed.header_ok) {
      EXPECT_EQ(error, "");
    } else {
      EXPECT_NE(error.find(seed.expected), std::string::npos) << error;
    }
    EXPECT_EQ(RunEntry(seed.bytes), 0);
  }
}

TEST(SafetensorsFuzzerSeedTest, ValidSeedsAreAcceptedAndPassTheEntry) {
  for (const auto& seed : testing::ValidFiles()) {
    SCOPED_TRACE(seed.name);
    EXPECT_EQ(HeaderError(seed.bytes), "");
    EXPECT_EQ(RunEntry(seed.bytes), 0);
  }
}

TEST(SafetensorsFuzzerSeedTest, WritesSeedsWhenAsked) {
  const char* dir = std::getenv("DISTLM_FUZZ_SEED_DIR");
  if (dir == nullptr) GTEST_SKIP() << "DISTLM_FUZZ_SEED_DIR not set; no seed files written";
  int written = 0;
  for (const auto& list : {testing::CorruptFiles(), testing::ValidFiles()}) {
    for (const auto& seed : list) {
      std::ofstream out(std::string(dir) + "/" + seed.name, std::ios::binary);
      out << seed.bytes;
      ASSERT_TRUE(out.good()) << seed.name;
      ++written;
    }
  }
  EXPECT_GT(written, 0);
}

}  // namespace
}  // namespace distlm::safetensors
