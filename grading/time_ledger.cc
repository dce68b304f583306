#include "grading/time_ledger.h"

#include <cmath>
#include <map>

#include "common/stages/stages.h"

namespace distlm::grading {
namespace {

// The stage id a progress line names as a word of its own ("task3", not "task3/"), or "".
std::string StageNamed(const std::string& line) {
  for (const auto& st : stages::All()) {
    for (size_t at = line.find(st.id); at != std::string::npos; at = line.find(st.id, at + 1)) {
      const size_t end = at + st.id.size();
      const bool starts = at == 0 || line[at - 1] == ' ' || line[at - 1] == '/';
      const bool ends = end == line.size() || line[end] == ' ' || line[end] == ':' || line[end] == ',';
      if (starts && ends) return st.id;
    }
  }
  return "";
}

std::string Seconds(double s) { return std::to_string(static_cast<long>(std::lround(s))); }

}  // namespace

std::pair<std::string, std::string> TimeLedger::Kind(const std::string& line) {
  auto starts = [&](const char* prefix) { return line.rfind(prefix, 0) == 0; };
  if (starts("building") || starts("preparing")) return {"build", ""};
  if (starts("running the grader's own")) {
    const std::string st = StageNamed(line);
    return {"grader", st.empty() ? "shared" : st};
  }
  if (starts("running")) return {"yours", StageNamed(line)};
  return {"other", ""};
}

void TimeLedger::Add(const std::string& line, double seconds) { lines_.emplace_back(line, seconds); }

std::string TimeLedger::Summary(double end_seconds) const {
  std::map<std::string, double> total;
  std::map<std::string, std::vector<std::pair<std::string, double>>> parts;  // in first-seen order
  for (size_t i = 0; i < lines_.size(); ++i) {
    const double until = i + 1 < lines_.size() ? lines_[i + 1].second : end_seconds;
    const double s = std::max(0.0, until - lines_[i].second);
    const auto [kind, part] = Kind(lines_[i].first);
    total[kind] += s;
    if (part.empty()) continue;
    auto& list = parts[kind];
    auto it = list.begin();
    while (it != list.end() && it->first != part) ++it;
    if (it == list.end()) {
      list.emplace_back(part, s);
    } else {
      it->second += s;
    }
  }
  std::string out;
  for (const auto& [kind, words] : std::vector<std::pair<std::string, std::string>>{
           {"build", "build"}, {"yours", "your runs"}, {"grader", "the grader's own runs"}, {"other", "other"}}) {
    if (total.count(kind) == 0) continue;
    out += (out.empty() ? "" : "; ") + words + " " + Seconds(total[kind]) + " s";
    std::string in;
    for (const auto& [part, s] : parts[kind]) in += (in.empty() ? "" : ", ") + part + " " + Seconds(s);
    if (!in.empty()) out += " (" + in + ")";
  }
  return out;
}

}  // namespace distlm::grading
