// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// publish-pure: the pure wheel to a PyPI-compatible repository with twine, then
// release vV at the release commit (spec/release.md section 5).
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

namespace ffpa::site {

using ffpa::core::Error;
using namespace detail;  // NOLINT(google-build-using-namespace): the shared publish helpers

// --- publish-pure ---------------------------------------------------------------

std::string simple_url_for(const std::string& repository_url) {
  std::string u = repository_url;
  if (u.find("://upload.pypi.org/") != std::string::npos) return "https://pypi.org/simple/";
  if (u.find("://test.pypi.org/") != std::string::npos) return "https://test.pypi.org/simple/";
  while (!u.empty() && u.back() == '/') u.pop_back();
  const std::string legacy = "/legacy";
  if (u.size() > legacy.size() && u.compare(u.size() - legacy.size(), legacy.size(), legacy) == 0)
    u.resize(u.size() - legacy.size());
  return u + "/simple/";
}

namespace {

// Files of `project` at version `v` (or a version PEP 440 calls equal: PyPI refuses
// 1.0 once 1.0.0 is there) listed by a simple index (name -> sha256 or "").
// nullopt when the index could not be asked; the reason goes to `why`.
std::optional<std::map<std::string, std::string>> files_on_index(const std::string& simple, const std::string& project,
                                                                 const ffpa::core::Version& v, std::string& why) {
  std::string base = simple;
  if (base.back() != '/') base += '/';
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
  std::ifstream in(tmp);
  std::stringstream ss;
  ss << in.rdbuf();
  for (const auto& a : parse_anchors(ss.str())) {
    const auto slash = a.href.rfind('/');
    std::string fn = url_decode(slash == std::string::npos ? a.href : a.href.substr(slash + 1));
    std::string ver;
    if (auto wf = ffpa::core::parse_wheel_filename(fn)) ver = wf->version;
    else if (auto dash = fn.rfind('-'); dash != std::string::npos && fn.size() > 7 &&
                                        fn.compare(fn.size() - 7, 7, ".tar.gz") == 0)
      ver = fn.substr(dash + 1, fn.size() - 7 - dash - 1);
    auto pv = ffpa::core::parse_pep440(ver);
    if (pv && ffpa::core::version_identity(*pv) == ffpa::core::version_identity(v)) out[fn] = a.sha256;
  }
  return out;
}

}  // namespace

int publish_pure(const PurePublishOptions& opt, std::ostream& out, std::ostream& err) {
  const auto tagv = parse_tag(opt.tag, "v<version>, e.g. v0.2.5 (the pure release has no local part)");
  PreparedWheel w = prepare_wheel(opt.wheel);
  const std::string fn = w.name.filename();
  if (w.version.is_dev || w.version.is_pre)
    throw Error("refusing to publish a pre-release wheel: " + fn + " (version " + w.version.canonical +
                "); build the pure profile with a release version");
  if (!w.version.local.empty())
    throw Error(fn + " carries the local version '+" + w.version.local +
                "'; PyPI rejects local versions: upload the pure wheel (built by the pure profile) instead");
  if (w.name.python != "py3" || w.name.abi != "none" || w.name.platform != "any")
    throw Error(fn + " is not a py3-none-any wheel; publish-pure uploads only the pure wheel");
  if (w.version.canonical != tagv.canonical)
    throw Error("tag '" + opt.tag + "' does not name version '" + w.version.canonical + "'; pass --tag v" +
                w.version.canonical);
  // Everything below reads and uploads the verified bytes (PrivateCopy), staged under
  // the wheel's own name: never the path given, which may hold other bytes by now.
  const TempDir stage("ffpa-pure-");
  const fs::path wheel = stage.path() / fn;
  w.bytes->write_to(wheel);
  const ffpa::core::ZipReader zip(w.bytes->fd(), opt.wheel);
  for (const auto& m : zip.members()) {
    const auto& n = m.name;
    if ((n.size() > 3 && n.compare(n.size() - 3, 3, ".so") == 0) || n.find(".so.") != std::string::npos)
      throw Error(fn + " contains a shared object (" + n + "); the pure wheel must have none: rebuild it with "
                  "the pure profile");
  }

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
        std::string names;
        for (const auto& [n, h] : *files) names += (names.empty() ? "" : ", ") + n;
        pb.add("version " + w.version.canonical + " of " + w.project + " is already on " + simple + " (" + names +
               "); versions there cannot be overwritten: publish a new version");
      }
    }
  }
  std::unique_ptr<AssetStore> store;
  std::string target;
  std::set<std::string> identical;
  bool release_exists = false;
  if (!opt.assets.empty()) {
    store = make_asset_store(opt.assets);
    pb.add(store->preflight());
    pb.add(store->preflight_release(opt.tag));
    target = resolve_target(opt.target, opt.source_dir, pb);
    if (pb.list.empty())
      check_release(*store, opt.tag, {{fn, w.sha256}}, force_upload(), identical, pb, release_exists);
  }
  if (!pb.list.empty()) {
    print_problems(pb, err, "publish-pure");
    return 1;
  }
  const std::vector<std::string> upload = {twine, "upload", "--non-interactive", "--disable-progress-bar",
                                           "--repository-url", opt.repository_url, wheel.string()};
  const std::string notes = "```\npip install -U " + w.project + "==" + w.version.canonical + "\n```\n";
  ReleaseSpec rs{opt.tag, target, notes, true};
  if (opt.dry_run) {
    out << "publish-pure plan (dry run; nothing is changed)\n  wheel " << fn << "  sha256=" << w.sha256
        << "\ncommands:\n";
    if (on_index) out << "  # " << fn << " is already on " << simple << " with these bytes; not uploaded again\n";
    else out << "  " << format_command(upload) << "\n";
    if (store) {
      if (release_exists) out << "  # release " << opt.tag << " exists; not created again\n";
      else if (auto c = store->create_command(rs); !c.empty()) out << "  " << format_command(c) << "\n";
      else out << "  # create release " << opt.tag << " in " << store->spec() << " (target " << target << ")\n";
      if (identical.count(fn)) out << "  # " << fn << " already a release asset; skipped\n";
      else if (auto c = store->upload_command(opt.tag, wheel, false); !c.empty())
        out << "  " << format_command(c) << "\n";
      else out << "  # copy " << fn << " into " << store->spec() << "/" << opt.tag << "\n";
    }
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
  if (store) {
    if (!store->list_assets(opt.tag)) {
      store->create_release(rs);
      out << "[2/2] created release " << opt.tag << " at " << target << "\n";
    }
    kill_point("release");
    auto present = store->list_assets(opt.tag).value_or(std::vector<std::string>{});
    if (std::find(present.begin(), present.end(), fn) == present.end()) {
      store->upload(opt.tag, wheel, false);
      out << "[2/2] uploaded " << fn << " to release " << opt.tag << "\n";
    } else if (store->asset_sha256(opt.tag, fn) != w.sha256) {
      if (!force_upload())
        throw Error(fn + " is already published with different contents in release " + opt.tag +
                    "; publish a new version, or set FFPA_FORCE_UPLOAD=1");
      store->upload(opt.tag, wheel, true);
    }
  }
  out << "published " << w.project << " " << w.version.canonical << "\n";
  return 0;
}

}  // namespace ffpa::site
