// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The project page model. Its JSON form (PEP 691, api-version 1.1 with the PEP 700
// fields) is the source of truth; the PEP 503 HTML page is rendered from it and never
// read back, except once to import a legacy page that has no JSON beside it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace ffpa::site {

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

}  // namespace ffpa::site
