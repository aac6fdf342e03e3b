// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Over 500 lines on purpose: the tree walk, the refusals on what a tree may hold, the
// RECORD/WHEEL/METADATA writers and pack_wheels' one-pass multi-wheel assembly share the
// per-member state; the zip container and compression live in zipwrite/deflate.cpp.
#include "ffpa/core/pack.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <iostream>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/manylinux.h"
#include "ffpa/core/pep.h"
#include "ffpa/core/names.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/wheel.h"

#ifndef FFPA_INDEX_VERSION
#error "FFPA_INDEX_VERSION must be defined by the build"
#endif

namespace ffpa::core {
namespace fs = std::filesystem;
namespace {

std::string read_all(const fs::path& p, const char* what) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(std::string("cannot read ") + what + " '" + p.string() + "': " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  std::string buf;
  buf.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  for (;;) {
    if (done == buf.size()) buf.resize(buf.size() + (1 << 16));  // the file grew or st_size was 0 (procfs)
    ssize_t n = ::read(fd, buf.data() + done, buf.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      throw Error(std::string("read error on ") + what + " '" + p.string() + "'");
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  buf.resize(done);
  return buf;
}

// A tree file's bytes: mapped when large (no copy, no zero-fill of a 160 MB
// buffer), read when small.
class FileBytes {
 public:
  explicit FileBytes(const fs::path& p) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error("cannot read tree file '" + p.string() + "': " + std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    const size_t size = static_cast<size_t>(st.st_size);
    if (size >= (1u << 20)) {
      void* m = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      ::close(fd);
      if (m == MAP_FAILED) throw Error("cannot map tree file '" + p.string() + "': " + std::strerror(errno));
      map_ = m;
      view_ = std::string_view(static_cast<const char*>(m), size);
    } else {
      ::close(fd);
      owned_ = read_all(p, "tree file");
      view_ = owned_;
    }
  }
  ~FileBytes() {
    if (map_) ::munmap(map_, view_.size());
  }
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  std::string_view view() const { return view_; }

 private:
  void* map_ = nullptr;
  std::string owned_;
  std::string_view view_;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 1;
  }
  return out;
}

// Core metadata fields (2.1 to 2.4) a metadata file may carry, with the metadata
// version that introduced each. The engine writes Metadata-Version, Name, Version,
// Description-Content-Type and the body itself.
const std::map<std::string, std::string>& known_fields() {
  static const std::map<std::string, std::string> f = {
      {"Summary", "1.0"},        {"Keywords", "1.0"},         {"Home-page", "1.0"},
      {"Download-URL", "1.1"},   {"Author", "1.0"},           {"Author-email", "1.0"},
      {"Maintainer", "1.2"},     {"Maintainer-email", "1.2"}, {"License", "1.0"},
      {"Classifier", "1.1"},     {"Requires-Dist", "1.2"},    {"Requires-Python", "1.2"},
      {"Requires-External", "1.2"}, {"Project-URL", "1.2"},   {"Provides-Extra", "2.1"},
      {"Provides-Dist", "1.2"},  {"Obsoletes-Dist", "1.2"},   {"Platform", "1.0"},
      {"Supported-Platform", "1.1"}, {"Dynamic", "2.2"},      {"License-Expression", "2.4"},
      {"License-File", "2.4"},
  };
  return f;
}

std::string readme_type_for(const fs::path& readme) {
  const std::string ext = readme.extension().string();
  if (ext == ".md" || ext == ".markdown") return "text/markdown";
  if (ext == ".rst") return "text/x-rst";
  return "text/plain";
}

bool is_executable_name(const std::string& rel) {
  const std::string base = rel.substr(rel.rfind('/') + 1);
  return (base.size() > 3 && base.compare(base.size() - 3, 3, ".so") == 0) || base.find(".so.") != std::string::npos;
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
    // The one rule for installed names (names.h), as verify-wheel applies it: a
    // name some installer or OS reads otherwise never reaches a wheel.
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
                      is_executable_name(rel);
    files.push_back({rel, source, exec});
  }
  if (files.empty())
    throw Error("the tree '" + tree.string() + "' holds no files; stage the package first (cmake --install)");
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.rel);
  if (const auto problems = member_set_problems(names); !problems.empty()) {
    std::string msg = "the staged tree '" + tree.string() + "' holds names that collide where wheels install:";
    for (const auto& p : problems) msg += "\n  - " + p;
    throw Error(msg);
  }
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

// FFPA_INDEX_TIMING=1 prints how long each phase of pack took, to stderr; the
// benchmark uses it to show where the time goes.
class PhaseTimer {
 public:
  PhaseTimer() : on_(std::getenv("FFPA_INDEX_TIMING") != nullptr), last_(std::chrono::steady_clock::now()) {}
  void mark(const char* phase) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    std::cerr << "ffpa-index: " << phase << " "
              << std::chrono::duration<double>(now - last_).count() << " s\n";
    last_ = now;
  }

