// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The self-hosted index: the project page model (model.cpp) and the channels that hold
// the pages (index.cpp).
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ffpa/core/pep.h"
#include "ffpa/core/wheel.h"

namespace ffpa::site {

// --- the project page ------------------------------------------------------------

// The project page model. Its JSON form (PEP 691, api-version 1.1 with the PEP 700
// fields) is the source of truth; the PEP 503 HTML page is rendered from it and never
// read back, except once to import a legacy page that has no JSON beside it.

inline constexpr const char* kApiVersion = "1.1";
// The channel the index commands work on unless told otherwise: the newest channel of
// cmake/release-matrix.json, which index/CMakeLists.txt hands to the build.
inline constexpr const char* kDefaultChannel = FFPA_INDEX_DEFAULT_CHANNEL;

struct FileEntry {
  std::string filename;  // always a parsed, valid wheel file name
  std::string url;       // absolute asset URL, without fragment
  std::string sha256;    // lower-case hex
  std::string requires_python;                      // empty when the wheel has none
  std::optional<std::string> core_metadata_sha256;  // set only when url+".metadata" is served
  std::optional<std::string> yanked;                // nullopt: not yanked; "" : yanked, no reason
  std::optional<std::uint64_t> size;                // PEP 700; absent for imported legacy anchors
  // Derived from `filename` by derive_file_fields (never serialised), once per entry:
  // parsing names is the dominant cost of a merge into a large page.
  std::string project;            // PEP 503 normalised
  std::string canonical_version;  // PEP 440 canonical
  std::string version_key;        // equal for versions PEP 440 calls equal (1.0 and 1.0.0)
  std::string identity;           // project, version key, tags: equal for two spellings of one file
};

// Fills the derived fields; false when `filename` is not a wheel file name.
bool derive_file_fields(FileEntry& e);

struct ProjectPage {
  std::string name;  // PEP 503 normalised
  // The release URL the files are served from ("{tag}" stands for v<canonical version>
  // of each file), recorded in the JSON under the private key "_ffpa-release-url"
  // (PEP 691 reserves keys with a leading underscore). Every file's url must be the
  // one derive_file_url gives from it; empty when the page records none (a legacy or
  // hand-written page), which only add and render --release-url accept.
  std::string release_url;
  std::vector<FileEntry> files;  // sorted by file name
  std::vector<std::string> versions;  // PEP 700, in order of first publication

  FileEntry* find(std::string_view filename);
  // Inserts keeping files sorted (deriving the entry's fields when not yet done);
  // the caller has checked the name is absent.
  void insert(FileEntry e);
  // Recomputes `versions` from the files, keeping the existing order for the
  // versions that remain and appending new ones in file-name order.
  void refresh_versions();
};

nlohmann::json to_json(const ProjectPage& page);
// Throws core::Error naming the file and the bad field (including a URL that
// url_problem refuses and a hash that is not hex).
ProjectPage project_from_json(const nlohmann::json& j, std::string_view origin);
std::string root_json(const std::vector<std::string>& projects);

std::string html_escape(std::string_view s);
// Percent-encodes everything outside RFC 3986 unreserved characters, so '+' in a
// local version becomes %2B (some asset stores read a literal '+' as a space).
std::string url_encode_segment(std::string_view s);
std::string url_decode(std::string_view s);

// Why `url` may not be an anchor's href (empty when it may): whitespace or control
// characters, or a scheme other than http, https or file (javascript:, data: ...).
// `absolute` also refuses relative URLs. One rule for the JSON, a legacy page's
// import and --release-url.
std::string url_problem(std::string_view url, bool absolute);
// Why `url` cannot be a release URL (empty when it can): it must be an http(s) or
// file URL (or, with relative_ok, a path such as ../../../assets/) whose only part
// that varies is one "{tag}", with no userinfo, query, fragment, backslash,
// percent-encoding or '.'/'..'/empty path segment, so that the URL the engine derives
// for a file is the only spelling that reaches it.
std::string release_url_problem(std::string_view url, bool relative_ok);

std::string render_project_html(const ProjectPage& page);
std::string render_root_html(const std::vector<std::string>& projects);

// Anchors of a PEP 503 page (href without fragment, its sha256 if any, attributes
// unescaped, text unescaped). Tolerant of attribute order and quoting.
struct LegacyAnchor {
  std::string href, sha256, text, requires_python;
  std::optional<std::string> yanked;
  std::optional<std::string> core_metadata;  // "sha256=<hex>" or "true"
};
std::vector<LegacyAnchor> parse_anchors(std::string_view html);

// --- the channel -----------------------------------------------------------------

// A channel of the self-hosted index: <root>/<prefix>/<channel>/index.html (projects)
// and <root>/<prefix>/<channel>/<project>/index.{json,html}. Every mutation loads the
// whole channel, computes the new state and every byte it will write in memory,
// refuses before touching disk, then writes with temp+rename under the site lock.

namespace fs = std::filesystem;

struct IndexLocation {
  fs::path root;  // the site root (--index-dir, or the site repository)
  std::string prefix = "whl";
  std::string channel = kDefaultChannel;
  fs::path channel_dir() const { return root / prefix / channel; }
  fs::path project_dir(const std::string& normalized) const { return channel_dir() / normalized; }
  std::string channel_label() const;  // "<prefix>/<channel>", as messages and git paths name it
};

// Throws unless `value` (an --index-prefix or --channel) is a relative path of plain
// names, so the index cannot be written outside the site.
void check_index_path(const std::string& value, const char* flag);

// Why the wheel `w` cannot be filed in `channel`, or "": a cu<N> channel serves CPython 3
// on Linux x86_64 (python tags py3/cp3N, ABI none/abi3/cp3N, platform manylinux_*_x86_64,
// linux_x86_64 or any); add and publish refuse a Windows, macOS or Python 2 wheel there.
std::string channel_platform_problem(const core::WheelFilename& w, const std::string& channel);

// Why `path` (a file the index writes) may not be written in the site `root`, or "":
// a directory on the way from root that is a symlink (the write would land where it
// points, outside what the checkout tracks) or a dot-directory (.git, .github). Paths
// outside `root` (an --metadata-dir elsewhere) are not the site's: "". add, remove,
// yank, unyank, render and publish check every path before the first write.
std::string site_path_problem(const fs::path& root, const fs::path& path);

// --- the site lock ----------------------------------------------------------------

// The git directory of a site checkout (<root>/.git, or where a "gitdir:" file
// points), else the root itself. publish stages the .metadata files it uploads there,
// out of the work tree and out of $TMPDIR.
fs::path engine_dir(const fs::path& root);

// The lock that add, remove, yank, unyank, render and publish of one site hold for
// their whole run: an exclusive flock on the site's root directory itself. It is the
// directory (its inode) that is locked, so every spelling of the path (site, site/,
// ./site, a symlink) and every $TMPDIR meet the same lock, and no lock file is ever
// written into the site or left anywhere. The functions below that write take it as
// an argument: proof that the caller holds it.
class SiteLock {
 public:
  // Blocks until granted. A missing root is created only when `create_root` (add
  // starts a site; the other writers refuse one that does not exist).
  explicit SiteLock(const fs::path& root, bool create_root = false);
  ~SiteLock();
  SiteLock(const SiteLock&) = delete;
  SiteLock& operator=(const SiteLock&) = delete;

