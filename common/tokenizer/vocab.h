// A WordPiece vocabulary: one token per line, the line number (from 0) is the id.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace distlm::tokenizer {

class Vocab {
 public:
  // Reads a vocab.txt (UTF-8, one token per line, '\n' or "\r\n" line ends, an optional UTF-8
  // byte-order mark). Throws UserError naming the file, and the line where there is one, for a
  // missing or empty file, invalid UTF-8, an empty line or a token listed twice (which would
  // give one token two ids).
  static Vocab Load(const std::string& path);

  // The same checks on tokens already in memory (id = position); `source` names them in errors.
  static Vocab FromTokens(std::vector<std::string> tokens, const std::string& source = "<in-memory vocab>");

  // The id of token, or the id of "[UNK]" when token is missing (UserError if "[UNK]" is
  // missing too).
  int64_t Id(const std::string& token) const;
  std::optional<int64_t> Find(const std::string& token) const;
  bool Contains(const std::string& token) const { return ids_.count(token) != 0; }
  size_t size() const { return tokens_.size(); }
  // The token with this id; UserError when id is out of range.
  const std::string& Token(int64_t id) const;
  // Where the vocabulary came from (a path), for messages.
  const std::string& source() const { return source_; }
  // The longest token, in code points: WordPiece never needs to try a longer piece.
  size_t max_token_chars() const { return max_token_chars_; }

 private:
  Vocab() = default;

  std::string source_;
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
  size_t max_token_chars_ = 0;
};

}  // namespace distlm::tokenizer
