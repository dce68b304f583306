// Fuzz entry point for BertTokenizer: arbitrary bytes must never crash it, and the output must
// keep its invariants. Build with clang's libFuzzer (see README.md) or replay with
// :tokenizer_fuzzer_test.
//
// Invariants checked (a violation aborts, which both libFuzzer and the replay test report):
//   - every token is non-empty and in the vocabulary ([UNK] included), with ids in range;
//   - white space separates independently: Tokenize(a + " " + b) == Tokenize(a) + Tokenize(b)
//     (a space can be neither inside a word nor inside a special token).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/tokenizer/bert_tokenizer.h"
#include "common/tokenizer/unicode.h"

namespace {

using distlm::tokenizer::BertTokenizer;
using distlm::tokenizer::Vocab;

Vocab FuzzVocab() {
  std::vector<std::string> tokens = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "hello",
                                     "\xC3\xA9", "##\xC3\xA9", "\xE4\xB8\xAD", "\xCF\x82", "\xCF\x83", ".", ",", "[",
                                     "]", "##", "#"};
  for (char c = 'a'; c <= 'z'; ++c) {
    tokens.push_back(std::string(1, c));
    tokens.push_back("##" + std::string(1, c));
  }
  for (char c = '0'; c <= '9'; ++c) tokens.push_back(std::string(1, c));
  return Vocab::FromTokens(tokens, "fuzz-vocab");
}

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckTokenizer(const BertTokenizer& tok, std::string_view text) {
  const std::vector<std::string> tokens = tok.Tokenize(text);
  const std::vector<int64_t> ids = tok.ConvertTokensToIds(tokens);
  Check(ids.size() == tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    Check(!tokens[i].empty());
    Check(tok.vocab().Contains(tokens[i]));
    Check(ids[i] >= 0 && static_cast<size_t>(ids[i]) < tok.vocab().size());
    Check(tok.vocab().Token(ids[i]) == tokens[i]);
  }
  const size_t space = text.find(' ');
  if (space != std::string_view::npos) {
    std::vector<std::string> joined = tok.Tokenize(text.substr(0, space));
    const std::vector<std::string> right = tok.Tokenize(text.substr(space + 1));
    joined.insert(joined.end(), right.begin(), right.end());
    Check(joined == tokens);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const BertTokenizer* const uncased = new BertTokenizer(FuzzVocab(), true);
  static const BertTokenizer* const cased = new BertTokenizer(FuzzVocab(), false);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckTokenizer(*uncased, text);
  CheckTokenizer(*cased, text);
  // The Unicode helpers on their own, on whatever the bytes decode to.
  const std::u32string cps = distlm::tokenizer::DecodeUtf8Lossy(text);
  Check(distlm::tokenizer::FindInvalidUtf8(distlm::tokenizer::EncodeUtf8(cps)) == std::string_view::npos);
  distlm::tokenizer::StripAccents(distlm::tokenizer::PythonLower(cps));
  return 0;
}
