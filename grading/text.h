// Small text helpers for the grader's messages.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace distlm::grading {

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// The last n lines of a program's output, each cut short, for a message.
inline std::string Tail(const std::string& output, size_t n) {
  auto lines = Lines(output);
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    std::string l = lines[i];
    if (l.size() > 300) l = l.substr(0, 300) + " [...]";
    out += "    " + l + "\n";
  }
  return out;
}

}  // namespace distlm::grading
