// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Strict UTF-8 validation, as Python's bytes.decode("utf-8") does it: no overlong
// forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Every name and
// text file the engine reads from a wheel passes through it, because pip, twine and
// check-wheel-contents decode them the same way and fail (or decode as cp437)
// where this says no.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace ffpa::core {

// Offset of the first byte that does not start a valid sequence, or npos.
inline std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;  // would be a surrogate
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c == 0xF4) len = 4, hi = 0x8F;  // above U+10FFFF otherwise
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else return i;
    if (i + len > n) return i;
    const auto c1 = static_cast<unsigned char>(s[i + 1]);
    if (c1 < lo || c1 > hi) return i;
    for (std::size_t k = 2; k < len; ++k) {
      const auto ck = static_cast<unsigned char>(s[i + k]);
      if (ck < 0x80 || ck > 0xBF) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

inline bool is_valid_utf8(std::string_view s) { return first_invalid_utf8(s) == std::string_view::npos; }

// The text as is when it is valid UTF-8 without control characters or line breaks; otherwise
// with every byte outside printable ASCII written as \xNN, so a message about a
// hostile name shows its bytes instead of corrupting the terminal.
inline std::string printable(std::string_view s) {
  bool clean = is_valid_utf8(s);
  for (char ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) clean = false;
  // U+0085, U+2028, U+2029: line breaks too (str.splitlines), shown as bytes.
  for (const char* sep : {"\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9"})
    if (s.find(sep) != std::string_view::npos) clean = false;
  if (clean) return std::string(s);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += ch;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace ffpa::core
