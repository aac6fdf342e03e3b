// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// Publishing (docs/release.md): the four steps of a CUDA release (publish) and the
// pure upload (publish-pure), the checks they share, and the site repository they
// merge into and push (driven through the git CLI, tool_program FFPA_GIT).
#include "ffpa/site/publish.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/pep.h"
#include "ffpa/core/utf8.h"
#include "ffpa/site/index.h"

namespace ffpa::site {

using core::Error;

bool force_upload() {
  const char* f = std::getenv("FFPA_FORCE_UPLOAD");
  return f && std::string(f) == "1";
}

void kill_point(const char* step) {
  const char* at = std::getenv("FFPA_PUBLISH_KILL_AT");
  if (at && std::string(at) == step) {
    std::cout.flush();
    std::cerr << "FFPA_PUBLISH_KILL_AT=" << step << ": killing myself (fault-injection test hook)\n";
    raise(SIGKILL);
  }
}

namespace {

struct Problems {
  std::vector<std::string> list;
  void add(std::string s) { list.push_back(std::move(s)); }
  void add(const std::vector<std::string>& v) { list.insert(list.end(), v.begin(), v.end()); }
  // Prints the problems of command `what`, if any; true when there were.
  bool refused(std::ostream& err, const std::string& what) const {
    if (!list.empty()) err << core::problem_list(what + ": refused, nothing was created:", list) << "\n";
    return !list.empty();
  }
};


// A tool's one-line answer without its line end.
std::string trim(const std::string& s) { return std::string(core::trim(s, " \r\n")); }

// --- guards: pure checks, nothing touched --------------------------------------

core::Version parse_tag(const std::string& tag, std::string_view shape) {
  std::string why;
  auto v = tag.size() > 1 && tag[0] == 'v' ? core::parse_pep440(tag.substr(1), &why) : std::nullopt;
  if (!v) throw Error("tag '" + core::printable(tag) + "' is not " + std::string(shape));
  // One version, one tag: v01.0.0+cu13 or vv1.0.0+cu13 would be a second release of 1.0.0+cu13.
  if (tag != "v" + v->canonical)
    throw Error("tag '" + core::printable(tag) + "' is not the canonical spelling of version " + v->canonical + "; pass --tag v" +
                v->canonical);
  return *v;
}

// A wheel that may be released under `tag`: a final version, and the tag's.
void check_for_tag(const PreparedWheel& w, const std::string& tag, const core::Version& tagv, const char* profile) {
  const std::string fn = w.name.filename(), v = w.version.canonical;
  if (w.version.is_dev || w.version.is_pre)
    throw Error("refusing to publish a pre-release wheel: " + fn + " (version " + v + "); build the " + profile +
                " profile with a release version");
  if (v != tagv.canonical)
    throw Error("tag '" + tag + "' does not name version '" + v + "' of " + fn + "; pass --tag v" + v +
                " or rebuild the wheels");
}

// Which channels exist is data: the "channels" of the release matrix in the source
// checkout (cmake/release-matrix.json), the file configure and the docs check read too.
void check_channel(const std::string& channel, const fs::path& source_dir) {
  bool ok = channel.size() > 2 && channel.rfind("cu", 0) == 0 &&
            channel.find_first_not_of("0123456789", 2) == std::string::npos;
  if (!ok) throw Error("channel '" + core::printable(channel) + "' is not cu<CUDA major> (cu13 for CUDA 13.x)");
  const fs::path matrix = source_dir / "cmake" / "release-matrix.json";
  const auto text = core::read_file(matrix);
  if (!text) return;  // not an ffpa-attn checkout: the publish target checked the channel at configure
  std::vector<std::string> known;
  try {
    const nlohmann::json doc = nlohmann::json::parse(*text);
    for (const auto& c : doc.at("channels")) known.push_back(c.get<std::string>());
  } catch (const std::exception& e) {
    throw Error(matrix.string() + " does not list the channels (" + e.what() + "); restore it from git");
  }
  if (std::find(known.begin(), known.end(), channel) == known.end())
    throw Error("there is no " + channel + " channel: the channels that exist are " + core::join(known, ", ") + " (" +
                matrix.string() + "); a new CUDA major gets its channel there first (docs/release.md section 9)");
}

std::string notes_for(const std::string& project, const std::string& version, const std::string& channel,
                      const std::string& site_url, const std::string& prefix) {
  const std::string idx = (site_url.empty() ? std::string("<site-url>") : site_url) + "/" + prefix + "/" + channel + "/";
  std::string public_v = version.substr(0, version.find('+'));
  return "Install the CUDA " + channel.substr(2) + " build (Linux x86_64):\n\n"
         "```\npip install " + project + "==" + version + " --index-url " + idx +
         " --extra-index-url https://pypi.org/simple\n```\n\n"
         "Without CUDA (pure Python, from PyPI):\n\n```\npip install -U " + project + "==" + public_v + "\n```\n";
}

std::string resolve_target(const std::string& given, const fs::path& source_dir, Problems& pb) {
  // The tag must point at the commit the wheels were built from, and that commit
  // must exist: an unknown sha (all zeros) would make a tag of nothing.
  auto r = run_process({tool_program("FFPA_GIT", "git"), "-C", source_dir.string(), "rev-parse", "--verify", "--quiet",
                        "--end-of-options", (given.empty() ? "HEAD" : given) + "^{commit}"});
  if (r.status == 0) return trim(r.out);
  if (given.empty())
    pb.add("cannot find the release commit (git rev-parse HEAD in " + source_dir.string() +
           " failed); pass --target <sha> or --source-dir <checkout>");
  else
    pb.add("--target '" + core::printable(given) + "' is not a commit of " + source_dir.string() +
           "; pass the release commit (git -C " + shell_quote(source_dir.string()) +
           " rev-parse HEAD), or --source-dir the checkout that holds it");
  return given;
}

// The release of one tag in an asset store, as publish and publish-pure drive it: what
// this run uploads (asset name -> sha256) against what the release already holds.
struct StoreRelease {
  std::unique_ptr<AssetStore> store;
  ReleaseSpec spec;
  std::map<std::string, std::string> want;
  bool force = false, exists = false;
  std::set<std::string> identical;               // assets already there with these bytes
  std::optional<std::set<std::string>> present;  // read once the release exists

