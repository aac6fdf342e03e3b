// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// The release record: one struct and one checked reader for both of its files.
//   the plan  ffpa-release-plan.json, written once by CMake at configure time
//             (cmake/FfpaReleasePlan.cmake): what to build, trees relative to the
//             staging directory;
//   the manifest  ffpa-release-manifest.json, written by `ffpa-index release` into
//             the release directory: the same facts plus what was built.
// Both carry the same fields under the same names; docs/release.md documents them.
// The Python tests read the manifest through ctest/ffpa_manifest.py.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ffpa::core {

// Bumped on any change a reader must know about; readers refuse other schemas.
// 2: the plan took the manifest's field names (source_commit, tags, ...), its metadata
// inline and its trees relative to the staging directory.
inline constexpr int kReleaseSchema = 2;

enum class ReleaseForm { plan, manifest };

struct ReleaseWheel {
  std::string kind;     // "cuda" or "pure"
  std::string version;  // the wheel's version (V+CHANNEL or V.CHANNEL for cuda, V for pure)
  std::string tags;     // plan: as asked ("cp312-cp312-auto"); manifest: as written
  std::optional<std::string> kernel_library;  // cuda: the member whose sizes are reported
  std::string tree;                           // plan: the staged tree, under the staging directory
  // manifest: what was written
  std::string file;  // file name in the manifest's directory
  std::uint64_t size = 0;
  std::string sha256;  // hex
  std::optional<std::uint64_t> kernel_library_size, kernel_library_compressed_size;
};

struct ReleaseFile {  // another release asset (requirements-<channel>.txt)
  std::string file, sha256;
  std::uint64_t size = 0;
};

struct InstallLines {
  std::string pip, uv, pypi;
};

struct Release {
  int schema = kReleaseSchema;
  std::string name;     // project name, "ffpa-attn"
  std::string version;  // the release version V (the pure wheel's)
  std::string profile;  // full, pure, mini or dev: only full and pure are publishable
  std::string source_commit;
  bool source_dirty = false;
  std::int64_t source_date_epoch = 0;
  std::map<std::string, std::optional<std::string>> toolchain;  // cmake, gcc, nvcc (null: none)
  std::optional<std::string> channel;                           // cu13; null without kernels
  std::optional<std::string> cuda_version;                      // V+cu13
  std::optional<std::string> fatbin_compression;
  std::vector<std::string> archs, dtypes;
  std::vector<int> head_dims;
  std::vector<ReleaseWheel> wheels;
  // plan only
  std::string metadata;                     // the core metadata lines every wheel carries
  std::string readme;                       // the long description's file
  std::vector<std::string> forbid_paths;    // byte strings no shipped binary may contain
  std::string out_dir;                      // the release directory
  std::optional<std::string> site_dir;      // the local site, rendered from scratch
  // The CUDA wheel's install lines as cmake/install-lines.json (their one home) holds them:
  // templates with {cuda_version}, {channel}, {site} and {pypi}, and PyPI's index URL.
  InstallLines install_lines;
  // manifest only
  std::optional<ReleaseFile> requirements;  // hash-locked install file of the cuda wheels
};

std::string manifest_to_json(const Release& m);  // stable key order, ends with '\n'
// Throws ffpa::core::Error naming `where`, the field and the fix for anything that is
// not a `form` of this schema (missing or mistyped fields, an unsafe file name).
Release parse_release(std::string_view json, const std::string& where, ReleaseForm form);
Release read_release(const std::filesystem::path& file, ReleaseForm form);

// Whether a manifest of this profile may be published, and if not, why (names it).
std::optional<std::string> unpublishable_profile(const Release& m);

}  // namespace ffpa::core
