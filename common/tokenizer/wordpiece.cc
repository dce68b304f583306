#include "common/tokenizer/wordpiece.h"

#include <algorithm>

#include "common/tokenizer/unicode.h"

namespace distlm::tokenizer {

void WordpieceTokenize(std::u32string_view word, const Vocab& vocab, const std::string& unk_token,
                       std::vector<std::string>* out, size_t max_chars) {
  const size_t n = word.size();
  if (n == 0) return;
  if (n > max_chars) {
    out->push_back(unk_token);
    return;
  }
  // The word in UTF-8 once, with the byte offset of every code point, so candidate pieces are
  // byte ranges and the lookup key is the only string built per try.
  std::string utf8;
  std::vector<size_t> offset;
  offset.reserve(n + 1);
  for (char32_t c : word) {
    offset.push_back(utf8.size());
    AppendUtf8(c, &utf8);
  }
  offset.push_back(utf8.size());

  const size_t first_piece = out->size();
  std::string key;
  size_t start = 0;
  while (start < n) {
    // No vocabulary entry is longer than max_token_chars(), so longer candidates cannot match.
    size_t end = std::min(n, start + vocab.max_token_chars());
    bool found = false;
    while (start < end) {
      key.assign(start > 0 ? "##" : "");
      key.append(utf8, offset[start], offset[end] - offset[start]);
      if (vocab.Contains(key)) {
        found = true;
        break;
      }
      --end;
    }
    if (!found) {
      out->resize(first_piece);
      out->push_back(unk_token);
      return;
    }
    out->push_back(key);
    start = end;
  }
}

}  // namespace distlm::tokenizer
