#include "docs/handout_commands.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>

namespace distlm::docs {
namespace {

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// A fence opens or closes a code block: ``` or ~~~ (three or more), indented up to 3 spaces.
bool IsFence(const std::string& line, std::string* marker) {
  size_t i = 0;
  while (i < line.size() && i < 3 && line[i] == ' ') ++i;
  if (i + 3 > line.size()) return false;
  const char c = line[i];
  if (c != '`' && c != '~') return false;
  size_t n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  if (n < 3) return false;
  *marker = std::string(n, c);
  return true;
}

// Calls fn(line_number, line, in_code) for every line; fence lines themselves count as code.
template <typename Fn>
void ForEachLine(const std::string& markdown, Fn fn) {
  std::string open;  // the fence that opened the current block, "" outside
  int number = 0;
  for (const std::string& line : Lines(markdown)) {
    ++number;
    std::string marker;
    if (IsFence(line, &marker)) {
      if (open.empty()) {
        open = marker;
        fn(number, line, true);
        continue;
      }
      // A block closes on a fence of the same character, at least as long, with nothing after.
      if (marker[0] == open[0] && marker.size() >= open.size() &&
          Trim(line).find_first_not_of(open[0]) == std::string::npos) {
        open.clear();
        fn(number, line, true);
        continue;
      }
    }
    fn(number, line, !open.empty());
  }
}

bool IsAssignment(const std::string& word) {
  static const std::regex kAssignment("^[A-Za-z_][A-Za-z0-9_]*=.*");
  return std::regex_match(word, kAssignment);
}

bool IsNumber(const std::string& s) {
  static const std::regex kNumber("^[0-9]+(\\.[0-9]+)?[a-z]*$");  // 4, 0.5, 1gbit, 100us
  return std::regex_match(s, kNumber);
}

// Drops what only wraps the command: VAR=value, sudo [-opts], env [VAR=value...], time,
// nohup, timeout [-opts] DURATION.
Words StripPrefixes(Words w) {
  size_t i = 0;
  for (bool again = true; again && i < w.size();) {
    again = false;
    while (i < w.size() && IsAssignment(w[i])) ++i, again = true;
    if (i < w.size() && (w[i] == "sudo" || w[i] == "env")) {
      ++i;
      while (i < w.size() && StartsWith(w[i], "-")) ++i;
      again = true;
    } else if (i < w.size() && (w[i] == "time" || w[i] == "nohup")) {
      ++i;
      again = true;
    } else if (i < w.size() && w[i] == "timeout") {
      ++i;
      while (i < w.size() && StartsWith(w[i], "-")) ++i;
      if (i < w.size()) ++i;  // the duration
      again = true;
    }
  }
  return Words(w.begin() + static_cast<std::ptrdiff_t>(std::min(i, w.size())), w.end());
}

bool IsBazelBin(const std::string& word) { return !LabelOfBazelBinPath(word).empty(); }

bool IsPattern(const std::string& label) {
  return label.find("...") != std::string::npos || label.find('*') != std::string::npos ||
         (label.size() >= 4 && label.compare(label.size() - 4, 4, ":all") == 0);
}

}  // namespace

std::vector<Words> SplitShellLine(const std::string& line) {
  std::vector<Words> commands(1);
  std::string word;
  bool in_word = false;     // a word has started (it may be empty: "")
  bool drop_next = false;   // the next word is a redirection target
  auto finish_word = [&] {
    if (!in_word) return;
    if (drop_next) {
      drop_next = false;
    } else {
      commands.back().push_back(word);
    }
    word.clear();
    in_word = false;
  };
  auto finish_command = [&] {
    finish_word();
    if (!commands.back().empty()) commands.emplace_back();
  };
  const size_t n = line.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = line[i];
    if (c == '\'') {
      size_t end = line.find('\'', i + 1);
      if (end == std::string::npos) end = n;
      word += line.substr(i + 1, end - i - 1);
      in_word = true;
      i = end;
    } else if (c == '"') {
      in_word = true;
      for (++i; i < n && line[i] != '"'; ++i) {
        if (line[i] == '\\' && i + 1 < n && std::string("\"\\$`").find(line[i + 1]) != std::string::npos) ++i;
        word += line[i];
      }
    } else if (c == '\\' && i + 1 < n) {
      word += line[++i];
      in_word = true;
    } else if (c == '$' && i + 1 < n && line[i + 1] == '(') {
      // $( ... ) stays one piece of the word, spaces and all.
      int depth = 0;
      size_t j = i;
      for (; j < n; ++j) {
        if (line[j] == '(') ++depth;
        if (line[j] == ')' && --depth == 0) break;
      }
      word += line.substr(i, std::min(j, n - 1) - i + 1);
      in_word = true;
      i = std::min(j, n - 1);
    } else if (c == '#' && !in_word) {
      break;  // a comment
    } else if (c == ' ' || c == '\t') {
      finish_word();
    } else if (c == ';') {
      finish_command();
    } else if (c == '|') {
      if (i + 1 < n && line[i + 1] == '|') ++i;
      finish_command();
    } else if (c == '&' && i + 1 < n && line[i + 1] == '&') {
      ++i;
      finish_command();
    } else if (c == '&' && i + 1 < n && line[i + 1] == '>') {
      finish_word();
      i += (i + 2 < n && line[i + 2] == '>') ? 2 : 1;
      drop_next = true;
    } else if (c == '&') {
      finish_command();
    } else if (c == '>' || c == '<') {
      // A redirection; a word of digits right before it is its file descriptor.
      if (in_word && std::all_of(word.begin(), word.end(), [](char d) { return std::isdigit(d); })) {
        word.clear();
        in_word = false;
      } else {
        finish_word();
      }
      if (i + 1 < n && line[i + 1] == '>') ++i;
      if (i + 1 < n && line[i + 1] == '&') {
        // >&2, 2>&1: the target is attached.
        ++i;
        while (i + 1 < n && std::isdigit(static_cast<unsigned char>(line[i + 1]))) ++i;
      } else {
        drop_next = true;
      }
    } else {
      word += c;
      in_word = true;
    }
  }
  finish_word();
  if (commands.back().empty()) commands.pop_back();
  return commands;
}

