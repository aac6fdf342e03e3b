// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Asset stores: a plain directory (tests, local mirrors) and GitHub releases via gh.
#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/utf8.h"
#include "ffpa/site/index.h"
#include "ffpa/site/publish.h"

namespace ffpa::site {

using core::Error;

namespace {

class DirStore final : public AssetStore {
 public:
  explicit DirStore(fs::path root) : root_(fs::absolute(std::move(root)).lexically_normal()) {}
  std::string spec() const override { return "dir:" + root_.string(); }

  std::vector<std::string> preflight() override {
    std::error_code ec;
    if (fs::exists(root_, ec) && !fs::is_directory(root_, ec))
      return {"asset store " + root_.string() + " exists and is not a directory; point dir: at a directory"};
    if (std::string why = unwritable_dir_problem(root_); !why.empty()) return {"asset store: " + why};
    return {};
  }

  std::vector<std::string> preflight_release(const std::string& tag) override {
    // A store root that cannot be written is preflight()'s to report, once.
    if (!unwritable_dir_problem(root_).empty()) return {};
    if (std::string why = unwritable_dir_problem(root_ / tag); !why.empty()) return {"asset store: " + why};
    return {};
  }

  std::optional<std::vector<std::string>> list_assets(const std::string& tag) override {
    const fs::path dir = root_ / tag;
    if (!fs::exists(dir / ".release.json")) return std::nullopt;
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (it->is_regular_file(ec) && n[0] != '.') names.push_back(n);
    }
    if (ec) throw Error("cannot list release " + dir.string() + ": " + ec.message() + "; fix its permissions");
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string asset_sha256(const std::string& tag, const std::string& name) override {
    return hash_file(root_ / tag / name);
  }

  void create_release(const ReleaseSpec& r) override {
    // The release exists once .release.json does; it is written last and atomically.
    fs::create_directories(root_ / r.tag);
    sweep(r.tag);
    const nlohmann::json j = {{"tag", r.tag}, {"target", r.target}, {"latest", r.latest}, {"notes", r.notes}};
    core::write_file_atomic(root_ / r.tag / ".release.json", j.dump(1) + "\n");
  }

  void upload(const std::string& tag, const fs::path& file, bool clobber) override {
    const fs::path dst = root_ / tag / file.filename();
    if (fs::exists(dst) && !clobber)
      throw Error(dst.string() + " already exists; refusing to overwrite an asset");
    sweep(tag);
    // A short temp name: the asset's own name may already be near the 255-byte limit.
    core::AtomicOutput out(dst, ".ffpa-upload.");
    const core::InputFile in(file);
    for (std::uint64_t off = 0; off < in.size(); off += std::uint64_t{1} << 20)
      out.write(in.read(off, std::min<std::uint64_t>(in.size() - off, std::uint64_t{1} << 20)));
    out.commit();
  }

  std::vector<std::string> create_command(const ReleaseSpec&) const override { return {}; }
  std::vector<std::string> upload_command(const std::string&, const fs::path&, bool) const override {
    return {};
  }

  std::string default_release_url() const override { return "file://" + root_.string() + "/{tag}/"; }
  std::string default_site_url() const override { return ""; }

 private:
  // Temp files of a killed create or upload are this store's own: removed once per
  // release by the next write into it (publishes of one site never overlap).
  void sweep(const std::string& tag) {
    if (!swept_.insert(tag).second) return;
    std::error_code ec;
    for (fs::directory_iterator it(root_ / tag, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (n.rfind(".ffpa-upload.", 0) == 0 || n.rfind("..release.json.tmp.", 0) == 0) fs::remove(it->path(), ec);
    }
  }

  fs::path root_;
  std::set<std::string> swept_;  // releases whose stale temp files are gone
};

class GhStore final : public AssetStore {
 public:
  explicit GhStore(std::string repo) : repo_(std::move(repo)), gh_(tool_program("FFPA_GH", "gh")) {
    const auto slash = repo_.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == repo_.size() ||
        repo_.find('/', slash + 1) != std::string::npos)
      throw Error("gh:" + repo_ + " is not gh:OWNER/REPO");
    owner_ = repo_.substr(0, slash);
    name_ = repo_.substr(slash + 1);
  }
  std::string spec() const override { return "gh:" + repo_; }

