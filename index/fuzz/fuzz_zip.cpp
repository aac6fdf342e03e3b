// Copyright (c) ffpa-attn authors. SPDX-License-Identifier: Apache-2.0
// libFuzzer target: ffpa::core::ZipReader on arbitrary bytes. An input may be
// refused (ffpa::core::Error); anything else that escapes (std::bad_alloc,
// std::length_error, ...) or any sanitizer report is a bug, because the reader is
// the first thing that touches a downloaded or hand-made wheel.
#include <zlib.h>

#include <cstdint>
#include <string>

#include "ffpa/core/error.h"
#include "ffpa/core/zip.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = ffpa::fuzz::write_input("input.zip", data, size);
  try {
    const ffpa::core::ZipReader zip(path);
    (void)zip.used_zip64();
    for (const auto& m : zip.members()) {
      const ffpa::core::ZipMember* found = zip.find(m.name);
      if (!found || found->name != m.name) ffpa::fuzz::invariant_failed("find() misses a listed member");
      try {
        const std::string bytes = zip.read(m.name);
        // read() promises the recorded size and CRC-32 of the member find() names.
        if (bytes.size() != found->size) ffpa::fuzz::invariant_failed("read() returned another size than recorded");
        uLong crc = crc32(0L, Z_NULL, 0);
        crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size()));
        if (static_cast<std::uint32_t>(crc) != found->crc32) ffpa::fuzz::invariant_failed("read() returned bytes with another CRC-32");
      } catch (const ffpa::core::Error&) {
        // A corrupt member: refused, and the next one is still read.
      }
    }
  } catch (const ffpa::core::Error&) {
  }
  return 0;
}
