#include "tools/build_file.h"

#include <cctype>
#include <sstream>

namespace distlm::tools {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  std::stringstream ss(path);
  std::string p;
  while (std::getline(ss, p, '/')) {
    if (!p.empty()) parts.push_back(p);
  }
  return parts;
}

bool ParseLabel(const std::string& s, const std::string& package, Label* out) {
  if (s.empty() || s[0] == '@') return false;
  if (s.find_first_of(" \t\n*?{}$") != std::string::npos) return false;
  if (s.rfind("//", 0) == 0) {
    std::string rest = s.substr(2);
    auto colon = rest.find(':');
    out->package = colon == std::string::npos ? rest : rest.substr(0, colon);
    if (colon != std::string::npos) {
      out->name = rest.substr(colon + 1);
    } else {
      auto parts = SplitPath(out->package);
      out->name = parts.empty() ? "" : parts.back();
    }
    if (out->package == "visibility" || out->package == "conditions") return false;
    // Visibility specifications name packages, not targets, and load nothing.
    if (out->name == "__pkg__" || out->name == "__subpackages__") return false;
    out->bare = false;
    return !out->name.empty();
  }
  if (s[0] == ':') {
    out->package = package;
    out->name = s.substr(1);
    out->bare = false;
    return !out->name.empty();
  }
  out->package = package;
  out->name = s;
  out->bare = true;
  return true;
}

bool CallsFunction(const std::string& text, const std::string& name) {
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const bool starts_word = at == 0 || !(std::isalnum(static_cast<unsigned char>(text[at - 1])) || text[at - 1] == '_');
    size_t next = at + name.size();
    while (next < text.size() && text[next] == ' ') ++next;
    if (starts_word && next < text.size() && text[next] == '(') return true;
  }
  return false;
}

std::vector<std::string> DefinedNames(const BuildStatement& st, bool with_reference) {
  std::vector<std::string> names;
  if (!st.name.empty()) names.push_back(st.name);
  if (st.is_comment_or_blank || !CallsFunction(st.text, kStageMacro)) return names;
  for (const char* n : kStageMacroStudentTargets) names.push_back(n);
  if (with_reference) {
    for (const char* n : kStageMacroReferenceTargets) names.push_back(n);
  }
  return names;
}

namespace {

// The string literal whose opening quote is at text[i] (single, double or triple-quoted):
// its value (escapes kept as written), and the index just past its closing quote.
size_t ReadStringLiteral(const std::string& text, size_t i, std::string* value) {
  const size_t n = text.size();
  const char c = text[i];
  const bool triple = i + 2 < n && text[i + 1] == c && text[i + 2] == c;
  const size_t q = triple ? 3 : 1;
  size_t j = i + q;
  while (j < n) {
    if (text[j] == '\\' && j + 1 < n) {
      *value += text[j];
      *value += text[j + 1];
      j += 2;
      continue;
    }
    if (triple ? text.compare(j, 3, std::string(3, c)) == 0 : text[j] == c) break;
    if (!triple && text[j] == '\n') break;  // unterminated: stop at the line's end
    *value += text[j++];
  }
  return std::min(n, j + q);
}

// The statement starting at `pos`: to the newline where every bracket is closed. Fills its
// strings and name; returns the index just past it.
size_t ScanStatement(const std::string& text, size_t pos, BuildStatement* st) {
  const size_t n = text.size();
  int depth = 0;
  std::string ident, last_ident;
  bool want_name = false;
  size_t i = pos;
  for (; i < n; ++i) {
    char c = text[i];
    if (c == '#') {
      while (i + 1 < n && text[i + 1] != '\n') ++i;
      continue;
    }
    if (c == '"' || c == '\'') {
      std::string value;
      i = ReadStringLiteral(text, i, &value) - 1;
      st->strings.push_back(value);
      if (want_name && depth == 1 && st->name.empty()) st->name = value;
      want_name = false;
      ident.clear();
      continue;
    }
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
      ident += c;
      continue;
    }
    if (!ident.empty()) {
      last_ident = ident;
      ident.clear();
      want_name = false;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (c == '=' && depth == 1 && last_ident == "name" && !(i + 1 < n && text[i + 1] == '=')) want_name = true;
    if (c == '\\' && i + 1 < n && text[i + 1] == '\n') {
      ++i;  // an explicit line continuation
      continue;
    }
    if (c == '\n' && depth <= 0) break;
  }
  return i < n ? i + 1 : n;
}

}  // namespace

std::vector<BuildStatement> SplitBuildFile(const std::string& text) {
  std::vector<BuildStatement> out;
  size_t pos = 0;
  const size_t n = text.size();
  auto line_end = [&](size_t from) {
    size_t e = text.find('\n', from);
    return e == std::string::npos ? n : e + 1;
  };
  auto is_blank_or_comment = [&](size_t from, size_t to, bool* comment) {
    size_t i = from;
    while (i < to && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) ++i;
    *comment = i < to && text[i] == '#';
    return i >= to || text[i] == '\n' || text[i] == '#';
  };
  auto free_block = [&](size_t from, size_t to) {
    BuildStatement s;
    s.text = text.substr(from, to - from);
    s.is_comment_or_blank = true;
    out.push_back(s);
  };
  while (pos < n) {
    // Free lines: blank lines and comments. The comment lines right above a statement (no
    // blank line between) belong to it.
    size_t free_start = pos, attached_start = pos;
    bool comment = false;
    while (pos < n) {
      size_t e = line_end(pos);
      if (!is_blank_or_comment(pos, e, &comment)) break;
      if (!comment) attached_start = e;  // a blank line ends any attachment above it
      pos = e;
    }
    if (pos >= n) {
      if (free_start < n) free_block(free_start, n);
      break;
    }
    if (attached_start > free_start) free_block(free_start, attached_start);
    BuildStatement st;
    const size_t end = ScanStatement(text, pos, &st);
    st.text = text.substr(attached_start, end - attached_start);
    out.push_back(st);
    pos = end;
  }
  return out;
}

}  // namespace distlm::tools
