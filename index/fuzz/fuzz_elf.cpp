// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: ffpa::core::read_elf on arbitrary bytes. pack, platform-tag and
// (per issue 10) verify-wheel run it on every ELF file of a tree or wheel, so a
// malformed or hostile .so must be refused with ffpa::core::Error, never crash,
// hang or allocate what its headers claim.
#include <cstdint>

#include "ffpa/core/elf.h"
#include "ffpa/core/error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ffpa::fuzz::write_input("input.so", data, size);
  const bool magic = size >= 4 && data[0] == 0x7f && data[1] == 'E' && data[2] == 'L' && data[3] == 'F';
  if (ffpa::core::is_elf_file(path) != magic) ffpa::fuzz::invariant_failed("is_elf_file() disagrees with the magic bytes");
  try {
    const ffpa::core::ElfInfo info = ffpa::core::read_elf(path);
    if (!magic) ffpa::fuzz::invariant_failed("read_elf() accepted a file without the ELF magic");
    (void)info;
  } catch (const ffpa::core::Error&) {
  }
  return 0;
}
