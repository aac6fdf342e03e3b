// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// ffpa-release-manifest.json: what one release build produced. Written once by
// `ffpa-index release` and read through read_manifest() by everything in the engine
// (publish, publish-pure); the Python test scripts read it through
// ctest/ffpa_manifest.py. docs/release.md documents it field by field.
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
inline constexpr int kManifestSchema = 1;

struct ManifestWheel {
  std::string file;     // file name in the manifest's directory
  std::string kind;     // "cuda" or "pure"
  std::string version;  // the wheel's version (V+CHANNEL for cuda, V for pure)
  std::string tags;     // "cp312-cp312-manylinux_2_34_x86_64", "py3-none-any"
  std::uint64_t size = 0;
  std::string sha256;  // hex
  // cuda wheels: the kernel library's size on disk and inside the wheel.
  std::optional<std::uint64_t> kernel_library_size, kernel_library_compressed_size;
};

struct ManifestFile {  // another release asset (requirements-<channel>.txt)
  std::string file, sha256;
  std::uint64_t size = 0;
};

struct Manifest {
  int schema = kManifestSchema;
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
  std::vector<ManifestWheel> wheels;
  std::optional<ManifestFile> requirements;  // hash-locked install file of the cuda wheels
};

std::string manifest_to_json(const Manifest& m);  // stable key order, ends with '\n'
// Throws ffpa::core::Error naming `where` and the fix for anything that is not a
// manifest of this schema (missing or mistyped fields, an unsafe file name).
Manifest parse_manifest(std::string_view json, const std::string& where);
Manifest read_manifest(const std::filesystem::path& file);

// Whether a manifest of this profile may be published, and if not, why (names it).
std::optional<std::string> unpublishable_profile(const Manifest& m);

}  // namespace ffpa::core
