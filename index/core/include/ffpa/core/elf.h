// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// ELF files as the loader and the manylinux policy read them (elf.cpp), and the policy
// itself: the lowest manylinux_2_Y a tree of binaries allows (manylinux.cpp).
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ffpa::core {

// What the dynamic loader and the manylinux policy care about in one ELF file.
struct ElfInfo {
  std::uint16_t machine = 0;  // e_machine; 62 is x86-64
  std::string soname;
  std::vector<std::string> needed;   // DT_NEEDED, in file order
  std::vector<std::string> rpath;    // DT_RPATH entries (split on ':')
  std::vector<std::string> runpath;  // DT_RUNPATH entries (split on ':')
  // .gnu.version_r: (library file, version name), e.g. ("libc.so.6", "GLIBC_2.17")
  std::vector<std::pair<std::string, std::string>> version_needs;
  std::vector<std::string> undefined_symbols;  // .dynsym entries with SHN_UNDEF
};

// The identification bytes every ELF file starts with: enough to tell which
// machine it runs on, without reading the rest (wheel members are checked from
// their first bytes while they are streamed).
struct ElfIdent {
  int elf_class = 0;  // 1: ELF32, 2: ELF64
  int data = 0;       // 1: little-endian, 2: big-endian
  std::uint16_t machine = 0;
};
// From at least the first 20 bytes of a file; nullopt when they are not an ELF
// header with a known class and byte order.
std::optional<ElfIdent> parse_elf_ident(std::string_view head);
// "x86-64", "AArch64", ... or "e_machine N" for machines the table lacks.
std::string elf_machine_name(std::uint16_t machine);
// "ELF64 little-endian x86-64"
std::string describe(const ElfIdent& id);

// What the ELF files of a wheel with a Linux platform tag must be, as auditwheel
// reads the tag: "manylinux_2_28_x86_64", "manylinux2014_aarch64",
// "musllinux_1_2_x86_64" and "linux_x86_64" name their architecture last.
struct PlatformElf {
  std::string arch;  // "x86_64"
  ElfIdent ident;    // class, byte order and machine it implies
};
// nullopt when the tag is not a Linux platform (then `why` says so, or names the
// unknown architecture); "any" is not a Linux platform.
std::optional<PlatformElf> elf_of_platform(std::string_view platform, std::string* why = nullptr);

bool is_elf_file(const std::filesystem::path& p);  // regular file starting with \x7fELF
// 64-bit little-endian ELF only (the one platform the release ships); throws
// ffpa::core::Error on anything else or a malformed file.
ElfInfo read_elf(const std::filesystem::path& p);

// --- the manylinux policy ----------------------------------------------------------

struct PlatformDecision {
  std::string tag;        // e.g. "manylinux_2_28_x86_64"; empty when problems is not empty
  int glibc_minor = 0;    // the Y of manylinux_2_Y
  std::vector<std::string> reasons;   // which requirement forced which Y, highest first
  std::vector<std::string> problems;  // anything that makes the tree unshippable
  std::vector<std::filesystem::path> elf_files;  // relative to the tree
};

// Reads every ELF file under `tree` and picks the lowest manylinux_2_Y_x86_64
// whose policy allows them, as auditwheel's policy does: versioned symbol
// requirements (GLIBC_, GLIBCXX_, CXXABI_, GCC_, ...) against each policy's
// symbol versions, DT_NEEDED against its library whitelist or libraries shipped
// in the tree, and the blacklisted symbols. Also enforces $ORIGIN-relative
// RUNPATH/RPATH, and refuses binaries that contain one of `forbidden_strings` (the
// build tree, the staging dir: a binary that embeds one is tied to this machine's
// layout). Never throws for policy problems; they are listed.
PlatformDecision decide_manylinux(const std::filesystem::path& tree,
                                  const std::vector<std::string>& forbidden_strings = {});

// The policies known to the table, oldest first (their Y values).
std::vector<int> known_manylinux_minors();

}  // namespace ffpa::core
