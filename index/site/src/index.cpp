// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// One channel's whole lifecycle (load and check every page, plan every byte of a
// mutation, write it under the lock, verify what pip reads) in one file, so that
// every writer goes through the same read-plan-write path.
#include "ffpa/site/index.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sstream>
#include <utility>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/wheel.h"
#include "ffpa/site/publish.h"

namespace ffpa::site {

using core::Error;

namespace {
std::atomic<std::uint64_t> g_hashed{0};

// A file of the channel the engine did not write, or a page it cannot read, named
// as git would show it (relative to the site root).
std::string foreign(const IndexLocation& loc, const std::string& rel) {
  return loc.channel_label() + "/" + rel + " is not a page ffpa-index writes; " + loc.channel_label() +
         " holds only its index pages: move it out of the channel (or delete it), then re-run";
}

Error channel_error(const IndexLocation& loc, const std::vector<std::string>& problems, const char* verb) {
  return Error(core::problem_list(
      "refusing to " + std::string(verb) + " in " + loc.channel_label() + ", nothing was written:", problems));
}

// The file a temp name of write_file_atomic ("." + final name + ".tmp." + 6 mkstemp
// characters) is written for, or "" when `name` is not one.
std::string temp_target(const std::string& name) {
  const std::size_t n = name.size();
  if (n < 1 + 5 + 6 || name[0] != '.' || name.compare(n - 11, 5, ".tmp.") != 0 ||
      !std::all_of(name.end() - 6, name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }))
    return "";
  return name.substr(1, n - 12);
}

// The longest wheel file name publishing can store: the engine writes
// "<wheel>.metadata" beside each wheel through a temp file
// ".<wheel>.metadata.tmp.XXXXXX", and that name must fit NAME_MAX (255 bytes).
inline constexpr std::size_t kMaxWheelFilename = 255 - 21;

// Whether a file name is such a marker (or a temp file of a .metadata write).
bool is_metadata_temp(const std::string& name) {
  const std::string target = temp_target(name);
  return target.size() > 13 && target.compare(target.size() - 13, 13, ".whl.metadata") == 0;
}

// What an add --metadata-dir that was killed left in `dir`: each marker (or temp
// file) of a .metadata write, and the .metadata file it wrote when no page advertises
// those bytes. Files of other writers are left alone: a .metadata file goes only
// when its bytes are exactly the marker's.
std::vector<fs::path> metadata_leftovers(const fs::path& dir, const std::map<std::string, std::string>& listed) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_metadata_temp(name) || !it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    const std::string final_name = temp_target(name);
    const std::string wheel = final_name.substr(0, final_name.size() - 9);  // ".metadata"
    const auto marker = core::read_file(it->path()), written = core::read_file(dir / final_name);
    const auto l = listed.find(wheel);
    const bool advertised = l != listed.end() && marker && l->second == core::sha256_hex(*marker);
    if (marker && written && *marker == *written && !advertised) out.push_back(dir / final_name);
    out.push_back(it->path());
  }
  return out;
}

// Serialises the pages and the root into `plan`; a value the JSON cannot hold
// surfaces here, before anything is written.
void plan_pages(const IndexLocation& loc, const std::map<std::string, ProjectPage>& all,
                const std::set<std::string>& changed, IndexPlan& plan) {
  try {
    for (const auto& name : changed) {
      const ProjectPage& p = all.at(name);
      const fs::path dir = loc.project_dir(p.name);
      plan.writes.emplace_back(dir / "index.json", to_json(p).dump(1) + "\n");
      plan.writes.emplace_back(dir / "index.html", render_project_html(p));
    }
    std::vector<std::string> projects;
    for (const auto& [name, page] : all) projects.push_back(name);
    plan.writes.emplace_back(loc.channel_dir() / "index.html", render_root_html(projects));
    plan.writes.emplace_back(loc.channel_dir() / "index.json", root_json(projects));
  } catch (const nlohmann::json::exception& e) {
    throw Error("cannot write the index of " + loc.channel_label() + " (" + e.what() +
                "); nothing was written: a value is not valid UTF-8, fix the input that carries it");
  }
}

// Throws, naming each place and its fix, when a directory the plan writes to cannot
// be written, or a path in the site breaks site_path_problem (plan_add runs it; so do
// remove, yank, unyank and render).
void check_writable(const IndexLocation& loc, const IndexPlan& plan) {
  std::set<fs::path> dirs;
  std::set<std::string> problem_set;
  for (const auto& [path, data] : plan.writes) {
    dirs.insert(path.parent_path());
    if (std::string why = site_path_problem(loc.root, path); !why.empty()) problem_set.insert(why);
  }
  if (!problem_set.empty())
    throw Error(core::problem_list("the index would be written outside the site's plain directories, nothing was "
                                   "written:", std::vector<std::string>(problem_set.begin(), problem_set.end())));
  std::vector<std::string> problems;
  for (const auto& d : dirs)
    if (std::string why = unwritable_dir_problem(d); !why.empty()) problems.push_back(why);
  if (!problems.empty())
    throw Error(core::problem_list("cannot write the index, nothing was written:", problems));
}

