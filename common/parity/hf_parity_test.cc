// distlm against HuggingFace transformers: every dump under $DISTLM_PEERS_DIR/dumps (written by
// tools/peers/make_dumps.sh: the tiny reference checkpoint and a BERT-base-shaped random one),
// checked tensor by tensor by CompareWithHfDump. Prints each OK / NOT OK line.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/parity/hf_parity.h"
#include "common/testing/subprocess.h"

namespace distlm::bert {
namespace {

std::vector<std::string> DumpDirs() {
  std::vector<std::string> dirs;
  const auto root = distlm::testing::PeersDir();
  if (!root) return dirs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(*root + "/dumps", ec)) {
    if (std::filesystem::exists(entry.path() / "meta.json") && std::filesystem::exists(entry.path() / "dump.safetensors")) {
      dirs.push_back(entry.path().string());
    }
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

TEST(HfParityTest, EveryDumpHolds) {
  auto dirs = DumpDirs();
  if (dirs.empty()) {
    GTEST_SKIP() << "SKIPPED: no transformers dumps (set DISTLM_PEERS_DIR to the folder "
                    "tools/peers/make_dumps.sh wrote; it needs PyPI once); parity against "
                    "transformers did not run";
  }
  for (const auto& dir : dirs) {
    auto report = CompareWithHfDump(dir);
    std::printf("== %s (model %s)\n", dir.c_str(), report.model_dir.c_str());
    for (const auto& c : report.checks) {
      std::printf("%s\n", FormatCheck(c).c_str());
      EXPECT_TRUE(c.ok()) << dir << ": " << FormatCheck(c);
    }
    std::printf("== %zu checks, %d NOT OK\n", report.checks.size(), report.failures());
    EXPECT_GT(report.checks.size(), 10u);
  }
}

}  // namespace
}  // namespace distlm::bert
