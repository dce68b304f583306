// WordPiece: splits one word into the longest vocabulary pieces, greedily from the left.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer/vocab.h"

namespace distlm::tokenizer {

// BERT's max_input_chars_per_word: longer words become the unknown token whole.
inline constexpr size_t kMaxInputCharsPerWord = 100;

// Appends the pieces of word to *out: at each position the longest vocabulary entry that
// matches (pieces after the first carry the "##" prefix). A word longer than max_chars code
// points, or one that cannot be covered by vocabulary pieces, becomes unk_token as a whole.
void WordpieceTokenize(std::u32string_view word, const Vocab& vocab, const std::string& unk_token,
                       std::vector<std::string>* out, size_t max_chars = kMaxInputCharsPerWord);

}  // namespace distlm::tokenizer
