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

// Flags as messages quote them after "with": " --a --b" ("" for none).
inline std::string FlagsSaid(const std::vector<std::string>& flags) {
  std::string said;
  for (const auto& f : flags) said += " " + f;
  return said;
}

inline std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// Text a program wrote (a submission's output, a compiler's lines about its file), made safe to
// show: every byte that is not part of valid UTF-8 and every control character but tab becomes
// '?', so nothing it printed can break results.json or move a terminal's cursor.
std::string Printable(const std::string& text);

// One line of such text as the grader shows it: "    | " and the line, cut at max_chars. The
// bar marks it as the program's words, so a submission cannot print lines that pass for the
// grader's own ("task2b: ... PASS" appears as "    | task2b: ... PASS").
std::string QuotedLine(const std::string& line, size_t max_chars = 300);

// The last n lines of a program's output, each quoted and cut short, for a message.
inline std::string Tail(const std::string& output, size_t n) {
  auto lines = Lines(output);
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) out += QuotedLine(lines[i]) + "\n";
  return out;
}

// A message cut to at most max_bytes without splitting a UTF-8 character.
std::string CapText(const std::string& text, size_t max_bytes, const std::string& marker);

}  // namespace distlm::grading
