// BertTokenizer: text -> WordPiece tokens -> ids, as HuggingFace pytorch_transformers 1.2.0's
// BertTokenizer does it (the parity tests hold it to that on all of GLUE RTE).
//
//   1. The special tokens [UNK] [SEP] [PAD] [CLS] [MASK], written literally in the text (case
//      sensitive), are split out first and kept whole.
//   2. Each remaining piece goes through BasicTokenizer (basic_tokenizer.h): cleaning, CJK
//      splitting, white-space splitting, lower-casing + accent stripping when do_lower_case,
//      punctuation splitting.
//   3. Each word goes through WordPiece (wordpiece.h).
//
// Deliberate differences from the reference, all outside what real data contains:
//   - Text that is only white space gives no tokens; the reference's 1.2.0 special-token
//     splitter returns one special token, picked by Python's set order, for it.
//   - Invalid UTF-8 is tolerated (see DecodeUtf8Lossy); Python could not have decoded it.
//   - Unicode data is utf8proc's (Unicode 15); the reference used its Python's unicodedata.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer/basic_tokenizer.h"
#include "common/tokenizer/vocab.h"

namespace distlm::tokenizer {

inline constexpr char kUnkToken[] = "[UNK]";
inline constexpr char kSepToken[] = "[SEP]";
inline constexpr char kPadToken[] = "[PAD]";
inline constexpr char kClsToken[] = "[CLS]";
inline constexpr char kMaskToken[] = "[MASK]";

class BertTokenizer {
 public:
  // Throws UserError naming the vocabulary when one of the five special tokens is missing.
  BertTokenizer(Vocab vocab, bool do_lower_case);
  static BertTokenizer FromVocabFile(const std::string& path, bool do_lower_case);

  // Word pieces of text (UTF-8).
  std::vector<std::string> Tokenize(std::string_view text) const;
  // Vocabulary ids; tokens not in the vocabulary map to [UNK]'s id.
  std::vector<int64_t> ConvertTokensToIds(const std::vector<std::string>& tokens) const;
  // ConvertTokensToIds(Tokenize(text)).
  std::vector<int64_t> Encode(std::string_view text) const;

  int64_t cls_id() const { return cls_id_; }
  int64_t sep_id() const { return sep_id_; }
  int64_t pad_id() const { return pad_id_; }
  int64_t unk_id() const { return unk_id_; }
  int64_t mask_id() const { return mask_id_; }
  bool do_lower_case() const { return basic_.do_lower_case(); }
  const Vocab& vocab() const { return vocab_; }

  // The five special tokens, in the order above.
  static const std::array<std::string, 5>& SpecialTokens();

 private:
  // Appends the tokens of a piece of text that holds no special token.
  void TokenizePlain(std::u32string_view text, std::vector<std::string>* out) const;

  Vocab vocab_;
  BasicTokenizer basic_;
  std::array<std::u32string, 5> special_u32_;
  int64_t unk_id_, sep_id_, pad_id_, cls_id_, mask_id_;
};

}  // namespace distlm::tokenizer
