// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The text rules every name and text file the engine reads obeys. Strict UTF-8
// validation, as Python's bytes.decode("utf-8") does it: no overlong
// forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF. Every name and
// text file the engine reads from a wheel passes through it, because pip, twine and
// check-wheel-contents decode them the same way and fail (or decode as cp437)
// where this says no.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

// U+0085, U+2028, U+2029: where Python's str.splitlines ends a line (pip reads RECORD
// that way, older email parsers headers) although '\n' does not.
inline bool has_unicode_line_break(std::string_view s) {
  for (const char* sep : {"\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9"})
    if (s.find(sep) != std::string_view::npos) return true;
  return false;
}

// Why `s` (valid UTF-8) cannot reach a terminal as text, or "": C0 controls other than
// tab, DEL, C1 controls (U+0080-U+009F: CSI and OSC sequences on many terminals) and the
// bidirectional overrides and isolates (U+061C, U+200E, U+200F, U+202A-U+202E,
// U+2066-U+2069) that make text read other than it is. pip prints yank reasons and
// other index strings verbatim.
inline std::string terminal_text_problem(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return "holds a control character (ESC sequences retitle, clear or rewrite a terminal)";
    const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
    const auto third = i + 2 < s.size() ? static_cast<unsigned char>(s[i + 2]) : 0;
    if (c == 0xc2 && next >= 0x80 && next <= 0x9f) return "holds a C1 control character (U+0080-U+009F)";
    if ((c == 0xd8 && next == 0x9c) || (c == 0xe2 && next == 0x80 && (third == 0x8e || third == 0x8f || (third >= 0xaa && third <= 0xae))) ||
        (c == 0xe2 && next == 0x81 && third >= 0xa6 && third <= 0xa9))
      return "holds a bidirectional override or isolate (U+202E and kin), which makes text read other than it is";
  }
  return "";
}

inline std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

inline std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

// `s` without the leading and trailing characters of `chars`.
inline std::string_view trim(std::string_view s, std::string_view chars = " \t") {
  const std::size_t first = s.find_first_not_of(chars);
  return first == std::string_view::npos ? "" : s.substr(first, s.find_last_not_of(chars) - first + 1);
}

// The items with `sep` between them: join({"a", "b"}, ", ") is "a, b".
template <typename Range>
std::string join(const Range& items, std::string_view sep) {
  std::string out;
  for (const auto& item : items) (out += item) += sep;
  return out.substr(0, out.size() - (out.empty() ? 0 : sep.size()));
}

// `s` with every byte that `keep` refuses written as `prefix` and two hex digits of
// `digits`: to_hex's "0f", printable's "\x0f", a URL's "%0F".
template <typename Keep>
std::string escape_bytes(std::string_view s, Keep keep, std::string_view prefix,
                         const char* digits = "0123456789abcdef") {
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (keep(c)) out += ch;
    else (out += prefix) += {digits[c >> 4], digits[c & 15]};
  }
  return out;
}

// The text as is when it is valid UTF-8 that can reach a terminal as text (no C0 or C1
// control, no DEL, no str.splitlines line break, no bidirectional override or isolate:
// terminal_text_problem's rule, tab included); otherwise with every byte outside
// printable ASCII written as \xNN, so a message about a hostile name, URL or reason
// shows its bytes instead of corrupting the terminal. The one home of that escaping:
// every message that echoes an input passes it through here (or terminal_safe).
inline std::string printable(std::string_view s) {
  const auto control = [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; };
  if (is_valid_utf8(s) && !has_unicode_line_break(s) && std::none_of(s.begin(), s.end(), control) &&
      terminal_text_problem(s).empty())
    return std::string(s);  // U+0085, U+2028 and U+2029 are shown as bytes too
  return escape_bytes(s, [](unsigned char c) { return c >= 0x20 && c < 0x7f && c != '\\'; }, "\\x");
}

// A whole message, line by line through printable: the last guard where the CLI prints
// a refusal, so an input a message forgot to pass through printable still reaches the
// terminal as bytes, never as an escape sequence. Lines that are clean stay as they are.
inline std::string terminal_safe(std::string_view message) {
  std::string out;
  for (std::size_t start = 0;;) {
    const std::size_t nl = message.find('\n', start);
    out += printable(message.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    if (nl == std::string_view::npos) return out;
    out += '\n';
    start = nl + 1;
  }
}

}  // namespace ffpa::core
