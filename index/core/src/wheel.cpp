// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Over 500 lines on purpose: verify-wheel is one pass over the archive (RECORD, METADATA,
// WHEEL, ELF members against the tag) whose checks share the member stream.
#include "ffpa/core/wheel.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "ffpa/core/elf.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/utf8.h"

namespace ffpa::core {

std::vector<std::vector<std::string>> parse_csv(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  for (std::string_view line : split(text, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;  // csv writers write no empty rows
    std::vector<std::string> row(1);
    bool quoted = false;
    for (std::size_t i = 0; i < line.size(); ++i) {
      if (quoted && line[i] == '"' && i + 1 < line.size() && line[i + 1] == '"') row.back() += line[++i];
      else if (line[i] == '"') quoted = !quoted;
      else if (line[i] == ',' && !quoted) row.emplace_back();
      else row.back() += line[i];
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) out += ',';
    const std::string& f = fields[i];
    if (f.find_first_of(",\"\r\n") != std::string::npos) {
      out += '"';
      for (char c : f) {
        if (c == '"') out += '"';
        out += c;
      }
      out += '"';
    } else {
      out += f;
    }
  }
  out += '\n';
  return out;
}

std::vector<std::pair<std::string, std::string>> parse_headers(std::string_view text, const std::string& what,
                                                               std::vector<std::string>& problems, std::string* body) {
  std::vector<std::pair<std::string, std::string>> out;
  if (body) body->clear();
  const std::size_t bad = first_invalid_utf8(text);
  if (bad != std::string_view::npos) {
    problems.push_back(what + " is not valid UTF-8 (byte " + printable(text.substr(bad, 1)) + " at offset " +
                       std::to_string(bad) + "); pip, twine and PyPI read it as UTF-8: write it as UTF-8 and rebuild");
    return out;
  }
  if (text.find('\0') != std::string_view::npos) {
    problems.push_back(what + " contains a NUL byte; rebuild the wheel");
    return out;
  }
  std::size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    const std::size_t eol = text.find('\n', pos);
    const std::size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view line = text.substr(pos, (eol == std::string_view::npos ? text.size() : eol) - pos);
    pos = next;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {  // the body follows
      if (body) *body = std::string(text.substr(pos));
      break;
    }
    const std::string at = what + " line " + std::to_string(line_no);
    const auto control = [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; };
    if (std::any_of(line.begin(), line.end(), control)) {
      // A lone CR or other control byte makes Python's email parser split the
      // line where we do not: refuse rather than guess.
      problems.push_back(at + " contains a control character (e.g. a lone carriage return); keep header values on "
                         "one line of printable text");
      continue;
    }
    // U+0085, U+2028 and U+2029 end a line for str.splitlines, which older email
    // parsers (and other readers of these files) use.
    if (has_unicode_line_break(line)) {
      problems.push_back(at + " contains U+0085, U+2028 or U+2029, where Python's str.splitlines ends a line; keep "
                         "header values on one line of plain text");
      continue;
    }
    // C1 controls and bidi overrides: pip, twine and index pages show these values
    // (Summary, Name, Version) on terminals as they are.
    if (std::string why = terminal_text_problem(line); !why.empty()) {
      problems.push_back(at + " " + why + "; header values are plain text: remove it");
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {
      if (out.empty()) problems.push_back(at + " is a continuation line with no field before it");
      else out.back().second += "\n" + std::string(line);
      continue;
    }
    const std::size_t colon = line.find(':');
    const std::string_view key = line.substr(0, colon == std::string_view::npos ? 0 : colon);
    const bool key_ok = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
    });
    if (colon == std::string_view::npos || !key_ok) {
      problems.push_back(at + " ('" + std::string(line.substr(0, 60)) +
                         "') is not 'Key: value'; continuation lines start with a space, and an empty line ends the "
                         "headers");
      continue;
    }
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    // Leading blanks are dropped by every reader; trailing ones are kept by
    // email.parser (pip) and uv, so "Name: ffpa-attn " is another name to them.
    if (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
      problems.push_back(at + " ('" + std::string(key) + "') ends in whitespace, which pip and uv keep as part of "
                         "the value; remove it");
    out.emplace_back(std::string(key), std::string(value));
  }
  return out;
}

namespace {

constexpr CoreField kCoreFields[] = {
    {"Metadata-Version", "1.0", false}, {"Name", "1.0", false},
    {"Version", "1.0", false},          {"Summary", "1.0", false},
    {"Description", "1.0", false},      {"Description-Content-Type", "2.1", false},
    {"Keywords", "1.0", false},         {"Home-page", "1.0", false},
    {"Download-URL", "1.1", false},     {"Author", "1.0", false},
    {"Author-email", "1.0", false},     {"Maintainer", "1.2", false},
    {"Maintainer-email", "1.2", false}, {"License", "1.0", false},
    {"License-Expression", "2.4", false}, {"Requires-Python", "1.2", false},
    {"License-File", "2.4", true},      {"Classifier", "1.1", true},
    {"Requires-Dist", "1.2", true},     {"Requires-External", "1.2", true},
    {"Project-URL", "1.2", true},       {"Provides-Extra", "2.1", true},
    {"Provides-Dist", "1.2", true},     {"Obsoletes-Dist", "1.2", true},
    {"Platform", "1.0", true},          {"Supported-Platform", "1.1", true},
    {"Dynamic", "2.2", true},           {"Requires", "1.1", true},
    {"Provides", "1.1", true},          {"Obsoletes", "1.1", true},
    {"Import-Name", "2.5", true},       {"Import-Namespace", "2.5", true},
};
constexpr const char* kMetadataVersions[] = {"1.0", "1.1", "1.2", "2.1", "2.2", "2.3", "2.4", "2.5"};

// The single top-level directory ending in `suffix`, or "" (problems noted).
std::set<std::string> top_dirs_with_suffix(const std::vector<ZipMember>& members, std::string_view suffix) {
  std::set<std::string> out;
  for (const auto& m : members) {
    size_t slash = m.name.find('/');
    if (slash == std::string::npos) continue;
    if (const std::string top = m.name.substr(0, slash); top.size() > suffix.size() && top.ends_with(suffix))
      out.insert(top);
  }
  return out;
}

// The first header named `key` (names are case-insensitive, as email.parser, pip, reads
// them), or nullptr.
const std::string* header(const std::vector<std::pair<std::string, std::string>>& h, std::string_view key) {
  for (const auto& [k, v] : h)
    if (lower_ascii(k) == lower_ascii(key)) return &v;
  return nullptr;
}
std::string first_header(const std::vector<std::pair<std::string, std::string>>& h, std::string_view key) {
  const std::string* v = header(h, key);
  return v ? *v : std::string();
}

// WHEEL as both installers read it: pip through email.parser (names in any case, the
// first of repeated fields), uv by exact name. Only a file both read alike passes:
// known fields spelled as PEP 427 spells them, each single-use field once.
void check_wheel_headers(const std::vector<std::pair<std::string, std::string>>& h, std::vector<std::string>& problems) {
  static constexpr const char* kFields[] = {"Wheel-Version", "Generator", "Root-Is-Purelib", "Tag", "Build"};
  std::map<std::string, std::string> seen;
  for (const auto& [k, v] : h) {
    const std::string key = lower_ascii(k);
    for (const char* f : kFields) {
      if (key != lower_ascii(f)) continue;
      if (k != f)
        problems.push_back("WHEEL: '" + k + "' must be spelled '" + f +
                           "': pip reads header names in any case, uv only as PEP 427 spells them");
      auto [first, fresh] = seen.emplace(key, k);
      if (!fresh && key != "tag")
        problems.push_back(std::string("WHEEL: '") + f + "' appears more than once (as '" + first->second + "' and '" + k +
                           "'); pip reads the first, another reader the last: keep one");
    }
  }
}

// RECORD's rows, as pip reads them (csv.reader over str.splitlines()) and uv (a CSV
// reader over '\n' lines) alike: only a file written as Python's csv module writes it
// (one row per '\n' or "\r\n" line, minimal quoting) is read, so no quoting trick or
// line boundary that one reader honours and another does not gets through.
std::vector<std::vector<std::string>> record_rows(std::string_view text, std::vector<std::string>& problems) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> lines = split(text, '\n');
  if (lines.back().empty()) lines.pop_back();  // the last line's end
  for (std::size_t n = 0; n < lines.size(); ++n) {
    std::string_view line = lines[n];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string at = "RECORD line " + std::to_string(n + 1);
    if (line.find_first_of("\r\v\f\x1c\x1d\x1e") != std::string_view::npos || has_unicode_line_break(line)) {
      problems.push_back(at + " contains a character where pip's RECORD reader (str.splitlines) ends a line (\\r, "
                         "\\v, \\f, \\x1c-\\x1e, U+0085, U+2028, U+2029): pip would read other rows; rebuild the wheel");
      continue;
    }
    auto parsed = parse_csv(line);
    if (parsed.size() != 1 || csv_line(parsed[0]) != std::string(line) + "\n") {
      problems.push_back(at + (line.empty() ? std::string(" is empty (csv writers write no empty rows)")
                                            : " ('" + printable(line.substr(0, 80)) +
                                                  "') is not written as Python's csv module writes it (minimal quoting)") +
                         "; installers could read other rows or fields: rebuild the wheel");
      continue;
    }
    rows.push_back(std::move(parsed[0]));
  }
  return rows;
}

}  // namespace