// Writes only the files whose content differs; returns how many it wrote. All or
// nothing: on a failure (disk full, a file-size limit, a directory that turned
// read-only) every file it wrote is restored or removed, with the directories it
// created, and the error is rethrown. A .metadata file new to the served directory
// carries a marker (".<wheel>.metadata.tmp.XXXXXX") until the pages are written, so
// that a killed run's leftovers are found and removed by the next add there.
std::size_t apply_plan(const IndexPlan& plan) {
  std::vector<std::pair<fs::path, std::optional<std::string>>> undo;  // each write: what was there (nullopt: nothing)
  std::vector<fs::path> markers, made_dirs;
  std::size_t n = 0, i = 0;
  try {
    for (const auto& p : plan.removals) ::unlink(p.c_str());
    for (const auto& [path, data] : plan.writes) {
      if (i == plan.metadata_writes && plan.metadata_writes > 0) kill_point("add-metadata");
      const bool metadata = i++ < plan.metadata_writes;
      auto cur = core::read_file(path);
      if (cur && *cur == data) continue;
      for (fs::path d = path.parent_path(); !d.empty() && !fs::exists(d); d = d.parent_path()) made_dirs.push_back(d);
      core::create_directories(path.parent_path(), "fix its permissions, then re-run");
      core::AtomicOutput out(path);
      out.write(data);
      if (metadata && !cur) {
        if (out.commit_keeping_marker()) markers.push_back(out.temp_path());
      } else {
        out.commit();
      }
      undo.emplace_back(path, cur);  // a write that failed changed nothing (temp + rename)
      ++n;
    }
  } catch (...) {
    // Back to what was there: the pages first (they may advertise a .metadata file).
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      try {
        if (it->second) core::write_file_atomic(it->first, *it->second);
        else ::unlink(it->first.c_str());
      } catch (const std::exception&) {
      }
    }
    for (const auto& m : markers) ::unlink(m.c_str());
    // Deepest first, each only when empty.
    std::sort(made_dirs.begin(), made_dirs.end(), [](const fs::path& a, const fs::path& b) { return a.string() > b.string(); });
    for (const auto& d : made_dirs) ::rmdir(d.c_str());
    throw;
  }
  for (const auto& m : markers) ::unlink(m.c_str());
  return n;
}

// Writes the pages `changed` (and the root) of a channel read whole: every byte planned
// and the directories checked before the first write.
void write_pages(const IndexLocation& loc, const std::map<std::string, ProjectPage>& pages,
                 const std::set<std::string>& changed, const SiteLock& lock) {
  IndexPlan plan;
  plan_pages(loc, pages, changed, plan);
  check_writable(loc, plan);
  remove_stale_temps(loc, lock);
  apply_plan(plan);
}

// Fetches one URL into `dir`; nullopt (and the reason in `why`) when it fails.
std::optional<fs::path> fetch_url(const std::string& url, const fs::path& dir, const std::string& name,
                                  std::string* why = nullptr) {
  const fs::path dst = dir / name;
  auto r = run_process({tool_program("FFPA_CURL", "curl"), "-fsSL", "-o", dst.string(), url});
  if (r.status != 0) {
    if (why) *why = r.err.empty() ? "curl exit " + std::to_string(r.status) : r.err.substr(0, r.err.find('\n'));
    return std::nullopt;
  }
  return dst;
}

}  // namespace

std::string IndexLocation::channel_label() const { return (fs::path(prefix) / channel).generic_string(); }

void check_index_path(const std::string& value, const char* flag) {
  // Each part a plain name: "..", an absolute path or an empty part would put the
  // index (and its writes) outside the site.
  bool ok = !value.empty() && value.front() != '/';
  for (const auto& part : fs::path(value)) {
    const std::string s = part.string();
    ok = ok && !s.empty() && s.front() != '.' &&
         s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == std::string::npos;
  }
  if (!ok)
    throw Error(std::string(flag) + " '" + core::printable(value) +
                "' is not a relative path of plain names inside the site (letters, digits, '.', '_', '-', none "
                "starting with '.': .git and other dot-directories are not served); pass e.g. whl (prefix) or cu13 "
                "(channel)");
  // One name, not a path: the index lies at the fixed depth <prefix>/<channel>/<project>/,
  // so no channel can lie inside another. A channel cu13/x would be a directory where
  // cu13 keeps its project pages, and a prefix whl/cu13 would put whole channels there:
  // cu13 could then never be read (add, render, yank, publish refuse it) again.
  if (value.find('/') != std::string::npos)
    throw Error(std::string(flag) + " '" + core::printable(value) +
                "' has several parts; the index prefix and the channel are one directory name each (the index is "
                "<prefix>/<channel>/<project>/, so no channel lies inside another, where it would lock that channel "
                "out); pass one name, e.g. whl (prefix) or cu13 (channel)");
}

// --- the site lock -------------------------------------------------------------------

std::string channel_platform_problem(const core::WheelFilename& w, const std::string& channel) {
  // A cu<N> channel serves CPython 3 on Linux x86_64 (the release's build machines,
  // docs/release.md): what pip on any other platform or interpreter could never install
  // from it, or would install wrongly, is not filed there.
  const auto all = [](const std::string& set, auto ok) {
    const auto parts = core::split(set, '.');
    return std::all_of(parts.begin(), parts.end(), ok);
  };
  const auto py3 = [](const std::string& t) {
    return t == "py3" || ((t.starts_with("cp3") || t.starts_with("py3")) && t.size() > 3 &&
                          t.find_first_not_of("0123456789", 3) == std::string::npos);
  };
  const auto abi = [](const std::string& t) {
    return t == "none" || t == "abi3" ||
           (t.starts_with("cp3") && t.size() > 3 && t.find_first_not_of("0123456789", 3) >= t.size() - 1 &&
            (std::isdigit(static_cast<unsigned char>(t.back())) || t.back() == 't'));
  };
  const auto linux_x86_64 = [](const std::string& t) {
    return t == "any" || (t.ends_with("_x86_64") && (t.starts_with("manylinux") || t == "linux_x86_64"));
  };
  std::string what;
  if (!all(w.python, py3)) what = "python tag '" + w.python + "' (the channel serves CPython 3: py3, cp3N)";
  else if (!all(w.abi, abi)) what = "ABI tag '" + w.abi + "' (the channel serves none, abi3, cp3N)";
  else if (!all(w.platform, linux_x86_64))
    what = "platform tag '" + w.platform + "' (the channel serves Linux x86_64: manylinux_*_x86_64, or any)";
  if (what.empty()) return "";
  return w.filename() + " does not belong in the " + channel + " channel: its " + what +
         "; build it for the channel's platform, or publish it elsewhere";
}

std::string site_path_problem(const fs::path& root, const fs::path& path) {
  const fs::path rel = path.lexically_normal().lexically_relative(root.lexically_normal());
  if (rel.empty() || *rel.begin() == ".." || rel.is_absolute()) return "";  // not in the site
  const std::vector<fs::path> parts(rel.begin(), rel.end());
  fs::path at = root;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string part = parts[i].string();
    at /= parts[i];
    if (i + 1 < parts.size() && !part.empty() && part.front() == '.')
      return "'" + core::printable(rel.generic_string()) + "' lies in the dot-directory '" + core::printable(part) +
             "' (.git is git's own, others are hidden from the served site); the index goes into plain directories: "
             "pass another --index-prefix or --channel";
    struct stat st {};
    if (::lstat(at.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      std::error_code ec;
      return "'" + core::printable(at.lexically_relative(root).generic_string()) + "' is a symlink (to '" +
             core::printable(fs::read_symlink(at, ec).string()) + "'): the index would be written where it points, "
             "outside what the site checkout tracks; replace it with a real directory of the checkout";
    }
  }
  return "";
}

