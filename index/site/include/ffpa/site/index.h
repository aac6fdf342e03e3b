// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// A channel of the self-hosted index: <root>/<prefix>/<channel>/index.html (projects)
// and <root>/<prefix>/<channel>/<project>/index.{json,html}. Every mutation loads the
// JSON, computes the whole new state in memory, refuses before touching disk, then
// writes with temp+rename under a lock.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "ffpa/core/pep.h"
#include "ffpa/site/model.h"

namespace ffpa::site {

namespace fs = std::filesystem;

struct IndexLocation {
  fs::path root;  // the site root (--index-dir, or the site repository)
  std::string prefix = "whl";
  std::string channel = "cu13";
  fs::path channel_dir() const { return root / prefix / channel; }
  fs::path project_dir(const std::string& normalized) const { return channel_dir() / normalized; }
};

// Number of files whose bytes this process has hashed (wheels, and assets in verify).
// The scale benchmark reads it to prove that a merge hashes only the new files.
std::uint64_t files_hashed();
std::string hash_file(const fs::path& p);

// A wheel checked and measured once, before any step of add or publish runs.
struct PreparedWheel {
  fs::path path;
  ffpa::core::WheelFilename name;
  ffpa::core::Version version;
  std::string project;  // PEP 503 normalised
  std::string sha256;
  std::uint64_t size = 0;
  std::string metadata, metadata_sha256, requires_python;
};

// Parses the file name against the wheel grammar, verifies RECORD, hashes the file
// and reads METADATA. Throws ffpa::core::Error with a message that names the fix.
PreparedWheel prepare_wheel(const fs::path& p);

// "{tag}" in a release URL is replaced by the URL-encoded tag, so one setting serves
// every release; the result always ends with '/'.
std::string expand_release_url(const std::string& url, const std::string& tag);

struct AddOptions {
  std::string release_url;  // anchors are release_url + url-encoded file name
  // Whether <asset url>.metadata is served (PEP 658): only then may the page carry
  // core-metadata, because pip fetches exactly that URL and fails the install when
  // it is missing. publish uploads the file beside each asset, so it sets this.
  bool core_metadata = false;
  std::optional<fs::path> metadata_dir;  // write <wheel>.metadata here (the dir serving release_url)
  bool force = false;                    // FFPA_FORCE_UPLOAD=1: same name, other bytes, replaced
};

struct ChangeReport {
  std::size_t added = 0, replaced = 0, unchanged = 0, removed = 0, yanked = 0;
  bool changed() const { return added + replaced + removed + yanked > 0; }
};

// Loads a project page: its JSON, else a legacy HTML page imported once, else empty.
ProjectPage load_project(const IndexLocation& loc, const std::string& normalized);
std::vector<std::string> list_projects(const IndexLocation& loc);

// Throws (nothing written) when a wheel names a file already listed with other bytes,
// unless opt.force.
ChangeReport add_wheels(const IndexLocation& loc, const std::vector<PreparedWheel>& wheels,
                        const AddOptions& opt, std::ostream& log);

// Refuses, nothing written, when no file matches. A version with a local segment
// matches exactly; without one it matches every local build of that public version.
ChangeReport remove_version(const IndexLocation& loc, const std::string& version,
                            const std::optional<std::string>& project, std::ostream& log);
ChangeReport yank_version(const IndexLocation& loc, const std::string& version,
                          const std::optional<std::string>& project,
                          const std::optional<std::string>& reason, std::ostream& log);

// Re-renders every HTML page (and the root) from the JSON.
void render_all(const IndexLocation& loc, std::ostream& log);

// Recomputes every listed file's sha256 (and the .metadata beside it when the page
// advertises one) from a directory (files directly in it or one level down, as the
// dir: asset store keeps them per tag) or an http(s) base URL. Returns the number of
// problems; each is printed.
std::size_t verify_index(const IndexLocation& loc, const std::string& assets, std::ostream& log);

// Whether `version` (as given to remove/yank) selects the file `filename`.
bool version_matches(const std::string& filename, const ffpa::core::Version& wanted);

// The lock that serialises writers of one channel; kept outside the site tree so the
// tree holds only what is published.
fs::path lock_path_for(const IndexLocation& loc);

}  // namespace ffpa::site
