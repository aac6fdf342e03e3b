// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Subcommand front end: flags of the old release scripts, --help on each.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/manifest.h"
#include "ffpa/site/args.h"
#include "ffpa/site/index.h"
#include "ffpa/site/publish.h"
#include "ffpa/site/site.h"

namespace ffpa::site {

namespace {

using ffpa::core::Error;

const std::map<std::string, std::string>& help_texts() {
  static const std::map<std::string, std::string> h = {
      {"add",
       "usage: ffpa-index add --index-dir DIR [--channel cu13] [--index-prefix whl] --release-url URL\n"
       "                      [--metadata-dir DIR] WHEEL...\n"
       "Merge wheels into DIR/<prefix>/<channel>/<project>/index.{json,html} and the channel root page.\n"
       "Earlier entries are kept; only the given wheels are hashed. Each wheel must verify (RECORD,\n"
       "METADATA, ELF vs tag) under its canonical PEP 427/625 file name (normalized project, canonical\n"
       "version), the same version and tags may not be listed under another spelling, and the channel\n"
       "may hold only the pages ffpa-index writes; otherwise nothing is written. Add, remove, yank,\n"
       "unyank, render and publish of one site take one lock, on the site directory itself (whatever\n"
       "the spelling of its path), and remove temp files a killed run left.\n"
       "  --release-url URL   where the files are served from: each anchor is URL + file name, with\n"
       "                      \"{tag}\" expanded to the file's v<version>. The page records it, and\n"
       "                      every anchor must derive from it (render and verify refuse any other\n"
       "                      URL); a page recording another one is refused (move it with render)\n"
       "  --metadata-dir DIR  write <wheel>.metadata into DIR and advertise it (data-core-metadata):\n"
       "                      DIR must be the directory served at --release-url, because pip fetches\n"
       "                      exactly <asset url>.metadata (PEP 658); without it no metadata is advertised\n"
       "  FFPA_FORCE_UPLOAD=1 replace an entry of the same name with other bytes (otherwise refused)\n"
       "All or nothing: a failed add (disk full, a file-size limit) restores what it wrote; the .metadata\n"
       "files a killed one left in DIR are removed by the next add --metadata-dir DIR.\n"
       "  FFPA_PUBLISH_KILL_AT=add-metadata  test hook: SIGKILL once the .metadata files are written\n"},
      {"remove",
       "usage: ffpa-index remove --index-dir DIR [--channel cu13] [--index-prefix whl] --version V\n"
       "                         [--project NAME]\n"
       "Drop every file of version V from the channel's pages (V with a +local part matches exactly;\n"
       "without it, every local build of V). Also delete the release itself (gh release delete TAG\n"
       "--cleanup-tag, or its directory): deleting only one of the two leaves dangling anchors or assets.\n"},
      {"yank",
       "usage: ffpa-index yank --index-dir DIR [--channel cu13] [--index-prefix whl] --version V\n"
       "                       [--reason TEXT] [--project NAME]\n"
       "Mark version V yanked (PEP 592): pip skips it unless pinned with ==. Assets stay. TEXT must be\n"
       "UTF-8.\n"},
      {"unyank",
       "usage: ffpa-index unyank --index-dir DIR [--channel cu13] [--index-prefix whl] --version V\n"
       "       [--project NAME]\n"
       "Undo a yank.\n"},
      {"verify",
       "usage: ffpa-index verify (--index-dir DIR | --index-url URL) [--channel cu13] [--index-prefix whl]\n"
       "                         --assets DIR|URL [--release-url URL]\n"
       "Check what pip reads. The pages: every project's index.html (and the channel's root page) must be\n"
       "exactly what its index.json renders to, each index.json what the engine writes, every file's URL\n"
       "the one derived from the page's release URL (and that URL --release-url, when given), and the\n"
       "channel must hold nothing else; with --index-url\n"
       "(the served site root) both index.json and index.html are fetched over HTTP. The files: recompute\n"
       "the sha256 and size of every listed file (and of its .metadata when advertised) from a directory (files\n"
       "directly in it, or in one subdirectory per tag as the dir: store keeps them) or from an http(s)\n"
       "base URL (files whose recorded URL starts with it are fetched from that URL, others from URL +\n"
       "file name). Prints PAGE/FOREIGN/SPELLING/OK/MISMATCH/MISSING lines; exit 1 on any problem.\n"},
      {"render",
       "usage: ffpa-index render --index-dir DIR [--channel cu13] [--index-prefix whl] [--release-url URL]\n"
       "Re-render every HTML page of the channel from its index.json (after editing JSON by hand). A page\n"
       "whose files' URLs are not the ones derived from its release URL is refused, nothing written.\n"
       "  --release-url URL  record URL as every page's release URL and derive each file's URL from it:\n"
       "                     once for a page that records none (a legacy page), or to move the channel\n"},
      {"publish",
       "usage: ffpa-index publish --tag vV+CHANNEL (--wheels WHEEL... | --wheels-dir DIR | --manifest FILE)\n"
       "         --site-repo DIR --assets dir:PATH|gh:OWNER/REPO [--release-url URL] [--channel cu13]\n"
       "         [--index-only [--core-metadata]] [--site-url URL] [--index-prefix whl] [--target SHA]\n"
       "         [--source-dir DIR] [--remote origin] [--branch gh-pages] [--dry-run]\n"
       "The four steps of a CUDA release, in order: (1) create release vV+CHANNEL (not latest, no title,\n"
       "notes = install commands, tag at --target, default HEAD of --source-dir); (2) upload every wheel\n"
       "and its <wheel>.metadata (PEP 658) as assets; (3) merge them into the index in the site repo;\n"
       "(4) commit and push its branch. Re-running after any interruption converges: each step skips\n"
       "what is already done. Refused before anything is created: a pre-release/dev wheel, a tag for\n"
       "another version, a name already published with other bytes (FFPA_FORCE_UPLOAD=1 overrides),\n"
       "a wheel that does not verify or is not named canonically, a tag not spelled v<canonical version>,\n"
       "a --target that is not a commit of --source-dir, a channel that cmake/release-matrix.json of\n"
       "--source-dir does not list, and any failed preflight check (tools, gh auth, release holding other files, a store or\n"
       "site that cannot be written, a wheel name too long to store, site repo state, foreign files or\n"
       "uncommitted changes in the channel that this publish would not write). Step 4 commits exactly\n"
       "the pages step 3 wrote.\n"
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
       "  FFPA_PUBLISH_KILL_AT=release|upload-1|upload|index|commit  test hook: SIGKILL at that boundary\n"},
      {"publish-pure",
       "usage: ffpa-index publish-pure --tag vV (--wheel ffpa_attn-V-py3-none-any.whl | --manifest FILE)\n"
       "         [--repository-url URL] [--simple-url URL] [--assets dir:PATH|gh:OWNER/REPO]\n"
       "         [--target SHA] [--source-dir DIR] [--dry-run]\n"
       "Upload the pure wheel with twine (default https://upload.pypi.org/legacy/), refusing a version\n"
       "already on the index (--simple-url, derived from the repository URL: PyPI -> pypi.org/simple,\n"
       "otherwise <repository-url>/simple/), then create the plain release vV at --target (explicitly:\n"
       "the default branch is not always the release commit) and attach the wheel.\n"
       "  FFPA_TWINE, FFPA_CURL  programs to run instead of twine and curl; twine reads TWINE_USERNAME /\n"
       "                         TWINE_PASSWORD\n"
       "  FFPA_PUBLISH_KILL_AT=pypi|release  test hook\n"},
  };
  return h;
}

int usage(const std::string& cmd, const std::string& msg) {
  std::cerr << "ffpa-index " << cmd << ": " << msg << "\n" << help_texts().at(cmd);
  return 2;
}

IndexLocation location(const Args& a, const std::string& cmd) {
  auto dir = a.get("--index-dir");
  if (!dir) throw UsageError("--index-dir DIR is required");
  (void)cmd;
  IndexLocation loc{*dir, a.get_or("--index-prefix", "whl"), a.get_or("--channel", "cu13")};
  check_index_path(loc.prefix, "--index-prefix");
  check_index_path(loc.channel, "--channel");
  return loc;
}

const std::set<std::string> kLocFlags = {"--index-dir", "--channel", "--index-prefix"};

std::set<std::string> with(std::set<std::string> s, std::initializer_list<std::string> more) {
  s.insert(more);
  return s;
}

std::optional<std::string> opt_flag(const Args& a, const std::string& f) { return a.get(f); }

int cmd_add(int argc, char** argv) {
  Args a(argc, argv, with(kLocFlags, {"--release-url", "--metadata-dir"}), {}, {});
  auto loc = location(a, "add");
  if (a.positional().empty()) throw UsageError("no wheels given");
  auto url = a.get("--release-url");
  if (!url) throw UsageError("--release-url URL is required: it is where the anchors point");
  std::vector<PreparedWheel> wheels;
  for (const auto& p : a.positional()) wheels.push_back(prepare_wheel(p));
  AddOptions o;
  o.release_url = *url;
  if (auto md = a.get("--metadata-dir")) {
    o.metadata_dir = fs::path(*md);
    o.core_metadata = true;
  }
  const char* f = std::getenv("FFPA_FORCE_UPLOAD");
  o.force = f && std::string(f) == "1";
  // Taken once the wheels are known good: a refused input leaves the site alone.
  const SiteLock lock(loc.root, /*create_root=*/true);
  add_wheels(loc, wheels, o, std::cout, lock);
  std::cout << "hashed " << files_hashed() << " file(s)\n";
  return 0;
}

int cmd_remove_yank(int argc, char** argv, const std::string& cmd) {
  Args a(argc, argv, with(kLocFlags, {"--version", "--reason", "--project"}), {}, {});
  auto loc = location(a, cmd);
  auto v = a.get("--version");
  if (!v) throw UsageError("--version V is required");
  if (!a.positional().empty()) throw UsageError("unexpected argument '" + a.positional()[0] + "'");
  if (cmd != "yank" && a.has("--reason")) throw UsageError("--reason belongs to yank");
  const SiteLock lock(loc.root);
  if (cmd == "remove") {
    auto r = remove_version(loc, *v, opt_flag(a, "--project"), std::cout, lock);
    std::cout << r.removed << " file(s) removed\n";
  } else if (cmd == "yank") {
    auto r = yank_version(loc, *v, opt_flag(a, "--project"), a.get("--reason"), std::cout, lock);
    std::cout << r.yanked << " file(s) yanked\n";
  } else {
    auto r = unyank_version(loc, *v, opt_flag(a, "--project"), std::cout, lock);
    std::cout << r.unyanked << " file(s) unyanked\n";
  }
  return 0;
}

int cmd_verify(int argc, char** argv) {
  Args a(argc, argv, with(kLocFlags, {"--assets", "--index-url", "--release-url"}), {}, {});
  auto assets = a.get("--assets");
  if (!assets) throw UsageError("--assets DIR|URL is required");
  PageSource src;
  if (a.has("--index-dir") == a.has("--index-url"))
    throw UsageError("give exactly one of --index-dir DIR (the site checkout) and --index-url URL (the served site)");
  if (a.has("--index-dir")) src.dir = location(a, "verify");
  src.url = a.get_or("--index-url", "");
  src.release_url = a.get("--release-url");
  src.prefix = a.get_or("--index-prefix", "whl");
  src.channel = a.get_or("--channel", "cu13");
  check_index_path(src.prefix, "--index-prefix");
  check_index_path(src.channel, "--channel");
  // Read under the site lock, so a writer's JSON and HTML are never seen half way.
  std::optional<SiteLock> lock;
  if (src.dir) lock.emplace(src.dir->root);
  return verify_index(src, *assets, std::cout) == 0 ? 0 : 1;
}

int cmd_render(int argc, char** argv) {
  Args a(argc, argv, with(kLocFlags, {"--release-url"}), {}, {});
  const auto loc = location(a, "render");
  const SiteLock lock(loc.root);
  render_all(loc, a.get("--release-url"), std::cout, lock);
  return 0;
}

// The release manifest the packaging step writes (ffpa-release-manifest.json): the
// wheels of this build, their kind (cuda|pure) and sha256, and the source commit.
struct Manifest {
  std::string commit;
  std::vector<fs::path> cuda, pure;
  std::vector<fs::path> cuda_extra;  // uploaded beside the CUDA wheels: requirements-<channel>.txt
};

Manifest read_manifest(const fs::path& file, const std::optional<std::string>& wheels_dir) {
  // The engine's one reader (ffpa/core/manifest.h): schema, fields and file names checked.
  const ffpa::core::Manifest man = ffpa::core::read_manifest(file);
  if (auto why = ffpa::core::unpublishable_profile(man)) throw Error(file.string() + ": " + *why);
  if (man.source_dirty)
    throw Error(file.string() + " records a build from uncommitted sources; such artefacts correspond to no "
                "commit and are not published: commit, rebuild, publish");
  const fs::path dir = wheels_dir ? fs::path(*wheels_dir) : file.parent_path();
  Manifest m;
  m.commit = man.source_commit;
  for (const auto& w : man.wheels) {
    const fs::path p = dir / w.file;
    // The bytes must still be the ones packaged: dist/ edited afterwards is refused.
    if (fs::exists(p) && hash_file(p) != w.sha256)
      throw Error(p.string() + " differs from the sha256 in " + file.string() +
                  "; dist/ changed after packaging: rebuild the release");
    (w.kind == "pure" ? m.pure : m.cuda).push_back(p);
  }
  if (man.requirements) {
    const fs::path p = dir / man.requirements->file;
    if (!fs::exists(p) || hash_file(p) != man.requirements->sha256)
      throw Error(p.string() + " is missing or differs from the sha256 in " + file.string() +
                  "; dist/ changed after packaging: rebuild the release");
    m.cuda_extra.push_back(p);
  }
  return m;
}

std::vector<fs::path> wheels_from_dir(const fs::path& dir, const std::string& tag) {
  // Select the wheels of the tag's version; other files in dist/ (the pure wheel,
  // older builds) are left alone.
  std::vector<fs::path> out;
  const std::string v = tag.size() > 1 ? tag.substr(1) : tag;
  auto tv = ffpa::core::parse_pep440(v);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    auto wf = ffpa::core::parse_wheel_filename(e.path().filename().string());
    auto wv = wf ? ffpa::core::parse_pep440(wf->version) : std::nullopt;
    if (wv && tv && wv->canonical == tv->canonical) out.push_back(e.path());
  }
  if (ec) throw Error("cannot list --wheels-dir " + dir.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  if (out.empty()) throw Error("no wheel of version " + v + " in " + dir.string() + "; build the release first");
  return out;
}

int cmd_publish(int argc, char** argv) {
  Args a(argc, argv,
         {"--tag", "--site-repo", "--assets", "--release-url", "--site-url", "--index-prefix", "--channel",
          "--target", "--source-dir", "--remote", "--branch", "--wheels-dir", "--manifest"},
         {"--wheels"}, {"--index-only", "--dry-run", "--core-metadata"});
  PublishOptions o;
  auto need = [&](const char* f) {
    auto v = a.get(f);
    if (!v) throw UsageError(std::string(f) + " is required");
    return *v;
  };
  o.tag = need("--tag");
  o.site_repo = need("--site-repo");
  o.index_only = a.has("--index-only");
  if (!o.index_only) o.assets = need("--assets");
  o.release_url = a.get_or("--release-url", "");
  o.site_url = a.get_or("--site-url", "");
  o.index_prefix = a.get_or("--index-prefix", "whl");
  o.channel = a.get_or("--channel", "cu13");
  o.target = a.get_or("--target", "");
  o.source_dir = a.get_or("--source-dir", ".");
  o.remote = a.get_or("--remote", "origin");
  o.branch = a.get_or("--branch", "gh-pages");
  o.dry_run = a.has("--dry-run");
  o.core_metadata_for_mirror = a.has("--core-metadata");
  for (const auto& w : a.all("--wheels")) o.wheels.emplace_back(w);
  for (const auto& w : a.positional()) o.wheels.emplace_back(w);
  if (auto m = a.get("--manifest")) {
    auto man = read_manifest(*m, a.get("--wheels-dir"));
    o.wheels.insert(o.wheels.end(), man.cuda.begin(), man.cuda.end());
    o.extra_assets = man.cuda_extra;
    if (o.target.empty()) o.target = man.commit;
  } else if (auto d = a.get("--wheels-dir")) {
    auto more = wheels_from_dir(*d, o.tag);
    o.wheels.insert(o.wheels.end(), more.begin(), more.end());
  }
  return publish(o, std::cout, std::cerr);
}

int cmd_publish_pure(int argc, char** argv) {
  Args a(argc, argv,
         {"--tag", "--wheel", "--repository-url", "--simple-url", "--assets", "--target", "--source-dir",
          "--wheels-dir", "--manifest"},
         {}, {"--dry-run"});
  PurePublishOptions o;
  auto tag = a.get("--tag");
  if (!tag) throw UsageError("--tag vV is required");
  o.tag = *tag;
  o.target = a.get_or("--target", "");
  if (auto w = a.get("--wheel")) {
    o.wheel = *w;
  } else if (auto m = a.get("--manifest")) {
    auto man = read_manifest(*m, a.get("--wheels-dir"));
    if (man.pure.size() != 1)
      throw Error(*m + " lists " + std::to_string(man.pure.size()) + " pure wheels, expected exactly one");
    o.wheel = man.pure.front();
    if (o.target.empty()) o.target = man.commit;
  } else if (auto d = a.get("--wheels-dir")) {
    // The pure wheel of the tag's version in dist/.
    for (const auto& e : fs::directory_iterator(*d)) {
      auto wf = ffpa::core::parse_wheel_filename(e.path().filename().string());
      if (wf && "v" + wf->version == o.tag && wf->python == "py3" && wf->abi == "none" && wf->platform == "any")
        o.wheel = e.path();
    }
    if (o.wheel.empty()) throw Error("no py3-none-any wheel of " + o.tag + " in " + *d + "; build the pure profile");
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

bool handles(std::string_view sub) { return help_texts().count(std::string(sub)) > 0; }

int main(int argc, char** argv) {
  if (argc < 1 || !handles(argv[0])) {
    std::cerr << "ffpa-index: unknown index command '" << (argc ? argv[0] : "") << "'; commands:";
    for (const auto& [k, v] : help_texts()) std::cerr << " " << k;
    std::cerr << "\n";
    return 2;
  }
  const std::string cmd = argv[0];
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--help" || s == "-h") {
      std::cout << help_texts().at(cmd);
      return 0;
    }
  }
  try {
    if (cmd == "add") return cmd_add(argc, argv);
    if (cmd == "remove" || cmd == "yank" || cmd == "unyank") return cmd_remove_yank(argc, argv, cmd);
    if (cmd == "verify") return cmd_verify(argc, argv);
    if (cmd == "render") return cmd_render(argc, argv);
    if (cmd == "publish") return cmd_publish(argc, argv);
    if (cmd == "publish-pure") return cmd_publish_pure(argc, argv);
  } catch (const UsageError& e) {
    return usage(cmd, e.what());
  } catch (const Error& e) {
    std::cerr << "ffpa-index " << cmd << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ffpa-index " << cmd << ": unexpected failure: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace ffpa::site