 private:
  bool on_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace

std::string render_metadata(const std::string& name, const std::string& canonical_version,
                            const std::string& metadata_file_text, const std::string& readme,
                            const std::string& readme_type) {
  std::string body;
  auto headers = parse_header_lines(metadata_file_text, &body);
  if (body.find_first_not_of(" \t\r\n") != std::string::npos)
    throw Error("the metadata file has text after a blank line; pass the long description with --readme instead");
  std::string mv = "2.1";
  bool summary = false, requires_python = false;
  for (const auto& [k, v] : headers) {
    if (k == "Metadata-Version" || k == "Name" || k == "Version" || k == "Description" || k == "Description-Content-Type")
      throw Error("the metadata file sets '" + k + "', which the engine writes itself; remove that line "
                  "(name and version come from --name/--version, the description from --readme)");
    auto it = known_fields().find(k);
    if (it == known_fields().end())
      throw Error("the metadata file has an unknown field '" + k + "'; use a core metadata field name "
                  "(Summary, Requires-Python, Requires-Dist, License, Project-URL, Classifier, ...)");
    if (it->second > mv) mv = it->second;
    if (v.empty()) throw Error("the metadata field '" + k + "' is empty; give it a value or remove the line");
    if (k == "Summary") {
      if (summary) throw Error("the metadata file has more than one Summary line; keep one");
      summary = true;
    }
    if (k == "Requires-Python") requires_python = true;
  }
  if (!summary) throw Error("the metadata file has no 'Summary:' line; add a one-line summary");
  if (!requires_python) throw Error("the metadata file has no 'Requires-Python:' line; add one, e.g. 'Requires-Python: >=3.10'");
  std::string out = "Metadata-Version: " + mv + "\nName: " + name + "\nVersion: " + canonical_version + "\n";
  for (const auto& [k, v] : headers) {
    // Continuation lines keep the 8-space indentation core metadata uses.
    std::string value;
    for (char c : v) {
      value += c;
      if (c == '\n') value += "        ";
    }
    out += k + ": " + value + "\n";
  }
  if (!readme.empty()) {
    out += "Description-Content-Type: " + readme_type + "\n\n" + readme;
    if (out.back() != '\n') out += '\n';
  }
  return out;
}

namespace {

// One wheel of a pack_wheels() call: its validated inputs and derived names.
struct Prepared {
  const PackOptions* o = nullptr;
  std::int64_t epoch = 0;
  std::string canonical_version, metadata, python, abi, platform;
  std::vector<TreeFile> files;
  std::size_t first_flat = 0;  // index of files[0] in the call's flat file list
  std::string filename, dist_info, wheel_file;
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
  w.canonical_version = version->canonical;
  const auto tag_parts = split(o.tag, '-');
  if (tag_parts.size() != 3)
    throw Error("--tag '" + o.tag + "' must be PYTHON-ABI-PLATFORM, e.g. py3-none-any or cp312-cp312-auto");
  for (const auto& t : tag_parts)
    if (t.empty() || t.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != std::string::npos)
      throw Error("--tag '" + o.tag + "': field '" + t + "' may only hold letters, digits, '_' and '.'");
  w.python = tag_parts[0];
  w.abi = tag_parts[1];
  w.platform = tag_parts[2];
  if (o.metadata.empty()) throw Error("--metadata FILE is required (Summary, Requires-Python, Requires-Dist, ... lines)");
  if (o.out_dir.empty()) throw Error("--out-dir DIR is required");
  w.epoch = resolve_epoch(o.source_date_epoch);

