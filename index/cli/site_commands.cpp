// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The index and publishing commands of ffpa-index (index/site does the work).
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "args.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/manifest.h"
#include "ffpa/site/index.h"
#include "ffpa/site/publish.h"

namespace ffpa::cli {

namespace {

using core::Error;
using namespace ffpa::site;  // NOLINT(google-build-using-namespace): the commands' library
using K = Args::Kind;

#define FFPA_CH FFPA_INDEX_DEFAULT_CHANNEL
const char* const kAddHelp =
       "usage: ffpa-index add --index-dir DIR [--channel " FFPA_CH "] [--index-prefix whl] --release-url URL\n"
       "                      [--metadata-dir DIR] WHEEL...\n"
       "Merge wheels into DIR/<prefix>/<channel>/<project>/index.{json,html} and the channel root page.\n"
       "Earlier entries are kept; only the given wheels are hashed. A wheel that does not verify or is not\n"
       "named canonically, another spelling of a listed version, or a channel holding anything but its\n"
       "pages is refused, nothing written (docs/release.md section 3; index/README.md, \"The index\").\n"
       "  --release-url URL   where the files are served from: each anchor is URL + file name, with\n"
       "                      \"{tag}\" expanded to the file's v<version>. The page records it, and\n"
       "                      every anchor must derive from it (render and verify refuse any other\n"
       "                      URL); a page recording another one is refused (move it with render)\n"
       "  --metadata-dir DIR  write <wheel>.metadata into DIR and advertise it (data-core-metadata):\n"
       "                      DIR must be the directory served at --release-url, because pip fetches\n"
       "                      exactly <asset url>.metadata (PEP 658); without it no metadata is advertised\n"
       "  FFPA_FORCE_UPLOAD=1 replace an entry of the same name with other bytes (otherwise refused)\n"
       "  FFPA_PUBLISH_KILL_AT=add-metadata  test hook: SIGKILL once the .metadata files are written\n";
const char* const kRemoveHelp =
       "usage: ffpa-index remove --index-dir DIR [--channel " FFPA_CH "] [--index-prefix whl] --version V\n"
       "                         [--project NAME]\n"
       "Drop every file of version V from the channel's pages (V with a +local part matches exactly;\n"
       "without it, every local build of V). Also delete the release itself (gh release delete TAG\n"
       "--cleanup-tag, or its directory): deleting only one of the two leaves dangling anchors or assets.\n";
const char* const kYankHelp =
       "usage: ffpa-index yank --index-dir DIR [--channel " FFPA_CH "] [--index-prefix whl] --version V\n"
       "                       [--reason TEXT] [--project NAME]\n"
       "Mark version V yanked (PEP 592): pip skips it unless pinned with ==. Assets stay. TEXT must be\n"
       "UTF-8.\n";
const char* const kUnyankHelp =
       "usage: ffpa-index unyank --index-dir DIR [--channel " FFPA_CH "] [--index-prefix whl] --version V\n"
       "       [--project NAME]\n"
       "Undo a yank.\n";
const char* const kVerifyHelp =
       "usage: ffpa-index verify (--index-dir DIR | --index-url URL) [--channel " FFPA_CH "] [--index-prefix whl]\n"
       "                         --assets DIR|URL [--release-url URL]\n"
       "Check what pip reads: every page (fetched over HTTP from the served site with --index-url) must\n"
       "be what the engine writes for its index.json, with every file's URL derived from the page's\n"
       "release URL (--release-url, when given), and nothing else in the channel; then the sha256 and size\n"
       "of every listed file (and its advertised .metadata) from a directory (files in it or one level\n"
       "down, as the dir: store keeps them) or an http(s) base URL. Prints PAGE/FOREIGN/SPELLING/OK/\n"
       "MISMATCH/MISSING lines; exit 1 on any problem.\n";
const char* const kRenderHelp =
       "usage: ffpa-index render --index-dir DIR [--channel " FFPA_CH "] [--index-prefix whl] [--release-url URL]\n"
       "Re-render every HTML page of the channel from its index.json (after editing JSON by hand). A page\n"
       "whose files' URLs are not the ones derived from its release URL is refused, nothing written.\n"
       "  --release-url URL  record URL as every page's release URL and derive each file's URL from it:\n"
       "                     once for a page that records none (a legacy page), or to move the channel\n";
const char* const kPublishHelp =
       "usage: ffpa-index publish --tag vV+CHANNEL (--wheels WHEEL... | --wheels-dir DIR | --manifest FILE)\n"
       "         --site-repo DIR --assets dir:PATH|gh:OWNER/REPO [--release-url URL] [--channel " FFPA_CH "]\n"
       "         [--index-only [--core-metadata]] [--site-url URL] [--index-prefix whl] [--target SHA]\n"
       "         [--source-dir DIR] [--remote origin] [--branch gh-pages] [--dry-run]\n"
       "The four steps of a CUDA release, in order: (1) create release vV+CHANNEL (not latest, no title,\n"
       "notes = install commands, tag at --target, default HEAD of --source-dir); (2) upload every wheel\n"
       "and its <wheel>.metadata (PEP 658) as assets; (3) merge them into the index in the site repo;\n"
       "(4) commit exactly the pages step 3 wrote and push its branch. Re-running after any interruption\n"
       "converges: each step skips what is already done. What is refused before anything is created, and\n"
       "what preflight checks: docs/release.md section 3 (FFPA_FORCE_UPLOAD=1 replaces other bytes).\n"
       "  --release-url URL  anchor base; \"{tag}\" expands to the URL-encoded tag; default for gh: is\n"
       "                     https://github.com/OWNER/REPO/releases/download/<tag>/\n"
       "  --index-only       mirror: only steps 3-4, anchors at --release-url (required)\n"
       "  --core-metadata    with --index-only: the original assets serve <wheel>.metadata\n"
       "  --wheels-dir DIR   publish DIR's wheels of version V+CHANNEL\n"
       "  --manifest FILE    publish the cuda wheels of ffpa-release-manifest.json (beside them, or in\n"
       "                     --wheels-dir); their sha256 must still match; --target defaults to its\n"
       "                     source_commit\n"
       "  --dry-run          preflight, then print the plan and the exact commands; change nothing\n"
       "  FFPA_GH, FFPA_GIT  programs to run instead of gh and git\n"
       "  FFPA_PUBLISH_KILL_AT=release|upload-1|upload|index|commit  test hook: SIGKILL at that boundary\n";
const char* const kPublishPureHelp =
       "usage: ffpa-index publish-pure --tag vV (--wheel ffpa_attn-V-py3-none-any.whl | --manifest FILE)\n"
       "         [--repository-url URL] [--simple-url URL] [--assets dir:PATH|gh:OWNER/REPO]\n"
       "         [--target SHA] [--source-dir DIR] [--dry-run]\n"
       "Upload the pure wheel with twine (default https://upload.pypi.org/legacy/), refusing a version\n"
       "already on the index (--simple-url, derived from the repository URL: PyPI -> pypi.org/simple,\n"
       "otherwise <repository-url>/simple/), then create the plain release vV at --target (explicitly:\n"
       "the default branch is not always the release commit) and attach the wheel.\n"
       "  FFPA_TWINE, FFPA_CURL  programs to run instead of twine and curl; twine reads TWINE_USERNAME /\n"
       "                         TWINE_PASSWORD\n"
       "  FFPA_PUBLISH_KILL_AT=pypi|release  test hook\n";

// The channel of a site: in the directory --index-dir, unless `dir` is false (verify
// --index-url reads a served site).
IndexLocation location(const Args& a, bool dir = true) {
  IndexLocation loc{dir ? a.need("--index-dir", "DIR") : "", a.get_or("--index-prefix", "whl"),
                    a.get_or("--channel", FFPA_CH)};
  check_index_path(loc.prefix, "--index-prefix");
  check_index_path(loc.channel, "--channel");
  return loc;
}

// The flags of a command that works on one channel of a site directory, and `more`.
std::map<std::string, K> on_channel(std::map<std::string, K> more) {
  more.insert({{"--index-dir", K::kValue}, {"--channel", K::kValue}, {"--index-prefix", K::kValue}});
  return more;
}

int cmd_add(const Args& a) {
  auto loc = location(a);
  if (a.positional().empty()) throw UsageError("no wheels given");
  AddOptions o;
  o.release_url = a.need("--release-url", "URL (where the anchors point)");
  std::vector<PreparedWheel> wheels;
  for (const auto& p : a.positional()) wheels.push_back(prepare_wheel(p));
  o.metadata_dir = a.get("--metadata-dir");
  o.core_metadata = o.metadata_dir.has_value();
  o.force = force_upload();
  // Taken once the wheels are known good: a refused input leaves the site alone.
  const SiteLock lock(loc.root, /*create_root=*/true);
  add_wheels(loc, wheels, o, std::cout, lock);
  std::cout << "hashed " << files_hashed() << " file(s)\n";
  return 0;
}

int cmd_edit(const Args& a, Edit edit, const char* done) {
  auto loc = location(a);
  const std::string v = a.need("--version", "V");
  a.no_positional();
  const SiteLock lock(loc.root);
  std::cout << edit_version(loc, edit, v, a.get("--project"), a.get("--reason"), std::cout, lock) << " file(s) "
            << done << "\n";
  return 0;
}

int cmd_verify(const Args& a) {
  const std::string assets = a.need("--assets", "DIR|URL");
  if (a.has("--index-dir") == a.has("--index-url"))
    throw UsageError("give exactly one of --index-dir DIR (the site checkout) and --index-url URL (the served site)");
  const PageSource src{location(a, a.has("--index-dir")), a.get("--index-url"), a.get("--release-url")};
  // Read under the site lock, so a writer's JSON and HTML are never seen half way.
  std::optional<SiteLock> lock;
  if (!src.url) lock.emplace(src.loc.root);
  return verify_index(src, assets, std::cout) == 0 ? 0 : 1;
}

int cmd_render(const Args& a) {
  const auto loc = location(a);
  const SiteLock lock(loc.root);
  render_all(loc, a.get("--release-url"), std::cout, lock);
  return 0;
}

// The wheels of a release manifest (ffpa-release-manifest.json, the engine's one
// reader checks it): those of `kind`, with the source commit and the other assets.
struct FromManifest {
  std::string commit;
  std::vector<fs::path> wheels, extra;
};

FromManifest from_manifest(const fs::path& file, const std::optional<std::string>& wheels_dir, const char* kind) {
  const auto man = core::read_release(file, core::ReleaseForm::manifest);
  if (auto why = core::unpublishable_profile(man)) throw Error(file.string() + ": " + *why);
  if (man.source_dirty)
    throw Error(file.string() + " records a build from uncommitted sources; such artefacts correspond to no "
                "commit and are not published: commit, rebuild, publish");
  const fs::path dir = wheels_dir ? fs::path(*wheels_dir) : file.parent_path();
  // The bytes must still be the ones packaged: dist/ edited afterwards is refused.
  auto unchanged = [&](const std::string& name, const std::string& sha256) {
    const fs::path p = dir / name;
    if (!fs::exists(p) || hash_file(p) != sha256)
      throw Error(p.string() + " is missing or differs from the sha256 in " + file.string() +
                  "; dist/ changed after packaging: rebuild the release");
    return p;
  };
  FromManifest m{man.source_commit, {}, {}};
  for (const auto& w : man.wheels)
    if (w.kind == kind) m.wheels.push_back(unchanged(w.file, w.sha256));
  if (man.requirements && std::string(kind) == "cuda")
    m.extra.push_back(unchanged(man.requirements->file, man.requirements->sha256));
  return m;
}

// The wheels of DIR whose version is the tag's (other files in dist/, the pure wheel
// or older builds, are left alone) and, with `pure`, only the py3-none-any one.
std::vector<fs::path> wheels_from_dir(const fs::path& dir, const std::string& tag, bool pure) {
  std::vector<fs::path> out;
  const auto tv = core::parse_pep440(tag.size() > 1 ? tag.substr(1) : tag);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    auto wf = core::parse_wheel_filename(e.path().filename().string());
    auto wv = wf ? core::parse_pep440(wf->version) : std::nullopt;
    if (wv && tv && wv->canonical == tv->canonical && (!pure || (wf->abi == "none" && wf->platform == "any")))
      out.push_back(e.path());
  }
  if (ec) throw Error("cannot list --wheels-dir " + dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  if (out.empty())
    throw Error("no " + std::string(pure ? "py3-none-any wheel" : "wheel") + " of " + tag + " in " + dir.string() +
                "; build the release first");
  return out;
}

int cmd_publish(const Args& a) {
  PublishOptions o;
  o.tag = a.need("--tag", "vV+CHANNEL");
  o.site_repo = a.need("--site-repo", "DIR");
  o.index_only = a.has("--index-only");
  if (!o.index_only) o.assets = a.need("--assets", "dir:PATH|gh:OWNER/REPO");
  o.release_url = a.get_or("--release-url", "");
  o.site_url = a.get_or("--site-url", "");
  o.index_prefix = a.get_or("--index-prefix", "whl");
  o.channel = a.get_or("--channel", FFPA_CH);
  o.target = a.get_or("--target", "");
  o.source_dir = a.get_or("--source-dir", ".");
  o.remote = a.get_or("--remote", "origin");
  o.branch = a.get_or("--branch", "gh-pages");
  o.dry_run = a.has("--dry-run");
  o.core_metadata_for_mirror = a.has("--core-metadata");
  for (const auto& w : a.all("--wheels")) o.wheels.emplace_back(w);
  for (const auto& w : a.positional()) o.wheels.emplace_back(w);
  if (auto m = a.get("--manifest")) {
    auto man = from_manifest(*m, a.get("--wheels-dir"), "cuda");
    o.wheels.insert(o.wheels.end(), man.wheels.begin(), man.wheels.end());
    o.extra_assets = man.extra;
    if (o.target.empty()) o.target = man.commit;
  } else if (auto d = a.get("--wheels-dir")) {
    auto more = wheels_from_dir(*d, o.tag, false);
    o.wheels.insert(o.wheels.end(), more.begin(), more.end());
  }
  return publish(o, std::cout, std::cerr);
}

int cmd_publish_pure(const Args& a) {
  PurePublishOptions o;
  o.tag = a.need("--tag", "vV");
  o.target = a.get_or("--target", "");
  if (auto w = a.get("--wheel")) {
    o.wheel = *w;
  } else if (auto m = a.get("--manifest")) {
    auto man = from_manifest(*m, a.get("--wheels-dir"), "pure");
    if (man.wheels.size() != 1)
      throw Error(*m + " lists " + std::to_string(man.wheels.size()) + " pure wheels, expected exactly one");
    o.wheel = man.wheels.front();
    if (o.target.empty()) o.target = man.commit;
  } else if (auto d = a.get("--wheels-dir")) {
    o.wheel = wheels_from_dir(*d, o.tag, true).front();
  } else {
    throw UsageError("--wheel WHEEL (or --wheels-dir DIR) is required");
  }
  o.repository_url = a.get_or("--repository-url", o.repository_url);
  o.simple_url = a.get_or("--simple-url", "");
  o.assets = a.get_or("--assets", "");
  o.source_dir = a.get_or("--source-dir", ".");
  o.dry_run = a.has("--dry-run");
  return publish_pure(o, std::cout, std::cerr);
}

}  // namespace

std::vector<Command> site_commands() {
  const auto version = [](Edit edit, const char* done) {
    return [edit, done](const Args& a) { return cmd_edit(a, edit, done); };
  };
  return {
      {"add", kAddHelp, on_channel({{"--release-url", K::kValue}, {"--metadata-dir", K::kValue}}), cmd_add},
      {"remove", kRemoveHelp, on_channel({{"--version", K::kValue}, {"--project", K::kValue}}),
       version(Edit::remove, "removed")},
      {"yank", kYankHelp, on_channel({{"--version", K::kValue}, {"--project", K::kValue}, {"--reason", K::kValue}}),
       version(Edit::yank, "yanked")},
      {"unyank", kUnyankHelp, on_channel({{"--version", K::kValue}, {"--project", K::kValue}}),
       version(Edit::unyank, "unyanked")},
      {"verify", kVerifyHelp,
       on_channel({{"--assets", K::kValue}, {"--index-url", K::kValue}, {"--release-url", K::kValue}}), cmd_verify},
      {"render", kRenderHelp, on_channel({{"--release-url", K::kValue}}), cmd_render},
      {"publish", kPublishHelp,
       {{"--tag", K::kValue}, {"--site-repo", K::kValue}, {"--assets", K::kValue}, {"--release-url", K::kValue},
        {"--site-url", K::kValue}, {"--index-prefix", K::kValue}, {"--channel", K::kValue}, {"--target", K::kValue},
        {"--source-dir", K::kValue}, {"--remote", K::kValue}, {"--branch", K::kValue}, {"--wheels-dir", K::kValue},
        {"--manifest", K::kValue}, {"--wheels", K::kList}, {"--index-only", K::kFlag}, {"--dry-run", K::kFlag},
        {"--core-metadata", K::kFlag}},
       cmd_publish},
      {"publish-pure", kPublishPureHelp,
       {{"--tag", K::kValue}, {"--wheel", K::kValue}, {"--repository-url", K::kValue}, {"--simple-url", K::kValue},
        {"--assets", K::kValue}, {"--target", K::kValue}, {"--source-dir", K::kValue}, {"--wheels-dir", K::kValue},
        {"--manifest", K::kValue}, {"--dry-run", K::kFlag}},
       cmd_publish_pure},
  };
}

}  // namespace ffpa::cli
