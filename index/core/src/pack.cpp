// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The wheel writer: the tree walk and what a tree may hold, the METADATA, WHEEL and
// RECORD files, and pack_wheels' one pass over every wheel of a release (the zip
// container and compression are zipwrite.cpp).
#include "ffpa/core/wheel.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <unordered_map>

#include "ffpa/core/elf.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/utf8.h"

#ifndef FFPA_INDEX_VERSION
#error "FFPA_INDEX_VERSION must be defined by the build"
#endif

namespace ffpa::core {
namespace fs = std::filesystem;
namespace {

std::string read_all(const fs::path& p, const char* what) {
  if (auto text = read_file(p)) return *text;
  throw Error(std::string("cannot read ") + what + " '" + p.string() + "': " + std::strerror(errno));
}

Error metadata_error(const std::string& source, const std::vector<std::string>& problems) {
  return Error(problem_list(
      "the METADATA built from " + source + " would not parse for pip and twine; fix those files:", problems));
}

struct TreeFile {
  std::string rel;  // '/'-separated
  fs::path source;  // the file to read (a symlink's in-tree target)
  bool exec;
};

std::vector<TreeFile> walk_tree(const fs::path& tree) {
  std::error_code ec;
  if (!fs::is_directory(tree, ec))
    throw Error("--tree '" + tree.string() + "' is not a directory; point it at the staged install tree (cmake --install --prefix DIR)");
  const fs::path root = fs::canonical(tree);
  std::vector<TreeFile> files;
  // Iterated with error codes: a directory the walk cannot open is named, with
  // the fix, instead of surfacing as a raw filesystem_error.
  auto unreadable = [](const fs::path& dir, const std::error_code& e) {
    return Error("cannot read the directory '" + dir.string() + "' of the staged tree: " + e.message() +
                 "; make it readable (chmod u+rx) or remove it from the tree");
  };
  // A failing increment() is almost always the descent into the entry just
  // visited, so the error names that entry.
  fs::path last = root;
  for (fs::recursive_directory_iterator it(root, ec);; it.increment(ec)) {
    if (ec) throw unreadable(last, ec);
    if (it == fs::recursive_directory_iterator()) break;
    const fs::path abs = it->path();
    last = abs;
    const std::string rel = abs.lexically_relative(root).generic_string();
    // The one rule for installed names (member_name_problem, wheel.h), as verify-wheel
    // applies it: a name some installer or OS reads otherwise never reaches a wheel.
    if (const std::string why = member_name_problem(it->is_directory() && !it->is_symlink() ? rel + "/x" : rel);
        !why.empty())
      throw Error("'" + printable(rel) + "' in the staged tree " + why);
    if (it.depth() == 0 && it->is_directory() && !it->is_symlink()) {
      const std::string top = abs.filename().string();
      if (top.size() > 10 && top.compare(top.size() - 10, 10, ".dist-info") == 0)
        throw Error("the tree already contains '" + top + "'; the engine writes the .dist-info directory itself, "
                    "so remove it from the staged tree");
    }
    fs::path source = abs;
    if (it->is_symlink()) {
      const fs::path target = fs::weakly_canonical(abs, ec);
      const std::string t = target.string(), r = root.string() + "/";
      if (ec || t.compare(0, r.size(), r) != 0)
        throw Error("'" + rel + "' is a symlink to '" + fs::read_symlink(abs).string() +
                    "', outside the tree; copy the file into the tree (wheels cannot hold symlinks)");
      if (fs::is_directory(target))
        throw Error("'" + rel + "' is a symlink to a directory; wheels cannot hold symlinks, stage a real directory instead");
      if (!fs::is_regular_file(target)) throw Error("'" + rel + "' is a dangling or special symlink; remove it from the tree");
      source = target;
    } else if (it->is_directory()) {
      continue;
    } else if (!it->is_regular_file()) {
      throw Error("'" + rel + "' is not a regular file (fifo, socket or device); remove it from the tree");
    }
    const auto perms = fs::status(source).permissions();
    const bool exec = (perms & (fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec)) != fs::perms::none ||
                      is_shared_object_name(rel);
    files.push_back({rel, source, exec});
  }
  if (files.empty())
    throw Error("the tree '" + tree.string() + "' holds no files; stage the package first (cmake --install)");
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.rel);
  if (const auto problems = member_set_problems(names); !problems.empty())
    throw Error(problem_list("the staged tree '" + tree.string() + "' holds names that collide where wheels install:",
                             problems));
  std::sort(files.begin(), files.end(), [](const TreeFile& a, const TreeFile& b) { return a.rel < b.rel; });
  return files;
}

std::int64_t resolve_epoch(const std::optional<std::int64_t>& given) {
  if (given) return *given;
  const char* env = std::getenv("SOURCE_DATE_EPOCH");
  if (!env || !*env)
    throw Error("no timestamp for the wheel entries: pass --source-date-epoch N or set SOURCE_DATE_EPOCH "
                "(e.g. to the commit time: git log -1 --format=%ct), so the wheel is reproducible");
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(env, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0)
    throw Error(std::string("SOURCE_DATE_EPOCH='") + env + "' is not a non-negative integer number of seconds");
  return v;
}

// The README's content type by its extension (core metadata's Description-Content-Type).
std::string readme_content_type(const fs::path& readme) {
  const std::string ext = readme.extension().string();
  if (ext == ".md" || ext == ".markdown") return "text/markdown";
  if (ext == ".rst") return "text/x-rst";
  return "text/plain";
}

// METADATA from the metadata lines and the README (its type from its extension); a
// problem names `source`.
std::string render_metadata(const PackOptions& o, const std::string& canonical_version, const std::string& source) {
  std::string body;
  std::vector<std::string> problems;
  auto headers = parse_headers(o.metadata, "METADATA", problems, &body);
  if (!problems.empty()) throw metadata_error(source, problems);
  if (body.find_first_not_of(" \t\r\n") != std::string::npos)
    throw Error("the metadata file has text after a blank line; pass the long description with --readme instead");
  // The engine writes these itself; the metadata version is the newest any field needs.
  std::string mv = "2.1";
  bool summary = false, requires_python = false;
  for (const auto& [k, v] : headers) {
    const std::string key = lower_ascii(k);
    if (key == "metadata-version" || key == "name" || key == "version" || key == "description" ||
        key == "description-content-type")
      throw Error("the metadata file sets '" + k + "', which the engine writes itself; remove that line "
                  "(name and version come from --name/--version, the description from --readme)");
    const CoreField* field = core_field(k);
    if (!field)
      throw Error("the metadata file has an unknown field '" + k + "'; use a core metadata field name "
                  "(Summary, Requires-Python, Requires-Dist, License, Project-URL, Classifier, ...)");
    if (k != field->name)  // field names as the spec spells them
      throw Error("the metadata file spells '" + k + "' as core metadata does not: write '" + field->name + "'");
    if (k == "Requires" || k == "Provides" || k == "Obsoletes")  // metadata 1.1's, deprecated
      throw Error("the metadata field '" + k + "' is deprecated since 1.2; use '" + k + "-Dist' instead");
    if (std::string(field->since) > mv) mv = field->since;
    if (v.empty()) throw Error("the metadata field '" + k + "' is empty; give it a value or remove the line");
    summary = summary || key == "summary";
    requires_python = requires_python || key == "requires-python";
  }
  if (!summary) throw Error("the metadata file has no 'Summary:' line; add a one-line summary");
  if (!requires_python) throw Error("the metadata file has no 'Requires-Python:' line; add one, e.g. 'Requires-Python: >=3.10'");
  std::string out = "Metadata-Version: " + mv + "\nName: " + o.name + "\nVersion: " + canonical_version + "\n";
  for (const auto& [k, v] : headers) {
    // Continuation lines keep the 8-space indentation core metadata uses.
    std::string value;
    for (char c : v) {
      value += c;
      if (c == '\n') value += "        ";
    }
    out += k + ": " + value + "\n";
  }
  if (!o.readme.empty()) {
    out += "Description-Content-Type: " + readme_content_type(o.readme) + "\n\n" + read_all(o.readme, "README");
    if (out.back() != '\n') out += '\n';
  }
  return out;
}

// One wheel of a pack_wheels() call: its validated inputs and derived names.
struct Prepared {
  const PackOptions* o = nullptr;
  std::int64_t epoch = 0;
  std::string metadata, wheel_file, dist_info;
  std::vector<TreeFile> files;
  std::size_t first_flat = 0;  // index of files[0] in the call's flat file list
  PackResult result;
};

Prepared prepare(const PackOptions& o) {
  Prepared w;
  w.o = &o;
  if (!is_valid_project_name(o.name))
    throw Error("invalid project name '" + o.name + "'; a PEP 508 name uses letters, digits, '.', '_' and '-' "
                "and starts and ends with a letter or digit (e.g. ffpa-attn)");
  std::string why;
  auto version = parse_pep440(o.version, &why);
  if (!version) throw Error("--version: " + why);
  const auto tag_parts = split(o.tag, '-');
  if (tag_parts.size() != 3)
    throw Error("--tag '" + o.tag + "' must be PYTHON-ABI-PLATFORM, e.g. py3-none-any or cp312-cp312-auto");
  w.result.name = WheelFilename{wheel_name_component(o.name), version->canonical, "", tag_parts[0], tag_parts[1],
                                tag_parts[2]};
  // The wheel grammar holds each tag field to letters, digits, '_' and '.' ("auto" too).
  if (!parse_wheel_filename(w.result.name.filename(), &why))
    throw Error("--tag '" + o.tag + "': " + why + "; each tag field may only hold letters, digits, '_' and '.'");
  if (o.out_dir.empty()) throw Error("--out-dir DIR is required");
  w.epoch = resolve_epoch(o.source_date_epoch);
  const std::string source = o.metadata_source + (o.readme.empty() ? "" : " and --readme '" + o.readme.string() + "'");
  w.metadata = render_metadata(o, version->canonical, source);
  // The same parse verify-wheel applies, so pack never writes a METADATA that
  // add or publish would refuse later (a Requires-Python that is not a specifier
  // set, a README that is not UTF-8, ...).
  if (const auto problems = check_core_metadata(w.metadata); !problems.empty()) throw metadata_error(source, problems);
  w.files = walk_tree(o.tree);
  // The install rule verify-wheel applies (install_problems): the tree holds only what
  // the project owns, no startup hook, no script under another program's name.
  {
    std::vector<std::string> names;
    for (const auto& f : w.files) names.push_back(f.rel);
    if (const auto problems = install_problems(o.name, version->canonical, names, ""); !problems.empty())
      throw Error(problem_list("the staged tree '" + o.tree.string() + "' installs what the wheel may not:", problems));
  }
  if (const std::string tags = tag_set_problem(w.result.name); !tags.empty() && w.result.name.platform != "auto")
    throw Error("--tag '" + o.tag + "': " + tags);
  return w;
}

// Platform: computed for "auto", checked for anything else; then every file is held
// to the one compiled-file rule verify-wheel applies to the members. Then the names
// and the WHEEL file that follow from it.
void name_wheel(Prepared& w, const std::vector<std::string_view>& contents) {
  const PackOptions& o = *w.o;
  std::string& platform = w.result.name.platform;
  const bool has_elf = std::any_of(contents.begin(), contents.end(),
                                   [](std::string_view c) { return c.substr(0, 4) == std::string_view("\x7f" "ELF", 4); });
  if (platform == "auto" || (platform != "any" && has_elf)) {
    std::vector<std::string> forbidden = o.forbidden_strings;
    forbidden.push_back(fs::canonical(o.tree).string());
    PlatformDecision d = decide_manylinux(o.tree, forbidden);
    if (!d.problems.empty())
      throw Error(problem_list("the binaries in the tree cannot be shipped as a manylinux wheel:", d.problems));
    if (platform == "auto") {
      platform = d.tag;
    } else if (platform.rfind("manylinux_2_", 0) == 0 && std::atoi(platform.c_str() + 12) < d.glibc_minor) {
      throw Error("--tag claims " + platform + " but the binaries need " + d.tag + " (" + d.reasons.front() +
                  "); use the platform 'auto'");
    }
  }
  for (const auto& part : split(platform, '.'))
    for (size_t i = 0; i < w.files.size(); ++i)
      if (std::string why = compiled_file_problem(w.files[i].rel, contents[i].substr(0, 64), part); !why.empty())
        throw Error("the staged tree '" + o.tree.string() + "': " + why);
  const WheelFilename& wf = w.result.name;
  w.dist_info = wf.name + "-" + wf.version + ".dist-info/";
  const bool purelib = o.root_is_purelib.value_or(wf.abi == "none" && wf.platform == "any");
  w.wheel_file = "Wheel-Version: 1.0\nGenerator: ffpa-index " FFPA_INDEX_VERSION "\nRoot-Is-Purelib: ";
  w.wheel_file += purelib ? "true\n" : "false\n";
  for (const auto& t : wf.tags()) w.wheel_file += "Tag: " + t + "\n";
  w.result.wheel = o.out_dir / wf.filename();
}

}  // namespace

