// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ffpa/core/pep.h"
#include "ffpa/core/zip.h"

namespace ffpa::core {

struct PackOptions {
  std::filesystem::path tree;       // staged install tree: becomes the wheel root
  std::string name;                 // project name as in pyproject (e.g. "ffpa-attn")
  std::string version;              // any PEP 440 spelling; normalised
  std::string tag;                  // "py3-none-any", "cp312-cp312-auto", ...
  std::string metadata;             // RFC 822 header lines (Summary, Requires-Python, ...)
  std::string metadata_source = "--metadata";  // where they came from, for messages
  std::filesystem::path readme;     // optional long description (.md, .rst, else plain text)
  std::filesystem::path out_dir;
  std::optional<bool> root_is_purelib;          // default: true exactly for *-none-any
  std::optional<std::int64_t> source_date_epoch;  // default: $SOURCE_DATE_EPOCH, else refused
  DeflateOptions deflate;
  std::vector<std::string> forbidden_strings;  // besides the tree's own absolute path
  ZipLayout layout;                            // epoch is overwritten; thresholds are a test hook
};

// What pack wrote, measured while writing: nothing needs to read the wheel back.
struct PackResult {
  std::filesystem::path wheel;
  WheelFilename name;  // canonical, its platform decided
  std::string sha256;  // hex, of the whole file
  std::uint64_t size = 0;
  std::vector<WrittenEntry> members;  // in archive order
  std::string metadata;               // the METADATA file's bytes
};

// Builds one PEP 427 wheel. Throws ffpa::core::Error naming the fix on bad input;
// nothing is left in out_dir unless the whole wheel was written.
PackResult pack_wheel(const PackOptions& opts);

// Builds several wheels in one pass (ffpa-index release): each wheel's bytes are
// exactly those pack_wheel() writes for its options. Files with identical bytes
// (proven by comparing them, within and across trees) are hashed for RECORD and
// compressed once, and their compressed bytes copied into every wheel that holds
// them; all wheels are fsynced before any is renamed. Every input is checked before
// the first byte is written; on any failure no temp file is left and no wheel of
// this call is published (a failing rename, after all fsyncs, can leave earlier
// wheels renamed). All wheels must share the deflate options.
std::vector<PackResult> pack_wheels(const std::vector<PackOptions>& wheels);

}  // namespace ffpa::core
