// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#include "ffpa/site/index.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/wheel.h"
#include "ffpa/site/process.h"

namespace ffpa::site {

using ffpa::core::Error;

namespace {
std::atomic<std::uint64_t> g_hashed{0};

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Atomic write that skips identical content, so a re-run that changes nothing
// leaves mtimes and the git tree alone.
bool write_if_changed(const fs::path& p, const std::string& data) {
  auto cur = read_text(p);
  if (cur && *cur == data) return false;
  fs::create_directories(p.parent_path());
  ffpa::core::write_file_atomic(p, data);
  return true;
}

std::string channel_label(const IndexLocation& loc) {
  return (fs::path(loc.prefix) / loc.channel).generic_string();
}
}  // namespace

std::uint64_t files_hashed() { return g_hashed.load(); }

std::string hash_file(const fs::path& p) {
  ++g_hashed;
  return ffpa::core::sha256_hex_file(p);
}

PreparedWheel prepare_wheel(const fs::path& p) {
  PreparedWheel w;
  w.path = p;
  const std::string fn = p.filename().string();
  std::string why;
  auto wf = ffpa::core::parse_wheel_filename(fn, &why);
  if (!wf)
    throw Error("'" + fn + "' is not a valid wheel file name (" + why +
                "); only files named {name}-{version}(-{build})?-{python}-{abi}-{platform}.whl "
                "as PEP 427 defines are published; rename or rebuild it");
  w.name = *wf;
  auto v = ffpa::core::parse_pep440(wf->version, &why);
  if (!v) throw Error("'" + fn + "': version '" + wf->version + "' is not PEP 440 (" + why + ")");
  w.version = *v;
  w.project = ffpa::core::normalize_project_name(wf->name);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec))
    throw Error("'" + p.string() + "' does not exist or is not a file; build the wheels first");
  const auto check = ffpa::core::verify_wheel(p);
  if (!check.ok) {
    std::string msg = "'" + fn + "' does not verify against its RECORD:";
    for (const auto& pr : check.problems) msg += "\n  - " + pr;
    msg += "\nrebuild the wheel (its bytes changed after packaging); it is never published as is";
    throw Error(msg);
  }
  w.size = fs::file_size(p);
  w.sha256 = hash_file(p);
  w.metadata = ffpa::core::read_wheel_metadata(p);
  w.metadata_sha256 = ffpa::core::sha256_hex(w.metadata);
  for (const auto& [k, val] : ffpa::core::parse_header_lines(w.metadata)) {
    std::string key = k;
    std::transform(key.begin(), key.end(), key.begin(), ::tolower);
    if (key == "requires-python") w.requires_python = val;
  }
  return w;
}

std::string expand_release_url(const std::string& url, const std::string& tag) {
  std::string out = url;
  const auto at = out.find("{tag}");
  if (at != std::string::npos) out.replace(at, 5, url_encode_segment(tag));
  if (out.empty() || out.back() != '/') out += '/';
  return out;
}

fs::path lock_path_for(const IndexLocation& loc) {
  std::error_code ec;
  auto abs = fs::weakly_canonical(fs::absolute(loc.channel_dir()), ec);
  const std::string key = ffpa::core::sha256_hex(abs.string()).substr(0, 16);
  return fs::temp_directory_path() / ("ffpa-index-" + key + ".lock");
}

ProjectPage load_project(const IndexLocation& loc, const std::string& normalized) {
  const fs::path dir = loc.project_dir(normalized);
  if (auto j = read_text(dir / "index.json")) {
    nlohmann::json parsed;
    try {
      parsed = nlohmann::json::parse(*j);
    } catch (const nlohmann::json::exception& e) {
      throw Error((dir / "index.json").string() + " does not parse (" + e.what() +
                  "); restore it from the site repository's history");
    }
    auto page = project_from_json(parsed, (dir / "index.json").string());
    if (page.name != normalized)
      throw Error((dir / "index.json").string() + " names project '" + page.name + "', expected '" +
                  normalized + "'");
    return page;
  }
  ProjectPage page;
  page.name = normalized;
  if (auto html = read_text(dir / "index.html")) {
    // One-time import of a page written by the old scripts: the only time HTML is read.
    for (const auto& a : parse_anchors(*html)) {
      std::string fn = a.text;
      if (!ffpa::core::parse_wheel_filename(fn)) {
        const auto slash = a.href.rfind('/');
        fn = url_decode(slash == std::string::npos ? a.href : a.href.substr(slash + 1));
      }
      if (!ffpa::core::parse_wheel_filename(fn))
        throw Error((dir / "index.html").string() + ": legacy anchor '" + a.text +
                    "' is not a wheel file name; fix or delete that line, then re-run");
      if (a.sha256.size() != 64)
        throw Error((dir / "index.html").string() + ": legacy anchor for '" + fn +
                    "' has no #sha256= fragment; add it (sha256sum the asset) and re-run");
      if (page.find(fn)) continue;
      FileEntry e;
      e.filename = fn;
      e.url = a.href;
      e.sha256 = a.sha256;
      e.requires_python = a.requires_python;
      e.yanked = a.yanked;
      // The legacy page's metadata claims cannot be checked here; pip would fail on a
      // wrong one, so they are dropped rather than carried over.
      page.insert(std::move(e));
    }
    page.refresh_versions();
  }
  return page;
}