fs::path engine_dir(const fs::path& root) {
  const fs::path dotgit = root / ".git";
  std::error_code ec;
  if (fs::is_directory(dotgit, ec)) return dotgit;
  if (fs::is_regular_file(dotgit, ec)) {
    // A linked worktree or a submodule: ".git" is a file saying "gitdir: <path>".
    if (auto text = core::read_file(dotgit); text && text->rfind("gitdir: ", 0) == 0) {
      const fs::path gd(core::trim(std::string_view(*text).substr(8), "\r\n"));
      return gd.is_absolute() ? gd : root / gd;
    }
  }
  return root;
}

SiteLock::SiteLock(const fs::path& root, bool create_root) {
  std::error_code ec;
  if (create_root) fs::create_directories(root, ec);
  fd_ = ::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0)
    throw Error("the site root " + root.string() + (create_root ? " cannot be created" : " does not exist") + " (" +
                std::strerror(errno) + "); pass the site's directory");
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const std::string why = std::strerror(errno);
    ::close(fd_);
    throw Error("cannot lock the site " + root.string() + " (" + why +
                "); ffpa-index needs a local file system that supports flock");
  }
}

SiteLock::~SiteLock() {
  if (fd_ >= 0) ::close(fd_);
}

// --- inputs ------------------------------------------------------------------------

std::uint64_t files_hashed() { return g_hashed.load(); }

std::string hash_file(const fs::path& p) {
  ++g_hashed;
  return core::sha256_hex_file(p);
}

PreparedWheel prepare_wheel(const fs::path& p) {
  PreparedWheel w;
  w.path = p;
  const std::string fn = p.filename().string();
  std::string why;
  auto wf = core::parse_wheel_filename(fn, &why);
  if (!wf)
    throw Error("'" + core::printable(fn) + "' is not a valid wheel file name (" + why +
                "); only files named {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl "
                "as PEP 427 defines are published; rename or rebuild it");
  w.name = *wf;
  auto v = core::parse_pep440(wf->version, &why);
  if (!v) throw Error("'" + fn + "': version '" + wf->version + "' is not PEP 440 (" + why + ")");
  w.version = *v;
  // One version, one spelling (PEP 427/625): were 01.0.0, v1.0.0 or FFPA_Attn accepted
  // beside 1.0.0, the index would list several files for one version and pip would
  // pick whichever it ranks first. Checked before anything else is read.
  if (const std::string spelling = core::wheel_filename_spelling_problem(*wf); !spelling.empty())
    throw Error("refusing " + spelling);
  if (fn.size() > kMaxWheelFilename)
    throw Error("'" + fn + "' is " + std::to_string(fn.size()) + " characters long; publishing writes '" +
                "<wheel>.metadata' beside it through a temp file 21 characters longer than the wheel's name, "
                "and file names stop at 255 bytes: shorten the name to at most " +
                std::to_string(kMaxWheelFilename) + " characters (build tag, platform tags)");
  std::error_code ec;
  if (!fs::is_regular_file(p, ec))
    throw Error("'" + p.string() + "' does not exist or is not a file; build the wheels first");
  // One read of the file, into a copy nobody else can change: what is verified is
  // what is hashed, measured, read for METADATA and uploaded, even if the path is
  // swapped or the file rewritten meanwhile.
  w.bytes = std::make_shared<const PrivateCopy>(p);
  ++g_hashed;
  const auto check = core::verify_wheel(p, w.bytes->fd());
  if (!check.ok)
    throw Error(core::problem_list("'" + fn + "' does not verify:", check.problems) +
                "\nrebuild the wheel (a wheel that does not verify against its RECORD and metadata is never "
                "published as is)");
  w.size = w.bytes->size();
  w.sha256 = w.bytes->sha256();
  w.metadata = check.metadata;
  w.derive(check.metadata_fields);
  return w;
}

void PreparedWheel::derive(std::vector<std::pair<std::string, std::string>> metadata_fields) {
  project = core::normalize_project_name(name.name);
  metadata_sha256 = core::sha256_hex(metadata);
  for (const auto& [k, val] : metadata_fields)
    if (core::lower_ascii(k) == "requires-python") requires_python = val;
}

PreparedWheel packed_wheel(const core::PackResult& r) {
  PreparedWheel w;
  w.path = r.wheel;
  w.name = r.name;
  w.version = *core::parse_pep440(r.name.version);  // pack wrote it canonically
  w.sha256 = r.sha256;
  w.size = r.size;
  w.metadata = r.metadata;
  std::vector<std::string> none;  // pack wrote only METADATA check_core_metadata accepts
  w.derive(core::parse_headers(r.metadata, "METADATA", none));
  return w;
}

PrivateCopy::PrivateCopy(const fs::path& src) {
  const core::InputFile in(src);  // read through one descriptor, however the path changes
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp && *tmp ? tmp : "/tmp";
  fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {  // a file system without O_TMPFILE: a named file, unlinked at once
    std::string templ = dir + "/.ffpa-wheel.XXXXXX";
    fd_ = ::mkostemp(templ.data(), O_CLOEXEC);
    if (fd_ >= 0) ::unlink(templ.c_str());
  }
  if (fd_ < 0)
    throw Error("cannot create a private copy of '" + src.string() + "' under " + dir + ": " + std::strerror(errno) +
                "; point TMPDIR at a writable directory");
  core::Sha256 sha;
  try {
    while (size_ < in.size()) {
      const std::string piece = in.read(size_, std::min<std::uint64_t>(in.size() - size_, 1 << 20));
      core::write_all(fd_, piece, "a private copy of '" + src.string() + "' under " + dir);
      sha.update(piece);
      size_ += piece.size();
    }
  } catch (...) {
    ::close(fd_);  // the destructor does not run for a constructor that throws
    throw;
  }
  sha256_ = core::to_hex(sha.finish_raw());
}