 private:
  int fd_ = -1;
};

// --- inputs ---------------------------------------------------------------------

// Number of files whose bytes this process has hashed (wheels, and assets in verify).
// The scale benchmark reads it to prove that a merge hashes only the new files.
std::uint64_t files_hashed();
std::string hash_file(const fs::path& p);

// The bytes of a file as one read of it saw them: copied through a single descriptor
// into a private, unnamed file (O_TMPFILE under $TMPDIR, freed by the kernel when the
// last descriptor closes, a kill included), hashed and counted on the way. Whatever
// happens to the original's path afterwards, checks, hashes and uploads read this.
class PrivateCopy {
 public:
  explicit PrivateCopy(const fs::path& src);  // throws core::Error naming the fix
  ~PrivateCopy();
  PrivateCopy(const PrivateCopy&) = delete;
  PrivateCopy& operator=(const PrivateCopy&) = delete;
  int fd() const { return fd_; }
  std::uint64_t size() const { return size_; }
  const std::string& sha256() const { return sha256_; }
  // Writes the copy to `dst` atomically (temp + rename).
  void write_to(const fs::path& dst) const;

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::string sha256_;
};

// A wheel checked and measured once, before any step of add or publish runs.
struct PreparedWheel {
  fs::path path;  // as given (messages); the bytes are `bytes`
  core::WheelFilename name;
  core::Version version;
  std::string project;  // PEP 503 normalised
  std::string sha256;
  std::uint64_t size = 0;
  std::string metadata, metadata_sha256, requires_python;
  // The bytes that were verified, hashed and measured, and whose METADATA was read.
  std::shared_ptr<const PrivateCopy> bytes;
  // Fills project, metadata_sha256 and requires_python from name and metadata.
  void derive(std::vector<std::pair<std::string, std::string>> metadata_fields);
};

// Parses the file name against the wheel grammar and requires its canonical
// spelling (one version, one file name), bounds the name's length, then opens the
// file once into a PrivateCopy and verifies (RECORD, METADATA), hashes, measures and
// reads METADATA from that copy alone. Throws core::Error with a message that
// names the fix.
PreparedWheel prepare_wheel(const fs::path& p);
// A wheel this process has just written (ffpa-index release's local site): its facts
// as pack measured them while writing, without reading it back; `bytes` stays empty.
PreparedWheel packed_wheel(const core::PackResult& r);

// "{tag}" in a release URL is replaced by the URL-encoded tag, so one setting serves
// every release; the result always ends with '/'.
std::string expand_release_url(const std::string& url, const std::string& tag);
// The release URL as a page records it: with its trailing '/'.
std::string normalize_release_url(const std::string& url);

// The one URL of a listed file: the release URL with "{tag}" expanded to the file's
// release tag (v<canonical version>, the tag publish creates) and the URL-encoded file
// name appended. Pages list, render and verify no other URL.
std::string derive_file_url(const std::string& release_url, const FileEntry& file);
// What is wrong with a page's URLs, one message per problem (empty when none): no
// recorded release URL, or a file whose url is not the derived one. `rel` names the
// page in the messages.
std::vector<std::string> page_url_problems(const ProjectPage& page, const std::string& rel);

// --- mutations ------------------------------------------------------------------

struct AddOptions {
  // Where the files are served from: each anchor is derive_file_url(release_url, file)
  // ("{tag}" expands per file). A page that records another release URL is refused:
  // move it first with render --release-url.
  std::string release_url;
  // Whether <asset url>.metadata is served (PEP 658): only then may the page carry
  // core-metadata, because pip fetches exactly that URL and fails the install when
  // it is missing. publish uploads the file beside each asset, so it sets this.
  bool core_metadata = false;
  std::optional<fs::path> metadata_dir;  // write <wheel>.metadata here (the dir serving release_url)
  bool force = false;                    // FFPA_FORCE_UPLOAD=1: same version, other bytes, replaced
  // A relative release URL ("../../../assets/") is allowed only where the site is
  // served together with its assets: the local site written by `ffpa-index release`.
  bool relative_release_url = false;
};

struct ChangeReport {
  std::size_t added = 0, replaced = 0, unchanged = 0;
};

// Everything a mutation will write, computed (and serialised) before the first byte
// goes to disk. `writes` holds every page the mutation owns, changed or not, so
// publish can stage exactly these paths.
struct IndexPlan {
  // Removed before anything is written: what an interrupted add --metadata-dir left in
  // the served directory (its markers, and the .metadata files no page lists).
  std::vector<fs::path> removals;
  // absolute path, content: the .metadata files first (a page never advertises one
  // that is not there), then JSON before HTML.
  std::vector<std::pair<fs::path, std::string>> writes;
  std::size_t metadata_writes = 0;  // how many of `writes`, from the front, are .metadata files
  ChangeReport report;
  std::string log;  // printed only once the writes are done
};

// Loads a project page: its JSON, else a legacy HTML page imported once, else empty.
// Throws for a page that does not parse, names another project, lists a file of
// another project, or (legacy) carries a non-hex hash or an href that is not a URL
// pip may follow.
ProjectPage load_project(const IndexLocation& loc, const std::string& normalized);

// Whether a file name is one of the engine's own temp files (".index.json.tmp.XXXXXX").
bool is_engine_temp(const std::string& filename);
// Removes the stale temp files a killed writer left in the channel; returns them.
std::vector<fs::path> remove_stale_temps(const IndexLocation& loc, const SiteLock&);

// Throws (nothing planned) when a wheel names a file already listed with other bytes,
// or the same version and tags under another spelling, unless opt.force.
IndexPlan plan_add(const IndexLocation& loc, const std::vector<PreparedWheel>& wheels, const AddOptions& opt);
ChangeReport add_wheels(const IndexLocation& loc, const std::vector<PreparedWheel>& wheels,
                        const AddOptions& opt, std::ostream& log, const SiteLock&);

// Removes, yanks (PEP 592) or unyanks every file of `version` (in `project`, or in every
// project); returns how many changed. A version with a local segment matches exactly;
// without one it matches every local build of that public version. Refuses, nothing
// written, when no file matches. `reason` (yank) must be valid UTF-8: it is written
// into the JSON and the HTML.
enum class Edit { remove, yank, unyank };
std::size_t edit_version(const IndexLocation& loc, Edit edit, const std::string& version,
                         const std::optional<std::string>& project, const std::optional<std::string>& reason,
                         std::ostream& log, const SiteLock&);

// Re-renders every HTML page (and the root) from the JSON. Refuses, nothing written,
// when a page's files do not derive from its release URL. With `release_url`, every
// page is pointed at it (its files' urls derived anew): the way to record one on a page
// that has none, or to move the whole channel to another release URL.
void render_all(const IndexLocation& loc, const std::optional<std::string>& release_url, std::ostream& log,
                const SiteLock&);

// --- verify ---------------------------------------------------------------------

// Where verify reads the pages: the site directory `loc`, or (with `url`, the served
// site root) the same channel over HTTP, both index.json and index.html of every page.
struct PageSource {
  IndexLocation loc;
  std::optional<std::string> url;
  // When given, the release URL every page must record (--release-url); otherwise
  // each page's own is used, and printed.
  std::optional<std::string> release_url;
};

// Checks what pip reads: every served HTML page must be exactly what its JSON renders
// to and every JSON page what the engine writes (the root page too), every file's URL
// the one derived from the page's release URL, and nothing foreign may sit in the
// channel. Then recomputes every listed file's sha256 and size (and the .metadata
// beside it when the page advertises one) from a directory (files directly in it or one level down, as the dir: asset
// store keeps them per tag) or an http(s) base URL. Returns the number of problems;
// each is printed.
std::size_t verify_index(const PageSource& pages, const std::string& assets, std::ostream& log);

// Whether `version` (as given to remove/yank) selects the file `filename`.
bool version_matches(const std::string& filename, const core::Version& wanted);

}  // namespace ffpa::site