std::vector<std::string> list_projects(const IndexLocation& loc) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(loc.channel_dir(), ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory()) continue;
    if (fs::exists(it->path() / "index.json") || fs::exists(it->path() / "index.html"))
      out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

void save_pages(const IndexLocation& loc, const std::vector<ProjectPage>& pages) {
  // JSON first: it is the truth. A kill between the two leaves a stale HTML page that
  // the next run re-renders because its content differs.
  for (const auto& p : pages) {
    const fs::path dir = loc.project_dir(p.name);
    write_if_changed(dir / "index.json", to_json(p).dump(1) + "\n");
    write_if_changed(dir / "index.html", render_project_html(p));
  }
  auto projects = list_projects(loc);
  write_if_changed(loc.channel_dir() / "index.html", render_root_html(projects));
  write_if_changed(loc.channel_dir() / "index.json", root_json(projects));
}

}  // namespace

ChangeReport add_wheels(const IndexLocation& loc, const std::vector<PreparedWheel>& wheels,
                        const AddOptions& opt, std::ostream& log) {
  if (opt.release_url.empty())
    throw Error("no release URL: anchors must point at the release assets; pass --release-url URL");
  ffpa::core::FileLock lock(lock_path_for(loc));
  std::map<std::string, ProjectPage> pages;
  ChangeReport rep;
  std::set<std::string> seen;
  for (const auto& w : wheels) {
    const std::string fn = w.name.filename();
    if (!seen.insert(fn).second) continue;
    auto it = pages.find(w.project);
    if (it == pages.end()) it = pages.emplace(w.project, load_project(loc, w.project)).first;
    ProjectPage& page = it->second;
    FileEntry e;
    e.filename = fn;
    e.url = opt.release_url + url_encode_segment(fn);
    e.sha256 = w.sha256;
    e.requires_python = w.requires_python;
    e.size = w.size;
    if (opt.core_metadata) e.core_metadata_sha256 = w.metadata_sha256;
    if (FileEntry* cur = page.find(fn)) {
      if (cur->sha256 != w.sha256) {
        if (!opt.force)
          throw Error("'" + fn + "' is already published with different contents (index sha256 " +
                      cur->sha256 + ", this file " + w.sha256 +
                      "); publish a new version, or set FFPA_FORCE_UPLOAD=1 to replace it");
        e.yanked = cur->yanked;
        *cur = std::move(e);
        ++rep.replaced;
        log << "replaced " << fn << " (FFPA_FORCE_UPLOAD=1)\n";
      } else {
        // Same bytes: keep the entry (and its yank state); a new URL or newly served
        // metadata is taken over so a re-run with other options converges to them.
        const bool differs = cur->url != e.url || cur->core_metadata_sha256 != e.core_metadata_sha256 ||
                             cur->requires_python != e.requires_python || cur->size != e.size;
        if (differs) {
          e.yanked = cur->yanked;
          *cur = std::move(e);
          ++rep.replaced;
          log << "updated " << fn << "\n";
        } else {
          ++rep.unchanged;
          log << "unchanged " << fn << "\n";
        }
      }
    } else {
      page.insert(std::move(e));
      ++rep.added;
      log << "added " << fn << "\n";
    }
  }
  std::vector<ProjectPage> out;
  for (auto& [name, page] : pages) {
    page.refresh_versions();
    out.push_back(std::move(page));
  }
  if (opt.metadata_dir) {
    for (const auto& w : wheels)
      write_if_changed(*opt.metadata_dir / (w.name.filename() + ".metadata"), w.metadata);
  }
  save_pages(loc, out);
  log << channel_label(loc) << ": " << rep.added << " added, " << rep.replaced << " replaced, "
      << rep.unchanged << " unchanged\n";
  return rep;
}

bool version_matches(const std::string& filename, const ffpa::core::Version& wanted) {
  auto wf = ffpa::core::parse_wheel_filename(filename);
  if (!wf) return false;
  auto v = ffpa::core::parse_pep440(wf->version);
  if (!v) return false;
  return wanted.local.empty() ? v->public_part == wanted.public_part : v->canonical == wanted.canonical;
}

