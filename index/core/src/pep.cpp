// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/core/pep.h"

#include <cctype>
#include <regex>

namespace ffpa::core {
namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

// "007" -> "7", "0" -> "0": packaging stores release/pre/post/dev numbers as ints.
std::string strip_zeros(std::string_view digits) {
  size_t i = 0;
  while (i + 1 < digits.size() && digits[i] == '0') ++i;
  return std::string(digits.substr(i));
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

bool tag_chars_ok(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(is_alnum(c) || c == '_' || c == '.')) return false;
  return true;
}

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.emplace_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

}  // namespace

bool is_valid_project_name(std::string_view name) {
  // ^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$ with re.IGNORECASE
  if (name.empty()) return false;
  if (!is_alnum(name.front()) || !is_alnum(name.back())) return false;
  for (char c : name)
    if (!(is_alnum(c) || c == '.' || c == '_' || c == '-')) return false;
  return true;
}

std::string normalize_project_name(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out.push_back('-');
      in_run = true;
    } else {
      out.push_back(lower(c));
      in_run = false;
    }
  }
  return out;
}

std::string wheel_name_component(std::string_view name) {
  std::string out = normalize_project_name(name);
  for (char& c : out)
    if (c == '-') c = '_';
  return out;
}

std::optional<Version> parse_pep440(std::string_view input, std::string* why) {
  // The regular expression of PEP 440 appendix B (the one packaging uses), with
  // capture groups: 1 epoch, 2 release, 3 pre label, 4 pre number, 5 post number
  // (the "-N" form), 6 post label, 7 post number, 8 dev label, 9 dev number, 10 local.
  static const std::regex re(
      R"(^\s*v?(?:([0-9]+)!)?([0-9]+(?:\.[0-9]+)*))"
      R"((?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?([0-9]+)?)?)"
      R"((?:-([0-9]+)|[-_.]?(post|rev|r)[-_.]?([0-9]+)?)?)"
      R"((?:[-_.]?(dev)[-_.]?([0-9]+)?)?)"
      R"((?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$)",
      std::regex::icase | std::regex::ECMAScript);
  std::string s(input);
  std::smatch m;
  if (!std::regex_match(s, m, re)) {
    if (why)
      *why = "'" + s +
             "' is not a PEP 440 version; use N(.N)*[{a|b|rc}N][.postN][.devN][+local], e.g. 0.3.0 or 0.3.0+cu13";
    return std::nullopt;
  }
  Version v;
  std::string out;
  if (m[1].matched) {
    std::string e = strip_zeros(m[1].str());
    if (e != "0") out += e + "!";
  }
  {
    bool first = true;
    for (const auto& part : split(m[2].str(), '.')) {
      if (!first) out += '.';
      out += strip_zeros(part);
      first = false;
    }
  }
  if (m[3].matched) {
    std::string l = lowered(m[3].str());
    if (l == "alpha") l = "a";
    else if (l == "beta") l = "b";
    else if (l == "c" || l == "pre" || l == "preview") l = "rc";
    out += l + (m[4].matched ? strip_zeros(m[4].str()) : "0");
    v.is_pre = true;
  }
  if (m[5].matched || m[6].matched) {
    std::string n = m[5].matched ? m[5].str() : (m[7].matched ? m[7].str() : "0");
    out += ".post" + strip_zeros(n);
    v.is_post = true;
  }
  if (m[8].matched) {
    out += ".dev" + (m[9].matched ? strip_zeros(m[9].str()) : "0");
    v.is_dev = true;
  }
  v.public_part = out;
  if (m[10].matched) {
    std::string local;
    std::string seg;
    auto flush = [&]() {
      if (!local.empty()) local += '.';
      local += all_digits(seg) ? strip_zeros(seg) : lowered(seg);
      seg.clear();
    };
    for (char c : m[10].str()) {
      if (c == '-' || c == '_' || c == '.') flush();
      else seg.push_back(c);
    }
    flush();
    v.local = local;
    out += "+" + local;
  }
  // packaging counts a dev release as a pre-release too (Version.is_prerelease).
  if (v.is_dev) v.is_pre = true;
  v.canonical = out;
  return v;
}

std::string WheelFilename::filename() const {
  std::string out = name + "-" + version;
  if (!build.empty()) out += "-" + build;
  out += "-" + python + "-" + abi + "-" + platform + ".whl";
  return out;
}

std::vector<std::string> WheelFilename::tags() const {
  std::vector<std::string> out;
  for (const auto& py : split(python, '.'))
    for (const auto& abi_tag : split(abi, '.'))
      for (const auto& plat : split(platform, '.')) out.push_back(py + "-" + abi_tag + "-" + plat);
  return out;
}

std::optional<WheelFilename> parse_wheel_filename(std::string_view fn, std::string* why) {
  auto fail = [&](const std::string& msg) -> std::optional<WheelFilename> {
    if (why) *why = "'" + std::string(fn) + "': " + msg;
    return std::nullopt;
  };
  if (fn.size() < 4 || fn.substr(fn.size() - 4) != ".whl")
    return fail("a wheel file name ends in .whl");
  if (fn.find('/') != std::string_view::npos) return fail("give a file name, not a path");
  auto parts = split(fn.substr(0, fn.size() - 4), '-');
  if (parts.size() != 5 && parts.size() != 6)
    return fail("expected {name}-{version}[-{build}]-{python}-{abi}-{platform}.whl (5 or 6 fields), got " +
                std::to_string(parts.size()) + "; dashes inside the name or version must be '_'");
  WheelFilename w;
  w.name = parts[0];
  w.version = parts[1];
  if (parts.size() == 6) w.build = parts[2];
  w.python = parts[parts.size() - 3];
  w.abi = parts[parts.size() - 2];
  w.platform = parts[parts.size() - 1];
  if (!tag_chars_ok(w.name) || !is_alnum(w.name.front()) || !is_alnum(w.name.back()))
    return fail("invalid distribution name '" + w.name + "'");
  std::string vwhy;
  if (!parse_pep440(w.version, &vwhy)) return fail(vwhy);
  if (w.version.find_first_of(" \t") != std::string::npos) return fail("whitespace in version");
  if (parts.size() == 6) {
    if (w.build.empty() || !std::isdigit(static_cast<unsigned char>(w.build.front())) || !tag_chars_ok(w.build))
      return fail("build tag '" + w.build + "' must start with a digit");
  }
  for (const std::string* t : {&w.python, &w.abi, &w.platform}) {
    if (!tag_chars_ok(*t)) return fail("invalid tag field '" + *t + "'");
    for (const auto& piece : split(*t, '.'))
      if (piece.empty()) return fail("empty element in compressed tag set '" + *t + "'");
  }
  return w;
}

}  // namespace ffpa::core