PrivateCopy::~PrivateCopy() {
  if (fd_ >= 0) ::close(fd_);
}

void PrivateCopy::write_to(const fs::path& dst) const {
  core::AtomicOutput out(dst);
  for (off_t off = 0; static_cast<std::uint64_t>(off) < size_;) {
    const ssize_t n = ::sendfile(out.fd(), fd_, &off, size_ - static_cast<std::uint64_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot write " + dst.string() + ": " + core::write_error_text(n < 0 ? errno : EIO));
  }
  out.commit();
}

std::string expand_release_url(const std::string& url, const std::string& tag) {
  std::string out = url;
  const auto at = out.find("{tag}");
  if (at != std::string::npos) out.replace(at, 5, url_encode_segment(tag));
  return normalize_release_url(out);
}

std::string normalize_release_url(const std::string& url) {
  return url.empty() || url.back() == '/' ? url : url + '/';
}

std::string derive_file_url(const std::string& release_url, const FileEntry& file) {
  return expand_release_url(release_url, "v" + file.canonical_version) + url_encode_segment(file.filename);
}

std::vector<std::string> page_url_problems(const ProjectPage& page, const std::string& rel) {
  std::vector<std::string> out;
  if (page.files.empty()) return out;
  if (page.release_url.empty()) {
    out.push_back(rel + " records no release URL (a legacy or hand-written page), so the engine cannot tell where "
                  "its files belong; record it with ffpa-index render --release-url URL (the URL the files are "
                  "served from; \"{tag}\" stands for v<version>)");
    return out;
  }
  for (const auto& f : page.files) {
    const std::string want = derive_file_url(page.release_url, f);
    if (f.url != want)
      out.push_back(rel + ": the url of '" + f.filename + "' is '" + core::printable(f.url) +
                    "', not the '" + want + "' the engine derives from the page's release URL '" + page.release_url +
                    "' and the file name; pip would fetch whatever that URL serves (another host, file, query or "
                    "fragment): restore the entry from git history (or point every file at one release URL with "
                    "ffpa-index render --release-url URL)");
  }
  return out;
}

// --- reading the channel -----------------------------------------------------------

ProjectPage load_project(const IndexLocation& loc, const std::string& normalized) {
  const fs::path dir = loc.project_dir(normalized);
  const std::string json_rel = loc.channel_label() + "/" + normalized + "/index.json";
  const std::string html_rel = loc.channel_label() + "/" + normalized + "/index.html";
  auto of_project = [&](const std::string& fn) {
    auto wf = core::parse_wheel_filename(fn);
    return wf && core::normalize_project_name(wf->name) == normalized;
  };
  if (auto j = core::read_file(dir / "index.json")) {
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(*j);
    } catch (const nlohmann::json::exception& e) {
      throw Error(json_rel + " does not parse (" + e.what() + "); restore it from the site repository's history");
    }
    auto page = project_from_json(parsed, json_rel);
    if (page.name != normalized)
      throw Error(json_rel + " names project '" + page.name + "', expected '" + normalized +
                  "'; it is not this directory's page: move it out of the channel");
    for (const auto& f : page.files)
      if (f.project != normalized)
        throw Error(json_rel + " lists '" + f.filename + "', a file of another project; remove that entry");
    return page;
  }
  ProjectPage page;
  page.name = normalized;
  if (auto html = core::read_file(dir / "index.html")) {
    // One-time import of a page written by the old scripts: the only time HTML is read.
    // What pip would follow is checked here, because the page becomes the JSON truth.
    for (const auto& a : parse_anchors(*html)) {
      std::string fn = a.text;
      if (!core::parse_wheel_filename(fn)) {
        const auto slash = a.href.rfind('/');
        fn = url_decode(slash == std::string::npos ? a.href : a.href.substr(slash + 1));
      }
      if (!core::parse_wheel_filename(fn))
        throw Error(html_rel + ": legacy anchor '" + core::printable(a.text) +
                    "' is not a wheel file name; fix or delete that line, then re-run");
      if (!of_project(fn))
        throw Error(html_rel + ": legacy anchor '" + fn + "' is a file of another project; delete that line");
      const auto refuse = [&](const std::string& what) {
        return Error(html_rel + ": legacy anchor for '" + fn + "' has " + what + ", then re-run");
      };
      if (const std::string why = url_problem(a.href, false); !why.empty())
        throw refuse("href '" + core::printable(a.href) + "', refused: " + why + "; fix or delete that line");
      if (a.sha256.empty()) throw refuse("no #sha256= fragment; add it (sha256sum the asset)");
      const std::string sha = core::lower_ascii(a.sha256);
      if (!core::is_sha256_hex(sha))
        throw refuse("#sha256=" + core::printable(a.sha256) +
                     ", which is not 64 hex digits, refused; put the asset's sha256sum there");
      if (!core::is_valid_utf8(a.requires_python) || (a.yanked && !core::is_valid_utf8(*a.yanked)))
        throw refuse("an attribute that is not valid UTF-8; fix that line");
      if (std::string why; !a.requires_python.empty() && !core::is_valid_specifier_set(a.requires_python, &why))
        throw refuse("data-requires-python '" + core::printable(a.requires_python) + "', refused: " + why +
                     "; fix or delete that attribute");
      if (page.find(fn)) continue;
      FileEntry e;
      e.filename = fn;
      e.url = a.href;
      e.sha256 = sha;
      e.requires_python = a.requires_python;
      e.yanked = a.yanked;
      // The legacy page's metadata claims cannot be checked here; pip would fail on a
      // wrong one, so they are dropped rather than carried over.
      page.insert(std::move(e));
    }
    if (page.files.empty())
      throw Error(html_rel + " has no index.json beside it and lists no wheel of " + normalized +
                  ": it is not a project page ffpa-index can import; move it out of the channel");
    page.refresh_versions();
  }
  return page;
}

bool is_engine_temp(const std::string& name) {
  const std::string target = temp_target(name);
  return target == "index.json" || target == "index.html";
}