namespace {

template <class Fn>
ChangeReport mutate_version(const IndexLocation& loc, const std::string& version,
                            const std::optional<std::string>& project, const char* verb, Fn fn,
                            std::ostream& log) {
  std::string why;
  log.flush();
  auto wanted = ffpa::core::parse_pep440(version, &why);
  if (!wanted) throw Error("--version '" + version + "' is not a PEP 440 version (" + why + ")");
  ffpa::core::FileLock lock(lock_path_for(loc));
  std::vector<std::string> names;
  if (project) names.push_back(ffpa::core::normalize_project_name(*project));
  else names = list_projects(loc);
  ChangeReport rep;
  std::vector<ProjectPage> changed;
  std::set<std::string> listed;
  for (const auto& n : names) {
    ProjectPage page = load_project(loc, n);
    for (const auto& v : page.versions) listed.insert(v);
    const ChangeReport before = rep;
    fn(page, *wanted, rep);
    if (rep.removed != before.removed || rep.yanked != before.yanked) {
      page.refresh_versions();
      changed.push_back(std::move(page));
    }
  }
  if (changed.empty()) {
    std::string have;
    for (const auto& v : listed) have += (have.empty() ? "" : ", ") + v;
    throw Error(std::string("nothing to ") + verb + ": no file of version " + wanted->canonical + " in " +
                channel_label(loc) + " (listed: " + (have.empty() ? "none" : have) +
                "); check --version and --channel");
  }
  save_pages(loc, changed);
  return rep;
}

}  // namespace

ChangeReport remove_version(const IndexLocation& loc, const std::string& version,
                            const std::optional<std::string>& project, std::ostream& log) {
  return mutate_version(
      loc, version, project, "remove",
      [&](ProjectPage& page, const ffpa::core::Version& v, ChangeReport& rep) {
        auto& f = page.files;
        auto keep = std::stable_partition(f.begin(), f.end(), [&](const FileEntry& e) {
          if (!version_matches(e.filename, v)) return true;
          log << "removed " << e.filename << "\n";
          return false;
        });
        rep.removed += static_cast<std::size_t>(f.end() - keep);
        f.erase(keep, f.end());
      },
      log);
}

ChangeReport yank_version(const IndexLocation& loc, const std::string& version,
                          const std::optional<std::string>& project,
                          const std::optional<std::string>& reason, std::ostream& log) {
  return mutate_version(
      loc, version, project, "yank",
      [&](ProjectPage& page, const ffpa::core::Version& v, ChangeReport& rep) {
        for (auto& e : page.files) {
          if (!version_matches(e.filename, v)) continue;
          const std::string r = reason.value_or("");
          if (e.yanked && *e.yanked == r) continue;
          e.yanked = r;
          ++rep.yanked;
          log << "yanked " << e.filename << (r.empty() ? "" : " (" + r + ")") << "\n";
        }
      },
      log);
}

void render_all(const IndexLocation& loc, std::ostream& log) {
  ffpa::core::FileLock lock(lock_path_for(loc));
  std::vector<ProjectPage> pages;
  for (const auto& n : list_projects(loc)) pages.push_back(load_project(loc, n));
  save_pages(loc, pages);
  log << channel_label(loc) << ": rendered " << pages.size() << " project page(s)\n";
}

std::size_t verify_index(const IndexLocation& loc, const std::string& assets, std::ostream& log) {
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
  const fs::path tmp = fs::temp_directory_path() / ("ffpa-verify-" + std::to_string(::getpid()));
  std::size_t problems = 0, checked = 0;
  // Fetches one URL to a temp file; returns the path or nullopt (and logs) on failure.
  auto fetch = [&](const std::string& url, const std::string& name) -> std::optional<fs::path> {
    fs::create_directories(tmp);
    const fs::path dst = tmp / name;
    auto r = run_process({tool_program("FFPA_CURL", "curl"), "-fsSL", "-o", dst.string(), url});
    if (r.status != 0) return std::nullopt;
    return dst;
  };
  auto locate = [&](const FileEntry& f, const std::string& name, const std::string& rel_url)
      -> std::optional<fs::path> {
    if (!is_url) {
      auto it = local.find(name);
      return it == local.end() ? std::nullopt : std::optional<fs::path>(it->second);
    }
    std::string base = assets;
    if (base.back() != '/') base += '/';
    const std::string url = f.url.rfind(base, 0) == 0 ? rel_url : base + url_encode_segment(name);
    return fetch(url, name);
  };
  for (const auto& n : list_projects(loc)) {
    const ProjectPage page = load_project(loc, n);
    for (const auto& f : page.files) {
      ++checked;
      auto p = locate(f, f.filename, f.url);
      if (!p) {
        ++problems;
        log << "MISSING  " << f.filename << " (not found in " << assets << ")\n";
        continue;
      }
      const std::string got = hash_file(*p);
      if (got != f.sha256) {
        ++problems;
        log << "MISMATCH " << f.filename << ": index says " << f.sha256 << ", asset is " << got << "\n";
        continue;
      }
      if (f.core_metadata_sha256) {
        auto m = locate(f, f.filename + ".metadata", f.url + ".metadata");
        if (!m) {
          ++problems;
          log << "MISSING  " << f.filename << ".metadata (the page advertises it; pip will fail)\n";
          continue;
        }
        const std::string mg = hash_file(*m);
        if (mg != *f.core_metadata_sha256) {
          ++problems;
          log << "MISMATCH " << f.filename << ".metadata: index says " << *f.core_metadata_sha256
              << ", asset is " << mg << "\n";
          continue;
        }
      }
      log << "OK       " << f.filename << "\n";
    }
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
  log << channel_label(loc) << ": " << checked << " file(s) checked, " << problems << " problem(s)\n";
  return problems;
}

}  // namespace ffpa::site