  // Read-only: the store, the target commit, then (when nothing else is in the way)
  // every asset already in the release: one this run does not have, or other bytes.
  void preflight(const std::string& target, const fs::path& source_dir, Problems& pb) {
    pb.add(store->preflight());
    pb.add(store->preflight_release(spec.tag));
    spec.target = resolve_target(target, source_dir, pb);
    const auto assets = pb.list.empty() ? store->list_assets(spec.tag) : std::nullopt;
    exists = assets.has_value();
    for (const auto& name : assets.value_or(std::vector<std::string>{})) {
      auto it = want.find(name);
      if (it == want.end()) {
        pb.add("release " + spec.tag + " already holds " + name +
               ", which this publish does not have; the tag must hold exactly these files: delete that asset "
               "or publish a new version");
        continue;
      }
      const std::string have = store->asset_sha256(spec.tag, name);
      if (have == it->second) identical.insert(name);
      else if (!force)
        pb.add(name + " is already published with different contents in release " + spec.tag + " (asset sha256 " +
               have + ", this file " + it->second + "); publish a new version, or set FFPA_FORCE_UPLOAD=1");
    }
  }

  // What a dry run prints: the store's exact commands (or what a store that runs none
  // does), and what is there already.
  void print(std::ostream& out, const std::vector<fs::path>& files, bool clobber) const {
    if (exists) out << "  # release " << spec.tag << " exists; not created again\n";
    else if (auto c = store->create_command(spec); !c.empty()) out << "  " << format_command(c) << "\n";
    else out << "  # create release " << spec.tag << " in " << store->spec() << " (target " << spec.target << ")\n";
    for (const auto& f : files) {
      const std::string name = f.filename().string();
      if (identical.count(name)) out << "  # " << name << " already published with these bytes; skipped\n";
      else if (auto c = store->upload_command(spec.tag, f, clobber); !c.empty())
        out << "  " << format_command(c) << "\n";
      else out << "  # copy " << name << " into " << store->spec() << "/" << spec.tag << "\n";
    }
  }

  // Creates the release unless it exists (a re-run after the step: false).
  bool create() {
    if (exists || store->list_assets(spec.tag)) return false;
    store->create_release(spec);
    return true;
  }

  // Uploads `f` unless the release holds its bytes already (false: skipped); other
  // bytes there are replaced only with FFPA_FORCE_UPLOAD=1.
  bool upload(const fs::path& f) {
    if (!present) {
      const auto names = store->list_assets(spec.tag).value_or(std::vector<std::string>{});
      present.emplace(names.begin(), names.end());
    }
    const std::string name = f.filename().string(), &sha = want.at(name);
    const bool there = present->count(name) > 0;
    if (there && (identical.count(name) ? sha : store->asset_sha256(spec.tag, name)) == sha) return false;
    if (there && !force)
      throw Error(name + " is already published with different contents in release " + spec.tag +
                  "; publish a new version, or set FFPA_FORCE_UPLOAD=1");
    store->upload(spec.tag, f, there);
    return true;
  }
};

class SiteRepo {
 public:
  SiteRepo(fs::path dir, std::string remote, std::string branch)
      : dir_(fs::absolute(std::move(dir)).lexically_normal()), remote_(std::move(remote)),
        branch_(std::move(branch)), git_(tool_program("FFPA_GIT", "git")) {
    // Our read-only commands (status above all) must not take index.lock for
    // git's opportunistic index refresh: a publish killed during one would leave
    // a git child holding the lock while the re-run's preflight looks for it.
    ::setenv("GIT_OPTIONAL_LOCKS", "0", 1);
  }

