// The layering rules of docs/architecture.md, read off the checkout's #include lines:
//   - nothing under common/ includes a stage's folder, grading/, tools/ or task4_bench/
//     (common/ is the library every stage stands on; a stage is a folder on top of it);
//   - the models and what they stand on (common/bert, vit, glue, tokenizer, data, safetensors,
//     dist, autograd, runtime, vision, zero's layout) never include common/train: the trainer
//     is above them (the comparison with transformers, which steps the trainer's optimizer,
//     is common/parity);
//   - common/train names no stage: no include of common/stages;
//   - no arrow back up anywhere: the packages (folders with a BUILD file) and their #include
//     lines make no cycle, so every package sits above or beside the ones it uses;
//   - docs/architecture.md's package diagram names every package there is.
// A failure names the file, the line and the rule.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing/subprocess.h"

namespace fs = std::filesystem;

namespace {

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
  const std::string root = distlm::testing::Checkout();
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
  const std::string root = distlm::testing::Checkout();
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
  const std::string root = distlm::testing::Checkout();
  ASSERT_FALSE(root.empty());
  for (const auto& i : IncludesUnder(root, "common/train")) {
    EXPECT_FALSE(StartsWith(i.target, "common/stages/"))
        << i.file << ":" << i.line << " includes " << i.target
        << ": the Trainer runs any stage it is given; what is particular to one lives in its folder";
  }
}

// Every package of the checkout: the folders holding a BUILD file (not Bazel's output links,
// hidden folders or third_party's stand-ins), relative to the root.
std::set<std::string> Packages(const std::string& root) {
  std::set<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory() && (StartsWith(name, "bazel-") || name[0] == '.' || name == "third_party")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file() && name == "BUILD") {
      const std::string dir = fs::relative(it->path().parent_path(), root).string();
      if (dir != ".") out.insert(dir);
    }
  }
  return out;
}

// The package a workspace-relative path belongs to: its nearest folder with a BUILD file.
std::string PackageOf(const std::string& path, const std::set<std::string>& packages) {
  fs::path p = fs::path(path).parent_path();
  while (!p.empty()) {
    if (packages.count(p.string())) return p.string();
    p = p.parent_path();
  }
  return "";
}

TEST(LayersTest, NoArrowBackUp) {
  const std::string root = distlm::testing::Checkout();
  ASSERT_FALSE(root.empty());
  const std::set<std::string> packages = Packages(root);
  ASSERT_GT(packages.size(), 20u);
  // package -> package it includes -> one include that says so
  std::map<std::string, std::map<std::string, Include>> uses;
  for (const std::string& top : {"common", "part1", "task2a", "task2b", "task3", "task4_bench", "task5", "task6",
                                 "task7", "grading", "tools", "docs"}) {
    if (!fs::exists(root + "/" + top)) continue;
    for (const Include& i : IncludesUnder(root, top)) {
      // A package's tests stand above everything they use (the test helpers of common/testing
      // included): only what the package's own code includes places it.
      const std::string base = fs::path(i.file).stem().string();
      if (base.find("_test") != std::string::npos || base.find("testee") != std::string::npos ||
          base.find("_fuzzer") != std::string::npos) {
        continue;
      }
      const std::string from = PackageOf(i.file, packages), to = PackageOf(i.target, packages);
      if (from.empty() || to.empty() || from == to) continue;
      uses[from].emplace(to, i);
    }
  }
  // Depth-first search; a package met again while still on the path closes a cycle.
  std::map<std::string, int> state;  // 0 unseen, 1 on the path, 2 done
  std::vector<std::string> path;
  std::set<std::string> reported;
  std::function<void(const std::string&)> visit = [&](const std::string& pkg) {
    state[pkg] = 1;
    path.push_back(pkg);
    for (const auto& [next, include] : uses[pkg]) {
      if (state[next] == 1) {
        std::ostringstream cycle;
        auto start = std::find(path.begin(), path.end(), next);
        for (auto p = start; p != path.end(); ++p) {
          const std::string& to = p + 1 != path.end() ? *(p + 1) : next;
          const Include& why = uses[*p].at(to);
          cycle << "\n  " << *p << " -> " << to << " (" << why.file << ":" << why.line << " includes " << why.target
                << ")";
        }
        if (reported.insert(cycle.str()).second) {
          ADD_FAILURE() << "an arrow back up: these packages include each other in a circle; what they share "
                           "belongs in a package below them:"
                        << cycle.str();
        }
      } else if (state[next] == 0) {
        visit(next);
      }
    }
    path.pop_back();
    state[pkg] = 2;
  };
  for (const std::string& pkg : packages) {
    if (state[pkg] == 0) visit(pkg);
  }
}

// The architecture's diagram names every package: the fenced block under "## Packages".
TEST(LayersTest, TheArchitectureNamesEveryPackage) {
  const std::string root = distlm::testing::Checkout();
  ASSERT_FALSE(root.empty());
  std::ifstream in(root + "/docs/architecture.md");
  if (!in) GTEST_SKIP() << "no docs/architecture.md (the student kit has none)";
  std::string diagram, line;
  bool in_section = false, in_block = false;
  while (std::getline(in, line)) {
    if (StartsWith(line, "## ")) in_section = line == "## Packages";
    if (!in_section) continue;
    if (StartsWith(line, "```")) {
      if (in_block) break;
      in_block = true;
      continue;
    }
    if (in_block) diagram += " " + line + " ";
  }
  ASSERT_FALSE(diagram.empty()) << "docs/architecture.md has no fenced block under '## Packages'";
  for (const std::string& pkg : Packages(root)) {
    // A package is named when its path stands alone (followed by a space, a slash or a comma).
    bool named = false;
    for (size_t at = diagram.find(pkg); at != std::string::npos && !named; at = diagram.find(pkg, at + 1)) {
      const char before = at == 0 ? ' ' : diagram[at - 1];
      const char after = at + pkg.size() < diagram.size() ? diagram[at + pkg.size()] : ' ';
      named = std::string(" `|(,").find(before) != std::string::npos &&
              std::string(" /`|),").find(after) != std::string::npos;
    }
    EXPECT_TRUE(named) << "docs/architecture.md's package diagram (## Packages) does not name " << pkg;
  }
}

}  // namespace