// The whole channel, read and checked: every project page, and the problems that
// make a writer refuse (anything in the channel the engine did not write, a page
// that does not load). Stale engine temp files are listed apart: they are removed,
// not refused.
struct ChannelState {
  std::map<std::string, ProjectPage> pages;
  std::vector<std::string> problems;
  std::vector<fs::path> stale_temps;
};
// `release_url`: taken as the release URL of pages that record none (add, render
// --release-url); their files must then derive from it. Without it such a page is a
// problem, as is any page whose files do not derive from its own release URL.
static ChannelState read_channel(const IndexLocation& loc,
                                 const std::optional<std::string>& release_url = std::nullopt) {
  ChannelState st;
  const fs::path cdir = loc.channel_dir();
  std::error_code ec;
  if (!fs::exists(cdir, ec)) return st;
  if (!fs::is_directory(cdir, ec)) {
    st.problems.push_back(loc.channel_label() + " is not a directory; move that file away");
    return st;
  }
  // The entries of a directory of the channel, sorted; none (a problem) when it cannot be listed.
  auto list = [&](const fs::path& dir, const std::string& shown) {
    std::vector<fs::directory_entry> out;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) out.push_back(*it);
    if (ec) {
      st.problems.push_back("cannot list " + shown + ": " + ec.message() + "; fix its permissions");
      out.clear();
    }
    ec.clear();
    std::sort(out.begin(), out.end());
    return out;
  };
  for (const auto& e : list(cdir, loc.channel_label())) {
    const std::string name = e.path().filename().string();
    const std::string shown = core::printable(name);
    if (e.is_symlink(ec)) {
      st.problems.push_back(foreign(loc, shown) + " (a symbolic link)");
    } else if (e.is_regular_file(ec)) {
      if (name == "index.html" || name == "index.json") continue;
      if (is_engine_temp(name)) st.stale_temps.push_back(e.path());
      else st.problems.push_back(foreign(loc, shown));
    } else if (e.is_directory(ec)) {
      if (!core::is_valid_project_name(name) || core::normalize_project_name(name) != name) {
        st.problems.push_back(foreign(loc, shown + "/") + " (not a normalized project name)");
        continue;
      }
      const auto entries = list(e.path(), loc.channel_label() + "/" + shown);
      // A project directory holds only its two pages. One that holds a directory with
      // pages of its own is a channel (or a whole index prefix) nested inside this one,
      // as ffpa-index wrote before channels and prefixes became one name each
      // (--channel cu13/x, --index-prefix whl/cu13): named as such, with the way out.
      // Any other directory there is a stray file like the rest, named below.
      const auto holds_pages = [&](const fs::directory_entry& s) {
        if (s.is_symlink(ec) || !s.is_directory(ec)) return false;
        for (const fs::path& inner : {s.path() / "index.json", s.path() / "index.html"})
          if (fs::is_regular_file(inner, ec)) return true;
        return false;
      };
      if (const auto sub = std::find_if(entries.begin(), entries.end(), holds_pages); sub != entries.end()) {
        const std::string inner = loc.channel_label() + "/" + shown;
        st.problems.push_back(
            inner + "/ holds the directory " + core::printable(sub->path().filename().string()) +
            "/: it is an index nested inside " + loc.channel_label() + " (written by --channel " + loc.channel + "/" +
            shown + " or --index-prefix " + loc.channel_label() + " before channels and prefixes became one name "
            "each), not a project page; move it out of the channel (git mv " + inner + " " + loc.prefix + "/" + shown +
            ", where that is free, makes it the channel " + shown + ") or delete it, then re-run");
        continue;
      }
      bool has_page = false, clean = true;
      for (const auto& s : entries) {
        const std::string sname = s.path().filename().string();
        if (!s.is_symlink(ec) && s.is_regular_file(ec) && (sname == "index.json" || sname == "index.html")) {
          has_page = true;
        } else if (!s.is_symlink(ec) && s.is_regular_file(ec) && is_engine_temp(sname)) {
          st.stale_temps.push_back(s.path());
        } else {
          st.problems.push_back(foreign(loc, shown + "/" + core::printable(sname)));
          clean = false;
        }
      }
      if (!has_page || !clean) continue;
      try {
        ProjectPage page = load_project(loc, name);
        if (page.release_url.empty() && release_url) page.release_url = normalize_release_url(*release_url);
        for (auto& p : page_url_problems(page, loc.channel_label() + "/" + name + "/index.json"))
          st.problems.push_back(std::move(p));
        st.pages.emplace(name, std::move(page));
      } catch (const Error& err) {
        st.problems.push_back(err.what());
      }
    } else {
      st.problems.push_back(foreign(loc, shown));
    }
  }
  return st;
}

std::vector<fs::path> remove_stale_temps(const IndexLocation& loc, const SiteLock&) {
  // Under the lock no writer is running, so every temp file is a dead writer's.
  auto stale = read_channel(loc).stale_temps;
  for (const auto& p : stale) ::unlink(p.c_str());
  return stale;
}

// --- planning and writing ------------------------------------------------------------