  std::vector<std::string> preflight() override {
    if (find_program(gh_).empty())
      return {"gh (GitHub CLI) not found as '" + gh_ +
              "'; install it (https://cli.github.com) or set FFPA_GH to its path"};
    auto r = run_process({gh_, "auth", "status"});
    if (r.status != 0)
      return {"gh is not authenticated (gh auth status failed: " + first_line(r.err + r.out) +
              "); run: gh auth login, or export GH_TOKEN with contents:write on " + repo_};
    return {};
  }

  std::optional<std::vector<std::string>> list_assets(const std::string& tag) override {
    auto r = run_process({gh_, "release", "view", tag, "--repo", repo_, "--json", "assets", "--jq", ".assets[].name"});
    if (r.status != 0) {
      if ((r.err + r.out).find("not found") != std::string::npos) return std::nullopt;
      throw Error("gh release view " + tag + " failed: " + first_line(r.err + r.out) +
                  "; check gh auth status and the repository name");
    }
    std::vector<std::string> names = core::split(r.out, '\n');
    names.erase(std::remove(names.begin(), names.end(), ""), names.end());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string asset_sha256(const std::string& tag, const std::string& name) override {
    const TempDir tmp("ffpa-gh-");
    auto r = run_process({gh_, "release", "download", tag, "--repo", repo_, "--pattern", name, "--dir",
                          tmp.path().string(), "--clobber"});
    if (r.status != 0 || !fs::exists(tmp.path() / name))
      throw Error("could not download asset " + name + " of " + tag + " to compare it: " + first_line(r.err + r.out));
    return hash_file(tmp.path() / name);
  }

  void create_release(const ReleaseSpec& r) override { run_or_throw(create_command(r)); }
  void upload(const std::string& tag, const fs::path& file, bool clobber) override {
    run_or_throw(upload_command(tag, file, clobber));
  }

  std::vector<std::string> create_command(const ReleaseSpec& r) const override {
    // No --title: gh then titles the release with the tag, as earlier releases are.
    std::vector<std::string> cmd = {gh_, "release", "create", r.tag, "--repo", repo_,
                                    "--target", r.target, "--notes", r.notes};
    if (!r.latest) cmd.push_back("--latest=false");
    return cmd;
  }
  std::vector<std::string> upload_command(const std::string& tag, const fs::path& file, bool clobber) const override {
    std::vector<std::string> cmd = {gh_, "release", "upload", tag, file.string(), "--repo", repo_};
    if (clobber) cmd.push_back("--clobber");
    return cmd;
  }

  std::string default_release_url() const override { return "https://github.com/" + repo_ + "/releases/download/{tag}/"; }
  std::string default_site_url() const override {
    return "https://" + core::lower_ascii(owner_) + ".github.io/" + name_;
  }

 private:
  static std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
  static void run_or_throw(const std::vector<std::string>& cmd) {
    auto r = run_process(cmd);
    if (r.status != 0)
      throw Error(format_command(cmd) + " failed (exit " + std::to_string(r.status) + "): " + r.err + r.out +
                  "re-run the same publish command once the cause is fixed; finished steps are skipped");
  }
  std::string repo_, owner_, name_, gh_;
};

}  // namespace

std::unique_ptr<AssetStore> make_asset_store(const std::string& spec) {
  if (spec.rfind("dir:", 0) == 0 && spec.size() > 4) return std::make_unique<DirStore>(spec.substr(4));
  if (spec.rfind("gh:", 0) == 0) return std::make_unique<GhStore>(spec.substr(3));
  throw Error("--assets '" + spec + "' is not dir:PATH or gh:OWNER/REPO");
}

}  // namespace ffpa::site