  ProcResult git(std::vector<std::string> args) const {
    args.insert(args.begin(), {git_, "-C", dir_.string()});
    return run_process(args);
  }
  std::vector<std::string> cmd(std::vector<std::string> args) const {
    args.insert(args.begin(), {"git", "-C", dir_.string()});
    return args;
  }
  const fs::path& dir() const { return dir_; }

  std::vector<std::string> preflight(const std::string& channel_rel) const {
    if (find_program(git_).empty()) return {"git not found; install git (or set FFPA_GIT)"};
    std::vector<std::string> p;
    auto top = git({"rev-parse", "--show-toplevel"});
    if (top.status != 0)
      return {"--site-repo " + dir_.string() + " is not a git work tree; clone the site: git clone -b " +
              branch_ + " <site remote> " + dir_.string()};
    std::error_code ec;
    if (fs::canonical(trim(top.out), ec) != fs::canonical(dir_, ec))
      return {"--site-repo " + dir_.string() + " is inside the work tree " + trim(top.out) +
              ", not its top level; pass the top level of the site checkout"};
    auto br = git({"symbolic-ref", "--short", "HEAD"});
    if (trim(br.out) != branch_)
      p.push_back("site repository is on '" + trim(br.out) + "', not " + branch_ + "; run: " +
                  format_command(cmd({"checkout", branch_})));
    if (git({"remote", "get-url", remote_}).status != 0)
      p.push_back("site repository has no remote '" + remote_ + "'; run: " +
                  format_command(cmd({"remote", "add", remote_, "<url>"})));
    const fs::path gitdir = engine_dir(dir_), lock = gitdir / "index.lock";
    if (std::string why = unwritable_dir_problem(gitdir); !why.empty())
      p.push_back("site repository: " + why + " (the commit and the staged .metadata files are written there)");
    // A publish killed with SIGKILL leaves its git child running for a moment
    // (add or commit, holding index.lock): give such a child a few seconds to
    // finish before calling the lock someone else's.
    for (int waited_ms = 0; fs::exists(lock, ec) && waited_ms < 5000; waited_ms += 100)
      ::usleep(100 * 1000);
    if (fs::exists(lock, ec))
      p.push_back("a git command is running in the site repository, or one was killed: " + lock.string() +
                  " exists; once no git command runs there, remove it (rm " + shell_quote(lock.string()) +
                  ") and re-run");
    for (const char* op : {"rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD"}) {
      if (fs::exists(gitdir / op, ec))
        p.push_back("the site repository is in the middle of a " +
                    std::string(op[0] == 'r' ? "rebase" : op[0] == 'M' ? "merge" : op[0] == 'C' ? "cherry-pick" : "revert") +
                    "; finish or abort it (git -C " + shell_quote(dir_.string()) + " status says how), then re-run");
    }
    if (std::string why = unwritable_dir_problem(dir_ / channel_rel); !why.empty())
      p.push_back("site repository: " + why);
    if (trim(git({"config", "user.email"}).out).empty())
      p.push_back("no git identity in the site repository; run: " +
                  format_command(cmd({"config", "user.email", "you@example.com"})) + " (and user.name)");
    // Changes outside the channel would be swept into nothing (we add only the
    // channel) but would make the next pull --rebase fail; ask for a clean tree.
    for (const auto& path : changed_paths())
      if (path.rfind(channel_rel + "/", 0) != 0)
        p.push_back("site repository has uncommitted changes outside " + channel_rel + ": " + path +
                    "; commit or remove them first");
    return p;
  }

  // Paths with uncommitted changes (staged, unstaged, untracked), relative to the
  // work tree, exactly as git spells them (-z: no quoting to undo).
  std::vector<std::string> changed_paths() const {
    std::vector<std::string> out;
    const auto st = git({"status", "--porcelain", "-z", "--untracked-files=all", "--no-renames"});
    for (const auto& rec : core::split(st.out, '\0'))
      if (rec.size() > 3) out.push_back(rec.substr(3));
    return out;
  }

  // Changes in the channel that this publish will not write: a foreign file
  // (an untracked whl/cu13/.env) or another project's page edited by hand would
  // otherwise be committed and pushed with the index.
  std::vector<std::string> foreign_changes(const std::string& channel_rel, const std::set<std::string>& ours) const {
    std::vector<std::string> p;
    for (const auto& path : changed_paths()) {
      if (path.rfind(channel_rel + "/", 0) != 0 || ours.count(path)) continue;
      if (is_engine_temp(fs::path(path).filename().string())) continue;  // removed before step 1
      p.push_back("site repository has an uncommitted change in " + channel_rel + " that this publish does not "
                  "write: " + core::printable(path) + "; commit it, restore it (git -C " +
                  shell_quote(dir_.string()) + " checkout -- <path>) or move it away, then re-run");
    }
    return p;
  }

