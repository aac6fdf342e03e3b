// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
#pragma once
#include <filesystem>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "ffpa/core/elf.h"

namespace ffpa::core {

struct PlatformDecision {
  std::string tag;        // e.g. "manylinux_2_28_x86_64"; empty when problems is not empty
  int glibc_minor = 0;    // the Y of manylinux_2_Y
  std::vector<std::string> reasons;   // which requirement forced which Y, highest first
  std::vector<std::string> problems;  // anything that makes the tree unshippable
  std::vector<std::filesystem::path> elf_files;  // relative to the tree
};

struct PlatformOptions {
  // Byte strings no shipped binary may contain (the build tree, the staging dir):
  // a binary that embeds one is tied to this machine's layout.
  std::vector<std::string> forbidden_strings;
};

// Reads every ELF file under `tree` and picks the lowest manylinux_2_Y_x86_64
// whose policy allows them, as auditwheel's policy does: versioned symbol
// requirements (GLIBC_, GLIBCXX_, CXXABI_, GCC_, ...) against each policy's
// symbol versions, DT_NEEDED against its library whitelist or libraries shipped
// in the tree, and the blacklisted symbols. Also enforces $ORIGIN-relative
// RUNPATH/RPATH. Never throws for policy problems; they are listed.
PlatformDecision decide_manylinux(const std::filesystem::path& tree, const PlatformOptions& opts = {});

// The policies known to the table, oldest first (their Y values).
std::vector<int> known_manylinux_minors();

}  // namespace ffpa::core