  const std::string metadata_text = read_all(o.metadata, "metadata file");
  std::string readme, readme_type = o.readme_type;
  if (!o.readme.empty()) {
    readme = read_all(o.readme, "README");
    if (readme_type.empty()) readme_type = readme_type_for(o.readme);
  }
  w.metadata = render_metadata(o.name, w.canonical_version, metadata_text, readme, readme_type);
  // The same parse verify-wheel applies, so pack never writes a METADATA that
  // add or publish would refuse later (a Requires-Python that is not a specifier
  // set, a README that is not UTF-8, ...).
  if (const auto problems = check_core_metadata(w.metadata); !problems.empty()) {
    std::string msg = "the METADATA built from --metadata '" + o.metadata.string() + "'" +
                      (o.readme.empty() ? std::string() : " and --readme '" + o.readme.string() + "'") +
                      " would not parse for pip and twine; fix those files:";
    for (const auto& p : problems) msg += "\n  - " + p;
    throw Error(msg);
  }
  w.files = walk_tree(o.tree);
  return w;
}

// Platform: computed for "auto", checked for anything else.
void decide_platform(Prepared& w, const std::vector<std::string_view>& contents) {
  const PackOptions& o = *w.o;
  std::map<fs::path, std::string_view> loaded;
  for (size_t i = 0; i < w.files.size(); ++i) loaded.emplace(fs::path(w.files[i].rel), contents[i]);
  PlatformOptions popts;
  popts.forbidden_strings = o.forbidden_strings;
  popts.forbidden_strings.push_back(fs::canonical(o.tree).string());
  popts.loaded = &loaded;
  bool has_elf = false;
  for (const auto& c : contents)
    if (c.compare(0, 4, "\x7f" "ELF") == 0) has_elf = true;
  if (w.platform == "any" && has_elf)
    throw Error("the tree holds ELF binaries but the tag says platform 'any'; a pure wheel must not ship "
                "binaries: remove them or use a platform tag (e.g. cp312-cp312-auto)");
  if (w.platform == "auto" || (w.platform != "any" && has_elf)) {
    PlatformDecision d = decide_manylinux(o.tree, popts);
    if (!d.problems.empty()) {
      std::string msg = "the binaries in the tree cannot be shipped as a manylinux wheel:";
      for (const auto& p : d.problems) msg += "\n  - " + p;
      throw Error(msg);
    }
    w.result.platform_reasons = d.reasons;
    if (w.platform == "auto") {
      w.platform = d.tag;
    } else if (w.platform.rfind("manylinux_2_", 0) == 0) {
      const int claimed = std::atoi(w.platform.c_str() + 12);
      if (claimed < d.glibc_minor)
        throw Error("--tag claims " + w.platform + " but the binaries need " + d.tag + " (" + d.reasons.front() +
                    "); use the platform 'auto'");
    }
  }
  w.result.platform = w.platform;
}

void name_wheel(Prepared& w) {
  const PackOptions& o = *w.o;
  WheelFilename wf{wheel_name_component(o.name), w.canonical_version, "", w.python, w.abi, w.platform};
  w.filename = wf.filename();
  std::string reparse_why;
  if (!parse_wheel_filename(w.filename, &reparse_why)) throw Error("internal: produced an invalid wheel name: " + reparse_why);
  w.dist_info = wf.name + "-" + wf.version + ".dist-info/";
  const bool purelib = o.root_is_purelib.value_or(w.abi == "none" && w.platform == "any");
  w.wheel_file = "Wheel-Version: 1.0\nGenerator: ffpa-index " FFPA_INDEX_VERSION "\nRoot-Is-Purelib: ";
  w.wheel_file += purelib ? "true\n" : "false\n";
  for (const auto& t : wf.tags()) w.wheel_file += "Tag: " + t + "\n";
  w.result.wheel = o.out_dir / w.filename;
}

}  // namespace

PackResult pack_wheel(const PackOptions& o) { return pack_wheels({o}).front(); }

std::vector<PackResult> pack_wheels(const std::vector<PackOptions>& wheels) {
  if (wheels.empty()) throw Error("no wheel to pack");
  const DeflateOptions dopt = wheels.front().deflate;
  for (const auto& o : wheels)
    if (o.deflate.level != dopt.level || o.deflate.jobs != dopt.jobs || o.deflate.cache_dir != dopt.cache_dir)
      throw Error("the wheels of one pack-many call share --level, --jobs and --deflate-cache");
  if (dopt.level < 0 || dopt.level > 9)
    throw Error("deflate level " + std::to_string(dopt.level) + " is out of range; use 0 to 9");
  const unsigned jobs = dopt.jobs ? dopt.jobs : std::max(1u, std::thread::hardware_concurrency());

  PhaseTimer timer;
  std::vector<Prepared> ws;
  ws.reserve(wheels.size());
  for (const auto& o : wheels) ws.push_back(prepare(o));

  // Every tree file of every wheel, mapped on all threads.
  std::vector<const TreeFile*> flat;
  for (auto& w : ws) {
    w.first_flat = flat.size();
    for (const auto& f : w.files) flat.push_back(&f);
  }
  std::vector<std::unique_ptr<FileBytes>> mapped(flat.size());
  parallel_for(flat.size(), jobs, [&](std::size_t i) { mapped[i] = std::make_unique<FileBytes>(flat[i]->source); });
  std::vector<std::string_view> contents;
  for (const auto& m : mapped) contents.push_back(m->view());
  timer.mark("read trees");

  std::set<fs::path> finals;
  for (auto& w : ws) {
    decide_platform(w, std::vector<std::string_view>(contents.begin() + static_cast<std::ptrdiff_t>(w.first_flat),
                                                     contents.begin() + static_cast<std::ptrdiff_t>(w.first_flat + w.files.size())));
    name_wheel(w);
    if (!finals.insert(fs::absolute(w.result.wheel).lexically_normal()).second)
      throw Error("two wheels of this call would both be written to '" + w.result.wheel.string() +
                  "'; give each a different tag or version (or --out-dir)");
  }
  timer.mark("platform");

  // Distinct contents. A file is the same content as an earlier one only if its
  // bytes compare equal (memcmp: cheaper than hashing the copy, and a proof rather
  // than a fingerprint); its sha256, CRC, size and compressed entry are then those
  // of the first. The comparisons with the first file of each size run in parallel.
  constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::vector<std::size_t> first_of_size(flat.size());
  {
    std::map<std::size_t, std::size_t> first;
    for (std::size_t f = 0; f < flat.size(); ++f) first_of_size[f] = first.emplace(contents[f].size(), f).first->second;
  }
  std::vector<char> same(flat.size(), 0);
  parallel_for(flat.size(), jobs, [&](std::size_t f) {
    same[f] = first_of_size[f] != f && contents[f] == contents[first_of_size[f]];
  });
  std::vector<std::size_t> content_of(flat.size());
  std::vector<std::string_view> distinct;
  {
    std::map<std::size_t, std::vector<std::size_t>> by_size;  // size -> distinct ids
    for (std::size_t f = 0; f < flat.size(); ++f) {
      std::size_t d = npos;
      if (same[f]) d = content_of[first_of_size[f]];
      else if (first_of_size[f] != f)
        for (std::size_t cand : by_size[contents[f].size()])
          if (distinct[cand] == contents[f]) {
            d = cand;
            break;
          }
      if (d == npos) {
        d = distinct.size();
        distinct.push_back(contents[f]);
        by_size[contents[f].size()].push_back(d);
      }
      content_of[f] = d;
    }
  }
  timer.mark("compare copies");

  // Large distinct contents are looked up in the --deflate-cache by a content key
  // hashed on all threads; a hit brings the raw entry and the member's sha256.
  DeflateStats stats;
  const std::size_t nd = distinct.size();
  std::vector<CompressedEntry> cached(nd);
  std::vector<std::string> keys(nd);
  std::vector<std::size_t> pending_index(nd, npos);
  std::vector<std::string_view> todo;
  std::vector<std::size_t> todo_index;
  for (std::size_t d = 0; d < nd; ++d) {
    bool hit = false;
    if (!dopt.cache_dir.empty() && distinct[d].size() >= kCacheThreshold) {
      keys[d] = content_key(distinct[d], jobs);
      hit = cache_lookup(dopt, keys[d], distinct[d].size(), cached[d]);
      ++(hit ? stats.cache_hits : stats.cache_misses);
    }
    if (!hit) {
      pending_index[d] = todo.size();
      todo.push_back(distinct[d]);
      todo_index.push_back(d);
    }
  }
  timer.mark("cache lookup");

  // The RECORD hashes of the rest (one sequential sha256 per distinct member) run
  // beside compression and the writing of the wheels; only RECORD waits for them.
  std::vector<std::string> sha(nd);
  for (std::size_t d = 0; d < nd; ++d)
    if (pending_index[d] == npos) sha[d] = cached[d].sha256_raw;
  std::shared_future<void> hashed = std::async(std::launch::async, [&]() {
    parallel_for(todo_index.size(), jobs, [&](std::size_t k) { sha[todo_index[k]] = sha256_raw(distinct[todo_index[k]]); });
  }).share();
  struct WaitOnExit {
    std::shared_future<void>& f;
    ~WaitOnExit() {
      if (f.valid()) f.wait();
    }
  } wait_hashed{hashed};

  std::vector<std::unique_ptr<AtomicOutput>> outs;
  for (auto& w : ws) {
    std::error_code ec;
    fs::create_directories(w.o->out_dir, ec);
    if (ec) throw Error("cannot create --out-dir '" + w.o->out_dir.string() + "': " + ec.message());
    outs.push_back(std::make_unique<AtomicOutput>(w.result.wheel));
  }

  {
    // Compression runs on its pool; one writer per wheel streams the wheel's
    // entries in order as their pieces become ready; this thread streams the new
    // cache entries. Pieces stay in memory until everyone is done with them.
    PendingEntries pending(todo, dopt, &stats);
    std::vector<std::exception_ptr> failed(ws.size());
    std::vector<std::thread> writers;
    for (std::size_t k = 0; k < ws.size(); ++k) {
      writers.emplace_back([&, k]() {
        try {
          Prepared& w = ws[k];
          ZipLayout layout = w.o->layout;
          layout.epoch = w.epoch;
          ZipWriter zip(*outs[k], layout);
          for (std::size_t i = 0; i < w.files.size(); ++i) {
            const std::size_t d = content_of[w.first_flat + i];
            const std::uint32_t mode = w.files[i].exec ? 0755u : 0644u;
            if (pending_index[d] == npos) zip.add(w.files[i].rel, mode, cached[d]);
            else zip.add_pending(w.files[i].rel, mode, pending, pending_index[d]);
          }
          hashed.get();
          std::string record;
          for (std::size_t i = 0; i < w.files.size(); ++i) {
            const std::size_t d = content_of[w.first_flat + i];
            record += csv_line({w.files[i].rel, "sha256=" + base64_urlsafe_nopad(sha[d]), std::to_string(distinct[d].size())});
          }
          record += csv_line({w.dist_info + "METADATA", sha256_record_digest(w.metadata), std::to_string(w.metadata.size())});
          record += csv_line({w.dist_info + "WHEEL", sha256_record_digest(w.wheel_file), std::to_string(w.wheel_file.size())});
          record += csv_line({w.dist_info + "RECORD", "", ""});
          DeflateOptions tail_opts = dopt;
          tail_opts.jobs = 1;
          const auto tail = compress_members({w.metadata, w.wheel_file, record}, tail_opts);
          zip.add(w.dist_info + "METADATA", 0644u, tail[0]);
          zip.add(w.dist_info + "WHEEL", 0644u, tail[1]);
          zip.add(w.dist_info + "RECORD", 0644u, tail[2]);
          zip.finish();
        } catch (...) {
          failed[k] = std::current_exception();
        }
      });
    }
    std::exception_ptr cache_failed;
    try {
      for (std::size_t k = 0; k < todo_index.size(); ++k) {
        const std::size_t d = todo_index[k];
        if (keys[d].empty()) continue;
        cache_store_pending(dopt, keys[d], pending, k, [&, d]() {
          hashed.get();  // rethrows a hashing failure
          return sha[d];
        });
      }
    } catch (...) {
      cache_failed = std::current_exception();
    }
    for (auto& t : writers) t.join();
    timer.mark("compress + write wheels and cache");
    for (const auto& e : failed)
      if (e) std::rethrow_exception(e);
    if (cache_failed) std::rethrow_exception(cache_failed);
  }

  // Durable before visible: every wheel is fsynced (their writeback started while
  // they were written) before the first rename; a failure here removes them all.
  for (auto& out : outs) out->sync();
  timer.mark("sync");
  std::set<fs::path> dirs;
  for (auto& out : outs) {
    out->publish(false);
    dirs.insert(out->final_path().parent_path());
  }
  for (const auto& dir : dirs) fsync_directory(dir);
  timer.mark("publish");

  std::vector<PackResult> results;
  for (auto& w : ws) {
    w.result.stats = stats;
    results.push_back(std::move(w.result));
  }
  return results;
}

}  // namespace ffpa::core
