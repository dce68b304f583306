#include "common/tokenizer/basic_tokenizer.h"

#include <algorithm>
#include <utility>

#include "common/tokenizer/unicode.h"

namespace distlm::tokenizer {

BasicTokenizer::BasicTokenizer(bool do_lower_case, std::vector<std::u32string> never_split)
    : do_lower_case_(do_lower_case), never_split_(std::move(never_split)) {}

std::u32string BasicTokenizer::CleanText(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (c == 0 || c == 0xFFFD || IsBertControl(c)) continue;
    out.push_back(IsBertWhitespace(c) ? U' ' : c);
  }
  return out;
}

std::u32string BasicTokenizer::SpaceOutCjk(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t c : text) {
    if (IsCjkIdeograph(c)) {
      out.push_back(U' ');
      out.push_back(c);
      out.push_back(U' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::vector<std::u32string> BasicTokenizer::SplitOnWhitespace(std::u32string_view text) {
  std::vector<std::u32string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && IsPythonSpace(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !IsPythonSpace(text[i])) ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

std::vector<std::u32string> BasicTokenizer::SplitOnPunctuation(std::u32string_view word) {
  std::vector<std::u32string> out;
  bool start_new_word = true;
  for (char32_t c : word) {
    if (IsBertPunctuation(c)) {
      out.emplace_back(1, c);
      start_new_word = true;
    } else {
      if (start_new_word) out.emplace_back();
      start_new_word = false;
      out.back().push_back(c);
    }
  }
  return out;
}

std::vector<std::u32string> BasicTokenizer::Tokenize(std::u32string_view text) const {
  const std::u32string spaced = SpaceOutCjk(CleanText(text));
  std::vector<std::u32string> output;
  for (std::u32string& word : SplitOnWhitespace(spaced)) {
    std::u32string token = std::move(word);
    if (do_lower_case_ && std::find(never_split_.begin(), never_split_.end(), token) == never_split_.end()) {
      token = StripAccents(PythonLower(token));
    }
    for (std::u32string& piece : SplitOnPunctuation(token)) {
      // The reference joins the pieces with ' ' and splits again on white space. Lower-casing
      // and NFD never produce white space, but re-splitting keeps this exactly the reference.
      for (std::u32string& w : SplitOnWhitespace(piece)) output.push_back(std::move(w));
    }
  }
  return output;
}

}  // namespace distlm::tokenizer
