// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// Checks and helpers shared by publish (publish.cpp) and publish-pure
// (publish_pure.cpp): tag and channel guards, the problem list of a preflight, the
// release commit, and the comparison of a release's assets with what would be uploaded.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ffpa/core/pep.h"
#include "ffpa/site/publish.h"

namespace ffpa::site::detail {

namespace fs = std::filesystem;

bool force_upload();  // FFPA_FORCE_UPLOAD=1
std::string trim(std::string s);
// The tag's version; refuses a tag that is not v<canonical version> (`shape` names the form).
ffpa::core::Version parse_tag(const std::string& tag, std::string_view shape);
// cu<N>, and one of the channels of <source_dir>/cmake/release-matrix.json.
void check_channel(const std::string& channel, const fs::path& source_dir);
// The CUDA release's notes: how to install it from the channel's index.
std::string notes_for(const std::string& project, const std::string& version, const std::string& channel,
                      const std::string& site_url, const std::string& prefix);

struct Problems {
  std::vector<std::string> list;
  void add(std::string s) { list.push_back(std::move(s)); }
  void add(const std::vector<std::string>& v) { list.insert(list.end(), v.begin(), v.end()); }
};

std::string resolve_target(const std::string& given, const fs::path& source_dir, Problems& pb);
void print_problems(const Problems& pb, std::ostream& err, const char* what);
void check_release(AssetStore& store, const std::string& tag, const std::map<std::string, std::string>& want,
                   bool force, std::set<std::string>& identical, Problems& pb, bool& exists);

}  // namespace ffpa::site::detail