  // The paths of `paths` git would ignore (.gitignore, info/exclude): publish could
  // write them but never commit them, so each is a problem with its fix.
  std::vector<std::string> ignored(const std::set<std::string>& paths) const {
    if (paths.empty()) return {};
    std::vector<std::string> args = {"check-ignore", "--no-index", "--"};
    args.insert(args.end(), paths.begin(), paths.end());
    std::vector<std::string> p;
    const ProcResult r = git(args);
    if (r.status > 1)  // 0: some are ignored, 1: none
      return {"git check-ignore failed in the site repository (" + trim(r.err) + "); fix the repository, then re-run"};
    for (const auto& path : core::split(r.out, '\n'))
      if (!path.empty())
        p.push_back("'" + core::printable(path) + "' is ignored by git in the site repository (git -C " +
                    shell_quote(dir_.string()) + " check-ignore -v " + shell_quote(path) + " names the rule): publish "
                    "could write it but never commit it; remove that ignore rule, then re-run");
    return p;
  }

  // The commit the remote's branch points at, or "" when it cannot be asked.
  std::string remote_head() const {
    auto r = git({"ls-remote", "--quiet", remote_, "refs/heads/" + branch_});
    return r.status == 0 ? trim(r.out.substr(0, r.out.find('\t'))) : std::string();
  }

  // The subset of `paths` git tracks (for staging removals of tracked files).
  std::set<std::string> tracked(const std::vector<std::string>& paths) const {
    if (paths.empty()) return {};
    std::vector<std::string> args = {"ls-files", "-z", "--"};
    args.insert(args.end(), paths.begin(), paths.end());
    const std::vector<std::string> names = core::split(git(args).out, '\0');
    return {names.begin(), names.end() - 1};  // -z ends every name with a NUL
  }

  void fetch(std::ostream& out) const {
    auto r = git({"fetch", "--quiet", remote_, branch_});
    if (r.status != 0)
      out << "warning: " << format_command(cmd({"fetch", remote_, branch_})) << " failed: " << trim(r.err) << "\n";
  }

  bool remote_branch_exists() const {
    return git({"rev-parse", "--verify", "--quiet", "refs/remotes/" + remote_ + "/" + branch_}).status == 0;
  }

  int count(const std::string& range) const {
    auto r = git({"rev-list", "--count", range});
    return r.status == 0 ? std::atoi(r.out.c_str()) : -1;
  }

  // A checkout that is merely behind (no local commits) is moved up first, so the
  // push that follows is a fast-forward.
  void fast_forward_if_behind(std::ostream& out) const {
    if (!remote_branch_exists()) return;
    const std::string up = remote_ + "/" + branch_;
    if (count("HEAD.." + up) > 0 && count(up + "..HEAD") == 0) {
      auto r = git({"merge", "--ff-only", "--quiet", up});
      if (r.status != 0)
        throw Error("cannot fast-forward the site repository to " + up + ": " + trim(r.err) +
                    "; run: " + format_command(cmd({"pull", "--ff-only", remote_, branch_})));
      out << "site repository fast-forwarded to " << up << "\n";
    }
  }

  std::string recovery() const {
    return "  " + format_command(cmd({"pull", "--rebase", remote_, branch_})) + "\n  " +
           format_command(cmd({"push", remote_, branch_})) + "\n";
  }

 private:
  fs::path dir_;
  std::string remote_, branch_, git_;
};

// --- publish -------------------------------------------------------------------

// One publish run: the inputs checked, then preflight, then the four steps, each a
// method over the state they share (the prepared wheels, the asset store, the site).
struct PublishRun {
  const PublishOptions& opt;
  std::ostream& out;
  std::ostream& err;
  core::Version tagv;
  std::vector<PreparedWheel> wheels;
  StoreRelease rel;  // wants the wheels, their .metadata and the extras; no store with --index-only
  std::string release_url, site_url, project;
  SiteRepo site;
  IndexLocation loc;
  std::string channel_rel;
  AddOptions ao;
  std::optional<SiteLock> lock;
  std::set<std::string> ours;  // site paths step 3 writes, as git spells them
  fs::path md_dir;
  std::vector<std::string> stage;
  std::error_code ec;

  PublishRun(const PublishOptions& o, std::ostream& out_, std::ostream& err_)
      : opt(o), out(out_), err(err_), site(o.site_repo, o.remote, o.branch) {}

  fs::path md_path(const PreparedWheel& w) const { return md_dir / (w.name.filename() + ".metadata"); }
  // The verified bytes (PrivateCopy) are staged beside the metadata and uploaded from
  // there: never the path given, which may hold other bytes by now.
  fs::path staged(const PreparedWheel& w) const { return md_dir / w.name.filename(); }

