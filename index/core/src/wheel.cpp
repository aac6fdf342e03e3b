// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/core/wheel.h"

#include <map>
#include <memory>
#include <set>

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/pep.h"
#include "ffpa/core/zipread.h"

namespace ffpa::core {

std::vector<std::pair<std::string, std::string>> parse_header_lines(std::string_view text, std::string* body) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    size_t next = eol == std::string_view::npos ? text.size() : eol + 1;
    std::string_view line = text.substr(pos, (eol == std::string_view::npos ? text.size() : eol) - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      pos = next;
      if (body) *body = std::string(text.substr(pos));
      return out;
    }
    if ((line.front() == ' ' || line.front() == '\t') && !out.empty()) {
      out.back().second += "\n" + std::string(line);
    } else {
      size_t colon = line.find(':');
      if (colon == std::string_view::npos) {
        out.emplace_back(std::string(line), std::string());
      } else {
        std::string_view value = line.substr(colon + 1);
        while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
        out.emplace_back(std::string(line.substr(0, colon)), std::string(value));
      }
    }
    pos = next;
  }
  if (body) body->clear();
  return out;
}

std::vector<std::vector<std::string>> parse_csv(std::string_view text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        row.push_back(std::move(field));
        rows.push_back(std::move(row));
      }
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    row.push_back(std::move(field));
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

namespace {

// The single top-level directory ending in `suffix`, or "" (problems noted).
std::set<std::string> top_dirs_with_suffix(const std::vector<ZipMember>& members, std::string_view suffix) {
  std::set<std::string> out;
  for (const auto& m : members) {
    size_t slash = m.name.find('/');
    if (slash == std::string::npos) continue;
    std::string top = m.name.substr(0, slash);
    if (top.size() > suffix.size() && top.compare(top.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.insert(top);
  }
  return out;
}

bool unsafe_member_name(const std::string& n) {
  if (n.empty() || n.front() == '/' || n.find('\\') != std::string::npos) return true;
  size_t start = 0;
  for (;;) {
    size_t slash = n.find('/', start);
    std::string_view part = std::string_view(n).substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (part == ".." || part == ".") return true;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return false;
}

std::string first_header(const std::vector<std::pair<std::string, std::string>>& h, std::string_view key) {
  for (const auto& [k, v] : h)
    if (k == key) return v;
  return {};
}

}  // namespace

WheelCheck verify_wheel(const std::filesystem::path& whl) {
  WheelCheck r{true, {}};
  auto problem = [&](std::string msg) { r.problems.push_back(std::move(msg)); };
  std::string why;
  auto fn = parse_wheel_filename(whl.filename().string(), &why);
  if (!fn) problem("file name: " + why);

  std::unique_ptr<ZipReader> zip;
  try {
    zip = std::make_unique<ZipReader>(whl);
  } catch (const std::exception& e) {
    problem(e.what());
    r.ok = false;
    return r;
  }
  const auto& members = zip->members();

  std::set<std::string> seen;
  for (const auto& m : members) {
    if (!seen.insert(m.name).second) problem("member '" + m.name + "' appears more than once");
    if (unsafe_member_name(m.name)) problem("member name '" + m.name + "' is absolute or escapes the archive");
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
    const std::string expected = fn->name + "-" + fn->version + ".dist-info";
    if (di != expected) problem("dist-info directory '" + di + "' does not match the file name (expected '" + expected + "')");
  }
  for (const auto& d : top_dirs_with_suffix(members, ".data"))
    if (fn && d != fn->name + "-" + fn->version + ".data") problem("unexpected .data directory '" + d + "'");

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
      out = zip->read(name);
      return true;
    } catch (const std::exception& e) {
      problem(e.what());
      return false;
    }
  };

  std::string wheel_txt, metadata_txt, record_txt;
  if (read_member(di_prefix + "WHEEL", wheel_txt)) {
    auto h = parse_header_lines(wheel_txt);
    const std::string wv = first_header(h, "Wheel-Version");
    if (wv.rfind("1.", 0) != 0) problem("WHEEL: Wheel-Version is '" + wv + "', expected 1.x");
    const std::string purelib = first_header(h, "Root-Is-Purelib");
    if (purelib != "true" && purelib != "false") problem("WHEEL: Root-Is-Purelib must be true or false, got '" + purelib + "'");
    std::set<std::string> tag_lines;
    for (const auto& [k, v] : h)
      if (k == "Tag") tag_lines.insert(v);
    if (fn) {
      auto expanded = fn->tags();
      std::set<std::string> from_name(expanded.begin(), expanded.end());
      if (tag_lines != from_name) {
        std::string a, b;
        for (const auto& t : from_name) a += " " + t;
        for (const auto& t : tag_lines) b += " " + t;
        problem("WHEEL Tag lines {" + b + " } do not match the file name's tags {" + a + " }");
      }
    }
  }
  if (read_member(di_prefix + "METADATA", metadata_txt)) {
    auto h = parse_header_lines(metadata_txt);
    const std::string name = first_header(h, "Name"), version = first_header(h, "Version");
    if (first_header(h, "Metadata-Version").empty()) problem("METADATA: no Metadata-Version");
    if (!is_valid_project_name(name)) problem("METADATA: Name '" + name + "' is not a valid project name");
    auto v = parse_pep440(version, &why);
    if (!v) problem("METADATA: " + why);
    if (fn) {
      if (normalize_project_name(name) != normalize_project_name(fn->name))
        problem("METADATA Name '" + name + "' does not match the file name's '" + fn->name + "'");
      auto fv = parse_pep440(fn->version);
      if (v && fv && v->canonical != fv->canonical)
        problem("METADATA Version '" + version + "' does not match the file name's '" + fn->version + "'");
    }
  }
  const std::string record_name = di_prefix + "RECORD";
  if (read_member(record_name, record_txt)) {
    std::map<std::string, std::vector<std::string>> listed;
    for (auto& row : parse_csv(record_txt)) {
      if (row.size() != 3) {
        problem("RECORD: line with " + std::to_string(row.size()) + " fields, expected 3");
        continue;
      }
      if (!listed.emplace(row[0], row).second) problem("RECORD lists '" + row[0] + "' twice");
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
      std::string data;
      try {
        data = zip->read(m.name);
      } catch (const std::exception& e) {
        problem(e.what());
        continue;
      }
      if (sha256_record_digest(data) != row[1]) problem("RECORD: hash mismatch for '" + m.name + "'");
      if (row[2] != std::to_string(data.size()))
        problem("RECORD: size of '" + m.name + "' is " + std::to_string(data.size()) + ", RECORD says '" + row[2] + "'");
    }
    for (const auto& [name, row] : listed)
      if (!zip->find(name)) problem("RECORD lists '" + name + "' which is not in the archive");
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
  return zip.read(*dis.begin() + "/METADATA");
}

}  // namespace ffpa::core
