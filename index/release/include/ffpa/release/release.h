// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// `ffpa-index release --plan PLAN.json`: packaging as one engine call. CMake decides
// what (the plan: version, channel, profile, staged trees, tags, output and site
// directories; cmake/FfpaPackWheels.cmake writes it), the engine does how: every
// wheel in one pass, each wheel hashed once, SHA256SUMS, the hash-locked
// requirements file, ffpa-release-manifest.json, the build log and the local site,
// then a human summary. docs/release.md documents the plan and the manifest.
#pragma once
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ffpa/core/manifest.h"

namespace ffpa::release {

namespace fs = std::filesystem;

inline constexpr int kPlanSchema = 1;

struct PlanWheel {
  std::string component;  // the CPack component (wheel_pure, wheel_cp312)
  std::string kind;       // "pure" or "cuda"
  fs::path tree;          // staged install tree: the wheel's root
  std::string tag;        // py3-none-any, cp312-cp312-auto
  std::string version;    // V (pure) or V+CHANNEL (cuda)
  bool root_is_purelib = true;
  std::optional<std::string> kernel_library;  // cuda: member measured for the manifest
};

struct Plan {
  int schema = kPlanSchema;
  std::string name, version, profile;
  std::optional<std::string> channel, cuda_version, fatbin_compression;
  std::string source_commit;
  bool source_dirty = false;
  std::int64_t source_date_epoch = 0;
  std::map<std::string, std::optional<std::string>> toolchain;
  std::vector<std::string> archs, dtypes;
  std::vector<int> head_dims;
  fs::path metadata, readme;
  std::string readme_type;
  fs::path deflate_cache;
  std::vector<std::string> forbid_paths;
  fs::path out_dir;
  std::optional<fs::path> site_dir;
  std::vector<PlanWheel> wheels;
};

// Throws ffpa::core::Error naming the field and the fix.
Plan read_plan(const fs::path& file);

struct Outcome {
  core::Manifest manifest;
  std::vector<fs::path> wheels;  // in plan order
};

// Runs the plan. Everything that can be checked before a byte is written is (trees,
// no compiled code in a pure tree, the output and site directories); the wheels then
// become visible together, and SHA256SUMS, the requirements file, the manifest and the
// build log are written atomically after them. Progress goes to `log`.
Outcome run_release(const Plan& plan, std::ostream& log);

// The CLI: ffpa-index release --plan FILE
int main(int argc, char** argv);

}  // namespace ffpa::release