  // Guards first: no tool is run and nothing is read from the network before the
  // inputs are known to be publishable.
  void check_inputs() {
    std::map<std::string, std::string>& want = rel.want;
    rel.force = force_upload();
    check_channel(opt.channel, opt.source_dir);
    check_index_path(opt.index_prefix, "--index-prefix");
    if (opt.index_only && opt.release_url.empty())
      throw Error("--index-only needs --release-url: a mirror's anchors must point at the original "
                  "release assets; pass their base URL (\"{tag}\" expands to the tag)");
    tagv = parse_tag(opt.tag, "v<version>+<channel>, e.g. v0.2.5+cu13");
    if (opt.wheels.empty()) throw Error("no wheels given; pass --wheels WHEEL... or --wheels-dir DIR");
    for (const auto& p : opt.wheels) {
      PreparedWheel w = prepare_wheel(p);
      check_for_tag(w, opt.tag, tagv, "full");
      if (w.version.local != opt.channel)
        throw Error(w.name.filename() + " is not a " + opt.channel + " wheel (local version '" + w.version.local +
                    "'); the CUDA wheels carry +" + opt.channel + ", the pure wheel goes through publish-pure");
      // The same file given twice is published once; two files of one name cannot be.
      if (auto it = want.find(w.name.filename()); it != want.end()) {
        if (it->second != w.sha256)
          throw Error("two different files named " + w.name.filename() + " were given; pass the one to publish");
        continue;
      }
      want[w.name.filename()] = w.sha256;
      want[w.name.filename() + ".metadata"] = w.metadata_sha256;
      wheels.push_back(std::move(w));
    }
    // Other release assets (the hash-locked requirements file): uploaded beside the
    // wheels under the same rules (identical bytes skipped, other bytes refused).
    for (const auto& f : opt.extra_assets) {
      if (!fs::is_regular_file(f)) throw Error(f.string() + " is missing; rebuild the release");
      const std::string name = f.filename().string();
      if (want.count(name)) throw Error("two release assets are named " + name);
      want[name] = hash_file(f);
    }
  }

  void setup() {
    AssetStore* store = nullptr;
    if (!opt.index_only) store = (rel.store = make_asset_store(opt.assets)).get();
    // The template, as the page records it: each file's URL expands "{tag}" to its
    // v<version>, which is this tag (check_inputs holds every wheel to it).
    release_url = normalize_release_url(opt.release_url.empty() ? store->default_release_url() : opt.release_url);
    // A concrete per-tag URL (".../download/v0.4.0+cu13", as a mirror is often given)
    // is this release's expansion of the template: recorded as such, so the next
    // release's URL (ending in its own tag) reads the same, instead of being refused
    // for differing from the first release's.
    if (const std::string suffix = "/" + opt.tag + "/";
        release_url.find("{tag}") == std::string::npos && release_url.ends_with(suffix)) {
      release_url = release_url.substr(0, release_url.size() - suffix.size()) + "/{tag}/";
      out << "note: --release-url ends in the tag " << opt.tag << "; read as the template " << release_url
          << " ({tag} is each release's tag), recorded so on the page\n";
    }
    site_url = !opt.site_url.empty() ? opt.site_url : store ? store->default_site_url() : "";
    project = wheels.front().project;
    // Not latest (the pure release vV stays latest), no title, the install notes.
    rel.spec = {opt.tag, "", notes_for(project, tagv.canonical, opt.channel, site_url, opt.index_prefix), false};
    loc = IndexLocation{site.dir(), opt.index_prefix, opt.channel};
    channel_rel = loc.channel_label();
    ao.release_url = release_url;
    ao.core_metadata = !opt.index_only || opt.core_metadata_for_mirror;
    ao.force = rel.force;
  }

  // Preflight holds the site lock and returns false (problems printed) when anything
  // would stop a later step.
  bool preflight() {
    // A publish and any other writer of the site (add, yank, another publish) must not
    // interleave. Preflight runs under the lock, so what it checked still holds when the
    // steps run. A site directory that does not exist is preflight's to report.
    if (fs::is_directory(site.dir(), ec)) lock.emplace(site.dir());

    // Preflight: read-only, and covering every later step, so that a publish either
    // does nothing or runs through (or converges on a re-run after an interruption).
    Problems pb;
    pb.add(site.preflight(channel_rel));
    if (pb.list.empty()) {
      try {
        for (const auto& [path, data] : plan_add(loc, wheels, ao).writes)
          ours.insert(path.lexically_relative(site.dir()).generic_string());
      } catch (const Error& e) {
        pb.add(e.what());
      }
      pb.add(site.foreign_changes(channel_rel, ours));
      pb.add(site.ignored(ours));
    }
    if (rel.store) rel.preflight(opt.target, opt.source_dir, pb);
    if (pb.refused(err, "publish")) return false;
    if (!lock) throw Error("--site-repo " + site.dir().string() + " does not exist; clone the site there first");
    return true;
  }

