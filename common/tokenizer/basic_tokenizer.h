// BERT's "basic" tokenizer: cleaning, CJK splitting, white-space splitting, lower-casing with
// accent stripping, punctuation splitting. It works on code points; WordPiece comes after it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace distlm::tokenizer {

class BasicTokenizer {
 public:
  // never_split: words that keep their case (the reference passes its special tokens).
  BasicTokenizer(bool do_lower_case, std::vector<std::u32string> never_split);

  // The words of text, in order; none is empty and none contains white space.
  std::vector<std::u32string> Tokenize(std::u32string_view text) const;

  bool do_lower_case() const { return do_lower_case_; }

  // The steps, exposed for tests.
  // Drops NUL, U+FFFD and control characters; every BERT white-space character becomes ' '.
  static std::u32string CleanText(std::u32string_view text);
  // Puts ' ' on both sides of every CJK ideograph.
  static std::u32string SpaceOutCjk(std::u32string_view text);
  // Python's str.split(): splits on IsPythonSpace runs, no empty pieces.
  static std::vector<std::u32string> SplitOnWhitespace(std::u32string_view text);
  // Every punctuation character becomes a word of its own; the runs between stay together.
  static std::vector<std::u32string> SplitOnPunctuation(std::u32string_view word);

 private:
  bool do_lower_case_;
  std::vector<std::u32string> never_split_;
};

}  // namespace distlm::tokenizer
