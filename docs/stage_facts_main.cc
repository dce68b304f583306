// Checks, or with --update rewrites, the blocks of the checkout's documents that
// common/stages/stages.bzl generates (docs/stage_facts.h):
//
//   bazel run //docs:stage_facts              # every disagreement, one line each; exit 1 if any
//   bazel run //docs:stage_facts -- --update  # the blocks written in from stages.bzl
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "docs/stage_facts.h"

ABSL_FLAG(bool, update, false, "write the generated blocks into the documents instead of checking them");
ABSL_FLAG(std::string, root, "", "the checkout (default: the folder `bazel run` was called in)");
ABSL_FLAG(std::string, generated, "", "//common/stages:stages_docs's output (BUILD passes it)");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::string root = absl::GetFlag(FLAGS_root);
  if (root.empty() && std::getenv("BUILD_WORKSPACE_DIRECTORY") != nullptr) root = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (root.empty()) {
    std::fprintf(stderr, "stage_facts: --root: give the checkout (or run it with bazel run)\n");
    return 2;
  }
  const std::string generated_path = absl::GetFlag(FLAGS_generated);
  const std::string generated_text = distlm::docs::ReadFileOrEmpty(generated_path);
  std::vector<distlm::docs::FactProblem> problems;
  const auto generated = distlm::docs::ParseBlocks(generated_text, generated_path, &problems);
  if (generated.empty()) {
    std::fprintf(stderr, "stage_facts: %s: no generated blocks\n", generated_path.c_str());
    return 1;
  }
  const std::vector<std::string> files = distlm::docs::DocumentsUnder(root);
  if (absl::GetFlag(FLAGS_update)) {
    int changed = 0;
    for (const std::string& f : files) {
      const std::string path = root + "/" + f;
      const std::string text = distlm::docs::ReadFileOrEmpty(path);
      const std::string updated = distlm::docs::UpdateBlocks(text, generated);
      if (updated == text) continue;
      std::ofstream(path, std::ios::binary) << updated;
      std::printf("stage_facts: %s updated\n", f.c_str());
      ++changed;
    }
    std::printf("stage_facts: %d of %zu documents updated\n", changed, files.size());
  }
  problems = distlm::docs::CheckDocuments(root, files, generated);
  for (const auto& p : problems) std::printf("%s\n", p.ToString().c_str());
  std::printf("stage_facts: %zu documents, %zu disagreements with common/stages/stages.bzl\n", files.size(),
              problems.size());
  return problems.empty() ? 0 : 1;
}
