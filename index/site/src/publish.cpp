// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// The four steps of spec/release.md section 4 (publish); the pure upload of section 5
// is publish_pure.cpp, the shared checks publish_support.cpp, the site repository
// site_repo.h.
#include "ffpa/site/publish.h"
#include "ffpa/site/publish.h"

#include <nlohmann/json.hpp>
#include <algorithm>

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "ffpa/core/atomic.h"
#include "ffpa/core/error.h"
#include "ffpa/core/hash.h"
#include "ffpa/core/pep.h"
#include "ffpa/core/utf8.h"
#include "ffpa/core/zipread.h"
#include "ffpa/site/index.h"
#include "ffpa/site/model.h"
#include "ffpa/site/process.h"

#include "publish_support.h"
#include "site_repo.h"

namespace ffpa::site {

using ffpa::core::Error;

void kill_point(const char* step) {
  const char* at = std::getenv("FFPA_PUBLISH_KILL_AT");
  if (at && std::string(at) == step) {
    std::cout.flush();
    std::cerr << "FFPA_PUBLISH_KILL_AT=" << step << ": killing myself (fault-injection test hook)\n";
    std::cerr.flush();
    raise(SIGKILL);
  }
}

using namespace detail;  // NOLINT(google-build-using-namespace): this file's own helpers

// --- publish -------------------------------------------------------------------

// One publish run: the inputs checked, then preflight, then the four steps, each a
// method over the state they share (the prepared wheels, the asset store, the site).
namespace {

struct PublishRun {
  const PublishOptions& opt;
  std::ostream& out;
  std::ostream& err;
  bool force = false;
  ffpa::core::Version tagv;
  std::vector<PreparedWheel> wheels;
  std::map<std::string, std::string> want;  // asset name -> sha256 (wheels, their .metadata, extras)
  std::unique_ptr<AssetStore> store;
  std::string release_url, site_url, project, notes;
  SiteRepo site;
  IndexLocation loc;
  std::string channel_rel;
  AddOptions ao;
  std::optional<SiteLock> lock;
  std::set<std::string> ours;  // site paths step 3 writes, as git spells them
  std::string target;
  std::set<std::string> identical;
  bool release_exists = false;
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
    force = force_upload();
    check_channel(opt.channel, opt.source_dir);
    check_index_path(opt.index_prefix, "--index-prefix");
    if (opt.index_only && opt.release_url.empty())
      throw Error("--index-only needs --release-url: a mirror's anchors must point at the original "
                  "release assets; pass their base URL (\"{tag}\" expands to the tag)");
    tagv = parse_tag(opt.tag, "v<version>+<channel>, e.g. v0.2.5+cu13");
    if (opt.wheels.empty()) throw Error("no wheels given; pass --wheels WHEEL... or --wheels-dir DIR");
    for (const auto& p : opt.wheels) {
      PreparedWheel w = prepare_wheel(p);
      if (w.version.is_dev || w.version.is_pre)
        throw Error("refusing to publish a pre-release wheel: " + w.name.filename() + " (version " +
                    w.version.canonical + "); build the full profile with a release version");
      if (w.version.canonical != tagv.canonical)
        throw Error("tag '" + opt.tag + "' does not name version '" + w.version.canonical + "' of " +
                    w.name.filename() + "; pass --tag v" + w.version.canonical + " or rebuild the wheels");
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
    if (!opt.index_only) store = make_asset_store(opt.assets);
    // The template, as the page records it: each file's URL expands "{tag}" to its
    // v<version>, which is this tag (check_inputs holds every wheel to it).
    release_url = normalize_release_url(opt.release_url.empty() ? store->default_release_url() : opt.release_url);
    site_url = !opt.site_url.empty() ? opt.site_url : store ? store->default_site_url() : "";
    project = wheels.front().project;
    notes = notes_for(project, tagv.canonical, opt.channel, site_url, opt.index_prefix);
    loc = IndexLocation{site.dir(), opt.index_prefix, opt.channel};
    channel_rel = loc.channel_label();
    const bool core_md = !opt.index_only || opt.core_metadata_for_mirror;
    ao.release_url = release_url;
    ao.core_metadata = core_md;
    ao.force = force;
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
    }
    if (store) {
      pb.add(store->preflight());
      pb.add(store->preflight_release(opt.tag));
      target = resolve_target(opt.target, opt.source_dir, pb);
      if (pb.list.empty()) check_release(*store, opt.tag, want, force, identical, pb, release_exists);
    }
    if (!pb.list.empty()) {
      print_problems(pb, err, "publish");
      return false;
    }
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
        << "  assets   " << (store ? store->spec() : std::string("(mirror)")) << "\n"
        << "  anchors  " << expand_release_url(release_url, opt.tag) << "<file>#sha256=<hex>\n"
        << "  site     " << site.dir().string() << " (" << opt.remote << "/" << opt.branch << "), "
        << channel_rel << "\n";
    for (const auto& w : wheels) out << "  wheel    " << w.name.filename() << "  sha256=" << w.sha256 << "\n";
    out << "commands:\n";
    if (store) {
      ReleaseSpec rs{opt.tag, target, notes, false};
      if (release_exists) out << "  # release " << opt.tag << " exists; not created again\n";
      else if (auto c = store->create_command(rs); !c.empty()) out << "  " << format_command(c) << "\n";
      else out << "  # create release " << opt.tag << " in " << store->spec() << " (target " << target << ")\n";
      for (const auto& w : wheels) {
        for (const fs::path& f : {staged(w), md_path(w)}) {
          if (identical.count(f.filename().string())) {
            out << "  # " << f.filename().string() << " already published with these bytes; skipped\n";
            continue;
          }
          if (auto c = store->upload_command(opt.tag, f, force); !c.empty()) out << "  " << format_command(c) << "\n";
          else out << "  # copy " << f.filename().string() << " into " << store->spec() << "/" << opt.tag << "\n";
        }
      }
      for (const auto& f : opt.extra_assets) {
        if (identical.count(f.filename().string())) continue;
        if (auto c = store->upload_command(opt.tag, f, force); !c.empty()) out << "  " << format_command(c) << "\n";
        else out << "  # copy " << f.filename().string() << " into " << store->spec() << "/" << opt.tag << "\n";
      }
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

    // Step 1: the release (not latest, no title, install notes).
    if (store) {
      if (release_exists || store->list_assets(opt.tag)) {
        out << "[1/4] release " << opt.tag << " exists\n";
      } else {
        store->create_release({opt.tag, target, notes, false});
        out << "[1/4] created release " << opt.tag << " at " << target << "\n";
      }
      kill_point("release");

      // Step 2: assets, with the PEP 658 metadata file beside each wheel.
      fs::remove_all(md_dir, ec);
      fs::create_directories(md_dir);
      auto present = store->list_assets(opt.tag).value_or(std::vector<std::string>{});
      const std::set<std::string> present_set(present.begin(), present.end());
      bool first = true;
      auto upload_one = [&](const fs::path& f) {
        const std::string name = f.filename().string();
        const std::string sha = want.at(name);
        if (present_set.count(name)) {
          const std::string have = identical.count(name) ? sha : store->asset_sha256(opt.tag, name);
          if (have == sha) {
            out << "[2/4] " << name << " already uploaded, identical; skipped\n";
            return;
          }
          if (!force)
            throw Error(name + " is already published with different contents; publish a new version, or set "
                        "FFPA_FORCE_UPLOAD=1");
        }
        store->upload(opt.tag, f, present_set.count(name) > 0);
        out << "[2/4] uploaded " << name << "\n";
      };
      for (const auto& w : wheels) {
        ffpa::core::write_file_atomic(md_path(w), w.metadata);
        if (!identical.count(w.name.filename())) w.bytes->write_to(staged(w));
        for (const fs::path& f : {staged(w), md_path(w)}) upload_one(f);
        fs::remove(staged(w), ec);
        if (first) kill_point("upload-1");
        first = false;
      }
      for (const auto& f : opt.extra_assets) upload_one(f);
      fs::remove_all(md_dir, ec);
      kill_point("upload");
    } else {
      out << "[1/4] index only: no release\n[2/4] index only: no upload\n";
    }
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
      const auto known = site.tracked(stage);
      const std::set<std::string> known_set(known.begin(), known.end());
      for (const auto& pth : stage)
        if (fs::exists(site.dir() / pth, ec) || known_set.count(pth)) keep.push_back(pth);
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
    out << "published " << tagv.canonical << ". Install with:\n" << notes;
    return 0;
  }
};

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

}  // namespace ffpa::site
