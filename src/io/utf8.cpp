#include "knmf/io/utf8.hpp"

#include "knmf/core/error.hpp"

namespace knmf::io {

std::size_t invalid_utf8_at(std::string_view s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = b[i];
    std::size_t len = 0;
    unsigned lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c < 0x80) { ++i; continue; }
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) { len = 3; lo = 0xA0; }
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) { len = 3; hi = 0x9F; }
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) { len = 4; lo = 0x90; }
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) { len = 4; hi = 0x8F; }
    else return i;
    if (i + len > n || b[i + 1] < lo || b[i + 1] > hi) return i;
    for (std::size_t k = 2; k < len; ++k)
      if (b[i + k] < 0x80 || b[i + k] > 0xBF) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::string hex_bytes(std::string_view s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (i) out += ' ';
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  if (s.size() > 64) out += " ...";
  return out;
}

void require_utf8_name(std::string_view name, const std::string& where) {
  if (const std::size_t at = invalid_utf8_at(name); at != std::string_view::npos)
    input_error(where, " is not valid UTF-8 at byte ", at, " (bytes ", hex_bytes(name),
                "): knmf stores names as UTF-8 strings; re-encode them");
}

}  // namespace knmf::io
