// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// The site repository publish merges into and pushes: a git checkout of the site's
// branch, asked and driven through the git CLI (tool_program FFPA_GIT).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <set>
#include <string>
#include <vector>

#include "ffpa/core/error.h"
#include "ffpa/site/index.h"
#include "ffpa/site/process.h"

namespace ffpa::site::detail {

namespace fs = std::filesystem;
using ffpa::core::Error;


class SiteRepo {
 public:
  SiteRepo(fs::path dir, std::string remote, std::string branch)
      : dir_(fs::absolute(std::move(dir)).lexically_normal()), remote_(std::move(remote)),
        branch_(std::move(branch)), git_(tool_program("FFPA_GIT", "git")) {}

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
    if (std::string why = unwritable_dir_problem(engine_dir(dir_)); !why.empty())
      p.push_back("site repository: " + why + " (the commit and the staged .metadata files are written there)");
    if (std::error_code ec; fs::exists(engine_dir(dir_) / "index.lock", ec))
      p.push_back("a git command is running in the site repository, or one was killed: " +
                  (engine_dir(dir_) / "index.lock").string() + " exists; once no git command runs there, "
                  "remove it (rm " + shell_quote((engine_dir(dir_) / "index.lock").string()) + ") and re-run");
    for (const char* op : {"rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD"}) {
      std::error_code ec;
      if (fs::exists(engine_dir(dir_) / op, ec))
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
    auto st = git({"status", "--porcelain", "-z", "--untracked-files=all", "--no-renames"});
    std::vector<std::string> out;
    std::size_t pos = 0;
    while (pos < st.out.size()) {
      const auto end = st.out.find('\0', pos);
      const std::string rec = st.out.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      pos = end == std::string::npos ? st.out.size() : end + 1;
      if (rec.size() > 3) out.push_back(rec.substr(3));
    }
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
                  "write: " + ffpa::core::printable(path) + "; commit it, restore it (git -C " +
                  shell_quote(dir_.string()) + " checkout -- <path>) or move it away, then re-run");
    }
    return p;
  }

  // The subset of `paths` git tracks (for staging removals of tracked files).
  std::vector<std::string> tracked(const std::vector<std::string>& paths) const {
    if (paths.empty()) return {};
    std::vector<std::string> args = {"ls-files", "-z", "--"};
    args.insert(args.end(), paths.begin(), paths.end());
    auto r = git(args);
    std::vector<std::string> out;
    std::istringstream in(r.out);
    for (std::string s; std::getline(in, s, '\0');)
      if (!s.empty()) out.push_back(s);
    return out;
  }

  void fetch(std::ostream& out) const {
    auto r = git({"fetch", "--quiet", remote_, branch_});
    if (r.status != 0)
      out << "warning: " << format_command(cmd({"fetch", remote_, branch_})) << " failed: " << trim(r.err)
          << "\n";
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

}  // namespace ffpa::site::detail
