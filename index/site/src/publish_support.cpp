// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// See publish_support.h.
#include "publish_support.h"
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

namespace ffpa::site::detail {

using ffpa::core::Error;

bool force_upload() {
  const char* f = std::getenv("FFPA_FORCE_UPLOAD");
  return f && std::string(f) == "1";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// --- guards (spec section 3): pure checks, nothing touched -------------------

ffpa::core::Version parse_tag(const std::string& tag, std::string_view shape) {
  std::string why;
  auto v = tag.size() > 1 && tag[0] == 'v' ? ffpa::core::parse_pep440(tag.substr(1), &why) : std::nullopt;
  if (!v) throw Error("tag '" + tag + "' is not " + std::string(shape));
  // One version, one tag: v01.0.0+cu13 or vv1.0.0+cu13 would be a second release of 1.0.0+cu13.
  if (tag != "v" + v->canonical)
    throw Error("tag '" + tag + "' is not the canonical spelling of version " + v->canonical + "; pass --tag v" +
                v->canonical);
  return *v;
}

// Which channels exist is data: the "channels" of the release matrix in the source
// checkout (cmake/release-matrix.json), the file configure and the docs check read too.
void check_channel(const std::string& channel, const fs::path& source_dir) {
  bool ok = channel.size() > 2 && channel.rfind("cu", 0) == 0 &&
            channel.find_first_not_of("0123456789", 2) == std::string::npos;
  if (!ok) throw Error("channel '" + channel + "' is not cu<CUDA major> (cu13 for CUDA 13.x)");
  const fs::path matrix = source_dir / "cmake" / "release-matrix.json";
  std::ifstream in(matrix);
  if (!in) return;  // not an ffpa-attn checkout: the publish target checked the channel at configure
  std::vector<std::string> known;
  try {
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& c : doc.at("channels")) known.push_back(c.get<std::string>());
  } catch (const std::exception& e) {
    throw Error(matrix.string() + " does not list the channels (" + e.what() + "); restore it from git");
  }
  if (std::find(known.begin(), known.end(), channel) == known.end()) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw Error("there is no " + channel + " channel: the channels that exist are " + list + " (" + matrix.string() +
                "); a new CUDA major gets its channel there first (docs/release.md section 9)");
  }
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
  if (!given.empty()) {
    // The tag must point at the commit the wheels were built from, and that commit
    // must exist: an unknown sha (all zeros) would make a tag of nothing.
    auto r = run_process({tool_program("FFPA_GIT", "git"), "-C", source_dir.string(), "rev-parse", "--verify",
                          "--quiet", "--end-of-options", given + "^{commit}"});
    if (r.status == 0) return trim(r.out);
    pb.add("--target '" + ffpa::core::printable(given) + "' is not a commit of " + source_dir.string() +
           "; pass the release commit (git -C " + shell_quote(source_dir.string()) +
           " rev-parse HEAD), or --source-dir the checkout that holds it");
    return given;
  }
  auto r = run_process({tool_program("FFPA_GIT", "git"), "-C", source_dir.string(), "rev-parse", "HEAD"});
  if (r.status != 0) {
    pb.add("cannot find the release commit (git rev-parse HEAD in " + source_dir.string() +
           " failed); pass --target <sha> or --source-dir <checkout>");
    return {};
  }
  return trim(r.out);
}

void print_problems(const Problems& pb, std::ostream& err, const char* what) {
  err << what << ": refused, nothing was created:\n";
  for (const auto& p : pb.list) err << "  - " << p << "\n";
}

// Compares the release's present assets with what this run would upload. Fills
// `identical` with names already there with the same bytes.
void check_release(AssetStore& store, const std::string& tag, const std::map<std::string, std::string>& want,
                   bool force, std::set<std::string>& identical, Problems& pb, bool& exists) {
  auto assets = store.list_assets(tag);
  exists = assets.has_value();
  if (!assets) return;
  for (const auto& name : *assets) {
    auto it = want.find(name);
    if (it == want.end()) {
      pb.add("release " + tag + " already holds " + name +
             ", which this publish does not have; the tag must hold exactly these files: delete that asset "
             "or publish a new version");
      continue;
    }
    const std::string have = store.asset_sha256(tag, name);
    if (have == it->second) identical.insert(name);
    else if (!force)
      pb.add(name + " is already published with different contents in release " + tag + " (asset sha256 " +
             have + ", this file " + it->second + "); publish a new version, or set FFPA_FORCE_UPLOAD=1");
  }
}

}  // namespace ffpa::site::detail
