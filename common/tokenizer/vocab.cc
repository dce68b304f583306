#include "common/tokenizer/vocab.h"

#include <sys/stat.h>

#include <algorithm>
#include <string_view>

#include "common/runtime/atomic_file.h"
#include "common/runtime/errors.h"
#include "common/tokenizer/unicode.h"

namespace distlm::tokenizer {
namespace {

size_t CodePoints(std::string_view utf8) {
  size_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

}  // namespace

Vocab Vocab::FromTokens(std::vector<std::string> tokens, const std::string& source) {
  if (tokens.empty()) throw UserError(source + ": the vocabulary is empty");
  Vocab v;
  v.source_ = source;
  v.ids_.reserve(tokens.size() * 2);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    // Files number lines from 1; the id is the line number minus one.
    const std::string where = source + ":" + std::to_string(i + 1);
    if (t.empty()) throw UserError(where + ": empty token (ids are line numbers, so an empty line would shift them)");
    size_t bad = FindInvalidUtf8(t);
    if (bad != std::string_view::npos) {
      throw UserError(where + ": token is not valid UTF-8 (byte " + std::to_string(bad + 1) + ")");
    }
    auto [it, inserted] = v.ids_.emplace(t, static_cast<int64_t>(i));
    if (!inserted) {
      throw UserError(where + ": token '" + t + "' is already listed on line " + std::to_string(it->second + 1));
    }
    v.max_token_chars_ = std::max(v.max_token_chars_, CodePoints(t));
  }
  v.tokens_ = std::move(tokens);
  return v;
}

Vocab Vocab::Load(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw UserError(path + ": vocabulary file not found");
  if (S_ISDIR(st.st_mode)) throw UserError(path + ": is a directory, not a vocabulary file");
  std::string bytes = ReadFile(path);
  std::string_view rest(bytes);
  if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);
  std::vector<std::string> tokens;
  size_t line = 0;
  while (!rest.empty()) {
    ++line;
    size_t nl = rest.find('\n');
    std::string_view t = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (!t.empty() && t.back() == '\r') t.remove_suffix(1);
    if (t.find('\r') != std::string_view::npos) {
      // Python's universal newlines would split the line here and shift every later id.
      throw UserError(path + ":" + std::to_string(line) + ": carriage return inside a token");
    }
    tokens.emplace_back(t);
  }
  if (tokens.empty()) throw UserError(path + ": the vocabulary file is empty");
  return FromTokens(std::move(tokens), path);
}

int64_t Vocab::Id(const std::string& token) const {
  auto it = ids_.find(token);
  if (it != ids_.end()) return it->second;
  auto unk = ids_.find("[UNK]");
  if (unk == ids_.end()) {
    throw UserError(source_ + ": token '" + token + "' is not in the vocabulary, which has no [UNK] either");
  }
  return unk->second;
}

std::optional<int64_t> Vocab::Find(const std::string& token) const {
  auto it = ids_.find(token);
  if (it == ids_.end()) return std::nullopt;
  return it->second;
}

const std::string& Vocab::Token(int64_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) {
    throw UserError(source_ + ": token id " + std::to_string(id) + " is out of range [0, " +
                    std::to_string(tokens_.size()) + ")");
  }
  return tokens_[static_cast<size_t>(id)];
}

}  // namespace distlm::tokenizer