PackResult pack_wheel(const PackOptions& o) { return pack_wheels({o}).front(); }

std::vector<PackResult> pack_wheels(const std::vector<PackOptions>& wheels) {
  if (wheels.empty()) throw Error("no wheel to pack");
  const DeflateOptions dopt = wheels.front().deflate;
  for (const auto& o : wheels)
    if (o.deflate.level != dopt.level || o.deflate.jobs != dopt.jobs)
      throw Error("the wheels of one pack call share the deflate level and jobs");
  std::vector<Prepared> ws;
  ws.reserve(wheels.size());
  for (const auto& o : wheels) ws.push_back(prepare(o));

  // Every tree file of every wheel, read on all threads.
  std::vector<const TreeFile*> flat;
  for (auto& w : ws) {
    w.first_flat = flat.size();
    for (const auto& f : w.files) flat.push_back(&f);
  }
  std::vector<std::string> contents(flat.size());
  parallel_for(flat.size(), dopt.jobs, [&](std::size_t i) { contents[i] = read_all(flat[i]->source, "tree file"); });
  const std::vector<std::string_view> views(contents.begin(), contents.end());

  std::set<fs::path> finals;
  for (auto& w : ws) {
    name_wheel(w, std::vector<std::string_view>(views.begin() + static_cast<std::ptrdiff_t>(w.first_flat),
                                                views.begin() + static_cast<std::ptrdiff_t>(w.first_flat + w.files.size())));
    if (!finals.insert(fs::absolute(w.result.wheel).lexically_normal()).second)
      throw Error("two wheels of this call would both be written to '" + w.result.wheel.string() +
                  "'; give each a different tag or version (or --out-dir)");
  }

  // Distinct contents: a file is the content of an earlier one only if its bytes
  // compare equal (the map compares them; its hash only finds the candidate): a proof
  // rather than a fingerprint. Its sha256, CRC, size and compressed bytes are then
  // those of the first, so N CUDA wheels cost about one.
  std::vector<std::size_t> content_of(flat.size());
  std::vector<std::string_view> distinct;
  {
    std::unordered_map<std::string_view, std::size_t> id_of;
    for (std::size_t f = 0; f < flat.size(); ++f) {
      const auto [it, fresh] = id_of.emplace(views[f], distinct.size());
      if (fresh) distinct.push_back(views[f]);
      content_of[f] = it->second;
    }
  }
  const std::vector<CompressedEntry> compressed = compress_members(distinct, dopt);
  std::vector<std::string> sha(distinct.size());
  parallel_for(distinct.size(), dopt.jobs, [&](std::size_t d) { sha[d] = sha256_raw(distinct[d]); });

  std::vector<std::unique_ptr<AtomicOutput>> outs;
  for (auto& w : ws) {
    create_directories(w.o->out_dir, "pass a writable --out-dir");
    outs.push_back(std::make_unique<AtomicOutput>(w.result.wheel));
  }
  parallel_for(ws.size(), dopt.jobs, [&](std::size_t k) {
    Prepared& w = ws[k];
    ZipLayout layout = w.o->layout;
    layout.epoch = w.epoch;
    ZipWriter zip(*outs[k], layout);
    std::string record;
    for (std::size_t i = 0; i < w.files.size(); ++i) {
      const std::size_t d = content_of[w.first_flat + i];
      zip.add(w.files[i].rel, w.files[i].exec ? 0755u : 0644u, compressed[d]);
      record += csv_line({w.files[i].rel, "sha256=" + base64_urlsafe_nopad(sha[d]), std::to_string(distinct[d].size())});
    }
    record += csv_line({w.dist_info + "METADATA", sha256_record_digest(w.metadata), std::to_string(w.metadata.size())});
    record += csv_line({w.dist_info + "WHEEL", sha256_record_digest(w.wheel_file), std::to_string(w.wheel_file.size())});
    record += csv_line({w.dist_info + "RECORD", "", ""});
    const auto tail = compress_members({w.metadata, w.wheel_file, record}, DeflateOptions{dopt.level, 1});
    zip.add(w.dist_info + "METADATA", 0644u, tail[0]);
    zip.add(w.dist_info + "WHEEL", 0644u, tail[1]);
    zip.add(w.dist_info + "RECORD", 0644u, tail[2]);
    zip.finish();
    w.result.sha256 = zip.sha256_hex();
    w.result.size = zip.size();
    w.result.members = zip.entries();
    w.result.metadata = w.metadata;
  });

  commit_together(outs);  // durable before visible; a failure here removes them all

  std::vector<PackResult> results;
  for (auto& w : ws) results.push_back(std::move(w.result));
  return results;
}

}  // namespace ffpa::core
