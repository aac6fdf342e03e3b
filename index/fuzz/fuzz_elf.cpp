// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the ELF reader on arbitrary bytes. pack, platform-tag and
// verify-wheel run it on every ELF file of a tree or wheel, so a malformed or
// hostile .so must be refused with ffpa::core::Error, never crash, hang or
// allocate what its headers claim.
#include <cstdint>
#include <optional>
#include <string_view>

#include "ffpa/core/elf.h"
#include "ffpa/core/error.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::optional<ffpa::core::ElfIdent> ident = ffpa::core::parse_elf_ident(bytes);
  if (ident) (void)ffpa::core::describe(*ident);

  const auto path = ffpa::fuzz::write_input("input.so", data, size);
  const bool magic = bytes.substr(0, 4) == std::string_view("\x7f" "ELF", 4);
  if (ffpa::core::is_elf_file(path) != magic) ffpa::fuzz::invariant_failed("is_elf_file() disagrees with the magic bytes");
  try {
    const ffpa::core::ElfInfo info = ffpa::core::read_elf(path);
    // read_elf accepts 64-bit little-endian files only; the streamed check of wheel
    // members (parse_elf_ident) must see the same machine in them.
    if (!ident || ident->elf_class != 2 || ident->data != 1)
      ffpa::fuzz::invariant_failed("read_elf() accepted a file parse_elf_ident() does not call ELF64 little-endian");
    if (ident->machine != info.machine) ffpa::fuzz::invariant_failed("read_elf() and parse_elf_ident() disagree on e_machine");
  } catch (const ffpa::core::Error&) {
  }
  return 0;
}
