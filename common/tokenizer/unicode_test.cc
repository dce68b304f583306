// Expected values are Unicode facts (categories, decompositions, SpecialCasing) and Python's
// documented behaviour, written out by code point.
#include "common/tokenizer/unicode.h"

#include <string>

#include <gtest/gtest.h>

namespace distlm::tokenizer {
namespace {

TEST(Utf8Test, DecodesAndEncodesEveryLength) {
  // 1, 2, 3 and 4 bytes: 'a', U+00E9, U+4E2D, U+1F600.
  const std::string bytes = "a\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80";
  const std::u32string cps = {0x61, 0xE9, 0x4E2D, 0x1F600};
  EXPECT_EQ(DecodeUtf8Lossy(bytes), cps);
  EXPECT_EQ(EncodeUtf8(cps), bytes);
  EXPECT_EQ(FindInvalidUtf8(bytes), std::string::npos);
}

TEST(Utf8Test, InvalidBytesBecomeReplacementCharacters) {
  // A stray continuation byte, an overlong '/', a UTF-16 surrogate, a truncated sequence.
  EXPECT_EQ(DecodeUtf8Lossy("a\x80z"), (std::u32string{'a', 0xFFFD, 'z'}));
  EXPECT_EQ(DecodeUtf8Lossy("\xC0\xAF"), (std::u32string{0xFFFD, 0xFFFD}));
  EXPECT_EQ(DecodeUtf8Lossy("\xED\xA0\x80").find_first_not_of(char32_t{0xFFFD}), std::u32string::npos);
  EXPECT_EQ(DecodeUtf8Lossy("ab\xE4\xB8"), (std::u32string{'a', 'b', 0xFFFD, 0xFFFD}));
  EXPECT_EQ(FindInvalidUtf8("ok\xE4\xB8"), 2u);
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // beyond U+10FFFF
}

TEST(Utf8Test, EncodingInvalidCodePointsGivesReplacement) {
  EXPECT_EQ(EncodeUtf8(std::u32string{0xD800}), "\xEF\xBF\xBD");
  EXPECT_EQ(EncodeUtf8(std::u32string{0x110000}), "\xEF\xBF\xBD");
}

TEST(CharClassTest, Whitespace) {
  for (char32_t c : {U' ', U'\t', U'\n', U'\r', char32_t{0xA0}, char32_t{0x3000}, char32_t{0x2009}}) {
    EXPECT_TRUE(IsBertWhitespace(c)) << std::hex << c;
  }
  // U+2028 is Zl, U+200B is Cf, \v is Cc: none is BERT white space.
  for (char32_t c : {U'a', char32_t{0x2028}, char32_t{0x200B}, U'\v'}) EXPECT_FALSE(IsBertWhitespace(c)) << std::hex << c;
}

TEST(CharClassTest, ControlIsEveryOtherCategory) {
  // Cc, Cf (soft hyphen, zero-width space), Co (private use), Cn (unassigned).
  for (char32_t c : {char32_t{0x07}, char32_t{0x7F}, char32_t{0x85}, char32_t{0xAD}, char32_t{0x200B}, char32_t{0xE000},
                     char32_t{0x0378}}) {
    EXPECT_TRUE(IsBertControl(c)) << std::hex << c;
  }
  for (char32_t c : {U'\t', U'\n', U'\r', U' ', U'a', char32_t{0xE9}}) EXPECT_FALSE(IsBertControl(c)) << std::hex << c;
}

TEST(CharClassTest, Punctuation) {
  // ASCII symbols count; Unicode P* counts (inverted question mark, em dash, CJK full stop).
  for (char32_t c : {U'!', U'$', U'^', U'`', U'~', U'/', U'@', char32_t{0xBF}, char32_t{0x2014}, char32_t{0x3002}}) {
    EXPECT_TRUE(IsBertPunctuation(c)) << std::hex << c;
  }
  // Symbols outside ASCII do not: euro (Sc), degree (So), plus-minus (Sm); letters and digits.
  for (char32_t c : {char32_t{0x20AC}, char32_t{0xB0}, char32_t{0xB1}, U'a', U'0', U' '}) {
    EXPECT_FALSE(IsBertPunctuation(c)) << std::hex << c;
  }
}

TEST(CharClassTest, CjkBlocks) {
  for (char32_t c : {char32_t{0x4E00}, char32_t{0x9FFF}, char32_t{0x3400}, char32_t{0x20000}, char32_t{0xF900},
                     char32_t{0x2FA1F}}) {
    EXPECT_TRUE(IsCjkIdeograph(c)) << std::hex << c;
  }
  // Hiragana, Katakana and Hangul are not split out.
  for (char32_t c : {char32_t{0x3042}, char32_t{0x30A2}, char32_t{0xAC00}, char32_t{0x4DC0}}) {
    EXPECT_FALSE(IsCjkIdeograph(c)) << std::hex << c;
  }
}

TEST(CharClassTest, PythonSpaceIsWiderThanBertWhitespace) {
  for (char32_t c : {U' ', U'\v', U'\f', char32_t{0x1C}, char32_t{0x1F}, char32_t{0x85}, char32_t{0xA0},
                     char32_t{0x2028}, char32_t{0x2029}, char32_t{0x3000}}) {
    EXPECT_TRUE(IsPythonSpace(c)) << std::hex << c;
  }
  for (char32_t c : {U'a', char32_t{0x200B}, char32_t{0xAD}, char32_t{0}}) EXPECT_FALSE(IsPythonSpace(c)) << std::hex << c;
}

TEST(PythonLowerTest, SimpleMappings) {
  EXPECT_EQ(PythonLower(U"Hello WORLD 42"), U"hello world 42");
  EXPECT_EQ(PythonLower(U"\u00C9T\u00C9"), U"\u00E9t\u00E9");      // ÉTÉ
  EXPECT_EQ(PythonLower(U"\u0414\u041E\u041C"), U"\u0434\u043E\u043C");  // ДОМ
  EXPECT_EQ(PythonLower(U"\u2160"), U"\u2170");                      // Roman numeral one
}

TEST(PythonLowerTest, CapitalIWithDotBecomesTwoCodePoints) {
  EXPECT_EQ(PythonLower(U"\u0130"), U"i\u0307");
  EXPECT_EQ(StripAccents(PythonLower(U"\u0130stanbul")), U"istanbul");
}

TEST(PythonLowerTest, FinalSigma) {
  // ΟΔΟΣ -> οδος with final sigma; Σ alone has no cased letter before it.
  EXPECT_EQ(PythonLower(U"\u039F\u0394\u039F\u03A3"), U"\u03BF\u03B4\u03BF\u03C2");
  EXPECT_EQ(PythonLower(U"\u03A3"), U"\u03C3");
  EXPECT_EQ(PythonLower(U"\u03A3\u0391"), U"\u03C3\u03B1");
  // A following ',' is neither cased nor case-ignorable: final. A following '.' is
  // case-ignorable (MidNumLet), so the cased letter after it decides: not final.
  EXPECT_EQ(PythonLower(U"\u0391\u03A3,\u0392"), U"\u03B1\u03C2,\u03B2");
  EXPECT_EQ(PythonLower(U"\u0391\u03A3.\u0392"), U"\u03B1\u03C3.\u03B2");
  EXPECT_EQ(PythonLower(U"\u0391\u03A3."), U"\u03B1\u03C2.");
  // A combining accent before Σ is skipped (case-ignorable) back to the cased letter.
  EXPECT_EQ(PythonLower(U"\u0391\u0301\u03A3"), U"\u03B1\u0301\u03C2");
  // Cased without a case mapping (Other_Lowercase): the feminine ordinal; an uncased letter
  // (CJK) or a digit before Σ makes it not final.
  EXPECT_EQ(PythonLower(U"\u00AA\u03A3"), U"\u00AA\u03C2");
  EXPECT_EQ(PythonLower(U"\u4E2D\u03A3"), U"\u4E2D\u03C3");
  EXPECT_EQ(PythonLower(U"1\u03A3"), U"1\u03C3");
}

TEST(StripAccentsTest, DecomposesAndDropsNonSpacingMarks) {
  EXPECT_EQ(StripAccents(U"caf\u00E9"), U"cafe");          // precomposed é
  EXPECT_EQ(StripAccents(U"cafe\u0301"), U"cafe");         // e + combining acute
  EXPECT_EQ(StripAccents(U"\u1EC7"), U"e");                // ệ: two marks
  EXPECT_EQ(StripAccents(U"\u00F8"), U"\u00F8");           // ø has no decomposition
  EXPECT_EQ(StripAccents(U"\uFB01"), U"\uFB01");           // ﬁ: compatibility only, kept
  EXPECT_EQ(StripAccents(U"\u00B2"), U"\u00B2");           // ² likewise
  EXPECT_EQ(StripAccents(U"\uAC00"), U"\u1100\u1161");      // Hangul syllable -> jamo (Lo)
  EXPECT_EQ(StripAccents(U"\u0915\u093E"), U"\u0915\u093E");  // Devanagari vowel sign AA is Mc: kept
  EXPECT_EQ(StripAccents(U"\u0301"), U"");
}

}  // namespace
}  // namespace distlm::tokenizer
