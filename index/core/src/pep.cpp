// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Over 500 lines on purpose: every PEP grammar the engine reads (440 versions and
// specifiers, 503 names, 508 requirements, 427 file names) with the canonical spellings
// they share; one file keeps one answer per question (ctest/data/pep440-cases.json).
#include "ffpa/core/pep.h"

#include "ffpa/core/utf8.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace ffpa::core {
namespace {

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
bool all_digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == s.npos; }
// Whether `s` is non-empty and made of letters, digits and the characters of `more`.
bool alnum_and(std::string_view s, std::string_view more) {
  const auto allowed = [&](char c) { return is_alnum(c) || more.find(c) != more.npos; };
  return !s.empty() && std::all_of(s.begin(), s.end(), allowed);
}

// "007" -> "7", "0" -> "0": packaging stores release/pre/post/dev numbers as ints.
std::string strip_zeros(std::string_view digits) {
  size_t i = 0;
  while (i + 1 < digits.size() && digits[i] == '0') ++i;
  return std::string(digits.substr(i));
}

// Python's str.isspace() (what packaging's `\s` matches around a version), for UTF-8
// text: the ASCII blanks and separators \x1c-\x1f plus the Unicode spaces. Returns
// the byte length of the whitespace character at the start of `s`, 0 if none.
std::size_t py_space_at(std::string_view s) {
  if (s.empty()) return 0;
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  if ((b(0) >= 0x09 && b(0) <= 0x0d) || (b(0) >= 0x1c && b(0) <= 0x20)) return 1;
  if (s.size() >= 2 && b(0) == 0xc2 && (b(1) == 0x85 || b(1) == 0xa0)) return 2;  // U+0085, U+00A0
  if (s.size() >= 3 && b(0) == 0xe1 && b(1) == 0x9a && b(2) == 0x80) return 3;     // U+1680
  if (s.size() >= 3 && b(0) == 0xe2 && b(1) == 0x80 &&
      ((b(2) >= 0x80 && b(2) <= 0x8a) || b(2) == 0xa8 || b(2) == 0xa9 || b(2) == 0xaf))
    return 3;  // U+2000-U+200A, U+2028, U+2029, U+202F
  if (s.size() >= 3 && b(0) == 0xe2 && b(1) == 0x81 && b(2) == 0x9f) return 3;  // U+205F
  if (s.size() >= 3 && b(0) == 0xe3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

std::string_view strip_py_space(std::string_view s) {
  for (std::size_t n; (n = py_space_at(s)) > 0;) s.remove_prefix(n);
  // From the end: try each possible width of the last character.
  for (std::size_t w = 1; w <= 3 && w <= s.size(); ++w)
    if (py_space_at(s.substr(s.size() - w)) == w) {
      s.remove_suffix(w);
      w = 0;  // the new last character, from its first possible width
    }
  return s;
}

// The comparison operator `s` starts with (the longest), or "".
std::string_view comparison_at(std::string_view s) {
  for (std::string_view op : {"===", "~=", "==", "!=", "<=", ">=", "<", ">"})
    if (s.substr(0, op.size()) == op) return op;
  return {};
}

bool one_specifier_ok(std::string_view spec, std::string* why) {
  auto fail = [&](const std::string& msg) {
    if (why) *why = "'" + std::string(spec) + "': " + msg;
    return false;
  };
  const std::string_view op = comparison_at(spec);
  if (op.empty()) return fail("a specifier starts with one of ~= == != <= >= < > ===, e.g. '>=3.10'");
  const std::string_view ver = trim(spec.substr(op.size()));
  if (ver.empty()) return fail("the operator '" + std::string(op) + "' has no version");
  if (op == "===") {
    for (char c : ver)
      if (c == ' ' || c == '\t' || c == ';' || c == ')') return fail("an arbitrary-equality version has no spaces, ';' or ')'");
    return true;
  }
  if ((op == "==" || op == "!=") && ver.size() > 2 && ver.substr(ver.size() - 2) == ".*") {
    static const std::regex prefix(R"(^v?([0-9]+!)?[0-9]+(\.[0-9]+)*$)", std::regex::icase);
    if (!std::regex_match(std::string(ver.substr(0, ver.size() - 2)), prefix))
      return fail("a '.*' prefix match takes only release numbers, e.g. '==3.10.*'");
    return true;
  }
  if (ver.find('*') != std::string_view::npos) return fail("'.*' is only allowed at the end, after == and !=");
  std::string vwhy;
  auto v = parse_pep440(ver, &vwhy);
  if (!v || ver.find_first_of(" \t") != std::string_view::npos) return fail(v ? "whitespace inside the version" : vwhy);
  if (!v->local.empty() && op != "==" && op != "!=")
    return fail("a local version (+" + v->local + ") is only allowed with == and !=");
  if (op == "~=" && v->release.find('.') == std::string::npos)
    return fail("'~=' needs at least two release numbers, e.g. '~=3.10'");
  return true;
}

// PEP 508 by recursive descent over the whole string.
class RequirementParser {
 public:
  explicit RequirementParser(std::string_view s) : s_(s) {}

  bool parse(std::string* why) {
    ws();
    if (!name()) return fail("a requirement starts with a project name (letters, digits, '.', '_', '-')", why);
    ws();
    if (eat('[')) {
      ws();
      if (!peek(']')) {
        do {
          ws();
          if (!name()) return fail("bad extra name inside [...]", why);
          ws();
        } while (eat(','));
      }
      if (!eat(']')) return fail("unclosed '[' of the extras", why);
      ws();
    }
    if (eat('@')) {
      ws();
      const size_t start = i_;
      while (i_ < s_.size() && s_[i_] != ' ' && s_[i_] != '\t') ++i_;
      if (i_ == start) return fail("'@' must be followed by a URL", why);
      const bool spaced = ws();
      if (i_ < s_.size() && !spaced) return fail("put a space between the URL and ';'", why);
    } else if (i_ < s_.size() && s_[i_] != ';') {
      // "(specifiers)" or specifiers up to the marker.
      const bool paren = peek('(');
      const size_t end = s_.find(paren ? ')' : ';', i_);
      if (paren && end == std::string_view::npos) return fail("unclosed '(' of the version specifiers", why);
      std::string swhy;
      const std::size_t from = i_ + (paren ? 1 : 0);
      if (!is_valid_specifier_set(s_.substr(from, end == std::string_view::npos ? end : end - from), &swhy))
        return fail(swhy, why);
      i_ = end == std::string_view::npos ? s_.size() : end + (paren ? 1 : 0);
      ws();
    }
    if (eat(';')) {
      if (!marker_or()) return fail(marker_why_.empty() ? "bad environment marker after ';'" : marker_why_, why);
      ws();
    }
    if (i_ != s_.size()) return fail("unexpected text at '" + std::string(s_.substr(i_)) + "'", why);
    return true;
  }

 private:
  bool fail(const std::string& msg, std::string* why) {
    if (why) *why = "'" + std::string(s_) + "' is not a PEP 508 requirement: " + msg;
    return false;
  }
  bool refuse_marker(std::string msg) {
    marker_why_ = std::move(msg);
    return false;
  }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool eat(char c) { return peek(c) && ++i_; }
  bool ws() {
    const size_t start = i_;
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
    return i_ > start;
  }
  bool name() {
    const size_t start = i_;
    while (i_ < s_.size() && (is_alnum(s_[i_]) || s_[i_] == '.' || s_[i_] == '_' || s_[i_] == '-')) ++i_;
    return is_valid_project_name(s_.substr(start, i_ - start));
  }
  bool word(std::string_view w) {  // moves past `w` only when it is a whole word
    if (s_.substr(i_, w.size()) != w) return false;
    const size_t end = i_ + w.size();
    if (end < s_.size() && (is_alnum(s_[end]) || s_[end] == '_')) return false;
    i_ = end;
    return true;
  }
  // operand (op operand)*: marker_or over marker_and over marker_expr.
  bool chain(std::string_view op, bool (RequirementParser::*operand)()) {
    if (!(this->*operand)()) return false;
    for (ws(); word(op); ws())
      if (!(this->*operand)()) return false;
    return true;
  }
  bool marker_or() { return chain("or", &RequirementParser::marker_and); }
  bool marker_and() { return chain("and", &RequirementParser::marker_expr); }
  bool marker_expr() {
    ws();
    if (eat('(')) {
      if (!marker_or()) return false;
      ws();
      return eat(')') || refuse_marker("unclosed '(' in the marker");
    }
    if (!marker_value()) return false;
    ws();
    const std::string_view op = comparison_at(s_.substr(i_));
    i_ += op.size();
    bool in = op.empty() && word("in");
    if (op.empty() && !in && word("not")) {
      ws();
      in = word("in");
    }
    if (op.empty() && !in) return refuse_marker("a marker compares with one of < <= == != >= > ~= === in 'not in'");
    ws();
    return marker_value();
  }
  bool marker_value() {
    if (peek('\'') || peek('"')) {
      const size_t close = s_.find(s_[i_], i_ + 1);
      if (close == std::string_view::npos) return refuse_marker("unterminated string in the marker");
      i_ = close + 1;
      return true;
    }
    static const std::regex var(
        R"(^(python_version|python_full_version|os[._]name|sys[._]platform|platform_(release|system)|)"
        R"(platform[._](version|machine|python_implementation)|python_implementation|implementation_(name|version)|)"
        R"(extras?|dependency_groups)\b)");
    std::smatch m;
    const std::string rest(s_.substr(i_));
    if (!std::regex_search(rest, m, var))
      return refuse_marker("unknown marker variable at '" + rest + "' (python_version, sys_platform, extra, ...)");
    i_ += static_cast<size_t>(m.length(0));
    return true;
  }

  std::string_view s_;
  size_t i_ = 0;
  std::string marker_why_;
};
}  // namespace

bool is_valid_project_name(std::string_view name) {
  // ^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$ with re.IGNORECASE
  return alnum_and(name, "._-") && is_alnum(name.front()) && is_alnum(name.back());
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
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::optional<Version> parse_pep440(std::string_view raw_input, std::string* why) {
  // packaging strips Unicode whitespace around a version (its regex's \s); so do we,
  // so that ctest/data/pep440-cases.json gets the same answers from both.
  const std::string_view input = strip_py_space(raw_input);
  // The regular expression of PEP 440 appendix B (the one packaging uses), with
  // capture groups: 1 epoch, 2 release, 3 pre label, 4 pre number, 5 post number
  // (the "-N" form), 6 post label, 7 post number, 8 dev label, 9 dev number, 10 local.
  static const std::regex re(R"(^\s*v?(?:([0-9]+)!)?([0-9]+(?:\.[0-9]+)*))"
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
  for (const auto& part : split(m[2].str(), '.')) v.release += (v.release.empty() ? "" : ".") + strip_zeros(part);
  out += v.release;
  if (m[3].matched) {
    std::string l = lower_ascii(m[3].str());
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
    std::string raw = m[10].str();
    std::replace_if(raw.begin(), raw.end(), [](char c) { return c == '-' || c == '_'; }, '.');
    std::vector<std::string> segments;
    for (const auto& seg : split(raw, '.')) segments.push_back(all_digits(seg) ? strip_zeros(seg) : lower_ascii(seg));
    v.local = join(segments, ".");
    out += "+" + v.local;
  }
  // packaging counts a dev release as a pre-release too (Version.is_prerelease).
  if (v.is_dev) v.is_pre = true;
  v.canonical = out;
  return v;
}

std::optional<std::string> canonical_version(std::string_view v, std::string* why) {
  auto parsed = parse_pep440(v, why);
  if (!parsed) return std::nullopt;
  return parsed->canonical;
}

bool same_version(std::string_view a, std::string_view b) {
  auto va = parse_pep440(a), vb = parse_pep440(b);
  return va && vb && version_identity(*va) == version_identity(*vb);
}

bool is_valid_specifier_set(std::string_view s, std::string* why) {
  if (trim(s).empty()) {
    if (why) *why = "empty specifier set; give one, e.g. '>=3.10'";
    return false;
  }
  size_t start = 0;
  bool any = false;
  for (;;) {
    const size_t comma = s.find(',', start);
    const std::string_view clause = trim(s.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    // Empty clauses are skipped, as packaging's SpecifierSet does.
    if (!clause.empty() && !one_specifier_ok(clause, why)) return false;
    any = any || !clause.empty();
    if (comma == std::string_view::npos) {
      if (!any && why) *why = "'" + std::string(s) + "' holds no specifier; give one, e.g. '>=3.10'";
      return any;
    }
    start = comma + 1;
  }
}

bool is_valid_requirement(std::string_view s, std::string* why) { return RequirementParser(s).parse(why); }

std::string canonical_wheel_filename(const WheelFilename& w) {
  WheelFilename c = w;
  c.name = wheel_name_component(w.name);
  if (auto v = canonical_version(w.version)) c.version = *v;
  return c.filename();
}

std::string wheel_filename_spelling_problem(const WheelFilename& w) {
  const std::string canonical = canonical_wheel_filename(w);
  if (canonical == w.filename()) return {};
  std::string what;
  if (wheel_name_component(w.name) != w.name)
    what = "the project name '" + w.name + "' is not normalized (PEP 427/625: lowercase, '_' for runs of '-_.', here '" +
           wheel_name_component(w.name) + "')";
  const auto cv = canonical_version(w.version);
  if (cv && *cv != w.version)
    what += (what.empty() ? "" : " and ") + std::string("the version '") + w.version +
            "' is not canonical PEP 440 (here '" + *cv + "')";
  return w.filename() + ": " + what + "; one version has one spelling, so rename or rebuild the wheel as " + canonical;
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
  if (!alnum_and(w.name, "_.") || !is_alnum(w.name.front()) || !is_alnum(w.name.back()))
    return fail("invalid distribution name '" + w.name + "'");
  std::string vwhy;
  if (!parse_pep440(w.version, &vwhy)) return fail(vwhy);
  if (w.version.find_first_of(" \t") != std::string::npos) return fail("whitespace in version");
  if (parts.size() == 6) {
    if (w.build.empty() || !std::isdigit(static_cast<unsigned char>(w.build.front())) || !alnum_and(w.build, "_."))
      return fail("build tag '" + w.build + "' must start with a digit");
  }
  for (const std::string* t : {&w.python, &w.abi, &w.platform}) {
    if (!alnum_and(*t, "_.")) return fail("invalid tag field '" + *t + "'");
    for (const auto& piece : split(*t, '.'))
      if (piece.empty()) return fail("empty element in compressed tag set '" + *t + "'");
  }
  return w;
}

// --- version equality as pip sees it (for index/site) ---------------------------------

std::string version_identity(const Version& v) {
  // canonical is "[E!]<release>[rest]"; trailing ".0" release numbers do not count.
  std::string release = v.release;
  while (release.size() > 2 && release.compare(release.size() - 2, 2, ".0") == 0) release.resize(release.size() - 2);
  const std::size_t bang = v.canonical.find('!'), at = bang == std::string::npos ? 0 : bang + 1;
  return v.canonical.substr(0, at) + release + v.canonical.substr(at + v.release.size());
}

}  // namespace ffpa::core
