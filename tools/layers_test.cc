// The layering rules of docs/architecture.md, read off the checkout's #include lines:
//   - nothing under common/ includes a stage's folder, grading/, tools/ or task4_bench/
//     (common/ is the library every stage stands on; a stage is a folder on top of it);
//   - the models and what they stand on (common/bert, vit, glue, tokenizer, data, safetensors,
//     dist, autograd, runtime, vision, zero's layout) never include common/train: the trainer
//     is above them (the comparison with transformers, which steps the trainer's optimizer,
//     is common/parity);
//   - common/train names no stage: no include of common/stages.
// A failure names the file, the line and the rule.
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"

namespace fs = std::filesystem;

namespace {

// The checkout's root, through a source file among the runfiles.
std::string Checkout() {
  char resolved[PATH_MAX];
  const std::string file = distlm::testing::Runfile("common/train/stage.h");
  if (realpath(file.c_str(), resolved) == nullptr) return "";
  return fs::path(resolved).parent_path().parent_path().parent_path().string();
}

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

struct Include {
  std::string file;  // relative to the checkout
  int line;
  std::string target;  // what is between the quotes
};

std::vector<Include> IncludesUnder(const std::string& root, const std::string& dir) {
  std::vector<Include> out;
  for (const auto& e : fs::recursive_directory_iterator(root + "/" + dir)) {
    const std::string ext = e.path().extension().string();
    if (!e.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
    std::ifstream in(e.path());
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (!StartsWith(line, "#include \"")) continue;
      const size_t end = line.find('"', 10);
      if (end == std::string::npos) continue;
      out.push_back({fs::relative(e.path(), root).string(), n, line.substr(10, end - 10)});
    }
  }
  return out;
}

TEST(LayersTest, CommonIncludesNoStageGraderOrTool) {
  const std::string root = Checkout();
  ASSERT_FALSE(root.empty()) << "cannot find the checkout";
  const auto includes = IncludesUnder(root, "common");
  EXPECT_GT(includes.size(), 100u);
  for (const auto& i : includes) {
    const bool above = StartsWith(i.target, "part1/") || StartsWith(i.target, "task") ||
                       StartsWith(i.target, "grading/") || StartsWith(i.target, "tools/");
    EXPECT_FALSE(above) << i.file << ":" << i.line << " includes " << i.target
                        << ": common/ is below the stages, the grader and the tools";
  }
}

TEST(LayersTest, TheModelsAndWhatTheyStandOnDoNotIncludeTheTrainer) {
  const std::string root = Checkout();
  ASSERT_FALSE(root.empty());
  for (const std::string dir : {"common/bert", "common/vit", "common/glue", "common/tokenizer", "common/data",
                                "common/safetensors", "common/dist", "common/autograd", "common/runtime",
                                "common/vision"}) {
    for (const auto& i : IncludesUnder(root, dir)) {
      EXPECT_FALSE(StartsWith(i.target, "common/train/"))
          << i.file << ":" << i.line << " includes " << i.target << ": " << dir << " is below the trainer";
    }
  }
}

TEST(LayersTest, TheTrainerNamesNoStage) {
  const std::string root = Checkout();
  ASSERT_FALSE(root.empty());
  for (const auto& i : IncludesUnder(root, "common/train")) {
    EXPECT_FALSE(StartsWith(i.target, "common/stages/"))
        << i.file << ":" << i.line << " includes " << i.target
        << ": the Trainer runs any stage it is given; what is particular to one lives in its folder";
  }
}

}  // namespace
