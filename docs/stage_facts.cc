#include "docs/stage_facts.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "common/stages/stages.h"

namespace distlm::docs {
namespace {

const std::regex kOpen(R"(^\s*<!-- stages\.bzl: ([a-z_]+) -->\s*$)");
const std::regex kClose(R"(^\s*<!-- end ([a-z_]+) -->\s*$)");

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Visits each line, saying whether it is inside a block (the markers count as inside).
template <typename F>
void ForEachLine(const std::string& text, F f) {
  bool inside = false;
  int n = 0;
  for (const std::string& line : Lines(text)) {
    ++n;
    std::smatch m;
    if (std::regex_match(line, m, kOpen)) inside = true;
    f(n, line, inside);
    if (std::regex_match(line, m, kClose)) inside = false;
  }
}

std::string Quote(const std::string& s) { return s.size() > 160 ? "'" + s.substr(0, 157) + "...'" : "'" + s + "'"; }

}  // namespace

std::map<std::string, std::vector<std::string>> ParseBlocks(const std::string& text, const std::string& file,
                                                            std::vector<FactProblem>* problems) {
  std::map<std::string, std::vector<std::string>> blocks;
  std::string open;
  int open_line = 0, n = 0;
  for (const std::string& line : Lines(text)) {
    ++n;
    std::smatch m;
    if (std::regex_match(line, m, kOpen)) {
      if (!open.empty()) problems->push_back({file, n, "block '" + m[1].str() + "' opens inside block '" + open + "'"});
      open = m[1];
      open_line = n;
      blocks[open];  // an empty block is still a block
    } else if (std::regex_match(line, m, kClose)) {
      if (m[1].str() != open) {
        problems->push_back({file, n, "'<!-- end " + m[1].str() + " -->' closes no open block of that name"});
      }
      open.clear();
    } else if (!open.empty()) {
      blocks[open].push_back(line);
    }
  }
  if (!open.empty()) problems->push_back({file, open_line, "block '" + open + "' is never closed"});
  return blocks;
}

std::vector<FactProblem> CheckBlocks(const std::string& text, const std::string& file,
                                     const std::map<std::string, std::vector<std::string>>& generated) {
  std::vector<FactProblem> problems;
  ParseBlocks(text, file, &problems);
  if (!problems.empty()) return problems;
  std::string open;
  size_t index = 0;
  bool reported = false;
  ForEachLine(text, [&](int n, const std::string& line, bool inside) {
    std::smatch m;
    if (std::regex_match(line, m, kOpen)) {
      open = m[1];
      index = 0;
      reported = false;
      if (generated.count(open) == 0) {
        problems.push_back({file, n, "block '" + open + "': common/stages/stages.bzl makes no block of that name"});
        reported = true;
      }
      return;
    }
    if (!inside || reported) return;
    const std::vector<std::string>& want = generated.at(open);
    if (std::regex_match(line, m, kClose)) {
      if (index < want.size()) {
        problems.push_back({file, n, "block '" + open + "' ends where stages.bzl has " + Quote(want[index]) +
                                         " (bazel run //docs:stage_facts -- --update)"});
      }
      return;
    }
    if (index >= want.size() || line != want[index]) {
      problems.push_back({file, n, "block '" + open + "' has " + Quote(line) + " where stages.bzl has " +
                                       (index < want.size() ? Quote(want[index]) : "nothing more") +
                                       " (bazel run //docs:stage_facts -- --update)"});
      reported = true;
    }
    ++index;
  });
  return problems;
}

std::string UpdateBlocks(const std::string& text, const std::map<std::string, std::vector<std::string>>& generated) {
  std::string out;
  std::string open;
  ForEachLine(text, [&](int, const std::string& line, bool inside) {
    std::smatch m;
    if (std::regex_match(line, m, kOpen)) {
      open = m[1];
      out += line + "\n";
      auto it = generated.find(open);
      if (it != generated.end()) {
        for (const std::string& l : it->second) out += l + "\n";
      }
      return;
    }
    if (std::regex_match(line, m, kClose)) {
      out += line + "\n";
      open.clear();
      return;
    }
    if (inside && generated.count(open)) return;  // replaced above
    out += line + "\n";
  });
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();
  return out;
}

Totals TotalsOfStages() {
  Totals t;
  std::vector<const stages::Row*> optional;
  for (const auto& s : stages::All()) {
    if (s.grading.optional) optional.push_back(&s);
    t.largest_stage = std::max(t.largest_stage, s.grading.points());
  }
  for (const std::string model : {"bert", "vit"}) {
    const int required = stages::TotalPoints(model, /*with_optional=*/false);
    for (unsigned mask = 0; mask < (1u << optional.size()); ++mask) {
      int total = required;
      for (size_t i = 0; i < optional.size(); ++i) {
        if ((mask >> i & 1) && optional[i]->Trains(model)) total += optional[i]->grading.points();
      }
      t.by_model[model].insert(total);
      t.any.insert(total);
    }
  }
  return t;
}

std::vector<FactProblem> CheckTotals(const std::string& text, const std::string& file, const Totals& totals) {
  static const std::regex kFraction(R"(\b(\d+)(?:\.\d+)? ?(?:/|of) ?(\d+)\b)");
  static const std::regex kOnModel(R"(\b(\d+)(?: points)? on (BERT|the ViT)(?![-\w]))");
  static const std::regex kPoints(R"(\b(\d+) points\b)");
  std::vector<FactProblem> problems;
  auto list = [](const std::set<int>& s) {
    std::string out;
    for (int v : s) out += (out.empty() ? "" : ", ") + std::to_string(v);
    return out;
  };
  ForEachLine(text, [&](int n, const std::string& line, bool inside) {
    if (inside) return;
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kFraction); it != std::sregex_iterator(); ++it) {
      const long num = std::stol((*it)[1]), den = std::stol((*it)[2]);
      // A score out of a total: the total is above any one stage's points and the score at most it.
      if (den <= totals.largest_stage || den >= 1000 || num > den || den == 100) continue;
      if (totals.any.count(static_cast<int>(den)) == 0) {
        problems.push_back({file, n, "'" + it->str() + "': " + std::to_string(den) +
                                         " is not a total the stages give (" + list(totals.any) + ")"});
      }
    }
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kOnModel); it != std::sregex_iterator(); ++it) {
      const int value = std::stoi((*it)[1]);
      const std::string model = (*it)[2] == "BERT" ? "bert" : "vit";
      // "N on BERT, M on the ViT" states what a whole submission is worth on each model.
      if (value <= totals.largest_stage) continue;
      const int full = *totals.by_model.at(model).rbegin();
      if (value != full) {
        problems.push_back({file, n, "'" + it->str() + "': a whole submission graded on " + (*it)[2].str() +
                                         " is worth " + std::to_string(full) + " (common/stages/stages.bzl)"});
      }
    }
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kPoints); it != std::sregex_iterator(); ++it) {
      const int value = std::stoi((*it)[1]);
      if (value <= totals.largest_stage || value == 100) continue;
      if (totals.any.count(value) == 0) {
        problems.push_back({file, n, "'" + it->str() + "' is not a total the stages give (" + list(totals.any) + ")"});
      }
    }
  });
  return problems;
}