  void stage_dirs() {
    // The metadata files uploaded beside the wheels are staged in the site's git
    // directory, not under $TMPDIR: a killed run leaves nothing behind there, and the
    // next run starts this directory afresh.
    md_dir = engine_dir(site.dir()) / "ffpa-index-publish";
    stage.assign(ours.begin(), ours.end());
  }

  int print_plan() {
    out << "publish plan (dry run; nothing is changed)\n"
        << "  version  " << tagv.canonical << "\n  channel  " << opt.channel << "\n  tag      " << opt.tag
        << (opt.index_only ? "  (index only: no release, no upload)" : "") << "\n"
        << "  assets   " << (rel.store ? rel.store->spec() : std::string("(mirror)")) << "\n"
        << "  anchors  " << expand_release_url(release_url, opt.tag) << "<file>#sha256=<hex>\n"
        << "  site     " << site.dir().string() << " (" << opt.remote << "/" << opt.branch << "), "
        << channel_rel << "\n";
    for (const auto& w : wheels) out << "  wheel    " << w.name.filename() << "  sha256=" << w.sha256 << "\n";
    out << "commands:\n";
    if (rel.store) {
      std::vector<fs::path> files;
      for (const auto& w : wheels) files.insert(files.end(), {staged(w), md_path(w)});
      files.insert(files.end(), opt.extra_assets.begin(), opt.extra_assets.end());
      rel.print(out, files, rel.force);
    }
    std::vector<std::string> add_cmd = {"add", "-A", "--"};
    add_cmd.insert(add_cmd.end(), stage.begin(), stage.end());
    out << "  # merge " << wheels.size() << " file(s) into " << channel_rel << "/" << project << "/index.{json,html}\n"
        << "  " << format_command(site.cmd(add_cmd)) << "\n"
        << "  " << format_command(site.cmd({"commit", "-m", "index: " + project + " " + tagv.canonical})) << "\n"
        << "  " << format_command(site.cmd({"push", opt.remote, opt.branch})) << "\n";
    return 0;
  }

  void steps_release_and_upload() {
    // Temp files of a killed add or publish are the engine's own: removed, and staged
    // as removals where an older run committed them.
    for (const auto& t : remove_stale_temps(loc, *lock)) {
      const std::string rel = t.lexically_relative(site.dir()).generic_string();
      out << "removed " << rel << " (left by an interrupted run)\n";
      stage.push_back(rel);
    }

    if (!rel.store) {
      out << "[1/4] index only: no release\n[2/4] index only: no upload\n";
      return;
    }
    // Step 1: the release.
    if (rel.create()) out << "[1/4] created release " << opt.tag << " at " << rel.spec.target << "\n";
    else out << "[1/4] release " << opt.tag << " exists\n";
    kill_point("release");

    // Step 2: assets, with the PEP 658 metadata file beside each wheel.
    fs::remove_all(md_dir, ec);
    fs::create_directories(md_dir);
    auto upload = [&](const fs::path& f) {
      if (rel.upload(f)) out << "[2/4] uploaded " << f.filename().string() << "\n";
      else out << "[2/4] " << f.filename().string() << " already uploaded, identical; skipped\n";
    };
    for (const auto& w : wheels) {
      core::write_file_atomic(md_path(w), w.metadata);
      if (!rel.identical.count(w.name.filename())) w.bytes->write_to(staged(w));
      for (const fs::path& f : {staged(w), md_path(w)}) upload(f);
      fs::remove(staged(w), ec);
      if (&w == &wheels.front()) kill_point("upload-1");
    }
    for (const auto& f : opt.extra_assets) upload(f);
    fs::remove_all(md_dir, ec);
    kill_point("upload");
  }

  void step_merge_index() {
    // Step 3: merge the index.
    site.fetch(out);
    site.fast_forward_if_behind(out);
    std::ostringstream log;
    auto rep = add_wheels(loc, wheels, ao, log, *lock);
    out << "[3/4] index " << channel_rel << ": " << rep.added << " added, " << rep.replaced << " updated, "
        << rep.unchanged << " unchanged\n";
    kill_point("index");
  }

