// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Publishing (docs/release.md sections 3-4): pluggable asset stores and the site
// repository, the CUDA-channel publish and the pure-wheel publish (publish.cpp,
// assets.cpp), and the external tools they run (process.cpp).
//
// Convergence after an interruption comes from making every step idempotent against
// the end state, not from a journal: each step first looks at what already exists
// (release present? asset present with these bytes? page lists this file with this
// hash? tree committed? branch pushed?) and does only what is missing. Every write
// is atomic (temp + rename, or a single git/gh operation), so a kill leaves each
// piece either absent or whole, and a re-run of the same command finishes the job.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ffpa/site/index.h"

namespace ffpa::site {

namespace fs = std::filesystem;

// --- running tools ----------------------------------------------------------------

// Running the external tools the backends drive (git, gh, twine, curl): argv
// vectors, never a shell, so file names with odd characters cannot inject anything.

struct ProcResult {
  int status = -1;       // exit status; 127 when the program could not be started
  std::string out, err;  // captured stdout and stderr
};

// Runs argv with stdin from /dev/null and captures its output.
ProcResult run_process(const std::vector<std::string>& argv);

// POSIX shell quoting, so a printed command can be pasted as is.
std::string shell_quote(const std::string& s);
std::string format_command(const std::vector<std::string>& argv);

// The program as it would be run: absolute/relative paths kept, bare names searched
// in PATH. Empty when not found.
std::string find_program(const std::string& name);

// A fresh private directory under $TMPDIR (mkdtemp), removed with its contents by
// the destructor, so scratch files of a run never pile up across runs.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Why files cannot be created in directory `dir` (empty when they can): the nearest
// existing ancestor is not a directory, or is not writable. Read-only: nothing is
// created, so preflight can ask it of every place a later step writes to.
std::string unwritable_dir_problem(const std::filesystem::path& dir);

// Program to use for `tool`: the environment override (e.g. FFPA_GH) if set, else
// the bare name.
std::string tool_program(const char* env_var, const char* default_name);

// --- publishing ---------------------------------------------------------------------

struct ReleaseSpec {
  std::string tag, target, notes;
  bool latest = true;  // false for CUDA releases: the pure release vV stays "latest"
};

class AssetStore {
 public:
  virtual ~AssetStore() = default;
  virtual std::string spec() const = 0;
  // Missing tools or credentials, each with its fix. Read-only.
  virtual std::vector<std::string> preflight() = 0;
  // What would keep create_release/upload for `tag` from working (a place that cannot
  // be written), each with its fix. Read-only.
  virtual std::vector<std::string> preflight_release(const std::string& /*tag*/) { return {}; }
  // Asset names of the release, or nullopt when the release does not exist.
  virtual std::optional<std::vector<std::string>> list_assets(const std::string& tag) = 0;
  virtual std::string asset_sha256(const std::string& tag, const std::string& name) = 0;
  virtual void create_release(const ReleaseSpec& r) = 0;
  // Uploads one file under its own name; replaces an existing asset only if clobber.
  virtual void upload(const std::string& tag, const fs::path& file, bool clobber) = 0;
  // The exact commands create_release/upload run (printed by --dry-run); empty for
  // stores that run none.
  virtual std::vector<std::string> create_command(const ReleaseSpec& r) const = 0;
  virtual std::vector<std::string> upload_command(const std::string& tag, const fs::path& file, bool clobber) const = 0;
  // Where the store serves a release's assets, "{tag}" standing for the tag.
  virtual std::string default_release_url() const = 0;
  virtual std::string default_site_url() const = 0;
};

// "dir:PATH" (releases are PATH/<tag>/ holding the assets and .release.json) or
// "gh:OWNER/REPO" (the gh CLI; FFPA_GH overrides the program). Throws on others.
std::unique_ptr<AssetStore> make_asset_store(const std::string& spec);

struct PublishOptions {
  std::string tag;                     // vV+CHANNEL
  std::vector<fs::path> wheels;
  std::vector<fs::path> extra_assets;  // uploaded beside the wheels (requirements-<channel>.txt)
  fs::path site_repo;                  // git work tree of the site, on `branch`
  std::string assets;                  // dir:PATH | gh:OWNER/REPO
  std::string release_url;             // anchor base; "{tag}" expands; default from the store
  std::string site_url;                // for the install notes; default from the store
  std::string index_prefix = "whl";
  std::string channel = kDefaultChannel;
  std::string remote = "origin", branch = "gh-pages";
  std::string target;                  // commit the release tag points at
  fs::path source_dir = ".";           // where `target` defaults to HEAD
  bool index_only = false, dry_run = false;
  bool core_metadata_for_mirror = false;  // --index-only: the original assets serve .metadata
};

int publish(const PublishOptions& opt, std::ostream& out, std::ostream& err);

struct PurePublishOptions {
  std::string tag;  // vV
  fs::path wheel;
  std::string repository_url = "https://upload.pypi.org/legacy/";
  std::string simple_url;  // where the version check looks; derived when empty
  std::string assets;      // empty: no GitHub/dir release
  std::string target;
  fs::path source_dir = ".";
  bool dry_run = false;
};

int publish_pure(const PurePublishOptions& opt, std::ostream& out, std::ostream& err);

// Where "is V already there?" is answered for a twine repository URL.
std::string simple_url_for(const std::string& repository_url);

// FFPA_FORCE_UPLOAD=1: a file of a listed name (or version and tags) with other bytes
// is replaced instead of refused (add, publish, publish-pure).
bool force_upload();

// FFPA_PUBLISH_KILL_AT=<step>: test-only fault injection, raise(SIGKILL) right after
// that step boundary. Steps: release, upload-1 (after the first wheel), upload,
// index, commit (publish); pypi, release (publish-pure).
void kill_point(const char* step);

}  // namespace ffpa::site