std::string NormaliseLabel(const std::string& label) {
  if (!StartsWith(label, "//")) return "";
  const std::string rest = label.substr(2);
  if (rest.find(':') != std::string::npos) return label;
  const size_t slash = rest.rfind('/');
  return label + ":" + (slash == std::string::npos ? rest : rest.substr(slash + 1));
}

std::string LabelOfBazelBinPath(const std::string& path) {
  std::string p = StartsWith(path, "./") ? path.substr(2) : path;
  if (!StartsWith(p, "bazel-bin/")) return "";
  p = p.substr(std::string("bazel-bin/").size());
  const size_t slash = p.rfind('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == p.size()) return "";
  return "//" + p.substr(0, slash) + ":" + p.substr(slash + 1);
}

bool IsPlaceholder(const std::string& value) {
  static const std::regex kName("^[A-Z][A-Z0-9_]*$");
  return value.find('$') != std::string::npos || value.find('<') != std::string::npos || value == "..." ||
         std::regex_match(value, kName);
}

std::vector<DocCommand> ExtractCommands(const std::string& markdown, const std::string& file) {
  std::vector<DocCommand> out;
  std::string pending;  // a command continued with a trailing backslash
  int pending_line = 0;
  ForEachLine(markdown, [&](int number, const std::string& raw, bool in_code) {
    std::string marker;
    if (!in_code || IsFence(raw, &marker)) {
      pending.clear();
      return;
    }
    std::string line = raw;
    if (pending.empty()) pending_line = number;
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      return;
    }
    const std::string text = Trim(pending + line);
    pending.clear();
    for (Words w : SplitShellLine(text)) {
      w = StripPrefixes(w);
      if (w.empty()) continue;
      DocCommand c;
      c.file = file;
      c.line = pending_line;
      c.text = text;
      if (w[0] == "bazel") {
        size_t sub = 1;
        while (sub < w.size() && StartsWith(w[sub], "-")) ++sub;  // startup options
        if (sub == w.size()) continue;
        const std::string& verb = w[sub];
        if (verb == "run") {
          size_t t = sub + 1;
          while (t < w.size() && !StartsWith(w[t], "//") && w[t] != "--") ++t;
          if (t == w.size() || w[t] == "--") {
            c.label = "(no //target after 'bazel run')";
          } else {
            c.label = NormaliseLabel(w[t]);
            auto dd = std::find(w.begin() + static_cast<std::ptrdiff_t>(t), w.end(), "--");
            if (dd != w.end()) c.args.assign(dd + 1, w.end());
          }
          out.push_back(c);
        } else if (verb == "build" || verb == "test") {
          c.kind = DocCommand::Kind::kBuild;
          for (size_t i = sub + 1; i < w.size() && w[i] != "--"; ++i) {
            if (StartsWith(w[i], "//") && !IsPattern(w[i])) c.labels.push_back(NormaliseLabel(w[i]));
          }
          if (!c.labels.empty()) out.push_back(c);
        }
        continue;
      }
      size_t program = 0;
      if (w[0] == "mpirun" || w[0] == "mpiexec" || w[0] == "srun") {
        program = 1;
        while (program < w.size() && !IsBazelBin(w[program])) ++program;
        if (program == w.size()) continue;  // runs something else
      } else if (!IsBazelBin(w[0])) {
        continue;
      }
      c.label = LabelOfBazelBinPath(w[program]);
      c.args.assign(w.begin() + static_cast<std::ptrdiff_t>(program) + 1, w.end());
      out.push_back(c);
    }
  });
  return out;
}

ArgSplit SplitAtDoubleDash(const Words& args) {
  ArgSplit s;
  auto dd = std::find(args.begin(), args.end(), "--");
  s.own.assign(args.begin(), dd);
  if (dd != args.end()) s.nested = Words(dd + 1, args.end());
  return s;
}