IndexPlan plan_add(const IndexLocation& loc, const std::vector<PreparedWheel>& wheels, const AddOptions& opt) {
  if (opt.release_url.empty())
    throw Error("no release URL: anchors must point at the release assets; pass --release-url URL");
  if (const std::string why = release_url_problem(opt.release_url, opt.relative_release_url); !why.empty())
    throw Error("release URL '" + core::printable(opt.release_url) + "' is refused: " + why);
  const std::string release_url = normalize_release_url(opt.release_url);
  ChannelState st = read_channel(loc, release_url);
  if (!st.problems.empty()) throw channel_error(loc, st.problems, "add");
  std::map<std::string, std::string> listed_metadata;  // file name -> sha256 of the .metadata its page advertises
  for (const auto& [n, page] : st.pages)
    for (const auto& f : page.files)
      if (f.core_metadata_sha256) listed_metadata.emplace(f.filename, *f.core_metadata_sha256);
  IndexPlan plan;
  ChangeReport& rep = plan.report;
  std::ostringstream log;
  std::map<std::string, std::string> seen;  // file name -> sha256 of the wheels given
  std::set<std::string> touched;
  // Per project, built on first need: identity -> listed file, and version key ->
  // the canonical spelling the page lists that version under.
  struct Known {
    bool built = false;
    std::map<std::string, std::string> file_of, spelling_of;
  };
  std::map<std::string, Known> known;
  for (const auto& w : wheels)
    if (std::string why = channel_platform_problem(w.name, loc.channel); !why.empty()) throw Error(why);
  for (const auto& w : wheels) {
    const std::string fn = w.name.filename();
    if (auto [given, fresh] = seen.emplace(fn, w.sha256); !fresh) {
      if (given->second != w.sha256)
        throw Error("two different files named " + fn + " were given; pass the one to add");
      continue;
    }
    auto it = st.pages.find(w.project);
    if (it == st.pages.end()) {
      it = st.pages.emplace(w.project, ProjectPage{}).first;
      it->second.name = w.project;
      it->second.release_url = release_url;
    }
    ProjectPage& page = it->second;
    touched.insert(w.project);
    FileEntry e;
    e.filename = fn;
    e.sha256 = w.sha256;
    e.requires_python = w.requires_python;
    e.size = w.size;
    if (opt.core_metadata) e.core_metadata_sha256 = w.metadata_sha256;
    derive_file_fields(e);
    e.url = derive_file_url(release_url, e);
    Known& k = known[w.project];
    if (!std::exchange(k.built, true))
      for (const auto& f : page.files) {
        k.file_of.emplace(f.identity, f.filename);
        k.spelling_of.emplace(f.version_key, f.canonical_version);
      }
    // The listed entry of this file: by its name, else another spelling of it (a legacy
    // or older entry). Versions are compared as PEP 440 does, not as text.
    FileEntry* o = page.find(fn);
    if (auto other = k.file_of.find(e.identity); !o && other != k.file_of.end()) o = page.find(other->second);
    auto spelled = k.spelling_of.find(e.version_key);
    if (!o && spelled != k.spelling_of.end() && spelled->second != e.canonical_version)
      throw Error("'" + fn + "' is version " + e.canonical_version + " of " + w.project +
                  ", which is already published as " + spelled->second +
                  " (PEP 440 calls them equal, and pip would take either); one version has one spelling: "
                  "rebuild the wheels as " + spelled->second + ", or remove " + spelled->second + " first");
    if (!o) {
      k.file_of.emplace(e.identity, fn);
      k.spelling_of.emplace(e.version_key, e.canonical_version);
      page.insert(std::move(e));
      ++rep.added;
      log << "added " << fn << "\n";
      continue;
    }
    const bool renamed = o->filename != fn;
    if (!opt.force && renamed)
      throw Error("'" + fn + "' is version " + w.version.canonical + " of " + w.project + ", already published " +
                  (o->sha256 != w.sha256 ? "with different contents as '" + o->filename + "' (index sha256 " +
                                               o->sha256 + ", this file " + w.sha256 + ")"
                                         : "as '" + o->filename + "' (same bytes, another spelling)") +
                  "; one version has one file per tag: publish a new version, or set FFPA_FORCE_UPLOAD=1 to replace "
                  "the listed file");
    if (!opt.force && o->sha256 != w.sha256)
      throw Error("'" + fn + "' is already published with different contents (index sha256 " + o->sha256 +
                  ", this file " + w.sha256 + "); publish a new version, or set FFPA_FORCE_UPLOAD=1 to replace it");
    if (renamed || o->sha256 != w.sha256) {
      log << "replaced " << o->filename << (renamed ? " by " + fn : "") << " (FFPA_FORCE_UPLOAD=1)\n";
    } else if (o->url == e.url && o->core_metadata_sha256 == e.core_metadata_sha256 &&
               o->requires_python == e.requires_python && o->size == e.size) {
      ++rep.unchanged;
      log << "unchanged " << fn << "\n";
      continue;
    } else {
      // Same bytes: the entry (and its yank state) is kept; a new URL or newly served
      // metadata is taken over so a re-run with other options converges to them.
      log << "updated " << fn << "\n";
    }
    ++rep.replaced;
    e.yanked = o->yanked;
    if (!renamed) {
      *o = std::move(e);
      continue;
    }
    k.file_of[e.identity] = fn;
    page.files.erase(page.files.begin() + (o - page.files.data()));
    page.insert(std::move(e));
  }
  // Checked last, so that a wheel's own refusal (other bytes, another spelling) is the
  // one reported.
  for (const auto& name : touched) {
    ProjectPage& page = st.pages.at(name);
    if (page.release_url != release_url)
      throw Error("refusing to add, nothing was written: " + loc.channel_label() + "/" + name +
                  " serves its files from the release URL '" + page.release_url + "', not '" + release_url +
                  "'; pass --release-url '" + page.release_url +
                  "' (\"{tag}\" stands for each file's v<version>), or move every file first with ffpa-index "
                  "render --release-url URL");
    page.refresh_versions();
  }
  if (opt.metadata_dir) {
    for (const auto& w : wheels) plan.writes.emplace_back(*opt.metadata_dir / (w.name.filename() + ".metadata"), w.metadata);
    plan.metadata_writes = wheels.size();
    plan.removals = metadata_leftovers(*opt.metadata_dir, listed_metadata);
  }
  plan_pages(loc, st.pages, touched, plan);
  check_writable(loc, plan);
  log << loc.channel_label() << ": " << rep.added << " added, " << rep.replaced << " replaced, " << rep.unchanged
      << " unchanged\n";
  plan.log = log.str();
  return plan;
}

ChangeReport add_wheels(const IndexLocation& loc, const std::vector<PreparedWheel>& wheels, const AddOptions& opt,
                        std::ostream& log, const SiteLock& lock) {
  const IndexPlan plan = plan_add(loc, wheels, opt);
  remove_stale_temps(loc, lock);
  apply_plan(plan);
  log << plan.log;
  return plan.report;
}

bool version_matches(const std::string& filename, const core::Version& wanted) {
  auto wf = core::parse_wheel_filename(filename);
  if (!wf) return false;
  const auto v = *core::parse_pep440(wf->version);  // the file name grammar checked it
  return wanted.local.empty() ? v.public_part == wanted.public_part : v.canonical == wanted.canonical;
}

