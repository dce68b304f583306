#include "grading/train_log.h"

#include <cmath>
#include <sstream>

#include "grading/text.h"

namespace distlm::grading {

void ParseTrainLog(const std::string& text, std::vector<nlohmann::json>* log, std::vector<std::string>* bad) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      log->push_back(std::move(j));
    } else {
      bad->push_back(line.substr(0, 200));
    }
  }
}

double NumberField(const nlohmann::json& line, const std::string& key) {
  if (!line.is_object()) return NAN;
  const auto it = line.find(key);
  return it != line.end() && it->is_number() ? it->get<double>() : NAN;
}

double SumOfField(const std::vector<nlohmann::json>& log, const std::string& key) {
  double sum = 0;
  for (const auto& line : log) {
    const double v = NumberField(line, key);
    if (std::isfinite(v)) sum += v;
  }
  return sum;
}

int64_t IntegerField(const nlohmann::json& line, const std::string& key) {
  if (!line.is_object()) return -1;
  const auto it = line.find(key);
  if (it == line.end()) return -1;
  if (it->is_number_unsigned()) {
    const uint64_t v = it->get<uint64_t>();
    return v > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(v);
  }
  return it->is_number_integer() ? it->get<int64_t>() : -1;
}

std::string DescribeOps(const nlohmann::json& ops) {
  if (!ops.is_object()) return "no record of its communication";
  std::string called;
  for (auto it = ops.begin(); it != ops.end() && called.size() < 400; ++it) {
    // Never dump() a value: a submission could nest it a million levels deep.
    const std::string count = it.value().is_number_integer() ? std::to_string(it.value().get<int64_t>()) : "?";
    called += (called.empty() ? "" : ", ") + it.key().substr(0, 64) + " x" + count;
  }
  if (called.empty()) called = "no collective at all";
  return CapText(Printable(called), 300, " [...]");
}

std::string CollectivesProblem(const std::vector<nlohmann::json>& log, const std::vector<std::string>& required,
                               const std::vector<std::string>& forbidden) {
  for (size_t i = 0; i < log.size(); ++i) {
    const auto ops = log[i].find("comm_ops");
    if (ops == log[i].end() || !ops->is_object()) {
      return "update " + std::to_string(i + 1) + " has no record of its communication";
    }
    bool wrong = false;
    for (const auto& op : required) wrong = wrong || !ops->contains(op);
    for (const auto& op : forbidden) wrong = wrong || ops->contains(op);
    if (wrong) return "update " + std::to_string(i + 1) + " called " + DescribeOps(*ops);
  }
  return "";
}

}  // namespace distlm::grading