std::vector<std::string> FilesUnder(const std::string& root, const std::vector<std::string>& kinds) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory()) {
      // Bazel's output links, hidden folders (.git) and the libraries' own folders are not ours.
      if (name.rfind("bazel-", 0) == 0 || name[0] == '.' || name == "third_party" || name == "fuzz_corpus") {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (!it->is_regular_file()) continue;
    const std::string ext = it->path().extension().string();
    if (std::find(kinds.begin(), kinds.end(), ext) == kinds.end() &&
        std::find(kinds.begin(), kinds.end(), name) == kinds.end()) {
      continue;
    }
    out.push_back(fs::relative(it->path(), root).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> DocumentsUnder(const std::string& root) { return FilesUnder(root, {".md", ".sh", ".py"}); }

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<FactProblem> CheckDocuments(const std::string& root, const std::vector<std::string>& files,
                                        const std::map<std::string, std::vector<std::string>>& generated) {
  std::vector<FactProblem> problems;
  const Totals totals = TotalsOfStages();
  for (const std::string& f : files) {
    const std::string text = ReadFileOrEmpty(root + "/" + f);
    for (auto& p : CheckBlocks(text, f, generated)) problems.push_back(p);
    for (auto& p : CheckTotals(text, f, totals)) problems.push_back(p);
  }
  return problems;
}

}  // namespace distlm::docs
