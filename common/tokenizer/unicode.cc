#include "common/tokenizer/unicode.h"

#include <utf8proc.h>

#include <vector>

namespace distlm::tokenizer {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

bool IsAscii(std::u32string_view text) {
  for (char32_t c : text) {
    if (c >= 0x80) return false;
  }
  return true;
}

utf8proc_category_t Category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool IsValidCodePoint(char32_t c) { return c < 0xD800 || (c > 0xDFFF && c <= 0x10FFFF); }

// Unicode's "Cased" property: Lowercase or Uppercase or Lt. utf8proc has no Other_Lowercase /
// Other_Uppercase, so a character counts as cased when it is Lu/Ll/Lt or has a case mapping,
// plus the few Other_* characters with neither (DerivedCoreProperties.txt): U+00AA, U+00BA and
// the squared and circled capital letters U+1F130..U+1F189. The remaining Other_* characters
// without mappings are modifier letters (Lm), which are case-ignorable and so never asked.
bool IsCased(char32_t c) {
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      break;
  }
  if (c == 0x00AA || c == 0x00BA || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189)) {
    return true;
  }
  const auto cp = static_cast<utf8proc_int32_t>(c);
  return utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp;
}

// Unicode's "Case_Ignorable" property: Mn, Me, Cf, Lm, Sk, or Word_Break MidLetter, MidNumLet
// or Single_Quote. utf8proc has no Word_Break property, so those few characters are listed
// (from the Unicode text-segmentation annex's WordBreakProperty.txt).
bool IsCaseIgnorable(char32_t c) {
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  switch (c) {
    case 0x0027:  // Single_Quote
    case 0x002E: case 0x2018: case 0x2019: case 0x2024:  // MidNumLet
    case 0xFE52: case 0xFF07: case 0xFF0E:
    case 0x003A: case 0x00B7: case 0x0387: case 0x055F:  // MidLetter
    case 0x05F4: case 0x2027: case 0xFE13: case 0xFE55: case 0xFF1A:
      return true;
    default:
      return false;
  }
}

// CPython's handle_capital_sigma: U+03A3 at index i lowers to final sigma when a cased
// character precedes it (skipping case-ignorable ones) and none follows it (likewise).
char32_t LowerCapitalSigma(std::u32string_view text, size_t i) {
  size_t j = i;
  bool cased_before = false;
  while (j > 0) {
    --j;
    if (!IsCaseIgnorable(text[j])) {
      cased_before = IsCased(text[j]);
      break;
    }
  }
  if (!cased_before) return 0x03C3;
  for (size_t k = i + 1; k < text.size(); ++k) {
    if (!IsCaseIgnorable(text[k])) return IsCased(text[k]) ? 0x03C3 : 0x03C2;
  }
  return 0x03C2;
}

}  // namespace

std::u32string DecodeUtf8Lossy(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    if (p[i] < 0x80) {
      out.push_back(p[i]);
      ++i;
      continue;
    }
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(bytes.size() - i), &cp);
    if (n <= 0) {
      out.push_back(kReplacement);
      ++i;  // resynchronise at the next byte
    } else {
      out.push_back(static_cast<char32_t>(cp));
      i += static_cast<size_t>(n);
    }
  }
  return out;
}

size_t FindInvalidUtf8(std::string_view bytes) {
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(bytes.data());
  size_t i = 0;
  while (i < bytes.size()) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    utf8proc_int32_t cp = -1;
    utf8proc_ssize_t n = utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(bytes.size() - i), &cp);
    if (n <= 0) return i;
    i += static_cast<size_t>(n);
  }
  return std::string_view::npos;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
    return;
  }
  if (!IsValidCodePoint(c)) c = kReplacement;
  utf8proc_uint8_t buf[4];
  utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(c), buf);
  out->append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) AppendUtf8(c, &out);
  return out;
}

bool IsBertWhitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  if (c < 0x80) return false;
  return Category(c) == UTF8PROC_CATEGORY_ZS;
}

bool IsBertControl(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (!IsValidCodePoint(c)) return true;  // surrogates (Cs) and beyond Unicode
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
      return true;
    default:
      return false;
  }
}

bool IsBertPunctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) {
    return true;
  }
  if (c < 0x80) return false;
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool IsCjkIdeograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool IsPythonSpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  if (!IsValidCodePoint(c)) return false;
  const utf8proc_property_t* prop = utf8proc_get_property(static_cast<utf8proc_int32_t>(c));
  return prop->category == UTF8PROC_CATEGORY_ZS || prop->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
         prop->bidi_class == UTF8PROC_BIDI_CLASS_B || prop->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

std::u32string PythonLower(std::u32string_view text) {
  std::u32string out;
  out.reserve(text.size());
  if (IsAscii(text)) {
    for (char32_t c : text) out.push_back(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    return out;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == 0x0130) {  // SpecialCasing.txt: the only unconditional multi-code-point lower case
      out.push_back(0x0069);
      out.push_back(0x0307);
    } else if (c == 0x03A3) {
      out.push_back(LowerCapitalSigma(text, i));
    } else if (!IsValidCodePoint(c)) {
      out.push_back(c);
    } else {
      out.push_back(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
    }
  }
  return out;
}

std::u32string StripAccents(std::u32string_view text) {
  if (IsAscii(text)) return std::u32string(text);  // ASCII has no decompositions and no Mn
  const std::string utf8 = EncodeUtf8(text);
  const auto* src = reinterpret_cast<const utf8proc_uint8_t*>(utf8.data());
  const auto len = static_cast<utf8proc_ssize_t>(utf8.size());
  // Canonical decompositions expand a code point to at most 4 (Hangul: 3), so 4x is plenty;
  // utf8proc still reports the size it needs, and we retry if it ever asks for more.
  std::vector<utf8proc_int32_t> buf(text.size() * 4 + 4);
  utf8proc_ssize_t n = utf8proc_decompose(src, len, buf.data(), static_cast<utf8proc_ssize_t>(buf.size()),
                                          UTF8PROC_DECOMPOSE);
  if (n > static_cast<utf8proc_ssize_t>(buf.size())) {
    buf.resize(static_cast<size_t>(n));
    n = utf8proc_decompose(src, len, buf.data(), static_cast<utf8proc_ssize_t>(buf.size()), UTF8PROC_DECOMPOSE);
  }
  std::u32string out;
  if (n < 0) return std::u32string(text);  // unreachable: EncodeUtf8 emits valid UTF-8
  out.reserve(static_cast<size_t>(n));
  for (utf8proc_ssize_t i = 0; i < n; ++i) {
    if (utf8proc_category(buf[i]) != UTF8PROC_CATEGORY_MN) out.push_back(static_cast<char32_t>(buf[i]));
  }
  return out;
}

}  // namespace distlm::tokenizer
