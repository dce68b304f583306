// The docs' facts about the stages (their table, each test's points, the totals, the submission
// layout) come from one place, common/stages/stages.bzl. Where a document shows one of them it
// holds a block that //common/stages:stages_docs generates:
//
//   <!-- stages.bzl: points_table -->
//   ...what stages_docs() writes...
//   <!-- end points_table -->
//
// and a test holds every block to the generated one (`bazel run //docs:stage_facts -- --update`
// writes them in). Outside the blocks, prose that states a total ("141/141", "115 on the ViT",
// "127 points") is held to the totals the table gives.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace distlm::docs {

// A place in a document where it disagrees with the table.
struct FactProblem {
  std::string file;
  int line = 0;  // 1-based
  std::string what;
  std::string ToString() const { return file + ":" + std::to_string(line) + ": " + what; }
};

// The blocks of a text, by name: the lines between a block's opening and closing lines.
// `problems` gets unclosed or nested blocks.
std::map<std::string, std::vector<std::string>> ParseBlocks(const std::string& text, const std::string& file,
                                                            std::vector<FactProblem>* problems);

// Every block of `text` against `generated` (ParseBlocks of stages_docs.md): a block the
// generator has no such name for, or the first line where a block differs, named with the line
// that the table gives.
std::vector<FactProblem> CheckBlocks(const std::string& text, const std::string& file,
                                     const std::map<std::string, std::vector<std::string>>& generated);

// `text` with every block's lines replaced by the generated ones.
std::string UpdateBlocks(const std::string& text, const std::map<std::string, std::vector<std::string>>& generated);

// The totals a submission can be worth on each model (the required stages plus any set of the
// optional ones).
struct Totals {
  std::map<std::string, std::set<int>> by_model;  // "bert", "vit" -> possible totals
  std::set<int> any;                              // union over the models
  int largest_stage = 0;                          // a figure no larger may be one stage's points
};
Totals TotalsOfStages();

// Statements of a total outside the blocks that the table does not give: "N/M" and "N of M"
// (M a total of some set of stages), "N on BERT" / "N on the ViT" (N what a whole submission is
// worth on that model), "N points" (N above any one stage's points, and not 100, the course's
// mark with the written report).
std::vector<FactProblem> CheckTotals(const std::string& text, const std::string& file, const Totals& totals);

// The files under `root` whose extension (".md") or whole name ("BUILD") is one of `kinds`,
// relative to it, sorted; not Bazel's output links, hidden folders or third_party/.
std::vector<std::string> FilesUnder(const std::string& root, const std::vector<std::string>& kinds);

// The documents and scripts under `root` that may state these facts (*.md, *.sh, *.py; not
// Bazel's output links, hidden folders or third_party/), relative to it.
std::vector<std::string> DocumentsUnder(const std::string& root);

std::string ReadFileOrEmpty(const std::string& path);

// CheckBlocks and CheckTotals of each of `files` (relative to `root`).
std::vector<FactProblem> CheckDocuments(const std::string& root, const std::vector<std::string>& files,
                                        const std::map<std::string, std::vector<std::string>>& generated);

}  // namespace distlm::docs
