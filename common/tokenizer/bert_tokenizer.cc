#include "common/tokenizer/bert_tokenizer.h"

#include <utility>

#include "common/runtime/errors.h"
#include "common/tokenizer/unicode.h"
#include "common/tokenizer/wordpiece.h"

namespace distlm::tokenizer {
namespace {

std::vector<std::u32string> SpecialTokensU32() {
  std::vector<std::u32string> out;
  for (const std::string& t : BertTokenizer::SpecialTokens()) out.push_back(DecodeUtf8Lossy(t));
  return out;
}

int64_t RequireId(const Vocab& vocab, const std::string& token) {
  std::optional<int64_t> id = vocab.Find(token);
  if (!id) {
    throw UserError(vocab.source() + ": the vocabulary has no " + token +
                    " token (BERT needs [PAD], [UNK], [CLS], [SEP] and [MASK])");
  }
  return *id;
}

}  // namespace

const std::array<std::string, 5>& BertTokenizer::SpecialTokens() {
  static const std::array<std::string, 5> kTokens = {kUnkToken, kSepToken, kPadToken, kClsToken, kMaskToken};
  return kTokens;
}

BertTokenizer::BertTokenizer(Vocab vocab, bool do_lower_case)
    : vocab_(std::move(vocab)),
      basic_(do_lower_case, SpecialTokensU32()),
      unk_id_(RequireId(vocab_, kUnkToken)),
      sep_id_(RequireId(vocab_, kSepToken)),
      pad_id_(RequireId(vocab_, kPadToken)),
      cls_id_(RequireId(vocab_, kClsToken)),
      mask_id_(RequireId(vocab_, kMaskToken)) {
  for (size_t i = 0; i < special_u32_.size(); ++i) special_u32_[i] = DecodeUtf8Lossy(SpecialTokens()[i]);
}

BertTokenizer BertTokenizer::FromVocabFile(const std::string& path, bool do_lower_case) {
  return BertTokenizer(Vocab::Load(path), do_lower_case);
}

void BertTokenizer::TokenizePlain(std::u32string_view text, std::vector<std::string>* out) const {
  for (const std::u32string& word : basic_.Tokenize(text)) {
    WordpieceTokenize(word, vocab_, kUnkToken, out);
  }
}

std::vector<std::string> BertTokenizer::Tokenize(std::string_view text) const {
  const std::u32string u = DecodeUtf8Lossy(text);
  std::vector<std::string> out;
  // Special tokens are split out before anything else, as the reference's
  // PreTrainedTokenizer.tokenize does. No special token can overlap another ("[...]" with no
  // inner brackets), so scanning once for any of them finds the same occurrences as the
  // reference's token-by-token splitting.
  size_t plain_start = 0;
  size_t i = 0;
  while (i < u.size()) {
    if (u[i] == U'[') {
      bool matched = false;
      for (size_t s = 0; s < special_u32_.size(); ++s) {
        const std::u32string& sp = special_u32_[s];
        if (u.compare(i, sp.size(), sp) == 0) {
          TokenizePlain(std::u32string_view(u).substr(plain_start, i - plain_start), &out);
          out.push_back(SpecialTokens()[s]);
          i += sp.size();
          plain_start = i;
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    ++i;
  }
  TokenizePlain(std::u32string_view(u).substr(plain_start), &out);
  return out;
}

std::vector<int64_t> BertTokenizer::ConvertTokensToIds(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const std::string& t : tokens) {
    std::optional<int64_t> id = vocab_.Find(t);
    ids.push_back(id ? *id : unk_id_);
  }
  return ids;
}

std::vector<int64_t> BertTokenizer::Encode(std::string_view text) const { return ConvertTokensToIds(Tokenize(text)); }

}  // namespace distlm::tokenizer