std::size_t edit_version(const IndexLocation& loc, Edit edit, const std::string& version,
                         const std::optional<std::string>& project, const std::optional<std::string>& reason,
                         std::ostream& log, const SiteLock& lock) {
  const char* verb = edit == Edit::remove ? "remove" : edit == Edit::yank ? "yank" : "unyank";
  if (reason && !core::is_valid_utf8(*reason))
    throw Error("--reason '" + core::printable(*reason) +
                "' is not valid UTF-8; the reason is shown to pip users as text: pass it in UTF-8");
  if (reason)
    if (const std::string why = core::terminal_text_problem(*reason); !why.empty())
      throw Error("--reason '" + core::printable(*reason) + "' " + why + "; pip prints the reason as is: pass plain text");
  std::string why;
  auto wanted = core::parse_pep440(version, &why);
  if (!wanted) throw Error("--version '" + core::printable(version) + "' is not a PEP 440 version (" + why + ")");
  ChannelState st = read_channel(loc);
  if (!st.problems.empty()) throw channel_error(loc, st.problems, verb);
  // Edited in memory, logged to a buffer, written only when everything was read and
  // something changed: a refusal prints nothing but the refusal.
  std::ostringstream buf;
  std::set<std::string> changed, listed;
  std::size_t n = 0, already = 0;
  for (auto& [name, page] : st.pages) {
    if (project && name != core::normalize_project_name(*project)) continue;
    listed.insert(page.versions.begin(), page.versions.end());
    const std::size_t before = n;
    n += std::erase_if(page.files, [&](const FileEntry& e) {
      if (edit != Edit::remove || !version_matches(e.filename, *wanted)) return false;
      buf << "removed " << e.filename << "\n";
      return true;
    });
    for (auto& e : page.files) {
      if (edit == Edit::remove || !version_matches(e.filename, *wanted)) continue;
      if (edit == Edit::yank ? e.yanked == reason.value_or("") : !e.yanked) {
        ++already;  // a re-run of the same yank or unyank: nothing to do, and no error
        continue;
      }
      ++n;
      if (edit == Edit::unyank) e.yanked.reset();
      else e.yanked = reason.value_or("");
      buf << verb << "ed " << e.filename << (e.yanked && !e.yanked->empty() ? " (" + *e.yanked + ")" : "") << "\n";
    }
    if (n != before) {
      page.refresh_versions();
      changed.insert(name);
    }
  }
  if (changed.empty() && already > 0) {
    log << "version " << wanted->canonical << " is already " << (edit == Edit::yank ? "yanked" : "not yanked")
        << (edit == Edit::yank && reason ? " with this reason" : "") << " in " << loc.channel_label()
        << "; nothing changed\n";
    return 0;
  }
  if (changed.empty()) {
    throw Error(std::string("nothing to ") + verb + ": no file of version " + wanted->canonical + " in " +
                loc.channel_label() + (edit == Edit::unyank ? " is yanked" : "") + " (listed: " +
                (listed.empty() ? "none" : core::join(listed, ", ")) + "); check --version and --channel");
  }
  write_pages(loc, st.pages, changed, lock);
  log << buf.str();
  return n;
}

void render_all(const IndexLocation& loc, const std::optional<std::string>& release_url, std::ostream& log,
                const SiteLock& lock) {
  if (release_url)
    if (const std::string why = release_url_problem(*release_url, false); !why.empty())
      throw Error("--release-url '" + core::printable(*release_url) + "' is refused: " + why);
  ChannelState st = read_channel(loc, release_url);
  if (!st.problems.empty()) throw channel_error(loc, st.problems, "render");
  std::set<std::string> all;
  for (auto& [n, page] : st.pages) {
    all.insert(n);
    if (!release_url) continue;
    page.release_url = normalize_release_url(*release_url);
    for (auto& f : page.files) f.url = derive_file_url(page.release_url, f);
  }
  write_pages(loc, st.pages, all, lock);
  log << loc.channel_label() << ": rendered " << st.pages.size() << " project page(s)\n";
}

// --- verify ------------------------------------------------------------------------