  int step_commit_and_push() {
    // Step 4: commit exactly what step 3 wrote (and the removals above), then push.
    const std::vector<std::string> paths = [&] {
      std::vector<std::string> keep;
      const std::set<std::string> known = site.tracked(stage);
      for (const auto& pth : stage)
        if (fs::exists(site.dir() / pth, ec) || known.count(pth)) keep.push_back(pth);
      return keep;
    }();
    std::vector<std::string> add_args = {"add", "-A", "--"};
    add_args.insert(add_args.end(), paths.begin(), paths.end());
    auto add = site.git(add_args);
    if (add.status != 0) throw Error("git add failed in the site repository: " + add.err);
    if (site.git({"diff", "--cached", "--quiet"}).status != 0) {
      const std::string msg = "index: " + project + " " + tagv.canonical + " (" + std::to_string(wheels.size()) +
                              " file(s)) in " + channel_rel;
      std::vector<std::string> commit_args = {"commit", "--quiet", "-m", msg, "--"};
      commit_args.insert(commit_args.end(), paths.begin(), paths.end());
      auto c = site.git(commit_args);
      if (c.status != 0) throw Error("git commit failed in the site repository: " + c.err + c.out);
      out << "[4/4] committed: " << msg << "\n";
    } else {
      out << "[4/4] nothing new to commit\n";
    }
    kill_point("commit");
    const std::string up = opt.remote + "/" + opt.branch;
    if (!site.remote_branch_exists() || site.count(up + "..HEAD") > 0) {
      auto p = site.git({"push", "--quiet", opt.remote, "HEAD:refs/heads/" + opt.branch});
      if (p.status != 0) {
        err << "publish: the push of " << opt.branch << " to " << opt.remote << " was rejected:\n"
            << p.err << "The release and its assets are in place and the index is committed locally. Recover with:\n"
            << site.recovery()
            << "If the rebase stops on a conflict in " << channel_rel << ", run `git -C "
            << shell_quote(site.dir().string()) << " rebase --abort`, reset the branch to " << up
            << " and re-run this publish command: it re-merges the index from its JSON.\n";
        return 1;
      }
      out << "[4/4] pushed " << opt.branch << " to " << opt.remote << "\n";
    } else {
      out << "[4/4] " << up << " already has the index\n";
    }
    // "published" means the remote serves the index: ask it, not the local view of it.
    const std::string head = trim(site.git({"rev-parse", "HEAD"}).out), remote_head = site.remote_head();
    if (remote_head != head) {
      err << "publish: " << opt.remote << "/" << opt.branch << " is at '" << remote_head << "', not the index commit "
          << head << "; the index is not published. Recover with:\n" << site.recovery();
      return 1;
    }
    out << "published " << tagv.canonical << ". Install with:\n" << rel.spec.notes;
    return 0;
  }
};

// Files of `project` at version `v` (or a version PEP 440 calls equal: PyPI refuses
// 1.0 once 1.0.0 is there) listed by a simple index (name -> sha256 or "").
// nullopt when the index could not be asked; the reason goes to `why`.
std::optional<std::map<std::string, std::string>> files_on_index(const std::string& simple, const std::string& project,
                                                                 const core::Version& v, std::string& why) {
  const std::string base = normalize_release_url(simple);
  const TempDir scratch("ffpa-simple-");
  const fs::path tmp = scratch.path() / "page.html";
  auto r = run_process({tool_program("FFPA_CURL", "curl"), "-sSL", "-o", tmp.string(), "-w", "%{http_code}",
                        "-H", "Accept: text/html", base + project + "/"});
  std::map<std::string, std::string> out;
  if (r.status != 0) {
    why = trim(r.err);
    return std::nullopt;
  }
  const std::string code = trim(r.out);
  if (code == "404") return out;
  if (code != "200") {
    why = "HTTP " + code + " from " + base + project + "/";
    return std::nullopt;
  }
  for (const auto& a : parse_anchors(core::read_file(tmp).value_or(""))) {
    const auto slash = a.href.rfind('/');
    std::string fn = url_decode(slash == std::string::npos ? a.href : a.href.substr(slash + 1));
    std::string ver;
    if (auto wf = core::parse_wheel_filename(fn)) ver = wf->version;
    else if (auto dash = fn.rfind('-'); dash != std::string::npos && fn.ends_with(".tar.gz"))
      ver = fn.substr(dash + 1, fn.size() - 7 - dash - 1);
    auto pv = core::parse_pep440(ver);
    if (pv && core::version_identity(*pv) == core::version_identity(v)) out[fn] = a.sha256;
  }
  return out;
}

}  // namespace

int publish(const PublishOptions& opt, std::ostream& out, std::ostream& err) {
  PublishRun run(opt, out, err);
  run.check_inputs();
  run.setup();
  if (!run.preflight()) return 1;
  run.stage_dirs();
  if (opt.dry_run) return run.print_plan();
  run.steps_release_and_upload();
  run.step_merge_index();
  return run.step_commit_and_push();
}

// --- publish-pure ---------------------------------------------------------------

std::string simple_url_for(const std::string& repository_url) {
  std::string u = repository_url;
  if (u.find("://upload.pypi.org/") != std::string::npos) return "https://pypi.org/simple/";
  if (u.find("://test.pypi.org/") != std::string::npos) return "https://test.pypi.org/simple/";
  while (!u.empty() && u.back() == '/') u.pop_back();
  if (u.size() > 7 && u.ends_with("/legacy")) u.resize(u.size() - 7);
  return u + "/simple/";
}

int publish_pure(const PurePublishOptions& opt, std::ostream& out, std::ostream& err) {
  const auto tagv = parse_tag(opt.tag, "v<version>, e.g. v0.2.5 (the pure release has no local part)");
  PreparedWheel w = prepare_wheel(opt.wheel);
  const std::string fn = w.name.filename();
  if (!w.version.local.empty())
    throw Error(fn + " carries the local version '+" + w.version.local +
                "'; PyPI rejects local versions: upload the pure wheel (built by the pure profile) instead");
  if (w.name.python != "py3" || w.name.abi != "none" || w.name.platform != "any")
    throw Error(fn + " is not a py3-none-any wheel; publish-pure uploads only the pure wheel");
  check_for_tag(w, opt.tag, tagv, "pure");
  // Everything below reads and uploads the verified bytes (PrivateCopy), staged under
  // the wheel's own name: never the path given, which may hold other bytes by now.
  const TempDir stage("ffpa-pure-");
  const fs::path wheel = stage.path() / fn;
  w.bytes->write_to(wheel);
  Problems pb;
  const std::string twine = tool_program("FFPA_TWINE", "twine");
  if (find_program(twine).empty())
    pb.add("twine not found as '" + twine + "'; run tools/bootstrap (it installs .venv) or set FFPA_TWINE");
  if (find_program(tool_program("FFPA_CURL", "curl")).empty())
    pb.add("curl not found; install curl (or set FFPA_CURL) to check the upload target");
  const std::string simple = opt.simple_url.empty() ? simple_url_for(opt.repository_url) : opt.simple_url;
  bool on_index = false;
  if (pb.list.empty()) {
    std::string why;
    auto files = files_on_index(simple, w.project, w.version, why);
    if (!files) {
      pb.add("cannot ask " + simple + " whether " + w.version.canonical + " exists (" + why +
             "); check the network or pass --simple-url");
    } else if (!files->empty()) {
      auto it = files->find(fn);
      if (files->size() == 1 && it != files->end() && it->second == w.sha256) {
        on_index = true;  // a re-run after the upload step: converge
      } else {
        std::vector<std::string> names;
        for (const auto& [n, h] : *files) names.push_back(n);
        pb.add("version " + w.version.canonical + " of " + w.project + " is already on " + simple + " (" +
               core::join(names, ", ") + "); versions there cannot be overwritten: publish a new version");
      }
    }
  }
  // The plain release vV (latest), at the release commit, with the wheel attached.
  StoreRelease rel;
  rel.spec = {opt.tag, "", "```\npip install -U " + w.project + "==" + w.version.canonical + "\n```\n", true};
  rel.want = {{fn, w.sha256}};
  rel.force = force_upload();
  if (!opt.assets.empty()) {
    rel.store = make_asset_store(opt.assets);
    rel.preflight(opt.target, opt.source_dir, pb);
  }
  if (pb.refused(err, "publish-pure")) return 1;
  const std::vector<std::string> upload = {twine, "upload", "--non-interactive", "--disable-progress-bar",
                                           "--repository-url", opt.repository_url, wheel.string()};
  if (opt.dry_run) {
    out << "publish-pure plan (dry run; nothing is changed)\n  wheel " << fn << "  sha256=" << w.sha256
        << "\ncommands:\n";
    if (on_index) out << "  # " << fn << " is already on " << simple << " with these bytes; not uploaded again\n";
    else out << "  " << format_command(upload) << "\n";
    if (rel.store) rel.print(out, {wheel}, false);
    return 0;
  }
  if (on_index) {
    out << "[1/2] " << fn << " already on " << simple << "; skipped\n";
  } else {
    auto r = run_process(upload);
    if (r.status != 0) {
      const std::string all = r.out + r.err;
      err << "publish-pure: twine upload failed:\n" << all;
      if (all.find("403") != std::string::npos)
        err << "HTTP 403: the token lacks upload rights on project " << w.project
            << "; use a token scoped to it (TWINE_PASSWORD, user __token__)\n";
      return 1;
    }
    out << "[1/2] uploaded " << fn << " to " << opt.repository_url << "\n";
  }
  kill_point("pypi");
  if (rel.store) {
    if (rel.create()) out << "[2/2] created release " << opt.tag << " at " << rel.spec.target << "\n";
    kill_point("release");
    if (rel.upload(wheel)) out << "[2/2] uploaded " << fn << " to release " << opt.tag << "\n";
  }
  out << "published " << w.project << " " << w.version.canonical << "\n";
  return 0;
}

}  // namespace ffpa::site
