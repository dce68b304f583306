#include "grading/text.h"

#include <cstdint>

namespace distlm::grading {
namespace {

// The length of the valid UTF-8 sequence starting at s[i] (1-4), or 0 when it is not one.
size_t Utf8Length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

}  // namespace

std::string Printable(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8Length(text, i);
    const uint8_t c = static_cast<uint8_t>(text[i]);
    if (n == 0) {
      out += '?';
      ++i;
    } else if (n == 1 && ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7F)) {
      out += '?';
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

std::string CapText(const std::string& text, size_t max_bytes, const std::string& marker) {
  if (text.size() <= max_bytes) return text;
  size_t cut = max_bytes;
  // Back up over continuation bytes so a character is never split.
  while (cut > 0 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut) + marker;
}

std::string QuotedLine(const std::string& line, size_t max_chars) {
  std::string l = Printable(line);
  while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.pop_back();
  for (char& c : l) {
    if (c == '\n') c = '?';
  }
  if (l.size() > max_chars) l = CapText(l, max_chars, " [...]");
  return "    | " + l;
}

}  // namespace distlm::grading