const CoreField* core_field(std::string_view name) {
  for (const auto& f : kCoreFields)
    if (lower_ascii(name) == lower_ascii(f.name)) return &f;
  return nullptr;
}

std::vector<std::string> check_core_metadata(std::string_view text, std::vector<std::pair<std::string, std::string>>* fields) {
  std::vector<std::string> problems;
  auto h = parse_headers(text, "METADATA", problems);
  std::map<std::string, std::string> seen;  // lower-case name -> first spelling
  for (const auto& [k, v] : h) {
    const std::string key = lower_ascii(k);
    const CoreField* rule = core_field(k);
    if (!rule) {
      problems.push_back("METADATA: unknown field '" + k + "'; core metadata (up to 2.5) has no such field: remove it");
      continue;
    }
    // packaging.metadata refuses a field newer than the file's Metadata-Version
    // (Dynamic under 2.1, License-Expression under 2.3).
    if (const std::string* mv = header(h, "metadata-version"); mv && std::string(rule->since) > *mv)
      problems.push_back("METADATA: '" + k + "' is a field of metadata " + rule->since + ", but Metadata-Version is '" +
                         printable(*mv) + "'; raise Metadata-Version to " + rule->since + " or drop the field");
    // Header names are case-insensitive (email.parser): 'name' repeats 'Name'.
    auto [first, fresh] = seen.emplace(key, k);
    if (!fresh && !rule->multi)
      problems.push_back("METADATA: '" + k + "' appears more than once" +
                         (first->second != k ? " (also as '" + first->second + "': header names are case-insensitive)"
                                             : std::string()) +
                         "; it is a single-use field, keep one");
  }
  std::string why;
  const std::string* mv = header(h, "metadata-version");
  if (!mv) problems.push_back("METADATA: no Metadata-Version; add 'Metadata-Version: 2.1' (or later)");
  else if (std::find_if(std::begin(kMetadataVersions), std::end(kMetadataVersions),
                        [&](const char* x) { return *mv == x; }) == std::end(kMetadataVersions))
    problems.push_back("METADATA: Metadata-Version '" + *mv + "' is not one of 1.0, 1.1, 1.2, 2.1 ... 2.5");
  const std::string* name = header(h, "name");
  if (!name) problems.push_back("METADATA: no Name field");
  else if (!is_valid_project_name(*name)) problems.push_back("METADATA: Name '" + *name + "' is not a valid project name (PEP 508)");
  const std::string* version = header(h, "version");
  if (!version) problems.push_back("METADATA: no Version field");
  else if (!parse_pep440(*version, &why)) problems.push_back("METADATA: Version: " + why);
  if (const std::string* summary = header(h, "summary"); summary && summary->find('\n') != std::string::npos)
    problems.push_back("METADATA: Summary spans several lines; a summary is one line");
  if (const std::string* rp = header(h, "requires-python"); rp && !is_valid_specifier_set(*rp, &why))
    problems.push_back("METADATA: Requires-Python is not a PEP 440 specifier set: " + why);
  // The bounds first (wheel.h, kMaxRequiresDist): past them no value is parsed, so one
  // hostile file costs one pass over its headers and one message per field.
  std::size_t n_requires = 0, n_extras = 0, n_long = 0;
  for (const auto& [k, v] : h) {
    const std::string key = lower_ascii(k);
    if (key != "requires-dist" && key != "provides-extra") continue;
    (key == "requires-dist" ? n_requires : n_extras) += 1;
    if (v.size() > kMaxDependencyValue && n_long++ == 0)
      problems.push_back("METADATA: " + k + " '" + printable(v.substr(0, 60)) + "...' is " + std::to_string(v.size()) +
                         " bytes long, over the " + std::to_string(kMaxDependencyValue) +
                         " a dependency field may hold (docs/release.md, \"What a wheel may declare\"); "
                         "declare the dependency plainly");
  }
  if (n_requires > kMaxRequiresDist)
    problems.push_back("METADATA: " + std::to_string(n_requires) + " Requires-Dist lines, over the " +
                       std::to_string(kMaxRequiresDist) + " a wheel may declare (every resolver parses each one; "
                       "docs/release.md, \"What a wheel may declare\"); declare fewer dependencies");
  if (n_extras > kMaxProvidesExtra)
    problems.push_back("METADATA: " + std::to_string(n_extras) + " Provides-Extra lines, over the " +
                       std::to_string(kMaxProvidesExtra) + " a wheel may declare (docs/release.md, \"What a wheel "
                       "may declare\"); declare fewer extras");
  if (n_long > 1)
    problems.push_back("METADATA: " + std::to_string(n_long) + " dependency fields in all are over " +
                       std::to_string(kMaxDependencyValue) + " bytes long");
  if (n_requires > kMaxRequiresDist || n_extras > kMaxProvidesExtra || n_long > 0) {
    if (fields) *fields = std::move(h);
    return problems;
  }
  for (const auto& [k, v] : h) {
    const std::string key = lower_ascii(k);
    if (key == "requires-dist" && !is_valid_requirement(v, &why)) problems.push_back("METADATA: Requires-Dist: " + why);
    else if (key == "requires-dist" && has_direct_url(v))
      problems.push_back("METADATA: Requires-Dist '" + printable(v) + "' names a direct URL: installing from the index "
                         "would make pip fetch a package the index never listed (uv and PyPI refuse it); depend on a "
                         "name and version instead");
    if (key == "license-expression")
      if (std::string p = license_expression_problem(v); !p.empty()) problems.push_back("METADATA: " + p);
    if (key == "license-file")
      if (std::string p = license_file_problem(v); !p.empty()) problems.push_back("METADATA: " + p);
    if (key == "provides-extra" && !is_valid_project_name(v))
      problems.push_back("METADATA: Provides-Extra '" + v + "' is not a valid extra name (letters, digits, '.', '_', '-')");
    if (key == "dynamic") {
      const std::string d = lower_ascii(v);
      if (d == "name" || d == "version" || d == "metadata-version")
        problems.push_back("METADATA: Dynamic: '" + v + "' can never be dynamic in a built wheel");
    }
  }
  if (fields) *fields = std::move(h);
  return problems;
}

