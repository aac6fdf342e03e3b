// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ffpa/core/zipwrite.h"

namespace ffpa::core {

struct PackOptions {
  std::filesystem::path tree;       // staged install tree: becomes the wheel root
  std::string name;                 // project name as in pyproject (e.g. "ffpa-attn")
  std::string version;              // any PEP 440 spelling; normalised
  std::string tag;                  // "py3-none-any", "cp312-cp312-auto", ...
  std::filesystem::path metadata;   // RFC 822 header lines (Summary, Requires-Python, ...)
  std::filesystem::path readme;     // optional long description
  std::string readme_type;          // empty: from the README's extension
  std::filesystem::path out_dir;
  std::optional<bool> root_is_purelib;          // default: true exactly for *-none-any
  std::optional<std::int64_t> source_date_epoch;  // default: $SOURCE_DATE_EPOCH, else refused
  DeflateOptions deflate;
  std::vector<std::string> forbidden_strings;  // besides the tree's own absolute path
  ZipLayout layout;                            // epoch is overwritten; thresholds are a test hook
};

struct PackResult {
  std::filesystem::path wheel;
  std::string platform;
  std::vector<std::string> platform_reasons;
  DeflateStats stats;
};

// Builds one PEP 427 wheel. Throws ffpa::core::Error naming the fix on bad input;
// nothing is left in out_dir unless the whole wheel was written.
PackResult pack_wheel(const PackOptions& opts);

// Builds several wheels in one pass (ffpa-index pack-many): each wheel's bytes are
// exactly those pack_wheel() writes for its options. Files with identical bytes
// (proven by comparing them, within and across trees) are read, hashed for RECORD
// and compressed once; every wheel is streamed into its temp file while the shared
// members are still being compressed, and all temp files are fsynced before any is
// renamed. On any failure no temp file is left and no wheel of this call is
// published (a failing rename, after all fsyncs, can leave earlier wheels renamed).
// All wheels must share the deflate options (level, jobs, cache).
std::vector<PackResult> pack_wheels(const std::vector<PackOptions>& wheels);

// The METADATA text the engine writes for these inputs (exposed for tests).
std::string render_metadata(const std::string& name, const std::string& canonical_version,
                            const std::string& metadata_file_text, const std::string& readme,
                            const std::string& readme_type);

}  // namespace ffpa::core
