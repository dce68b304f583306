// The character classes and case operations BERT's tokenizer is defined by, on Unicode code
// points, with the Unicode data taken from utf8proc.
//
// The reference (HuggingFace pytorch_transformers 1.2.0) is Python: it works on `str` (code
// points), uses `unicodedata.category`, `str.lower()`, `str.split()` and NFD. Each function here
// names the Python behaviour it reproduces, so a difference can be traced to one place.
#pragma once

#include <string>
#include <string_view>

namespace distlm::tokenizer {

// UTF-8 -> code points. Input that is not valid UTF-8 does not stop tokenization: each byte that
// cannot start or continue a valid sequence becomes U+FFFD, which BERT's cleaning step drops.
// (The reference cannot read such input at all; dropping it keeps the valid text around it.)
std::u32string DecodeUtf8Lossy(std::string_view bytes);

// Code points -> UTF-8 (appended to *out). Code points are assumed valid (they come from
// DecodeUtf8Lossy or utf8proc).
void AppendUtf8(char32_t c, std::string* out);
std::string EncodeUtf8(std::u32string_view text);

// Byte offset of the first invalid UTF-8 sequence, or std::string_view::npos when the bytes
// are valid UTF-8. File readers use it to report file:line:column.
size_t FindInvalidUtf8(std::string_view bytes);

// BERT `_is_whitespace`: ' ', '\t', '\n', '\r', or general category Zs.
bool IsBertWhitespace(char32_t c);

// BERT `_is_control` as pytorch_transformers 1.2.0 defines it: any general category starting
// with "C" (Cc, Cf, Co, Cs, Cn), except '\t', '\n' and '\r' which count as whitespace. (Google's
// original BERT only removes Cc and Cf; the reference also removes private-use and unassigned
// code points, and so do we.)
bool IsBertControl(char32_t c);

// BERT `_is_punctuation`: the ASCII ranges 33-47, 58-64, 91-96, 123-126 (so "$", "^", "`" count
// although Unicode calls them symbols), or any general category starting with "P".
bool IsBertPunctuation(char32_t c);

// BERT `_is_chinese_char`: the CJK Unified Ideographs blocks (not Hangul, Hiragana, Katakana).
bool IsCjkIdeograph(char32_t c);

// Python `str.isspace()` for one character: general category Zs, or bidirectional class WS, B
// or S. This is what `str.split()` and `str.strip()` split and strip on; it is wider than
// IsBertWhitespace (U+2028/U+2029 and some control characters).
bool IsPythonSpace(char32_t c);

// Python `str.lower()`: full lower-case mapping, which differs from utf8proc's simple mapping in
// exactly two places: U+0130 (capital I with dot) becomes "i" + U+0307, and U+03A3 (capital
// sigma) becomes final sigma U+03C2 at the end of a word (Unicode's Final_Sigma context, as
// CPython implements it; the Cased and Case_Ignorable properties utf8proc lacks are derived in
// unicode.cc).
std::u32string PythonLower(std::u32string_view text);

// BERT `_run_strip_accents`: canonical decomposition (NFD), then drop every code point of
// general category Mn (non-spacing marks).
std::u32string StripAccents(std::u32string_view text);

}  // namespace distlm::tokenizer