bool is_shared_object_name(std::string_view member) {
  const std::string_view base = member.substr(member.rfind('/') + 1);
  for (std::size_t at = base.find(".so"); at != std::string_view::npos; at = base.find(".so", at + 1)) {
    if (at == 0) continue;
    std::string_view rest = base.substr(at + 3);  // what may follow: ".<digits>" parts only
    while (rest.size() > 1 && rest.front() == '.' && std::isdigit(static_cast<unsigned char>(rest[1]))) {
      rest.remove_prefix(1);
      while (!rest.empty() && std::isdigit(static_cast<unsigned char>(rest.front()))) rest.remove_prefix(1);
    }
    if (rest.empty()) return true;
  }
  return false;
}

std::string compiled_file_problem(std::string_view member, std::string_view head, std::string_view platform) {
  const bool elf_magic = head.substr(0, 4) == std::string_view("\x7f" "ELF", 4);
  const bool extension = member.size() > 4 && (member.substr(member.size() - 4) == ".pyd" ||
                                               (member.size() > 6 && member.substr(member.size() - 6) == ".dylib"));
  const bool so_name = is_shared_object_name(member);
  if (!so_name && !elf_magic && !(extension && platform == "any")) return "";
  const std::string name = "'" + printable(member) + "'";
  if (platform == "any")
    return name + " is " + (elf_magic ? "an ELF binary" : "a compiled extension") + " but the wheel's platform is "
           "'any': a pure wheel must not ship binaries; remove it, or build a platform wheel (ffpa-index pack "
           "--tag ...-auto)";
  std::string why;
  const auto want = elf_of_platform(platform, &why);
  if (!want)  // macOS extension modules are .so files too; an ELF file never belongs there
    return elf_magic ? name + " is an ELF binary in a wheel for platform '" + std::string(platform) + "' (" + why + ")"
                     : "";
  const auto id = parse_elf_ident(head);
  if (!id)
    return name + " is named like a shared object but is not an ELF file; a " + std::string(platform) +
           " wheel can only load ELF shared objects: check what the build installed there";
  if (id->elf_class != want->ident.elf_class || id->data != want->ident.data || id->machine != want->ident.machine)
    return name + " is " + describe(*id) + " but the platform tag " + std::string(platform) + " needs " +
           describe(want->ident) + "; build it for " + want->arch + " or tag the wheel for its real architecture";
  return "";
}