std::size_t verify_index(const PageSource& src, const std::string& assets, std::ostream& log) {
  const bool is_url = assets.rfind("http://", 0) == 0 || assets.rfind("https://", 0) == 0;
  std::map<std::string, fs::path> local;  // file name -> path, for a directory store
  if (!is_url) {
    std::error_code ec;
    if (!fs::is_directory(assets, ec))
      throw Error("--assets '" + assets + "' is neither a directory nor an http(s) URL");
    for (fs::recursive_directory_iterator it(assets, ec), end; !ec && it != end; it.increment(ec)) {
      if (it.depth() > 1) it.disable_recursion_pending();
      if (it->is_regular_file()) local.emplace(it->path().filename().string(), it->path());
    }
  }
  std::optional<TempDir> tmp;
  auto scratch = [&]() -> const fs::path& {
    if (!tmp) tmp.emplace("ffpa-verify-");
    return tmp->path();
  };
  std::size_t problems = 0, checked = 0, fetched = 0;
  auto bad = [&](const char* kind, const std::string& text) {
    ++problems;
    log << kind << text << "\n";
  };
  const IndexLocation& loc = src.loc;
  const std::string label = loc.channel_label();
  // Where the pages are shown from, and their text: read from the site directory (a
  // missing file reads as empty), or fetched into numbered files (names come from the
  // untrusted site), nullopt when the fetch fails (reported).
  const std::string base = (src.url ? normalize_release_url(*src.url) : "") + label + "/";
  auto page_text = [&](const std::string& rel) -> std::optional<std::string> {
    if (!src.url) return core::read_file(loc.channel_dir() / rel).value_or("");
    std::string why;
    if (auto p = fetch_url(base + rel, scratch(), "page" + std::to_string(fetched++), &why))
      return core::read_file(*p);
    bad("MISSING  ", base + rel + " (" + why + ")");
    return std::nullopt;
  };
  auto page_mismatch = [&](const std::string& rel, const std::string& how) {
    bad("PAGE     ", base + rel + " " + how + "; pip reads this page: restore it with ffpa-index render" +
                       (src.url ? "" : " --index-dir " + shell_quote(loc.root.string())) + " --channel " +
                       loc.channel + " (and commit/deploy it)");
  };
  auto expect_page = [&](const std::optional<std::string>& text, const std::string& want, const std::string& rel,
                         const std::string& how) {
    if (text && *text != want) page_mismatch(rel, how);
  };

  // 1. The pages, as pip reads them: each HTML page must be what its JSON renders to,
  // each JSON page what the engine writes, the root pages list exactly the projects.
  std::map<std::string, ProjectPage> pages;
  std::vector<std::string> names;
  std::optional<std::string> root;
  if (!src.url) {
    ChannelState st = read_channel(loc);
    for (const auto& p : st.problems) bad(p.find("release URL") != std::string::npos ? "URL      " : "FOREIGN  ", p);
    for (const auto& t : st.stale_temps)
      log << "note     " << t.string() << " is a temp file of a killed run; the next add/render removes it\n";
    pages = std::move(st.pages);
    for (const auto& [n, page] : pages) names.push_back(n);
    if (!names.empty() || fs::exists(loc.channel_dir() / "index.html")) root = page_text("index.json");
  } else if ((root = page_text("index.json"))) {
    try {
      const nlohmann::json list = nlohmann::json::parse(*root);
      for (const auto& p : list.at("projects")) {
        const std::string n = p.at("name").get<std::string>();
        if (!core::is_valid_project_name(n) || core::normalize_project_name(n) != n)
          throw Error("project name '" + core::printable(n) + "' is not normalized");
        names.push_back(n);
      }
    } catch (const std::exception& e) {
      bad("PAGE     ", base + "index.json is not a PEP 691 project list (" + e.what() + ")");
    }
  }
  if (root) {
    const char* how = "does not list exactly the channel's projects";
    expect_page(page_text("index.html"), render_root_html(names), "index.html", how);
    expect_page(root, root_json(names), "index.json", how);
  }
  for (const auto& n : names) {
    if (!src.url && !fs::exists(loc.project_dir(n) / "index.json")) {
      page_mismatch(n + "/index.html", "has no index.json beside it (a legacy page, not yet imported)");
      continue;
    }
    const auto json = page_text(n + "/index.json"), html = page_text(n + "/index.html");
    if (!json || !html) continue;
    try {
      if (src.url) {
        ProjectPage page = project_from_json(nlohmann::json::parse(*json), base + n + "/index.json");
        if (page.name != n) throw Error("it names project '" + page.name + "'");
        for (const auto& p : page_url_problems(page, base + n + "/index.json")) bad("URL      ", p);
        pages.emplace(n, std::move(page));
      }
      const ProjectPage& page = pages.at(n);
      expect_page(html, render_project_html(page), n + "/index.html",
                  "is not what its index.json renders to (edited by hand, or a write was interrupted)");
      expect_page(json, to_json(page).dump(1) + "\n", n + "/index.json",
                  "is not what ffpa-index writes for its entries (a key, value or layout it does not write, which "
                  "JSON clients such as uv read)");
    } catch (const std::exception& e) {
      bad("PAGE     ", base + n + "/index.json does not load: " + e.what());
    }
  }

  for (const auto& [n, page] : pages) {
    // The release URL the pages record, against the one expected when given.
    if (page.files.empty()) continue;
    if (src.release_url && page.release_url != normalize_release_url(*src.release_url))
      bad("URL      ", label + "/" + n + "/index.json records the release URL '" + page.release_url +
                           "', not the expected '" + normalize_release_url(*src.release_url) +
                           "': its files would be fetched from there; restore the page from git history");
    else if (!page.release_url.empty())
      log << "note     " << label << "/" << n << ": files derive from the release URL " << page.release_url << "\n";
    // One version and tag set listed under two spellings (an index written before
    // spellings were checked): pip would pick either.
    std::map<std::string, std::string> seen;
    for (const auto& f : page.files)
      if (auto [it, fresh] = seen.emplace(f.identity, f.filename); !fresh)
        bad("SPELLING ", it->second + " and " + f.filename + " are one version and tags spelled twice; keep one: "
                             "delete the other's entry from " + label + "/" + n + "/index.json, then render");
  }

  // 2. The files the pages point at: why each is not the listed one, or "".
  auto locate = [&](const FileEntry& f, const std::string& name, const std::string& rel_url)
      -> std::optional<fs::path> {
    if (!is_url) {
      auto it = local.find(name);
      return it == local.end() ? std::nullopt : std::optional<fs::path>(it->second);
    }
    const std::string store = normalize_release_url(assets);
    const std::string url = f.url.rfind(store, 0) == 0 ? rel_url : store + url_encode_segment(name);
    return fetch_url(url, scratch(), "asset" + std::to_string(fetched++));
  };
  auto file_problem = [&](const FileEntry& f) -> std::pair<const char*, std::string> {
    const auto p = locate(f, f.filename, f.url);
    if (!p) return {"MISSING  ", f.filename + " (not found in " + assets + ")"};
    if (const std::string got = hash_file(*p); got != f.sha256)
      return {"MISMATCH ", f.filename + ": index says " + f.sha256 + ", asset is " + got};
    std::error_code ec;
    if (const std::uint64_t size = fs::file_size(*p, ec); !f.size || *f.size != size)
      return {"MISMATCH ", f.filename + ": the asset is " + std::to_string(size) + " bytes, the index " +
                               (f.size ? "says " + std::to_string(*f.size) : "records no size (PEP 700)") +
                               "; re-add the wheel (ffpa-index add, same bytes) to record it"};
    if (is_url) fs::remove(*p, ec);  // a fetched copy: scratch space stays one wheel large
    if (!f.core_metadata_sha256) return {};
    const auto m = locate(f, f.filename + ".metadata", f.url + ".metadata");
    if (!m) return {"MISSING  ", f.filename + ".metadata (the page advertises it; pip will fail)"};
    if (const std::string got = hash_file(*m); got != *f.core_metadata_sha256)
      return {"MISMATCH ", f.filename + ".metadata: index says " + *f.core_metadata_sha256 + ", asset is " + got};
    return {};
  };
  for (const auto& [n, page] : pages)
    for (const auto& f : page.files) {
      ++checked;
      if (const auto [kind, why] = file_problem(f); kind) bad(kind, why);
      else log << "OK       " << f.filename << "\n";
    }
  log << label << ": " << checked << " file(s) checked, " << problems << " problem(s)\n";
  return problems;
}

}  // namespace ffpa::site