std::map<std::string, bool> ParseAbslHelp(const std::string& helpfull_output) {
  // A flag's entry starts with four spaces and "--name (", and ends with "default: V;" on the
  // same or a later line.
  static const std::regex kEntry("^    --([A-Za-z0-9_]+) \\(");
  static const std::regex kDefault("default: ([^;]*);");
  std::map<std::string, bool> flags;
  std::string current;
  for (const std::string& line : Lines(helpfull_output)) {
    std::smatch m;
    if (std::regex_search(line, m, kEntry)) {
      current = m[1];
      flags[current] = false;
    }
    if (!current.empty() && std::regex_search(line, m, kDefault)) {
      flags[current] = m[1] == "true" || m[1] == "false";
      current.clear();
    }
  }
  return flags;
}

std::vector<std::string> CheckAbslArgs(const Words& args, const std::map<std::string, bool>& flags,
                                       const std::vector<std::string>& foreign_prefixes) {
  std::vector<std::string> problems;
  for (const std::string& arg : args) {
    if (!StartsWith(arg, "--") || arg == "--") {
      problems.push_back("'" + arg + "' is not a flag (write --name=value)");
      continue;
    }
    if (std::any_of(foreign_prefixes.begin(), foreign_prefixes.end(),
                    [&](const std::string& p) { return StartsWith(arg, p); })) {
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    auto it = flags.find(name);
    if (it != flags.end()) {
      if (eq == std::string::npos && !it->second) {
        problems.push_back("--" + name + " takes a value: write --" + name + "=VALUE");
      }
      continue;
    }
    if (eq == std::string::npos && StartsWith(name, "no")) {
      auto positive = flags.find(name.substr(2));
      if (positive != flags.end()) {
        if (!positive->second) problems.push_back("--" + name + ": --" + name.substr(2) + " is not a boolean flag");
        continue;
      }
    }
    problems.push_back("--" + name + " is not a flag of this binary");
  }
  return problems;
}

std::vector<std::string> CheckScriptArgs(const Words& args, const std::string& usage) {
  std::vector<std::string> problems;
  auto mentions = [&](const std::string& token) {
    for (size_t pos = usage.find(token); pos != std::string::npos; pos = usage.find(token, pos + 1)) {
      const bool start_ok = pos == 0 || !(std::isalnum(static_cast<unsigned char>(usage[pos - 1])) ||
                                          usage[pos - 1] == '_' || usage[pos - 1] == '-');
      const size_t end = pos + token.size();
      const bool end_ok = end == usage.size() || !(std::isalnum(static_cast<unsigned char>(usage[end])) ||
                                                   usage[end] == '_' || usage[end] == '-');
      if (start_ok && end_ok) return true;
    }
    return false;
  };
  for (const std::string& arg : args) {
    if (StartsWith(arg, "--")) {
      const std::string name = arg.substr(0, arg.find('='));
      if (!mentions(name)) problems.push_back(name + " does not appear in the script's --help");
    } else if (!IsNumber(arg) && !IsPlaceholder(arg) && !mentions(arg)) {
      problems.push_back("'" + arg + "' does not appear in the script's --help");
    }
  }
  return problems;
}

std::vector<std::string> Headings(const std::string& markdown) {
  std::vector<std::string> out;
  static const std::regex kHeading("^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$");
  ForEachLine(markdown, [&](int, const std::string& line, bool in_code) {
    std::smatch m;
    if (!in_code && std::regex_match(line, m, kHeading)) out.push_back(m[1]);
  });
  return out;
}

std::string GithubAnchor(const std::string& heading) {
  std::string out;
  for (unsigned char c : heading) {
    if (std::isalnum(c) || c == '_' || c == '-' || c >= 0x80) {
      out += static_cast<char>(std::tolower(c));
    } else if (c == ' ') {
      out += '-';
    }
  }
  return out;
}

std::vector<Link> RelativeLinks(const std::string& markdown) {
  std::vector<Link> out;
  static const std::regex kLink("\\]\\(([^()\\s]+)\\)");
  ForEachLine(markdown, [&](int number, const std::string& line, bool in_code) {
    if (in_code) return;
    // Inline code spans are not links.
    std::string text;
    bool in_span = false;
    for (char c : line) {
      if (c == '`') in_span = !in_span;
      text += in_span ? ' ' : c;
    }
    for (std::sregex_iterator it(text.begin(), text.end(), kLink), end; it != end; ++it) {
      const std::string target = (*it)[1];
      if (target.find("://") != std::string::npos || StartsWith(target, "mailto:")) continue;
      Link l;
      l.line = number;
      const size_t hash = target.find('#');
      l.path = target.substr(0, hash);
      if (hash != std::string::npos) l.anchor = target.substr(hash + 1);
      out.push_back(l);
    }
  });
  return out;
}

std::vector<SectionReference> FindSectionReferences(const std::string& source) {
  std::vector<SectionReference> out;
  static const std::regex kReference("(docs/handout/[A-Za-z0-9_./-]+\\.md), section '([^']+)'");
  for (std::sregex_iterator it(source.begin(), source.end(), kReference), end; it != end; ++it) {
    out.push_back({(*it)[1], (*it)[2]});
  }
  return out;
}

}  // namespace distlm::docs