WheelCheck verify_wheel(const std::filesystem::path& whl, int fd) {
  WheelCheck r{true, {}, {}, {}};
  auto problem = [&](std::string msg) { r.problems.push_back(std::move(msg)); };
  std::string why;
  auto fn = parse_wheel_filename(whl.filename().string(), &why);
  if (!fn) problem("file name: " + why);
  else if (std::string spelling = wheel_filename_spelling_problem(*fn); !spelling.empty())
    problem("file name: " + spelling);
  if (fn)
    if (std::string tags = tag_set_problem(*fn); !tags.empty()) problem("file name: " + tags);

  std::unique_ptr<ZipReader> zip;
  try {
    zip = fd >= 0 ? std::make_unique<ZipReader>(fd, whl) : std::make_unique<ZipReader>(whl);
  } catch (const std::exception& e) {
    problem(e.what());
    r.ok = false;
    return r;
  }
  const auto& members = zip->members();

  // Each member name is already proven safe and unique by ZipReader; together they
  // must also be distinct files on case-insensitive systems.
  {
    std::vector<std::string> names;
    for (const auto& m : members) names.push_back(m.name);
    for (auto& p : member_set_problems(names)) problem(std::move(p));
  }
  const auto dist_infos = top_dirs_with_suffix(members, ".dist-info");
  if (dist_infos.size() != 1) {
    problem("expected exactly one top-level .dist-info directory, found " + std::to_string(dist_infos.size()));
    r.ok = false;
    return r;
  }
  const std::string di = *dist_infos.begin();
  const std::string di_prefix = di + "/";
  if (fn) {
    const std::string expected = wheel_name_component(fn->name) + "-" + canonical_version(fn->version).value_or(fn->version) + ".dist-info";
    if (di != expected) problem("dist-info directory '" + di + "' does not match the file name (expected '" + expected + "')");
  }
  const std::string data_dir = di.substr(0, di.size() - 10) + ".data";
  for (const auto& d : top_dirs_with_suffix(members, ".data"))
    if (fn && d != data_dir)
      problem("unexpected .data directory '" + d + "'; the only one a wheel may carry is '" + data_dir + "'");
  // Installers map .data/<scheme>/ onto install paths; pip stops half way through
  // an install on any other scheme name.
  for (const auto& m : members) {
    if (m.name.rfind(data_dir + "/", 0) != 0) continue;
    const std::string rest = m.name.substr(data_dir.size() + 1);
    const std::string scheme = rest.substr(0, rest.find('/'));
    if (rest.find('/') == std::string::npos ||
        (scheme != "purelib" && scheme != "platlib" && scheme != "headers" && scheme != "scripts" && scheme != "data"))
      problem("member '" + m.name + "' is not under one of " + data_dir +
              "/{purelib,platlib,headers,scripts,data}/, where installers put .data files");
  }

  // What installing it does: owned paths only, no startup hooks, plain script names.
  {
    std::vector<std::string> names;
    for (const auto& m : members) names.push_back(m.name);
    std::string entry_points;
    if (zip->find(di_prefix + "entry_points.txt")) {
      try {
        entry_points = zip->read(di_prefix + "entry_points.txt", kMaxDistInfoFile);
      } catch (const std::exception& e) {
        problem(e.what());
      }
    }
    const std::string stem = di.substr(0, di.size() - 10);
    const std::size_t dash = stem.find('-');
    if (dash == std::string::npos)
      problem("dist-info directory '" + di + "' is not <name>-<version>.dist-info");
    else
      for (auto& p : install_problems(stem.substr(0, dash), stem.substr(dash + 1), names, entry_points))
        problem(std::move(p));
  }

  // PEP 427 recommends the .dist-info files last so that a streaming installer has
  // everything before it reads RECORD; our engine promises it.
  bool in_tail = false;
  for (const auto& m : members) {
    const bool is_di = m.name.rfind(di_prefix, 0) == 0;
    if (is_di) in_tail = true;
    else if (in_tail) {
      problem("member '" + m.name + "' comes after the .dist-info entries; they must be last");
      break;
    }
  }

  auto read_member = [&](const std::string& name, std::string& out) {
    if (!zip->find(name)) {
      problem("missing " + name);
      return false;
    }
    try {
      out = zip->read(name, kMaxDistInfoFile);
      return true;
    } catch (const std::exception& e) {
      problem(e.what());
      return false;
    }
  };

  std::string wheel_txt, metadata_txt, record_txt;
  if (read_member(di_prefix + "WHEEL", wheel_txt)) {
    std::vector<std::string> wp;
    auto h = parse_headers(wheel_txt, "WHEEL", wp);
    check_wheel_headers(h, wp);
    for (auto& p : wp) problem(std::move(p));
    // pip reads the version as dot-separated integers and refuses anything else
    // ("1.x", "1."); only major version 1 exists.
    const std::string wv = first_header(h, "Wheel-Version");
    if (wv.size() < 3 || wv.compare(0, 2, "1.") != 0 || wv.find_first_not_of("0123456789", 2) != std::string::npos ||
        (wv.size() > 3 && wv[2] == '0'))
      problem("WHEEL: Wheel-Version is '" + printable(wv) + "'; write 'Wheel-Version: 1.0' (1.<minor>, as pip reads it)");
    const std::string* build = header(h, "Build");
    if (fn && (build ? *build : std::string()) != fn->build)
      problem(fn->build.empty() ? "WHEEL: Build '" + printable(*build) + "' but the file name has no build tag; drop "
                                  "the Build line or add the build tag to the file name"
                                : "the file name's build tag '" + fn->build + "' is not WHEEL's Build ('" +
                                      (build ? printable(*build) : std::string()) + "'); write 'Build: " + fn->build +
                                      "' in WHEEL or drop the build tag");
    const std::string purelib = first_header(h, "Root-Is-Purelib");
    if (purelib != "true" && purelib != "false") problem("WHEEL: Root-Is-Purelib must be true or false, got '" + purelib + "'");
    std::set<std::string> tag_lines;
    for (const auto& [k, v] : h)
      if (lower_ascii(k) == "tag") tag_lines.insert(v);
    const auto expanded = fn ? fn->tags() : std::vector<std::string>{};
    if (const std::set<std::string> from_name(expanded.begin(), expanded.end()); fn && tag_lines != from_name)
      problem("WHEEL Tag lines { " + join(tag_lines, " ") + " } do not match the file name's tags { " +
              join(from_name, " ") + " }");
  }
  if (read_member(di_prefix + "METADATA", metadata_txt)) {
    std::vector<std::pair<std::string, std::string>> h;
    for (auto& p : check_core_metadata(metadata_txt, &h)) problem(std::move(p));
    r.metadata = metadata_txt;
    r.metadata_fields = h;
    // PEP 639: each License-File is shipped under .dist-info/licenses/.
    for (const auto& [k, v] : h)
      if (lower_ascii(k) == "license-file" && license_file_problem(v).empty() && !zip->find(di_prefix + "licenses/" + v))
        problem("METADATA: License-File '" + printable(v) + "' is not in the wheel as " + di_prefix + "licenses/" +
                printable(v) + " (PEP 639); ship the file there or drop the field");
    const std::string name = first_header(h, "Name"), version = first_header(h, "Version");
    if (fn) {
      if (!name.empty() && normalize_project_name(name) != normalize_project_name(fn->name))
        problem("METADATA Name '" + name + "' does not match the file name's '" + fn->name + "'");
      if (!version.empty() && parse_pep440(version) && !same_version(version, fn->version))
        problem("METADATA Version '" + version + "' does not match the file name's '" + fn->version + "'");
    }
  }

  // Which ELF machine the platform tags allow; problems with the tags themselves
  // are reported once the members are known to hold binaries.
  const std::vector<std::string> platforms = fn ? split(fn->platform, '.') : std::vector<std::string>{};

  const std::string record_name = di_prefix + "RECORD";
  if (read_member(record_name, record_txt)) {
    if (!is_valid_utf8(record_txt)) problem("RECORD is not valid UTF-8; pip reads it as UTF-8: rebuild the wheel");
    std::map<std::string, std::vector<std::string>> listed;
    for (auto& row : record_rows(record_txt, r.problems)) {
      if (row.size() != 3) {
        problem("RECORD: line with " + std::to_string(row.size()) + " fields, expected 3");
        continue;
      }
      if (!listed.emplace(row[0], row).second) problem("RECORD lists '" + printable(row[0]) + "' twice");
    }
    for (const auto& m : members) {
      if (!m.name.empty() && m.name.back() == '/') continue;  // directory entries carry no RECORD line
      auto it = listed.find(m.name);
      if (it == listed.end()) {
        problem("member '" + m.name + "' is not listed in RECORD");
        continue;
      }
      const auto& row = it->second;
      if (m.name == record_name) {
        if (!row[1].empty() || !row[2].empty()) problem("RECORD's own line must be '" + record_name + ",,'");
        continue;
      }
      if (row[1].rfind("sha256=", 0) != 0) {
        problem("RECORD: '" + m.name + "' has hash '" + row[1] + "', expected sha256=...");
        continue;
      }
      // Streamed: hashed and sized in chunks, its first bytes kept for the ELF check.
      Sha256 sha;
      std::uint64_t size = 0;
      std::string head;
      try {
        zip->read_chunks(m.name, [&](std::string_view piece) {
          sha.update(piece);
          size += piece.size();
          if (head.size() < 64) head.append(piece.substr(0, 64 - head.size()));
        });
      } catch (const std::exception& e) {
        problem(e.what());
        continue;
      }
      for (const auto& plat : platforms)
        if (std::string why = compiled_file_problem(m.name, head, plat); !why.empty()) problem(std::move(why));
      if ("sha256=" + base64_urlsafe_nopad(sha.finish_raw()) != row[1]) problem("RECORD: hash mismatch for '" + m.name + "'");
      if (row[2] != std::to_string(size))
        problem("RECORD: size of '" + m.name + "' is " + std::to_string(size) + ", RECORD says '" + row[2] + "'");
    }
    // A row naming no member (a directory, another spelling of a member) is refused:
    // `pip uninstall` removes what RECORD names, a directory with all it holds.
    for (const auto& [name, row] : listed) {
      if (zip->find(name)) continue;
      std::string why = member_name_problem(name);
      for (const auto& m : members)
        if (why.empty() && m.name.size() > name.size() && m.name.compare(0, name.size(), name) == 0 && m.name[name.size()] == '/')
          why = "is the directory of '" + m.name + "': `pip uninstall` would delete it with all it holds, other "
                "packages' files included; list files only";
      problem("RECORD lists '" + printable(name) + "' which is not in the archive" + (why.empty() ? "" : " and " + why));
    }
  }
  r.ok = r.problems.empty();
  return r;
}

std::string read_wheel_metadata(const std::filesystem::path& whl) {
  ZipReader zip(whl);
  const auto dis = top_dirs_with_suffix(zip.members(), ".dist-info");
  if (dis.size() != 1)
    throw Error("'" + whl.string() + "' has " + std::to_string(dis.size()) +
                " .dist-info directories; a wheel has exactly one");
  return zip.read(*dis.begin() + "/METADATA", kMaxDistInfoFile);
}

}  // namespace ffpa::core
